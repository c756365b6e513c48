"""Calibration: fit a GPU profile's rates to measured GeMM or batch timings (Eq. 2-7).

GeMM timings (Eq. 2)
    A GeMM ``(d_row x d_red) . (d_red x d_col)`` on tile ``t = (t_row, t_col, t_red)`` computes
    ``n_t = ceil(d_row/t_row) ceil(d_col/t_col) ceil(d_red/t_red)`` tile pairs in ``n_t x_t``
    seconds, ``x_t = 1 / (s mu(t))``. The library runs the fastest tile, so a row of ``count``
    GeMMs is modelled as ``count (min_t n_t x_t + c_0)``, with an optional fixed time ``c_0`` per
    GeMM (launch and memory-bound floor; 0 in Eq. 2).

    The ``min`` makes least squares piecewise quadratic in ``x``. The fit alternates (i) assign
    each point to its fastest tile and (ii) with the assignment fixed, solve the now linear
    problem for ``x`` and ``c_0`` (``scipy.optimize.lsq_linear``, ``x > 0``, ``c_0 >= 0``), until an
    assignment repeats. A fixed point is a local minimum. Starts: the base profile; the envelopes
    ``x_t = max_i (t_i/count_i - c) / n_{i,t}`` over a grid of ``c`` (exact for noise-free data when
    ``c = c_0``: ``t_i/count_i - c_0 <= n_{i,t} x_t`` for every tile, with equality at the fastest);
    seeded random perturbations of the base. From the best start, moves that let an idle tile take
    over its most favourable points, or retire a winning tile, are accepted while they lower the
    Bayesian information criterion, so that noise does not recruit extra tiles.

    Identifiability. ``x_t`` is determined only by the points where ``t`` is the fastest tile. A
    tile that never is only has a bound ``mu(t) <= mu_bound(t)``; it keeps its base rate, lowered to
    ``mu_bound`` where the base rate would undercut the fitted tiles on the data (else the written
    profile would not reproduce the fit). A winning tile is not identified either when another
    tile, refitted over both tiles' points, can replace it with a residual sum of squares larger by
    less than the chi-square (1 degree of freedom, 95%) margin of the noise (:func:`_alternatives`).
    On noise-free data that leaves exact alternatives only: tiles whose tile-pair counts are
    proportional on those points, e.g. every tile of one ``t_col`` when all ``d_row`` are multiples
    of 256 and all ``d_red`` of 64, as in transformer layers. With noise it also catches a tile
    that wins a few points by less than the noise. Finally, with the assignment fixed, a rate or
    ``c_0`` whose column is a combination of the others' (:func:`identifiable_columns`) is not
    identified (e.g. ``c_0`` when all GeMMs have one shape).

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
Bari, Hegde, de Veciana (2025), Eq. 2-7 and Section 3.2.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tomli_w
from scipy.optimize import lsq_linear

from theory.cost import T_D_SA, T_P_SA, T_Lin, build_cost_model, ceil_div
from theory.errors import FieldError
from theory.hardware import GPU, Tile
from theory.io import atomic_write_text
from theory.models import Model
from theory.timings import BatchTimings, GemmTimings

_SVD_TOL = 1e-6      # smallest admissible singular value of the unit-norm design columns
_LOWER = 1e-9        # lower bound of a time coefficient, relative to its reference value
_CHI2_95 = 3.84      # chi-square quantile, 1 degree of freedom, 95%


@dataclass(frozen=True)
class Parameter:
    """One fitted profile quantity.

    Attributes
    ----------
    name, unit : str
    value, base : float
        Fitted and base-profile values.
    identified : bool
        Whether the data determine it; if not, ``value`` is the base value or a bound.
    rel_se : float or None
        Relative standard error of the linearised fit (None when not estimable).
    note : str
    """

    name: str
    unit: str
    value: float
    base: float
    identified: bool
    rel_se: float | None = None
    note: str = ""


@dataclass(frozen=True)
class FitError:
    """Error of predicted against measured times: RMSE (s), relative RMSE, max relative error."""

    rmse_s: float
    rel_rmse: float
    max_rel_error: float

    @classmethod
    def of(cls, measured: np.ndarray, predicted: np.ndarray) -> FitError:
        rel = predicted / measured - 1.0
        return cls(float(np.sqrt(np.mean((predicted - measured) ** 2))),
                   float(np.sqrt(np.mean(rel ** 2))), float(np.abs(rel).max()))


@dataclass(frozen=True, eq=False)
class Calibration:
    """A fitted profile with its parameters and its error.

    Attributes
    ----------
    kind : str
        ``"gemm"`` or ``"batch"``.
    key, base_key : str
        The new profile's key and the preset it inherits from.
    parameters : tuple of Parameter
    profile : dict
        The ``[gpus.<key>]`` table, loadable by :func:`theory.hardware.load_gpus`.
    measured, predicted, base_predicted : ndarray
        Measured seconds, and the calibrated and the base profile's predictions.
    labels : tuple of str
        One description per point.
    notes : tuple of str
    """

    kind: str
    key: str
    base_key: str
    parameters: tuple[Parameter, ...]
    profile: dict
    measured: np.ndarray
    predicted: np.ndarray
    base_predicted: np.ndarray
    labels: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def residuals(self) -> np.ndarray:
        """Relative residuals ``predicted / measured - 1``, one per point."""
        return self.predicted / self.measured - 1.0

    @property
    def error(self) -> FitError:
        return FitError.of(self.measured, self.predicted)

    @property
    def base_error(self) -> FitError:
        """The uncalibrated base profile's error on the same data."""
        return FitError.of(self.measured, self.base_predicted)

    def worst(self, k: int = 5) -> np.ndarray:
        """Indices of the ``k`` points with the largest relative error."""
        return np.argsort(-np.abs(self.residuals), kind="stable")[:k]

    def as_dict(self) -> dict:
        return {
            "kind": self.kind, "key": self.key, "base": self.base_key,
            "parameters": [asdict(p) for p in self.parameters],
            "error": asdict(self.error), "base_error": asdict(self.base_error),
            "worst": [{"label": self.labels[i], "measured_s": float(self.measured[i]),
                       "predicted_s": float(self.predicted[i]), "rel_error": float(self.residuals[i])}
                      for i in self.worst()],
            "residuals": self.residuals.tolist(), "notes": list(self.notes),
            "profile": {"gpus": {self.key: self.profile}},
        }


