"""Capacity regions: sweep the arrival rate per GPU tile set, scheduler and r, and locate the
empirical stability boundary with a confidence interval.

A *series* is one (tile set, scheduler, r, workload, padded or raw) combination; its points are
simulator runs at rates lambda, each judged by the regression verdict of
:mod:`stability.sim.metrics`: g, the fraction of the offered work that accumulates, and the verdict
*unstable* when g's interval lies above ``stability.runner.G_MIN`` = 0.2% (a practical threshold:
below it a slope is too small to matter, and the regression finds such slopes "significant" in
stable runs whose cycles are long).

How the boundary and its CI are formed.

* Saturation estimate (the CI). The boundary of a scheduler is its capacity under backlog: the
  throughput it sustains while requests always wait. ``replicates`` independent runs at
  ``saturation`` x lambda* measure it directly: completions per second over the window from the
  20% arrival to the last arrival, provided no node's queue ever empties in that window (else the
  run only gives a lower bound, and the CI is open above). The estimate is their mean, the CI a
  Student-t interval at level ``confidence``. (The overloaded runs' ``lambda (1 - g)`` estimates
  the same quantity and is kept in the CSV, but it carries the arrival noise, and the regression's
  own interval for g is too narrow for an overloaded queue, whose level is a random walk.)
* Bisection on the verdict (the check). A grid of loads, then bisection between the lowest
  unstable rate ``lambda_hi`` and the highest rate below it ``lambda_lo``, for ``bisect`` steps or
  until the bracket is narrower than ``tol``. ``consistent`` says whether the saturation interval
  meets ``[lambda_lo (1 - g_high(lambda_lo)), lambda_hi]``.

Set against: lambda* = r / T_bar^R (Theorem 1: no scheduler is stable above it; a boundary whose
whole CI lies above lambda* is flagged ``exceeds_lambda_star``), the certified capacity of
:mod:`theory.capacity` (DP-minimal work, the per-batch overhead of the cost model, and for a
scheduler that models KV memory the smaller of that and the KV-memory bound with its cache, with
which binds: in ``region.json`` and the plot), Theorem 2's lambda* (1 - eps) for
RAD, and for RAD the cycle-DTMC prediction ``r E[K] / E[T]`` at the n it runs with
(:mod:`stability.dtmc`). RAD's n is ``auto`` by default: the empirical smallest n with negative
executed drift at lambda* (1 - eps) on the padded workload (Theorem 2's own threshold is
10^5-10^6 requests per cycle for the presets).

Two classes: a mixture of two length laws with class-1 share s is one workload; Theorem 1 applied
to it gives the line ``lambda_1 T_bar_1 + lambda_2 T_bar_2 = r`` (:func:`theory.workload.mixture`),
and each share s is a ray in the (lambda_1, lambda_2) plane swept like any series.

Scale-out and resumability (:mod:`stability.runner`): every run is a *task* (a point of
:mod:`stability.points`: a simulation holds its scenario); its
result is cached in ``cache/<key>.json`` (written atomically), key = SHA-256 of the task and the
source of ``theory/`` and ``stability/``. Seeds are derived from the task, so results do not
depend on the number of workers or the order of execution, and an interrupted sweep redoes only
unfinished tasks. Tasks run in-process (1 worker), on a local process pool, or on a Dask cluster.
No series waits for another: each one's next bisection step starts when its own runs are done, only
RAD's series wait for RAD's n, and the longest waiting run starts first
(:meth:`stability.runner.Runner.run_dynamic`).

References
----------
Bari, Hegde, de Veciana (2025), Theorems 1-2, Section 4.1 (uniformly random planner).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from stability.points import N_FALLBACK, N_MAX, DtmcPoint, NMinPoint, SimPoint
from stability.region_spec import (
    DEFAULT_LOADS,
    DEFAULT_SCHEDULERS,
    Series,
    SweepSpec,
    _groups,
    _series_for,
    build_series,
)
from stability.runner import Cache, DaskExecutor, LocalExecutor, Runner, code_version
from theory.errors import FieldError
from theory.io import NULL_MEANING, atomic_write_json, json_load_exact

# the sweep's description and series are defined in stability.region_spec and named here too
__all__ = ["BOUNDARY_COLUMNS", "COLUMNS", "DEFAULT_LOADS", "DEFAULT_SCHEDULERS", "POINT_COLUMNS",
           "SERIES_COLUMNS", "Series", "SweepResult", "SweepSpec", "boundary", "boundary_rows",
           "build_series", "max_runs", "plot_outputs", "read_csv", "rows", "run_sweep", "write_outputs"]

MAX_LOAD = 4.0  # largest load (x lambda*) tried when looking for an unstable run


# --- the sweep ------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """Series, their runs (task and result per point) and boundaries; counts of computed and cached
    tasks."""

    spec: SweepSpec
    series: list
    points: list = field(default_factory=list)  # (series index, role, task, result)
    boundaries: list = field(default_factory=list)
    rad_n: dict = field(default_factory=dict)
    dtmc: dict = field(default_factory=dict)
    computed: int = 0
    cached: int = 0
    elapsed_s: float = 0.0


def _sim_task(spec: SweepSpec, s: Series, rate: float, replicate: int | None = None) -> SimPoint:
    from stability.sim.simulate import Scenario

    n_req = (spec.n_requests if replicate is None else spec.sat_requests) * s.r  # per node
    sc = Scenario(gpu=s.tileset, model=spec.model, mode=spec.mode, workload=s.workload,
                  pad=s.variant == "pad", gpu_file=spec.gpu_file, model_file=spec.model_file,
                  scheduler=s.scheduler, options=s.options, r=s.r, rate=float(rate), load=None,
                  n_requests=n_req)
    return SimPoint.seeded(sc, spec.seed, replicate)


def run_sweep(spec: SweepSpec, cache_dir: str | Path, workers: int = 1, dask: str | None = None,
              progress: bool = False, on_result: Callable | None = None) -> SweepResult:
    """Run (or resume) a sweep and locate every series' boundary (see the module docstring).

    Every series goes on as soon as its own runs allow (:meth:`stability.runner.Runner.run_dynamic`):
    its bisection does not wait for the other series, and only RAD's series wait for RAD's n.
    ``on_result(task, result)`` is called after each newly computed task (cached ones excepted).
    """
    spec.validate()
    t0 = time.perf_counter()
    executor = DaskExecutor(dask) if dask else LocalExecutor(workers)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=max_runs(spec), unit=" runs", dynamic_ncols=True,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{unit} "
                              "[{elapsed}<{remaining}]")
    runner = Runner(Cache(cache_dir), executor, bar, on_result, grow_total=False)
    sweep = _Sweep(spec)

    def phase(name: str) -> None:
        if bar is not None and bar.desc != f"llmq region, {name}":
            bar.set_description_str(f"llmq region, {name}")

    try:
        runner.run_dynamic(sweep.start(), sweep.then, sweep.cost,
                           on_start=lambda tag: phase(sweep.phase(tag)))
        result = sweep.result()
        if bar is not None:  # bisection may stop early: the job is done
            phase("done")
            bar.total = bar.n
            bar.refresh()
    finally:
        if bar is not None:
            bar.close()
        executor.close()
    result.computed, result.cached = runner.computed, runner.cached
    result.elapsed_s = time.perf_counter() - t0
    return result


FIRST = 1e9  # cost (s) of the runs that others wait for (RAD's n, the DTMC): above any run's
OPENING = 2 * FIRST  # cost of the first run of each scheduler: above those


class _Sweep:
    """A sweep under way: the runs of each series, and the runs each finished one calls for.

    A series is known by its key ``(group, j)``: the j-th series of the group-th (tile set,
    scheduler) pair of :func:`_groups`. Tags of the runs (:meth:`stability.runner.Runner.run_dynamic`):
    ``("n_min", tileset)``, ``(key, "dtmc")`` and ``(key, k)`` for the k-th run of a series.
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
        self.opened: set = set()  # schedulers with a run handed to the runner (RAD's n: RAD's)

    def start(self) -> list[tuple]:
        """The first runs: RAD's n per tile set (when auto) and every other series' grid."""
        pairs = []
        if self.auto:
            law = self.spec.two_class[0] if self.spec.two_class else self.spec.workload
            pairs += [(("n_min", t), NMinPoint.seeded(self.spec.cost_spec(t), law, self.spec.epsilon,
                                                      self.spec.dtmc_samples, N_MAX, self.spec.seed))
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
                pairs.append(((key, "dtmc"), DtmcPoint.seeded(
                    spec.cost_spec(s.tileset), s.workload, s.variant == "pad", int(dict(s.options)["n"]),
                    2 * spec.dtmc_samples, spec.seed)))
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

    def then(self, tag: tuple, task, result: dict) -> list[tuple]:
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
        self.per_request[_kind(task)] = result["elapsed_s"] / task.scenario.n_requests
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

    def cost(self, task) -> float:
        """Expected seconds of a run: its requests x the seconds per request of the last finished
        run of its kind (of any kind before that; RAD's n and the DTMC come first).

        The first run of each scheduler (RAD's n counting as RAD's) comes before all of them
        (:data:`OPENING`): on an empty numba cache the workers then start by compiling different
        schedulers, each once (:func:`stability.numba_cache.compile_once`), instead of waiting
        for one another's compilation of the same one."""
        name = task.scenario.scheduler if isinstance(task, SimPoint) else "rad"
        if name not in self.opened:
            self.opened.add(name)
            return OPENING
        if not isinstance(task, SimPoint):
            return FIRST
        known = self.per_request.get(_kind(task))
        if known is None:
            known = max(self.per_request.values(), default=1.0)
        return task.scenario.n_requests * known

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
                          key=lambda p: (p[1].scenario.rate,
                                         -1 if p[1].replicate is None else p[1].replicate))
            result.points += [(i, role, task, res) for role, task, res in done]
            result.boundaries.append(boundary(
                s, [(t.scenario.rate, r) for role, t, r in done if role != "saturation"],
                [(t.scenario.rate, r) for role, t, r in done if role == "saturation"],
                self.spec.confidence, result.dtmc.get(i)))
        return result


