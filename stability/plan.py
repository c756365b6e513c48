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
* only fleets cheaper than the best plan so far are simulated.

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


def measure(res) -> dict:
    """SLO metrics of one run (detail mode): TTFT P50/P99 and TBT P99 (from the TBT histograms),
    keyed ``ttft_p50`` etc. for a run with one class and ``ttft_p50@<class>`` per class otherwise,
    and the run's stability verdict, requests, completions and rejections."""
    rq = res.requests
    out = {"verdict": res.verdict().verdict, "completed": int(np.isfinite(rq["t_finish"]).sum()),
           "rejected": int(np.sum(rq["reject"] > 0)), "requests": int(rq["arrival"].size)}
    classes = res.class_summary()
    for d in classes:
        suffix = "" if len(classes) == 1 else f"@{d['name']}"
        out[f"ttft_p50{suffix}"] = d["ttft"]["p50"]
        out[f"ttft_p99{suffix}"] = d["ttft"]["p99"]
        out[f"tbt_p99{suffix}"] = d["tbt"]["p99"]
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
    keys = [k for k in reps[0] if k.startswith(("ttft_", "tbt_"))]
    ci = {k: [_finite(x) for x in t_interval([r[k] for r in reps], CONFIDENCE)] for k in keys}
    return {"replicates": [{k: _finite(v) if isinstance(v, float) else v for k, v in r.items()}
                           for r in reps],
            "metrics": ci, "unstable": sum(r["verdict"] == "unstable" for r in reps),
            "rejected": sum(r["rejected"] for r in reps), "r": base.r, "rate": base.rate}


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
    """The scenario of a candidate at the target rate (detail mode: TBT histograms); ``gpu_file``
    is the grid's (holding the TP groups' profiles), by default the spec's."""
    return Scenario(gpu=fam.gpu_key, model=fam.model, mode=fam.mode, workload=spec.workload,
                    gpu_file=gpu_file or spec.gpu_file, model_file=spec.model_file, scheduler=fam.scheduler,
                    options=fam.options, r=r, planner=spec.planner, rate=float(spec.rate), load=None,
                    n_requests=n_requests, seed=0, detail=True)


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
           base_seed: int = 0, grid: Grid | None = None, stop_early: bool = True) -> PlanResult:
    """Cheapest-first search with early stopping (module docstring).

    Parameters
    ----------
    spec : PlanSpec
    runner : Runner
        The one runner (its cache makes the search resumable).
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
    """
    grid = grid or build_grid(spec)
    out = PlanResult(spec, grid)
    by_family: dict = {}
    for c in grid.kept:
        by_family.setdefault(c.family, []).append(c)
    order = sorted(by_family, key=lambda f: (by_family[f][0].usd_per_hour, -by_family[f][0].headroom,
                                             f.label))
    memo: dict = {}

    def evaluate(c: Candidate) -> Evaluated:
        if (c.family, c.r) not in memo:
            task = plan_task(spec, c.family, c.r, n_requests, seeds, base_seed, grid.gpu_file)
            res = runner.run([task])[0]
            ok, missed = judge(res, spec.slo)
            memo[(c.family, c.r)] = e = Evaluated(c, res, ok, missed)
            out.evaluated.append(e)
        return memo[(c.family, c.r)]

    visited = 0
    for fam in order:
        cands = sorted(by_family[fam], key=lambda c: c.r)  # kept r's of a family are contiguous
        if stop_early and out.best is not None and cands[0].usd_per_hour >= out.best.candidate.usd_per_hour:
            break
        visited += 1
        if stop_early and out.best is not None:
            cands = [c for c in cands if c.usd_per_hour < out.best.candidate.usd_per_hour]
        found = smallest_feasible(cands, evaluate)
        if found is not None and (out.best is None
                                  or found.candidate.usd_per_hour < out.best.candidate.usd_per_hour):
            out.best = found
    out.counts = {"considered": grid.considered, "pruned": len(grid.pruned), "simulated": len(memo),
                  "saved": len(grid.kept) - len(memo), "families": len(grid.families),
                  "families_visited": visited}
    return out


def smallest_feasible(cands: list[Candidate], evaluate) -> Evaluated | None:
    """The feasible candidate of smallest r among ``cands`` (sorted by r), by exponential then
    binary search, assuming feasibility is monotone in r; None if the largest is infeasible."""
    if not cands:
        return None
    lo, step, hi = 0, 1, None  # invariant: every index < lo is infeasible
    while hi is None:
        k = min(lo + step - 1, len(cands) - 1)
        if evaluate(cands[k]).feasible:
            hi = k
        elif k == len(cands) - 1:
            return None
        else:
            lo, step = k + 1, step * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if evaluate(cands[mid]).feasible:
            hi = mid
        else:
            lo = mid + 1
    return evaluate(cands[hi])


__all__ = ["CONFIDENCE", "Evaluated", "PlanResult", "cached_capacity", "judge", "measure", "plan_task",
           "replicate_seed", "run_plan_task", "scenario_of", "search", "smallest_feasible"]
