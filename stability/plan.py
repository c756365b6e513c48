"""The planner's search: simulate the candidates :mod:`theory.plan` kept, cheapest first.

Every simulation is a ``"plan"`` task of the one runner (:mod:`stability.runner`): a scenario at
the target rate on r GPUs behind the uniformly random planner, replicated over a few seeds, whose
result is the SLO metrics with Student-t intervals. Tasks are cached by content and seeded from
their content (:func:`stability.runner.with_seed`), so a search resumes where it stopped and its
result does not depend on the number of workers.

The search (:func:`search`):

* candidates whose certified capacity is below the target are pruned without simulation
  (:func:`theory.plan.build_grid`);
* families (GPU x model x mode x scheduler x knobs) are visited in the order of their cheapest
  unpruned fleet; the search stops once the cheapest fleet of the next family costs at least the
  best feasible plan found;
* within a family the smallest feasible fleet size is found by exponential then binary search over
  r, which is valid when feasibility is monotone in r. Under random routing at a fixed total
  rate, each node of r GPUs sees Poisson(lam / r): more GPUs only lower every node's load. This
  is an assumption about the schedulers' latency (lower load never hurts), not a theorem; the
  brute-force comparison of tests/test_plan.py checks it on a small grid;
* only fleets cheaper than the best plan so far are simulated;
* ``parallel`` families are searched at once, their probes sent to the runner as one batch (a
  process pool or a Dask cluster): the best plan does not depend on it.

:func:`verify` re-simulates the returned plans with new seeds and longer runs.

A plan is *feasible* when no seed's stability verdict is ``unstable``, no request was rejected,
and every SLO's mean over the seeds is within its limit; the interval of each is reported.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the random planner), Section 7 (TTFT and TBT SLOs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from stability.runner import Cache, Runner, task_key, with_seed
from stability.sim.simulate import Scenario
from theory.plan import Candidate, Family, Grid, OneGpu, PlanSpec, SloSpec, build_grid, one_gpu_capacity
from theory.stats import t_interval

CONFIDENCE = 0.95


# --- the task -----------------------------------------------------------------------------------


def replicate_seed(seed: int, k: int) -> int:
    """The seed of replicate ``k`` of a task seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([int(seed), int(k)]).generate_state(1)[0])


VERDICT_ORDER = ("stable", "inconclusive", "unstable")  # the worst member decides a fleet's verdict


def measure(*results) -> dict:
    """SLO metrics of one run, or of the independent runs of a mixed fleet's members taken as one
    system (detail mode): TTFT P50/P99 and TBT P99 (from the TBT histograms) over every request,
    keyed ``ttft_p50`` etc., and per request class, keyed ``ttft_p50@<class>``, when the scenario
    has classes; the stability verdict (the worst member's), requests, completions and rejections."""
    from stability.sim.metrics import histogram_quantile, summarize_latency

    rqs = [res.requests for res in results]
    out = {"verdict": max((res.verdict().verdict for res in results), key=VERDICT_ORDER.index),
           "completed": int(sum(np.isfinite(rq["t_finish"]).sum() for rq in rqs)),
           "rejected": int(sum(np.sum(rq["reject"] > 0) for rq in rqs)),
           "requests": int(sum(rq["arrival"].size for rq in rqs))}
    hist = sum(run.tbt_hist for res in results for run in res.runs)  # (class, bin) counts of TBT gaps
    ttft = np.concatenate([rq["t_first"] - rq["arrival"] for rq in rqs])
    cls = np.concatenate([rq["cls"] for rq in rqs])
    groups = [("", np.ones(ttft.size, dtype=bool), hist.sum(axis=0))]
    if results[0].scenario.classes:
        groups += [(f"@{c.name}", cls == k, hist[k]) for k, c in enumerate(results[0].classes)]
    for suffix, mine, h in groups:
        lat = summarize_latency(ttft[mine])
        out[f"ttft_p50{suffix}"] = lat["p50"]
        out[f"ttft_p99{suffix}"] = lat["p99"]
        out[f"tbt_p99{suffix}"] = histogram_quantile(h, 0.99)
    return out


