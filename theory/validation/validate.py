"""Predicted against measured times for the shipped public profiles: the cost model's error budget.

Every row of a profile in :mod:`theory.profiles` is one measured operation. This module predicts each
row that the cost model can express and scores the prediction by its absolute relative error
``|predicted / measured - 1|``, summarised per group (GPU x model x TP x operation) and pooled by
its **median** and **90th percentile** (:class:`theory.validation.errors.ErrorStats`). Seven predictions
(*schemes*):

``roofline``
    The GPU preset's roofline (``theory/data/gpus.toml``: one rate per tile, no measured data) and the
    served layer's GeMM shapes (``real`` mode, :func:`theory.profiles.gemm_shape`), Eq. 2 on each GeMM's
    fastest tile.
``shipped``
    The GPU preset as ``real`` mode uses it: for the GPUs with public data (A100, H100, A40, RTX 4090,
    RTX PRO 6000) the measured-profile law of the whole profile (:mod:`theory.measured`) where it covers
    a GeMM and the shipped tile-model calibration elsewhere (:mod:`theory.validation.presets_fit`,
    fitted on the full profile's training token counts): an in-sample figure on those rows, not a
    held-out one; for the other GPUs the roofline.
``tokens``
    The roofline preset calibrated (:func:`theory.validation.gemm_fit.fit_gemm`: per-tile rates, a
    fixed time ``c_0`` per GeMM and, with ``Settings.floor``, ``Settings.waves`` and ``Settings.l2``
    (default, the shipped presets' terms), the achievable DRAM bandwidth of the memory floor, wave
    quantization and the L2 bandwidth of the tiles' operand traffic) on the GPU's rows whose token count
    is *not* held out, scored on the rows whose token count is: every ``k``-th distinct token count of
    the GPU (:func:`theory.validation.gemm.token_split`).
``models``
    Leave one model out: for each model, the preset calibrated on the GPU's rows of the *other* models,
    scored on that model's rows (:func:`theory.validation.gemm.model_folds`).
``paper``
    The roofline preset on the paper's layer (``paper`` mode, Section 3.2.1: one attention head of width
    ``d``, separate ``W_Q, W_K, W_V`` of ``d x d_x``, a two-matrix FFN, no output projection), for
    reference (:func:`theory.validation.gemm.paper_shapes`).
``measured_law``
    The measured-profile law (:mod:`theory.measured`, the ``gemm_profile`` term) built from the
    ``tokens`` scheme's training rows only (the held-out token counts are removed from every series
    before the tables are pooled and interpolated), scored on the held-out rows; a row whose shape has
    no training series, or whose count lies outside its table's range, takes the ``tokens`` prediction
    (:func:`theory.validation.gemm.measured_predictions`). It interpolates measured points and does not
    transfer to unprofiled shapes.
``measured_law_models``
    The same law in the leave-one-model-out folds: only the *other* models' series of the same shape
    enter the tables, and the rest falls back to the ``models`` prediction;
    :attr:`theory.validation.results.Report.measured_coverage` counts how many rows each scheme
    interpolated.

What is predicted. The per-GeMM rows of ``vidur_gemm`` and the GeMM layers of
``llmservingsim_rtx4090`` (vLLM's ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj`` and
``lm_head``, shaped by :func:`theory.profiles.gemm_shape`) by
:func:`theory.validation.gemm.predict_gemm`, the one per-GeMM predictor
(:mod:`theory.validation.score_gemm`). Whole-batch rows (``prefill_batch``, ``decode_batch``) by
Eq. 7 (:func:`theory.cost.T_batch`) when the cost model can run their tensor-parallel degree
(:func:`theory.validation.batches.batch_cost_model`: TP 1 as named, TP > 1 through
:mod:`theory.terms` when the GPU profile states an all-reduce law; the shipped batch rows are TP
2-8, so without one they are listed as not predicted with the reason); their ``tokens`` scheme is
the serving stack's law on top of Eq. 7, a fixed time per batch and multipliers on Eq. 7's
all-reduce time, on its bytes beyond :data:`theory.validation.stack_law.LARGE_MESSAGE_BYTES` per
message and on the remaining time (:class:`theory.validation.stack_law.StackLaw`), fitted per GPU x
model x TP on the other batch shapes (:func:`theory.validation.stack_law.fit_stack_law`; k folds of
interior shapes, :func:`theory.validation.batches.batch_folds`;
:mod:`theory.validation.score_batches`). All-reduce rows where the GPU profile states an all-reduce
law (:mod:`theory.validation.allreduce`; the calibrated A100 and H100 presets state one). Measured
self-attention batches (``attention`` rows) by Eq. 5-6 per layer, scored per batch kind
(:mod:`theory.validation.attention`). Element-wise kernels (``vidur_kernels`` and LLMServingSim's)
are listed as not predicted: the cost model prices them only as one aggregate ``tau / mu_nLin`` per
batch (Section 3.2.3). A row faster than the roofline lower bound of its shape
(:mod:`theory.validation.plausibility`) is no measurement of that shape: it is left out of every
score and counted as not predicted (:data:`theory.validation.plausibility.REASON`). Nothing is
dropped silently: every row is either scored or counted in
:attr:`theory.validation.results.Report.not_predicted` with its reason. The staircase of the GeMM
times is :mod:`theory.validation.staircase`, the acceptance targets :mod:`theory.validation.targets`.

Where the cost terms (:mod:`theory.terms`) enter: :func:`theory.validation.gemm.predict_gemm` (per
GeMM: ``memory_floor``, ``waves``, ``l2_bandwidth_gbs``),
:func:`theory.validation.batches.batch_cost_model` (tensor parallelism for whole batches) and
:func:`theory.validation.allreduce.allreduce_law` (collectives); all come from the GPU profile, so
a ``gpu_file`` switching them on is validated with them. A user GPU file (``gpu_file``) that
overrides a preset's fields is validated like the preset itself.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 (GeMM time), Eq. 7 (batch time), Section 3.2.1 (the GeMMs of
a layer). Data: microsoft/vidur @ 7d47513363ec447a741ac5e47241580b47724fbf,
Mutinifni/splitwise-sim @ 8f99e7dc9b407f4ce2488d03dd44c0b8b946dab0 and casys-kaist/LLMServingSim @
5daddb21a545658d5150b535712d0494584b5278 (theory/data/profiles/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.profiles import GEMM_OPERATIONS, KERNEL_OPERATIONS, VIDUR_GEMMS, VIDUR_KERNELS, Profile
from theory.validation import fp8_report, moe_report
from theory.validation.allreduce import score_allreduce
from theory.validation.attention import OPERATION as ATTENTION
from theory.validation.attention import score_attention
from theory.validation.batches import BATCH_OPERATIONS, RANK_OPERATIONS
from theory.validation.fan_out import Pending, start
from theory.validation.gemm import GemmRows, gemm_rows
from theory.validation.plausibility import REASON as SCREEN_REASON
from theory.validation.plausibility import implausible
from theory.validation.results import SCHEMES, Report, Settings, not_predicted
from theory.validation.score_batches import score_batches
from theory.validation.score_gemm import fit_jobs, pool_gpus, score_gemm
from theory.validation.staircase import staircase

NO_KERNEL_LAW = ("the cost model prices element-wise operations only as one aggregate tau/mu_nLin "
                 "per batch (Section 3.2.3), no per-kernel law")
QUICK_MODELS = ("llama-2-7b", "internlm-20b")
QUICK_TPS = (1, 2)
SCREENED_FIELDS = ("gpu", "model", "tp", "operation", "tokens", "decodes", "context", "prefill_context",
                   "generated", "bytes")  # the shape of a screened row, as the profile states it


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


def _screen(report: Report, profile: str, rows: np.ndarray, bad: np.ndarray, bound: np.ndarray) -> None:
    """Count the ``rows`` marked ``bad`` (faster than the roofline lower bound ``bound`` of their
    shape, :func:`theory.validation.plausibility.implausible`) as not predicted and list them in
    :attr:`theory.validation.results.Report.screened`."""
    if bad.any():
        not_predicted(report, profile, rows[bad], SCREEN_REASON)
        for r, b in zip(rows[bad], bound[bad], strict=True):
            report.screened.append({"profile": profile, **{k: r[k].item() for k in SCREENED_FIELDS},
                                    "seconds": float(r["seconds"]), "bound_s": float(b)})


@dataclass(frozen=True, eq=False)
class _Chosen:
    """A profile's rows under the settings: all chosen (``rows``), those screened out (``bad``,
    with their bounds), the GeMM rows of the others and the names of their calibrations
    (:func:`theory.validation.score_gemm.fit_jobs`) with the index of the first among all jobs."""

    rows: np.ndarray
    bad: np.ndarray
    bound: np.ndarray | None
    gemm: GemmRows | None
    fits: tuple[str, ...]
    first: int


def _choose(profiles: dict[str, Profile], s: Settings) -> tuple[dict[str, _Chosen], list]:
    """Every profile's :class:`_Chosen` rows, and every calibration they need, in order."""
    chosen, jobs = {}, []
    for name, prof in profiles.items():
        rows = _select(prof.rows, s.gpus, s.models, s.quick)
        bad, bound = (implausible(rows, s.gpu_file, s.model_file) if s.screen
                      else (np.zeros(rows.size, dtype=bool), None))
        kept = rows[~bad]
        gemm = gemm_rows(kept, s.model_file) if np.isin(kept["operation"], GEMM_OPERATIONS).any() else None
        named = fit_jobs(gemm, s) if gemm is not None else []
        chosen[name] = _Chosen(rows, bad, bound, gemm, tuple(n for n, _ in named), len(jobs))
        jobs += [job for _, job in named]
    return chosen, jobs


