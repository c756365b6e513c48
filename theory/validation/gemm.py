"""Per-GeMM prediction: the one predictor (the plug point of the cost terms), the paper-mode
shapes, the GeMM rows of a profile with their held-out splits, the tile model calibrated on some
rows, and the measured-profile law built from some rows.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 (GeMM time), Section 3.2.1 (the GeMMs of a layer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from theory.cost import CostModel, T_GeMM_terms
from theory.errors import FieldError, TileDivisibilityError
from theory.hardware import GPU
from theory.measured import interpolate_by_shape, pooled_tables
from theory.models import Model, get_model
from theory.profiles import GEMM_OPERATIONS, LLMSERVINGSIM_GEMMS, gemm_series_rows, gemm_shape, series_labels
from theory.validation.calibration import Calibration, FitOptions
from theory.validation.gemm_fit import fit_gemm
from theory.validation.timings import GemmTimings

NO_PAPER_COUNTERPART = "the paper's layer has no output projection (Section 3.2.1)"
NOT_PAPER_DIVISIBLE = ("the model's dimensions are not divisible by the GPU's tiles in paper mode "
                       "(Section 3.2.1's hypothesis; Qwen3-32B's vocabulary of 151,936)")


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
    their bound, :func:`theory.validation.gemm_fit.fit_gemm`), the fitted ``eta_mem``, and the terms
    switched as fitted with ``gemm_overhead_s = c_0`` (:mod:`theory.terms`), so that
    :func:`predict_gemm` on it reproduces the fit.

    References
    ----------
    Eq. 2; the fit is :func:`theory.validation.gemm_fit.fit_gemm`'s.
    """
    if not len(train):
        raise FieldError("training rows", 0, f"at least one GeMM row of {base.key} to calibrate on")
    sub = train.take(_subsample(len(train), max_train))
    cal = fit_gemm(sub.timings(), base, get_model(str(sub.model[0]), model_file), "real",
                   FitOptions(key=f"{base.key}-validate", seed=seed, floor=floor, waves=waves, l2=l2))
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


__all__ = [
    "NOT_PAPER_DIVISIBLE",
    "NO_PAPER_COUNTERPART",
    "GemmRows",
    "GpuFit",
    "fit_gpu",
    "gemm_rows",
    "measured_predictions",
    "model_folds",
    "paper_shapes",
    "predict_gemm",
    "predict_paper",
    "predict_rows",
    "token_split",
]
