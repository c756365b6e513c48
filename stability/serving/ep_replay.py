"""A measured run of a mixture of experts served with data and expert parallelism, configured for
the simulator as its engine was.

vLLM's ``enable_expert_parallel`` with ``data_parallel_size = DP`` (and ``tensor_parallel_size``
1) serves ``DP`` replicas, one GPU each, whose MoE layers form one expert-parallel group of ``DP``
GPUs (:mod:`theory.expert_parallel`). The replay simulates ``r = DP`` replicas of a GPU profile
with ``ep = DP`` (:func:`ep_gpu_table`), behind join-the-shortest-queue routing, as vLLM's
data-parallel load balancer sends each request to the engine with the fewest requests
(``DPLBAsyncMPClient`` in ``vllm/v1/engine/core_client.py`` scores an engine by its waiting and
running requests, the waiting ones weighted 4; llmq's ``jsq`` counts both alike,
:mod:`stability.sim.routing`). Under ``jsq`` the simulator's nodes keep no prefix relation, so the
prefix cache reuses nothing in this replay.

The lockstep. vLLM does not run the ``DP`` engines of an MoE independently: every MoE layer's
dispatch and combine is a collective over the group, so on vLLM v1's scheduler the replay steps the
replicas together (:mod:`stability.serving.lockstep`, whose docstring cites vLLM's source for each
rule): each step every rank runs its own scheduler's batch; a rank without work runs a dummy pass of
one token (``DPEngineCoreProc.run_busy_loop``, ``execute_dummy_batch``); every rank pads its batch
to the largest token count of the group where that count is within the CUDA-graph capture sizes
(``coordinate_batch_across_dp``), and otherwise runs eagerly with its experts on the group's tokens
(the all-gather of ``AgRsAll2AllManager``); the step lasts as long as the slowest rank's pass.
:func:`stability.serving.replay.locks_ranks` says where it applies (``DP > 1`` with
``enable_expert_parallel``); ``ReplaySpec(lockstep=False)`` replays independent replicas instead.

The interconnect. A GPU preset has an all-reduce law only where a multi-GPU server of it was
profiled (:mod:`theory.tensor_parallel`); the RTX PRO 6000 has none. The run ships the source
simulator's own cluster description of the same two GPUs (``llmservingsim_config.json``:
``link_latency`` in ns and ``link_bw`` in GB/s, LLMServingSim's analytical link), and the replay
takes that link as the law of the dispatch and combine: a stated assumption of the source, not a
measurement, and nothing of the run's measured latencies enters it.

References
----------
vllm-project/vllm @ 00193b82b0e2d4faea5d3b4ea4f6c4c2bd9d057a ``vllm/config/parallel.py``
(``data_parallel_size``, ``enable_expert_parallel``, ``all2all_backend``);
casys-kaist/LLMServingSim @ 5daddb21a545658d5150b535712d0494584b5278
``bench/examples/RTXPRO6000/Qwen3-30B-A3B-Instruct-2507/config.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from theory.errors import FieldError
from theory.expert_parallel import check_group, ep_key, ep_table
from theory.hardware import gpu_table
from theory.validation.serving_runs import ServingRun

LINK_FILE = "llmservingsim_config.json"


def data_parallel(run: ServingRun) -> int:
    """The run's ``data_parallel_size`` (1 where it states none)."""
    return int(run.engine_kwargs.get("data_parallel_size") or 1)


def expert_parallel(run: ServingRun) -> int:
    """The run's expert-parallel group: ``DP x TP`` with ``enable_expert_parallel``, else 1."""
    kw = run.engine_kwargs
    if not kw.get("enable_expert_parallel"):
        return 1
    return data_parallel(run) * int(kw.get("tensor_parallel_size") or 1)


def unsupported_parallel(run: ServingRun, moe: bool) -> str | None:
    """Why the run's data or expert parallelism cannot be replayed, or None where it can (or where
    the run has neither)."""
    dp, ep = data_parallel(run), expert_parallel(run)
    if dp == 1 and ep == 1:
        return None
    if ep == 1:
        return "data parallelism without expert parallelism is not simulated"
    if not moe:
        return "expert parallelism of a dense model"
    if int(run.engine_kwargs.get("tensor_parallel_size") or 1) > 1:
        return "expert parallelism over tensor-parallel replicas is not simulated"
    if not (Path(run.path) / LINK_FILE).is_file():
        return f"no interconnect for the expert-parallel dispatch ({LINK_FILE} absent)"
    return None


def link(run: ServingRun) -> tuple[float, float]:
    """(latency s, bandwidth bytes/s) of the link the run's ``llmservingsim_config.json`` states
    (module docstring); every instance must state the same."""
    path = Path(run.path) / LINK_FILE
    cfg = json.loads(path.read_text(encoding="utf-8"))
    lat, bw = cfg.get("link_latency"), cfg.get("link_bw")
    for name, v in (("link_latency", lat), ("link_bw", bw)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise FieldError(f"{path}: field {name!r}", v, "a positive number")
    return lat * 1e-9, bw * 1e9


def ep_gpu_table(run: ServingRun) -> tuple[str, dict]:
    """The GPU table of one replica of the run's expert-parallel group: ``(gpu key, table)``, the
    key ``<gpu>-ep<ep>`` (the run's GPU, its real-mode table, with ``ep``, vLLM's default
    ``all2all_backend`` and the link of :func:`link`; :func:`theory.expert_parallel.ep_table`).

    Raises
    ------
    FieldError
        If the group is larger than the GPUs the run used, or does not divide them.
    """
    ep = expert_parallel(run)
    check_group(ep, run.gpus, f"run {run.name}: enable_expert_parallel group (DP x TP)")
    return ep_key(run.gpu, ep), ep_table(run.gpu, gpu_table(run.gpu, calibrated=True), ep, link(run))