def validate(profiles: dict[str, Profile], settings: Settings | None = None, workers: int = 1) -> Report:
    """Predict and score every row of ``profiles`` (module docstring).

    Parameters
    ----------
    profiles : dict
        ``{name: Profile}``, e.g. every :func:`theory.profiles.shipped_profiles` loaded.
    settings : Settings
        Held-out stride, training cap, seed, the quick subset (models :data:`QUICK_MODELS` at TP
        :data:`QUICK_TPS`; two models so that leave-one-model-out has one to train on), GPU and
        model filters, user GPU and model files.
    workers : int
        Worker processes for the calibrations (:mod:`theory.validation.fan_out`); the report does
        not depend on it.

    Returns
    -------
    Report
    """
    s = settings or Settings()
    report = Report(s)
    chosen, jobs = _choose(profiles, s)
    moe = moe_report.job(s)
    pending = start(jobs if moe is None else [*jobs, moe], workers)
    try:
        all_gemm = [_score_profile(report, name, c, pending) for name, c in chosen.items()]
        if moe is not None:
            report.moe = pending.result(len(jobs))
    finally:
        pending.close()
    data, errors, below = _concat([g for g in all_gemm if g is not None])
    pool_gpus(report, errors, data, below)  # every GPU preset (or the chosen ones), with or without data
    report.staircase = staircase(report, data)
    fp8_report.score_into(report)
    return report


