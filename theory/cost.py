"""The tile-based batch execution time model, Eq. 2-7, vectorized over numpy arrays.

Notation (Section 3): a batch ``B`` holds prefill iterations ``PI(R_j, i_j, c_j)`` (prompt tokens
``i_j .. i_j + c_j - 1``) and decode iterations ``DI(R_j, i_j)`` (token position ``i_j``); its token
count is ``tau = sum_j c_j + #decodes``. Its execution time is Eq. 7::

    T_B = ceil(tau / t_col) / mu_Lin(t) + tau / mu_nLin + N sum_{decodes} T^{D,SA}(i_j)
          + N / (s mu(t)) sum_{prefills} ( ceil((i_j+c_j-1)/t_row) ceil(c_j/t_col) d/t_red
                                         + d/t_row ceil(c_j/t_col) ceil((i_j+c_j-1)/t_red) )

Tiles. Every GeMM takes the tile of the GPU's set that makes it fastest (ties go to t*), which is
what a GeMM library's heuristic approximates; the paper's Eq. 7 writes one common tile, which is the
special case where that tile is best for every GeMM (it is, for RAD's batches: Section 4.2). The
linear GeMMs share the token dimension, so they share their best tile (Section 3.2.1).

Terms beyond Eq. 2 (memory floor, waves, a literature law, LM head on output rows, tensor
parallelism, attention off) are options of the GPU and model profiles, documented in
:mod:`theory.terms`; all off (the presets) this module computes Eq. 2-7 along the same code paths
as before they existed. With terms on, ``T_Lin`` is the linear time of
:class:`theory.linear_terms.LinearTerms`,
``T_P_SA``'s GeMMs take waves with ``attention_waves``, attention may be 0, and each scheduled
request row pays the vocab projection ``lm_out_s``.

Eq. 5 as printed drops the ``1/s`` that Eq. 3 carries; here ``T^{D,SA}`` is the sum of the two
Eq. 3 GeMVs, ``1/(s mu(t_row, t_col))`` included, so that mu stays a per-SM rate (the
``paper_checks`` report lists this as an erratum).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7 and Section 3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from theory import added_time
from theory.cost_model import CostModel, build_cost_model
from theory.engine_terms import frontend_s, pad_tokens, with_frontend
from theory.errors import FieldError
from theory.linear_terms import LinearTerms
from theory.measured import MeasuredLinear, interpolate_by_shape
from theory.moe import MoETerms
from theory.terms import LinearLaw, ceil_div
from theory.tp_split import allreduce_time, shard_memory


def T_GeMM(d_row, d_col, d_red, t_row, t_col, t_red, mu, s):
    """GeMM time, Eq. 2: ceil(d_row/t_row) ceil(d_col/t_col) ceil(d_red/t_red) / (s mu).

    All arguments broadcast as numpy arrays.

    Implements Eq. 2.

    References
    ----------
    Eq. 2.
    """
    tiles = ceil_div(d_row, t_row) * ceil_div(d_col, t_col) * ceil_div(d_red, t_red)
    return tiles / (np.asarray(s, dtype=float) * np.asarray(mu, dtype=float))


def T_GeMM_waves(d_row, d_col, d_red, t_row, t_col, t_red, mu, s):
    """Eq. 2 with wave quantization: ceil(ceil(d_row/t_row) ceil(d_col/t_col) / s) ceil(d_red/t_red) / mu.

    The output tiles are dealt to the ``s`` SMs in waves; each SM runs its tile's
    ``ceil(d_red/t_red)`` reduction steps, and the last, partial wave lasts as long as a full one.

    References
    ----------
    Eq. 2; NVIDIA, "Matrix Multiplication Background User's Guide", section "Wave Quantization".
    """
    out = ceil_div(d_row, t_row) * ceil_div(d_col, t_col)
    return ceil_div(out, s) * ceil_div(d_red, t_red) / np.asarray(mu, dtype=float)


def T_GeMM_l2(d_row, d_col, d_red, t_row, t_col, bytes_per_element, l2_bandwidth):
    """Operand traffic of a tiled GeMM through L2 over its bandwidth:
    ``b ceil(d_row/t_row) ceil(d_col/t_col) (t_row + t_col) d_red / B_L2``.

    References
    ----------
    :mod:`theory.terms` (``l2_bandwidth_gbs``); NVIDIA CUTLASS ``media/docs/efficient_gemm.md``.
    """
    tiles = ceil_div(d_row, t_row) * ceil_div(d_col, t_col)
    per_tile = bytes_per_element * (np.asarray(t_row) + np.asarray(t_col)) * np.asarray(d_red, dtype=float)
    return tiles * per_tile / float(l2_bandwidth)


def T_GeMM_terms(cm: CostModel, d_row, d_col, d_red) -> np.ndarray:
    """One GeMM ``(d_row x d_red) . (d_red x d_col)`` on the GPU of ``cm`` with its GPU-side terms.

    Each tile's Eq. 2 time (:func:`T_GeMM_waves` with ``waves``; at least :func:`T_GeMM_l2` with
    ``l2_bandwidth_gbs``), at least
    ``b (d_row d_red + d_col (d_row + d_red)) / (eta_mem B)`` with ``memory_floor`` (at FP8 the
    weights and inputs at one byte, the outputs at two: :mod:`theory.precision`), on the fastest
    of the GPU's tiles, plus ``gemm_overhead_s``; with the terms off this is Eq. 2 on the fastest
    tile. With ``gemm_profile``, a GeMM whose shape has a measured table and whose ``d_col`` lies
    in its range takes the interpolated measured time instead (:mod:`theory.measured`).
    Arguments broadcast.
    The linear time of a batch (:func:`T_Lin`) is the sum of these over its GeMMs on one shared
    tile; this per-GeMM form is what per-GeMM measurements are compared with.

    References
    ----------
    Eq. 2; :mod:`theory.terms` (memory floor, wave quantization).
    """
    d_row, d_col, d_red = (np.asarray(x, dtype=np.int64)[..., None] for x in (d_row, d_col, d_red))
    gt = cm.gpu.terms
    law = T_GeMM_waves if gt.waves else T_GeMM
    out = law(d_row, d_col, d_red, cm.t_row, cm.t_col, cm.t_red, cm.mu, cm.s)
    if gt.l2_bandwidth is not None:
        out = np.maximum(out, T_GeMM_l2(d_row, d_col, d_red, cm.t_row, cm.t_col,
                                        cm.model.bytes_per_element, gt.l2_bandwidth))
    out = out.min(axis=-1)
    if gt.memory_floor:  # weights and inputs at the model's precision, outputs at the activations'
        b, wb = gt.bytes_per_element, cm.model.bytes_per_element
        n_bytes = (wb * d_red * (d_row + d_col) + b * d_col * d_row)[..., 0].astype(float)
        out = np.maximum(out, n_bytes / (cm.gpu.eta_mem * cm.gpu.bandwidth))
    out = out + gt.gemm_overhead_s
    if cm.lin is not None and cm.lin.measured is not None:
        d_row, d_col, d_red = np.broadcast_arrays(d_row[..., 0], d_col[..., 0], d_red[..., 0])
        out = np.array(np.broadcast_to(out, d_row.shape), dtype=float)
        interpolate_by_shape(cm.lin.measured.by_shape, d_row, d_red, d_col, out)
    return out


def linear_law_name(cm: CostModel) -> str:
    """Which law priced the linear GeMMs of ``cm``, in words (``llmq bounds``)."""
    if cm.lin is not None and cm.lin.law is not None:
        law = cm.lin.law
        return f"{law.kind} law c + a ceil(tau / b0) (c = {law.c:g} s, a = {law.a:g} s, b0 = {law.b0})"
    if cm.lin is not None and cm.lin.measured is not None:
        return cm.lin.measured.describe()
    return "tile model (Eq. 2 on the fastest tile, with the GPU's cost terms)"


def T_GeMV(d_row, d_col, t_row, t_col, mu, s):
    """GeMV time, Eq. 3: ceil(d_row/t_row) ceil(d_col/t_col) / (s mu).

    Implements Eq. 3.

    References
    ----------
    Eq. 3.
    """
    tiles = ceil_div(d_row, t_row) * ceil_div(d_col, t_col)
    return tiles / (np.asarray(s, dtype=float) * np.asarray(mu, dtype=float))




def _as_counts(name: str, x, minimum: int = 0) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        elif arr.size:
            raise FieldError(name, x, "integer token counts")
        else:
            arr = arr.astype(np.int64)
    if arr.size and arr.min() < minimum:
        raise FieldError(name, int(arr.min()), f"integers >= {minimum}")
    return arr.astype(np.int64)


def _min_over(values_per_tile) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise minimum over an iterable of per-tile arrays; ties keep the earliest tile."""
    best = arg = None
    for k, v in enumerate(values_per_tile):
        if best is None:
            best = np.array(v, dtype=float, copy=True)
            arg = np.zeros(best.shape, dtype=np.int64)
            continue
        better = v < best
        best = np.where(better, v, best)
        arg = np.where(better, k, arg)
    return best, arg


