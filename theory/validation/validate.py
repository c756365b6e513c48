"""Predicted against measured times for the shipped public profiles: the cost model's error budget.

Every row of a profile in :mod:`theory.profiles` is one measured operation. This module predicts
each row that the cost model can express and scores the prediction by its absolute relative error
``|predicted / measured - 1|``, summarised per group (GPU x model x TP x operation) and pooled by
its **median** and **90th percentile** (:class:`ErrorStats`). Seven predictions (*schemes*):

``roofline``
    The GPU preset's roofline (``theory/data/gpus.toml``: one rate per tile, no measured data) and
    the served layer's GeMM shapes (``real`` mode, :func:`theory.profiles.gemm_shape`), Eq. 2 on
    each GeMM's fastest tile.
``shipped``
    The GPU preset as ``real`` mode uses it: for the GPUs with public data (A100, H100, A40, RTX 4090,
    RTX PRO 6000) the measured-profile law of the whole profile (:mod:`theory.measured`) where it
    covers a GeMM and the shipped tile-model calibration elsewhere (:mod:`theory.validation.presets_fit`,
    fitted on the full profile's training token counts): an in-sample figure on those rows, not a
    held-out one; for the other GPUs the roofline.
``tokens``
    The roofline preset calibrated (:func:`theory.validation.calibrate.fit_gemm`: per-tile rates, a fixed
    time ``c_0`` per GeMM and, with ``Settings.floor``, ``Settings.waves`` and ``Settings.l2``
    (default, the shipped presets' terms), the achievable DRAM bandwidth of the memory floor, wave
    quantization and the L2 bandwidth of the tiles' operand traffic) on the GPU's rows whose
    token count is *not* held out, scored on the rows whose token count is: every ``k``-th
    distinct token count of the GPU (:func:`token_split`).
``models``
    Leave one model out: for each model, the preset calibrated on the GPU's rows of the *other*
    models, scored on that model's rows (:func:`model_folds`).
``paper``
    The roofline preset on the paper's layer (``paper`` mode, Section 3.2.1: one attention head
    of width ``d``, separate ``W_Q, W_K, W_V`` of ``d x d_x``, a two-matrix FFN, no output
    projection), for reference (:func:`paper_shapes`).
``measured_law``
    The measured-profile law (:mod:`theory.measured`, the ``gemm_profile`` term) built from the
    ``tokens`` scheme's training rows only (the held-out token counts are removed from every
    series before the tables are pooled and interpolated), scored on the held-out rows; a row
    whose shape has no training series, or whose count lies outside its table's range, takes the
    ``tokens`` prediction (:func:`measured_predictions`). It interpolates measured points and does
    not transfer to unprofiled shapes.
``measured_law_models``
    The same law in the leave-one-model-out folds: only the *other* models' series of the same
    shape enter the tables, and the rest falls back to the ``models`` prediction;
    :attr:`Report.measured_coverage` counts how many rows each scheme interpolated.

What is predicted. The per-GeMM rows of ``vidur_gemm`` and the GeMM layers of
``llmservingsim_rtx4090`` (vLLM's ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj`` and
``lm_head``, shaped by :func:`theory.profiles.gemm_shape`) by :func:`predict_gemm`, the one per-GeMM
predictor. Whole-batch rows (``prefill_batch``, ``decode_batch``) by Eq. 7
(:func:`theory.cost.T_batch`) when the cost model can run their tensor-parallel degree
(:func:`batch_cost_model`: TP 1 as named, TP > 1 through :mod:`theory.terms` when the GPU profile
states an all-reduce law; the shipped batch rows are TP 2-8, so without one they are listed as not
predicted with the reason); their ``tokens`` scheme is the serving stack's law on top of Eq. 7,
a fixed time per batch and multipliers on Eq. 7's all-reduce time, on its bytes beyond
:data:`LARGE_MESSAGE_BYTES` per message and on the remaining time (:class:`StackLaw`), fitted per
GPU x model x TP on the other batch shapes (:func:`fit_stack_law`; k folds of interior shapes,
:func:`batch_folds`; :attr:`Report.batch_stack`). All-reduce rows where the GPU profile states an
all-reduce law (:func:`allreduce_law`; the calibrated A100 and H100 presets state one). Measured
self-attention batches (``attention`` rows) by Eq. 5-6 per layer, scored per batch kind in
:attr:`Report.attention` (:mod:`theory.validation.attention`). Element-wise kernels (``vidur_kernels``
and LLMServingSim's) are listed as not predicted: the cost model prices them only as one
aggregate ``tau / mu_nLin`` per batch (Section 3.2.3). A row faster than the roofline lower
bound of its shape (:mod:`theory.validation.plausibility`) is no measurement of that shape: it is left out of
every score and counted as not predicted (:data:`theory.validation.plausibility.REASON`,
:attr:`Report.screened`). Nothing is dropped silently: every row is either scored or counted in
:attr:`Report.not_predicted` with its reason.

Where the cost terms (:mod:`theory.terms`) enter: :func:`predict_gemm` (per GeMM:
``memory_floor``, ``waves``, ``l2_bandwidth_gbs``), :func:`batch_cost_model` (tensor parallelism
for whole batches) and :func:`allreduce_law` (collectives); all come from the GPU profile, so a
``gpu_file`` switching them on is validated with them. A user GPU file (``gpu_file``) that
overrides a preset's fields is validated like the preset itself.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 (GeMM time), Eq. 7 (batch time), Section 3.2.1 (the GeMMs of
a layer). Data: microsoft/vidur @ 7d47513363ec447a741ac5e47241580b47724fbf,
Mutinifni/splitwise-sim @ 8f99e7dc9b407f4ce2488d03dd44c0b8b946dab0 and casys-kaist/LLMServingSim @
5daddb21a545658d5150b535712d0494584b5278 (theory/data/profiles/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from theory.builder import CostSpec, cost_model
from theory.cost import Batch, CostModel, T_batch, T_GeMM_terms, build_cost_model
from theory.errors import FieldError, TileDivisibilityError
from theory.hardware import GPU, get_gpu, gpu_names
from theory.measured import interpolate_by_shape, pooled_tables
from theory.models import Model, get_model
from theory.profiles import (
    GEMM_OPERATIONS,
    KERNEL_OPERATIONS,
    LLMSERVINGSIM_GEMMS,
    VIDUR_GEMMS,
    VIDUR_KERNELS,
    Profile,
    gemm_series_rows,
    gemm_shape,
    series_labels,
)
from theory.terms import allreduce_count, allreduce_time
from theory.validation.attention import GROUP_COLUMNS, score_attention
from theory.validation.attention import OPERATION as ATTENTION
from theory.validation.batch_orderings import ordering_pairs, ordering_summary
from theory.validation.calibrate import Calibration, fit_gemm, staircase_jumps
from theory.validation.plausibility import REASON as SCREEN_REASON
from theory.validation.plausibility import implausible
from theory.validation.stack_law_reach import reach_in_sample
from theory.validation.timings import GemmTimings

SCHEMES = ("roofline", "shipped", "tokens", "models", "paper", "measured_law", "measured_law_models")
SCHEME_MEANING = {
    "roofline": "GPU preset's roofline per tile, no calibration, served layer shapes (real mode)",
    "shipped": "GPU preset as real mode ships it (where public data exist the measured law of the "
               "whole profile, in sample, and the calibrated tile model elsewhere; else the roofline "
               "with the unfitted terms of gpus.toml [real_mode]), served layer shapes",
    "tokens": "tile model: preset calibrated on the other token counts, scored on held-out token counts",
    "models": "tile model: preset calibrated on the other models of the GPU, scored on the held-out model",
    "paper": "GPU preset as shipped, the paper's single-head 2-matrix-FFN layer (paper mode)",
    "measured_law": "measured-profile law (interpolation of the training token counts; no transfer "
                    "to unprofiled shapes), scored on held-out token counts; 'tokens' where not covered",
    "measured_law_models": "measured-profile law from the other models' series of the same shape, "
                           "scored on the held-out model; 'models' where no such series covers the row",
}
MEASURED_LABEL = ("measured-profile law (interpolation of the training token counts; no transfer to "
                  "unprofiled shapes)")
TARGETS = {  # acceptance targets on the pooled absolute relative errors of one GPU
    "tokens_median": 0.05,
    "tokens_p90": 0.12,
    "models_median": 0.10,
}
LAWS = {  # the schemes that score a law on held-out token counts and on held-out models
    "measured profile": {"tokens": "measured_law", "models": "measured_law_models"},
    "tile model": {"tokens": "tokens", "models": "models"},
}
STAIRCASE_AT = (64, 128, 256, 384, 768)
STEP_TOLERANCE = 0.10  # step heights: |predicted - measured| <= 10 percentage points
TOKEN_BANDS = ((1, 16), (17, 128), (129, 1024), (1025, None))  # inclusive; None: no upper end
NEEDS_TP = ("needs tensor parallelism: an all-reduce law in the GPU profile "
            "(allreduce_latency_s, allreduce_bandwidth_gbs; theory.terms)")
NO_ALLREDUCE = "no all-reduce law in the GPU profile (allreduce_bandwidth_gbs; theory.terms)"
NO_KERNEL_LAW = ("the cost model prices element-wise operations only as one aggregate tau/mu_nLin "
                 "per batch (Section 3.2.3), no per-kernel law")
NO_PAPER_COUNTERPART = "the paper's layer has no output projection (Section 3.2.1)"
NOT_PAPER_DIVISIBLE = ("the model's dimensions are not divisible by the GPU's tiles in paper mode "
                       "(Section 3.2.1's hypothesis; Qwen3-32B's vocabulary of 151,936)")
QUICK_MODELS = ("llama-2-7b", "internlm-20b")
QUICK_TPS = (1, 2)
BATCH_OPERATIONS = ("prefill_batch", "decode_batch")
# one tensor-parallel rank's share of a whole batch, timed alone (no all-reduce) -> the batch it is of
RANK_OPERATIONS = {"prefill_batch_rank": "prefill_batch", "decode_batch_rank": "decode_batch"}
SCREENED_FIELDS = ("gpu", "model", "tp", "operation", "tokens", "decodes", "context", "prefill_context",
                   "generated", "bytes")  # the shape of a screened row, as the profile states it
STEP_SCHEMES = ("shipped", "calibrated", "models")  # "calibrated": the token-split fit, all points


# --- Error statistics -----------------------------------------------------------------------


def abs_rel_error(measured, predicted) -> np.ndarray:
    """``|predicted / measured - 1|`` elementwise (measured times are > 0, the loader checks it)."""
    return np.abs(np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0)


@dataclass(frozen=True)
class ErrorStats:
    """Median and 90th percentile of absolute relative errors over ``n`` points.

    The percentile is numpy's default (linear interpolation between order statistics: the
    ``q``-quantile of sorted ``e_0 <= ... <= e_{n-1}`` is ``e_j + f (e_{j+1} - e_j)`` with
    ``j + f = q (n - 1)``). With ``n = 0`` both are ``None`` (nothing was scored).
    """

    n: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, errors) -> ErrorStats:
        """The statistics of the finite entries of ``errors`` (NaN marks a row not predicted)."""
        e = np.asarray(errors, dtype=float)
        e = e[np.isfinite(e)]
        if not e.size:
            return cls(0, None, None)
        return cls(int(e.size), float(np.median(e)), float(np.percentile(e, 90)))


# --- The per-GeMM predictor (the plug point of the cost terms) -------------------------------


def predict_gemm(cm: CostModel, d_row, d_col, d_red, fixed_s: float = 0.0) -> np.ndarray:
    """Predicted seconds of GeMMs ``(d_row x d_red) . (d_red x d_col)`` on the GPU of ``cm``.

    :func:`theory.cost.T_GeMM_terms`: Eq. 2 on the fastest of the GPU's tiles, with the GPU's
    cost terms (``memory_floor``, ``waves``; :mod:`theory.terms`) when its profile switches them
    on, plus ``fixed_s``, the fixed time per GeMM ``c_0`` of a calibration
    (:mod:`theory.validation.calibrate`;
    0 for a preset). With the terms off (the presets) this is Eq. 2 on the fastest tile.

    Parameters
    ----------
    cm : CostModel
        Built for the GPU (any model: only the GPU's tiles, rates and SM count enter).
    d_row, d_col, d_red : array_like of int
        Weight rows, activation columns (the batch's tokens) and reduction width, broadcast.
    fixed_s : float
        Seconds added to every GeMM.

    References
    ----------
    Eq. 2; the fastest tile per GeMM as in :mod:`theory.cost` (Section 3.2.1).
    """
    return T_GeMM_terms(cm, d_row, d_col, d_red) + fixed_s


def paper_shapes(model: Model, operation: str, tp: int) -> tuple[tuple[int, int], ...]:
    """The paper-mode weight shapes ``(d_row, d_red)`` whose GeMMs stand for a measured GeMM.

    ``attn_pre_proj`` is ``W_Q, W_K, W_V`` (three ``d x d_x``), ``mlp_up_proj`` is ``W_F1``
    (``d_ff x d``), ``mlp_down_proj`` is ``W_F2`` (``d_x x d_ff``), split over ``tp`` as vidur
    splits the served layer (:func:`theory.profiles.gemm_shape`); ``attn_post_proj`` has no
    counterpart (empty tuple); ``lm_head`` is the paper's ``d_out x d_x``. LLMServingSim's names
    (:data:`theory.profiles.LLMSERVINGSIM_GEMMS`) stand for the same GeMMs.

    References
    ----------
    Section 3.2.1 (the paper's layer and Eq. 4's sum of GeMMs).
    """
    if operation not in GEMM_OPERATIONS:
        raise FieldError("operation", operation, f"one of {', '.join(GEMM_OPERATIONS)}")
    shape = gemm_shape(model, operation, tp)  # the same TP check as the served shapes
    d = model.d
    return {
        "attn_pre_proj": ((d // tp, model.d_x),) * 3,
        "attn_post_proj": (),
        "mlp_up_proj": ((model.d_ff // tp, d),),
        "mlp_down_proj": ((model.d_x, model.d_ff // tp),),
        "lm_head": (shape,),
    }[LLMSERVINGSIM_GEMMS.get(operation, operation)]


def batch_cost_model(gpu: str, model: str, tp: int, *, gpu_file: str | None = None,
                     model_file: str | None = None) -> tuple[CostModel | None, str]:
    """The cost model that predicts a whole batch on ``tp`` GPUs, or ``(None, reason)``.

    ``tp = 1``: the profile as named. ``tp > 1``: the profile with its tensor-parallel degree set
    to ``tp`` (:mod:`theory.terms`: Megatron split and all-reduces), which needs an all-reduce law
    in the GPU profile; without one, or when ``tp`` cannot split the model, the reason.

    References
    ----------
    Eq. 7; :mod:`theory.terms` (tensor parallelism).
    """
    if tp == 1:
        return cost_model(CostSpec(gpu, model, "real", None, gpu_file, model_file)), ""
    g = get_gpu(gpu, gpu_file, calibrated=True)
    if g.terms.allreduce_bandwidth is None or g.terms.linear_law is not None:
        return None, NEEDS_TP
    try:
        return build_cost_model(replace(g, terms=replace(g.terms, tp=tp)), get_model(model, model_file),
                                "real"), ""
    except FieldError as err:
        return None, str(err)


def allreduce_law(gpu: GPU) -> Callable[[np.ndarray, int], np.ndarray] | None:
    """``seconds(bytes, tp)`` of one all-reduce on ``gpu`` (:func:`theory.terms.allreduce_time`
    with the profile's latency and bus bandwidth), or ``None`` when the profile states no law."""
    if gpu.terms.allreduce_bandwidth is None:
        return None
    return lambda n_bytes, tp: allreduce_time(replace(gpu.terms, tp=int(tp)), n_bytes)


def prompts(tokens: int, context: int) -> int:
    """Prompts of a splitwise prefill row: ``tokens / context`` of ``context`` tokens, at least one."""
    return max(tokens // max(context, 1), 1)


def batch_tokens(operation: str, tokens: int, context: int) -> int:
    """Tokens one iteration of the batch :func:`batch_time` prices runs through the linear layers
    (and each all-reduce): every prompt token, or one per decode."""
    if RANK_OPERATIONS.get(operation, operation) == "prefill_batch":
        return prompts(tokens, context) * context
    return tokens


def batch_time(cm: CostModel, operation: str, tokens: int, context: int, generated: int) -> float:
    """Eq. 7 for a splitwise row: ``tokens / context`` prompts of ``context`` tokens prefilled in
    one batch, or ``tokens`` decodes at the mean position of the ``generated - 1`` decode
    iterations the row averages (``context + generated / 2``, profiles README). A rank's share
    (:data:`RANK_OPERATIONS`) is predicted as the batch it is of.

    References
    ----------
    Eq. 7; Section 3.1 (batches of prefill and decode iterations).
    """
    operation = RANK_OPERATIONS.get(operation, operation)
    if operation == "prefill_batch":
        return T_batch(cm, Batch.of(prefill=[(1, context)] * prompts(tokens, context)))
    if operation == "decode_batch":
        position = context + max(generated, 2) // 2
        return T_batch(cm, Batch.of(decode=[position] * tokens))
    raise FieldError("operation", operation, f"one of {', '.join(BATCH_OPERATIONS)}")


# --- GeMM rows, splits, calibration -----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GemmRows:
    """The GeMM rows of a profile with their served-layer shapes (one entry per row)."""

    gpu: np.ndarray
    model: np.ndarray
    tp: np.ndarray
    operation: np.ndarray
    tokens: np.ndarray
    seconds: np.ndarray
    d_row: np.ndarray
    d_red: np.ndarray

    def __len__(self) -> int:
        return int(self.seconds.size)

    def take(self, mask) -> GemmRows:
        """The rows selected by a boolean mask or an index array."""
        return GemmRows(**{k: getattr(self, k)[mask] for k in self.__dataclass_fields__})

    def timings(self) -> GemmTimings:
        """The rows as calibration input (one GeMM each, :class:`theory.validation.timings.GemmTimings`)."""
        return GemmTimings(self.d_row, self.tokens, self.d_red, np.ones(len(self), dtype=np.int64),
                           self.seconds)


def gemm_rows(rows: np.ndarray, model_file: str | None = None) -> GemmRows:
    """The rows of a loaded profile whose operation is a GeMM (:data:`theory.profiles.GEMM_OPERATIONS`),
    with their shapes (:func:`theory.profiles.gemm_shape`)."""
    rows = rows[np.isin(rows["operation"], GEMM_OPERATIONS)]
    d_row, d_red, *_ = gemm_series_rows(rows, model_file)
    return GemmRows(rows["gpu"].astype(str), rows["model"].astype(str), rows["tp"].astype(np.int64),
                    rows["operation"].astype(str), rows["tokens"].astype(np.int64),
                    rows["seconds"].astype(float), d_row, d_red)


def token_split(tokens, every: int = 4) -> np.ndarray:
    """Held-out mask: rows whose token count is every ``every``-th distinct token count.

    The distinct counts are sorted and ranked from 0; counts of rank ``every - 1, 2 every - 1,
    ...`` are held out, so the split depends on the set of counts only (deterministic) and the
    smallest counts are trained on.
    """
    if isinstance(every, bool) or int(every) != every or every < 2:
        raise FieldError("every", every, "an integer >= 2")
    tokens = np.asarray(tokens)
    distinct = np.unique(tokens)
    held = distinct[np.arange(distinct.size) % every == every - 1]
    return np.isin(tokens, held)


def model_folds(models) -> list[tuple[str, np.ndarray]]:
    """Leave-one-model-out folds ``[(held-out model, its mask)]`` in sorted model order; a fold
    trains on ``~mask``. Needs two models or more (else no fold)."""
    models = np.asarray(models)
    names = sorted(set(models.tolist()))
    return [(m, models == m) for m in names] if len(names) > 1 else []


def _subsample(n: int, limit: int) -> np.ndarray:
    """At most ``limit`` evenly spaced indices of ``range(n)`` (deterministic)."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))


@dataclass(frozen=True, eq=False)
class GpuFit:
    """A GPU preset calibrated on some GeMM rows: its fitted GPU (with ``gemm_overhead_s = c_0``),
    ``c_0`` and the fit itself."""

    gpu: GPU
    c0: float
    calibration: Calibration
    n_train: int


def fit_gpu(base: GPU, train: GemmRows, *, max_train: int = 8000, seed: int = 0,
            model_file: str | None = None, floor: bool = True, waves: bool = True,
            l2: bool = True) -> GpuFit:
    """Calibrate ``base``'s tile rates, ``c_0``, (with ``floor``) the achievable DRAM bandwidth
    and (with ``l2``) the L2 bandwidth on the rows ``train`` only, with the ``memory_floor``,
    ``waves`` and ``l2_bandwidth_gbs`` terms as asked.

    At most ``max_train`` rows enter the fit, evenly spaced over ``train`` (deterministic). The
    fitted GPU keeps the base profile's tiles with the fitted rates (tiles never fastest keep
    their bound, :func:`theory.validation.calibrate.fit_gemm`), the fitted ``eta_mem``, and the terms
    switched as fitted with ``gemm_overhead_s = c_0`` (:mod:`theory.terms`), so that
    :func:`predict_gemm` on it reproduces the fit.

    References
    ----------
    Eq. 2; the fit is :func:`theory.validation.calibrate.fit_gemm`'s.
    """
    if not len(train):
        raise FieldError("training rows", 0, f"at least one GeMM row of {base.key} to calibrate on")
    sub = train.take(_subsample(len(train), max_train))
    cal = fit_gemm(sub.timings(), base, get_model(str(sub.model[0]), model_file), "real",
                   key=f"{base.key}-validate", seed=seed, floor=floor, waves=waves, l2=l2)
    mu = tuple(float(cal.profile["mu"][str(t)]) for t in base.tiles)
    c0 = float(next((p.value for p in cal.parameters if p.name.startswith("c_0")), 0.0))
    eta_mem = float(cal.profile.get("eta_mem", base.eta_mem))
    l2_bw = float(cal.profile["l2_bandwidth_gbs"]) * 1e9 if l2 else None
    terms = replace(base.terms, memory_floor=floor, waves=waves, gemm_overhead_s=c0, l2_bandwidth=l2_bw)
    return GpuFit(replace(base, key=cal.key, mu=mu, eta_mem=eta_mem, terms=terms), c0, cal, len(sub))


def predict_rows(rows: GemmRows, cm_of: Callable[[str], CostModel], fixed_s: float = 0.0) -> np.ndarray:
    """:func:`predict_gemm` for every row, with the cost model ``cm_of(model)`` of its model."""
    out = np.empty(len(rows))
    for m in np.unique(rows.model):
        sel = rows.model == m
        out[sel] = predict_gemm(cm_of(str(m)), rows.d_row[sel], rows.tokens[sel], rows.d_red[sel], fixed_s)
    return out


def predict_paper(rows: GemmRows, cm_of: Callable[[str], CostModel],
                  model_file: str | None = None) -> np.ndarray:
    """Paper-mode predictions (:func:`paper_shapes`); NaN where the paper's layer has no such GeMM
    or the model is outside Section 3.2.1's divisibility in paper mode (:data:`NOT_PAPER_DIVISIBLE`)."""
    out = np.full(len(rows), np.nan)
    keys = sorted(set(zip(rows.model.tolist(), rows.operation.tolist(), rows.tp.tolist(), strict=True)))
    for m, op, tp in keys:
        sel = (rows.model == m) & (rows.operation == op) & (rows.tp == tp)
        shapes = paper_shapes(get_model(m, model_file), op, tp)
        if shapes:
            try:
                cm = cm_of(m)
            except TileDivisibilityError:
                continue
            out[sel] = sum(predict_gemm(cm, r, rows.tokens[sel], k) for r, k in shapes)
    return out


# --- The validation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What a validation run did: held-out stride, training cap, seed, the terms the calibrations
    fit (``floor``: memory floor, ``waves``, ``l2``: L2 traffic), subset, user files, and whether
    rows faster than the roofline bound of their shape are screened out (``screen``; off only for
    synthetic profiles timed by a model that itself beats the bound,
    :mod:`theory.validation.plausibility`)."""

    every: int = 4
    max_train: int = 8000
    seed: int = 0
    floor: bool = True
    waves: bool = True
    l2: bool = True
    quick: bool = False
    gpus: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    gpu_file: str | None = None
    model_file: str | None = None
    screen: bool = True


@dataclass(eq=False)
class Report:
    """The result of :func:`validate`.

    Attributes
    ----------
    groups : list of dict
        One per GPU x model x TP x operation (columns :data:`COLUMNS`).
    gpus : list of dict
        One per GPU preset: status, pooled statistics per scheme, targets met or missed.
    summary : list of dict
        Pooled statistics per GPU x TP.
    bands : list of dict
        Pooled statistics per GPU x token band (:data:`TOKEN_BANDS`): where the error lives;
        ``tile_below`` is the fraction of the band's rows the calibrated tile model (the
        token-split fit at every row) under-predicts.
    not_predicted : list of dict
        Rows not scored, counted per profile x GPU x model x TP x operation, with the reason.
    staircase : list of dict
        Measured and predicted step heights (:func:`staircase`).
    series : dict
        ``(gpu, model, tp, operation) -> {"token_count", "measured", scheme: predicted,
        "calibrated"}`` for plots ("calibrated": the token-split fit on every point).
    fits : dict
        ``"<gpu> tokens"`` / ``"<gpu> without <model>"`` -> fitted parameters and training size.
    batch_stack : list of dict
        Per GPU x model x TP x operation of the whole-batch rows: the :class:`StackLaw` fitted per
        GPU x model x TP on every shape (:func:`fit_stack_law`) and the held-out median / p90 error
        of the interior shapes (each predicted by the fold without it, :func:`batch_folds`) under
        the shipped preset (``before``: Eq. 7) and the stack law (``after``).
    batch_verdicts : list of dict
        Per profile x GPU with whole-batch rows: the held-out (interior) rows of every model and TP
        pooled under the stack law (``n``), their median and p90 error checked against the held-out-token
        targets (``targets``, as :func:`target_checks` checks them), whether both hold, the
        operations pooled (``kinds``) and the law fitted on every shape scored on every row
        (``in_sample``: the least-squares law, no held-out figure), whether any one law per
        group meets both targets on every row (``in_sample_reach``: the least-squares laws where
        they do, else :func:`theory.validation.stack_law_reach.reach_in_sample`) and its equal-token pairs
        (``orderings``, :func:`theory.validation.batch_orderings.ordering_summary`).
    batch_orderings : list of dict
        Every pair of whole-batch rows of one GPU x model x TP x kind with equal tokens and
        different shapes, with the order Eq. 7 gives them, the measured order and the least error
        any one stack law makes on one of the two (:func:`theory.validation.batch_orderings.ordering_pairs`).
    screened : list of dict
        Rows left out of every score because they are faster than the roofline lower bound of
        their shape (:func:`theory.validation.plausibility.implausible`), one entry per row with the bound.
    measured_coverage : list of dict
        Per GPU and measured scheme: rows scored, rows the tables interpolated, rows that fell back
        to the tile model (:func:`measured_predictions`).
    attention : list of dict
        Measured self-attention batches against Eq. 5-6, per GPU x model x TP x batch kind
        (:func:`theory.validation.attention.score_attention`, columns
        :data:`theory.validation.attention.COLUMNS`).
    """

    settings: Settings
    groups: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    summary: list = field(default_factory=list)
    bands: list = field(default_factory=list)
    not_predicted: list = field(default_factory=list)
    staircase: list = field(default_factory=list)
    series: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    batch_stack: list = field(default_factory=list)
    batch_verdicts: list = field(default_factory=list)
    batch_orderings: list = field(default_factory=list)
    screened: list = field(default_factory=list)
    measured_coverage: list = field(default_factory=list)
    attention: list = field(default_factory=list)


COLUMNS = {
    **GROUP_COLUMNS,
    "operation": "measured operation (GeMM name: vidur's or vLLM's layer name; prefill_batch, "
                 "decode_batch, all_reduce)",
    "n": "rows (measured points) in the group",
    **{f"{s}_{k}": (f"points scored under '{s}'" if k == "n" else
                    f"{'median' if k == 'median' else '90th percentile'} of |predicted/measured - 1| "
                    f"under '{s}' ({SCHEME_MEANING[s]})")
       for s in SCHEMES for k in ("n", "median", "p90")},
    "note": "why a scheme scored nothing in the group (empty when all did)",
}
NULL_MEANING = ("null (JSON) or an empty cell (CSV) in a *_median or *_p90 column: that scheme scored "
                "no point of the group (its *_n is 0); the note column says why")


def _stats_row(errors: dict[str, np.ndarray], mask) -> dict:
    out = {}
    for s in SCHEMES:
        st = ErrorStats.of(errors[s][mask])
        out |= {f"{s}_n": st.n, f"{s}_median": st.median, f"{s}_p90": st.p90}
    return out


def _select(rows: np.ndarray, gpus, models, quick: bool) -> np.ndarray:
    """The rows of the chosen GPUs and models; ``quick`` narrows the per-layer rows (GeMMs and
    kernels) to :data:`QUICK_MODELS` at :data:`QUICK_TPS` and keeps the few batch and collective rows."""
    keep = np.ones(rows.size, dtype=bool)
    if gpus:
        keep &= np.isin(rows["gpu"], list(gpus))
    if models:
        keep &= np.isin(rows["model"], list(models)) | (rows["model"] == "")
    if quick:
        layer = np.isin(rows["operation"], (*VIDUR_GEMMS, *VIDUR_KERNELS))
        keep &= ~layer | (np.isin(rows["model"], QUICK_MODELS) & np.isin(rows["tp"], QUICK_TPS))
    return rows[keep]


def _not_predicted(report: Report, profile: str, rows: np.ndarray, reason: str) -> None:
    keys = sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(),
                          rows["operation"].tolist(), strict=True)))
    for g, m, tp, op in keys:
        sel = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rows["operation"] == op)
        n = int(sel.sum())
        report.not_predicted.append({"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                                     "n": n, "reason": reason})


def _screen(report: Report, profile: str, rows: np.ndarray) -> np.ndarray:
    """``rows`` less those faster than the roofline lower bound of their shape, which are counted
    as not predicted and listed in :attr:`Report.screened`
    (:func:`theory.validation.plausibility.implausible`)."""
    s = report.settings
    bad, bound = implausible(rows, s.gpu_file, s.model_file)
    if bad.any():
        _not_predicted(report, profile, rows[bad], SCREEN_REASON)
        for r, b in zip(rows[bad], bound[bad], strict=True):
            report.screened.append({"profile": profile, **{k: r[k].item() for k in SCREENED_FIELDS},
                                    "seconds": float(r["seconds"]), "bound_s": float(b)})
    return rows[~bad]


def _validate_gemm(report: Report, profile: str, data: GemmRows,
                   s: Settings) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Errors of every scheme for the GeMM rows ``data``, and where the calibrated tile model (the
    token-split fit at every row) predicts less than measured; fills groups, series and fits."""
    pred = {k: np.full(len(data), np.nan) for k in SCHEMES}
    calibrated = np.full(len(data), np.nan)  # the token-split fit on every row, for plots and steps
    for g in sorted(set(data.gpu.tolist())):
        on = data.gpu == g
        rows = data.take(on)
        base = get_gpu(g, s.gpu_file)

        def shipped(m, mode="real", g=g):
            return cost_model(CostSpec(g, m, mode, None, s.gpu_file, s.model_file))

        idx = np.flatnonzero(on)
        pred["roofline"][idx] = predict_rows(
            rows, lambda m, base=base: build_cost_model(base, get_model(m, s.model_file), "real"))
        pred["shipped"][idx] = predict_rows(rows, shipped)
        pred["paper"][idx] = predict_paper(rows, lambda m: shipped(m, "paper"), s.model_file)
        held = token_split(rows.tokens, s.every)
        fit = fit_gpu(base, rows.take(~held), max_train=s.max_train, seed=s.seed, model_file=s.model_file,
                      floor=s.floor, waves=s.waves, l2=s.l2)
        report.fits[f"{g} tokens"] = _fit_summary(fit)
        calibrated[idx] = predict_rows(rows, _fitted(fit, s))
        pred["tokens"][idx[held]] = calibrated[idx[held]]
        for m, mask in model_folds(rows.model):
            fit = fit_gpu(base, rows.take(~mask), max_train=s.max_train, seed=s.seed,
                          model_file=s.model_file, floor=s.floor, waves=s.waves, l2=s.l2)
            report.fits[f"{g} without {m}"] = _fit_summary(fit)
            pred["models"][idx[mask]] = predict_rows(rows.take(mask), _fitted(fit, s))
        _measured_schemes(report, g, rows, idx, held, pred)
    errors = {k: abs_rel_error(data.seconds, v) for k, v in pred.items()}
    below = calibrated < data.seconds
    keys = sorted(set(zip(data.gpu.tolist(), data.model.tolist(), data.tp.tolist(), data.operation.tolist(),
                          strict=True)))
    for g, m, tp, op in keys:
        sel = (data.gpu == g) & (data.model == m) & (data.tp == tp) & (data.operation == op)
        row = {"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op, "n": int(sel.sum()),
               **_stats_row(errors, sel)}
        notes = []
        if not row["paper_n"]:
            counterpart = paper_shapes(get_model(m, s.model_file), op, tp)
            notes.append(f"paper: {NOT_PAPER_DIVISIBLE if counterpart else NO_PAPER_COUNTERPART}")
        if not row["models_n"]:
            notes.append(f"models: no other model of {g} in the data to calibrate on")
        row["note"] = "; ".join(notes)
        report.groups.append(row)
        order = np.argsort(data.tokens[sel], kind="stable")
        report.series[(g, m, tp, op)] = {"token_count": data.tokens[sel][order],
                                         "measured": data.seconds[sel][order],
                                         **{k: pred[k][sel][order] for k in SCHEMES},
                                         "calibrated": calibrated[sel][order]}
    return errors, below


def measured_predictions(train: GemmRows, test: GemmRows, fallback) -> tuple[np.ndarray, np.ndarray]:
    """The measured-profile law (:mod:`theory.measured`) built from ``train`` at the rows ``test``.

    The rows of ``train`` are pooled per shape (:func:`theory.measured.pooled_tables`: median per
    token count over the series of one shape) and each test row whose shape has a table, at a
    token count inside its range, takes the linear interpolant; the others take ``fallback``.

    Returns
    -------
    (predicted, covered) : tuple of ndarray
        Seconds per test row, and which rows the tables priced.
    """
    tables = pooled_tables(train.d_row, train.d_red, train.tokens, train.seconds,
                           series_labels(train.model, train.operation, train.tp))
    out = np.array(fallback, dtype=float, copy=True)
    return out, interpolate_by_shape(tables, test.d_row, test.d_red, test.tokens, out)


def _measured_schemes(report: Report, g: str, rows: GemmRows, idx: np.ndarray, held: np.ndarray,
                      pred: dict[str, np.ndarray]) -> None:
    """The ``measured`` and ``measured_law_models`` predictions of GPU ``g``'s rows, and their coverage."""
    values, covered = measured_predictions(rows.take(~held), rows.take(held), pred["tokens"][idx[held]])
    pred["measured_law"][idx[held]] = values
    n_models, c_models = 0, 0
    for _, mask in model_folds(rows.model):
        values, cov = measured_predictions(rows.take(~mask), rows.take(mask), pred["models"][idx[mask]])
        pred["measured_law_models"][idx[mask]] = values
        n_models, c_models = n_models + int(mask.sum()), c_models + int(cov.sum())
    for scheme, n, c in (("measured_law", int(held.sum()), int(covered.sum())),
                         ("measured_law_models", n_models, c_models)):
        report.measured_coverage.append({"gpu": g, "scheme": scheme, "n": n, "interpolated": c,
                                         "fallback": n - c})


def _fitted(fit: GpuFit, s: Settings) -> Callable[[str], CostModel]:
    return lambda m: build_cost_model(fit.gpu, get_model(m, s.model_file), "real")


def _fit_summary(fit: GpuFit) -> dict:
    err = fit.calibration.error
    won = [p.name for p in fit.calibration.parameters if p.note.startswith("fastest tile")]
    return {"n_train": fit.n_train, "c0_s": fit.c0, "train_rel_rmse": err.rel_rmse,
            "memory_floor": fit.gpu.terms.memory_floor, "waves": fit.gpu.terms.waves,
            "l2_bandwidth_gbs": (None if fit.gpu.terms.l2_bandwidth is None
                                 else fit.gpu.terms.l2_bandwidth / 1e9),
            "eta_mem": fit.gpu.eta_mem,
            "winning_tiles": won,
            "mu": {str(t): float(m) for t, m in zip(fit.gpu.tiles, fit.gpu.mu, strict=True)}}


LARGE_MESSAGE_BYTES = 32 * 2**20
"""All-reduce message size per GPU above which :class:`StackLaw` prices the bytes apart (32 MiB:
2,048 tokens of Llama-2-70B's ``d_x = 8192`` in fp16). Up to this size what splitwise's H100 stack
adds to one rank's kernels is NCCL's own all-reduce time (vidur's DGX H100 profile); at 64 MiB it
is 3.2 times that (the ``llmq_h100`` rank rows, profiles README). The boundary was read off those
measurements, which share the H100 batch shapes; on the A100 it is out of sample."""


@dataclass(frozen=True)
class StackLaw:
    """A serving stack's time for a whole batch on top of Eq. 7, fitted per GPU x model x TP.

    ``T = overhead_s + a_compute C + a_allreduce R + a_large L`` where ``R`` is the time Eq. 7
    gives the batch's all-reduces (:func:`theory.terms.allreduce_time`, the law fitted on vidur's
    NCCL profile), ``L`` the part of ``R``'s bandwidth time spent on the bytes of each message
    beyond :data:`LARGE_MESSAGE_BYTES`, and ``C`` the rest of Eq. 7 (GeMMs, attention, element-wise
    work). ``overhead_s >= 0`` is a fixed time per batch (launches, scheduling, sampling),
    ``a_compute >= 1`` the stack's efficiency on the modelled kernels, ``a_allreduce >= 1`` how much
    slower its collectives run than NCCL's own benchmark (an all-reduce the stack does not overlap,
    a slower algorithm) and ``a_large >= 0`` how much more a byte beyond the large-message boundary
    costs (``a_allreduce + a_large`` times NCCL's). ``StackLaw(0, 1, 1)`` is Eq. 7.

    The law is fitted per served configuration, not per GPU x TP: what a stack adds per step
    depends on the model it runs. On splitwise's A100s at TP 8, Eq. 7 puts a BLOOM-176B decode step
    far above a Llama-2-70B one (its larger weight shard takes longer to stream at the datasheet
    bandwidth), and splitwise measures a much smaller gap: one law for both would need
    ``a_compute < 1``, or collectives many times slower than NCCL's (``llmq validate``'s
    whole-batch section gives the figures).

    References
    ----------
    Eq. 7; :mod:`theory.terms` (the all-reduce law, nccl-tests ``doc/PERFORMANCE.md``).
    """

    overhead_s: float
    a_compute: float
    a_allreduce: float
    a_large: float = 0.0
    LOWER: ClassVar[tuple[float, ...]] = (0.0, 1.0, 1.0, 0.0)  # the bounds the fields are fitted under

    def time(self, compute, allreduce, large=0.0) -> np.ndarray:
        """Seconds of batches whose Eq. 7 parts are ``compute``, ``allreduce`` and ``large``."""
        return (self.overhead_s + self.a_compute * np.asarray(compute, dtype=float)
                + self.a_allreduce * np.asarray(allreduce, dtype=float)
                + self.a_large * np.asarray(large, dtype=float))


def fit_stack_law(measured, compute, allreduce, large=None) -> StackLaw:
    """The :class:`StackLaw` minimising the squared relative error ``sum_i (T_i / m_i - 1)^2``
    over batches with measured times ``m_i`` and Eq. 7 parts ``compute``, ``allreduce`` and
    ``large`` (``None``: no message beyond the boundary), subject to ``overhead_s >= 0``,
    ``a_compute >= 1``, ``a_allreduce >= 1``, ``a_large >= 0`` (bounded linear least squares,
    :func:`scipy.optimize.lsq_linear`). Without all-reduce time (TP 1) ``a_allreduce`` is 1, and
    without large messages ``a_large`` is 0.

    References
    ----------
    Eq. 7 with the profile's fixed time per batch (:mod:`theory.terms`, ``overhead_s``).
    """
    from scipy.optimize import lsq_linear

    m, c, r = (np.asarray(x, dtype=float) for x in (measured, compute, allreduce))
    big = np.zeros(m.shape) if large is None else np.asarray(large, dtype=float)
    if not m.size or not m.shape == c.shape == r.shape == big.shape:
        raise FieldError("measured", m.size, "one or more (measured, compute, allreduce, large) "
                                             "tuples of equal length")
    has_r, has_big = bool(np.any(r > 0)), bool(np.any(big > 0))
    c0, a_c, a_r, a_l = StackLaw.LOWER
    cols = [np.ones(m.size), c] + ([r] if has_r else []) + ([big] if has_big else [])
    lower = [c0, a_c] + ([a_r] if has_r else []) + ([a_l] if has_big else [])
    x = list(lsq_linear(np.column_stack(cols) / m[:, None], np.ones(m.size),
                        bounds=(lower, np.inf), method="bvls").x)
    return StackLaw(float(x[0]), float(x[1]), float(x[2]) if has_r else 1.0,
                    float(x[-1]) if has_big else 0.0)


def batch_folds(rows: np.ndarray, every: int = 4) -> np.ndarray:
    """Cross-validation fold of each whole-batch row: per operation, the rank of its distinct batch
    shape ``(tokens, context, generated)`` in sorted order modulo ``every``, and ``-1`` (never held
    out) for the first and last shape of each operation's series.

    Fold ``j`` holds out the rows of fold ``j`` and trains on every other row, so that each interior
    shape is predicted once, by a law that never saw it, and every held-out shape lies inside the
    trained range (as :func:`token_split` trains on a GeMM's smallest token counts). A single split
    is too few points here: a series has 13 to 19 shapes, and one fold of them decides a p90.
    Ranked over the operations together, the first prompt shape had taken the rank after the last
    decode shape and been held out (on splitwise's grid the 128-token prompt and the 32,768-token
    batch, both ends of the prompt series: extrapolation, not held-out tokens).
    """
    if isinstance(every, bool) or int(every) != every or every < 2:
        raise FieldError("every", every, "an integer >= 2")
    folds = np.full(rows.size, -1, dtype=np.int64)
    for op in np.unique(rows["operation"]):
        on = np.flatnonzero(rows["operation"] == op)
        shapes = np.stack([rows[c][on] for c in ("tokens", "context", "generated")], axis=1)
        rank = np.unique(shapes, axis=0, return_inverse=True)[1].ravel()
        interior = (rank > 0) & (rank < rank.max())
        folds[on[interior]] = rank[interior] % every
    return folds


def batch_parts(cm: CostModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(compute, allreduce, large)``: Eq. 7 of each whole-batch row (:func:`batch_time`) split
    into the time of its all-reduces and the rest, the all-reduce part being Eq. 7 less Eq. 7 with
    the all-reduces free (zero latency, unbounded bandwidth; 0 at TP 1); ``large`` is the bandwidth
    time of the bytes of each all-reduce beyond :data:`LARGE_MESSAGE_BYTES` (part of ``allreduce``;
    :func:`theory.terms.allreduce_count` messages of the batch's tokens x ``d_x`` activations)."""
    free = cm
    terms = cm.gpu.terms
    if terms.tp > 1:
        free = build_cost_model(replace(cm.gpu, terms=replace(terms, allreduce_latency_s=0.0,
                                                              allreduce_bandwidth=np.inf)),
                                cm.model, cm.mode)

    def times(model):
        return np.array([batch_time(model, str(r["operation"]), int(r["tokens"]), int(r["context"]),
                                    int(r["generated"])) for r in rows])

    total, compute = times(cm), times(free)
    tokens = np.array([batch_tokens(str(r["operation"]), int(r["tokens"]), int(r["context"])) for r in rows])
    beyond = np.maximum(tokens * terms.bytes_per_element * cm.model.d_x - LARGE_MESSAGE_BYTES, 0.0)
    large = allreduce_count(cm.model) * allreduce_time(terms, beyond, latency=False)
    return compute, total - compute, large


BATCH_NOTE = ("whole batches: 'tokens' is the shipped preset under the stack law T = c + a_compute C + "
              "a_allreduce R + a_large L (C: Eq. 7 without its all-reduces, R: their time, L: the "
              "bandwidth time of their bytes beyond 32 MiB per message), fitted per GPU x model x TP "
              "on the other batch shapes: k folds, each holding out every k-th interior shape of a "
              "series (theory.validation.validate.batch_folds, theory.validation.validate.fit_stack_law); "
              "the first and "
              "last shape of each series are trained on only")


def _validate_batches(report: Report, profile: str, rows: np.ndarray, s: Settings) -> None:
    """Whole batches, and ranks' shares of them (:data:`RANK_OPERATIONS`: scored against Eq. 7
    without its all-reduces, which the rank did not run), under Eq. 7 and the stack law fitted
    per GPU x model x TP x kind (whole or rank), each interior shape predicted by the fold that
    holds it out (:func:`batch_folds`); and the law fitted on every shape (reported, and scored in
    sample), and whether any one law per group of the form meets the targets in sample
    (:func:`theory.validation.stack_law_reach.reach_in_sample`)."""
    ops = (*BATCH_OPERATIONS, *RANK_OPERATIONS)
    rows = rows[np.isin(rows["operation"], ops)]
    rank = np.isin(rows["operation"], tuple(RANK_OPERATIONS))
    compute, allreduce, large = (np.full(rows.size, np.nan) for _ in range(3))
    keys = sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(), strict=True)))
    for g, m, tp in keys:
        sel = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp)
        cm, reason = batch_cost_model(g, m, tp, gpu_file=s.gpu_file, model_file=s.model_file)
        if cm is None:
            _not_predicted(report, profile, rows[sel], reason)
            continue
        compute[sel], allreduce[sel], large[sel] = batch_parts(cm, rows[sel])
    allreduce[rank], large[rank] = 0.0, 0.0
    pairs = ordering_pairs(profile, rows, compute, allreduce, large)
    report.batch_orderings += pairs
    pred = compute + allreduce
    stacked, in_sample = np.full(rows.size, np.nan), np.full(rows.size, np.nan)
    seconds = rows["seconds"]
    law_groups: dict[str, list] = {}  # per GPU: (parts, measured) of each group one law is fitted on
    for g, m, tp, is_rank in sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(),
                                            rows["tp"].tolist(), rank.tolist(), strict=True))):
        on = ((rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rank == is_rank)
              & np.isfinite(pred))
        if not on.any():
            continue
        folds = np.full(rows.size, -1)
        folds[on] = batch_folds(rows[on], s.every)
        for j in sorted(set(folds[on].tolist()) - {-1}):
            held, train = folds == j, on & (folds != j)
            law = fit_stack_law(seconds[train], compute[train], allreduce[train], large[train])
            stacked[held] = law.time(compute[held], allreduce[held], large[held])
        law = fit_stack_law(seconds[on], compute[on], allreduce[on], large[on])
        in_sample[on] = law.time(compute[on], allreduce[on], large[on])
        law_groups.setdefault(g, []).append((np.column_stack([compute[on], allreduce[on], large[on]]),
                                             seconds[on]))
        for op in ops:
            part = on & (folds >= 0) & (rows["operation"] == op)
            if not part.any():
                continue
            before = ErrorStats.of(abs_rel_error(seconds[part], pred[part]))
            after = ErrorStats.of(abs_rel_error(seconds[part], stacked[part]))
            report.batch_stack.append({
                "profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                "overhead_s": law.overhead_s, "a_compute": law.a_compute, "a_allreduce": law.a_allreduce,
                "a_large": law.a_large, "n": int(on.sum()), "folds": s.every,
                "n_held_out": int(part.sum()), "before_median": before.median, "before_p90": before.p90,
                "after_median": after.median, "after_p90": after.p90})
    errors = {**{k: np.full(rows.size, np.nan) for k in SCHEMES},
              "shipped": abs_rel_error(seconds, pred),
              "tokens": abs_rel_error(seconds, stacked)}
    ceiling = abs_rel_error(seconds, in_sample)
    for g in sorted(set(rows["gpu"].tolist())):  # the held-out rows of every model and TP, pooled per GPU
        on = rows["gpu"] == g
        st = ErrorStats.of(errors["tokens"][on & np.isfinite(stacked)])
        if st.n:
            checks = {name: _check(TARGETS[name], value, "tokens")
                      for name, value in (("tokens_median", st.median), ("tokens_p90", st.p90))}
            fit_all = ErrorStats.of(ceiling[on & np.isfinite(in_sample)])
            report.batch_verdicts.append({
                "gpu": g, "profile": profile, "n": st.n, "targets": checks,
                "holds": all(c["holds"] for c in checks.values()),
                "kinds": sorted(set(rows["operation"][on & np.isfinite(stacked)].tolist())),
                "in_sample": {"n": fit_all.n, "median": fit_all.median, "p90": fit_all.p90},
                "in_sample_reach": _reach(law_groups[g], fit_all),
                "orderings": ordering_summary([p for p in pairs if p["gpu"] == g], TARGETS["tokens_p90"])})
    for g, m, tp in keys:
        for op in ops:
            part = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rows["operation"] == op)
            if not part.any() or not np.isfinite(pred[part]).any():
                continue
            report.groups.append({"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                                  "n": int(part.sum()), **_stats_row(errors, part), "note": BATCH_NOTE})


def _reach(groups: list, least_squares: ErrorStats) -> dict:
    """Whether one stack law per group meets both held-out-token targets on every row: the
    least-squares laws where they do (their figures), else
    :func:`theory.validation.stack_law_reach.reach_in_sample`."""
    median, p90 = TARGETS["tokens_median"], TARGETS["tokens_p90"]
    if least_squares.median <= median and least_squares.p90 <= p90:
        return {"verdict": "reachable", "n": least_squares.n, "median": least_squares.median,
                "p90": least_squares.p90,
                "solver": "least squares (theory.validation.validate.fit_stack_law)"}
    return reach_in_sample(groups, median, p90, StackLaw.LOWER)


def _validate_allreduce(report: Report, profile: str, rows: np.ndarray, s: Settings) -> None:
    rows = rows[rows["operation"] == "all_reduce"]
    for g in sorted(set(rows["gpu"].tolist())):
        part = rows[rows["gpu"] == g]
        law = allreduce_law(get_gpu(g, s.gpu_file, calibrated=True))
        if law is None:
            _not_predicted(report, profile, part, NO_ALLREDUCE)
            continue
        for setup, tp in sorted(set(zip(part["setup"].tolist(), part["tp"].tolist(), strict=True))):
            sel = part[(part["setup"] == setup) & (part["tp"] == tp)]
            e = abs_rel_error(sel["seconds"], law(sel["bytes"].astype(float), tp))
            nan = np.full(e.size, np.nan)
            report.groups.append({
                "profile": profile, "gpu": g, "model": "", "tp": tp, "operation": "all_reduce",
                "n": int(sel.size), **_stats_row({**dict.fromkeys(SCHEMES, nan), "shipped": e},
                                                 np.ones(e.size, dtype=bool)),
                "note": f"setup {setup}: the GPU profile's all-reduce law (theory.terms), every message "
                        "size (the law is fitted on the DGX node, >= 1 MiB: theory.validation.presets_fit)"})


def _pool(report: Report, errors: dict[str, np.ndarray], data: GemmRows, tile_below: np.ndarray) -> None:
    """Per-GPU verdicts, per GPU x TP and per GPU x token band statistics of the GeMM rows;
    ``tile_below`` marks the rows the calibrated tile model under-predicts."""
    for g in report.settings.gpus or gpu_names():
        on = data.gpu == g
        if not on.any():
            report.gpus.append({"gpu": g, "status": "roofline, uncalibrated (no public data)", "n": 0,
                                **_stats_row(errors, on), "targets": {}, "targets_hold": None})
            continue
        row = {"gpu": g, "status": "measured (public GeMM profiles)", "n": int(on.sum()),
               **_stats_row(errors, on), "law": default_law(g, report.settings.gpu_file)}
        row["targets"] = target_checks(row, row["law"])
        row["other_law"] = next(law for law in LAWS if law != row["law"])
        row["other_targets"] = target_checks(row, row["other_law"])
        verdicts = [c["holds"] for c in row["targets"].values()]
        row["targets_hold"] = None if None in verdicts else all(verdicts)
        report.gpus.append(row)
        for tp in sorted(set(data.tp[on].tolist())):
            sel = on & (data.tp == tp)
            report.summary.append({"gpu": g, "tp": tp, "n": int(sel.sum()), **_stats_row(errors, sel)})
        for lo, hi in TOKEN_BANDS:
            sel = on & (data.tokens >= lo) & (data.tokens <= (hi if hi is not None else np.inf))
            if sel.any():
                band = f"{lo}-{hi}" if hi is not None else f">= {lo}"
                below = float(np.mean(tile_below[sel]))
                report.bands.append({"gpu": g, "tokens": band, "n": int(sel.sum()),
                                     **_stats_row(errors, sel), "tile_below": below})


def default_law(gpu: str, gpu_file: str | None = None) -> str:
    """The law real mode prices ``gpu``'s linear GeMMs with: ``"measured profile"`` where its
    preset states a ``gemm_profile`` (``theory/data/measured_gpus.toml``, ``real_mode_default``),
    else ``"tile model"`` (a key of :data:`LAWS`)."""
    profiled = get_gpu(gpu, gpu_file, calibrated=True).terms.gemm_profile is not None
    return "measured profile" if profiled else "tile model"


def target_checks(row: dict, law: str) -> dict[str, dict]:
    """The acceptance targets (:data:`TARGETS`) checked on the pooled statistics ``row`` of one GPU
    under ``law`` (a key of :data:`LAWS`): per target its limit, value, scheme and whether it holds
    (None when the scheme scored no row)."""
    checks = {}
    for name, limit in TARGETS.items():
        split, stat = name.split("_")
        scheme = LAWS[law][split]
        checks[name] = _check(limit, row[f"{scheme}_{stat}"], scheme)
    return checks


def _check(limit: float, value: float | None, scheme: str) -> dict:
    """One acceptance target: its limit, the value ``scheme`` reached and whether it holds (None
    when the scheme scored no row)."""
    return {"target": limit, "value": value, "scheme": scheme,
            "holds": None if value is None else bool(value <= limit)}


def staircase(report: Report, data: GemmRows, gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1,
              at=STAIRCASE_AT) -> list[dict]:
    """Relative step heights ``T(next tokens) / T(tokens) - 1`` after each count in ``at``,
    measured and under each scheme, per GeMM of ``model`` on ``gpu`` at ``tp`` and for the layer
    (``operation = "layer"``: the sum of the four GeMMs at each token count, the linear time a
    batch pays per layer, Eq. 4).

    Uses the predictions of :func:`validate` (``report.series``); a scheme that did not predict a
    point gives ``None``. ``"<scheme>_within"`` says whether the predicted height is within
    :data:`STEP_TOLERANCE` (absolute, i.e. percentage points) of the measured one. ``"envelope"``
    is the step of the measured :func:`monotone_envelope` (for the layer: the sum of the four
    GeMMs' envelopes), the most a fastest-tile model can show, and ``"<scheme>_within_envelope"``
    compares with it. Empty when the data have no such rows.

    References
    ----------
    Eq. 2 (the ceilings make the staircase); :func:`theory.validation.calibrate.staircase_jumps`.
    """
    series = {op: {**report.series[(gpu, model, tp, op)],
                   "envelope": monotone_envelope(report.series[(gpu, model, tp, op)]["measured"])}
              for op in VIDUR_GEMMS if (gpu, model, tp, op) in report.series}
    if len(series) == len(VIDUR_GEMMS):
        common = series[VIDUR_GEMMS[0]]["token_count"]
        for ser in series.values():
            common = np.intersect1d(common, ser["token_count"])
        layer = {"token_count": common}
        for k in ("measured", "envelope", *STEP_SCHEMES):
            layer[k] = sum(ser[k][np.isin(ser["token_count"], common)] for ser in series.values())
        series["layer"] = layer
    out = []
    for op, ser in series.items():
        n = ser["token_count"].size
        timings = GemmTimings(np.ones(n, dtype=np.int64), ser["token_count"], np.ones(n, dtype=np.int64),
                              np.ones(n, dtype=np.int64), ser["measured"])
        preds = {k: ser[k] for k in STEP_SCHEMES}
        for j in staircase_jumps(timings, {"envelope": ser["envelope"], **preds}, at):
            row = {"gpu": gpu, "model": model, "tp": tp, "operation": op, "after": j["at"], "next": j["next"],
                   "measured": j["measured"], "envelope": j["envelope"]}
            for k in preds:
                ok = bool(np.isfinite(j[k]))
                row[k] = j[k] if ok else None
                for ref, name in (("measured", f"{k}_within"), ("envelope", f"{k}_within_envelope")):
                    row[name] = bool(abs(j[k] - j[ref]) <= STEP_TOLERANCE) if ok else None
            out.append(row)
    return out


def monotone_envelope(seconds) -> np.ndarray:
    """``min_{m >= n} T(m)`` over a series sorted by token count: the least time measured for at
    least as many tokens.

    A model that runs every GeMM on its fastest tile is non-decreasing in the token count (each
    tile's Eq. 2 time, with waves and the memory floor, is; so is their minimum), so it can at
    best follow this envelope. Where the measured time lies above it, the library ran a kernel
    slower than one it runs for a larger problem (cuBLAS's heuristic, not a fastest-tile choice).
    """
    y = np.asarray(seconds, dtype=float)
    return np.minimum.accumulate(y[::-1])[::-1]


def staircase_verdict(steps: list[dict], scheme: str = "calibrated") -> dict:
    """How many step heights ``scheme`` reproduces within :data:`STEP_TOLERANCE`, for the layer
    and per GeMM, and whether every layer step is (the acceptance criterion); also how many
    layer steps it reproduces against the steps of the measured :func:`monotone_envelope`.

    The default scheme is the tile model calibrated on the training token counts, at every count
    (as shipped in real mode's tile model, ``a100-tile``): real mode's default prices these GeMMs
    by the measured law, which takes its steps from the measurements themselves."""
    def count(rows):
        judged = [r[f"{scheme}_within"] for r in rows if r[f"{scheme}_within"] is not None]
        return {"within": int(sum(judged)), "steps": len(judged)}

    layer = [r for r in steps if r["operation"] == "layer"]
    per_op = {op: count([r for r in steps if r["operation"] == op]) for op in VIDUR_GEMMS}
    envelope = [r[f"{scheme}_within_envelope"] for r in layer if r[f"{scheme}_within_envelope"] is not None]
    return {"scheme": scheme, "tolerance": STEP_TOLERANCE, "positions": list(STAIRCASE_AT),
            "layer": count(layer), "per_gemm": per_op,
            "layer_against_envelope": {"within": int(sum(envelope)), "steps": len(envelope)},
            "holds": bool(layer) and all(r[f"{scheme}_within"] for r in layer)}


def step_positions(tokens, seconds, threshold: float = 0.10) -> np.ndarray:
    """Token counts after which the time jumps by more than ``threshold`` to the next count.

    ``tokens`` sorted ascending; repeated counts are not expected (one row per count and group).
    """
    tokens, seconds = np.asarray(tokens), np.asarray(seconds, dtype=float)
    if tokens.size < 2:
        return tokens[:0]
    jump = seconds[1:] / seconds[:-1] - 1.0
    return tokens[:-1][jump > threshold]


def validate(profiles: dict[str, Profile], settings: Settings | None = None) -> Report:
    """Predict and score every row of ``profiles`` (module docstring).

    Parameters
    ----------
    profiles : dict
        ``{name: Profile}``, e.g. every :func:`theory.profiles.shipped_profiles` loaded.
    settings : Settings
        Held-out stride, training cap, seed, the quick subset (models :data:`QUICK_MODELS` at TP
        :data:`QUICK_TPS`; two models so that leave-one-model-out has one to train on), GPU and
        model filters, user GPU and model files.

    Returns
    -------
    Report
    """
    s = settings or Settings()
    report = Report(s)
    all_gemm = []
    for name, prof in profiles.items():
        rows = _select(prof.rows, s.gpus, s.models, s.quick)
        if s.screen:
            rows = _screen(report, name, rows)
        if not rows.size:
            continue
        ops = set(rows["operation"].tolist())
        if ops & set(GEMM_OPERATIONS):
            data = gemm_rows(rows, s.model_file)
            errors, below = _validate_gemm(report, name, data, s)
            all_gemm.append((data, errors, below))
        if ops & {*BATCH_OPERATIONS, *RANK_OPERATIONS}:
            _validate_batches(report, name, rows, s)
        if "all_reduce" in ops:
            _validate_allreduce(report, name, rows, s)
        if ATTENTION in ops:
            report.attention += score_attention(name, rows, gpu_file=s.gpu_file, model_file=s.model_file)
        kernels = rows[np.isin(rows["operation"], KERNEL_OPERATIONS)]
        if kernels.size:
            _not_predicted(report, name, kernels, NO_KERNEL_LAW)
        known = (*GEMM_OPERATIONS, *BATCH_OPERATIONS, *RANK_OPERATIONS, "all_reduce", *KERNEL_OPERATIONS,
                 ATTENTION)
        other = rows[~np.isin(rows["operation"], known)]
        if other.size:
            _not_predicted(report, name, other, "operation unknown to the cost model")
    data, errors, below = _concat(all_gemm)
    _pool(report, errors, data, below)  # every GPU preset (or the chosen ones), with or without data
    report.staircase = staircase(report, data)
    return report


def _concat(parts) -> tuple[GemmRows, dict[str, np.ndarray], np.ndarray]:
    if not parts:
        empty = GemmRows(*(np.zeros(0, dtype=t) for t in (str, str, np.int64, str, np.int64, float,
                                                            np.int64, np.int64)))
        return empty, {k: np.zeros(0) for k in SCHEMES}, np.zeros(0, dtype=bool)
    fields = GemmRows.__dataclass_fields__
    data = GemmRows(**{k: np.concatenate([getattr(d, k) for d, _, _ in parts]) for k in fields})
    return (data, {k: np.concatenate([e[k] for _, e, _ in parts]) for k in SCHEMES},
            np.concatenate([b for _, _, b in parts]))


__all__ = [
    "COLUMNS",
    "LARGE_MESSAGE_BYTES",
    "LAWS",
    "MEASURED_LABEL",
    "SCHEMES",
    "TARGETS",
    "ErrorStats",
    "GemmRows",
    "GpuFit",
    "Report",
    "Settings",
    "StackLaw",
    "abs_rel_error",
    "allreduce_law",
    "batch_cost_model",
    "batch_folds",
    "batch_parts",
    "batch_time",
    "batch_tokens",
    "default_law",
    "fit_gpu",
    "fit_stack_law",
    "gemm_rows",
    "measured_predictions",
    "model_folds",
    "monotone_envelope",
    "paper_shapes",
    "predict_gemm",
    "predict_paper",
    "predict_rows",
    "prompts",
    "staircase",
    "staircase_verdict",
    "target_checks",
    "token_split",
    "validate",
]
