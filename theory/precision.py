"""The numeric precision of a model's weights and KV cache: ``bf16`` (the paper's) or ``fp8``.

A model states ``precision`` (``[models.<key>]``, or ``--precision`` on the command line, which
:func:`with_precision` applies); ``bf16`` is the default and the paper's model (two bytes per
element). With ``fp8`` (E4M3 weights and KV cache, one byte per element, per-tensor scales as
vLLM's FP8 checkpoints and ``kv_cache_dtype="fp8"`` store them):

* **GeMM tile rates** (Eq. 2's ``mu``). A GPU preset states its dense FP8 tensor peak
  (``peak_fp8_tflops`` in ``gpus.toml``, from the vendor's datasheet); a GPU without FP8 tensor
  cores (Ampere: a100, a10g, a40) states none and the cost model refuses ``fp8`` on it
  (:func:`check_fp8`). Each tile's FP8 rate is its bf16 rate times the ratio of its roofline at
  the two precisions (:func:`theory.hardware.fp8_tile_factor`), the roofline being
  ``1/mu = max(2 t_row t_col t_red / (eta_mma F / s), b (t_row + t_col) t_red / (rho_l2 B / s))``
  with ``F`` the FP8 peak and ``b = 1`` against ``F`` the bf16 peak and ``b = 2``. Where the FP8
  peak is twice the bf16 one (every preset here) the factor is 2 for every tile, compute- or
  L2-bound, so a pinned or calibrated ``mu`` scales as the roofline one does. The tile set is kept
  (the bf16 kernels' shapes, filtered by shared memory at two bytes); the FP8 kernels' own shapes
  are not modelled.
* **Memory floor and L2 traffic** (``memory_floor``, ``l2_bandwidth_gbs``): the weight operand and
  the quantized input activations at one byte, the output activations at two (vLLM's FP8 linear
  layers quantize the input and write bf16: ``torch._scaled_mm(..., out_dtype=bfloat16)``), in
  :func:`theory.cost.T_GeMM_terms` and the builder's linear and MoE terms
  (:mod:`theory.cost_model`).
* **Attention at the KV cache's precision.** Decode attention (Eq. 5) streams the KV cache, so its
  GeMV rates ``mu(t_row, t_col) = eta_mem B / (s b t_row t_col)`` double with ``b = 1``; prefill
  attention (Eq. 6) runs on the FP8 tile rates (FP8 attention kernels, FlashAttention-3: Shah et
  al. (2024), arXiv:2407.08608, Section 3.3).
* **Memory.** Weights (every parameter, the embedding and vocab projection included: an upper bound
  on the saving where a checkpoint keeps them in bf16) and the KV cache at one byte per element:
  :meth:`theory.models.Model.weight_bytes`, :meth:`theory.models.Model.kv_bytes_per_token` and so
  :func:`theory.tp_split.shard_memory`, the simulator's KV block count
  (:func:`stability.sim.memory.kv_config`) and the certified capacity's KV bound
  (:mod:`theory.capacity.bound`).
* Element-wise work, the embedding gather and the tensor-parallel all-reduces keep bf16
  activations (two bytes; ``efficiency.bytes_per_element``).
* **Dynamic activation quantization** (optional, real mode only; :func:`activation_quant_s`). A
  static input scale (a calibrated checkpoint) quantizes the bf16 input in the GeMM's prologue or
  one elementwise pass; without one the layer first reduces the input to its absolute maximum and
  then quantizes it with the scale derived from it (TensorRT-LLM's FP8 ``Linear`` without an input
  scale, ``torch.ops.tensorrt_llm.quantize_e4m3_per_tensor``, as AIConfigurator's collectors
  time it). Priced as memory-bound elementwise work at the achievable
  bandwidth ``eta_mem B``: the reduction reads the ``tokens x d_red`` input at ``b`` bytes per
  element, the quantization reads it again and writes it at one byte,
  ``(2 b + 1) tokens d_red / (eta_mem B)``. No public source states a fixed time per kernel of
  these passes, so none is added: the term is their bytes alone. It is not a term of the batch
  model (:mod:`theory.cost_terms`); :mod:`theory.validation.fp8_gemm` scores measured GeMMs that
  include it with and without it.

How it enters the theory: every batch time of Eq. 2-7 is computed from the cost model's ``mu``,
``mu_gemv`` and byte counts, so ``T_batch``, Theorem 1's least work per request ``T^R`` and
``T_bar^R`` (:func:`theory.bounds.T_bar_R`), and ``lambda* = r / T_bar^R`` take the FP8 rates with
no change to their formulas; a compute-bound linear term halves where the FP8 peak doubles, a
memory-bound (floor) term halves with the weight bytes, and decode attention halves with the KV
bytes. The certified capacity (:mod:`theory.capacity`) takes the same time law and, in its KV
bound, ``M = memory - weights`` over the KV bytes per token, both at one byte: the free memory
grows by the weight bytes saved and each token takes half the bytes, so the KV bound more than
doubles.

References
----------
ai-dynamo/aiconfigurator @ 095f58a51c4ca8e61b66ec108d86f223f8d559ce ``collector/trtllm/collect_gemm.py``
and ``collector/trtllm/collect_computescale.py`` (the dynamic FP8 path: the scale, then the quantization);
Micikevicius et al. (2022), "FP8 Formats for Deep Learning", arXiv:2209.05433 (E4M3);
vllm-project/vllm ``vllm/model_executor/layers/quantization/fp8.py`` (per-tensor FP8 linear);
Bari, Hegde, de Veciana (2025), Eq. 2-7, Theorem 1.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from theory.errors import FieldError
from theory.hardware import MEASURED_SUFFIX

BYTES = {"bf16": 2, "fp8": 1}
PRECISIONS = tuple(BYTES)
DEFAULT = "bf16"


def check_precision(value: object, where: str = "precision") -> str:
    """``value`` as a precision name, or :class:`FieldError` naming ``where``."""
    if not isinstance(value, str) or value.strip().lower() not in BYTES:
        raise FieldError(where, value, f"one of {', '.join(PRECISIONS)}")
    return value.strip().lower()


def bytes_per_element(precision: str) -> int:
    """Bytes of one weight or KV-cache element at ``precision``."""
    return BYTES[check_precision(precision)]


def check_fp8(gpu, model_key: str) -> None:
    """Raise :class:`FieldError` naming ``precision`` where ``gpu`` has no FP8 tensor cores."""
    if gpu.peak_fp8_flops is None or gpu.mu_fp8 is None:
        raise FieldError(
            f"models.{model_key}.precision",
            "fp8",
            f"bf16 on GPU {gpu.key} ({gpu.arch or 'arch not stated'}): it has no FP8 tensor "
            "cores (FP8 tensor math begins with Ada sm89 and Hopper sm90; Ampere has none), "
            "and its preset states no peak_fp8_tflops",
        )


def at_precision(gpu, model):
    """``gpu`` as the cost model prices ``model`` at its precision: the GPU itself for bf16; for
    fp8 its FP8 tile rates, GeMV rates at one byte per element, its FP8 peak, and no measured bf16
    GeMM profile (its ``calibration`` no longer names one) or token-count law (both measure bf16
    layers; refused if the law replaces the whole linear time)."""
    if model.precision == DEFAULT:
        return gpu
    check_fp8(gpu, model.key)
    gt = gpu.terms
    if gt.linear_law is not None:
        raise FieldError(
            f"models.{model.key}.precision",
            model.precision,
            f"bf16 on GPU {gpu.key}, whose linear_law (fitted to bf16 layers) replaces the whole linear time",
        )
    scale = gt.bytes_per_element / model.bytes_per_element
    return replace(
        gpu,
        mu=gpu.mu_fp8,
        peak_flops=gpu.peak_fp8_flops,
        mu_gemv=tuple(m * scale for m in gpu.mu_gemv),
        calibration=gpu.calibration.split(MEASURED_SUFFIX)[0],
        terms=replace(gt, gemm_profile=None, gemm_profile_gpu=None),
    )


class Priced(Protocol):
    """What :func:`activation_quant_s` reads of a cost model (:class:`theory.cost_model.CostModel`,
    which this module cannot import: the builder imports it)."""

    mode: str
    model: object
    gpu: object


def activation_quant_s(cm: Priced, tokens: ArrayLike, d_red: ArrayLike) -> np.ndarray:
    """Seconds to quantize a GeMM's input of ``tokens x d_red`` activations to FP8 with a
    per-tensor scale computed from it (dynamic quantization; module docstring): an absolute-maximum
    pass that reads the input and a quantization pass that reads it and writes it at one byte,
    ``(2 b + 1) tokens d_red / (eta_mem B)`` with ``b`` the activations' bytes per element.

    ``cm`` is a :class:`theory.cost_model.CostModel` in real mode of a model at ``fp8``; arguments
    broadcast.

    Raises
    ------
    FieldError
        If ``cm`` is in paper mode (the paper's model has no activation quantization) or its model
        is not at ``fp8``.

    References
    ----------
    ai-dynamo/aiconfigurator @ 095f58a ``collector/trtllm/collect_computescale.py`` (the amax and
    scale, then the quantization); Williams, Waterman, Patterson (2009), "Roofline", CACM 52(4).
    """
    if cm.mode != "real":
        raise FieldError("mode", cm.mode, "real (the paper's model has no activation quantization)")
    if cm.model.precision != "fp8":
        raise FieldError(
            f"models.{cm.model.key}.precision",
            cm.model.precision,
            "fp8 (only an FP8 GeMM quantizes its input)",
        )
    b, wb = cm.gpu.terms.bytes_per_element, cm.model.bytes_per_element
    elements = np.asarray(tokens, dtype=float) * np.asarray(d_red, dtype=float)
    return (2 * b + wb) * elements / (cm.gpu.eta_mem * cm.gpu.bandwidth)


def with_precision(model, precision: str | None):
    """``model`` at ``precision`` (``None``: as stated by the model)."""
    if precision is None:
        return model
    return replace(model, precision=check_precision(precision, "precision"))


__all__ = [
    "BYTES",
    "DEFAULT",
    "PRECISIONS",
    "activation_quant_s",
    "at_precision",
    "bytes_per_element",
    "check_fp8",
    "check_precision",
    "with_precision",
]
