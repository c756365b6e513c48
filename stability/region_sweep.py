"""A capacity-region sweep under way (:func:`stability.region.run_sweep`): the runs of each series
and the runs each finished one calls for, RAD's n and the DTMC predictions first, then per series
the grid of loads, the saturation runs and the bisection on the stability verdict (see
:mod:`stability.region`).
"""

from __future__ import annotations

import numpy as np

from stability.points import N_FALLBACK, N_MAX
from stability.region import (
    Series,
    SweepResult,
    SweepSpec,
    _base,
    _groups,
    _series_for,
    _sim_task,
    boundary,
)
from stability.runner import with_seed

MAX_LOAD = 4.0  # largest load (x lambda*) tried when looking for an unstable run
FIRST = 1e9  # cost (s) of the runs that others wait for (RAD's n, the DTMC): above any run's


class Sweep:
    """A sweep under way: the runs of each series, and the runs each finished one calls for.

    A series is known by its key ``(group, j)``: the j-th series of the group-th (tile set,
    scheduler) pair of ``stability.region._groups``. Tags of the runs
    (:meth:`stability.runner.Runner.run_dynamic`): ``("n_min", tileset)``, ``(key, "dtmc")`` and
    ``(key, k)`` for the k-th run of a series.
    """

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self.groups = _groups(spec)
        rad = dict(dict(spec.options).get("rad", ())).get("n", "auto")
        self.auto = "rad" in spec.schedulers and rad == "auto"
        self.rad_n: dict = {}
        self.series: dict = {}  # group -> its series
        self.runs: dict = {}  # key -> [[role, task, result, step], ...] in the order asked
        self.step: dict = {}  # key -> the bisection step under way (0: the grid)
        self.open: dict = {}  # key -> verdict runs of that step not finished
        self.dtmc: dict = {}  # key -> the cycle DTMC's boundary
        self.per_request: dict = {}  # (tile set, scheduler, variant, workload, r) -> s per request

    def start(self) -> list[tuple]:
        """The first runs: RAD's n per tile set (when auto) and every other series' grid."""
        pairs = []
        if self.auto:
            law = self.spec.two_class[0] if self.spec.two_class else self.spec.workload
            pairs += [(("n_min", t), with_seed({
                "kind": "n_min", **_base(self.spec, t, "pad", law), "epsilon": self.spec.epsilon,
                "samples": self.spec.dtmc_samples, "n_max": N_MAX}, self.spec.seed))
                for t in self.spec.tilesets]
        for g, (_, name) in enumerate(self.groups):
            if not (self.auto and name == "rad"):
                pairs += self._open(g)
        return pairs

    def _open(self, g: int) -> list[tuple]:
        """The series of group ``g``, their DTMC prediction (RAD), grid and saturation runs."""
        spec = self.spec
        tileset, name = self.groups[g]
        self.series[g] = _series_for(spec, tileset, name, self.rad_n)
        pairs = []
        for j, s in enumerate(self.series[g]):
            key = (g, j)
            self.runs[key], self.step[key], self.open[key] = [], 0, len(spec.loads)
            if s.scheduler == "rad":
                pairs.append(((key, "dtmc"), with_seed({
                    "kind": "dtmc", **_base(spec, s.tileset, s.variant, s.workload),
                    "n": int(dict(s.options)["n"]), "samples": 2 * spec.dtmc_samples}, spec.seed)))
            pairs += self._runs(key, [("grid", load * s.lambda_star) for load in spec.loads])
            pairs += self._runs(key, [("saturation", spec.saturation * s.lambda_star)] * spec.replicates,
                                replicates=True)
        return pairs

    def _runs(self, key: tuple, rates: list, replicates: bool = False) -> list[tuple]:
        s = self.series[key[0]][key[1]]
        pairs = []
        for k, (role, rate) in enumerate(rates):
            task = _sim_task(self.spec, s, rate, k if replicates else None)
            pairs.append(((key, len(self.runs[key])), task))
            self.runs[key].append([role, task, None, self.step[key]])
        return pairs

    def then(self, tag: tuple, task: dict, result: dict) -> list[tuple]:
        """Record a finished run; the runs it calls for."""
        if tag[0] == "n_min":
            self.rad_n[tag[1]] = result["n_min"] or N_FALLBACK
            return [p for g, (t, name) in enumerate(self.groups) if t == tag[1] and name == "rad"
                    for p in self._open(g)]
        key, k = tag
        s = self.series[key[0]][key[1]]
        if k == "dtmc":
            self.dtmc[key] = {"boundary": [s.r * v for v in result["per_node"]],
                              "early_end_fraction": result["early_end_fraction"]}
            return []
        run = self.runs[key][k]
        run[2] = result
        self.per_request[_kind(task)] = result["elapsed_s"] / task["n_requests"]
        if run[0] == "saturation":
            return []
        self.open[key] -= 1
        if self.open[key] or self.step[key] == self.spec.bisect:
            return []
        self.step[key] += 1
        rates = _next_rates(s, [(role, t, r) for role, t, r, _ in self.runs[key] if role != "saturation"],
                            self.spec.tol)
        self.open[key] = len(rates)
        return self._runs(key, rates)

    def cost(self, task: dict) -> float:
        """Expected seconds of a run: its requests x the seconds per request of the last finished
        run of its kind (of any kind before that; RAD's n and the DTMC come first)."""
        if task["kind"] != "sim":
            return FIRST
        known = self.per_request.get(_kind(task))
        if known is None:
            known = max(self.per_request.values(), default=1.0)
        return task["n_requests"] * known

    def phase(self, tag: tuple) -> str:
        """What the run of ``tag`` is for, as the progress bar names it."""
        if tag[0] == "n_min":
            return "RAD's n (DTMC search; the first runs compile the simulator)"
        key, k = tag
        if k == "dtmc":
            return "DTMC predictions"
        step = self.runs[key][k][3]
        return "grid and saturation runs" if step == 0 else f"bisection {step}/{self.spec.bisect}"

    def result(self) -> SweepResult:
        """The series in their order, each one's runs (by rate) and boundary."""
        keys = [(g, j) for g in range(len(self.groups)) for j in range(len(self.series[g]))]
        series = [self.series[g][j] for g, j in keys]
        result = SweepResult(self.spec, series,
                             rad_n={t: self.rad_n[t] for t in self.spec.tilesets if t in self.rad_n},
                             dtmc={i: self.dtmc[key] for i, key in enumerate(keys) if key in self.dtmc})
        for i, (key, s) in enumerate(zip(keys, series, strict=True)):
            done = sorted(((role, t, r) for role, t, r, _ in self.runs[key]),
                          key=lambda p: (p[1]["rate"], p[1].get("replicate", -1)))
            result.points += [(i, role, task, res) for role, task, res in done]
            result.boundaries.append(boundary(
                s, [(t["rate"], r) for role, t, r in done if role != "saturation"],
                [(t["rate"], r) for role, t, r in done if role == "saturation"],
                self.spec.confidence, result.dtmc.get(i)))
        return result


def _kind(task: dict) -> tuple:
    """The runs whose cost per request is alike: same GPU, scheduler, workload and r."""
    return task["tileset"], task["scheduler"], task["variant"], task["workload"], task["r"]


def _next_rates(s: Series, pts: list, tol: float) -> list[tuple[str, float]]:
    """The next rate to try: look higher while nothing is unstable, lower while nothing is below
    the lowest unstable rate, else bisect the bracket until it is narrower than ``tol``."""
    rates = np.array([t["rate"] for _, t, _ in pts])
    unstable = np.array([r["verdict"] == "unstable" for _, _, r in pts])
    if not unstable.any():
        top = rates.max()
        return [] if top >= MAX_LOAD * s.lambda_star else [("search", min(2 * top, MAX_LOAD * s.lambda_star))]
    hi = rates[unstable].min()
    below = rates[rates < hi]
    if below.size == 0:
        return [("search", hi / 2)] if hi > 0.05 * s.lambda_star else []
    lo = below.max()
    return [] if (hi - lo) / hi <= tol else [("bisect", 0.5 * (lo + hi))]