def _kind(task: SimPoint) -> tuple:
    """The runs whose cost per request is alike: same GPU, scheduler, workload and r."""
    sc = task.scenario
    return sc.gpu, sc.scheduler, sc.pad, sc.workload, sc.r


def max_runs(spec: SweepSpec) -> int:
    """The most tasks a sweep can run (the progress bar's total): RAD's n searches, the DTMC
    predictions, then per series the grid, the saturation runs and one run per bisection step."""
    per_series = len(spec.rs) * len(spec.variants) * (len(spec.two_class[2]) if spec.two_class else 1)
    n_series = len(spec.tilesets) * len(spec.schedulers) * per_series
    rad = "rad" in spec.schedulers
    auto = rad and dict(dict(spec.options).get("rad", ())).get("n", "auto") == "auto"
    n_rad = len(spec.tilesets) * per_series if rad else 0
    return (len(spec.tilesets) if auto else 0) + n_rad \
        + n_series * (len(spec.loads) + spec.replicates + spec.bisect)


def _next_rates(s: Series, pts: list, tol: float) -> list[tuple[str, float]]:
    """The next rate to try: look higher while nothing is unstable, lower while nothing is below
    the lowest unstable rate, else bisect the bracket until it is narrower than ``tol``."""
    rates = np.array([t.scenario.rate for _, t, _ in pts])
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


