"""The GeMM fit's model and search: Eq. 2 per tile with the memory floor, waves and L2
traffic, and the alternating bounded least squares over fastest-tile assignments with its
starts and moves (the method: :mod:`theory.validation.gemm_fit`).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2; :mod:`theory.terms` (memory floor, waves, L2 traffic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from theory.cost import ceil_div
from theory.hardware import GPU, Tile
from theory.validation.calibration import LOWER


def tile_pairs(d_row, d_col, d_red, tiles: tuple[Tile, ...], waves_s: int | None = None) -> np.ndarray:
    """Tile pairs ``ceil(d_row/t_row) ceil(d_col/t_col) ceil(d_red/t_red)`` of Eq. 2, per point (rows)
    and tile (columns).

    With ``waves_s = s`` the output tiles are counted in whole waves over the ``s`` SMs,
    ``s ceil(ceil(d_row/t_row) ceil(d_col/t_col) / s) ceil(d_red/t_red)``, so that ``pairs / (s mu)``
    is the ``waves`` term's time (:mod:`theory.terms`).
    """
    t = np.array([(tl.t_row, tl.t_col, tl.t_red) for tl in tiles], dtype=np.int64).T
    col = [np.asarray(d)[:, None] for d in (d_row, d_col, d_red)]
    out_tiles = ceil_div(col[0], t[0]) * ceil_div(col[1], t[1])
    if waves_s:
        out_tiles = waves_s * ceil_div(out_tiles, waves_s)
    return (out_tiles * ceil_div(col[2], t[2])).astype(float)


def tile_traffic(d_row, d_col, d_red, tiles: tuple[Tile, ...], bytes_per_element: int = 2) -> np.ndarray:
    """Operand bytes each tile moves through L2, ``b ceil(d_row/t_row) ceil(d_col/t_col) (t_row +
    t_col) d_red``, per point (rows) and tile (columns): the ``l2_bandwidth_gbs`` term's numerator
    (:mod:`theory.terms`)."""
    t = np.array([(tl.t_row, tl.t_col) for tl in tiles], dtype=np.int64).T
    col = [np.asarray(d)[:, None] for d in (d_row, d_col, d_red)]
    out_tiles = ceil_div(col[0], t[0]) * ceil_div(col[1], t[1])
    return bytes_per_element * out_tiles * (t[0] + t[1]) * col[2].astype(float)


def gemm_bytes(d_row, d_col, d_red, bytes_per_element: int = 2) -> np.ndarray:
    """Bytes a GeMM moves through DRAM at least, ``b (d_row d_red + d_col (d_row + d_red))``: the
    ``memory_floor`` term's numerator (:mod:`theory.terms`)."""
    d_row, d_col, d_red = (np.asarray(d, dtype=float) for d in (d_row, d_col, d_red))
    return bytes_per_element * (d_row * d_red + d_col * (d_row + d_red))


def peak_tile_time(gpu: GPU) -> np.ndarray:
    """Least time per tile pair on one SM, ``2 t_row t_col t_red / (F / s)``, per tile: the
    tile at the card's dense FP16 tensor-core peak ``F`` (``peak_fp16_tflops`` of ``gpus.toml``).
    In the fit's units (``x_t = 1 / (s mu(t))``) the bound is ``x_t >= 2 t_row t_col t_red / F``.
    """
    return np.array([2.0 * t.t_row * t.t_col * t.t_red / gpu.peak_flops for t in gpu.tiles])


