"""Expert parallelism of a mixture-of-experts model: which splits exist, what one GPU holds, and
the dispatch and combine of the tokens between the GPUs of an expert-parallel group.

How vLLM spells it. ``enable_expert_parallel = true`` with ``data_parallel_size = DP`` and
``tensor_parallel_size = TP`` makes the MoE layers' expert-parallel group the ``DP x TP`` ranks
(``ParallelConfig.data_parallel_size``: "MoE layers will be sharded according to the product of the
tensor, prefill-context, and data parallel sizes"); each rank holds whole experts (no expert is
split in width), placed ``linear``: rank ``i`` holds a contiguous block (``expert_placement_strategy``);
the attention and dense layers stay per DP replica. The tokens cross the group by the
``all2all_backend``, ``allgather_reducescatter`` by default: every rank all-gathers the hidden
states of the group's tokens (with their top-k ids and weights), runs its local experts on the
slots routed to them, and reduce-scatters the partial outputs back to the tokens' ranks; the
DeepEP/pplx backends send each slot to its expert's rank instead (a true all-to-all).
(vllm-project/vllm @ 00193b82b0e2d4faea5d3b4ea4f6c4c2bd9d057a ``vllm/config/parallel.py``,
``ParallelConfig``: ``data_parallel_size``, ``enable_expert_parallel``,
``expert_placement_strategy``, ``all2all_backend``.)

What llmq models. The GPU field ``ep`` (``[gpus.<key>]``, beside ``tp``) is the size of the
expert-parallel group a replica belongs to: ``tp`` must be 1 (EP over DP replicas, each replica one
GPU), so ``ep`` is vLLM's ``DP`` and Theorem 1's ``r`` still counts replicas (GPUs). Each GPU holds
``E / ep`` experts (``E`` divisible by ``ep``; vLLM would give the first ``E mod ep`` ranks one
more, an uneven split llmq does not model) plus every non-expert weight (:func:`shard_weights`).
The group's replicas step together (an idle vLLM DP rank runs dummy batches so that every MoE
layer's collectives meet), and llmq prices a replica's batch of ``tau`` tokens with the other
``ep - 1`` replicas holding batches of the same size (the balanced group). Under uniform routing
(:mod:`theory.moe`) a local expert then receives ``Binomial(ep tau, k/E)`` token-slots, so the
expected column blocks and active experts of one GPU are ``1 / ep`` of those of ``ep tau`` tokens
over all ``E`` experts, and its slots ``tau k`` (:meth:`theory.moe.MoETerms.time`). Each MoE layer
adds two collectives (dispatch and combine), each ``latency + bytes / busbw`` on the interconnect's
law, the ``allreduce_latency_s`` and ``allreduce_bandwidth_gbs`` of the GPU table (the all-reduce
law of :mod:`theory.tp_split`: the bus bandwidth is a property of the links, the same for every
collective, nccl-tests ``doc/PERFORMANCE.md``), with the bus bytes per GPU (:func:`bus_bytes_per_token`):

- ``all2all_backend = "allgather_reducescatter"`` (vLLM's default): an all-gather or a
  reduce-scatter of ``ep tau`` rows of ``d_x`` elements, ``(ep - 1)/ep`` of the buffer over
  the bus: ``tau (ep - 1) d_x b`` bytes;
- ``all2all_backend = "all_to_all"`` (DeepEP, pplx): the ``tau k`` slots, each ``d_x b`` bytes, of
  which ``(ep - 1)/ep`` leave the GPU: ``tau k d_x b (ep - 1)/ep`` bytes.

Theorem 1. ``T_bar^R`` takes the per-token limit of the experts' time (:meth:`theory.moe.MoETerms.
per_token_limit`): the compute per slot is unchanged (a GPU runs ``tau k`` slots per ``tau`` of its
tokens), the floor's weight reads amortize as before, and each MoE layer adds the two
collectives' bus bytes per token over ``busbw`` (their latencies amortize away); so
``lambda* = r / T_bar^R`` with ``r`` the replicas (``r = ep`` for one group) stays the bound of the
group's throughput under the balanced-group pricing; Eq. 13's ``T^max`` pays the latencies.

References
----------
vllm-project/vllm @ 00193b82b0e2d4faea5d3b4ea4f6c4c2bd9d057a ``vllm/config/parallel.py``; vLLM's
``determine_expert_map`` (``vllm/model_executor/layers/fused_moe/``: ``E // ep`` experts per rank, the
remainder on the first ranks); nccl-tests ``doc/PERFORMANCE.md`` (bus bandwidth of all-gather,
reduce-scatter and all-to-all: ``algbw (n-1)/n``); Lepikhin et al. (2021), "GShard",
arXiv:2006.16668 (experts sharded over devices, tokens dispatched and combined by all-to-all).
"""

from __future__ import annotations

from theory.errors import FieldError

BACKENDS = ("allgather_reducescatter", "all_to_all")  # vLLM's default first
DEFAULT_BACKEND = BACKENDS[0]
COLLECTIVES_PER_LAYER = 2  # dispatch and combine


