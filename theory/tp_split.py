"""Megatron-LM tensor parallelism of one replica (the ``tp`` term of :mod:`theory.terms`): which
splits a model allows, what one GPU of the group holds, and the group's all-reduces.

References
----------
Shoeybi et al. (2019), Megatron-LM, arXiv:1909.08053, Section 3; nccl-tests ``doc/PERFORMANCE.md``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from theory.errors import FieldError


class AllReduceLaw(Protocol):
    """The fields of an all-reduce law (those of :class:`theory.terms.GpuTerms`)."""

    tp: int
    allreduce_latency_s: float
    allreduce_bandwidth: float | None


def check_tp(tp: int, n_heads: int, n_kv_heads: int, d_ff: int, mode: str, model_key: str,
             where: str) -> None:
    """Raise :class:`FieldError` naming ``<where>.tp`` if the model cannot be split ``tp`` ways.

    ``tp`` must divide the query heads and the FFN width; the KV heads are split when ``tp``
    divides them and replicated when ``tp`` is a multiple of them (vLLM's ``QKVParallelLinear``).
    """
    if tp == 1:
        return
    if mode != "real":
        raise FieldError(f"{where}.tp", tp, "1 in mode 'paper' (the paper's layer has no output "
                         "projection to split row-parallel); use mode 'real'")
    if n_heads % tp:
        raise FieldError(f"{where}.tp", tp, f"a divisor of n_heads = {n_heads} of model {model_key}")
    if (n_kv_heads % tp if tp <= n_kv_heads else tp % n_kv_heads):
        raise FieldError(f"{where}.tp", tp, f"a divisor or multiple of n_kv_heads = {n_kv_heads} "
                         f"of model {model_key}")
    if d_ff % tp:
        raise FieldError(f"{where}.tp", tp, f"a divisor of d_ff = {d_ff} of model {model_key}")


def check_moe_tp(tp: int, model) -> None:
    """Raise :class:`FieldError` naming ``models.<key>.d_ff_expert`` (or ``d_ff_shared``) if a
    ``tp``-way split cannot shard ``model``'s experts: vLLM without expert parallelism splits each
    routed expert's width, and the shared experts' together, over the GPUs like a dense MLP
    (:meth:`theory.models.Model.expert_gemms`), so ``tp`` must divide them. Nothing for a dense
    model or ``tp = 1``."""
    if tp == 1 or model.moe is None:
        return
    moe = model.moe
    if moe.d_ff_expert % tp:
        raise FieldError(f"models.{model.key}.d_ff_expert", moe.d_ff_expert,
                         f"a multiple of tp = {tp} (each expert's width split over the GPUs)")
    if moe.d_shared % tp:
        raise FieldError(f"models.{model.key}.d_ff_shared", moe.d_ff_shared,
                         f"a value with n_shared_experts x d_ff_shared = {moe.d_shared} a multiple of "
                         f"tp = {tp} (the shared experts' width split over the GPUs)")


def shard_memory(model, tp: int, bytes_per_element: int | None = None, ep: int = 1) -> tuple[float, float]:
    """(weight bytes, KV bytes per token) that one GPU of a ``tp``-way tensor-parallel replica holds.

    Every weight matrix is split ``tp`` ways (Megatron-LM; the embedding and the vocab projection
    over the vocabulary), except that when ``tp > n_kv_heads`` each GPU keeps one whole K and V
    head, so the K and V projections are replicated ``tp / n_kv_heads`` times; the norms'
    replicas (under 0.01 % of the weights) are not counted. Each GPU caches the K and V of its own
    ``max(n_kv_heads / tp, 1)`` heads for every token of the replica, as vLLM sizes its cache
    (``ModelConfig.get_num_kv_heads``: ``max(1, total_num_kv_heads // tensor_parallel_size)``,
    vllm-project/vllm ``vllm/config.py``). ``tp = 1`` gives the whole model's
    ``weight_bytes()`` and ``kv_bytes_per_token()``. A mixture of experts' routed and shared
    experts are split ``tp`` ways too (each expert's width, :meth:`theory.models.Model.expert_gemms`);
    its router, replicated, ``E d_x`` elements per MoE layer, is counted split (a few in ten thousand
    of the weights of the presets).
    ``bytes_per_element`` ``None`` counts both at the model's precision (:mod:`theory.precision`:
    one byte per element at fp8). ``ep > 1`` (an expert-parallel group, ``tp = 1``) keeps
    ``1/ep`` of the routed experts' weights on the GPU (:func:`theory.expert_parallel.shard_weights`);
    the KV cache is the replica's own.
    """
    from theory.expert_parallel import shard_weights

    if bytes_per_element is None:
        bytes_per_element = model.bytes_per_element
    weights = model.weight_bytes(bytes_per_element) / tp
    heads = max(model.n_kv_heads / tp, 1.0)
    if tp > model.n_kv_heads:  # one whole K and V head per GPU, not its 1/tp share
        kv_proj = 2.0 * model.N * model.d_x * model.head_dim * bytes_per_element
        weights += kv_proj * (1.0 - model.n_kv_heads / tp)
    weights = shard_weights(model, ep, weights, bytes_per_element)
    return weights, model.kv_bytes_per_token(bytes_per_element) * heads / model.n_kv_heads


def allreduce_count(model) -> int:
    """All-reduces per batch of a tensor-parallel ``model``: two per layer (after the attention
    output projection and after the MLP's down projection, Megatron-LM Section 3) and one for the
    vocab-parallel embedding when the model has an LM head; each reduces the batch's ``tokens x
    d_x`` activations.

    References
    ----------
    Shoeybi et al. (2019), Megatron-LM, arXiv:1909.08053, Section 3.
    """
    return 2 * model.N + (1 if model.terms.lm_head else 0)


def allreduce_time(terms: AllReduceLaw, n_bytes, latency: bool = True) -> np.ndarray:
    """One all-reduce of ``n_bytes`` per GPU: ``latency + 2 (tp-1)/tp n_bytes / busbw`` (0 if tp = 1);
    ``latency=False`` gives the bandwidth part alone.

    References
    ----------
    nccl-tests ``doc/PERFORMANCE.md`` (bus bandwidth of all-reduce: ``algbw 2 (n-1)/n``).
    """
    n_bytes = np.asarray(n_bytes, dtype=float)
    if terms.tp == 1:
        return np.zeros(n_bytes.shape)
    moved = 2.0 * (terms.tp - 1) / terms.tp * n_bytes / terms.allreduce_bandwidth
    return terms.allreduce_latency_s + moved if latency else moved


def fit_allreduce_law(n_bytes, seconds, tp: int | np.ndarray) -> tuple[float, float]:
    """Fit ``allreduce_latency_s`` and the bus bandwidth (bytes/s) of :func:`allreduce_time` to
    measured all-reduce times, minimising the squared relative error (non-negative coefficients).

    Parameters
    ----------
    n_bytes, seconds : array_like
        Message sizes per GPU and measured times (e.g. nccl-tests' ``all_reduce_perf``, or the
        packaged ``vidur_all_reduce`` profile of :mod:`theory.profiles`).
    tp : int or array_like of int
        Number of GPUs in the all-reduce (>= 2), one for all points or one per point (one law
        for several group sizes on the same interconnect).

    Returns
    -------
    (latency_s, bandwidth) : tuple of float
        Put ``bandwidth / 1e9`` in ``allreduce_bandwidth_gbs``.
    """
    from scipy.optimize import nnls

    b = np.asarray(n_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    n = np.broadcast_to(np.asarray(tp), b.shape) if b.ndim else np.asarray(tp)
    if n.dtype.kind not in "iu" or n.dtype == bool or np.any(n < 2):
        raise FieldError("tp", tp, "integers >= 2 (GPUs in the all-reduce)")
    if b.size < 2 or b.shape != t.shape or np.any(t <= 0) or np.any(b <= 0):
        raise FieldError("seconds", t.size, "at least two positive (bytes, seconds) pairs")
    design = np.c_[np.ones_like(b), 2.0 * (n - 1) / n * b] / t[:, None]
    (latency, inv_bw), _ = nnls(design, np.ones(b.size))
    if inv_bw <= 0:
        raise FieldError("n_bytes", (float(b.min()), float(b.max())),
                         "message sizes over which the time grows with the bytes")
    return float(latency), float(1.0 / inv_bw)