def boundary(s: Series, pts: list[tuple[float, dict]], sat: list[tuple[float, dict]],
             confidence: float, dtmc: dict | None = None) -> dict:
    """The boundary estimate and CI of one series (module docstring) from its verdict runs
    ``pts`` and saturation runs ``sat`` (``(rate, result)`` pairs), with lambda*, Theorem 2's line
    and the DTMC prediction beside it."""
    from theory.stats import t_interval

    saturated = all(r["min_pending"] > 0 for _, r in sat)
    mean, low, high = t_interval([r["sat_throughput"] for _, r in sat], confidence)
    out = {"boundary": mean, "ci_low": low, "ci_high": high if saturated else float("inf"),
           "saturated": saturated}
    pts = sorted(pts, key=lambda p: p[0])
    unstable = [lam for lam, r in pts if r["verdict"] == "unstable"]
    hi = min(unstable, default=float("inf"))
    below = [(lam, r) for lam, r in pts if lam < hi]
    lo = float("nan")
    if below:
        lam_lo, r_lo = below[-1]
        lo = lam_lo * (1 - max(r_lo["g_high"], 0.0)) if np.isfinite(r_lo["g_high"]) else lam_lo
    out.update(bracket_low=lo, bracket_high=hi,
               consistent=bool(out["ci_low"] <= hi and not (out["ci_high"] < lo)))
    lam_star = s.lambda_star
    out.update(lambda_star=lam_star, ratio=mean / lam_star,
               exceeds_lambda_star=bool(out["ci_low"] > lam_star * (1 + 1e-9)),
               theorem2=s.theorem2, runs=len(pts) + len(sat))
    d = (dtmc or {}).get("boundary", [float("nan")] * 3)
    out.update(dtmc_boundary=d[0], dtmc_low=d[1], dtmc_high=d[2])
    return out


# --- outputs --------------------------------------------------------------------------------------

SERIES_COLUMNS = ("series", "model", "tileset", "scheduler", "options", "r", "workload", "workload_variant",
                  "class_1", "class_2", "share_1", "T_bar_1", "T_bar_2", "lambda_star", "theorem2",
                  "epsilon", "n_threshold")
