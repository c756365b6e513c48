"""Metrics: the work-in-system path, histogram quantiles, and the stability verdict's calibration.

The verdict is tested on a queue whose drift is known exactly, built without the simulator: one
FCFS server with i.i.d. exponential service (Lindley's recursion). Above capacity the server is
always busy, so the work in system grows at lambda E[S] - 1 and the accumulating fraction of
offered work is g = 1 - 1/rho; below capacity it is 0.
"""

import numpy as np
import pytest
from scipy import stats

from stability.sim.metrics import histogram_quantile, in_system, stability_verdict
from stability.sim.simulate import Scenario, simulate


def fcfs_queue(rho: float, n: int, seed: int):
    rng = np.random.default_rng(seed)
    service = rng.exponential(1.0, n)
    arrival = np.cumsum(rng.exponential(1.0 / rho, n))
    # Lindley, f_k = max(f_{k-1}, a_k) + s_k, unrolled: f_k = S_k + max_{j<=k} (a_j - S_{j-1})
    S = np.cumsum(service)
    finish = S + np.maximum.accumulate(arrival - (S - service))
    return arrival, finish, service


def test_lindley_unrolled_matches_the_recursion():
    arrival, finish, service = fcfs_queue(1.1, 500, 3)
    free, expected = 0.0, []
    for a, s in zip(arrival, service, strict=True):
        free = max(free, a) + s
        expected.append(free)
    assert np.allclose(finish, expected, rtol=1e-12)


def test_in_system_matches_brute_force():
    rng = np.random.default_rng(0)
    a = np.sort(rng.uniform(0, 10, 50))
    f = a + rng.exponential(2, 50)
    f[::7] = np.nan  # never finished
    w = rng.uniform(1, 3, 50)
    t = rng.uniform(0, 15, 200)
    brute = [(w * ((a <= x) & ~(np.nan_to_num(f, nan=np.inf) <= x))).sum() for x in t]
    assert np.allclose(in_system(a, f, t, w), brute)


def test_unstable_verdicts_cover_the_true_drift():
    rho, truth, seeds = 1.25, 1 - 1 / 1.25, 24
    covered = 0
    for seed in range(seeds):
        arrival, finish, work = fcfs_queue(rho, 20000, seed)
        v = stability_verdict(arrival, finish, work)
        assert v.verdict == "unstable"
        covered += v.ci_low <= truth <= v.ci_high
    # 99% intervals: P(fewer than 20 of 24 covers) < 1e-4 if they are calibrated
    assert covered >= 20, covered
    assert stats.binomtest(covered, seeds, 0.99).pvalue > 1e-4


def test_stable_verdicts_below_capacity():
    for seed in range(12):
        arrival, finish, work = fcfs_queue(0.8, 20000, seed)
        v = stability_verdict(arrival, finish, work)
        assert v.verdict == "stable", v.describe()
        assert v.ci_low <= 0 <= v.ci_high


def test_histogram_quantiles_are_within_one_bin_of_the_exact_gaps():
    res = simulate(Scenario(n_requests=300, load=0.8, detail=True, log=True, pad=True,
                            workload="uniform:1-600,1-80", options=(("n", 50),)))
    log = res.batch_log()
    # every token emission from the log: a prefill chunk ending a prompt, or a decode
    emits: dict[int, list[float]] = {}
    ends = log["start"] + log["duration"]
    L_P = res.requests["L_P"]
    for end, pre, dec in zip(ends, log["prefill_chunks"], log["decode_positions"], strict=True):
        for item in pre.split():
            j, i, c = map(int, item.split(":"))
            if i + c - 1 == L_P[j]:
                emits.setdefault(j, []).append(end)
        for item in dec.split():
            emits.setdefault(int(item.split(":")[0]), []).append(end)
    gaps = np.concatenate([np.diff(sorted(v)) for v in emits.values()])
    assert gaps.size == res.requests["L_D"].sum()
    hist = res.runs[0].tbt_hist[0]
    for q in (0.5, 0.9, 0.99):
        assert histogram_quantile(hist, q) == pytest.approx(np.quantile(gaps, q), rel=0.025)