def _standard_errors(design: np.ndarray, residual: np.ndarray) -> np.ndarray | None:
    """Standard errors of linear least-squares coefficients, in the design's units."""
    n, p = design.shape
    if n <= p:
        return None
    cov = float(residual @ residual) / (n - p) * np.linalg.pinv(design.T @ design)
    return np.sqrt(np.clip(np.diag(cov), 0.0, None))


# --- GeMM timings (Eq. 2) -----------------------------------------------------------------


def tile_pairs(d_row, d_col, d_red, tiles: tuple[Tile, ...]) -> np.ndarray:
    """Tile pairs ``ceil(d_row/t_row) ceil(d_col/t_col) ceil(d_red/t_red)`` of Eq. 2, per point (rows)
    and tile (columns)."""
    t = np.array([(tl.t_row, tl.t_col, tl.t_red) for tl in tiles], dtype=np.int64).T
    col = [np.asarray(d)[:, None] for d in (d_row, d_col, d_red)]
    return (ceil_div(col[0], t[0]) * ceil_div(col[1], t[1]) * ceil_div(col[2], t[2])).astype(float)


def gemm_model(pairs: np.ndarray, count, x: np.ndarray, c0: float) -> tuple[np.ndarray, np.ndarray]:
    """``count (min_t n_t x_t + c_0)`` and the fastest tile's index per point (Eq. 2).

    Ties go to the lowest tile index, as in :mod:`theory.cost`.
    """
    per_tile = pairs * x
    arg = np.argmin(per_tile, axis=1)
    return count * (per_tile[np.arange(arg.size), arg] + c0), arg


