"""Results kept on disk across runs (:mod:`stability.kept`): computed once per inputs, recomputed
when an entry is unreadable or misshapen, computed around an unwritable cache home, and exact."""

import numpy as np

from stability.kept import cache_home, kept


def test_computed_once_per_inputs_and_read_back_exactly(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def compute(x):
        calls.append(x)
        return {"third": x / 3, "none": float("nan"), "big": float("inf")}

    first = kept("toy", (np.arange(3), 1.0), lambda: compute(1.0))
    again = kept("toy", (np.arange(3), 1.0), lambda: compute(1.0))
    assert calls == [1.0] and again["third"] == 1.0 / 3 and again["big"] == float("inf")
    assert np.isnan(again["none"]) and again.keys() == first.keys()
    kept("toy", (np.arange(4), 1.0), lambda: compute(1.0))  # other inputs: computed
    assert calls == [1.0, 1.0] and len(list((cache_home() / "toy").glob("*.json"))) == 2


def test_a_bad_entry_is_computed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    kept("toy", (2,), lambda: calls.append(1) or {"v": 2})
    (entry,) = (cache_home() / "toy").glob("*.json")
    for bad in ("{not json", '{"value": 3}', "[1, 2]", '{"v": 2}'):
        entry.write_text(bad)
        assert kept("toy", (2,), lambda: calls.append(1) or {"v": 2}) == {"v": 2}
    assert len(calls) == 5


def test_an_unwritable_cache_home_is_computed_around(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    assert kept("toy", (1,), lambda: {"v": 1}) == {"v": 1}
