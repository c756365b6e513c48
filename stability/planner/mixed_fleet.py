"""Mixed fleets: replicas of several GPU kinds behind one capacity-proportional random router.

Statement. A fleet holds ``n_i`` replicas of kind i (a GPU or a TP group, one scheduler); one
replica of kind i alone is stable for Poisson arrivals of rate below ``c_i`` (its capacity). A
random router sends each request, independently of everything else, to kind i with probability
``n_i w_i / W`` (``W = sum_j n_j w_j``, weights ``w_i > 0``) and uniformly to one of its ``n_i``
replicas. By Poisson thinning every replica of kind i then sees an independent Poisson stream of
rate ``lam w_i / W`` with the workload's length law, so the fleet is stable iff
``lam w_i / W < c_i`` for every i. With capacity-proportional weights ``w_i = c_i`` this reads

    lam < sum_i n_i c_i :

the capacity of the mixed fleet is the sum of its members' capacities. For any other weights the
fleet's capacity ``min_i c_i W / w_i`` is at most that sum (``W = sum_i n_i w_i`` and each
``c_i W / w_i >= min``, so ``sum_i n_i c_i >= min_i (c_i W / w_i)``), so the sum is the most any
static random split reaches, and with certified bounds ``c_i <= C_i`` (:mod:`theory.capacity`)
``sum_i n_i C_i`` is a certified bound for the mix: no mix whose sum is below the target can carry
it, whatever the split.

The planner knows the certified bounds, not the capacities, so it routes in proportion to
``C_i`` (:func:`member_rates`); the fleet is then stable iff ``lam < (sum_j n_j C_j) min_i
c_i / C_i``, which the simulation decides. By the same thinning, the independent subsystems
"kind i: n_i replicas, uniformly random routing, Poisson rate ``lam n_i C_i / sum_j n_j C_j``"
are the mixed fleet in distribution, so a mix is simulated as its members, with no new engine
code. Join-the-shortest-queue across unequal GPUs couples the members and is simulated as one
system (:mod:`stability.sim.fleet`); ``sum_i n_i C_i`` bounds it too, as it bounds every router
that does not look at the arriving request's own lengths (the fleet bound stated there).

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the random planner, r identical GPUs) and Theorem 1;
the thinning of a Poisson process (e.g. Kingman, *Poisson Processes*, 1993, Section 2.3, the
colouring theorem).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from theory.errors import FieldError


def mixed_capacity(capacities, counts) -> float:
    """``sum_i n_i c_i``: the capacity of a mix under the capacity-proportional random router
    (module docstring), and a certified bound when the ``c_i`` are."""
    if len(capacities) != len(counts):
        raise FieldError("counts", list(counts), f"one count per member ({len(capacities)})")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise FieldError("counts", n, "integers >= 0")
    return float(sum(n * c for n, c in zip(counts, capacities, strict=True)))


def member_rates(rate: float, weights, counts) -> list[float]:
    """The Poisson rate into each member (all ``n_i`` replicas of kind i together) under the random
    router with weights ``w_i``: ``rate n_i w_i / sum_j n_j w_j``."""
    total = sum(n * w for n, w in zip(counts, weights, strict=True))
    if not total > 0:
        raise FieldError("weights", list(weights), "positive weights of members with replicas")
    return [rate * n * w / total for n, w in zip(counts, weights, strict=True)]


@dataclass(frozen=True)
class MixCandidate:
    """A mixed fleet: ``members`` ``((Family, n), ...)`` of one model, mode and scheduler on
    different GPUs, with its price and certified capacity (the members' sum).

    Attributes
    ----------
    members : tuple
        ``((family, replicas), ...)``.
    usd_per_hour : float
        Sum of replicas x TP degree x the GPU's price.
    certified : float
        :func:`mixed_capacity` of the members' certified one-replica bounds, req/s.
    utilisation : float
        Target rate / certified.
    """

    members: tuple
    usd_per_hour: float
    certified: float
    utilisation: float

    @property
    def label(self) -> str:
        """``"1 x a100 + 2 x l4 (mistral-7b/real/sarathi)"``."""
        fam = self.members[0][0]
        knobs = ",".join(f"{k}={v}" for k, v in fam.options)
        what = f"{fam.model}/{fam.mode}/{fam.scheduler}" + (f"[{knobs}]" if knobs else "")
        return " + ".join(f"{n} x {f.gpu_key}" for f, n in self.members) + f" ({what})"

    @property
    def gpus(self) -> int:
        """GPUs of the fleet."""
        return sum(n * f.tp for f, n in self.members)


@dataclass(frozen=True)
class MixGrid:
    """Two-kind mixes of a grid: those whose certified sum reaches the target and that cost less
    than ``below`` (cheapest first), and how many were considered and pruned by the bound."""

    kept: tuple
    considered: int
    pruned: int
    below: float


def mix_grid(grid, spec, below: float | None = None) -> MixGrid:
    """Every mix of two families of ``grid`` that differ in GPU only (same model, mode, scheduler
    and knobs), ``a`` and ``b >= 1`` replicas within ``spec.r_min``..``spec.r_max`` GPUs (a
    family of EP degree e in whole expert-parallel groups: multiples of e), priced
    below ``below`` (a mix can only beat the pure fleets by costing less than the best of them);
    kept when the certified sum reaches ``spec.rate``. A family whose one replica certifies nothing
    (its weights leave no KV room) joins no mix: it would carry no traffic and only add cost.
    Order: price, then headroom, then label."""
    prices = {g: p.usd_per_gpu_hour for g, p in grid.prices.items()}
    limit = math.inf if below is None else float(below)
    fams = [f for f in grid.families if grid.one_gpu[f].bound > 0]
    kept, considered, pruned = [], 0, 0
    for i, fa in enumerate(fams):
        for fb in fams[i + 1:]:
            if fa.gpu == fb.gpu or (fa.model, fa.mode, fa.scheduler, fa.options) != (
                    fb.model, fb.mode, fb.scheduler, fb.options):
                continue
            ca, cb = grid.one_gpu[fa].bound, grid.one_gpu[fb].bound
            for a in range(fa.ep, spec.r_max // fa.tp + 1, fa.ep):
                for b in range(fb.ep, (spec.r_max - a * fa.tp) // fb.tp + 1, fb.ep):
                    if a * fa.tp + b * fb.tp < spec.r_min:
                        continue
                    usd = a * fa.tp * prices[fa.gpu] + b * fb.tp * prices[fb.gpu]
                    if usd >= limit:
                        continue
                    considered += 1
                    cert = mixed_capacity([ca, cb], [a, b])
                    if cert < spec.rate:
                        pruned += 1
                        continue
                    kept.append(MixCandidate(((fa, a), (fb, b)), usd, cert, spec.rate / cert))
    kept.sort(key=lambda m: (m.usd_per_hour, m.utilisation, m.label))
    return MixGrid(tuple(kept), considered, pruned, limit)


__all__ = ["MixCandidate", "MixGrid", "member_rates", "mix_grid", "mixed_capacity"]
