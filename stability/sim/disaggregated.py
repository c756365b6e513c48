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
from stability.sim.gpu import GpuRun, collect, tables_for
from stability.sim.routing import jsq_route, route
from theory.cost import CostModel
from theory.errors import FieldError


def _route_and_run(loop, ct, prm, times, L_P, L_D, cls, t_start, t_first, k, planner, rng, n_class,
                   detail, log, tbt_slo=None, tbt_from: float = 0.0
                   ) -> tuple[np.ndarray, list, list[np.ndarray]]:
    """Route requests arriving at sorted ``times`` to ``k`` nodes running ``loop`` and run them.

    Returns the node of each request, the node states, and each node's requests (indices into
    ``times``) in the node's order.
    """
    n = len(times)
    if planner == "jsq" and k > 1:
        node, states = jsq_route(loop, ct, prm, times, L_P, L_D, cls, n_class, k, detail, log,
                                 t_start, t_first, tbt_slo, tbt_from)
    else:
        node = np.zeros(n, dtype=np.int64) if k == 1 else route(planner, n, k, rng)
        states = []
        for g in range(k):
            ids = np.flatnonzero(node == g)
            recording = engine.Recording(n_class=n_class, detail=detail, log=log, tbt_slo=tbt_slo,
                                         tbt_from=tbt_from)
            states.append(engine.new_state(
                times[ids], L_P[ids], L_D[ids], cls[ids], recording,
                t_start=None if t_start is None else t_start[ids],
                t_first=None if t_first is None else t_first[ids]))
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


def run_disaggregated(cm: CostModel, scheduler: ModuleType, params, arrival, L_P, L_D, cls,
                      n_class: int, r: int, planner: str, rng: np.random.Generator,
                      detail: bool = False, log: bool = False,
                      tbt_slo=None, tbt_from: float = 0.0) -> tuple[np.ndarray, list[GpuRun]]:
    """Simulate ``params.prefill_nodes`` prefill nodes and ``r`` minus that many decode nodes
    (``tbt_slo``: each class's TBT SLO, counted on the decode nodes, which record the gaps, in the
    histograms for the tokens emitted at or after ``tbt_from``).

    Returns (decode node of each request, runs of the prefill nodes then the decode nodes).
    """
    r_p = params.prefill_nodes if params.prefill_nodes is not None else max(1, r // 2)
    if r_p >= r:
        raise FieldError("prefill_nodes", r_p, f"fewer than the r = {r} GPUs (at least one decodes)")
    arrival = np.asarray(arrival, dtype=np.float64)
    L_P, L_D, cls = np.asarray(L_P), np.asarray(L_D), np.asarray(cls)
    ct = tables_for(cm, L_P, L_D, params.chunk)
    prm = params.record()
    n = arrival.size

    _, pre_states, pre_ids = _route_and_run(scheduler.prefill_loop, ct, prm, arrival, L_P, L_D, cls,
                                            None, None, r_p, planner, rng, n_class, detail, log)
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
        scheduler.decode_loop, ct, prm, handoff[order], L_P[order], L_D[order], cls[order],
        t_start[order], t_first[order], r - r_p, planner, rng, n_class, detail, log, tbt_slo, tbt_from)
    node = np.empty(n, dtype=np.int64)
    node[order] = r_p + dec_node
    for st, ids in zip(dec_states, dec_ids, strict=True):
        gids = order[ids]
        run = collect(st, arrival[gids], L_P[gids], L_D[gids], cls[gids], detail and log)
        runs.append(_in_global_order(run, gids))
    return node, runs