def run_plan_task(task: dict) -> dict:
    """The runner's ``plan`` task: ``{"kind": "plan", "scenario": Scenario.to_dict(), "seeds": k,
    "seed": s}``; replicate k runs the scenario with :func:`replicate_seed` ``(s, k)``. Returns
    each replicate's metrics and, per metric, ``[mean, low, high]`` (Student-t, 95 %)."""
    from stability.sim.simulate import simulate

    base = Scenario.from_dict(task["scenario"])
    reps = [measure(simulate(Scenario.from_dict({**task["scenario"],
                                                 "seed": replicate_seed(task["seed"], k)})))
            for k in range(int(task["seeds"]))]
    return {**summarize_replicates(reps), "r": base.r, "rate": base.rate}


def summarize_replicates(reps: list[dict]) -> dict:
    """Replicates' metrics, per metric ``[mean, low, high]`` (Student-t, 95 %), unstable seeds and
    rejections, in strict-JSON form."""
    keys = [k for k in reps[0] if k.startswith(("ttft_", "tbt_"))]
    ci = {k: [_finite(x) for x in t_interval([r[k] for r in reps], CONFIDENCE)] for k in keys}
    return {"replicates": [{k: _finite(v) if isinstance(v, float) else v for k, v in r.items()}
                           for r in reps],
            "metrics": ci, "unstable": sum(r["verdict"] == "unstable" for r in reps),
            "rejected": sum(r["rejected"] for r in reps)}


def _finite(x):
    """A float for strict JSON: NaN and infinities become None."""
    return float(x) if x is not None and math.isfinite(float(x)) else None


def cached_capacity(cache: Cache):
    """:func:`theory.plan.one_gpu_capacity` kept in the runner's cache (keyed by the family, the
    workload, the GPU and model files' content and the code version), for :func:`theory.plan.build_grid`."""

    def capacity(spec: PlanSpec, fam: Family) -> OneGpu:
        key = task_key({"kind": "plan_bound", "family": fam.label, "options": list(map(list, fam.options)),
                        "workload": spec.workload, "gpu_file": spec.gpu_file, "model_file": spec.model_file,
                        "tp": fam.tp})
        hit = cache.get(key)
        if hit is not None:
            return OneGpu(**{k: math.nan if v is None else v for k, v in hit.items()})
        one = one_gpu_capacity(spec, fam)
        cache.put(key, {"family": fam.label}, {k: _finite(v) for k, v in one.__dict__.items()
                                               if k != "binds"} | {"binds": one.binds})
        return one

    return capacity


# --- plans --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluated:
    """A simulated candidate: its certified figures and what the simulation measured.

    Attributes
    ----------
    candidate : Candidate
    result : dict
        The ``plan`` task's result.
    feasible : bool
    missed : tuple of str
        The SLO keys (or ``"stable"``, ``"rejections"``) it missed.
    """

    candidate: Candidate
    result: dict
    feasible: bool
    missed: tuple


def judge(result: dict, slo: SloSpec) -> tuple[bool, tuple]:
    """Whether a ``plan`` result meets ``slo`` (mean of the seeds within each limit, no seed
    unstable, no rejection) and which limits it missed."""
    missed = []
    if result["unstable"]:
        missed.append("stable")
    if result["rejected"]:
        missed.append("rejections")
    for s in slo.limits:
        mean = result["metrics"].get(s.key, [None])[0]
        if mean is None or mean > s.limit:
            missed.append(s.key)
    return not missed, tuple(missed)


def scenario_of(spec: PlanSpec, fam: Family, r: int, n_requests: int, gpu_file: str | None = None
                ) -> Scenario:
    """The scenario of a candidate at the target rate, or replaying the spec's whole trace (detail
    mode: TBT histograms); ``gpu_file`` is the grid's (holding the TP groups' profiles), by default
    the spec's."""
    if spec.trace is not None:
        n_requests = trace_rows(spec.trace)
    return Scenario(gpu=fam.gpu_key, model=fam.model, mode=fam.mode, workload=spec.workload,
                    gpu_file=gpu_file or spec.gpu_file, model_file=spec.model_file, scheduler=fam.scheduler,
                    options=fam.options, r=r, planner=spec.planner,
                    rate=None if spec.trace else float(spec.rate), load=None, n_requests=n_requests,
                    seed=0, detail=True, trace=spec.trace, classes=tuple(map(tuple, spec.classes)))


def trace_rows(path: str) -> int:
    """Requests in the trace at ``path``."""
    from theory.workload import read_trace

    return int(read_trace(path).L_P.size)