class _GemmProblem:
    """The data of a GeMM fit and its search (module docstring)."""

    def __init__(self, pairs: np.ndarray, count: np.ndarray, t: np.ndarray, x_ref: np.ndarray,
                 overhead: bool):
        self.pairs, self.count, self.t, self.x_ref, self.overhead = pairs, count, t, x_ref, overhead
        self.c_ref = float(np.median(t / count))

    def rss(self, x, c0) -> float:
        return float(np.sum((gemm_model(self.pairs, self.count, x, c0)[0] / self.t - 1.0) ** 2))

    def bic(self, fit) -> float:
        """``n log(RSS/n) + k log n`` with ``k`` the winning tiles (+ ``c_0``); RSS/n is floored at
        1e-24 so that exact fits compare by ``k``."""
        rss, x, c0 = fit
        k = np.unique(gemm_model(self.pairs, self.count, x, c0)[1]).size + int(self.overhead)
        n = self.t.size
        return n * math.log(max(rss / n, 1e-24)) + k * math.log(n)

    def alternate(self, x0: np.ndarray, max_iter: int = 100) -> tuple[float, np.ndarray, float]:
        """Alternate fastest-tile assignment and bounded linear least squares; the best (RSS, x, c_0)."""
        x, c0 = x0.copy(), 0.0
        best = (self.rss(x, c0), x.copy(), c0)
        rows = np.arange(self.t.size)
        seen: set[bytes] = set()
        for _ in range(max_iter):
            arg = gemm_model(self.pairs, self.count, x, c0)[1]
            if arg.tobytes() in seen:
                break
            seen.add(arg.tobytes())
            active = np.unique(arg)
            design = np.zeros((self.t.size, active.size + self.overhead))
            design[rows, np.searchsorted(active, arg)] = self.count * self.pairs[rows, arg] * self.x_ref[arg]
            if self.overhead:
                design[:, -1] = self.count * self.c_ref
            lower = np.r_[np.full(active.size, _LOWER), np.zeros(int(self.overhead))]
            sol = lsq_linear(design / self.t[:, None], np.ones(self.t.size), bounds=(lower, np.inf))
            x[active] = sol.x[:active.size] * self.x_ref[active]
            c0 = float(sol.x[-1] * self.c_ref) if self.overhead else 0.0
            if (rss := self.rss(x, c0)) < best[0]:
                best = (rss, x.copy(), c0)
        return best

    def starts(self, n_random: int, seed: int) -> list[np.ndarray]:
        per_gemm = self.t / self.count
        grid = np.linspace(0.0, per_gemm.min(), 16, endpoint=False) if self.overhead else [0.0]
        envelopes = [np.max((per_gemm - c)[:, None] / self.pairs, axis=0) for c in grid]
        rng = np.random.default_rng(seed)
        spread = math.log(4.0)
        random = [self.x_ref * np.exp(rng.uniform(-spread, spread, self.x_ref.size)) for _ in range(n_random)]
        return [self.x_ref.copy(), *envelopes, *random]

    def moves(self, fit) -> list[np.ndarray]:
        """Starting points that let one idle tile win its best points, or retire one winner."""
        _, x, c0 = fit
        won = np.unique(gemm_model(self.pairs, self.count, x, c0)[1])
        m = np.min(self.pairs[:, won] * x[won], axis=1)
        out = []
        for k in range(x.size):
            x0 = x.copy()
            if k not in won:
                x0[k] = float(np.max(m / self.pairs[:, k])) * (1 - 1e-3)
            elif won.size > 1:
                x0[k] *= 1e3
            else:
                continue
            out.append(x0)
        return out

    def search(self, n_random: int, seed: int) -> tuple[float, np.ndarray, float]:
        best = min((self.alternate(x0) for x0 in self.starts(n_random, seed)), key=self.bic)
        while True:
            trial = min((self.alternate(x0) for x0 in self.moves(best)), key=self.bic, default=best)
            if self.bic(trial) >= self.bic(best) - 1e-9:
                return best
            best = trial


