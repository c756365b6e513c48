"""r identical GPUs behind a resource planner (Section 3, Fig. 4; Section 4.1).

The planners are in :mod:`stability.sim.routing`.

Results do not depend on how many worker processes run the nodes: routing uses its own random
stream, and each node's run is deterministic given its requests.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (resource planner), Section 4.1.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from importlib import import_module
from types import ModuleType

import numpy as np

from stability.sim.gpu import GpuRun, RunOptions, collect, run_gpu, tables_for
from stability.sim.routing import PLANNERS, jsq_route, route
from theory.cost import CostModel
from theory.errors import FieldError, UnknownNameError


def _run_one(args, progress=None) -> GpuRun:
    cm, module, params, arrival, L_P, L_D, cls, options = args
    return run_gpu(cm, import_module(module), params, arrival, L_P, L_D, cls,
                   replace(options, progress=progress))


def run_cluster(cm: CostModel, scheduler: ModuleType, params, arrival, L_P, L_D, cls, n_class: int,
                r: int, planner: str, rng: np.random.Generator, detail: bool = False,
                log: bool = False, workers: int = 1, progress=None,
                tbt_slo=None, tbt_from: float = 0.0, prefix=None) -> tuple[np.ndarray, list[GpuRun]]:
    """Route the requests and simulate every node. Returns (node of each request, node runs).

    ``progress(k)`` (optional) is told of completed requests as nodes run in this process;
    ``tbt_slo`` (optional) gives each class's TBT SLO, to count the gaps above it; the TBT
    histograms count the tokens emitted at or after ``tbt_from`` (default 0: every token);
    ``prefix`` (optional: each request's prefix parent, -1 for none, and shared prompt tokens)
    is the prefix relation, kept between requests routed to the same node by a static planner
    (a node caches only its own blocks; join-shortest-queue and disaggregated nodes treat every
    request as unrelated).
    """
    if planner not in PLANNERS:
        raise UnknownNameError("planner", planner, PLANNERS)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise FieldError("r (gpus)", r, "an integer >= 1")
    if getattr(scheduler, "DISAGGREGATED", False):  # DistServe: prefill nodes, then decode nodes
        from stability.sim.disaggregated import run_disaggregated

        out = run_disaggregated(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, planner,
                                rng, detail, log, tbt_slo, tbt_from)
    elif planner == "jsq" and r > 1:
        out = _run_jsq(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, detail, log, tbt_slo,
                       tbt_from)
    else:
        out = None
    if out is not None:  # nodes advanced together: report progress once, at the end
        if progress is not None:
            progress(len(arrival))
        return out
    node = np.zeros(len(arrival), dtype=np.int64) if r == 1 else route(planner, len(arrival), r, rng)
    options = RunOptions(n_class=n_class, detail=detail, log=log, tbt_slo=tbt_slo, tbt_from=tbt_from)
    jobs = [(cm, scheduler.__name__, params, arrival[node == g], L_P[node == g], L_D[node == g],
             cls[node == g], replace(options, prefix=_node_prefix(prefix, node, g)))
            for g in range(r)]
    if workers > 1 and r > 1:
        with ProcessPoolExecutor(max_workers=min(workers, r)) as pool:
            runs = list(pool.map(_run_one, jobs))
    else:
        runs = [_run_one(job, progress) for job in jobs]
    return node, runs


def _node_prefix(prefix, node: np.ndarray, g: int):
    """The prefix relation among node g's requests, in their indices on the node (a parent on
    another node is none), or None without one."""
    if prefix is None:
        return None
    parent, shared = (np.asarray(a, dtype=np.int64) for a in prefix)
    mine = node == g
    local = np.cumsum(mine) - 1
    p = parent[mine]
    kept = (p >= 0) & (node[np.maximum(p, 0)] == g)
    return np.where(kept, local[np.maximum(p, 0)], -1), np.where(kept, shared[mine], 0)


def _run_jsq(cm, scheduler, params, arrival, L_P, L_D, cls, n_class, r, detail, log, tbt_slo, tbt_from):
    ct = tables_for(cm, L_P, L_D, getattr(params, "chunk", None))
    node, states = jsq_route(scheduler.loop, ct, params.record(), arrival, L_P, L_D, cls, n_class, r,
                             detail, log, tbt_slo=tbt_slo, tbt_from=tbt_from)
    runs = []
    for g, st in enumerate(states):
        mask = node == g
        runs.append(collect(st, arrival[mask], L_P[mask], L_D[mask], cls[mask], detail and log))
    return node, runs
