"""The suite's own scheduling (tests/conftest.py): the files it starts first exist."""

from pathlib import Path

from tests.conftest import HEAVIEST_FILES


def test_every_heaviest_file_is_a_test_file_of_the_suite():
    here = Path(__file__).parent
    missing = [name for name in HEAVIEST_FILES if not (here / name).is_file()]
    assert HEAVIEST_FILES and missing == []
    assert len(set(HEAVIEST_FILES)) == len(HEAVIEST_FILES)
