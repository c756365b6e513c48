"""vLLM's data-parallel ranks of a mixture of experts stepped in lockstep: r replicas of one
expert-parallel group, each with its own vLLM v1 scheduler (:mod:`stability.schedulers.vllm_v1`),
whose steps start and end together.

vLLM runs the ``data_parallel_size`` engines of an MoE model with expert parallelism as one SPMD
program: every MoE layer's dispatch and combine is a collective over the group, so no rank can run a
forward pass alone. The rules modelled, each from vLLM's source:

1. *A rank with no work runs a dummy step.* ``DPEngineCoreProc.run_busy_loop``
   (``vllm/v1/engine/core.py``) calls ``execute_dummy_batch`` when its step executed nothing while
   the group is running (another rank has unfinished requests); the worker's ``execute_dummy_batch``
   (``vllm/v1/worker/gpu_worker.py``) is a forward pass of one token (``_dummy_run(1)``).
2. *The ranks pad to the largest token count.* Before each forward pass (a dummy one included)
   ``coordinate_batch_across_dp`` (``vllm/v1/worker/dp_utils.py``) all-reduces each rank's token
   count and CUDA-graph mode; the synchronized mode is the least of the ranks', and where it is not
   NONE every rank pads its batch to the largest count (``_post_process_dp_padding``). A rank whose
   count exceeds the largest CUDA-graph capture size runs eagerly (mode NONE:
   ``CudagraphDispatcher.dispatch``, ``vllm/v1/cudagraph_dispatcher.py``), and then no rank pads.
3. *The experts see every rank's tokens.* vLLM's default ``all2all_backend``
   (``AgRsAll2AllManager`` in ``vllm/distributed/device_communicators/all2all.py``) dispatches by
   an all-gather of each rank's rows in the sizes of rule 2 (``all_gatherv``), so each rank's
   experts run on the group's tokens, padded or not.
4. *A step ends when the slowest rank's does.* The collectives of every MoE layer wait for every
   rank, so the group's step lasts the longest of the ranks' forward passes.

So a step at time ``T``: each rank's scheduler builds its batch from the requests it has seen by
``T`` (vLLM's ``Scheduler.schedule``, unchanged); with ``tau_g`` the tokens of rank ``g`` (1 for an
idle rank's dummy step) and ``tau* = max_g tau_g``, rank ``g``'s pass lasts

    d_g = T_fixed(n_g) + N sum_D T^{D,SA} + sum_P T^{P,SA}   (its own attention, Eq. 7)

with ``n_g = tau*`` where the capture sizes are on and ``tau*`` is at most the largest of them
(rule 2; ``T_fixed`` then pads ``tau*`` to a capture size as for one engine,
:mod:`theory.engine_terms`). There every rank holds ``tau*`` tokens, the balanced group that
:mod:`theory.expert_parallel` prices. Otherwise every rank runs eagerly on its own ``tau_g`` tokens:
its linear time is that of ``tau_g`` tokens without the routed experts, unpadded, plus the experts'
time of the balanced group of the same total, ``sum_g tau_g / ep`` tokens per rank (rule 3;
interpolated between whole counts). The step lasts ``D = max_g d_g`` over the ranks with work and
the dummy ones alike (rule 4), and every rank's clock moves to ``T + D``. When no rank has work the
group waits for the next arrival.

Routing: a request goes, at its arrival, to the rank with the fewest pending requests (loaded, not
finished or rejected; ties to the lowest rank), as :mod:`stability.sim.routing`'s ``jsq`` sends it;
a step's completions count from its end. A preset routing (each request's rank) can be given
instead, to compare with independent replicas on the same routing.

Simplifications: the dummy step's attention is not priced (one token); the group keeps running
dummy steps after its last request only until vLLM's finish check (every 32 steps,
``_has_global_unfinished_reqs``), which delays nothing measured and is left out; the time of the
per-step all-reduce of rule 2 is not priced (the engine's host time per step,
``engine_step_s``, covers host work). Detail mode and the batch log record each rank's batches
as for one engine; a dummy pass is not a batch of its rank.

References
----------
vllm-project/vllm @ 00080ee13c7a451fce071ccb8d0e94d395acf5a7 ``vllm/v1/engine/core.py``
(``DPEngineCoreProc.run_busy_loop``, ``_has_global_unfinished_reqs``);
@ 0012cf691b7e69423244d2b1405f4b6832156e19 ``vllm/v1/worker/gpu_worker.py``
(``execute_dummy_batch``); @ 00746147f8cf4b7715d9cdc591d5dd6f4d12b27f ``vllm/v1/worker/dp_utils.py``
(``coordinate_batch_across_dp``, ``_synchronize_dp_ranks``, ``_post_process_dp_padding``);
@ 009eec3b2b00e1b8afb4bcafb58e9403b2aa1ada ``vllm/v1/cudagraph_dispatcher.py`` (``dispatch``);
@ 001430048e8175c8dff1bc57e1a81a1fa75460f9 ``vllm/distributed/device_communicators/all2all.py``
(``AgRsAll2AllManager.dispatch``): the revisions read, not the tag of vLLM 0.19.0, which ran the
measured DP 2 + EP run (:mod:`stability.serving.ep_replay`).
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from weakref import WeakKeyDictionary

import numpy as np
from numba import njit

from stability.schedulers import vllm_v1
from stability.schedulers.vllm_v1 import plan_step, prepare
from stability.sim import engine
from stability.sim.gpu import GpuRun, RunOptions, collect, tables_for
from stability.sim.kernels import t_fixed, t_lin
from stability.sim.mixed import apply_mixed, mixed_parts
from stability.sim.routing import Cluster, Requests
from theory.cost import CostModel, T_Lin
from theory.errors import FieldError


@njit(cache=True)
def _route(states, k, node, reqs):
    """Give request k to its preset rank (``node[k] >= 0``) or to the rank with the fewest pending
    requests (lowest rank on ties); records the rank in ``node``. ``reqs``: (arrival, L_P, L_D,
    cls)."""
    arrival, L_P, L_D, cls = reqs
    g = node[k]
    if g < 0:
        best = 1 << 62
        for h in range(len(states)):
            st = states[h]
            pending = st.n_loaded - st.n_done - st.n_rej
            if pending < best:
                best = pending
                g = h
        node[k] = g
    engine.append_request(states[g], arrival[k], L_P[k], L_D[k], cls[k])


@njit(cache=True)
def _eager_lin(ct, eager, tau, total):
    """Linear time of a rank's eager pass of ``tau`` tokens while the group holds ``total``: its
    dense part at ``tau``, its experts at the group's mean ``total / ep`` (interpolated)."""
    dense, moe, ep, _ = eager
    m = total / ep
    lo = min(int(m), moe.size - 2)
    return dense[tau] + moe[lo] + (m - lo) * (moe[lo + 1] - moe[lo])


