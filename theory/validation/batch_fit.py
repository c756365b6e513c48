"""Calibration on batch timings: fit Eq. 7's rates by non-negative linear least squares
(:func:`fit_batch`).

Batch timings (Eq. 7)
    ``T_B = ceil(tau/t_col)/mu_Lin(t) + tau/mu_nLin + N sum_dec T^{D,SA}(i_j) + sum_pre T^{P,SA}(i_j, c_j)``
    plus a fixed ``overhead_s``. With the tile choice held fixed, Eq. 7 is linear in ``1/mu(t*)``
    (through ``1/mu_Lin(t*) = lin_pairs / (s mu(t*))`` and the prefill-attention GeMMs of Eq. 6,
    which divide by the same ``mu``), in the GeMV time scale of Eq. 3/5, in ``1/mu_nLin`` and in
    ``overhead_s``. The fit multiplies *all* GeMM tile times by one factor ``theta_G`` (so
    ``mu(t*) = mu_base(t*) / theta_G``) and all GeMV times by ``theta_D``: every GeMM keeps the base
    profile's fastest tile, and the written profile reproduces the fitted times exactly. The
    coefficients ``(theta_G, theta_D, 1/mu_nLin, overhead_s)`` come from non-negative linear least
    squares. A coefficient is identifiable when its design column is not (numerically) a
    combination of the others'; they are admitted in the order GeMM, decode attention,
    non-linear, overhead, and one that is not identifiable keeps its base value: ``theta_D``
    without decodes; ``1/mu_nLin`` and ``overhead_s`` when every batch has the same ``tau`` (their
    columns are then constant, like the GeMM column); ``1/mu_nLin`` when every ``tau`` is a
    multiple of ``t_col`` and there is no prefill attention (``ceil(tau/t_col)`` is then
    proportional to ``tau``).

Both fits minimise relative residuals ``predicted / measured - 1``: timings span orders of
magnitude, and absolute errors would ignore the small ones.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 3-7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from theory.cost import T_D_SA, T_P_SA, T_Lin, build_cost_model
from theory.hardware import GPU
from theory.models import Model
from theory.validation.calibration import LOWER, Calibration, Parameter, identifiable_columns, standard_errors
from theory.validation.timings import BatchTimings

_TERMS = ("GeMM", "decode attention", "non-linear", "overhead")


def _decode_feature(cm, timings: BatchTimings) -> np.ndarray:
    """``N sum_j T^{D,SA}(i_j)`` per batch under the base profile (Eq. 5).

    With only the context sums known, ``T^{D,SA}`` is replaced by its least-squares line
    ``alpha i + beta`` over positions ``1 .. max(4096, 2 x the largest mean position)``.
    """
    n = len(timings)
    if timings.decode_positions is not None:
        pos = np.concatenate([*timings.decode_positions, np.zeros(0, dtype=np.int64)])
        if not pos.size:
            return np.zeros(n)
        rows = np.repeat(np.arange(n), timings.decode_count)
        return cm.N * np.bincount(rows, weights=T_D_SA(cm, pos), minlength=n)
    mean = timings.decode_context_sum / np.maximum(timings.decode_count, 1)
    grid = np.arange(1, max(4096, 2 * math.ceil(mean.max())) + 1)
    alpha, beta = np.polyfit(grid, T_D_SA(cm, grid), 1)
    return cm.N * (alpha * timings.decode_context_sum + beta * timings.decode_count)


def batch_design(cm, timings: BatchTimings) -> np.ndarray:
    """Eq. 7's terms under the base profile, one column each: GeMMs (Eq. 4 + Eq. 6), decode
    attention (Eq. 5), ``tau`` and 1; ``T_B = design @ (theta_G, theta_D, 1/mu_nLin, overhead_s)``."""
    tau = timings.tau
    gemm = np.array(T_Lin(cm, tau), dtype=float)
    has = timings.prefill_tokens > 0
    if has.any():
        gemm[has] += T_P_SA(cm, timings.prefill_start[has], timings.prefill_tokens[has])
    return np.column_stack([gemm, _decode_feature(cm, timings), tau.astype(float), np.ones(tau.size)])


def fit_batch(timings: BatchTimings, base: GPU, model: Model, mode: str = "paper", *,
              overhead: bool = True, key: str | None = None) -> Calibration:
    """Fit ``mu(t*)`` (all tile rates scaled together), the GeMV rates, ``mu_nLin`` and
    ``overhead_s`` of Eq. 7 to batch timings, by non-negative linear least squares.

    Parameters
    ----------
    timings : BatchTimings
    base : GPU
        The preset whose tiles, tile choice and rate ratios are kept.
    model : Model
    mode : str
        ``"paper"`` or ``"real"`` (see :mod:`theory.models`).
    overhead : bool
        Fit ``overhead_s``; otherwise it keeps the base value (0, as in Eq. 7).
    key : str, optional
        The new profile's key (default ``"<base>-calibrated"``).

    References
    ----------
    Eq. 4-7; the method and the identifiability rule are in the module docstring.
    """
    cm = build_cost_model(base, model, mode)
    design = batch_design(cm, timings)
    t = timings.seconds
    theta = np.array([1.0, 1.0, 1.0 / cm.mu_nLin, cm.overhead_s])
    base_theta = theta.copy()
    ref = np.array([1.0, 1.0, 1.0 / cm.mu_nLin, float(np.median(t))])
    tried = (0, 1, 2, 3) if overhead else (0, 1, 2)
    free = identifiable_columns(design / t[:, None], tried)
    fixed = [j for j in range(4) if j not in free]
    target = 1.0 - design[:, fixed] @ theta[fixed] / t
    weighted = design[:, free] * ref[free] / t[:, None]
    rel_se: dict[int, float] = {}
    if free:
        lower = [0.0 if j == 3 else LOWER for j in free]
        sol = lsq_linear(weighted, target, bounds=(lower, np.inf))
        theta[free] = sol.x * ref[free]
        se = standard_errors(weighted, weighted @ sol.x - target)
        if se is not None:
            rel_se = {j: float(s / u) for j, s, u in zip(free, se, sol.x, strict=True) if u > 0}
    return _batch_calibration(cm, timings, design, _Solution(theta, base_theta, tried, free, rel_se), key)


@dataclass(frozen=True, eq=False)
class _Solution:
    """The batch fit's coefficients ``(theta_G, theta_D, 1/mu_nLin, overhead_s)``, the base
    profile's, the columns tried and those fitted, and the fitted ones' relative standard errors."""

    theta: np.ndarray
    base_theta: np.ndarray
    tried: tuple
    free: list
    rel_se: dict


def _batch_calibration(cm, timings: BatchTimings, design: np.ndarray, sol: _Solution,
                       key: str | None) -> Calibration:
    theta, base_theta, tried, free, rel_se = sol.theta, sol.base_theta, sol.tried, sol.free, sol.rel_se
    base, t_star = cm.gpu, cm.t_star
    mu = {str(tl): float(m / theta[0]) for tl, m in zip(base.tiles, base.mu, strict=True)}
    mu_gemv = {str(g): float(m / theta[1]) for g, m in zip(base.gemv_tiles, base.mu_gemv, strict=True)}
    params = (
        Parameter(f"mu[{t_star}] (t*)", "tile pairs/s/SM", mu[str(t_star)], base.rate(t_star), 0 in free,
                  rel_se.get(0), f"mu_Lin(t*) = s mu / lin_pairs = {cm.mu_Lin[0] / theta[0]:.4g} blocks/s; "
                                 f"every tile rate divided by theta_G = {theta[0]:.4g}"),
        Parameter("mu_gemv scale", "x base", float(1.0 / theta[1]), 1.0, 1 in free, rel_se.get(1),
                  "every GeMV rate (Eq. 3, 5) multiplied by this"),
        Parameter("mu_nLin", "tokens/s", float(1.0 / theta[2]), float(1.0 / base_theta[2]), 2 in free,
                  rel_se.get(2)),
        Parameter("overhead_s", "s", float(theta[3]), float(base_theta[3]), 3 in free, rel_se.get(3)),
    )
    notes = [f"{_TERMS[j]} term ({params[j].name}) "
             f"{'not identifiable from these data' if j in tried else 'not fitted'}: base value kept"
             for j in range(4) if j not in free]
    if timings.decode_positions is None and np.any(timings.decode_count > 0):
        notes.append("decode attention from context sums: Eq. 5 replaced by its least-squares line")
    profile = {"base": base.key, "mu": mu, "mu_gemv": mu_gemv, "mu_nLin": params[2].value,
               "overhead_s": params[3].value}
    labels = tuple(f"batch prefill {c}@{i} + {b} decodes (context {s})" for i, c, b, s in
                   zip(timings.prefill_start, timings.prefill_tokens, timings.decode_count,
                       timings.decode_context_sum, strict=True))
    return Calibration("batch", key or f"{base.key}-calibrated", base.key, params, profile,
                       timings.seconds, design @ theta, design @ base_theta, labels, tuple(notes))


__all__ = [
    "batch_design",
    "fit_batch",
]
