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
    gaps = np.concatenate([np.diff(v) for v in _emission_times(res).values()])
    assert gaps.size == res.requests["L_D"].sum()
    hist = res.runs[0].tbt_hist[0]
    for q in (0.5, 0.9, 0.99):
        assert histogram_quantile(hist, q) == pytest.approx(np.quantile(gaps, q), rel=0.025)


def _emission_times(res) -> dict[int, np.ndarray]:
    """Per request, the times its tokens were emitted, read from the batch log: the end of the batch
    holding its last prefill chunk (the first token) or one of its decode iterations."""
    log = res.batch_log()
    L_P = res.requests["L_P"]
    emits: dict[int, list[float]] = {}
    for end, pre, dec in zip(log["start"] + log["duration"], log["prefill_chunks"], log["decode_positions"],
                             strict=True):
        for item in pre.split():
            j, i, c = map(int, item.split(":"))
            if i + c - 1 == L_P[j]:
                emits.setdefault(j, []).append(end)
        for item in dec.split():
            emits.setdefault(int(item.split(":")[0]), []).append(end)
    return {j: np.sort(v) for j, v in emits.items()}


@pytest.mark.parametrize(("scheduler", "r", "options"), [("rad", 1, (("n", 50),)), ("sarathi", 2, ())])
def test_tbt_record_after_a_warm_up_holds_exactly_the_later_tokens_gaps(scheduler, r, options):
    from dataclasses import replace

    slo = {"a": 0.009, "b": 0.03}
    sc = Scenario(scheduler=scheduler, r=r, n_requests=300, load=0.9, detail=True, log=True, pad=True,
                  workload="uniform:1-600,1-80", options=options, warmup=0.3,
                  classes=tuple((name, 0.5, v) for name, v in slo.items()))
    res = simulate(sc)
    rq = res.requests
    assert np.nansum(rq["preemptions"]) == 0  # every first token ends the prompt's prefill
    arrival = rq["arrival"]
    t0 = arrival[0] + 0.3 * (arrival[-1] - arrival[0])
    assert res.tbt_from == pytest.approx(t0, rel=1e-12)
    emitted = _emission_times(res)
    gaps = {j: np.diff(t) for j, t in emitted.items()}
    later = {j: gaps[j][t[1:] >= t0] for j, t in emitted.items()}  # a gap counts when its token is emitted
    every, kept = np.concatenate(list(gaps.values())), np.concatenate(list(later.values()))
    assert every.size == rq["L_D"].sum() and 0 < kept.size < every.size
    hist = sum(run.tbt_hist.sum(axis=0) for run in res.runs)
    count, total = (sum(run.tbt_stat[:, k].sum() for run in res.runs) for k in (0, 1))
    assert count == kept.size and hist.sum() == kept.size
    assert total == pytest.approx(kept.sum(), rel=1e-9)
    assert max(run.tbt_stat[:, 2].max() for run in res.runs) == pytest.approx(kept.max(), rel=1e-12)
    for q in (0.5, 0.9, 0.99):
        assert histogram_quantile(hist, q) == pytest.approx(np.quantile(kept, q), rel=0.025)
    limit = np.array(list(slo.values()))[rq["cls"].astype(int)]
    above = np.array([np.sum(later.get(j, np.zeros(0)) > limit[j]) for j in range(arrival.size)])
    assert np.array_equal(rq["tbt_viol"], above) and 0 < above.sum()
    for k, c in enumerate(res.class_summary()):  # attainment: later gaps; requests arriving after t0
        mine = rq["cls"] == k
        ids = np.flatnonzero(mine)
        mine_gaps = np.concatenate([later.get(j, np.zeros(0)) for j in ids])
        assert c["slo"]["gaps_within"] == pytest.approx(np.mean(mine_gaps <= slo[c["name"]]), rel=1e-12)
        after = ids[arrival[ids] >= t0]
        assert c["slo"]["requests_max_within"] == pytest.approx(
            np.mean([np.all(gaps[j] <= slo[c["name"]]) for j in after]), rel=1e-12)
    whole = simulate(replace(sc, warmup=0.0))  # the same run, every token recorded
    wr = whole.requests
    assert whole.tbt_from == 0.0 and np.array_equal(wr["t_finish"], rq["t_finish"])
    assert np.array_equal(wr["tbt_max"], rq["tbt_max"])  # a request's longest gap: every gap
    longest = [gaps[j].max() if gaps[j].size else 0.0 for j in range(arrival.size)]
    assert np.allclose(wr["tbt_max"], longest, rtol=1e-9, atol=0)
    assert sum(run.tbt_stat[:, 0].sum() for run in whole.runs) == every.size
    assert np.nansum(wr["tbt_viol"]) > above.sum()


@pytest.mark.parametrize("warmup", [-0.1, 1.0, True, "0.1"])
def test_a_warm_up_outside_zero_to_one_is_refused(warmup):
    from theory.errors import FieldError

    with pytest.raises(FieldError, match=r"warmup: expected a fraction of the arrival window in \[0, 1\)"):
        simulate(Scenario(n_requests=50, warmup=warmup))