@njit(cache=True)
def _lockstep(states, ct, prm, reqs, node, eager):
    """Every request routed and run to its end, the ranks stepping together (module docstring).
    ``eager``: (dense linear time per token count unpadded, expert time per token count of the
    balanced group, ep, largest CUDA-graph capture size: 0 for none, no rank pads)."""
    pad_max = eager[3]
    arrival = reqs[0]
    r = len(states)
    n = arrival.size
    tau = np.zeros(r, dtype=np.int64)
    na = np.zeros(r, dtype=np.int64)
    n_pre = np.zeros(r, dtype=np.int64)
    var = np.zeros(r)
    waste = np.zeros(r)
    ran = np.zeros(r, dtype=np.bool_)
    for g in range(r):
        prepare(states[g], prm)
    clock = arrival[0] if n > 0 else 0.0
    k = 0
    while True:
        while k < n and arrival[k] <= clock:
            _route(states, k, node, reqs)
            k += 1
        for g in range(r):
            st = states[g]
            st.clock = clock
            while not engine.log_has_room(st, 1, st.nd + st.np + min(st.wq_len, prm.budget)):
                engine.grow_log(st)
            tokens, na[g] = plan_step(st, prm)
            ran[g] = tokens > 0
            if ran[g]:
                tau[g], n_pre[g], att, psa, waste[g] = mixed_parts(st, ct, na[g])
                var[g] = ct.N * att + psa
            else:
                tau[g], n_pre[g], var[g], waste[g] = 1, 0, 0.0, 0.0  # a dummy pass of one token
        if not ran.any():
            if k >= n:
                break
            clock = arrival[k]
            continue
        top = tau.max()
        pad = top <= pad_max
        total = tau.sum()
        dur = 0.0
        for g in range(r):
            if pad:  # every rank runs top tokens
                d = t_fixed(ct, top) + var[g]
                waste[g] += t_lin(ct, top) - tau[g] * ct.lin_ideal
            else:
                lin = _eager_lin(ct, eager, tau[g], total)
                d = lin + tau[g] / ct.mu_nLin + ct.overhead + var[g]
                waste[g] += lin - tau[g] * ct.lin_ideal
            dur = max(dur, d)
        while k < n and arrival[k] < clock + dur:  # arrivals during the step see its start's queues
            _route(states, k, node, reqs)
            k += 1
        for g in range(r):
            st = states[g]
            if ran[g]:
                apply_mixed(st, na[g], tau[g], n_pre[g], dur, waste[g])
            else:
                st.clock = clock + dur
                st.last_done = 0
        clock = clock + dur


