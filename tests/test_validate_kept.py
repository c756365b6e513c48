"""A validation report kept across processes (theory.validation.kept): read back only for the same
code, profiles and settings; computed again for any change or an unreadable file."""

import numpy as np
import pytest

from theory.profiles import Profile, load_profile
from theory.validation import kept
from theory.validation.report import to_json
from theory.validation.results import Settings


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "llmq" / "validate"


def _profile():
    rows = load_profile("llmq_h100").rows
    keep = (rows["operation"] == "prefill_batch_rank") & (rows["tp"] == 8)
    return {"llmq_h100": Profile("test", rows[keep])}


def _refuse(*_args, **_kwargs):
    raise AssertionError("validate ran although the report was kept")


def test_the_second_call_reads_the_report_back_and_it_equals_a_fresh_one(cache, monkeypatch):
    profiles, settings = _profile(), Settings(screen=False)
    first = kept.kept_validate(profiles, settings)
    assert [p.name for p in cache.iterdir()] == [kept.kept_path(profiles, settings).name]
    fresh = kept.validate(profiles, settings)
    monkeypatch.setattr(kept, "validate", _refuse)
    again = kept.kept_validate(profiles, settings)
    assert to_json(again, [], None) == to_json(first, [], None) == to_json(fresh, [], None)


def test_any_change_of_rows_or_settings_names_another_file(cache):
    profiles, settings = _profile(), Settings(screen=False)
    path = kept.kept_path(profiles, settings)
    assert kept.kept_path(profiles, Settings(screen=False, seed=1)) != path
    rows = profiles["llmq_h100"].rows.copy()
    rows["seconds"][0] *= 1.0 + 1e-12
    assert kept.kept_path({"llmq_h100": Profile("test", rows)}, settings) != path
    assert kept.kept_path({"other": profiles["llmq_h100"]}, settings) != path


def test_an_unreadable_kept_file_is_computed_again(cache):
    profiles, settings = _profile(), Settings(screen=False)
    path = kept.kept_path(profiles, settings)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a pickle")
    report = kept.kept_validate(profiles, settings)
    assert to_json(report, [], None) == to_json(kept.validate(profiles, settings), [], None)
    assert path.read_bytes() != b"not a pickle"


def test_rows_of_python_objects_are_validated_but_never_kept(cache):
    rows = _profile()["llmq_h100"].rows
    dtype = [(n, object if n == "setup" else rows.dtype[n]) for n in rows.dtype.names]
    objects = np.array([tuple(r) for r in rows.tolist()], dtype=dtype)
    kept.kept_validate({"llmq_h100": Profile("test", objects)}, Settings(screen=False))
    assert not cache.exists()
