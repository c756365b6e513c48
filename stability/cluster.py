"""r identical GPUs behind a resource planner (Section 3, Fig. 4; Section 4.1).

Planners:

* ``random`` — each request goes to a node chosen uniformly at random (the paper's planner,
  Section 4.1). Routing does not depend on the state, so each node is simulated on its own.
* ``round_robin`` — request k goes to node k mod r; also state independent.
* ``jsq`` — join the shortest queue: each request goes to the node with the fewest pending
  requests at its arrival (ties to the lowest index). Nodes are advanced together, arrival by
  arrival, with the engine's resumable loops.

Results do not depend on how many worker processes run the nodes: routing uses its own random
stream, and each node's run is deterministic given its requests.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from types import ModuleType

import numpy as np

from stability import engine
from stability.gpu import GpuRun, collect, run_gpu, tables_for
from stability.schedulers import get_scheduler
from theory.cost import CostModel
from theory.errors import FieldError, UnknownNameError

PLANNERS = ("random", "round_robin", "jsq")


def route(planner: str, n: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """Node index of each of ``n`` requests for a state-independent planner."""
    if planner == "random":
        return rng.integers(0, r, size=n)
    if planner == "round_robin":
        return np.arange(n) % r
    raise UnknownNameError("state-independent planner", planner, ["random", "round_robin"])


def _run_one(args, progress=None) -> GpuRun:
    cm, name, params, arrival, L_P, L_D, cls, n_class, detail, log, tbt_slo = args
    return run_gpu(cm, get_scheduler(name), params, arrival, L_P, L_D, cls, n_class, detail, log,
                   progress=progress, tbt_slo=tbt_slo)


def run_cluster(cm: CostModel, scheduler: ModuleType, params, arrival, L_P, L_D, cls, n_class: int,
                r: int, planner: str, rng: np.random.Generator, detail: bool = False,
                log: bool = False, workers: int = 1, progress=None,
                tbt_slo=None) -> tuple[np.ndarray, list[GpuRun]]:
    """Route the requests and simulate every node. Returns (node of each request, node runs).

    ``progress(k)`` (optional) is told of completed requests as nodes run in this process;
    ``tbt_slo`` (optional) gives each class's TBT SLO, to count the gaps above it.
    """
    if planner not in PLANNERS:
        raise UnknownNameError("planner", planner, PLANNERS)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise FieldError("r (gpus)", r, "an integer >= 1")
    if getattr(scheduler, "DISAGGREGATED", False):  # DistServe: prefill nodes, then decode nodes
        from stability.disaggregated import run_disaggregated

        out = run_disaggregated(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, planner,
                                rng, detail, log, tbt_slo)
    elif planner == "jsq" and r > 1:
        out = _run_jsq(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, detail, log, tbt_slo)
    else:
        out = None
    if out is not None:  # nodes advanced together: report progress once, at the end
        if progress is not None:
            progress(len(arrival))
        return out
    node = np.zeros(len(arrival), dtype=np.int64) if r == 1 else route(planner, len(arrival), r, rng)
    jobs = [(cm, scheduler.NAME, params, arrival[node == g], L_P[node == g], L_D[node == g],
             cls[node == g], n_class, detail, log, tbt_slo) for g in range(r)]
    if workers > 1 and r > 1:
        with ProcessPoolExecutor(max_workers=min(workers, r)) as pool:
            runs = list(pool.map(_run_one, jobs))
    else:
        runs = [_run_one(job, progress) for job in jobs]
    return node, runs


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


def _run_jsq(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, detail, log, tbt_slo):
    ct = tables_for(cm, L_P, L_D, getattr(params, "chunk", None))
    node, states = jsq_route(scheduler.loop, ct, params.array(), arrival, L_P, L_D, cls, n_class, r,
                             detail, log, tbt_slo=tbt_slo)
    runs = []
    for g, st in enumerate(states):
        mask = node == g
        runs.append(collect(st, arrival[mask], L_P[mask], L_D[mask], cls[mask], detail and log))
    return node, runs
