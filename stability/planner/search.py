"""The planner's search: simulate the candidates :mod:`stability.planner.grid` kept, cheapest first.

Every simulation is a task of the one runner (:mod:`stability.runner`,
:class:`stability.planner.runs.PlanRun`): a scenario at the target rate on r GPUs behind the
uniformly random planner, replicated over a few seeds, whose result is the SLO metrics with
Student-t intervals, measured after the run's warm-up (:func:`stability.planner.runs.measure`).
Tasks are cached by content and seeded from their content (:func:`stability.runner.derive_seed`),
so a search resumes where it stopped and its result does not depend on the number of workers.

The search (:func:`search`):

* candidates whose certified capacity is below the target are pruned without simulation
  (:func:`stability.planner.grid.build_grid`);
* families (GPU x model x mode x scheduler x knobs) are visited in the order of their cheapest
  unpruned fleet; the search stops once the cheapest fleet of the next family costs at least the
  best feasible plan found;
* within a family the smallest feasible fleet size is found by exponential then binary search over
  r, which is valid when feasibility is monotone in r. Under random routing at a fixed total
  rate, each node of r GPUs sees Poisson(lam / r): more GPUs only lower every node's load. This
  is an assumption about the schedulers' latency (lower load never hurts), not a theorem; the
  brute-force comparison of tests/test_plan.py checks it on a small grid. The search always
  simulates the kept fleet one replica smaller than the one it returns, and
  :meth:`PlanResult.below_best` gives it: when its verdict was undecided the returned ``r`` may
  not be the smallest, and ``llmq plan`` says so;
* only fleets cheaper than the best plan so far are simulated;
* ``parallel`` families are searched at once, their probes sent to the runner as one batch (a
  process pool or a Dask cluster): the best plan does not depend on it.

:func:`verify` re-simulates the returned plans with new seeds and longer runs.

Feasibility is decided with its uncertainty (:func:`judge`, :func:`replicate`). Each SLO metric is
estimated by the mean over independent replicates with its 95 % Student-t interval; each replicate's
stability verdict (:func:`stability.sim.metrics.stability_verdict`) is one vote. A candidate is

* *decided infeasible* when every replicate (at least two) is ``unstable``, a request was
  rejected, a metric is undefined, or some metric's interval lies wholly above its limit (low end
  > limit);
* *decided feasible* when, with none of these, no replicate is ``unstable`` and every metric's
  interval lies within its limit (high end <= limit);
* otherwise undecided: the replicates are doubled (2 -> 4 -> 8) up to ``max_seeds`` and the
  candidate judged again on all of them.

A short run near capacity ends in its transient: its verdict says ``unstable`` where a longer
run's does not, and its latencies are still rising (both seen on the defaults of ``llmq plan``, on
fleets running close to their capacity). So a candidate is simulated again from its first
replicates with runs :data:`LONGER` (3) times as long, and judged on those alone, when a replicate
of its first runs is ``unstable`` and nothing else rules it out, or when it is still undecided at
``max_seeds``: at most :data:`LENGTHENINGS` (2) times (the task's ``lengthened``; a trace is replayed
whole and is not lengthened). Still undecided at ``max_seeds`` on the longest runs, it is judged
by the means and the majority (every mean within its limit and fewer than half the replicates
``unstable``: feasible) and marked undecided.

Replicate k of a candidate has the seed :func:`stability.planner.runs.replicate_seed` ``(s, k)``, s the
seed of its first task, whichever task ran it (a task runs replicates ``first .. first + seeds - 1``), so a
candidate's replicates, its verdict and the plan depend neither on the number of workers nor on
the order of the runs or an interruption. Each look decides a wrong "feasible" for a metric whose
expected value exceeds its limit with probability at most 2.5 % (the upper end of a two-sided 95 %
interval, under the t model), so over the at most ``1 + log2(max_seeds / seeds)`` looks at most
7.5 % at the defaults (a union bound; up to three times as many looks, 22.5 %, for a candidate
lengthened twice); likewise for a wrong "infeasible" by a metric. The metrics are
non-negative latencies, so an interval is reported as ``[max(low, 0), high]``: the intersection
with the parameter space has the same coverage.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the random planner), Section 7 (TTFT and TBT SLOs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from stability.planner.grid import Candidate, Family, Grid, OneGpu, build_grid, one_gpu_capacity
from stability.planner.runs import PlanRun, finite, summarize_replicates
from stability.planner.slo import SloSpec
from stability.planner.spec import PlanSpec
from stability.runner import Cache, Runner, task_key
from stability.sim.metrics import WARMUP
from stability.sim.simulate import Scenario
from theory.errors import FieldError

MAX_SEEDS = 8  # replicates per candidate at most (adaptive replication, module docstring)


@dataclass(frozen=True)
class SearchOptions:
    """How :func:`search` simulates a candidate and walks the grid.

    Attributes
    ----------
    n_requests, seeds : int
        Requests per simulation and a candidate's first replicates.
    base_seed : int
        Base of every task's seed.
    stop_early : bool
        Stop at the first family whose cheapest fleet costs at least the best plan, and search
        only fleets cheaper than it (default). False visits every family and finds each one's
        smallest feasible fleet: a fuller Pareto front at the price of more simulations.
    parallel : int
        Families searched at once: their next probes go to the runner as one batch. The best plan
        does not depend on it (each family's search sees only its own results, tasks are seeded
        by content, and ties go to the family first in the order); more families may be
        simulated than with 1.
    max_seeds : int
        Replicates per candidate at most: an undecided candidate's are doubled up to it
        (:func:`replicate`); at least ``seeds``.
    """

    n_requests: int = 400
    seeds: int = 2
    base_seed: int = 0
    stop_early: bool = True
    parallel: int = 1
    max_seeds: int = MAX_SEEDS


# --- the bound cache ------------------------------------------------------------------------------


def cached_capacity(cache: Cache):
    """:func:`stability.planner.grid.one_gpu_capacity` kept in the runner's cache (keyed by the family, the
    workload, the GPU and model files' content and the code version),
    for :func:`stability.planner.grid.build_grid`."""

    def capacity(spec: PlanSpec, fam: Family) -> OneGpu:
        key = task_key({"kind": "plan_bound", "family": fam.label, "options": list(map(list, fam.options)),
                        "workload": spec.workload, "gpu_file": spec.gpu_file, "model_file": spec.model_file,
                        "tp": fam.tp, **({"ep": fam.ep} if fam.ep > 1 else {})})
        hit = cache.get(key)
        if hit is not None:
            return OneGpu(**{k: math.nan if v is None else v for k, v in hit.items()})
        one = one_gpu_capacity(spec, fam)
        cache.put(key, {"family": fam.label}, {k: finite(v) for k, v in one.__dict__.items()
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
    decided: bool = True


class Judgement(NamedTuple):
    """The sequential rule's verdict on a result (module docstring).

    Attributes
    ----------
    feasible : bool
        Unstable seeds a minority, no rejection, every SLO's mean within its limit.
    missed : tuple of str
        The SLO keys whose mean is above the limit or undefined, ``"stable"`` (at least half the
        seeds unstable), ``"rejections"``.
    decided : bool
        Whether the evidence decides ``feasible``: some miss is certain (every seed of at least
        two unstable, a rejection, an undefined metric, an interval wholly above its limit), or
        no seed is unstable and every interval lies within its limit.
    """

    feasible: bool
    missed: tuple
    decided: bool


def judge(result: dict, slo: SloSpec) -> Judgement:
    """Judge a ``plan`` or ``plan_mixed`` result against ``slo`` by the sequential rule of the
    module docstring: the verdict by the means (for stability, by the majority of the seeds), and
    whether the 95 % intervals (the seeds' unanimity) decide it."""
    seeds, unstable = len(result["replicates"]), int(result["unstable"])
    missed = ["stable"] * (unstable > 0 and 2 * unstable >= seeds) + ["rejections"] * bool(result["rejected"])
    certain_miss = bool(result["rejected"]) or unstable == seeds >= 2
    open_ = 0 < unstable and not certain_miss
    for s in slo.limits:
        mean, lo, hi = result["metrics"].get(s.key, [None, None, None])
        if mean is None or mean > s.limit:
            missed.append(s.key)
        if mean is None or (lo is not None and lo > s.limit):
            certain_miss = True
        elif hi is None or hi > s.limit:
            open_ = True
    return Judgement(not missed, tuple(missed), certain_miss or not open_)


LONGER = 3  # an unstable seed's or an undecided candidate's runs are made this many times longer
LENGTHENINGS = 2  # ... at most this many times (module docstring)


def _out_without_stability(result: dict, slo: SloSpec) -> bool:
    """Whether a rejection or an SLO rules ``result`` out for certain, whatever its seeds' verdicts."""
    j = judge({**result, "unstable": 0}, slo)
    return j.decided and not j.feasible


def replicate(runner: Runner, tasks: list, slo: SloSpec, max_seeds: int = MAX_SEEDS
              ) -> list[tuple[dict, Judgement]]:
    """Run ``tasks`` (:class:`stability.planner.runs.PlanRun` or
    :class:`stability.planner.search_mixed.MixedRun`, each its first replicates) as one batch and
    add replicates to the undecided ones until each is decided or has ``max_seeds`` (module
    docstring).

    Each round doubles an undecided task's replicates (capped at ``max_seeds``) with the task at
    ``first = n``, ``seeds = m`` under the first task's seed, so replicate k has the same
    seed whichever round ran it. A task with a seed ``unstable`` on its first runs that nothing
    else rules out, or undecided at ``max_seeds``, is started again from its first replicates with runs
    :data:`LONGER` times longer (its ``lengthened``; not a trace), at most :data:`LENGTHENINGS`
    times, and judged on those alone. Returns each task's pooled result (``replicates``,
    ``metrics``, ``unstable``, ``rejected`` over every replicate of its final length; ``r``,
    ``rate``; ``elapsed_s`` summed; ``lengthened``, how many times, and ``shorter_runs``, the
    replicates of the shorter runs set aside) and its :class:`Judgement`."""
    pooled: list[dict] = [{"lengthened": 0, "shorter_runs": 0} for _ in tasks]
    judged: list = [None] * len(tasks)
    current = list(tasks)  # each task as it now runs (lengthened or not)
    todo = list(enumerate(tasks))
    while todo:
        nxt = []
        for (i, _), res in zip(todo, runner.run([t for _, t in todo]), strict=True):
            reps = pooled[i].get("replicates", []) + res["replicates"]
            pooled[i] = {**pooled[i], **res, **summarize_replicates(reps),
                         "elapsed_s": pooled[i].get("elapsed_s", 0.0) + res.get("elapsed_s", 0.0)}
            judged[i] = judge(pooled[i], slo)
            n = len(reps)
            doubt = ((pooled[i]["unstable"] and not pooled[i]["lengthened"]
                      and not _out_without_stability(pooled[i], slo))
                     or (not judged[i].decided and n >= max_seeds))
            if (doubt and pooled[i]["lengthened"] < LENGTHENINGS
                    and (longer := current[i].lengthened(LONGER)) is not None):
                current[i] = longer
                pooled[i] = {"lengthened": pooled[i]["lengthened"] + 1, "elapsed_s": pooled[i]["elapsed_s"],
                             "shorter_runs": pooled[i]["shorter_runs"] + n}
                nxt.append((i, longer))
            elif not judged[i].decided and n < max_seeds:
                nxt.append((i, replace(current[i], first=n, seeds=min(n, max_seeds - n))))
        todo = nxt
    return list(zip(pooled, judged, strict=True))


def check_max_seeds(seeds: int, max_seeds: int, name: str = "max_seeds", seeds_name: str = "seeds") -> int:
    """``max_seeds`` if it is an integer >= ``seeds`` (the first replicates), else a FieldError
    naming ``name`` and ``seeds_name``."""
    if isinstance(max_seeds, bool) or not isinstance(max_seeds, int) or max_seeds < seeds:
        raise FieldError(name, max_seeds, f"an integer >= {seeds_name} ({seeds}), the first replicates "
                                          "per candidate")
    return max_seeds


def scenario_of(spec: PlanSpec, fam: Family, r: int, n_requests: int, gpu_file: str | None = None
                ) -> Scenario:
    """The scenario of a candidate at the target rate, or replaying the spec's whole trace (detail
    mode: TBT histograms), whose SLO metrics leave out the warm-up the stability verdict leaves
    out (``warmup``, :data:`stability.sim.metrics.WARMUP`); ``gpu_file`` is the grid's (holding
    the TP and EP groups' profiles), by default the spec's."""
    if spec.trace is not None:
        n_requests = trace_rows(spec.trace)
    return Scenario(gpu=fam.gpu_key, model=fam.model, mode=fam.mode, workload=spec.workload,
                    gpu_file=gpu_file or spec.gpu_file, model_file=spec.model_file, scheduler=fam.scheduler,
                    options=fam.options, r=r, planner=spec.planner,
                    rate=None if spec.trace else float(spec.rate), load=None, n_requests=n_requests,
                    seed=0, detail=True, trace=spec.trace, classes=tuple(map(tuple, spec.classes)),
                    warmup=WARMUP)


def trace_rows(path: str) -> int:
    """Requests in the trace at ``path``."""
    from theory.workload import read_trace

    return int(read_trace(path).L_P.size)


def plan_task(spec: PlanSpec, fam: Family, r: int, n_requests: int, seeds: int, base_seed: int,
              gpu_file: str | None = None) -> PlanRun:
    """The runner task of one candidate's first ``seeds`` replicates, seeded from its content
    (``gpu_file``: the grid's); :func:`replicate` adds replicates under the same seed."""
    sc = scenario_of(spec, fam, r, n_requests, gpu_file)  # its seed: the task's, per replicate
    return PlanRun.seeded(sc, seeds, base_seed)


@dataclass
class PlanResult:
    """What a search found and what it cost.

    Attributes
    ----------
    spec : PlanSpec
    grid : Grid
    options : SearchOptions
        How the search simulated (requests per run, replicates).
    evaluated : list of Evaluated
        Every simulated candidate, in the order simulated.
    best : Evaluated or None
        The cheapest feasible plan.
    counts : dict
        ``considered``, ``pruned`` (by the bound), ``simulated`` (candidates), ``saved`` (kept
        candidates never simulated: early stopping and the search over r), ``families_visited``,
        ``runs`` (replicate simulations of every candidate, shorter runs set aside included),
        ``lengthened`` (candidates rerun with longer runs: an unstable seed, or undecided), ``undecided``
        (candidates the evidence did not decide at ``max_seeds``).
    """

    spec: PlanSpec
    grid: Grid
    options: SearchOptions = field(default_factory=SearchOptions)
    evaluated: list = field(default_factory=list)
    best: Evaluated | None = None
    counts: dict = field(default_factory=dict)

    def below_best(self) -> Evaluated | None:
        """The simulated fleet one replica smaller than the best plan in the best plan's family:
        the search's evidence that the best plan's ``r`` is the smallest (the search over r
        always simulates it when it was kept; None when the best is its family's smallest kept
        fleet, or there is no best)."""
        if self.best is None:
            return None
        c = self.best.candidate
        return next((e for e in self.evaluated
                     if e.candidate.family == c.family and e.candidate.r == c.r - 1), None)

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


def search(spec: PlanSpec, runner: Runner, options: SearchOptions = SearchOptions(),
           grid: Grid | None = None) -> PlanResult:
    """Cheapest-first search with early stopping (module docstring).

    Parameters
    ----------
    spec : PlanSpec
    runner : Runner
        The one runner (its cache makes the search resumable; its executor runs a batch of tasks
        on local processes or a Dask cluster).
    options : SearchOptions
        Requests per run, replicates, base seed, early stopping, families at once.
    grid : Grid, optional
        A grid already built for ``spec``.
    """
    from collections import deque

    o = options
    check_max_seeds(o.seeds, o.max_seeds)
    grid = grid or build_grid(spec)
    out = PlanResult(spec, grid, o)
    by_family: dict = {}
    for c in grid.kept:
        by_family.setdefault(c.family, []).append(c)
    order = sorted(by_family, key=lambda f: (by_family[f][0].usd_per_hour, -by_family[f][0].headroom,
                                             f.label))
    rank = {f: k for k, f in enumerate(order)}
    memo: dict = {}

    def evaluate_all(cands: list[Candidate]) -> list[Evaluated]:
        todo = list({(c.family, c.r): c for c in cands if (c.family, c.r) not in memo}.values())
        tasks = [plan_task(spec, c.family, c.r, o.n_requests, o.seeds, o.base_seed, grid.gpu_file)
                 for c in todo]
        for c, (res, j) in zip(todo, replicate(runner, tasks, spec.slo, o.max_seeds), strict=True):
            memo[(c.family, c.r)] = e = Evaluated(c, res, j.feasible, j.missed, j.decided)
            out.evaluated.append(e)
        return [memo[(c.family, c.r)] for c in cands]

    def better(e: Evaluated | None) -> bool:
        b = out.best
        return e is not None and (b is None or (e.candidate.usd_per_hour, rank[e.candidate.family])
                                  < (b.candidate.usd_per_hour, rank[b.candidate.family]))

    pending, active, visited = deque(order), [], 0
    while pending or active:
        while pending and len(active) < max(1, int(o.parallel)):
            fam = pending.popleft()
            cands = sorted(by_family[fam], key=lambda c: c.r)  # kept r's of a family are contiguous
            if o.stop_early and out.best is not None:
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
                  "families_visited": visited,
                  "runs": sum(len(e.result["replicates"]) + e.result["shorter_runs"] for e in out.evaluated),
                  "lengthened": sum(e.result["lengthened"] > 0 for e in out.evaluated),
                  "undecided": sum(not e.decided for e in out.evaluated)}
    return out