def plan_task(spec: PlanSpec, fam: Family, r: int, n_requests: int, seeds: int, base_seed: int,
              gpu_file: str | None = None) -> dict:
    """The runner task of one candidate, seeded from its content (``gpu_file``: the grid's)."""
    sc = scenario_of(spec, fam, r, n_requests, gpu_file).to_dict()  # its seed: the task's, per replicate
    return with_seed({"kind": "plan", "scenario": sc, "seeds": int(seeds)}, base_seed)


@dataclass
class PlanResult:
    """What a search found and what it cost.

    Attributes
    ----------
    spec : PlanSpec
    grid : Grid
    evaluated : list of Evaluated
        Every simulated candidate, in the order simulated.
    best : Evaluated or None
        The cheapest feasible plan.
    counts : dict
        ``considered``, ``pruned`` (by the bound), ``simulated``, ``saved`` (kept candidates never
        simulated: early stopping and the search over r), ``families_visited``.
    """

    spec: PlanSpec
    grid: Grid
    evaluated: list = field(default_factory=list)
    best: Evaluated | None = None
    counts: dict = field(default_factory=dict)

    def front(self) -> list[Evaluated]:
        """Feasible plans not dominated in (price per hour, the SLO's tail metric), cheapest first."""
        key = self.spec.slo.tail_metric
        feas = [e for e in self.evaluated if e.feasible]
        if key is None:
            return sorted(feas, key=lambda e: e.candidate.usd_per_hour)[:1]
        pts = sorted(feas, key=lambda e: (e.candidate.usd_per_hour, e.result["metrics"][key][0]))
        out, best = [], math.inf
        for e in pts:
            m = e.result["metrics"][key][0]
            if m < best:
                out.append(e)
                best = m
        return out


def search(spec: PlanSpec, runner: Runner, n_requests: int = 400, seeds: int = 2,
           base_seed: int = 0, grid: Grid | None = None, stop_early: bool = True,
           parallel: int = 1) -> PlanResult:
    """Cheapest-first search with early stopping (module docstring).

    Parameters
    ----------
    spec : PlanSpec
    runner : Runner
        The one runner (its cache makes the search resumable; its executor runs a batch of tasks
        on local processes or a Dask cluster).
    n_requests, seeds : int
        Requests per simulation and replicates per candidate.
    base_seed : int
        Base of every task's seed.
    grid : Grid, optional
        A grid already built for ``spec``.
    stop_early : bool
        Stop at the first family whose cheapest fleet costs at least the best plan, and search
        only fleets cheaper than it (default). False visits every family and finds each one's
        smallest feasible fleet: a fuller Pareto front at the price of more simulations.
    parallel : int
        Families searched at once: their next probes go to the runner as one batch. The best plan
        does not depend on it (each family's search sees only its own results, tasks are seeded
        by content, and ties go to the family first in the order); more families may be
        simulated than with 1.
    """
    from collections import deque

    grid = grid or build_grid(spec)
    out = PlanResult(spec, grid)
    by_family: dict = {}
    for c in grid.kept:
        by_family.setdefault(c.family, []).append(c)
    order = sorted(by_family, key=lambda f: (by_family[f][0].usd_per_hour, -by_family[f][0].headroom,
                                             f.label))
    rank = {f: k for k, f in enumerate(order)}
    memo: dict = {}

    def evaluate_all(cands: list[Candidate]) -> list[Evaluated]:
        todo = list({(c.family, c.r): c for c in cands if (c.family, c.r) not in memo}.values())
        tasks = [plan_task(spec, c.family, c.r, n_requests, seeds, base_seed, grid.gpu_file) for c in todo]
        for c, res in zip(todo, runner.run(tasks) if tasks else [], strict=True):
            ok, missed = judge(res, spec.slo)
            memo[(c.family, c.r)] = e = Evaluated(c, res, ok, missed)
            out.evaluated.append(e)
        return [memo[(c.family, c.r)] for c in cands]

    def better(e: Evaluated | None) -> bool:
        b = out.best
        return e is not None and (b is None or (e.candidate.usd_per_hour, rank[e.candidate.family])
                                  < (b.candidate.usd_per_hour, rank[b.candidate.family]))

    pending, active, visited = deque(order), [], 0
    while pending or active:
        while pending and len(active) < max(1, int(parallel)):
            fam = pending.popleft()
            cands = sorted(by_family[fam], key=lambda c: c.r)  # kept r's of a family are contiguous
            if stop_early and out.best is not None:
                if cands[0].usd_per_hour >= out.best.candidate.usd_per_hour:
                    pending.clear()  # families come cheapest first: none after this can win
                    break
                cands = [c for c in cands if c.usd_per_hour < out.best.candidate.usd_per_hour]
            visited += 1
            steps = feasibility_steps(cands)
            try:
                active.append((steps, next(steps)))
            except StopIteration:  # no candidate left in this family
                continue
        nxt = []
        for (steps, _), e in zip(active, evaluate_all([p for _, p in active]), strict=True):
            try:
                nxt.append((steps, steps.send(e)))
            except StopIteration as done:
                if better(done.value):
                    out.best = done.value
        active = nxt
    out.counts = {"considered": grid.considered, "pruned": len(grid.pruned), "simulated": len(memo),
                  "saved": len(grid.kept) - len(memo), "families": len(grid.families),
                  "families_visited": visited}
    return out


