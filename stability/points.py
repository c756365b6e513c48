"""The points of ``llmq region``: one simulation (:class:`SimPoint`), the empirical n of Theorem 2
(:class:`NMinPoint`), RAD's saturated cycle DTMC (:class:`DtmcPoint`). Each is a task of
:mod:`stability.runner`: a frozen dataclass whose ``run()`` returns a JSON-able dict and whose
``identity()`` is what its cache key and seed are computed from.

An identity spells a point in the sweep's own terms (the GPU as ``tileset``, the padding as
``variant``, the names of ``region.csv``); a scenario field the sweep leaves at its default is left
out, any other is added under ``scenario``, so that two different runs never share a key.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the uniformly random planner of the ``sim`` points),
Appendix C (the ``n_min`` and ``dtmc`` points, :mod:`stability.dtmc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from stability.runner import derive_seed
from theory.builder import CostSpec, cost_model
from theory.errors import FieldError

if TYPE_CHECKING:  # the simulator is imported where a point runs, not where one is described
    from stability.sim.simulate import Scenario

G_MIN = 0.002  # a run is unstable when its accumulating fraction g exceeds this with confidence
N_FALLBACK = 2000  # RAD's n when the empirical search finds none up to its cap
N_MAX = 1 << 14  # the cap of that search, and the largest n a sweep accepts


@cache
def workload(spec: str, pad_to: int | None):
    """A workload, padded to multiples of ``pad_to`` if given (Assumption 3), cached per process."""
    from theory.workload import get_workload

    w = get_workload(spec)
    return w.padded(pad_to) if pad_to else w


def _place(cost: CostSpec, workload: str, pad: bool) -> dict:
    """The identity entries of where a point runs: GPU (tile set), model, mode, workload and its
    padding; the model file and a tile restriction only when given (a default point, and so its
    seed, stays as it was)."""
    out = {"tileset": cost.gpu, "model": cost.model, "mode": cost.mode, "workload": workload,
           "variant": "pad" if pad else "raw", "gpu_file": cost.gpu_file}
    if cost.model_file:
        out["model_file"] = cost.model_file
    if cost.tiles:
        out["tiles"] = cost.tiles
    return out


# the scenario fields a sim point's identity spells out (``load`` is unused: a point has a rate)
_SPELLED = ("gpu", "model", "mode", "workload", "pad", "tiles", "gpu_file", "model_file", "scheduler",
            "options", "r", "rate", "load", "n_requests", "seed")


@cache
def _scenario_defaults() -> dict:
    """Every scenario field's default, in the form ``Scenario.to_dict`` writes."""
    from stability.sim.simulate import Scenario

    return {f.name: _jsonable(f.default) for f in fields(Scenario)}


@dataclass(frozen=True)
class SimPoint:
    """One simulation of a sweep: ``scenario`` at its rate, and which saturation replicate it is
    (``replicate``; None for a verdict run)."""

    scenario: Scenario
    replicate: int | None = None

    def __post_init__(self):
        if self.scenario.rate is None:
            raise FieldError("scenario.rate", None, "a rate in requests per second (a sweep point's)")

    @classmethod
    def seeded(cls, scenario: Scenario, base_seed: int, replicate: int | None = None) -> SimPoint:
        """The point with its scenario's seed derived from its identity and ``base_seed``
        (:func:`stability.runner.derive_seed`)."""
        seed = derive_seed(cls(scenario, replicate).identity(), base_seed)
        return cls(replace(scenario, seed=seed), replicate)

    def identity(self) -> dict:
        """``{"kind": "sim", ...}``: where it runs, the scheduler and its options, r, rate, requests,
        replicate and seed; any other scenario field off its default under ``scenario``."""
        sc = self.scenario
        out = {"kind": "sim", **_place(sc.cost_spec, sc.workload, sc.pad), "scheduler": sc.scheduler,
               "options": [list(o) for o in sc.options], "r": sc.r, "rate": float(sc.rate),
               "n_requests": sc.n_requests}
        defaults = _scenario_defaults()
        other = {k: v for k, v in sc.to_dict().items() if k not in _SPELLED and v != defaults[k]}
        if other:
            out["scenario"] = other
        if self.replicate is not None:
            out["replicate"] = self.replicate
        return {**out, "seed": sc.seed}

    def run(self) -> dict:
        """The scenario simulated: its stability verdict (growth of the work in system with its
        interval), completions, throughput and the saturated throughput."""
        from stability.sim.disaggregated import completing_nodes
        from stability.sim.metrics import DriftTest
        from stability.sim.simulate import simulate

        res = simulate(self.scenario)
        v = res.verdict(DriftTest(g_min=G_MIN))
        rq = res.requests
        done = np.isfinite(rq["t_finish"])
        horizon = float(np.nanmax(rq["t_finish"]) - rq["arrival"].min()) if done.any() else float("nan")
        # requests a KV-memory model refused at arrival (where the simulator reports them) never wait
        admitted = ~(np.asarray(rq["reject"]) > 0) if "reject" in rq else np.ones(done.size, dtype=bool)
        return {"verdict": v.verdict, "growth": v.growth, "g_low": v.ci_low, "g_high": v.ci_high,
                "completed": int(done.sum()), "throughput": float(done.sum() / horizon),
                **saturated_throughput(rq["arrival"][admitted], rq["t_finish"][admitted],
                                       rq["node"][admitted], completing_nodes(res.runs))}