@dataclass(frozen=True)
class Verified:
    """A returned plan re-simulated independently: new seeds, a longer run, judged by the same
    sequential rule as the search (:func:`judge`, :func:`replicate`).

    Attributes
    ----------
    plan : Evaluated
        The plan as the search found it.
    result : dict
        The new replicates' pooled result.
    holds : bool
        No seed unstable, no rejection, every SLO's mean within its limit.
    missed : tuple of str
        The SLO keys (or ``"stable"``, ``"rejections"``) that failed.
    decided : bool
        Whether the intervals decide ``holds`` (else the replicates reached ``max_seeds``).
    """

    plan: Evaluated
    result: dict
    holds: bool
    missed: tuple
    decided: bool


VERIFY_SEED_OFFSET = 1_000_003  # base seed of the re-simulations: base_seed + this


def verify(res: PlanResult, runner: Runner, n_requests: int, seeds: int, base_seed: int = 0,
           max_seeds: int | None = None) -> list[Verified]:
    """Re-simulate the best plan and the Pareto front with seeds the search never used
    (``base_seed + VERIFY_SEED_OFFSET``) and ``n_requests`` requests (a longer run than the
    search's; a trace is replayed whole), ``seeds`` replicates first, doubled while undecided up
    to ``max_seeds`` (default ``seeds``: no more), all plans in one batch per round."""
    max_seeds = check_max_seeds(seeds, seeds if max_seeds is None else max_seeds)
    plans = list({id(e): e for e in ([res.best] if res.best else []) + res.front()}.values())
    tasks = [plan_task(res.spec, e.candidate.family, e.candidate.r, n_requests, seeds,
                       base_seed + VERIFY_SEED_OFFSET, res.grid.gpu_file) for e in plans]
    return [Verified(e, result, j.feasible, j.missed, j.decided)
            for e, (result, j) in zip(plans, replicate(runner, tasks, res.spec.slo, max_seeds), strict=True)]


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
    "LENGTHENINGS",
    "LONGER",
    "MAX_SEEDS",
    "VERIFY_SEED_OFFSET",
    "Evaluated",
    "Judgement",
    "PlanResult",
    "SearchOptions",
    "Verified",
    "cached_capacity",
    "check_max_seeds",
    "feasibility_steps",
    "judge",
    "plan_task",
    "replicate",
    "scenario_of",
    "search",
    "trace_rows",
    "verify",
]