def eager_tables(cm: CostModel, tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``0..tokens`` tokens per rank: the linear time of a pass run eagerly (no CUDA-graph
    padding) without its routed experts, and the routed experts' time when every rank of the group
    holds that many tokens (:meth:`theory.moe.MoETerms.time`; zeros for a dense model). Kept per
    cost model (held weakly) and token count for the life of the process."""
    kept = _KEPT.setdefault(cm, {})
    if tokens not in kept:
        kept[tokens] = _eager_tables(cm, tokens)
    return kept[tokens]


_KEPT: WeakKeyDictionary[CostModel, dict[int, tuple[np.ndarray, np.ndarray]]] = WeakKeyDictionary()


def _eager_tables(cm: CostModel, tokens: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.arange(tokens + 1)
    terms = replace(cm.gpu.terms, cudagraph_capture_sizes=None)
    lin = np.asarray(T_Lin(replace(cm, gpu=replace(cm.gpu, terms=terms)), counts), dtype=float)
    moe = np.zeros(counts.size)
    if cm.lin is not None and cm.lin.moe is not None:
        moe[1:] = cm.lin.moe.time(counts[1:])
    return lin - moe, moe


def run_lockstep(
    cm: CostModel,
    scheduler: ModuleType,
    params,
    requests: Requests,
    cluster: Cluster,
    options: RunOptions | None = None,
    node: np.ndarray | None = None,
) -> tuple[np.ndarray, list[GpuRun]]:
    """Run ``requests`` on ``cluster.r`` ranks of vLLM v1 in lockstep (module docstring); the
    signature of :func:`stability.sim.cluster.run_cluster`, so that
    :func:`stability.sim.simulate.simulate` can take it as its cluster runner.

    ``node`` (optional) presets each request's rank (-1: routed by fewest pending requests at its
    arrival). Returns (rank of each request, rank runs).

    Raises
    ------
    FieldError
        If the scheduler is not vLLM v1, the ranks are not the one expert-parallel group of the
        GPU (``ep``), the planner is not ``jsq`` without a preset routing, or a preset rank is out
        of range.
    """
    if scheduler is not vllm_v1:
        raise FieldError(
            "scheduler",
            getattr(scheduler, "NAME", scheduler),
            "vllm_v1 (the data-parallel lockstep is vLLM v1's engine)",
        )
    if node is None and cluster.planner != "jsq":
        raise FieldError(
            "planner",
            cluster.planner,
            "jsq, or a preset rank per request (a lockstep group routes "
            "each request at its arrival to the rank with the fewest pending)",
        )
    options = RunOptions() if options is None else options
    r, n, ep = int(cluster.r), len(requests), int(cm.gpu.terms.ep)
    if ep > 1 and ep != r:
        raise FieldError(
            "r (gpus)", r, f"the {ep} ranks of one expert-parallel group (ep = {ep}), which step together"
        )
    preset = np.full(n, -1, dtype=np.int64) if node is None else np.array(node, dtype=np.int64)
    if preset.shape != (n,) or np.any(preset >= r) or np.any(preset < -1):
        raise FieldError("node", node, f"one rank in -1..{r - 1} per request (-1: routed)")
    ct = options.tables
    if ct is None:
        ct = tables_for(cm, requests.L_P, requests.L_D, None)
    empty = np.zeros(0)
    states = tuple(engine.new_state(empty, empty, empty, None, options, capacity=n) for _ in range(r))
    sizes, prm = cm.gpu.terms.cudagraph_capture_sizes, params.record()
    dense, moe = eager_tables(cm, prm.budget)
    reqs = (
        requests.arrival,
        np.asarray(requests.L_P, dtype=np.int64),
        np.asarray(requests.L_D, dtype=np.int64),
        np.asarray(requests.cls, dtype=np.int64),
    )
    _lockstep(states, ct, prm, reqs, preset, (dense, moe, float(max(ep, 1)), int(max(sizes)) if sizes else 0))
    runs = []
    for g, st in enumerate(states):
        mask = preset == g
        runs.append(
            collect(
                st,
                requests.arrival[mask],
                requests.L_P[mask],
                requests.L_D[mask],
                requests.cls[mask],
                options.detail and options.log,
            )
        )
    if options.progress is not None:
        options.progress(n)
    return preset, runs
