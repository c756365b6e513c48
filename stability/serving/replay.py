"""A measured serving run replayed through the simulator, configured as its engine was.

The engine's arguments (vLLM ``EngineArgs`` names, :attr:`ServingRun.engine_kwargs`) become the
options of a chunked-prefill scheduler (:func:`engine_options`): the step's token budget
``max_num_batched_tokens`` is the chunk budget, ``max_num_seqs`` the cap on running requests,
``gpu_memory_utilization`` and ``block_size`` the KV cache's share of the GPU and its block, and
``max_model_len`` the context limit. Where a run leaves an argument out, vLLM's default for that
engine stands in (``vllm/engine/arg_utils.py`` ``EngineArgs`` and ``get_batch_defaults``; cited
in :data:`VLLM_DEFAULTS`). What the engine arguments do not set is the simulated policy's own:
``vllm_v1`` allocates KV blocks as vLLM v1 does (incrementally, no watermark, recompute preemption
of the newest request); ``sarathi`` keeps Sarathi-Serve's block manager (its free-block watermark
included). The replay says how many requests it preempted.

The requests are the measured ones, in the order the engine queued them, each arriving at its
measured queue time (the anchor the source bench measures TTFT from): a prompt of
``prompt_tokens`` and ``output_tokens - 1`` decode iterations, since the simulator's prefill emits
a request's first token (:mod:`stability.sim.engine`), and the trace's prefix relation
(``prefix_parent``, ``shared_prefix_tokens``), which ``vllm_v1``'s prefix caching reads (vLLM v1
turns it on by default; a relation whose parent the engine queued after the child is left out).
Nothing of the run's measured output (first-token or last-token times) enters the replay. A run
whose source publishes only aggregates (no ``requests.csv``) is replayed from its trace: each
request at the trace's arrival, in the trace's order, with the trace's prefix relation
(:func:`trace_prefix_relation`); its replay has no measured per-request metrics.

A run with tensor parallelism (``tensor_parallel_size`` k > 1) is one group of k GPUs
(:func:`tp_gpu_table`): the GPU's real-mode table with ``tp = k`` and the all-reduce law fitted on
the packaged NCCL profile of a server of that GPU (:func:`theory.tensor_parallel.allreduce_law`,
microsoft/vidur's ``all_reduce.csv``); a GPU without that profile at degree k is not replayed.
Where vidur's kernel profile times the small operators (norms, rotary embedding, activation,
residual add, embedding) of a layer of the model's shape on the GPU at degree k, in vLLM's fused
kernels as the engine runs them (the H100 point), Eq. 7's element-wise time is their affine law
fitted on that profile (:func:`theory.validation.small_ops.small_ops_law`) in place of the
streaming rate; elsewhere the streaming rate stays.

The data-parallel ranks of a mixture of experts with expert parallelism (:mod:`stability.serving.
ep_replay`) step in lockstep on ``vllm_v1``, as vLLM runs them (:func:`locks_ranks`,
:mod:`stability.serving.lockstep`).

The engine's own costs (:class:`EngineCosts`, :mod:`theory.engine_terms`) are applied as the run's
configuration states them: each step's linear GeMMs padded to the CUDA-graph capture sizes
(:func:`capture_sizes`: the resolved ``cudagraph_capture_sizes``, vLLM's default where the run
does not record it, none where it ran eager); no host time per step (``engine_step_s`` fitted on
one run does not carry to the other: ``stability.serving.fit``); no front-end time, since the runs
measure TTFT and latency from the engine's queue time, after the front end.

References
----------
vllm-project/vllm ``vllm/engine/arg_utils.py`` (``EngineArgs``: ``block_size`` 16,
``gpu_memory_utilization`` 0.9; ``get_batch_defaults``: ``max_num_batched_tokens`` 2048 and
``max_num_seqs`` 256 for the OpenAI server on a GPU that is not a 70 GiB+ card).
"""

from __future__ import annotations

import csv
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tomli_w

from stability.serving.ep_replay import data_parallel, ep_gpu_table, expert_parallel, unsupported_parallel
from stability.serving.lockstep import run_lockstep
from stability.sim.simulate import Scenario, SimResult, simulate
from theory.engine_terms import default_capture_sizes, with_frontend
from theory.errors import FieldError, require_nonneg
from theory.hardware import gpu_table
from theory.models import get_model
from theory.tensor_parallel import allreduce_law, degrees, variant_key
from theory.validation.serving_metrics import latency, tpot, ttft
from theory.validation.serving_runs import ServingRun, load_run
from theory.validation.small_ops import small_ops_law

