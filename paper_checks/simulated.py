"""Simulation helpers for the checks that need executed schedules (the batch simulator).

Every scenario here is the paper's setting where it matters (Mistral-7B, the Table-1 workload with
prompts padded to t*_lcm so Assumption 3 holds) on the A100 preset, with seeds fixed, so a
verdict is reproducible; ``fast`` shrinks the runs and the coverage says so.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from paper_checks.margins import least_margin, ratio_margin
from stability.sim.gpu import run_gpu
from stability.sim.metrics import DriftTest
from stability.sim.registry import get_scheduler
from stability.sim.simulate import Scenario, SimResult, cost_model_of, simulate, workload_of

GPU = "a100"
RAD_N = 2000  # RAD's n in the stability runs: Theorem 2's threshold (~10^5) is not needed in practice


def run(scheduler: str, load: float, n_requests: int, seed: int = 0, r: int = 1,
        workload: str = "table1", **options) -> SimResult:
    """Simulate ``scheduler`` on ``r`` GPUs at ``load`` x lambda* (paper's model, padded workload)."""
    sc = Scenario(gpu=GPU, pad=True, scheduler=scheduler, load=load, n_requests=n_requests,
                  seed=seed, r=r, workload=workload, options=tuple(sorted(options.items())))
    return simulate(sc)


STABLE_BLIND = ("work accumulating slower than the stability test's tolerance (a fraction g_tol of the "
                "offered work per unit time) over the simulated horizon passes as stable: a longer run "
                "sees it")
UNSTABLE_BLIND = ("how far the capacity is below the load: a capacity off by less than this factor still "
                  "accumulates work")


def verdict_margin(v: dict, test: DriftTest | None = None) -> float:
    """The margin of a stable or unstable verdict (``Verdict.as_dict()`` of
    :func:`stability.sim.metrics.stability_verdict`).

    Unstable: above its capacity a server accumulates the fraction ``1 - capacity / lambda`` of the
    offered work, so the margin is the least relative growth of the capacity that brings the
    increments interval's lower end down onto ``g_min``. Stable: below capacity the accumulating
    fraction does not depend on the capacity; the margin is the least relative change of the
    estimated fraction, with its intervals, that changes the verdict (the levels interval's upper
    end onto ``g_tol``, or a positive lower end of either interval past ``g_min``; an end of the
    other sign never reaches a positive threshold: :func:`paper_checks.margins.ratio_margin`).
    """
    test = test or DriftTest()
    if v["verdict"] == "unstable":
        return ratio_margin(1 - v["ci_increments"][0], 1 - test.g_min)
    lo, hi = v["ci_levels"]
    return least_margin([ratio_margin(hi, test.g_tol), ratio_margin(lo, test.g_min),
                         ratio_margin(v["ci_increments"][0], test.g_min)])


def default_setting(scheduler: str) -> dict:
    """Options (and r) giving each scheduler its throughput-oriented, smallest setting: RAD and
    Algorithm 2 with a large n; DistServe on one prefill and one decode GPU."""
    if scheduler in ("rad", "alg2"):
        return {"n": RAD_N}
    if scheduler == "distserve":
        return {"r": 2}
    return {}


def burst_cycles(n: int, cycles: int, seed: int) -> dict:
    """RAD cycles that all start with X[c] >= n: a burst of (cycles + 1) n requests at time 0.

    With at least n requests pending, a cycle ignores arrivals (Appendix C.3), so these cycle times
    are draws of T_cycle given X[c] >= n. Returns the engine's cycle record (start, end, x,
    started, done) without the last, shorter cycles.
    """
    sc = Scenario(gpu=GPU, pad=True)
    cm = cost_model_of(sc)
    w = workload_of(sc, cm)
    m = (cycles + 1) * n
    L_P, L_D = w.sample(m, np.random.default_rng(seed))
    rad = get_scheduler("rad")
    res = run_gpu(cm, rad, rad.make_params(cm, n=n), np.zeros(m), L_P, L_D)
    c = res.cycles
    keep = c["x"] >= n
    return {k: v[keep] for k, v in c.items()}, cm, w


def markov_order_test(x: np.ndarray, bins: int = 3, min_stratum: int = 40) -> dict:
    """Anderson-Goodman likelihood-ratio test of first- against second-order Markov dependence.

    For every exact value j of X[c] with at least ``min_stratum`` transitions, tabulate
    X[c-1] (in ``bins`` quantile bins) against X[c+1] (same bins) and sum the G^2 statistics of
    independence over the strata; under the Markov property G^2 is chi-square with
    sum_j (rows_j - 1)(cols_j - 1) degrees of freedom.
    """
    x = np.asarray(x)
    prev, cur, nxt = x[:-2], x[1:-1], x[2:]
    edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1]))
    bp, bn = np.searchsorted(edges, prev, side="right"), np.searchsorted(edges, nxt, side="right")
    g2, dof, strata, used = 0.0, 0, 0, 0
    for j in np.unique(cur):
        sel = cur == j
        if sel.sum() < min_stratum:
            continue
        table = np.zeros((bins, bins))
        np.add.at(table, (bp[sel], bn[sel]), 1)
        table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
        if min(table.shape) < 2:
            continue
        expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
        nz = table > 0
        g2 += 2 * float(np.sum(table[nz] * np.log(table[nz] / expected[nz])))
        dof += (table.shape[0] - 1) * (table.shape[1] - 1)
        strata += 1
        used += int(sel.sum())
    p = float(stats.chi2.sf(g2, dof)) if dof else float("nan")
    return {"G2": g2, "dof": dof, "p_value": p, "strata": strata, "triples": used}


def empty_times(res: SimResult) -> np.ndarray:
    """Times at which a node's number in system drops to 0 (a finish leaving it empty)."""
    rq = res.requests
    a, f = np.sort(rq["arrival"]), np.sort(rq["t_finish"])
    in_system_after = (np.searchsorted(a, f, side="right") - np.arange(1, f.size + 1))
    return f[in_system_after == 0]


def small_tile_cost_model():
    """An A100 with one small tile, 16 x 4 x 16 (t*_col = 4, t*_lcm = 16): cycles of a few requests,
    so long runs have many cycles and a wide range of X[c]. The lemmas hold for any tile set."""
    from dataclasses import replace

    from theory.cost import build_cost_model
    from theory.hardware import Tile, gemm_tile_rate, get_gpu
    from theory.models import get_model

    base = get_gpu(GPU)
    tile = Tile(16, 4, 16)
    mu = gemm_tile_rate(tile, base.peak_flops, base.bandwidth, base.s, 0.75, 2.0)
    gpu = replace(base, key="a100-16x4x16", tiles=(tile,), mu=(mu,), t_star=None)
    return build_cost_model(gpu, get_model("mistral-7b"))


def small_tile_cycles(load: float, n: int, n_requests: int, seed: int) -> tuple[dict, object]:
    """RAD cycles on :func:`small_tile_cost_model` with Poisson arrivals at ``load`` x lambda*."""
    from theory.bounds import lambda_star
    from theory.workload import get_workload

    cm = small_tile_cost_model()
    w = get_workload("uniform:1-64,1-24").padded(cm.t_lcm)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / (load * lambda_star(cm, w)), n_requests))
    L_P, L_D = w.sample(n_requests, rng)
    rad = get_scheduler("rad")
    res = run_gpu(cm, rad, rad.make_params(cm, n=n), arrival, L_P, L_D)
    return res.cycles, res
