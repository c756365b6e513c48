"""Fleets of unequal GPUs behind one router: join-the-shortest-queue, shortest expected delay, or a
weighted random split.

A fleet is a list of members, each ``count`` identical nodes (one GPU kind or TP group, one
scheduler and its parameters) with a weight ``w`` (its capacity, req/s per node). Nodes are
numbered member by member. The routers (:mod:`stability.sim.routing`):

* ``"jsq"``: each request joins the node with the fewest pending requests at its arrival, ties to
  the lowest index. Identical members give exactly the simulation of ``planner="jsq"``.
* ``"sed"``: shortest expected delay, the node minimising ``(pending + 1) / w``.
* ``"random"``: node g with probability ``w_g / sum_h w_h``, independently of everything (the
  capacity-proportional random router of :mod:`stability.planner.mixed_fleet` when ``w`` are capacities).

Which rule for unequal GPUs. Fewest-pending JSQ ignores speed: at light load the slow GPUs receive
as many requests as the fast ones, and their requests wait longer. Normalising by capacity (SED)
sends a request to a slow GPU only when the fast ones hold proportionally more work. Under
either rule a node receives nothing while another is sufficiently shorter, so no member is fed
beyond what it drains while another idles; that they carry up to the sum of the members'
capacities is checked by simulation (tests/test_fleet.py), not proven here. Both are offered;
``"jsq"`` is the default because it needs no capacity estimate, ``"sed"`` serves unequal GPUs
better: in tests/test_mixed_fleet.py one A100 and two L4s meet the SLOs at 75 req/s (TBT P99
limit 150 ms) behind SED and not behind JSQ, which sends a request to an L4 whenever it holds no
more pending requests than the A100.

Fleet bound (any router that does not look at the arriving request's own lengths: all three).
Node g alone certifies ``c_g`` (:mod:`theory.capacity`): its proof charges each request ``j``
served by g a GPU-time ``w_j^g`` with ``sum_{j finished on g by t} w_j^g <= t`` for any schedule,
and ``E[w^g] = 1 / c_g`` (and likewise for KV-token-seconds). Such a router's choice for request
``j`` depends on the past only, so the lengths routed to g are i.i.d. with the workload's law
(Doob's optional skipping) and the SLLN gives ``A_g(t) <= c_g (t + Q_g(t) w_max) + o(t)``,
``A_g`` the requests routed to g by t and ``Q_g`` those unfinished. Summed over nodes,
``Q(t) >= (lam - sum_g c_g) t / (w_max max_g c_g) + o(t)``: no such router carries more than the
sum of the members' certified bounds, which is therefore a certified bound for the fleet behind
JSQ or SED too. The router can at most keep every member fully used.

:func:`run_fleet` simulates a fleet given as (cost model, scheduler, params) members;
:func:`simulate_fleet` one given as scenarios, one per GPU kind, returning one
:class:`stability.sim.simulate.SimResult` per member.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1, Theorem 1; J. Selen,
I. Adan, S. Kapodistria, J. van Leeuwaarden (2016), "Steady-state analysis of shortest expected
delay routing", Queueing Systems 84, 309-354 (the SED rule); J. L. Doob (1936), "Note on
probability", Annals of Mathematics 37, 363-367 (optional skipping).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from types import ModuleType

import numpy as np

from stability.sim.classes import draw_classes, parse_classes
from stability.sim.engine import Recording
from stability.sim.gpu import GpuRun, RunOptions, collect, run_gpu, tables_for
from stability.sim.registry import get_scheduler
from stability.sim.routing import Requests, jsq_route_nodes
from stability.sim.simulate import (
    Scenario,
    SimResult,
    class_mix,
    cost_model_of,
    make_params,
    tbt_start,
    validate_scenario,
    workload_of,
)
from theory.bounds import T_bar_R
from theory.cost import CostModel
from theory.errors import FieldError, UnknownNameError

ROUTERS = ("jsq", "sed", "random")


@dataclass(frozen=True)
class Member:
    """``count`` identical nodes of a fleet.

    Attributes
    ----------
    cm : CostModel
        The nodes' batch-time model (Eq. 2-7).
    scheduler : module
        A scheduler of :mod:`stability.schedulers` (not a disaggregated one).
    params : object
        Its parameters (``scheduler.make_params``).
    count : int
        Number of nodes.
    weight : float
        A node's capacity, req/s (used by ``"sed"`` and ``"random"``).
    """

    cm: CostModel
    scheduler: ModuleType
    params: object
    count: int = 1
    weight: float = 1.0


@dataclass(frozen=True, eq=False)
class FleetRun:
    """A simulated fleet: ``node`` of each request, ``kind`` (member index) of each node, and each
    node's :class:`stability.sim.gpu.GpuRun` (its requests in arrival order)."""

    node: np.ndarray
    kind: np.ndarray
    runs: list[GpuRun]


