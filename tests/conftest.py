import os

import pytest
from hypothesis import settings

from tests.toys import SOLO_TOML

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def gpu_file(tmp_path_factory):
    """A GPU file holding the one-tile toy GPU ``solo2`` (:data:`tests.toys.SOLO_TOML`), per module."""
    path = tmp_path_factory.mktemp("gpus") / "solo.toml"
    path.write_text(SOLO_TOML)
    return str(path)
