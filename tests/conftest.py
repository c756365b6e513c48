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


# The test files that take longest, heaviest first (the sums of `pytest --durations=80` per file on
# two cores). pytest-xdist's `--dist loadfile` hands whole files to the workers in collection order
# (pyproject's addopts turn off its reordering by test count, which put these few-test files last,
# where one core ran them while the other idled); starting them first keeps both cores busy to the
# end. A file not listed keeps its place after them. test_paper_checks.py comes after several others:
# it reads Section 7's study, which the two-sided file runs in its first minutes and keeps in the
# user cache (paper_checks.section7_results.study_rows); started together, both would run it.
HEAVIEST_FILES = (
    "test_paper_checks_two_sided.py", "test_validate.py", "test_dask.py", "test_runner.py",
    "test_schedulers_vs_reference.py", "test_cost.py", "test_paper_checks.py", "test_slai.py",
    "test_vllm_v1.py",
    "test_bad_inputs.py", "test_howto.py", "test_cli.py", "test_plausibility.py", "test_lockstep.py",
    "test_capacity.py", "test_check_runner.py", "test_dtmc.py", "test_region.py", "test_stack_law_reach.py",
)


def pytest_collection_modifyitems(config, items):
    """Run :data:`HEAVIEST_FILES` first, each file's tests in their own order (a stable sort)."""
    rank = {name: k for k, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