# vLLM's defaults where a run does not state an argument (the module docstring's references)
VLLM_DEFAULTS = {"max_num_batched_tokens": 2048, "max_num_seqs": 256, "gpu_memory_utilization": 0.9,
                 "block_size": 16}
# chunked-prefill policies, and the name each gives the engine argument it takes
SCHEDULERS = {
    "vllm_v1": {"max_num_batched_tokens": "max_num_batched_tokens", "max_num_seqs": "max_num_seqs"},
    "sarathi": {"max_num_batched_tokens": "chunk_size", "max_num_seqs": "max_num_seqs"},
}


@dataclass(frozen=True)
class EngineCosts:
    """The costs the engine adds (:mod:`theory.engine_terms`), as a replay applies them.

    Attributes
    ----------
    engine_step_s : float
        The engine's host time per step (``engine_step_s``), seconds >= 0.
    cudagraphs : bool
        Pad each step's linear GeMMs to the run's CUDA-graph capture sizes (:func:`capture_sizes`:
        none where the run ran eager).
    frontend_s : float
        The front end's time per request (``frontend_s``), added to TTFT and latency. The shipped
        runs measure both from the engine's queue time, after the front end: 0 for them.
    """

    engine_step_s: float = 0.0
    cudagraphs: bool = True
    frontend_s: float = 0.0

    def __post_init__(self):
        for name in ("engine_step_s", "frontend_s"):
            require_nonneg(f"engine.{name}", getattr(self, name), "seconds")
        if not isinstance(self.cudagraphs, bool):
            raise FieldError("engine.cudagraphs", self.cudagraphs, "true or false")


@dataclass(frozen=True)
class ReplaySpec:
    """How to replay a run: which run, on which scheduler, in which layer mode.

    Attributes
    ----------
    run : str
        A shipped run's name (:func:`theory.validation.serving_runs.shipped_runs`) or a run folder.
    scheduler : str
        One of :data:`SCHEDULERS`: ``vllm_v1`` (vLLM v1's scheduler, the engine the shipped runs ran)
        or ``sarathi`` (Sarathi-Serve's).
    mode : str
        The cost model's layer mode (``real``: GQA and SwiGLU as served).
    engine : EngineCosts or None
        The engine's costs (:mod:`theory.engine_terms`; default: the CUDA-graph padding the run's
        configuration states, no host time per step, no front-end time); None: the GPU's preset
        cost model alone.
    lockstep : bool
        Step the data-parallel ranks together where vLLM does (:func:`locks_ranks`:
        :mod:`stability.serving.lockstep`); False: independent replicas behind the same planner.
    """

    run: str
    scheduler: str = "vllm_v1"
    mode: str = "real"
    engine: EngineCosts | None = EngineCosts()
    lockstep: bool = True

    def __post_init__(self):
        if not isinstance(self.lockstep, bool):
            raise FieldError("lockstep", self.lockstep, "true or false")


@dataclass(frozen=True, eq=False)
class Replay:
    """A replayed run: the measured and the simulated per-request metrics (seconds, arrival order).

    Attributes
    ----------
    run : ServingRun
        The run.
    scenario : Scenario
        The simulated scenario (its trace and GPU file are temporary files, gone once the replay
        returns).
    measured, predicted : dict of numpy.ndarray
        ``ttft``, ``tpot``, ``latency`` per request, as vLLM's benchmark client defines them;
        ``measured`` is None for a run without per-request measurements.
    kv_blocks : int
        The KV blocks the simulator derived from the GPU, the model and the engine's memory share.
    wall_s : float
        Wall seconds of the simulation (cost model, scheduling and metrics).
    result : SimResult
        The simulation.
    lockstep : bool
        Whether the data-parallel ranks stepped together (:func:`locks_ranks`).
    """

    run: ServingRun
    scenario: Scenario
    measured: dict | None
    predicted: dict
    kv_blocks: int
    wall_s: float
    result: SimResult
    lockstep: bool = False


def unsupported(run: ServingRun) -> str | None:
    """Why ``run`` cannot be replayed yet, or None where it can."""
    kw = run.engine_kwargs
    if run.model is None:
        return f"no llmq model preset for {run.hf_model}"
    parallel = unsupported_parallel(run, get_model(run.model).moe is not None)
    if parallel:
        return parallel
    tp = int(kw.get("tensor_parallel_size") or 1)
    if tp > 1 and tp not in degrees(run.gpu):
        return f"no measured all-reduce law for tensor parallelism {tp} on {run.gpu}"
    return None


def tensor_parallel(run: ServingRun) -> int:
    """The run's ``tensor_parallel_size`` (1 where it states none)."""
    return int(run.engine_kwargs.get("tensor_parallel_size") or 1)