def _alternatives(p: _GemmProblem, x, c0, arg, won) -> dict[int, list[int]]:
    """For each winning tile j, the tiles that could take over its points about as well.

    Tile k replaces j: j is retired and k gets the least-squares ``x_k`` over j's points and its own;
    k is an alternative if the residual sum of squares of that fit exceeds the fitted one by less than
    ``3.84 sigma^2`` (chi-square with 1 degree of freedom at 95%, ``sigma^2 = RSS / (n - parameters)``).
    On noise-free data only exact alternatives remain.
    """
    rss = p.rss(x, c0)
    slack = _CHI2_95 * rss / max(p.t.size - won.size - p.overhead, 1) + 1e-24 * p.t.size
    out = {}
    for j in won:
        subs = []
        for k in np.setdiff1d(np.arange(x.size), [j]):
            pts = (arg == j) | (arg == k)
            a = p.count[pts] * p.pairs[pts, k] / p.t[pts]
            b = 1.0 - p.count[pts] * c0 / p.t[pts]
            x_alt = x.copy()
            x_alt[j], x_alt[k] = np.inf, a @ b / (a @ a)
            if p.rss(x_alt, c0) <= rss + slack:
                subs.append(int(k))
        out[int(j)] = subs
    return out


def _bound_idle(p: _GemmProblem, x, won) -> np.ndarray:
    """Tiles that are never fastest keep their base time per tile pair, raised to their bound."""
    m = np.min(p.pairs[:, won] * x[won], axis=1)
    x = x.copy()
    for k in np.setdiff1d(np.arange(x.size), won):
        x[k] = max(p.x_ref[k], float(np.max(m / p.pairs[:, k])) * (1 + 1e-9))
    return x


def _gemm_linearised(p: _GemmProblem, x, c0, arg, won) -> tuple[dict[int, float], set[int]]:
    """With the fastest-tile assignment fixed: relative standard errors of the winners' ``x`` and
    (key -1) of ``c_0``, and which of them the linear problem identifies (:func:`identifiable_columns`)."""
    rows = np.arange(p.t.size)
    design = np.zeros((p.t.size, won.size + p.overhead))
    design[rows, np.searchsorted(won, arg)] = p.count * p.pairs[rows, arg] * x[arg]
    if p.overhead:
        design[:, -1] = p.count * p.c_ref
    design /= p.t[:, None]
    keys = [*map(int, won), -1][:design.shape[1]]
    admitted = {keys[j] for j in identifiable_columns(design, range(design.shape[1]))}
    units = np.r_[np.ones(won.size), [c0 / p.c_ref] * p.overhead]
    se = _standard_errors(design, design @ units - 1.0)
    if se is None:
        return {}, admitted
    rel_se = {k: float(e / u) for k, e, u in zip(keys, se, units, strict=True) if u > 0 and k in admitted}
    return rel_se, admitted


def _tile_parameters(gpu: GPU, x, x_ref, arg, won, alternatives, rel_se, admitted) -> list[Parameter]:
    params = []
    for k, tile in enumerate(gpu.tiles):
        subs = alternatives.get(k, [])
        if k in won:
            note = f"fastest tile at {int(np.sum(arg == k))} points"
            if subs:
                note += ("; could be replaced there by " + ", ".join(str(gpu.tiles[j]) for j in subs)
                         + " (the data fix those GeMMs' time, not which tile gives it)")
        elif x[k] > x_ref[k]:
            note = "never fastest: mu <= bound, base rate lowered to the bound"
        else:
            note = "never fastest: base rate kept (it is below its bound)"
        params.append(Parameter(f"mu[{tile}]", "tile pairs/s/SM", float(1.0 / (gpu.s * x[k])),
                                float(gpu.mu[k]), bool(k in admitted and not subs), rel_se.get(k), note))
    return params