@dataclass(frozen=True)
class Verified:
    """A returned plan re-simulated independently: new seeds, a longer run.

    Attributes
    ----------
    plan : Evaluated
        The plan as the search found it.
    result : dict
        The new ``plan`` task's result.
    holds : bool
        No seed unstable, no rejection, and no SLO's interval lies wholly above its limit (the
        interval's low end is within it: the SLO is not refuted at the interval's confidence).
    refuted : tuple of str
        The SLO keys (or ``"stable"``, ``"rejections"``) that failed.
    """

    plan: Evaluated
    result: dict
    holds: bool
    refuted: tuple


VERIFY_SEED_OFFSET = 1_000_003  # base seed of the re-simulations: base_seed + this


def verify(res: PlanResult, runner: Runner, n_requests: int, seeds: int, base_seed: int = 0
           ) -> list[Verified]:
    """Re-simulate the best plan and the Pareto front with seeds the search never used
    (``base_seed + VERIFY_SEED_OFFSET``) and ``n_requests`` requests (a longer run than the
    search's; a trace is replayed whole) over ``seeds`` replicates, all in one batch."""
    plans = list({id(e): e for e in ([res.best] if res.best else []) + res.front()}.values())
    tasks = [plan_task(res.spec, e.candidate.family, e.candidate.r, n_requests, seeds,
                       base_seed + VERIFY_SEED_OFFSET, res.grid.gpu_file) for e in plans]
    out = []
    for e, result in zip(plans, runner.run(tasks) if tasks else [], strict=True):
        refuted = ["stable"] if result["unstable"] else []
        refuted += ["rejections"] if result["rejected"] else []
        for slo in res.spec.slo.limits:
            mean, lo, _ = result["metrics"].get(slo.key, [None, None, None])
            low = lo if lo is not None else mean
            if low is None or low > slo.limit:
                refuted.append(slo.key)
        out.append(Verified(e, result, not refuted, tuple(refuted)))
    return out


def feasibility_steps(cands: list[Candidate]):
    """The search for the feasible candidate of smallest r among ``cands`` (sorted by r), by
    exponential then binary search, assuming feasibility is monotone in r, as a generator: it
    yields the candidate to evaluate next, is sent its :class:`Evaluated`, and returns the
    smallest feasible one (None if the largest is infeasible or there is none)."""
    if not cands:
        return None
    lo, step, hi, found = 0, 1, None, None  # every index < lo is infeasible; found is cands[hi]
    while hi is None:
        k = min(lo + step - 1, len(cands) - 1)
        e = yield cands[k]
        if e.feasible:
            hi, found = k, e
        elif k == len(cands) - 1:
            return None
        else:
            lo, step = k + 1, step * 2
    while lo < hi:
        mid = (lo + hi) // 2
        e = yield cands[mid]
        if e.feasible:
            hi, found = mid, e
        else:
            lo = mid + 1
    return found


__all__ = [
    "CONFIDENCE",
    "VERIFY_SEED_OFFSET",
    "Evaluated",
    "PlanResult",
    "Verified",
    "cached_capacity",
    "feasibility_steps",
    "judge",
    "measure",
    "plan_task",
    "replicate_seed",
    "run_plan_task",
    "scenario_of",
    "search",
    "trace_rows",
    "verify",
]
