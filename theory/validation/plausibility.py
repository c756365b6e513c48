"""Physical plausibility of measured rows: the roofline lower bound of each row's shape.

No kernel finishes before its arithmetic has run at the card's peak rate, nor before the bytes
it must move have crossed DRAM at the card's bandwidth (the roofline of Williams, Waterman and
Patterson). For a measured row on ``TP`` GPUs of dense FP16 peak ``F`` and DRAM bandwidth ``B``
(the datasheet figures of the GPU preset, ``peak_fp16_tflops`` and ``bandwidth_gbs`` in
``theory/data/gpus.toml``, never calibrated ones) the time is at least::

    T_min = max(W / (TP h F), max(Q - L2, 0) / B)

with ``W`` the FLOPs of the whole operation (all ``TP`` shards), ``Q`` the bytes one GPU must
read or write at least once, ``h`` the clock headroom (the peak is quoted at the rated boost
clock, which GPU Boost exceeds) and ``L2`` the card's L2 capacity (a profiler repeating a kernel
on the same operands finds up to that many of them in L2), both from
``theory/data/plausibility.toml``; a GPU without an L2 figure gets the FLOPs term alone.

A row measured faster than ``T_min`` cannot be a measurement of the shape it states (a failed or
truncated run, a mislabelled shape): :func:`implausible` marks it, and
:func:`theory.validation.validate.validate` leaves it out of every score and lists it as not predicted with
:data:`REASON`.

The work counted, per operation (``b`` bytes per element, ``N`` layers, ``d_q`` and ``d_kv`` the
query and K/V widths one GPU holds, ``max(n_kv_heads / TP, 1)`` K/V heads per GPU as
:meth:`theory.models.Model.linear_gemms` replicates them):

GeMM (weight ``d_row x d_red`` per GPU, :func:`theory.profiles.gemm_shape`, ``tokens`` columns)
    ``W = TP 2 d_row d_red tokens``; ``Q = b (d_row d_red + tokens (d_row + d_red))`` (weights and
    activations in and out).
``prefill_batch`` (``tokens / context`` prompts of ``context`` tokens)
    ``W`` = the linear GeMMs over every token, the LM head over one row per prompt, and causal
    self-attention ``4 d N L (L + 1) / 2`` per prompt of length ``L`` (``Q K^T`` and ``P V``);
    ``Q`` = one GPU's weight shard (:meth:`~theory.models.Model.linear_gemms`).
``decode_batch`` (``tokens`` decodes, each with at least ``context`` cached tokens)
    ``W`` = the linear GeMMs and the LM head per decode and ``4 d N (context + 1)`` of attention per
    decode; ``Q`` = the weight shard and the K/V cache each decode reads, ``2 b N d_kv context``.
``attention`` (one layer, a chunk of ``c`` tokens after ``p`` cached ones and ``decodes`` with ``context``)
    ``W = TP 4 d_q (c p + c (c + 1) / 2 + decodes (context + 1))``; ``Q = b (2 d_kv (p + c +
    decodes context) + 2 d_q tokens)`` (the keys and values read, queries in and outputs out).
``all_reduce`` (a message of ``bytes`` per GPU)
    ``W = 0``; ``Q`` = the message, read once.

Each count leaves work out (norms, biases, softmax, writes of the K/V cache), so ``T_min`` is a
lower bound. Element-wise kernels get no bound (``NaN``): the row would need each kernel's
element count. A relative tolerance :data:`RTOL` keeps a row printed at the bound (times in the
profiles have seven to nine significant digits) from being screened by rounding.

References
----------
Williams, Waterman, Patterson (2009), "Roofline: an insightful visual performance model for
multicore architectures", Communications of the ACM 52(4), 65-76. Bari, Hegde, de Veciana (2025),
Eq. 4-6 (the GeMMs of a batch and the attention work).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from theory.config import read_packaged
from theory.hardware import get_gpu
from theory.models import Model, get_model
from theory.profiles import GEMM_OPERATIONS, gemm_shape
from theory.terms import LM_HEAD

RTOL = 1e-6
REASON = ("faster than the roofline lower bound of its shape, max(FLOPs / (TP x dense FP16 peak x "
          "clock headroom), bytes beyond L2 / DRAM bandwidth) at the datasheet figures "
          "(theory.validation.plausibility): not a measurement of that shape")
BOUNDED = (*GEMM_OPERATIONS, "prefill_batch", "decode_batch", "attention", "all_reduce")


@cache
def _figures() -> tuple[float, dict[str, float]]:
    """(clock headroom, L2 bytes per GPU key) of ``theory/data/plausibility.toml``."""
    data = read_packaged("plausibility.toml")
    return float(data["clock_headroom"]), {k: float(v) * 2**20 for k, v in data["l2_mib"].items()}


def _work(rows: np.ndarray, model: Model | None, tp: int, op: str, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``(W, Q)`` of rows of one model, TP and operation (module docstring)."""
    tokens = rows["tokens"].astype(float)
    if op == "all_reduce":
        return np.zeros(rows.size), rows["bytes"].astype(float)
    if op in GEMM_OPERATIONS:
        d_row, d_red = gemm_shape(model, op, tp)
        return (tp * 2.0 * d_row * d_red * tokens,
                b * (d_row * d_red + tokens * (d_row + d_red)))
    d_q, d_kv = model.attention_widths("real", tp)  # the widths one GPU of the split holds
    if op == "attention":
        c = tokens - rows["decodes"]
        p = np.maximum(rows["prefill_context"], 0).astype(float)
        ctx = np.maximum(rows["context"], 0).astype(float)
        dec = rows["decodes"].astype(float)
        w = tp * 4.0 * d_q * (c * p + c * (c + 1) / 2 + dec * (ctx + 1))
        return w, b * (2.0 * d_kv * (np.where(c > 0, p + c, 0.0) + dec * ctx) + 2.0 * d_q * tokens)
    gemms = model.linear_gemms("real", tp)
    layer = sum(2.0 * g.count * g.d_row * g.d_red for g in gemms if g.name != LM_HEAD)
    head = sum(2.0 * g.d_row * g.d_red for g in gemms if g.name == LM_HEAD)
    shard = b * sum(float(g.count * g.d_row * g.d_red) for g in gemms)
    ctx = rows["context"].astype(float)
    if op == "prefill_batch":
        prompts = np.maximum(tokens // np.maximum(ctx, 1), 1)
        w = tp * (layer * tokens + head * prompts + 4.0 * d_q * model.N * prompts * ctx * (ctx + 1) / 2)
        return w, np.full(rows.size, shard)
    # decode_batch
    w = tp * (tokens * (layer + head) + 4.0 * d_q * model.N * tokens * (ctx + 1))
    return w, shard + tokens * 2.0 * b * model.N * d_kv * ctx


def lower_bound(rows: np.ndarray, gpu_file: str | None = None,
                model_file: str | None = None) -> np.ndarray:
    """The roofline lower bound ``T_min`` in seconds of each row (``NaN``: no bound computed).

    Parameters
    ----------
    rows : numpy.ndarray
        Rows of a :class:`theory.profiles.Profile`.
    gpu_file, model_file : str, optional
        User TOML files (their peak and bandwidth are taken as stated).

    Returns
    -------
    numpy.ndarray
        ``max(W / (TP h F), max(Q - L2, 0) / B)`` per row (module docstring), ``NaN`` for
        element-wise kernels.

    References
    ----------
    Williams, Waterman, Patterson (2009), CACM 52(4), 65-76 (the roofline).
    """
    out = np.full(rows.size, np.nan)
    headroom, l2 = _figures()
    keys = set(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(),
                   rows["operation"].tolist(), strict=True))
    for g, m, tp, op in sorted(k for k in keys if k[3] in BOUNDED):
        sel = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rows["operation"] == op)
        gpu = get_gpu(g, gpu_file)
        model = get_model(m, model_file) if op != "all_reduce" else None
        w, q = _work(rows[sel], model, int(tp), op, gpu.terms.bytes_per_element)
        dram = np.maximum(q - l2[gpu.key], 0.0) / gpu.bandwidth if gpu.key in l2 else 0.0
        out[sel] = np.maximum(w / (tp * headroom * gpu.peak_flops), dram)
    return out


def implausible(rows: np.ndarray, gpu_file: str | None = None,
                model_file: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows measured faster than their roofline lower bound, and the bounds.

    Returns
    -------
    (mask, bound) : tuple of numpy.ndarray
        ``mask[i]`` is true when ``seconds[i] < (1 - RTOL) T_min[i]`` (:func:`lower_bound`);
        ``bound`` the ``T_min`` of every row (``NaN`` where none is computed, never screened).

    References
    ----------
    Williams, Waterman, Patterson (2009), CACM 52(4), 65-76 (the roofline).
    """
    bound = lower_bound(rows, gpu_file, model_file)
    with np.errstate(invalid="ignore"):
        mask = rows["seconds"] < (1.0 - RTOL) * bound
    return mask, bound


__all__ = ["BOUNDED", "REASON", "RTOL", "implausible", "lower_bound"]
