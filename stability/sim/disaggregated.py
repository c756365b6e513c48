"""A disaggregated cluster (DistServe, Algorithm 5): prefill nodes feed decode nodes.

Of the r GPUs, ``prefill_nodes`` run only prefills and the rest only decodes. Requests are
routed by the planner to a prefill node at arrival; when a request's prefill ends (its first
token), its KV is handed off, taking the scheduler's transfer time, and the request arrives at a
decode node chosen by the same planner at that moment. Nothing flows back from decode to prefill
nodes in Algorithm 5, so the prefill nodes are simulated first, their hand-off times become the
decode nodes' arrivals, and the decode nodes are simulated next.

Results come back as ordinary node runs: the decode nodes' runs carry every request's full record
(start and first token from its prefill node, finish and TBT from its decode node; ``node`` is
the decode node), and the prefill nodes' runs carry their batches and counters with empty
per-request arrays; their ``rows`` map the batch log's request numbers to global indices, and
their completions are counted as ``n_handoff``. The nodes run one after another in this process.

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 5, Appendix E.3; Zhong et al. (2024), DistServe.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import ModuleType

import numpy as np

from stability.sim import engine
from stability.sim.gpu import GpuRun, RunOptions, collect, tables_for
from stability.sim.routing import Cluster, Requests, jsq_route, route
from theory.cost import CostModel
from theory.errors import FieldError


def _route_and_run(loop, ct, prm, requests: Requests, k: int, planner: str, rng: np.random.Generator,
                   recording: engine.Recording) -> tuple[np.ndarray, list, list[np.ndarray]]:
    """Route ``requests`` (arriving at sorted times) to ``k`` nodes running ``loop`` and run them.

    Returns the node of each request, the node states, and each node's requests (indices into
    ``requests``) in the node's order.
    """
    n = len(requests)
    if planner == "jsq" and k > 1:
        node, states = jsq_route(loop, ct, prm, requests, k, recording)
    else:
        node = np.zeros(n, dtype=np.int64) if k == 1 else route(planner, n, k, rng)
        states = []
        for g in range(k):
            mine = requests.take(np.flatnonzero(node == g))
            states.append(engine.new_state(mine.arrival, mine.L_P, mine.L_D, mine.cls, recording,
                                           t_start=mine.t_start, t_first=mine.t_first))
        for st in states:
            engine.run_loop(loop, st, ct, prm, math.inf)
    return node, states, [np.flatnonzero(node == g) for g in range(k)]


def _in_global_order(run: GpuRun, gids: np.ndarray) -> GpuRun:
    """A decode node's run with its per-request arrays sorted by global request index."""
    perm = np.argsort(gids, kind="stable")
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size)
    fields = {k: getattr(run, k)[perm] for k in ("arrival", "L_P", "L_D", "cls", "t_start", "t_first",
                                                 "t_finish", "tbt_max", "tbt_viol", "reject",
                                                 "preemptions")}
    items = None if run.items is None else {**run.items, "request": rank[run.items["request"]]}
    return replace(run, **fields, items=items, rows=gids[perm])


def completing_nodes(runs: list[GpuRun]) -> list[int]:
    """The nodes, among ``runs`` (one per node, in node order), that complete requests: every node
    but a disaggregated cluster's prefill nodes, whose runs count hand-offs (``n_handoff``) and
    complete nothing (:func:`run_disaggregated` numbers them first, the decode nodes after)."""
    return [g for g, run in enumerate(runs) if "n_handoff" not in run.counters]


def run_disaggregated(cm: CostModel, scheduler: ModuleType, params, requests: Requests, cluster: Cluster,
                      options: RunOptions | None = None) -> tuple[np.ndarray, list[GpuRun]]:
    """Simulate ``params.prefill_nodes`` prefill nodes and ``cluster.r`` minus that many decode
    nodes, both routed by ``cluster.planner`` (``options``: what the nodes record; the TBT SLOs are
    counted on the decode nodes, which record the gaps; cost tables built beforehand, if any).

    Returns (decode node of each request, runs of the prefill nodes then the decode nodes).
    """
    options = RunOptions() if options is None else options
    r, planner, rng = cluster.r, cluster.planner, cluster.rng
    r_p = params.prefill_nodes if params.prefill_nodes is not None else max(1, r // 2)
    if r_p >= r:
        raise FieldError("prefill_nodes", r_p, f"fewer than the r = {r} GPUs (at least one decodes)")
    arrival, L_P, L_D, cls = requests.arrival, requests.L_P, requests.L_D, requests.cls
    detail, log = options.detail, options.log
    ct = options.tables if options.tables is not None else tables_for(cm, L_P, L_D, params.chunk)
    prm = params.record()
    n = arrival.size

    prefill = replace(options, tbt_slo=None, tbt_from=0.0)  # the decode nodes record the gaps
    _, pre_states, pre_ids = _route_and_run(scheduler.prefill_loop, ct, prm,
                                            Requests(arrival, L_P, L_D, cls), r_p, planner, rng, prefill)
    t_start = np.full(n, np.nan)
    t_first = np.full(n, np.nan)
    runs = []
    empty_f, empty_i = np.zeros(0), np.zeros(0, dtype=np.int64)
    for st, ids in zip(pre_states, pre_ids, strict=True):
        s, f, _, _ = engine.export_requests(st)
        t_start[ids] = s[: ids.size]
        t_first[ids] = f[: ids.size]
        run = collect(st, empty_f, empty_i, empty_i, empty_i, detail and log)
        counters = {**run.counters, "n_handoff": run.counters["n_done"], "n_done": 0}
        runs.append(replace(run, counters=counters, rows=ids))

    handoff = t_first + params.transfer_time(L_P)
    order = np.argsort(handoff, kind="stable")
    dec_node, dec_states, dec_ids = _route_and_run(
        scheduler.decode_loop, ct, prm,
        Requests(handoff[order], L_P[order], L_D[order], cls[order], t_start[order], t_first[order]),
        r - r_p, planner, rng, options)
    node = np.empty(n, dtype=np.int64)
    node[order] = r_p + dec_node
    for st, ids in zip(dec_states, dec_ids, strict=True):
        gids = order[ids]
        run = collect(st, arrival[gids], L_P[gids], L_D[gids], cls[gids], detail and log)
        runs.append(_in_global_order(run, gids))
    return node, runs