def fit_gemm(timings: GemmTimings, base: GPU, model: Model, mode: str = "paper", *,
             tiles: str | None = None, overhead: bool = True, key: str | None = None,
             starts: int = 8, seed: int = 0) -> Calibration:
    """Fit the per-tile rates ``mu(t)`` of Eq. 2, and a fixed time ``c_0`` per GeMM, to GeMM timings.

    Parameters
    ----------
    timings : GemmTimings
    base : GPU
        The preset whose tiles and rates are the starting point and the fallback.
    model : Model
        Only turns ``c_0`` into the profile's per-batch ``overhead_s``: ``c_0`` times the number of
        linear GeMMs of one batch (Section 3.2.1).
    mode : str
        ``"paper"`` or ``"real"`` (see :mod:`theory.models`).
    tiles : str, optional
        Fit only these tiles (see :meth:`theory.hardware.GPU.restrict`); the profile lists them.
    overhead : bool
        Fit ``c_0``; otherwise ``c_0 = 0`` as in Eq. 2.
    key : str, optional
        The new profile's key (default ``"<base>-calibrated"``).
    starts, seed : int
        Number of seeded random starting points, and their seed.

    References
    ----------
    Eq. 2; the method is in the module docstring.
    """
    gpu = base.restrict(tiles) if tiles else base
    pairs = tile_pairs(timings.d_row, timings.d_col, timings.d_red, gpu.tiles)
    count = timings.count.astype(float)
    problem = _GemmProblem(pairs, count, timings.seconds, 1.0 / (gpu.s * np.asarray(gpu.mu)), overhead)
    _, x, c0 = problem.search(starts, seed)
    arg = gemm_model(pairs, count, x, c0)[1]
    won = np.unique(arg)
    rel_se, admitted = _gemm_linearised(problem, x, c0, arg, won)
    alternatives = _alternatives(problem, x, c0, arg, won)
    x = _bound_idle(problem, x, won)
    params = _tile_parameters(gpu, x, problem.x_ref, arg, won, alternatives, rel_se, admitted)
    mu = {str(tl): p.value for tl, p in zip(gpu.tiles, params, strict=True)}
    n_gemms = sum(g.count for g in model.linear_gemms(mode))
    if overhead:
        params.append(Parameter("c_0 (per GeMM)", "s", c0, 0.0, -1 in admitted, rel_se.get(-1),
                                f"profile overhead_s = {n_gemms} linear GeMMs per batch x c_0 "
                                f"({model.key}, {mode} mode)"))
    profile = {"base": base.key, "mu": mu, "overhead_s": n_gemms * c0}
    if tiles:
        profile["tiles"] = [str(tl) for tl in gpu.tiles]
    notes = (f"{sum(p.identified for p in params[:len(mu)])} of {len(mu)} tile rates identified "
             f"individually; {won.size} tiles are fastest somewhere (their GeMMs' times are fitted)",)
    labels = tuple(f"GeMM {r}x{c}x{k} (x{n})" for r, c, k, n in
                   zip(timings.d_row, timings.d_col, timings.d_red, timings.count, strict=True))
    return Calibration("gemm", key or f"{base.key}-calibrated", base.key, tuple(params), profile,
                       timings.seconds, gemm_model(pairs, count, x, c0)[0],
                       gemm_model(pairs, count, problem.x_ref, 0.0)[0], labels, notes)


# --- Batch timings (Eq. 7) ----------------------------------------------------------------

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


def identifiable_columns(design: np.ndarray, order) -> list[int]:
    """The columns admitted in ``order`` while the admitted columns, each scaled to unit norm, have
    a smallest singular value above 1e-6; zero columns are never admitted."""
    norms = np.linalg.norm(design, axis=0)
    free: list[int] = []
    for j in order:
        cols = [*free, j]
        if norms[j] > 0 and np.linalg.svd(design[:, cols] / norms[cols], compute_uv=False).min() > _SVD_TOL:
            free.append(j)
    return free


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
        lower = [0.0 if j == 3 else _LOWER for j in free]
        sol = lsq_linear(weighted, target, bounds=(lower, np.inf))
        theta[free] = sol.x * ref[free]
        se = _standard_errors(weighted, weighted @ sol.x - target)
        if se is not None:
            rel_se = {j: float(s / u) for j, s, u in zip(free, se, sol.x, strict=True) if u > 0}
    return _batch_calibration(cm, timings, design, theta, base_theta, tried, free, rel_se, key)


def _batch_calibration(cm, timings, design, theta, base_theta, tried, free, rel_se, key) -> Calibration:
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


