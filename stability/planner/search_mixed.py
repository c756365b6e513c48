"""Mixed fleets in the planner's search: simulate the two-kind mixes cheaper than the best pure plan.

Routers (``router``):

* ``"random"`` (default): the capacity-proportional random router. A mix of ``n_i`` replicas of
  kinds i is simulated as its members' independent subsystems, each at its share
  ``lam n_i C_i / sum_j n_j C_j`` of the target rate (:mod:`stability.planner.mixed_fleet`: Poisson thinning
  makes the two the same system in distribution).
* ``"jsq"`` (fewest pending requests) and ``"sed"`` (shortest expected delay, weights the
  members' certified bounds ``C_i``): one Poisson stream at the target rate into every replica of
  the mix, advanced together (:func:`stability.sim.fleet.simulate_fleet`).

Either way the members' runs are measured as one system (:func:`stability.planner.runs.measure`). The
pruning is the same for every router: no router that ignores the arriving request's own lengths
carries more than ``sum_i n_i C_i`` (:mod:`stability.sim.fleet`, fleet bound). Pure fleets are
planned behind the random router whatever ``router`` says.

The search (:func:`search_mixes`) looks only at mixes cheaper than the best pure plan (only they
can beat every pure fleet), whose certified capacity, the sum of the members' certified bounds,
reaches the target. They are simulated cheapest first, each judged by the pure fleets' sequential
rule (:func:`stability.planner.search.judge`: replicates doubled while the intervals straddle a limit),
until one meets the SLOs; a mix is skipped
without simulation when a mix of the same two kinds with at least as many replicas of each has
missed (feasibility is assumed monotone in each count, as in r for pure fleets; behind JSQ an
added slow replica is also one more place a request can land and be served slowly, so there it is
an assumption the brute-force comparisons of tests/test_mixed_fleet.py check on a small grid), and
at most ``budget`` mixes are simulated.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1; :mod:`stability.planner.mixed_fleet`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from stability.planner.mixed_fleet import MixCandidate, member_rates, mix_grid
from stability.planner.runs import measure, replicate_seed, summarize_replicates
from stability.planner.search import MAX_SEEDS, PlanResult, check_max_seeds, replicate, scenario_of
from stability.runner import Runner, derive_seed
from stability.sim.fleet import ROUTERS, simulate_fleet
from theory.errors import FieldError, UnknownNameError

MIN_MEMBER_REQUESTS = 100  # requests simulated for the smallest member of a mix


@dataclass(frozen=True)
class MixedRun:
    """The runner's task of a mix (:mod:`stability.runner`): replicates ``first .. first + seeds -
    1`` of the ``members`` (one scenario per kind) measured as one system.

    Random router: replicate k runs member m with the m-th seed spawned from
    :func:`stability.planner.runs.replicate_seed` ``(seed, k)``. ``"jsq"`` or ``"sed"`` (with
    ``weights``): the members share one arrival stream at their common rate, replicate k seeded
    ``replicate_seed(seed, k)`` (:func:`stability.sim.fleet.simulate_fleet`). Identity ``{"kind":
    "plan_mixed", "members": [Scenario.to_dict(), ...], "seeds": k, "seed": s}``, with ``"router"``
    and ``"weights"`` for a router other than random and ``"first"`` when it is > 0."""

    members: tuple
    seeds: int
    seed: int = 0
    router: str = "random"
    weights: tuple = ()
    first: int = 0

    @classmethod
    def seeded(cls, members, seeds: int, base_seed: int, router: str = "random", weights=()) -> MixedRun:
        """The first ``seeds`` replicates, seeded from the task's identity and ``base_seed``
        (:func:`stability.runner.derive_seed`)."""
        run = cls(tuple(members), int(seeds), 0, router, tuple(float(w) for w in weights))
        return replace(run, seed=derive_seed(run.identity(), base_seed))

    def identity(self) -> dict:
        """The members, the router and its weights (not random), replicates, seed and first replicate."""
        out = {"kind": "plan_mixed"}
        if self.router != "random":
            out |= {"router": self.router, "weights": list(self.weights)}
        out |= {"members": [m.to_dict() for m in self.members], "seeds": self.seeds, "seed": self.seed}
        return {**out, "first": self.first} if self.first else out

    def replicates(self) -> range:
        """The replicate indices the task runs."""
        return range(self.first, self.first + self.seeds)

    def lengthened(self, factor: int) -> MixedRun | None:
        """The task with every member's runs ``factor`` times longer, from its first replicates,
        under the same seed; None when a member replays a trace."""
        if any(m.trace for m in self.members):
            return None
        longer = tuple(replace(m, n_requests=factor * int(m.n_requests)) for m in self.members)
        return replace(self, members=longer, first=0)

    def run(self) -> dict:
        """Each replicate's metrics over the members as one system
        (:func:`stability.planner.runs.measure`), pooled
        (:func:`stability.planner.runs.summarize_replicates`), with the members' r and the fleet's
        rate."""
        from stability.sim.simulate import simulate

        reps = []
        for k in self.replicates():
            seed = replicate_seed(self.seed, k)
            if self.router == "random":
                seeds = np.random.SeedSequence(seed).generate_state(len(self.members))
                reps.append(measure(*(simulate(replace(m, seed=int(sd)))
                                      for m, sd in zip(self.members, seeds, strict=True))))
            else:
                reps.append(measure(*simulate_fleet([replace(m, seed=seed) for m in self.members],
                                                    self.router, list(self.weights))))
        rate = (sum(m.rate for m in self.members) if self.router == "random" else self.members[0].rate)
        return {**summarize_replicates(reps), "r": [m.r for m in self.members], "rate": rate}


def mixed_task(res: PlanResult, mix: MixCandidate, n_requests: int, seeds: int, base_seed: int,
               router: str = "random") -> MixedRun:
    """The runner task of a mix, seeded from the task's content. Random router: each member at its
    share of the rate (routing weights: the members' certified one-replica bounds), with its share
    of ``n_requests`` (at least ``MIN_MEMBER_REQUESTS``). JSQ or SED: every member at the target
    rate and ``n_requests`` (one shared stream), the certified bounds as weights."""
    spec, grid = res.spec, res.grid
    counts = [n for _, n in mix.members]
    bounds = [grid.one_gpu[f].bound for f, _ in mix.members]
    if router not in ROUTERS:
        raise UnknownNameError("router", router, ROUTERS)
    if router != "random":
        members = [scenario_of(spec, fam, n, n_requests, grid.gpu_file) for fam, n in mix.members]
        return MixedRun.seeded(members, seeds, base_seed, router, bounds)
    rates = member_rates(spec.rate, bounds, counts)
    members = []
    for (fam, n), rate in zip(mix.members, rates, strict=True):
        share = max(MIN_MEMBER_REQUESTS, round(n_requests * rate / spec.rate))
        members.append(replace(scenario_of(spec, fam, n, share, grid.gpu_file), rate=float(rate)))
    return MixedRun.seeded(members, seeds, base_seed)


@dataclass(frozen=True)
class MixEvaluated:
    """A simulated mix: its pooled :class:`MixedRun` result, whether it met the SLOs, what it missed,
    and whether the intervals decided it (:func:`stability.planner.search.judge`)."""

    mix: MixCandidate
    result: dict
    feasible: bool
    missed: tuple
    decided: bool = True


@dataclass
class MixResult:
    """What the search over mixes found.

    Attributes
    ----------
    evaluated : list of MixEvaluated
        Every simulated mix, in the order simulated.
    best : MixEvaluated or None
        The cheapest feasible mix found.
    counts : dict
        ``considered`` (mixes cheaper than the best pure plan), ``pruned`` (certified sum below
        the target), ``simulated``, ``skipped`` (dominated by a missed mix), ``budget``,
        ``exhausted`` (whether the budget ran out before the search ended).
    below : float
        The price a mix had to beat (the best pure plan's; infinite without one).
    router : str
        The mixes' router: ``"random"``, ``"jsq"`` or ``"sed"`` (module docstring).
    """

    evaluated: list = field(default_factory=list)
    best: MixEvaluated | None = None
    counts: dict = field(default_factory=dict)
    below: float = float("inf")
    router: str = "random"

    @property
    def beats_pure(self) -> bool:
        """Whether a mix meets the SLOs for less than every pure fleet that does."""
        return self.best is not None


def search_mixes(res: PlanResult, runner: Runner, n_requests: int, seeds: int, base_seed: int = 0,
                 budget: int = 8, router: str = "random", max_seeds: int = MAX_SEEDS) -> MixResult:
    """Cheapest-first search over the two-kind mixes cheaper than ``res.best``, behind ``router``
    (module docstring); each mix judged as a pure fleet is, its replicates doubled from ``seeds``
    up to ``max_seeds`` while the intervals leave it undecided
    (:func:`stability.planner.search.replicate`)."""
    check_max_seeds(seeds, max_seeds)
    if res.spec.trace is not None:
        raise FieldError("--mixed", True, "no --trace (a mix splits Poisson arrivals)")
    if router not in ROUTERS:
        raise UnknownNameError("router", router, ROUTERS)
    below = res.best.candidate.usd_per_hour if res.best is not None else None
    grid = mix_grid(res.grid, res.spec, below)
    out = MixResult(below=grid.below, router=router)
    missed: list[MixCandidate] = []
    skipped = 0
    for mix in grid.kept:
        if any(_dominated(mix, m) for m in missed):
            skipped += 1
            continue
        if len(out.evaluated) >= budget:
            break
        (result, j), = replicate(runner, [mixed_task(res, mix, n_requests, seeds, base_seed, router)],
                                 res.spec.slo, max_seeds)
        out.evaluated.append(MixEvaluated(mix, result, j.feasible, j.missed, j.decided))
        if j.feasible:
            out.best = out.evaluated[-1]
            break
        missed.append(mix)
    done = out.best is not None or len(out.evaluated) + skipped == len(grid.kept)
    out.counts = {"considered": grid.considered, "pruned": grid.pruned, "simulated": len(out.evaluated),
                  "skipped": skipped, "budget": int(budget), "exhausted": not done}
    return out


def _dominated(mix: MixCandidate, missed: MixCandidate) -> bool:
    """Whether ``mix`` has the kinds of ``missed`` and no more replicas of either."""
    kinds = [f for f, _ in mix.members]
    return kinds == [f for f, _ in missed.members] and all(
        n <= m for (_, n), (_, m) in zip(mix.members, missed.members, strict=True))


__all__ = ["MIN_MEMBER_REQUESTS", "MixEvaluated", "MixResult", "MixedRun", "mixed_task", "search_mixes"]