BOUNDARY_COLUMNS = ("boundary", "ci_low", "ci_high", "ratio", "saturated", "consistent",
                    "exceeds_lambda_star", "bracket_low", "bracket_high", "dtmc_boundary", "dtmc_low",
                    "dtmc_high")
POINT_COLUMNS = ("role", "rate", "load", "n_requests", "seed", "verdict", "growth", "g_low", "g_high",
                 "completed", "throughput", "sat_throughput", "min_pending")

# the data dictionary of region.csv (and of region.json's rows): column -> unit and meaning
COLUMNS = {
    "series": "name of the series: tile set, scheduler[options], r, workload variant, workload",
    "model": "model preset and layer mode of the sweep",
    "tileset": "GPU preset, optionally restricted to tiles (a100:128x128)",
    "scheduler": "scheduler name (stability.schedulers)",
    "options": "scheduler options NAME=VALUE, space-separated (RAD's n resolved from 'auto')",
    "r": "number of inference nodes (GPUs)",
    "workload": "length law of the requests (prompt, decode lengths)",
    "workload_variant": "pad: prompts padded to multiples of t*_lcm (Assumption 3); raw: as drawn",
    "class_1": "two-class sweeps: length law of class 1 (empty otherwise)",
    "class_2": "two-class sweeps: length law of class 2 (empty otherwise)",
    "share_1": "two-class sweeps: class-1 share of the arrivals, in [0, 1] (empty/null otherwise)",
    "T_bar_1": "s; two-class sweeps: T_bar^R of class 1 alone (Eq. 8)",
    "T_bar_2": "s; two-class sweeps: T_bar^R of class 2 alone (Eq. 8)",
    "lambda_star": "req/s; Theorem 1's upper bound r / T_bar^R for this series' workload",
    "theorem2": "req/s; Theorem 2's guarantee lambda* (1 - epsilon) for RAD (pad variant only)",
    "epsilon": "Theorem 2's margin epsilon (dimensionless)",
    "n_threshold": "requests per cycle; Theorem 2's sufficient n at epsilon (pad variant only)",
    "boundary": "req/s; the empirical stability boundary: mean throughput of the saturation runs",
    "ci_low": "req/s; lower limit of the boundary's t-interval at the sweep's confidence",
    "ci_high": "req/s; upper limit of the boundary's t-interval (inf/null: open above, a saturation "
               "run's queue emptied)",
    "ratio": "boundary / lambda_star",
    "saturated": "true if every saturation run kept a backlog on every node (else a lower bound)",
    "consistent": "true if the boundary's CI meets the verdict bisection bracket",
    "exceeds_lambda_star": "true if the whole CI lies above lambda* (a violation of Theorem 1)",
    "bracket_low": "req/s; highest stable-looking rate below the lowest unstable rate, less its "
                   "growth (nan/null: none)",
    "bracket_high": "req/s; lowest rate judged unstable (inf/null: none found up to 4 lambda*)",
    "dtmc_boundary": "req/s; RAD's cycle-DTMC prediction r E[K]/E[T] at its n (nan/null: not RAD)",
    "dtmc_low": "req/s; lower limit of the DTMC prediction's interval",
    "dtmc_high": "req/s; upper limit of the DTMC prediction's interval",
    "role": "what the run is for: grid, search, bisect (verdict runs) or saturation",
    "rate": "req/s; arrival rate into the system",
    "load": "rate / lambda_star",
    "n_requests": "requests simulated in the run (all nodes)",
    "seed": "the run's seed, derived from the task's content and --seed",
    "verdict": "stable, unstable, or inconclusive (the growth interval neither excludes nor exceeds "
               "the practical threshold; stability.sim.metrics)",
    "growth": "g: fraction of the offered work that accumulates (regression on the backlog)",
    "g_low": "lower limit of g's interval",
    "g_high": "upper limit of g's interval",
    "completed": "requests completed in the run",
    "throughput": "req/s; completions per second over the run",
    "sat_throughput": "req/s; completions per second from the 20% arrival to the last arrival",
    "min_pending": "fewest requests pending at any node over that window (> 0: saturated)",
}


def _series_fields(s: Series) -> dict:
    return {"series": s.name, "tileset": s.tileset, "scheduler": s.scheduler,
            "options": " ".join(f"{k}={v}" for k, v in s.options), "r": s.r, "workload": s.workload,
            "workload_variant": s.variant, "class_1": s.class_1, "class_2": s.class_2,
            "share_1": s.share_1, "T_bar_1": s.T_bar_1, "T_bar_2": s.T_bar_2,
            "lambda_star": s.lambda_star, "theorem2": s.theorem2, "epsilon": s.epsilon,
            "n_threshold": s.n_threshold if s.n_threshold is not None else "",
            "certified_bound": s.certified,  # in region.json and the plot; not region.csv columns
            "certified_binds": s.certified_binds}