def _check(members: Sequence[Member], router: str) -> None:
    if router not in ROUTERS:
        raise UnknownNameError("router", router, ROUTERS)
    if not members:
        raise FieldError("members", [], "at least one fleet member")
    for m in members:
        if isinstance(m.count, bool) or not isinstance(m.count, (int, np.integer)) or m.count < 1:
            raise FieldError("member count", m.count, "an integer >= 1")
        if router != "jsq" and not (isinstance(m.weight, (int, float)) and math.isfinite(m.weight)
                                    and m.weight > 0):
            raise FieldError("member weight", m.weight, "a finite capacity > 0 (req/s)")
        if getattr(m.scheduler, "DISAGGREGATED", False):
            raise FieldError("member scheduler", m.scheduler.NAME, "a scheduler that runs on one node")


def run_fleet(members: Sequence[Member], requests: Requests, router: str = "jsq",
              rng: np.random.Generator | None = None, recording: Recording | None = None) -> FleetRun:
    """Route ``requests`` (arriving at sorted times) to the members' nodes and simulate them.

    Parameters
    ----------
    members : sequence of Member
    requests : Requests
        Arrival times (sorted), lengths and classes (:class:`stability.sim.routing.Requests`).
    router : str
        ``"jsq"``, ``"sed"`` or ``"random"`` (module docstring).
    rng : numpy.random.Generator
        The random router's stream (needed for ``"random"`` only).
    recording : Recording
        What every node records (:class:`stability.sim.engine.Recording`): the number of classes,
        TBT gaps (detail), the batch log, each class's TBT SLO to count the gaps above it, and the
        time from which the TBT histograms count tokens (None: one class, no detail, no log).
    """
    recording = Recording() if recording is None else recording
    _check(members, router)
    arrival, L_P, L_D, cls = requests.arrival, requests.L_P, requests.L_D, requests.cls
    if arrival.size and np.any(np.diff(arrival) < 0):
        raise FieldError("arrival", "unsorted", "non-decreasing arrival times")
    detail, log = recording.detail, recording.log
    kind = np.repeat(np.arange(len(members)), [m.count for m in members])
    weights = np.array([members[i].weight for i in kind], dtype=float)
    if router == "random":
        if rng is None:
            raise FieldError("rng", None, "a numpy Generator for the random router")
        node = rng.choice(kind.size, size=arrival.size, p=weights / weights.sum())
        options = RunOptions(**{f.name: getattr(recording, f.name) for f in fields(Recording)})
        runs = [run_gpu(members[kind[g]].cm, members[kind[g]].scheduler, members[kind[g]].params,
                        arrival[node == g], L_P[node == g], L_D[node == g], cls[node == g], options)
                for g in range(kind.size)]
        return FleetRun(node, kind, runs)
    per_member = [(m.scheduler.loop, tables_for(m.cm, L_P, L_D, getattr(m.params, "chunk", None)),
                   m.params.record()) for m in members]
    node, states = jsq_route_nodes([per_member[i] for i in kind], requests, recording,
                                   weights=list(weights) if router == "sed" else None)
    runs = []
    for g, st in enumerate(states):
        mask = node == g
        runs.append(collect(st, arrival[mask], L_P[mask], L_D[mask], cls[mask], detail and log))
    return FleetRun(node, kind, runs)


SHARED = ("workload", "pad", "rate", "load", "n_requests", "seed", "detail", "log", "trace", "classes",
          "total_cap", "planner", "warmup")


