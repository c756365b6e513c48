"""The points of ``llmq region``: the saturated throughput and its backlog check against a brute
count of pending requests."""

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stability.points import saturated_throughput


def brute(arrival, finish, node, r, warmup=0.2):
    """The same figures by counting, after every completion in the window, each node's requests
    with arrival <= t < finish (an unfinished one, NaN, pends for ever)."""
    t0, t1 = arrival[int(warmup * (arrival.size - 1))], arrival[-1]
    times = sorted(f for f in finish if t0 < f <= t1)
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else float("nan")
    fewest = []
    for g in range(r):
        mine = [(a, f) for a, f, k in zip(arrival, finish, node, strict=True) if k == g]
        ends = [f for _, f in mine if t0 < f <= t1]
        if not ends:
            fewest.append(0)
            continue
        fewest.append(min(sum(a <= t and not f <= t for a, f in mine) for t in ends))
    return rate, min(fewest)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), r=st.integers(1, 3),
       ties=st.booleans())
def test_saturated_throughput_matches_a_brute_count(seed, n, r, ties):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0, n))
    finish = arrival + rng.exponential(rng.uniform(0.1, 5.0), n)
    if ties:  # completions and arrivals at the same instants
        arrival, finish = np.round(arrival), np.ceil(finish)
    finish[rng.random(n) < 0.2] = np.nan
    node = rng.integers(0, r, n)
    t0, t1 = arrival[int(0.2 * (n - 1))], arrival[-1]
    window = {f for f in finish if t0 < f <= t1}
    assume(len(window) != 1 or len([f for f in finish if t0 < f <= t1]) == 1)  # no zero span
    rate, fewest = brute(arrival, finish, node, r)
    got = saturated_throughput(arrival, finish, node, r)
    assert got["min_pending"] == fewest
    assert got["sat_throughput"] == rate or (np.isnan(rate) and np.isnan(got["sat_throughput"]))


def test_n_min_is_searched_once(tmp_path, monkeypatch):
    """RAD's n (auto) is kept across runs: the second call reads what the first search found."""
    import stability.dtmc
    from stability.points import auto_rad_n, n_min
    from tests.toys import solo_cost_model
    from theory.workload import get_workload

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cm, w = solo_cost_model(), get_workload("uniform:1-64,1-40")
    first = n_min(cm, w, 0.1, 30, 3, 1 << 8)
    fresh = stability.dtmc.empirical_n_min(cm, w, 0.1, 30, 3, n_max=1 << 8)
    assert first == {"n_min": fresh.n_min, "n_threshold": fresh.n_threshold, "drift": list(fresh.drift)}
    assert len(list((tmp_path / "llmq" / "n_min").glob("*.json"))) == 1
    calls = []
    search = stability.dtmc.empirical_n_min
    monkeypatch.setattr(stability.dtmc, "empirical_n_min", lambda *a, **k: calls.append(1) or search(*a, **k))
    assert n_min(cm, w, 0.1, 30, 3, 1 << 8) == first and calls == []
    assert n_min(cm, w, 0.1, 30, 4, 1 << 8) is not None and len(calls) == 1  # another seed: searched
    assert auto_rad_n(cm, w, 0.1, 3, samples=30) >= 1