def _model(spec: SweepSpec) -> str:
    return f"{spec.model} ({spec.mode} mode)"


def rows(result: SweepResult) -> list[dict]:
    """One row per run, with its series' description and boundary repeated (a long table)."""
    out = []
    for i, role, task, res in result.points:
        s = result.series[i]
        b = result.boundaries[i]
        out.append({**_series_fields(s), "model": _model(result.spec),
                    **{k: b[k] for k in BOUNDARY_COLUMNS}, "role": role,
                    "rate": task.scenario.rate, "load": task.scenario.rate / s.lambda_star,
                    "n_requests": task.scenario.n_requests, "seed": task.scenario.seed,
                    **{k: res[k] for k in POINT_COLUMNS[5:]}})
    return out


def boundary_rows(result: SweepResult) -> list[dict]:
    """One row per series: description and boundary."""
    return [{**_series_fields(s), "model": _model(result.spec), **{k: b[k] for k in BOUNDARY_COLUMNS},
             "runs": b["runs"]}
            for s, b in zip(result.series, result.boundaries, strict=True)]


def write_outputs(result: SweepResult, out: str | Path) -> dict:
    """``region.csv`` (one row per run), ``region.json`` (spec, the data dictionary of the columns,
    boundaries, runs, timing; strict JSON) and the figures ``region.png`` (and
    ``region_two_class.png`` for two-class sweeps)."""
    from theory.io import atomic_write_csv

    out = Path(out)
    table = rows(result)
    columns = SERIES_COLUMNS + BOUNDARY_COLUMNS + POINT_COLUMNS
    atomic_write_csv(out / "region.csv", {c: [row[c] for row in table] for c in columns})
    summary = {"spec": asdict(result.spec), "code_version": code_version(),
               "columns": {"region.csv": {c: COLUMNS[c] for c in columns},
                           "runs": "one per run, the columns of region.csv, certified_bound and "
                                   "certified_binds",
                           "boundaries": {"(one per series)": "the series' columns of region.csv, and",
                                          "certified_bound": "req/s; the certified capacity of "
                                          "theory.capacity for the series' cost model (any scheduler): "
                                          "min(compute, KV memory) when the scheduler models KV memory "
                                          "(its cache's blocks x block size per GPU), else compute",
                                          "certified_binds": "which bound is the smaller: compute or "
                                          "kv-memory",
                                          "runs": "runs of the series (verdict and saturation)"},
                           "null": NULL_MEANING},
               "rad_n": result.rad_n, "boundaries": boundary_rows(result), "runs": table,
               "tasks": {"computed": result.computed, "cached": result.cached},
               "elapsed_s": result.elapsed_s}
    atomic_write_json(out / "region.json", summary)
    return {"csv": out / "region.csv", "json": out / "region.json", **plot_outputs(table, out)}


def plot_outputs(table: list[dict], out: str | Path) -> dict:
    """Draw the figures from rows of ``region.csv`` (as read back, or as just computed)."""
    from stability.plot import plot_region, plot_two_class

    out = Path(out)
    series: dict = {}
    for row in table:
        series.setdefault(row["series"], row)
    one = [b for b in series.values() if not b["class_1"]]
    two = [b for b in series.values() if b["class_1"]]
    files = {}
    if one:
        files["png"] = plot_region([r for r in table if not r["class_1"]], one, out / "region.png")
    if two:
        files["two_class_png"] = plot_two_class(two, out / "region_two_class.png")
    return files


def read_csv(path: str | Path) -> list[dict]:
    """Rows of a ``region.csv`` (strings, as the plots accept), with each series' certified bound
    from the ``region.json`` beside it when there is one (the CSV's columns predate it)."""
    import csv

    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            table = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise FieldError("--plot-only", str(path), "an existing region.csv") from None
    missing = {"series", "rate", "verdict", "boundary", "lambda_star"} - set(table[0] if table else ())
    if not table or missing:
        raise FieldError("--plot-only", str(path), f"a region.csv with rows and the columns "
                                                   f"{sorted(missing) or 'series, rate, ...'}")
    summary = path.with_suffix(".json")
    if summary.is_file():
        try:
            bounds = {b["series"]: b.get("certified_bound")
                      for b in json_load_exact(summary.read_text(encoding="utf-8")).get("boundaries", [])}
        except (ValueError, KeyError, TypeError, AttributeError):
            bounds = {}  # not a region.json: the plot goes without the certified line
        for row in table:
            row.setdefault("certified_bound", bounds.get(row["series"]))
    return table