def simulate_fleet(members: Sequence[Scenario], router: str = "jsq",
                   weights: Sequence[float] | None = None) -> list[SimResult]:
    """Simulate a fleet given as scenarios (:class:`stability.sim.simulate.Scenario`), one per
    member: its GPU, model, mode, scheduler and options, and ``r`` nodes. The arrivals (Poisson at
    ``rate`` req/s into the whole fleet, ``n_requests``, ``seed``), workload, classes, detail and warm-up
    are the members' and must agree (the first member's random streams, as
    :func:`stability.sim.simulate.simulate` draws them). ``weights`` are the members' per-node
    capacities (req/s) for ``"sed"`` and ``"random"``.

    Returns one :class:`stability.sim.simulate.SimResult` per member, holding the requests routed
    to it (``node`` local to the member); :func:`stability.planner.search.measure` takes them as one system.
    """
    members = list(members)
    if not members:
        raise FieldError("members", [], "at least one fleet member")
    first = members[0]
    for sc in members:
        validate_scenario(sc)
        for name in SHARED:
            if getattr(sc, name) != getattr(first, name):
                raise FieldError(f"members: {name}", getattr(sc, name),
                                 f"the same value for every member ({getattr(first, name)!r})")
    if first.trace is not None or first.rate is None or first.pad:
        raise FieldError("members: rate/trace/pad", (first.rate, first.trace, first.pad),
                         "a Poisson rate (req/s) into the fleet, no trace, no padding")
    if weights is None:
        weights = [1.0] * len(members)
    if len(weights) != len(members):
        raise FieldError("weights", list(weights), f"one capacity per member ({len(members)})")
    cms = [cost_model_of(sc) for sc in members]
    w = workload_of(first, cms[0])
    scheds = [get_scheduler(sc.scheduler) for sc in members]
    given = parse_classes(first.classes) if first.classes else ()
    params = [make_params(s, cm, dict(sc.options), given)
              for s, cm, sc in zip(scheds, cms, members, strict=True)]
    classes = class_mix(first, params[0])
    ss_arrival, ss_lengths, ss_route, ss_class = np.random.SeedSequence(first.seed).spawn(4)
    n = first.n_requests
    arrival = np.cumsum(np.random.default_rng(ss_arrival).exponential(1.0 / first.rate, size=n))
    L_P, L_D = w.sample(n, np.random.default_rng(ss_lengths))
    cls = draw_classes(classes, n, np.random.default_rng(ss_class))
    slo = np.array([c.tbt_slo for c in classes])
    fleet = [Member(cm, s, p, int(sc.r), float(wt))
             for cm, s, p, sc, wt in zip(cms, scheds, params, members, weights, strict=True)]
    tbt_from = tbt_start(arrival, first.warmup)
    recording = Recording(n_class=len(classes), detail=first.detail, log=first.log, tbt_slo=slo,
                          tbt_from=tbt_from)
    out = run_fleet(fleet, Requests(arrival, L_P, L_D, cls), router, np.random.default_rng(ss_route),
                    recording)
    results = []
    offset = 0
    for i, (sc, cm, p) in enumerate(zip(members, cms, params, strict=True)):
        mine = out.kind[out.node] == i
        runs = out.runs[offset:offset + sc.r]
        local = out.node[mine] - offset
        rq = {"arrival": arrival[mine], "L_P": L_P[mine], "L_D": L_D[mine], "cls": cls[mine], "node": local}
        for key in ("t_start", "t_first", "t_finish", "tbt_max", "tbt_viol", "reject", "preemptions"):
            values = np.full(local.size, np.nan)
            for g, run in enumerate(runs):
                values[local == g] = getattr(run, key)
            rq[key] = values
        lam = first.rate * mine.sum() / n
        results.append(SimResult(replace(sc, rate=float(lam)), cm, w, float(lam), sc.r / T_bar_R(cm, w),
                                 p, local, runs, rq, classes, tbt_from))
        offset += sc.r
    return results


__all__ = ["ROUTERS", "FleetRun", "Member", "run_fleet", "simulate_fleet"]