def gemm_model(pairs: np.ndarray, count, x: np.ndarray, c0: float,
               floor: bool = False, traffic: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``count (min_t n_t x_t + c_0)`` and the fastest tile's index per point (Eq. 2).

    Ties go to the lowest tile index, as in :mod:`theory.cost`. With ``floor`` the last column of
    ``pairs`` holds each GeMM's bytes (:func:`gemm_bytes`) and the entry of ``x`` after the tiles
    the seconds per byte: the time is ``count (max(min_t n_t x_t, bytes x_floor) + c_0)`` and the
    index is that of the floor where the floor binds. With ``traffic`` (points x tiles: each
    tile's operand bytes through L2, :func:`tile_traffic`) the last entry of ``x`` is seconds per
    L2 byte, each tile takes ``max(n_t x_t, traffic_t x_L2)`` and the index is ``len(x) - 1``
    where that traffic binds on the fastest tile.
    """
    time, arg, _ = _gemm_eval(pairs, traffic, count, x, c0, floor)
    return time, arg


def _gemm_eval(pairs, traffic, count, x, c0, floor):
    """:func:`gemm_model` and, per point, the fastest tile (also where the floor binds)."""
    n_tiles = pairs.shape[1] - int(floor)
    rows = np.arange(pairs.shape[0])
    per_tile = pairs[:, :n_tiles] * x[:n_tiles]
    l2_binds = np.zeros(rows.size, dtype=bool)
    if traffic is not None:
        l2 = traffic * x[-1]
        eff = np.maximum(per_tile, l2)
        tile = np.argmin(eff, axis=1)
        l2_binds = l2[rows, tile] > per_tile[rows, tile]
        compute = eff[rows, tile]
    else:
        tile = np.argmin(per_tile, axis=1)
        compute = per_tile[rows, tile]
    arg = np.where(l2_binds, x.size - 1, tile)
    if not floor:
        return count * (compute + c0), arg, tile
    memory = pairs[:, n_tiles] * x[n_tiles]
    arg = np.where(memory > compute, n_tiles, arg)
    return count * (np.maximum(compute, memory) + c0), arg, tile


def _bounded_lsq(design: np.ndarray, target: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """``argmin |design x - target|`` subject to ``x >= lower``.

    Works on the ``p x p`` normal equations (a few columns, many rows: cheap where a dense
    factorisation of the ``n x p`` design is not). With ``G = design^T design = L L^T`` and
    ``r = design^T target``, ``|design x - target|^2 = |L^T x - L^{-1} r|^2 + const``, so the
    bounded problem is ``scipy.optimize.lsq_linear`` on ``(L^T, L^{-1} r)``; its unconstrained
    minimum is returned directly when it is feasible. A singular ``G`` falls back to
    ``lsq_linear`` on the full design with the bounded-variable method (``bvls``: exact for a
    rank-deficient design, where the default trust-region method warns of invalid values; the
    shipped calibration refits byte-identical with it).
    """
    gram, rhs = design.T @ design, design.T @ target
    try:
        chol = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return lsq_linear(design, target, bounds=(lower, np.inf), method="bvls").x
    y = np.linalg.solve(chol, rhs)
    x = np.linalg.solve(chol.T, y)
    if np.all(np.isfinite(x)) and np.all(x >= lower):
        return x
    return lsq_linear(chol.T, y, bounds=(lower, np.inf)).x


@dataclass(frozen=True, eq=False)
class GemmData:
    """The points of a GeMM fit in the model's terms (:func:`gemm_model`).

    Attributes
    ----------
    pairs : ndarray
        Tile pairs per point (rows) and tile (columns), with each GeMM's bytes as a last column
        when ``floor``.
    count, t : ndarray
        GeMMs per point and the measured seconds.
    floor : bool
        Whether the last column of ``pairs`` is the memory floor's bytes.
    traffic : ndarray or None
        L2 operand bytes per point and tile (:func:`tile_traffic`), with the L2 term.
    """

    pairs: np.ndarray
    count: np.ndarray
    t: np.ndarray
    floor: bool = False
    traffic: np.ndarray | None = None


class GemmProblem:
    """The data of a GeMM fit and its search (:mod:`theory.validation.gemm_fit`): the points
    ``data``, the reference coefficients ``x_ref`` (the base profile's), whether ``c_0`` is fitted
    (``overhead``), the least coefficients ``x_min`` and, when Assumption 1 is kept, ``t*``'s
    index and the tiles' volumes."""

    def __init__(self, data: GemmData, x_ref: np.ndarray, overhead: bool, x_min: np.ndarray | None = None,
                 t_star: int | None = None, volume: np.ndarray | None = None):
        pairs, count, t, floor, traffic = data.pairs, data.count, data.t, data.floor, data.traffic
        self.pairs, self.count, self.t, self.x_ref, self.overhead = pairs, count, t, x_ref, overhead
        # least admissible coefficient: the dense peak for a tile, LOWER x the reference otherwise
        self.x_min = np.maximum(LOWER * x_ref, 0.0 if x_min is None else x_min)
        # Assumption 1 kept: x_k >= ratio_k x_{t*} (no tile above t*'s FLOP rate), ratio_k = vol_k / vol_t*
        self.t_star = t_star
        self.ratio = None if t_star is None else np.asarray(volume, dtype=float) / float(volume[t_star])
        self.floor = floor  # the last column of pairs is the memory floor (gemm_model)
        self.traffic = traffic  # L2 operand bytes per point and tile; x's last entry (gemm_model)
        self.n_tiles = pairs.shape[1] - int(floor)
        self.k_l2 = x_ref.size - 1 if traffic is not None else -1
        self.c_ref = float(np.median(t / count))
        self._solved: dict[bytes, np.ndarray] = {}  # assignment key -> its bounded least squares (alternate)
        self._bics: dict[tuple[bytes, float], float] = {}  # (x, c_0) -> BIC (bic)

    def admissible(self, x: np.ndarray) -> np.ndarray:
        """``x`` raised to its bounds: the dense peak and, when t* is kept, t*'s FLOP rate."""
        x = np.maximum(x, self.x_min)
        if self.t_star is not None:
            n = self.n_tiles
            x[:n] = np.maximum(x[:n], self.ratio * x[self.t_star])
        return x

    def evaluate(self, x, c0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _gemm_eval(self.pairs, self.traffic, self.count, x, c0, self.floor)

    def model(self, x, c0) -> tuple[np.ndarray, np.ndarray]:
        return self.evaluate(x, c0)[:2]

    def features(self, arg, tile) -> np.ndarray:
        """Per point, the coefficient's multiplier in its regime: tile pairs, floor bytes, or the
        fastest tile's L2 bytes."""
        rows = np.arange(arg.size)
        out = np.empty(arg.size)
        l2 = arg == self.k_l2
        out[~l2] = self.pairs[rows[~l2], arg[~l2]]
        if l2.any():
            out[l2] = self.traffic[rows[l2], tile[l2]]
        return out

    def tile_min(self, x, won) -> np.ndarray:
        """Per point, the least time of the winning *tiles* (the floor is a maximum, not a tile)."""
        won = won[won < self.n_tiles]
        times = self.pairs[:, won] * x[won]
        if self.traffic is not None:
            times = np.maximum(times, self.traffic[:, won] * x[self.k_l2])
        return np.min(times, axis=1)

    def rss(self, x, c0) -> float:
        return self._rss(self.model(x, c0)[0])

    def _rss(self, predicted: np.ndarray) -> float:
        return float(np.sum((predicted / self.t - 1.0) ** 2))

    def bic(self, fit) -> float:
        """``n log(RSS/n) + k log n`` with ``k`` the winning tiles (+ ``c_0``); RSS/n is floored at
        1e-24 so that exact fits compare by ``k``. Kept per ``(x, c_0)``: the search compares the
        same fits again."""
        rss, x, c0 = fit
        key = (x.tobytes(), c0)
        if key not in self._bics:
            k = np.unique(self.model(x, c0)[1]).size + int(self.overhead)
            n = self.t.size
            self._bics[key] = n * math.log(max(rss / n, 1e-24)) + k * math.log(n)
        return self._bics[key]

    def alternate(self, x0: np.ndarray, max_iter: int = 100) -> tuple[float, np.ndarray, float]:
        """Alternate fastest-tile assignment and bounded linear least squares; the best (RSS, x, c_0).

        The least squares of an assignment depends on the assignment alone (its design, bounds and
        target), so it is solved once per problem and kept (:meth:`_solve`); each iterate is
        evaluated once, for its RSS and for the next assignment.
        """
        x, c0 = self.admissible(x0.copy()), 0.0
        time, arg, tile = self.evaluate(x, c0)
        best = (self._rss(time), x.copy(), c0)
        seen: set[bytes] = set()
        ts = self.t_star
        for _ in range(max_iter):
            key = np.where(arg == self.k_l2, x.size + tile, arg).tobytes()  # L2 points by their tile
            if key in seen:
                break
            seen.add(key)
            active = np.unique(arg) if ts is None else np.union1d(arg, [ts])
            sol = self._solve(key, arg, tile, active)
            x[active] = sol[:active.size] * self.x_ref[active]
            if ts is not None:
                tiles = active[(active < self.n_tiles) & (active != ts)]
                x[tiles] += self.ratio[tiles] * x[ts]
            x = self.admissible(x)
            c0 = float(sol[-1] * self.c_ref) if self.overhead else 0.0
            time, arg, tile = self.evaluate(x, c0)
            if (rss := self._rss(time)) < best[0]:
                best = (rss, x.copy(), c0)
        return best

    def _solve(self, key: bytes, arg: np.ndarray, tile: np.ndarray, active: np.ndarray) -> np.ndarray:
        """The bounded least squares of one assignment (``arg``, ``tile``, with the tiles ``active``),
        in units of ``x_ref`` (and ``c_ref`` for ``c_0``); kept under ``key``."""
        if key in self._solved:
            return self._solved[key]
        ts, rows = self.t_star, np.arange(self.t.size)
        design = np.zeros((self.t.size, active.size + self.overhead))
        feature = self.count * self.features(arg, tile)
        design[rows, np.searchsorted(active, arg)] = feature * self.x_ref[arg]
        lower = np.r_[self.x_min[active] / self.x_ref[active], np.zeros(int(self.overhead))]
        if ts is not None:  # a capped tile's x_k = ratio_k x_t* + y_k, y_k >= 0: its column is y_k
            capped = (arg < self.n_tiles) & (arg != ts)
            j = int(np.searchsorted(active, ts))
            design[rows[capped], j] += feature[capped] * self.ratio[arg[capped]] * self.x_ref[ts]
            lower[:active.size][(active < self.n_tiles) & (active != ts)] = 0.0
        if self.overhead:
            design[:, -1] = self.count * self.c_ref
        self._solved[key] = _bounded_lsq(design / self.t[:, None], np.ones(self.t.size), lower)
        return self._solved[key]

    def starts(self, n_random: int, seed: int) -> list[np.ndarray]:
        per_gemm = self.t / self.count
        grid = np.linspace(0.0, per_gemm.min(), 16, endpoint=False) if self.overhead else [0.0]
        envelopes = [np.max((per_gemm - c)[:, None] / self.pairs, axis=0) for c in grid]
        if self.traffic is not None:
            envelopes = [np.r_[env, self.x_ref[-1]] for env in envelopes]
        if self.floor:  # tiles from their envelope, the floor (and L2) at their references
            for env in envelopes:
                env[self.n_tiles] = self.x_ref[self.n_tiles]
        rng = np.random.default_rng(seed)
        spread = math.log(4.0)
        random = [self.x_ref * np.exp(rng.uniform(-spread, spread, self.x_ref.size)) for _ in range(n_random)]
        return [self.x_ref.copy(), *envelopes, *random]

    def moves(self, fit) -> list[np.ndarray]:
        """Starting points that let one idle tile win its best points, or retire one winner."""
        _, x, c0 = fit
        _, arg, tile = self.evaluate(x, c0)
        won = np.unique(arg)
        m = self.tile_min(x, won)
        out = []
        for k in range(x.size):
            x0 = x.copy()
            if k == self.k_l2 and k not in won:  # L2: bind at the most favourable point, or at a tenth
                ratio = m / self.traffic[np.arange(m.size), tile]
                out.append(x0.copy())
                out[-1][k] = float(np.quantile(ratio, 0.1))
                x0[k] = float(np.min(ratio)) * (1 + 1e-3)
            elif k == self.k_l2:  # retire it
                x0[k] *= 1e-3
            elif k == self.n_tiles:  # the floor: make it bind at its most favourable point, or retire it
                x0[k] = float(np.min(m / self.pairs[:, k])) * (1 + 1e-3) if k not in won else x0[k] * 1e-3
            elif k not in won:
                x0[k] = float(np.max(m / self.pairs[:, k])) * (1 - 1e-3)
            elif won.size > 1 and k != self.t_star:  # a kept t* caps every tile: not retired
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


__all__ = [
    "GemmData",
    "GemmProblem",
    "gemm_bytes",
    "gemm_model",
    "peak_tile_time",
    "tile_pairs",
    "tile_traffic",
]
