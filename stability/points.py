"""The points of ``llmq region``: one simulation, the empirical n of Theorem 2, RAD's saturated
cycle DTMC. Each takes a task dict of :mod:`stability.runner` and returns a JSON-able dict.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the uniformly random planner of the ``sim`` points),
Appendix C (the ``n_min`` and ``dtmc`` points, :mod:`stability.dtmc`).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from theory.builder import CostSpec, cost_model

G_MIN = 0.002  # a run is unstable when its accumulating fraction g exceeds this with confidence
N_FALLBACK = 2000  # RAD's n when the empirical search finds none up to its cap
N_MAX = 1 << 14  # the cap of that search, and the largest n a sweep accepts


@cache
def workload(spec: str, pad_to: int | None):
    """A workload, padded to multiples of ``pad_to`` if given (Assumption 3), cached per process."""
    from theory.workload import get_workload

    w = get_workload(spec)
    return w.padded(pad_to) if pad_to else w


def run_sim(task: dict) -> dict:
    """One simulation of the task's scenario: its stability verdict (growth of the work in system
    with its interval), completions, throughput and the saturated throughput."""
    from stability.sim.simulate import Scenario, simulate

    sc = Scenario(gpu=task["tileset"], model=task["model"], mode=task["mode"],
                  workload=task["workload"], pad=task["variant"] == "pad", gpu_file=task["gpu_file"],
                  model_file=task.get("model_file"),
                  scheduler=task["scheduler"], options=tuple(map(tuple, task["options"])), r=task["r"],
                  rate=task["rate"], load=None, n_requests=task["n_requests"], seed=task["seed"])
    res = simulate(sc)
    v = res.verdict(g_min=G_MIN)
    rq = res.requests
    done = np.isfinite(rq["t_finish"])
    horizon = float(np.nanmax(rq["t_finish"]) - rq["arrival"].min()) if done.any() else float("nan")
    # requests a KV-memory model refused at arrival (where the simulator reports them) never wait
    admitted = ~(np.asarray(rq["reject"]) > 0) if "reject" in rq else np.ones(done.size, dtype=bool)
    return {"verdict": v.verdict, "growth": v.growth, "g_low": v.ci_low, "g_high": v.ci_high,
            "completed": int(done.sum()), "throughput": float(done.sum() / horizon),
            **saturated_throughput(rq["arrival"][admitted], rq["t_finish"][admitted],
                                   rq["node"][admitted], task["r"])}


def saturated_throughput(arrival, finish, node, r: int, warmup: float = 0.2) -> dict:
    """Completions per second between the first and the last completion that fall from the
    ``warmup`` arrival quantile to the last arrival (``(k - 1) / span``, exact for evenly spaced
    completions), and the fewest requests pending at any node right after a completion in that
    window (> 0: no node ever emptied, so the window measured the capacity under backlog).

    Requests pending at t are those with arrival <= t < finish (unfinished ones have a NaN finish);
    right after a completion at t, that is the arrivals up to t less the completions up to t,
    counted by binary search in the node's sorted arrival and finish times.
    """
    arrival = np.asarray(arrival, dtype=float)
    finish = np.asarray(finish, dtype=float)
    t0, t1 = float(arrival[int(warmup * (arrival.size - 1))]), float(arrival[-1])
    inside = (finish > t0) & (finish <= t1)
    done = finish[inside]
    rate = (done.size - 1) / float(done.max() - done.min()) if done.size > 1 else float("nan")
    fewest = None
    for g in range(r):
        mine = node == g
        ends = np.sort(finish[mine], kind="stable")  # NaN (never finished) sorts last
        times = ends[np.searchsorted(ends, t0, side="right"):np.searchsorted(ends, t1, side="right")]
        if times.size == 0:
            return {"sat_throughput": rate, "min_pending": 0}
        starts = np.sort(arrival[mine], kind="stable")
        pending = np.searchsorted(starts, times, side="right") - np.searchsorted(ends, times, side="right")
        fewest = int(pending.min()) if fewest is None else min(fewest, int(pending.min()))
    return {"sat_throughput": rate, "min_pending": fewest}


def _dtmc_inputs(task: dict):
    cm = cost_model(CostSpec(task["tileset"], task["model"], task["mode"], gpu_file=task["gpu_file"],
                             model_file=task.get("model_file")))
    return cm, workload(task["workload"], cm.t_lcm if task["variant"] == "pad" else None)


def n_min(cm, w, epsilon: float, samples: int, seed: int, n_max: int) -> dict:
    """:func:`stability.dtmc.empirical_n_min` as a dict (``n_min``, ``n_threshold``, ``drift``),
    kept on disk across runs (:func:`stability.kept.kept`), so that each command that resolves
    RAD's ``n = auto`` searches it once."""
    from stability.kept import kept

    def search() -> dict:
        from stability.dtmc import empirical_n_min

        res = empirical_n_min(cm, w, epsilon, samples, seed, n_max=n_max)
        return {"n_min": res.n_min, "n_threshold": res.n_threshold, "drift": list(res.drift)}

    return kept("n_min", (cm, w.L_P, w.L_D, w.p, float(epsilon), int(samples), int(seed), int(n_max)),
                search)


def auto_rad_n(cm, w, epsilon: float, seed: int, samples: int = 100) -> int:
    """RAD's n when it is ``"auto"`` (:data:`theory.defaults.RAD_N`): the empirical smallest n with
    negative executed drift at lambda* (1 - epsilon) on ``w`` padded to t*_lcm, or ``N_FALLBACK``
    if none up to ``N_MAX`` (:func:`stability.dtmc.empirical_n_min`, cached by :func:`n_min`)."""
    return n_min(cm, w.padded(cm.t_lcm), epsilon, samples, seed, N_MAX)["n_min"] or N_FALLBACK


def run_n_min(task: dict) -> dict:
    """The smallest n whose executed RAD cycle has negative drift at the task's epsilon, beside
    Theorem 2's n (:func:`stability.dtmc.empirical_n_min`, cached by :func:`n_min`)."""
    cm, w = _dtmc_inputs(task)
    return n_min(cm, w, task["epsilon"], task["samples"], task["seed"], task["n_max"])


def run_dtmc(task: dict) -> dict:
    """RAD's saturated cycle throughput per node (E[K] / E[T] with its interval) and the fraction of
    cycles that end before n requests started (Appendix C)."""
    from stability.dtmc import CycleSampler, ratio_ci

    cm, w = _dtmc_inputs(task)
    sat = CycleSampler(cm, w, task["n"]).saturated(task["samples"], task["seed"])
    per_node = ratio_ci(sat.K, sat.T, 0.99)
    return {"per_node": list(per_node), "early_end_fraction": float(np.mean(sat.K < task["n"]))}