def tp_gpu_table(run: ServingRun) -> tuple[str, dict]:
    """The GPU table of the run's tensor-parallel group: ``(gpu key, table)``, the key
    ``<gpu>-tp<k>`` (:func:`theory.tensor_parallel.variant_key`), the run's real-mode table with
    ``tp`` and the all-reduce law fitted on the packaged NCCL profile of its server
    (:func:`theory.tensor_parallel.allreduce_law`), and where vidur's kernel profile times the
    small operators of the model's layer shape at that degree, ``overhead_s`` and ``mu_nLin`` of their law
    (:func:`theory.validation.small_ops.small_ops_law`): nothing of the run enters either law."""
    tp = tensor_parallel(run)
    lat, bw = allreduce_law(run.gpu, tp)
    table = {k: v for k, v in gpu_table(run.gpu, calibrated=True).items() if k != "base"}
    table.update(name=f"{table.get('name', run.gpu)} x{tp} (TP)", aliases=[], tp=tp,
                 allreduce_latency_s=lat, allreduce_bandwidth_gbs=bw / 1e9)
    law = small_ops_law(run.gpu, run.model, tp)
    if law is not None:
        table.update(law.gpu_fields(table))
    return variant_key(run.gpu, tp), table


def locks_ranks(run: ServingRun, scheduler: str) -> bool:
    """Whether vLLM stepped ``run``'s data-parallel ranks together: more than one, in one
    expert-parallel group (:mod:`stability.serving.lockstep`), and replayed on vLLM v1's scheduler
    (the engine that locks them; Sarathi-Serve's has no data-parallel group)."""
    return data_parallel(run) > 1 and expert_parallel(run) > 1 and scheduler == "vllm_v1"


def engine_options(run: ServingRun, scheduler: str = "vllm_v1") -> tuple[tuple[str, object], ...]:
    """The scheduler options that configure the simulator as ``run``'s engine was (module docstring)."""
    if scheduler not in SCHEDULERS:
        raise FieldError("scheduler", scheduler, f"one of {', '.join(SCHEDULERS)}")
    kw, kv = run.engine_kwargs, run.kv_cache

    def arg(name: str):
        for source in (kv, kw):
            if source.get(name) is not None:
                return source[name]
        return VLLM_DEFAULTS[name]

    context = kw.get("max_model_len") or get_model(run.model).context_length
    names = SCHEDULERS[scheduler]
    options = {names["max_num_batched_tokens"]: int(arg("max_num_batched_tokens")),
               names["max_num_seqs"]: int(arg("max_num_seqs")),
               "gpu_memory_utilization": float(arg("gpu_memory_utilization")),
               "block_size": int(arg("block_size"))}
    if context:
        options["max_model_len"] = int(context)
    if scheduler == "vllm_v1" and kw.get("enable_prefix_caching") is not None:
        options["enable_prefix_caching"] = bool(kw["enable_prefix_caching"])
    return tuple(sorted(options.items()))


def capture_sizes(run: ServingRun) -> tuple[int, ...] | None:
    """The CUDA-graph capture sizes ``run``'s engine padded its steps to: its resolved
    ``compilation_config.cudagraph_capture_sizes`` where recorded, else vLLM's default for its
    ``max_num_seqs`` (:func:`theory.engine_terms.default_capture_sizes`); None where it ran eager
    (``enforce_eager``, or a recorded ``cudagraph_mode`` of NONE)."""
    rc = run.resolved_config
    model_config, comp = rc.get("model_config") or {}, rc.get("compilation_config") or {}
    if model_config.get("enforce_eager") or run.engine_kwargs.get("enforce_eager"):
        return None
    if comp.get("cudagraph_mode") in (0, [0, 0], "NONE"):
        return None
    if comp.get("cudagraph_capture_sizes"):
        return tuple(sorted(int(x) for x in comp["cudagraph_capture_sizes"]))
    return default_capture_sizes(int(dict(engine_options(run))["max_num_seqs"]))


def _with_engine(run: ServingRun, engine: EngineCosts, table: dict) -> dict:
    """``table`` (a GPU table: the run's real-mode preset, or its expert-parallel replica) with
    ``engine``'s terms on."""
    table = dict(table)
    if engine.engine_step_s:
        table["engine_step_s"] = float(engine.engine_step_s)
    if engine.frontend_s:
        table["frontend_s"] = float(engine.frontend_s)
    sizes = capture_sizes(run) if engine.cudagraphs else None
    if sizes:
        table["cudagraph_capture_sizes"] = list(sizes)
    return table


