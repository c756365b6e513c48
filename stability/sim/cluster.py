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
from stability.sim.routing import PLANNERS, Cluster, Requests, jsq_route, route
from theory.cost import CostModel
from theory.errors import FieldError, UnknownNameError


def _run_one(args, progress=None) -> GpuRun:
    cm, module, params, arrival, L_P, L_D, cls, options = args
    return run_gpu(cm, import_module(module), params, arrival, L_P, L_D, cls,
                   replace(options, progress=progress))


def run_cluster(cm: CostModel, scheduler: ModuleType, params, requests: Requests, cluster: Cluster,
                options: RunOptions | None = None) -> tuple[np.ndarray, list[GpuRun]]:
    """Route the requests and simulate every node. Returns (node of each request, node runs).

    ``options`` says what every node records (its classes, the TBT SLOs whose gaps above them
    are counted, the time from which the TBT histograms count tokens), cost tables built
    beforehand, if any, and a progress callback, told of completed requests as nodes run in this
    process (None: record one class, no detail, no log). Its ``prefix`` (the requests' prefix
    relation, in their indices here) is kept between requests routed to the same node by a static
    planner (a node caches only its own blocks); join-shortest-queue and disaggregated nodes treat
    every request as unrelated.
    """
    options = RunOptions() if options is None else options
    r, planner = cluster.r, cluster.planner
    if planner not in PLANNERS:
        raise UnknownNameError("planner", planner, PLANNERS)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise FieldError("r (gpus)", r, "an integer >= 1")
    progress, prefix = options.progress, options.prefix
    options = replace(options, progress=None, prefix=None)
    if getattr(scheduler, "DISAGGREGATED", False):  # DistServe: prefill nodes, then decode nodes
        from stability.sim.disaggregated import run_disaggregated

        out = run_disaggregated(cm, scheduler, params, requests, cluster, options)
    elif planner == "jsq" and r > 1:
        out = _run_jsq(cm, scheduler, params, requests, r, options)
    else:
        out = None
    if out is not None:  # nodes advanced together: report progress once, at the end
        if progress is not None:
            progress(len(requests))
        return out
    arrival, L_P, L_D, cls = requests.arrival, requests.L_P, requests.L_D, requests.cls
    serial = cluster.workers <= 1 or r == 1
    if serial and options.tables is None:  # one set of tables serves every node
        options = replace(options, tables=tables_for(cm, L_P, L_D, getattr(params, "chunk", None)))
    node = np.zeros(len(arrival), dtype=np.int64) if r == 1 else route(planner, len(arrival), r, cluster.rng)
    jobs = [(cm, scheduler.__name__, params, arrival[node == g], L_P[node == g], L_D[node == g],
             cls[node == g], replace(options, prefix=_node_prefix(prefix, node, g)))
            for g in range(r)]
    if not serial:
        with ProcessPoolExecutor(max_workers=min(cluster.workers, r)) as pool:
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


def _run_jsq(cm, scheduler, params, requests: Requests, r: int, options: RunOptions):
    ct = options.tables
    if ct is None:
        ct = tables_for(cm, requests.L_P, requests.L_D, getattr(params, "chunk", None))
    node, states = jsq_route(scheduler.loop, ct, params.record(), requests, r, options)
    runs = []
    for g, st in enumerate(states):
        mask = node == g
        runs.append(collect(st, requests.arrival[mask], requests.L_P[mask], requests.L_D[mask],
                            requests.cls[mask], options.detail and options.log))
    return node, runs
