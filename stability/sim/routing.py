"""The resource planner: which GPU each request goes to (Section 3, Fig. 4; Section 4.1).

* ``random`` — each request goes to a node chosen uniformly at random (the paper's planner,
  Section 4.1). Routing does not depend on the state, so each node is simulated on its own.
* ``round_robin`` — request k goes to node k mod r; also state independent.
* ``jsq`` — join the shortest queue: each request goes to the node with the fewest pending
  requests at its arrival (ties to the lowest index). Nodes are advanced together, arrival by
  arrival, with the engine's resumable loops.

:func:`jsq_route_nodes` runs JSQ over nodes that differ (their own compiled loop, cost tables and
parameter record: GPUs of several kinds, :mod:`stability.sim.fleet`), by one of two rules:

* fewest pending requests (``weights=None``), the rule above;
* shortest expected delay (``weights`` ``w_g > 0``, a node's capacity): the node minimising
  ``(pending_g + 1) / w_g``, ties to the lowest index (Selen et al. 2016). With equal weights it picks
  the node JSQ picks.

Neither rule looks at the arriving request's own lengths, so the lengths a node receives stay
i.i.d. with the workload's law (Doob's optional-skipping theorem), which the fleet bound of
:mod:`stability.sim.fleet` needs.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1. J. Selen, I. Adan,
S. Kapodistria, J. van Leeuwaarden (2016), "Steady-state analysis of shortest expected delay
routing", Queueing Systems 84, 309-354.
"""

from __future__ import annotations

import numpy as np

from stability.sim import engine
from theory.errors import UnknownNameError

PLANNERS = ("random", "round_robin", "jsq")


def route(planner: str, n: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """Node index of each of ``n`` requests for a state-independent planner."""
    if planner == "random":
        return rng.integers(0, r, size=n)
    if planner == "round_robin":
        return np.arange(n) % r
    raise UnknownNameError("state-independent planner", planner, ["random", "round_robin"])


def jsq_route(loop, ct, prm, times, L_P, L_D, cls, n_class: int, r: int, detail: bool, log: bool,
              t_start=None, t_first=None, tbt_slo=None, tbt_from: float = 0.0) -> tuple[np.ndarray, list]:
    """Join-shortest-queue over ``r`` identical nodes (one ``loop``, cost tables ``ct`` and
    parameter record ``prm``): :func:`jsq_route_nodes` with fewest pending requests."""
    return jsq_route_nodes([(loop, ct, prm)] * r, times, L_P, L_D, cls, n_class, detail, log,
                           t_start, t_first, tbt_slo, tbt_from=tbt_from)


def jsq_route_nodes(nodes, times, L_P, L_D, cls, n_class: int, detail: bool, log: bool,
                    t_start=None, t_first=None, tbt_slo=None, weights=None,
                    tbt_from: float = 0.0) -> tuple[np.ndarray, list]:
    """Join-shortest-queue over ``nodes``, ``[(loop, ct, prm), ...]`` (each node's compiled loop,
    cost tables and parameter record): advance every node to each arrival and give it to the node
    with the fewest pending requests, or with ``weights`` the least ``(pending + 1) / weight``
    (lowest index on ties, module docstring); then run every node to the end.

    ``t_start``/``t_first`` preset those times for requests that arrive already prefilled (decode
    nodes of a disaggregated cluster); ``tbt_slo`` gives each class's TBT SLO; the TBT histograms
    count the tokens emitted at or after ``tbt_from``. Returns the node of each request and the
    node states.
    """
    n = len(times)
    empty = np.zeros(0)
    recording = engine.Recording(n_class=n_class, detail=detail, log=log, tbt_slo=tbt_slo, tbt_from=tbt_from)
    states = [engine.new_state(empty, empty, empty, None, recording, capacity=n) for _ in nodes]
    node = np.zeros(n, dtype=np.int64)
    for k in range(n):
        t = float(times[k])
        pending = []
        for (loop, ct, prm), st in zip(nodes, states, strict=True):
            engine.run_loop(loop, st, ct, prm, t)
            pending.append(engine.pending_at(st, t))
        if weights is None:
            g = int(np.argmin(pending))
        else:
            g = min(range(len(nodes)), key=lambda i: ((pending[i] + 1) / weights[i], i))
        node[k] = g
        local = engine.append_request(states[g], t, int(L_P[k]), int(L_D[k]), int(cls[k]))
        if t_first is not None:
            engine.preset_times(states[g], local, float(t_start[k]), float(t_first[k]))
    for (loop, ct, prm), st in zip(nodes, states, strict=True):
        engine.run_loop(loop, st, ct, prm)
    return node, states