def prefix_relation(run: ServingRun) -> tuple[np.ndarray, np.ndarray]:
    """The trace's prefix relation in the engine's queue order (the replay's request order):
    each request's prefix parent (its row in that order, -1: none) and shared prompt tokens; a
    parent queued after its child is left out."""
    rq, tr = run.requests, run.trace
    row = np.empty(tr.request_id.size, dtype=np.int64)
    row[rq.request_id] = np.arange(rq.request_id.size)
    trace_parent = tr.prefix_parent[rq.request_id]
    parent = np.where(trace_parent >= 0, row[np.maximum(trace_parent, 0)], -1)
    keep = (parent >= 0) & (parent < np.arange(parent.size))
    return np.where(keep, parent, -1), np.where(keep, tr.shared_prefix_tokens[rq.request_id], 0)


def trace_prefix_relation(run: ServingRun) -> tuple[np.ndarray, np.ndarray]:
    """The trace's prefix relation in the trace's order (the replay's order where the run has no
    measured requests): each request's prefix parent (-1: none) and shared prompt tokens."""
    tr = run.trace
    keep = tr.prefix_parent >= 0
    return np.where(keep, tr.prefix_parent, -1), np.where(keep, tr.shared_prefix_tokens, 0)


def replay(spec: ReplaySpec) -> Replay:
    """Replay ``spec.run`` (see the module docstring); refuses a run :func:`unsupported` names."""
    run = load_run(spec.run)
    why = unsupported(run)
    if why:
        raise FieldError(f"run {run.name}", "replay", f"a replayable run: {why}")
    rq, tr = run.requests, run.trace
    if rq is None:  # aggregates only: the trace's requests at the trace's arrivals
        arrival, prompts, outputs = tr.arrival - tr.arrival[0], tr.prompt_tokens, tr.output_tokens
        parent, shared = trace_prefix_relation(run)
    else:
        arrival, prompts, outputs = rq.arrival - rq.arrival[0], rq.prompt_tokens, rq.output_tokens
        parent, shared = prefix_relation(run)
    # the simulator's trace holds >= 1 decode: a request of one output token (none in the bench
    # runs, one in the H100 trace) runs one decode more than it did; its TPOT is left out as vLLM's
    # client leaves it out (serving_metrics.tpot: one output token)
    decodes = np.maximum(outputs - 1, 1)
    with tempfile.TemporaryDirectory(prefix="llmq-replay-") as tmp:
        trace = Path(tmp) / "trace.csv"
        with open(trace, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(("arrival_time", "prompt_len", "output_len", "prefix_parent", "shared_prefix_tokens"))
            w.writerows(zip(arrival.tolist(), prompts.tolist(), decodes.tolist(), parent.tolist(),
                            shared.tolist(), strict=True))
        gpu, table = ep_gpu_table(run) if expert_parallel(run) > 1 else (run.gpu, None)
        if tensor_parallel(run) > 1:
            gpu, table = tp_gpu_table(run)
        if spec.engine is not None:
            table = _with_engine(run, spec.engine, table or gpu_table(run.gpu, calibrated=True))
        gpu_path = None if table is None else Path(tmp) / "gpus.toml"
        if gpu_path is not None:
            gpu_path.write_text(tomli_w.dumps({"gpus": {gpu: table}}), encoding="utf-8")
        sc = Scenario(gpu=gpu, model=run.model, mode=spec.mode, scheduler=spec.scheduler,
                      options=engine_options(run, spec.scheduler), trace=str(trace),
                      n_requests=int(arrival.size), load=None, gpu_file=gpu_path and str(gpu_path),
                      r=data_parallel(run), planner="jsq" if data_parallel(run) > 1 else "random")
        lockstep = spec.lockstep and locks_ranks(run, spec.scheduler)
        t0 = time.perf_counter()
        res = simulate(sc, runner=run_lockstep if lockstep else None)
        wall = time.perf_counter() - t0
    got = res.requests
    if np.any(~np.isfinite(got["t_finish"])):
        raise FieldError(f"run {run.name}: replay", int(np.sum(~np.isfinite(got["t_finish"]))),
                         "every request finished (some were rejected or never ran)")
    p_ttft, p_latency = with_frontend(res.cost_model, ttft(got["arrival"], got["t_first"]),
                                      latency(got["arrival"], got["t_finish"]))
    predicted = {"ttft": p_ttft, "tpot": tpot(got["t_first"], got["t_finish"], outputs),
                 "latency": p_latency}
    measured = None if rq is None else {"ttft": ttft(rq.arrival, rq.first_token),
                                        "tpot": tpot(rq.first_token, rq.last_token, rq.output_tokens),
                                        "latency": latency(rq.arrival, rq.last_token)}
    return Replay(run, sc, measured, predicted, int(res.params.kv.blocks), wall, res, lockstep)
