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

The requests a planner routes are a :class:`Requests` record, and r identical GPUs behind a
planner a :class:`Cluster` (:func:`stability.sim.cluster.run_cluster` runs them).

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1. J. Selen, I. Adan,
S. Kapodistria, J. van Leeuwaarden (2016), "Steady-state analysis of shortest expected delay
routing", Queueing Systems 84, 309-354.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.sim import engine
from theory.errors import UnknownNameError

PLANNERS = ("random", "round_robin", "jsq")


@dataclass(frozen=True, eq=False)
class Requests:
    """Requests in order of arrival, as a planner routes them.

    Attributes
    ----------
    arrival : numpy.ndarray
        Arrival times, seconds (non-decreasing).
    L_P, L_D : numpy.ndarray
        Prompt and decode lengths (Section 2.2).
    cls : numpy.ndarray or None
        Each request's class, ``0 .. n_class - 1`` (None: every request in class 0).
    t_start, t_first : numpy.ndarray or None
        Preset start and first-token times of requests that arrive already prefilled (the decode
        nodes of a disaggregated cluster, :mod:`stability.sim.disaggregated`); None: none preset.
    """

    arrival: np.ndarray
    L_P: np.ndarray
    L_D: np.ndarray
    cls: np.ndarray | None = None
    t_start: np.ndarray | None = None
    t_first: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "arrival", np.asarray(self.arrival, dtype=np.float64))
        object.__setattr__(self, "L_P", np.asarray(self.L_P))
        object.__setattr__(self, "L_D", np.asarray(self.L_D))
        cls = np.zeros(self.arrival.size, dtype=np.int64) if self.cls is None else np.asarray(self.cls)
        object.__setattr__(self, "cls", cls)

    def __len__(self) -> int:
        return int(self.arrival.size)

    def take(self, ids) -> Requests:
        """The requests ``ids`` (indices or a boolean mask), in that order."""
        return Requests(self.arrival[ids], self.L_P[ids], self.L_D[ids], self.cls[ids],
                        None if self.t_start is None else self.t_start[ids],
                        None if self.t_first is None else self.t_first[ids])


@dataclass(frozen=True)
class Cluster:
    """r identical GPUs behind a resource planner.

    Attributes
    ----------
    r : int
        Number of GPUs (nodes), >= 1.
    planner : str
        One of :data:`PLANNERS`.
    rng : numpy.random.Generator
        The planner's random stream (routing draws from it alone).
    workers : int
        Processes that simulate nodes in parallel, for planners whose routing does not depend on
        the nodes' state (default 1: this process).
    """

    r: int
    planner: str
    rng: np.random.Generator
    workers: int = 1


def route(planner: str, n: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """Node index of each of ``n`` requests for a state-independent planner."""
    if planner == "random":
        return rng.integers(0, r, size=n)
    if planner == "round_robin":
        return np.arange(n) % r
    raise UnknownNameError("state-independent planner", planner, ["random", "round_robin"])


def jsq_route(loop, ct, prm, requests: Requests, r: int,
              recording: engine.Recording | None = None) -> tuple[np.ndarray, list]:
    """Join-shortest-queue over ``r`` identical nodes (one ``loop``, cost tables ``ct`` and
    parameter record ``prm``): :func:`jsq_route_nodes` with fewest pending requests."""
    return jsq_route_nodes([(loop, ct, prm)] * r, requests, recording)


def jsq_route_nodes(nodes, requests: Requests, recording: engine.Recording | None = None,
                    weights=None) -> tuple[np.ndarray, list]:
    """Join-shortest-queue over ``nodes``, ``[(loop, ct, prm), ...]`` (each node's compiled loop,
    cost tables and parameter record): advance every node to each arrival and give it to the node
    with the fewest pending requests, or with ``weights`` the least ``(pending + 1) / weight``
    (lowest index on ties, module docstring); then run every node to the end.

    ``requests`` may preset the start and first-token times of requests that arrive already
    prefilled (decode nodes of a disaggregated cluster); ``recording`` says what each node records
    (its classes, TBT SLOs and the time from which the TBT histograms count; None: the defaults of
    :class:`stability.sim.engine.Recording`). Returns the node of each request and the node states.
    """
    recording = engine.Recording() if recording is None else recording
    times, L_P, L_D, cls = requests.arrival, requests.L_P, requests.L_D, requests.cls
    t_start, t_first = requests.t_start, requests.t_first
    n = len(times)
    empty = np.zeros(0)
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