def calibrate(timings: GemmTimings | BatchTimings, base: GPU, model: Model, mode: str = "paper", *,
              tiles: str | None = None, overhead: bool = True, key: str | None = None,
              seed: int = 0) -> Calibration:
    """Fit GeMM timings with :func:`fit_gemm` or batch timings with :func:`fit_batch`.

    The fits are linear in Eq. 2-7's rates, so a base profile or model with cost terms beyond
    Eq. 2 (:mod:`theory.terms`) is refused rather than fitted as if the terms were off.
    """
    on = [name for name, value in (("memory_floor", base.terms.memory_floor), ("waves", base.terms.waves),
                                   ("tp", base.terms.tp > 1), ("linear_law", base.terms.linear_law),
                                   ("attention", not model.terms.attention),
                                   ("lm_head", model.terms.lm_head)) if value]
    if on:
        raise FieldError("base", f"{base.key} / {model.key}",
                         f"a profile without cost terms beyond Eq. 2 (has {', '.join(on)})")
    if isinstance(timings, GemmTimings):
        return fit_gemm(timings, base, model, mode, tiles=tiles, overhead=overhead, key=key, seed=seed)
    if tiles:
        raise FieldError("tiles", tiles, "no tile subset with batch timings (only with GeMM timings)")
    return fit_batch(timings, base, model, mode, overhead=overhead, key=key)


# --- Staircase and profile output ---------------------------------------------------------


def staircase_jumps(timings: GemmTimings, predictions: dict[str, np.ndarray], at) -> list[dict]:
    """Relative jumps ``T(next d_col) / T(d_col) - 1`` after each ``d_col`` in ``at``, measured and
    under each named prediction, per GeMM shape ``(d_row, d_red)``.

    "next" is the next larger measured ``d_col``; repeated measurements of a point are averaged.
    """
    out = []
    for d_row, d_red in sorted(set(zip(timings.d_row.tolist(), timings.d_red.tolist(), strict=True))):
        shape = (timings.d_row == d_row) & (timings.d_red == d_red)
        cols = np.unique(timings.d_col[shape])
        for a in at:
            if a not in cols or not np.any(cols > a):
                continue
            nxt = int(cols[cols > a][0])
            here, there = shape & (timings.d_col == a), shape & (timings.d_col == nxt)
            row = {"d_row": d_row, "d_red": d_red, "at": int(a), "next": nxt}
            for name, values in {"measured": timings.seconds, **predictions}.items():
                row[name] = float(values[there].mean() / values[here].mean() - 1)
            out.append(row)
    return out


def profile_toml(cal: Calibration, source: str = "") -> str:
    """The calibrated profile as TOML for :func:`theory.hardware.load_gpus`, after a comment header."""
    err, base = cal.error, cal.base_error
    origin = f" from {source}" if source else ""
    lines = [f"# GPU profile fitted by `llmq calibrate` to {cal.kind} timings{origin}.",
             f"# Use with: --gpu-file <this file> --gpu {cal.key}   (base preset: {cal.base_key})",
             f"# Fit: relative RMSE {err.rel_rmse:.2%}, max relative error {err.max_rel_error:.2%}, "
             f"RMSE {err.rmse_s:.3g} s",
             f"# Base preset on the same data: relative RMSE {base.rel_rmse:.2%}, "
             f"max relative error {base.max_rel_error:.2%}",
             *(f"# {n}" for n in cal.notes)]
    return "\n".join(lines) + "\n\n" + tomli_w.dumps({"gpus": {cal.key: cal.profile}})


def write_profile(cal: Calibration, path: str | Path, source: str = "") -> Path:
    """Write :func:`profile_toml` atomically (:func:`theory.io.atomic_write_text`)."""
    return atomic_write_text(path, profile_toml(cal, source))


__all__ = [
    "Calibration", "FitError", "Parameter", "batch_design", "calibrate", "fit_batch", "fit_gemm",
    "gemm_model", "identifiable_columns", "profile_toml", "staircase_jumps", "tile_pairs",
    "write_profile",
]