def _jsonable(value):
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


def saturated_throughput(arrival, finish, node, nodes: int | Sequence[int], warmup: float = 0.2) -> dict:
    """Completions per second between the first and the last completion that fall from the
    ``warmup`` arrival quantile to the last arrival (``(k - 1) / span``, exact for evenly spaced
    completions), and the fewest requests pending at any node right after a completion in that
    window (> 0: no node ever emptied, so the window measured the capacity under backlog).

    ``node`` is the node that completes each request and ``nodes`` the nodes that complete
    requests: a count r (nodes 0 .. r - 1) or their numbers (a disaggregated cluster's decode
    nodes, :func:`stability.sim.disaggregated.completing_nodes`; its prefill nodes complete
    nothing and would read as idle).

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
    for g in range(nodes) if isinstance(nodes, (int, np.integer)) else nodes:
        mine = node == g
        ends = np.sort(finish[mine], kind="stable")  # NaN (never finished) sorts last
        times = ends[np.searchsorted(ends, t0, side="right"):np.searchsorted(ends, t1, side="right")]
        if times.size == 0:
            return {"sat_throughput": rate, "min_pending": 0}
        starts = np.sort(arrival[mine], kind="stable")
        pending = np.searchsorted(starts, times, side="right") - np.searchsorted(ends, times, side="right")
        fewest = int(pending.min()) if fewest is None else min(fewest, int(pending.min()))
    return {"sat_throughput": rate, "min_pending": fewest}


def _chain_inputs(cost: CostSpec, workload_spec: str, pad: bool):
    """The cost model of ``cost`` and the workload, padded to its t*_lcm when ``pad``."""
    cm = cost_model(cost)
    return cm, workload(workload_spec, cm.t_lcm if pad else None)


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


@dataclass(frozen=True)
class NMinPoint:
    """The smallest n whose executed RAD cycle has negative drift at ``epsilon``, on the cost model
    of ``cost`` and ``workload`` padded to t*_lcm, searched up to ``n_max`` with ``samples`` cycles
    per n (:func:`stability.dtmc.empirical_n_min`)."""

    cost: CostSpec
    workload: str
    epsilon: float
    samples: int
    n_max: int
    seed: int = 0

    @classmethod
    def seeded(cls, cost: CostSpec, workload: str, epsilon: float, samples: int, n_max: int,
               base_seed: int) -> NMinPoint:
        """The point seeded from its identity and ``base_seed`` (:func:`stability.runner.derive_seed`)."""
        point = cls(cost, workload, epsilon, samples, n_max)
        return replace(point, seed=derive_seed(point.identity(), base_seed))

    def identity(self) -> dict:
        """``{"kind": "n_min", ...}``: where it runs (padded), epsilon, samples, n_max and seed."""
        return {"kind": "n_min", **_place(self.cost, self.workload, True), "epsilon": self.epsilon,
                "samples": self.samples, "n_max": self.n_max, "seed": self.seed}

    def run(self) -> dict:
        """The search, beside Theorem 2's n (:func:`n_min`: cached on disk across commands)."""
        cm, w = _chain_inputs(self.cost, self.workload, True)
        return n_min(cm, w, self.epsilon, self.samples, self.seed, self.n_max)


@dataclass(frozen=True)
class DtmcPoint:
    """RAD's saturated cycle at ``n`` on the cost model of ``cost`` and ``workload`` (padded to
    t*_lcm when ``pad``), sampled over ``samples`` cycles (Appendix C)."""

    cost: CostSpec
    workload: str
    pad: bool
    n: int
    samples: int
    seed: int = 0

    @classmethod
    def seeded(cls, cost: CostSpec, workload: str, pad: bool, n: int, samples: int,
               base_seed: int) -> DtmcPoint:
        """The point seeded from its identity and ``base_seed`` (:func:`stability.runner.derive_seed`)."""
        point = cls(cost, workload, pad, n, samples)
        return replace(point, seed=derive_seed(point.identity(), base_seed))

    def identity(self) -> dict:
        """``{"kind": "dtmc", ...}``: where it runs, n, samples and seed."""
        return {"kind": "dtmc", **_place(self.cost, self.workload, self.pad), "n": self.n,
                "samples": self.samples, "seed": self.seed}

    def run(self) -> dict:
        """RAD's saturated cycle throughput per node (E[K] / E[T] with its interval) and the fraction
        of cycles that end before n requests started (Appendix C)."""
        from stability.dtmc import CycleSampler, ratio_ci

        cm, w = _chain_inputs(self.cost, self.workload, self.pad)
        sat = CycleSampler(cm, w, self.n).saturated(self.samples, self.seed)
        per_node = ratio_ci(sat.K, sat.T, 0.99)
        return {"per_node": list(per_node), "early_end_fraction": float(np.mean(sat.K < self.n))}
