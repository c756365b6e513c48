"""Minimum prefill-attention cost over all chunkings of a prompt (Appendix B.1, Eq. 6, Eq. 10-12).

A prompt of length ``L`` is prefilled by chunks ``PI(R, i, c)`` that partition ``1..L`` (Definition
1). Chunk ``(i, c)`` ends at ``e = i + c - 1`` and its self-attention costs (Eq. 6, at tile t)::

    N d / (s mu(t) t_row t_red) * ceil(c / t_col) * (t_row ceil(e / t_row) + t_red ceil(e / t_red))

when ``d`` is divisible by ``t_row`` and ``t_red`` (Section 3.2.1). We count costs in *S-units*,
``S = N d / (s mu(t*) t*_row t*_col t*_red)``: the prefactor of the last term of Eq. 12, whose
closed form is ``S L (L + t*_lcm)``. In S-units

* at tile t a chunk costs ``rho_t * q_t(e, c)`` with the integer
  ``q_t(e, c) = t_col ceil(c/t_col) (t_row ceil(e/t_row) + t_red ceil(e/t_red))`` and
  ``rho_t = mu(t*) |t*| / (mu(t) |t|)`` (``|t| = t_row t_col t_red``; ``rho_{t*} = 1``);
* without ceilings (the relaxation of Eq. 10 (a)) a chunk costs ``rho_t * 2 e c``;
* Eq. 12's closed form is ``L (L + t*_lcm)``.

So at t* everything is an exact integer and independent of the model (``N``, ``d``) and of
``mu``. One dynamic programme over chunk boundaries gives the minimum for every ``L <= L_max`` at
once: ``f(0) = 0``, ``f(e) = min_{0 <= b < e} f(b) + cost(b + 1, e - b)``, vectorised over ``b``.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 6, Eq. 10-12 and the chunk set I_j of Appendix B.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from paper_checks.common import t_star_first
from theory.hardware import GPU, Tile, get_gpu


def ceil_div(a, b):
    """Exact integer ceiling of a / b for non-negative integers (arrays allowed)."""
    return -(-np.asarray(a, dtype=np.int64) // b)


def chunk_cost_units(e, c, tile: Tile):
    """``q_t(e, c)``: Eq. 6 of chunk ``(e - c + 1, c)`` at ``tile``, in S-units of that tile (int)."""
    return tile.t_col * ceil_div(c, tile.t_col) * (tile.t_row * ceil_div(e, tile.t_row)
                                                   + tile.t_red * ceil_div(e, tile.t_red))


def closed_form_units(L, tile: Tile):
    """Eq. 12's prefill-attention term ``L (L + t*_lcm)`` in S-units (exact integers)."""
    L = np.asarray(L, dtype=np.int64)
    return L * (L + tile.t_lcm)


def flop_ratios(gpu: GPU, tiles: tuple[Tile, ...]) -> np.ndarray:
    """``rho_t = flop_rate(tiles[0]) / flop_rate(t)`` for each tile (1 for ``tiles[0]``)."""
    return np.array([gpu.flop_rate(tiles[0]) / gpu.flop_rate(t) for t in tiles])


@dataclass(frozen=True)
class ChunkingDP:
    """Minimal chunking costs ``f[L]``, ``L = 0..L_max``, and how to rebuild an optimal chunking.

    Attributes
    ----------
    f : ndarray
        ``f[L]``: minimal cost in S-units (int64 when exact, float64 over several tiles).
    prev : ndarray
        ``prev[e]``: the start ``b`` of the last chunk ``(b + 1, e - b)`` of an optimal chunking.
    tile : ndarray or None
        Over several tiles: ``tile[e]`` = indices of the tiles of the last chunk's two GeMMs
        (``K^T Q``, ``V P``); else None.
    """

    f: np.ndarray
    prev: np.ndarray
    tile: np.ndarray | None = None

    def chunks(self, L: int) -> list[tuple[int, int]]:
        """An optimal chunking of ``1..L`` as ``[(i, c), ...]`` (Definition 1's PI arguments)."""
        out, e = [], int(L)
        while e > 0:
            b = int(self.prev[e])
            out.append((b + 1, e - b))
            e = b
        return out[::-1]

    def tiles_used(self, L: int) -> list[tuple[int, int]]:
        """Tile indices of the two GeMMs of each chunk of :meth:`chunks` (over several tiles)."""
        out, e = [], int(L)
        while e > 0:
            out.append((int(self.tile[e][0]), int(self.tile[e][1])))
            e = int(self.prev[e])
        return out[::-1]


