"""The resource planner: which GPU each request goes to (Section 3, Fig. 4; Section 4.1).

* ``random`` — each request goes to a node chosen uniformly at random (the paper's planner,
  Section 4.1). Routing does not depend on the state, so each node is simulated on its own.
* ``round_robin`` — request k goes to node k mod r; also state independent.
* ``jsq`` — join the shortest queue: each request goes to the node with the fewest pending
  requests at its arrival (ties to the lowest index). Nodes are advanced together, arrival by
  arrival, with the engine's resumable loops.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1.
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
              t_start=None, t_first=None, tbt_slo=None) -> tuple[np.ndarray, list]:
    """Join-shortest-queue: advance every node to each arrival and give it to the node with the
    fewest pending requests (lowest index on ties); then run every node to the end.

    ``t_start``/``t_first`` preset those times for requests that arrive already prefilled (decode
    nodes of a disaggregated cluster); ``tbt_slo`` gives each class's TBT SLO. Returns the node of
    each request and the node states.
    """
    n = len(times)
    empty = np.zeros(0)
    states = [engine.new_state(empty, empty, empty, None, n_class, detail, log, capacity=n,
                               tbt_slo=tbt_slo) for _ in range(r)]
    node = np.zeros(n, dtype=np.int64)
    for k in range(n):
        t = float(times[k])
        pending = []
        for st in states:
            engine.run_loop(loop, st, ct, prm, t)
            pending.append(engine.pending_at(st, t))
        g = int(np.argmin(pending))
        node[k] = g
        local = engine.append_request(states[g], t, int(L_P[k]), int(L_D[k]), int(cls[k]))
        if t_first is not None:
            engine.preset_times(states[g], local, float(t_start[k]), float(t_first[k]))
    for st in states:
        engine.run_loop(loop, st, ct, prm)
    return node, states