_STACKED_MAX = 1 << 16  # values of a tiles x inputs table computed at once; larger inputs go tile by tile


def _least_over_tiles(values_of, n_tiles: int, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise minimum over tiles ``0..n_tiles-1`` of ``values_of(k)`` and the tile reaching it;
    ties keep the earliest tile.

    ``values_of`` takes an integer array ``k`` of tile positions shaped ``(m, 1, ...)`` (one axis per
    dimension of ``shape``) and returns the values of those tiles stacked along axis 0, each of
    ``shape``. Small inputs take every tile in one call (a numpy call per formula instead of one per
    tile); large ones one tile at a time (bounded memory). Either way :func:`_min_over` picks the
    tile, so both give the same floats and the same tie-break.
    """
    axes = (1,) * len(shape)
    if n_tiles * math.prod(shape) <= _STACKED_MAX:
        return _min_over(np.asarray(values_of(np.arange(n_tiles).reshape((-1, *axes))), dtype=float))
    return _min_over(np.asarray(values_of(np.full((1, *axes), k)), dtype=float)[0] for k in range(n_tiles))


def T_Lin(cm: CostModel, tau, tile: int | None = None, return_tile: bool = False):
    """Linear-layer time of a batch of ``tau`` tokens, Eq. 4: ceil(tau / t_col) / mu_Lin(t).

    Implements Eq. 4.

    Parameters
    ----------
    cm : CostModel
    tau : array_like of int
        Token counts (>= 0; tau = 0 costs 0).
    tile : int, optional
        Index of the tile to use; by default the fastest tile for each ``tau``.
    return_tile : bool
        Also return the index of the tile used.

    With terms on (:mod:`theory.terms`) it is the linear time :class:`LinearTerms` describes, or
    the literature law, which ignores ``tile``; with ``cudagraph_capture_sizes`` it is taken at the
    padded token count (:func:`theory.engine_terms.pad_tokens`).

    References
    ----------
    Eq. 4 (with mu_Lin from the per-layer GeMMs of Section 3.2.1).
    """
    tau = pad_tokens(cm.gpu.terms.cudagraph_capture_sizes, _as_counts("tau", tau))
    if cm.lin is not None:
        return _T_Lin_terms(cm, tau, tile, return_tile)
    inv = 1.0 / cm.mu_Lin
    if tile is not None:
        out, arg = inv[tile] * ceil_div(tau, cm.t_col[tile]), np.full(tau.shape, tile)
    else:
        t_col = np.asarray(cm.t_col)
        out, arg = _least_over_tiles(lambda k: inv[k] * ceil_div(tau, t_col[k]), len(cm.tiles), tau.shape)
    return (out, arg) if return_tile else out


def _T_Lin_terms(cm: CostModel, tau: np.ndarray, tile: int | None, return_tile: bool):
    lt = cm.lin
    if lt.law is not None:
        out, arg = lt.law.time(tau), np.zeros(tau.shape, dtype=np.int64)
    else:
        ks = range(len(cm.tiles)) if tile is None else [tile]
        covered = None if lt.measured is None else lt.measured.covered(tau)
        out, arg = _min_over(lt.per_tile(tau, k, int(cm.t_col[k]), float(cm.mu[k]), cm.s, covered)
                             for k in ks)
        if tile is not None:
            arg = np.full(tau.shape, tile)
        if covered is not None:
            out = out + lt.measured.time(tau, covered)
        if lt.moe is not None:
            out = out + lt.moe.time(np.maximum(tau, 1)).reshape(np.shape(out))
        out = np.where(tau > 0, out + lt.tok_s * tau + lt.batch_s, 0.0)
    return (out, arg) if return_tile else out


def linear_per_token(cm: CostModel) -> float:
    """``l* = inf_tau T_Lin(tau) / tau``: the least linear time per token (Theorem 1's rate).

    Eq. 4: ``1 / (mu_Lin(t*) t*_col)``. With terms: ``a / b0`` for the staircase law, else the
    minimum over tiles of the per-column limit of :meth:`LinearTerms.per_token_limit` plus the
    per-token all-reduce and gather time (per-batch times are amortized away). With a measured
    profile (``gemm_profile``) the minimum of that tile-model ``l*``, which bounds ``L(tau) / tau``
    past the largest measured token count (every GeMM is the tile model's there), and of
    ``L(tau) / tau`` at every token count ``1 .. tau_max`` of the tables (:mod:`theory.terms`,
    "Theorem 1's inputs").
    """
    if cm.lin is None:
        return float(1.0 / (cm.mu_Lin[0] * cm.t_col[0]))
    if cm.lin.law is not None:
        return cm.lin.law.per_token_min
    tile_l = min(cm.lin.per_token_limit(k, int(cm.t_col[k]), float(cm.mu[k]), cm.s)
                 for k in range(len(cm.tiles))) + cm.lin.tok_s
    if cm.lin.moe is not None:  # the routed experts on their own tiles (theory.moe)
        tile_l += cm.lin.moe.per_token_limit()
    if cm.lin.measured is None or not cm.lin.measured.tau_max:
        return tile_l
    tau = np.arange(1, cm.lin.measured.tau_max + 1)
    return min(tile_l, float(np.min(T_Lin(cm, tau) / tau)))


def linear_single(cm: CostModel) -> float:
    """The linear time of a one-token batch on the worst tile: Eq. 13's ``max_t 1/mu_Lin(t)`` (with
    a measured profile, ``L(1)``: the measured one-token times, and the worst tile for a GeMM no
    table covers)."""
    if cm.lin is None:
        return float(np.max(1.0 / cm.mu_Lin))
    if cm.lin.law is not None:
        return float(cm.lin.law.time(1))
    return max(float(T_Lin(cm, 1, tile=k)) for k in range(len(cm.tiles)))


def one_token_batch_rest(cm: CostModel) -> float:
    """What a batch of one token pays in Eq. 7 besides its linear layers and its attention:
    ``1/mu_nLin``, the profile's fixed time per batch (:attr:`CostModel.fixed_s`) and, with
    ``lm_head``, one vocab-projection row (:func:`T_batch` of a one-token batch, less ``T_Lin(1)``
    and the attention). Eq. 13 charges it to each of T^max's one-token iterations.

    References
    ----------
    Eq. 7; Eq. 13.
    """
    return 1.0 / cm.mu_nLin + cm.fixed_s + cm.lm_out_s


def T_D_SA(cm: CostModel, i):
    """Decode self-attention time of one layer at token position ``i``, Eq. 5.

    ``(d/t_col) ceil(i/t_row) + ceil(i/t_col) (d/t_row)`` GeMV tiles, each GeMV on its fastest
    tile, divided by ``s mu(t_row, t_col)`` as Eq. 3 prescribes.

    Implements Eq. 5.

    References
    ----------
    Eq. 5 (derived from Eq. 3; the printed Eq. 5 omits 1/s).
    """
    i = _as_counts("i", i, minimum=1)
    if not cm.attention:
        return np.zeros(i.shape)
    d = cm.d_dec
    g_row, g_col, mu = (np.asarray(x) for x in (cm.g_row, cm.g_col, cm.mu_gemv))
    first, _ = _least_over_tiles(lambda k: T_GeMV(i, d, g_row[k], g_col[k], mu[k], cm.s), len(mu), i.shape)
    second, _ = _least_over_tiles(lambda k: T_GeMV(d, i, g_row[k], g_col[k], mu[k], cm.s), len(mu), i.shape)
    return first + second


def T_D_SA_mixed(cm: CostModel, i):
    """Decode self-attention of one layer at position ``i`` in a batch that also holds a prefill
    chunk: ``eta T^{D,SA}(i)`` at the query heads' width ``d_pre`` (``mixed_decode_eta``,
    :mod:`theory.terms`); Eq. 5 (:func:`T_D_SA`) when the term is off.

    References
    ----------
    Eq. 5; :mod:`theory.terms` (``mixed_decode_eta``: FlashAttention's varlen path).
    """
    if not cm.mixed_decode_eta:
        return T_D_SA(cm, i)
    return cm.mixed_decode_eta * T_D_SA(replace(cm, d_dec=cm.d_pre), i)


def T_D_SA_least(cm: CostModel, i):
    """The least decode self-attention of one layer at position ``i`` over the batches a decode
    may join: ``min(T^{D,SA}(i), T^{D,SA}_mix(i))`` (:func:`T_D_SA`, :func:`T_D_SA_mixed`); Eq. 5
    when ``mixed_decode_eta`` is off. Theorem 1's least work takes it (:mod:`theory.terms`)."""
    alone = T_D_SA(cm, i)
    return np.minimum(alone, T_D_SA_mixed(cm, i)) if cm.mixed_decode_eta else alone


def T_P_SA(cm: CostModel, i, c, tile: int | None = None, return_tiles: bool = False):
    """Prefill self-attention time over all N layers of chunk ``PI(R, i, c)``, Eq. 6.

    The two GeMMs are ``K^T Q`` (output ``(i+c-1) x c``, reduction ``d``) and ``V P`` (output
    ``d x c``, reduction ``i+c-1``); each takes its fastest tile unless ``tile`` is given.
    ``return_tiles`` also returns the tile indices the two GeMMs use. With ``attention_waves``
    each GeMM is :func:`T_GeMM_waves`; without attention the time is 0.

    Implements Eq. 6.

    References
    ----------
    Eq. 6.
    """
    i = _as_counts("i", i, minimum=1)
    c = _as_counts("c", c, minimum=1)
    if not cm.attention:
        zero = np.zeros(np.broadcast(i, c).shape)
        idx = np.zeros(zero.shape, dtype=np.int64)
        return (zero, idx, idx) if return_tiles else zero
    e = i + c - 1
    d = cm.d_pre
    ks = list(range(len(cm.tiles))) if tile is None else [tile]
    law = T_GeMM_waves if cm.attention_waves else T_GeMM
    t_row, t_col, t_red, mu = (np.asarray(x)[ks] for x in (cm.t_row, cm.t_col, cm.t_red, cm.mu))

    def gemm(rows, red):
        return lambda k: law(rows, c, red, t_row[k], t_col[k], t_red[k], mu[k], cm.s)

    qk, k_qk = _least_over_tiles(gemm(e, d), len(ks), np.shape(e))
    pv, k_pv = _least_over_tiles(gemm(d, e), len(ks), np.shape(e))
    if tile is not None:
        k_qk, k_pv = np.full(k_qk.shape, tile), np.full(k_pv.shape, tile)
    return (cm.N * (qk + pv), k_qk, k_pv) if return_tiles else cm.N * (qk + pv)


@dataclass(frozen=True)
class Batch:
    """A batch: prefill chunks ``(i_j, c_j)`` and decode positions ``i_j`` (Section 3.1)."""

    prefill_i: np.ndarray
    prefill_c: np.ndarray
    decode_i: np.ndarray

    @classmethod
    def of(cls, prefill=(), decode=()) -> Batch:
        """Build from ``prefill=[(i, c), ...]`` and ``decode=[i, ...]``, validating the fields."""
        pre = np.asarray(list(prefill))
        if pre.size and (pre.ndim != 2 or pre.shape[1] != 2):
            raise FieldError("prefill", prefill, "pairs (i, c)")
        pre = pre.reshape(-1, 2)
        pi = _as_counts("prefill i", pre[:, 0], minimum=1)
        pc = _as_counts("prefill c", pre[:, 1], minimum=1)
        di = _as_counts("decode i", list(decode), minimum=1)
        return cls(pi, pc, di)

    @property
    def tau(self) -> int:
        """Token count tau_m = b^D + sum_j c_j (Section 3.2.1)."""
        return int(self.prefill_c.sum()) + int(self.decode_i.size)


def T_batch(cm: CostModel, batch: Batch) -> float:
    """Batch execution time T_B, Eq. 7 (plus the profile's fixed time per batch, ``overhead_s`` and
    ``N attention_call_s``, 0 by default, and with ``lm_head`` the vocab projection of one row per
    decode and per prefill chunk). With ``mixed_decode_eta`` the decodes of a batch that holds a
    prefill chunk take :func:`T_D_SA_mixed`. The added-time terms add their per-batch time through
    :attr:`CostModel.fixed_s` and their per-decode time per decode (:mod:`theory.added_time`).

    Implements Eq. 7.

    References
    ----------
    Eq. 7.
    """
    tau = batch.tau
    if tau == 0:
        return 0.0
    t = float(T_Lin(cm, tau)) + tau / cm.mu_nLin + cm.fixed_s
    if batch.decode_i.size:
        law = T_D_SA_mixed if batch.prefill_i.size else T_D_SA
        t += cm.N * float(law(cm, batch.decode_i).sum())
    if batch.prefill_i.size:
        t += float(T_P_SA(cm, batch.prefill_i, batch.prefill_c).sum())
    if cm.lm_out_s:
        t += cm.lm_out_s * (batch.decode_i.size + batch.prefill_i.size)
    if cm.added and batch.decode_i.size:
        t += float(added_time.decode_s(cm, batch.decode_i).sum())
    return t


def chosen_tiles(cm: CostModel, batch: Batch) -> dict:
    """The tile every GeMM of ``batch`` runs on: the fastest of the GPU's set, ties to t*.

    Returns ``{"linear": Tile, "prefill": [(K^T Q tile, V P tile) per chunk]}``: the linear GeMMs
    share one tile (Section 3.2.1); each prefill chunk has its two attention GeMMs (Eq. 6).
    """
    _, k_lin = T_Lin(cm, max(batch.tau, 1), return_tile=True)
    out = {"linear": cm.tiles[int(k_lin)], "prefill": []}
    if batch.prefill_i.size:
        _, k_qk, k_pv = T_P_SA(cm, batch.prefill_i, batch.prefill_c, return_tiles=True)
        out["prefill"] = [(cm.tiles[int(a)], cm.tiles[int(b)]) for a, b in zip(k_qk, k_pv, strict=True)]
    return out


def tiling_efficiency(cm: CostModel, batch: Batch) -> float:
    """Ideal / actual time of the batch's GeMMs (linear and prefill attention), in (0, 1].

    The ideal time runs the useful FLOPs at t*'s rate with no padding; 1 means every GeMM of the
    batch was optimally tiled (Section 4.2), and ``1 - efficiency`` is the wasted tile fraction.
    """
    tau = batch.tau
    if tau == 0:
        return 1.0
    peak = 2.0 * cm.s * cm.mu[0] * cm.t_row[0] * cm.t_col[0] * cm.t_red[0]
    lin_flops = cm.model.linear_flops_per_token(cm.mode) * tau
    actual = float(T_Lin(cm, tau))
    useful = lin_flops
    if batch.prefill_i.size:
        e = batch.prefill_i + batch.prefill_c - 1
        useful += float((4.0 * cm.N * cm.d_pre * e * batch.prefill_c).sum())
        actual += float(T_P_SA(cm, batch.prefill_i, batch.prefill_c).sum())
    return min(1.0, useful / peak / actual)


# --- Tables for the simulator -------------------------------------------------------------


def linear_table(cm: CostModel, tau_max: int) -> np.ndarray:
    """``T_Lin(tau)`` for tau = 0..tau_max (Eq. 4), so a batch costs one lookup."""
    tau = np.arange(tau_max + 1)
    out = T_Lin(cm, np.maximum(tau, 1))
    out[0] = 0.0
    return out


def decode_prefix(cm: CostModel, max_pos: int, law: str = "alone") -> np.ndarray:
    """Prefix sums ``S(k) = sum_{i<=k} T^{D,SA}(i)`` for k = 0..max_pos (Eq. 5), S(0) = 0.

    A run of decode batches over positions ``a+1 .. b`` of one request costs ``N (S(b) - S(a))``
    of attention: O(1) per query after O(max_pos) set-up. ``law`` picks the per-position time:
    ``"alone"`` Eq. 5 (:func:`T_D_SA`), ``"mixed"`` a decode beside a prefill chunk
    (:func:`T_D_SA_mixed`), ``"least"`` the smaller of the two (:func:`T_D_SA_least`); the three
    are Eq. 5 when ``mixed_decode_eta`` is off.
    """
    laws = {"alone": T_D_SA, "mixed": T_D_SA_mixed, "least": T_D_SA_least}
    if law not in laws:
        raise FieldError("law", law, "one of " + ", ".join(map(repr, laws)))
    out = np.zeros(max_pos + 1)
    if max_pos:
        np.cumsum(laws[law](cm, np.arange(1, max_pos + 1)), out=out[1:])
    return out


def chunked_prefill_time(cm: CostModel, L_P, chunk: int) -> np.ndarray:
    """Time to prefill prompts of length ``L_P`` alone, in chunks of ``chunk`` tokens (Alg. 1).

    Each chunk ``PI(R, i, min(chunk, L_P - i + 1))`` runs as a batch by itself, so this is a sum of
    Eq. 7 over the chunks: RAD's prefill time, a function of L^P alone (Algorithm 1, lines 12-16).
    """
    L_P = _as_counts("L_P", L_P, minimum=1)
    if isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1:
        raise FieldError("chunk", chunk, "an integer >= 1")
    full = L_P // chunk
    rest = L_P - full * chunk
    k_max = int(full.max(initial=0))
    starts = 1 + chunk * np.arange(k_max)
    per_chunk = (float(T_Lin(cm, chunk)) + chunk / cm.mu_nLin + cm.fixed_s
                 + T_P_SA(cm, starts, np.full(k_max, chunk)) + cm.lm_out_s)
    cum = np.concatenate([[0.0], np.cumsum(per_chunk)])
    out = cum[full]
    has_rest = rest > 0
    if has_rest.any():
        i_last = 1 + full[has_rest] * chunk
        c_last = rest[has_rest]
        out = out.copy()
        out[has_rest] += (T_Lin(cm, c_last) + c_last / cm.mu_nLin + cm.fixed_s
                          + T_P_SA(cm, i_last, c_last) + cm.lm_out_s)
    return out



# Where Eq. 2-7 take each cost term of theory.cost_terms (an added-time term is priced through the
# slots of theory.added_time, where its formula is registered, and is not listed here).
NUMERIC_TERMS: dict[str, tuple] = {
    "memory_floor": (T_GeMM_terms, LinearTerms.per_tile, LinearTerms.per_token_limit),
    "waves": (T_GeMM_terms, T_GeMM_waves, LinearTerms.per_tile),
    "attention_waves": (T_P_SA, T_GeMM_waves),
    "l2_bandwidth_gbs": (T_GeMM_terms, T_GeMM_l2, LinearTerms.per_tile, LinearTerms.per_token_limit),
    "overhead_s": (CostModel.base_fixed_s, T_batch, chunked_prefill_time, one_token_batch_rest),
    "gemm_overhead_s": (T_GeMM_terms, build_cost_model, T_Lin),
    "attention_call_s": (CostModel.base_fixed_s,),
    "mixed_decode_eta": (T_D_SA_mixed, T_D_SA_least, T_batch, decode_prefix),
    "linear_law": (LinearLaw.time, T_Lin, linear_per_token, linear_single),
    "gemm_profile": (T_GeMM_terms, MeasuredLinear.time, T_Lin, linear_per_token, linear_single),
    "tp": (build_cost_model, allreduce_time, shard_memory),
    "attention": (T_D_SA, T_P_SA),
    "lm_head": (build_cost_model, T_batch, one_token_batch_rest, chunked_prefill_time),
    "moe": (build_cost_model, MoETerms.time, T_Lin, linear_per_token),
    "ep": (build_cost_model, MoETerms.time, MoETerms.per_token_limit, shard_memory),
    "cudagraph_capture_sizes": (pad_tokens, T_Lin),
    "frontend_s": (frontend_s, with_frontend),
}

__all__ = [
    "NUMERIC_TERMS",
    "T_D_SA",
    "T_P_SA",
    "Batch",
    "CostModel",
    "T_D_SA_least",
    "T_D_SA_mixed",
    "T_GeMM",
    "T_GeMM_l2",
    "T_GeMM_terms",
    "T_GeMM_waves",
    "T_GeMV",
    "T_Lin",
    "T_batch",
    "build_cost_model",
    "chosen_tiles",
    "chunked_prefill_time",
    "decode_prefix",
    "linear_law_name",
    "linear_per_token",
    "linear_single",
    "linear_table",
    "one_token_batch_rest",
    "tiling_efficiency",
]