def check_ep(ep: int, tp: int, model, where: str) -> None:
    """Raise :class:`FieldError` naming ``<where>.ep`` (or the field at fault) if ``model`` cannot
    be split over an expert-parallel group of ``ep`` GPUs (module docstring)."""
    if ep == 1:
        return
    if model.moe is None:
        raise FieldError(
            f"{where}.ep",
            ep,
            f"1 for the dense model {model.key} (expert parallelism "
            "splits the experts of a mixture of experts)",
        )
    if tp > 1:
        raise FieldError(
            f"{where}.ep",
            ep,
            f"1 with tp = {tp} (expert parallelism over tensor-parallel "
            "replicas is not modelled; an EP group is ep replicas of one GPU each)",
        )
    E = model.moe.n_experts
    if E % ep:
        raise FieldError(
            f"{where}.ep",
            ep,
            f"a divisor of n_experts = {E} of model {model.key} (llmq "
            "prices E/ep experts on every GPU; vLLM would place them unevenly)",
        )


def check_group(ep: int, gpus: int, where: str) -> None:
    """Raise :class:`FieldError` naming ``where`` if an expert-parallel group of ``ep`` GPUs does
    not fit in ``gpus`` GPUs, or does not tile them (the groups partition the GPUs)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise FieldError(f"{where} (GPUs)", gpus, "an integer >= 1")
    if ep > gpus:
        raise FieldError(
            where, ep, f"at most the {gpus} GPU(s) there are (an expert-parallel group of {ep} GPUs)"
        )
    if gpus % ep:
        raise FieldError(
            where, ep, f"a divisor of the {gpus} GPUs (the expert-parallel groups partition them)"
        )


def check_backend(backend, where: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else :class:`FieldError` naming
    ``<where>.all2all_backend``."""
    if backend not in BACKENDS:
        raise FieldError(f"{where}.all2all_backend", backend, f"one of {', '.join(BACKENDS)}")
    return backend


def splits_experts(model, ep: int, tp: int = 1) -> bool:
    """Whether ``model`` can be split over an expert-parallel group of ``ep`` GPUs with ``tp``
    (:func:`check_ep`: ``ep = 1``, or a mixture of experts whose ``n_experts`` ``ep`` divides, with
    ``tp = 1``)."""
    try:
        check_ep(ep, tp, model, "gpus")
    except FieldError:
        return False
    return True


def ep_key(gpu: str, ep: int) -> str:
    """The GPU key of one replica of an expert-parallel group of ``ep`` GPUs of ``gpu``:
    ``<gpu>-ep<ep>`` (``gpu`` itself for ``ep = 1``)."""
    return gpu if ep == 1 else f"{gpu}-ep{ep}"


def ep_table(
    gpu: str, table: dict, ep: int, link: tuple[float, float], backend: str = DEFAULT_BACKEND
) -> dict:
    """The GPU table of one replica of an expert-parallel group of ``ep`` GPUs of ``gpu``:
    ``table`` (the GPU's resolved real-mode table, :func:`theory.hardware.gpu_table` with
    ``calibrated``) without its ``base``, with ``ep``, the ``all2all_backend`` and the law of the
    dispatch and combine (module docstring) from ``link = (latency s, bus bandwidth bytes/s)``:
    ``allreduce_latency_s`` and ``allreduce_bandwidth_gbs``.

    Raises
    ------
    FieldError
        If ``ep`` is not an integer >= 2, or the backend is not one of :data:`BACKENDS`.
    """
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 2:
        raise FieldError("ep", ep, "an integer >= 2 (GPUs of an expert-parallel group)")
    latency_s, bandwidth = link
    out = {k: v for k, v in table.items() if k != "base"}
    out.update(
        name=f"{out.get('name', gpu)} x{ep} (EP)",
        aliases=[],
        ep=ep,
        all2all_backend=check_backend(backend, "gpus"),
        allreduce_latency_s=latency_s,
        allreduce_bandwidth_gbs=bandwidth / 1e9,
    )
    return out


def bus_bytes_per_token(backend: str, ep: int, k: int, d_x: int, b: int) -> float:
    """Bus bytes per GPU of one dispatch (or one combine) per token of the GPU's batch (module
    docstring): ``(ep - 1) d_x b`` for ``allgather_reducescatter``, ``k d_x b (ep - 1)/ep`` for
    ``all_to_all``; 0 at ``ep = 1``."""
    check_backend(backend, "gpus")
    if ep == 1:
        return 0.0
    if backend == "all_to_all":
        return k * d_x * b * (ep - 1) / ep
    return float((ep - 1) * d_x * b)


def expert_weight_elements(model) -> int:
    """Elements of every routed expert's weights, all MoE layers (real mode's SwiGLU shapes; 0 for a
    dense model)."""
    if model.moe is None:
        return 0
    return model.moe.n_experts * sum(g.count * g.d_row * g.d_red for g in model.expert_gemms("real"))


def shard_weights(model, ep: int, weight_bytes: float, bytes_per_element: int) -> float:
    """One GPU's weight bytes in an expert-parallel group of ``ep``: ``weight_bytes`` (the
    replica's, as :func:`theory.tp_split.shard_memory` counts them) less the ``(ep - 1)/ep`` of the
    routed experts held by the other GPUs."""
    if ep == 1:
        return weight_bytes
    return weight_bytes - expert_weight_elements(model) * bytes_per_element * (ep - 1) / ep


__all__ = [
    "BACKENDS",
    "COLLECTIVES_PER_LAYER",
    "DEFAULT_BACKEND",
    "bus_bytes_per_token",
    "check_backend",
    "check_ep",
    "check_group",
    "ep_key",
    "ep_table",
    "expert_weight_elements",
    "shard_weights",
    "splits_experts",
]