def dp_at_tile(tile: Tile, L_max: int) -> ChunkingDP:
    """Exact minimum over all chunkings of Eq. 6 with ceilings, every GeMM on ``tile`` (S-units).

    References
    ----------
    Eq. 6; Appendix B.1 (the claimed optimal chunk set I_j).
    """
    cc = tile.t_col * ceil_div(np.arange(L_max + 1), tile.t_col)
    f = np.zeros(L_max + 1, dtype=np.int64)
    prev = np.zeros(L_max + 1, dtype=np.int64)
    for e in range(1, L_max + 1):
        h = tile.t_row * ((e + tile.t_row - 1) // tile.t_row) + tile.t_red * ((e + tile.t_red - 1)
                                                                             // tile.t_red)
        total = f[:e] + h * cc[e:0:-1]  # b = 0..e-1, c = e - b
        b = int(np.argmin(total))
        f[e], prev[e] = total[b], b
    return ChunkingDP(f, prev)


def dp_relaxed(L_max: int) -> ChunkingDP:
    """Exact minimum over all chunkings of Eq. 10's ceiling-free prefill attention at t* (S-units).

    A chunk ending at ``e`` of size ``c`` costs ``2 e c``.

    References
    ----------
    Eq. 10 (a)-(b) and the chunk set I_j after it.
    """
    f = np.zeros(L_max + 1, dtype=np.int64)
    prev = np.zeros(L_max + 1, dtype=np.int64)
    for e in range(1, L_max + 1):
        b_all = np.arange(e)
        total = f[:e] + 2 * e * (e - b_all)
        b = int(np.argmin(total))
        f[e], prev[e] = total[b], b
    return ChunkingDP(f, prev)


def dp_over_tiles(tiles: tuple[Tile, ...], rho: np.ndarray, L_max: int) -> ChunkingDP:
    """Minimum over all chunkings of Eq. 6 with ceilings, each GeMM on its fastest tile (S-units).

    ``tiles[0]`` is t*; ``rho`` from :func:`flop_ratios`. A chunk's two GeMMs, ``K^T Q``
    (``e x c``, reduction ``d``) and ``V P`` (``d x c``, reduction ``e``), each take the tile that
    makes them cheapest, as :func:`theory.cost.T_P_SA` does; Eq. 7's single tile per batch can only
    cost more, so this is a lower bound for every schedule of the model.

    References
    ----------
    Eq. 6, Eq. 10 (b) ("replacing the tile by t* lowers the bound").
    """
    n = np.arange(L_max + 1)
    groups = {tc: [k for k, t in enumerate(tiles) if t.t_col == tc]
              for tc in sorted({t.t_col for t in tiles})}
    cc = {tc: tc * ceil_div(n, tc) for tc in groups}
    f = np.zeros(L_max + 1)
    prev = np.zeros(L_max + 1, dtype=np.int64)
    which = np.zeros((L_max + 1, 2), dtype=np.int64)
    for e in range(1, L_max + 1):
        total = f[:e].copy()
        args = []
        for dim in ("t_row", "t_red"):
            best = arg = None
            for tc, ks in groups.items():
                # the chunk size enters only through ceil(c / t_col): per t_col, the best tile is
                # the one minimising rho_t * t_dim * ceil(e / t_dim), a scalar for this e
                scal = [rho[k] * getattr(tiles[k], dim) * ceil_div(e, getattr(tiles[k], dim)) for k in ks]
                j = int(np.argmin(scal))
                v = scal[j] * cc[tc][e:0:-1]
                if best is None:
                    best, arg = v, np.full(e, ks[j])
                else:
                    better = v < best
                    best, arg = np.where(better, v, best), np.where(better, ks[j], arg)
            total += best
            args.append(arg)
        b = int(np.argmin(total))
        f[e], prev[e] = total[b], b
        which[e] = (args[0][b], args[1][b])
    return ChunkingDP(f, prev, which)


# --- cached tables and an explicit schedule ---------------------------------------------------


def dp_range(fast: bool) -> int:
    """Largest prompt length the DP covers: 1024 in the fast run, 8192 (every workload's
    l^P,max after padding, and more than the 4096 the check promises) in the full run."""
    return 1024 if fast else 8192


@cache
def gpu_dp(gpu_key: str, L_max: int) -> tuple[ChunkingDP, ChunkingDP]:
    """(DP at t*, DP over the GPU's whole tile set) up to ``L_max`` for a GPU preset."""
    g = get_gpu(gpu_key)
    tiles = t_star_first(g)
    return dp_at_tile(tiles[0], L_max), dp_over_tiles(tiles, flop_ratios(g, tiles), L_max)


@cache
def relaxed_dp(L_max: int) -> ChunkingDP:
    """:func:`dp_relaxed` up to ``L_max`` (cached)."""
    return dp_relaxed(L_max)


def grouped_schedule(L_P: int, L_D: int, chunks: list[tuple[int, int]],
                     group: int) -> list[tuple[list, list]]:
    """One group of ``group`` identical requests: each prompt prefilled alone in ``chunks``, then
    ``L_D`` batches of ``group`` decode iterations. Returns ``[(prefill, decode), ...]`` batches
    (for :meth:`theory.cost.Batch.of`)."""
    out = [([(i, c)], []) for _ in range(group) for i, c in chunks]
    out += [([], [L_P + k] * group) for k in range(1, L_D + 1)]
    return out