def _score_profile(report: Report, name: str, c: _Chosen, pending: Pending):
    """Score one profile's chosen rows into ``report``; its GeMM rows with their errors, or None."""
    s = report.settings
    if s.screen:
        _screen(report, name, c.rows, c.bad, c.bound)
    rows = c.rows[~c.bad]
    if not rows.size:
        return None
    ops = set(rows["operation"].tolist())
    gemm = None
    if c.gemm is not None:
        index = {n: c.first + k for k, n in enumerate(c.fits)}
        errors, below = score_gemm(report, name, c.gemm, s, lambda n: pending.result(index[n]))
        gemm = (c.gemm, errors, below)
    if ops & {*BATCH_OPERATIONS, *RANK_OPERATIONS}:
        score_batches(report, name, rows, s)
    if "all_reduce" in ops:
        score_allreduce(report, name, rows, s)
    if ATTENTION in ops:
        report.attention += score_attention(name, rows, gpu_file=s.gpu_file, model_file=s.model_file)
    kernels = rows[np.isin(rows["operation"], KERNEL_OPERATIONS)]
    if kernels.size:
        not_predicted(report, name, kernels, NO_KERNEL_LAW)
    known = (*GEMM_OPERATIONS, *BATCH_OPERATIONS, *RANK_OPERATIONS, "all_reduce", *KERNEL_OPERATIONS,
             ATTENTION)
    other = rows[~np.isin(rows["operation"], known)]
    if other.size:
        not_predicted(report, name, other, "operation unknown to the cost model")
    return gemm


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
    "NO_KERNEL_LAW",
    "QUICK_MODELS",
    "QUICK_TPS",
    "SCREENED_FIELDS",
    "validate",
]
