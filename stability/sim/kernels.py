"""Compiled twins of :mod:`theory.cost` for the simulator's hot loop (Eq. 4-7).

The engine needs batch times millions of times; numpy's per-call overhead would dominate at batch
sizes of a few hundred tokens, so the formulas are written once more as small numba functions over
a :data:`stability.sim.structs.COSTS` record. They choose tiles exactly as :mod:`theory.cost` does (the
fastest tile per GeMM; the linear GeMMs share theirs) and the tests check the two agree.

Terms beyond Eq. 2 (:mod:`theory.terms`) reach the engine through the tables alone: the linear
table and, past it, :func:`t_lin`'s law or :class:`~theory.terms.LinearTerms` loop absorb the
memory floor, waves, tensor-parallel all-reduces, the embedding gather and a literature law (a
measured GeMM profile through the table alone, which then reaches past its last measured token
count); the
decode prefix sums ``S`` and :func:`t_psa` are 0 without attention and carry the vocab projection
of each decode and prefill chunk with ``lm_head``. A decode in a batch that holds a prefill chunk
reads a second prefix table ``Sm`` (``mixed_decode_eta``: :func:`theory.cost.T_D_SA_mixed`), kept
after ``S`` in one array ``S2`` (``Sm`` at offset ``m_off``); with the term off ``Sm`` equals ``S``,
so such batches cost what they did. Apart from that offset for the batches with a chunk, the
engine has no branch for the terms. With terms on, the "wasted" time of a batch is its time above
``tau l*`` (Theorem 1's per-token rate, :func:`theory.cost.linear_per_token`) rather than tile
padding alone.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.experimental import structref

from stability.sim.structs import COSTS, Costs
from theory.cost import CostModel, decode_prefix, linear_per_token, linear_table

LIN_TABLE = 1 << 14  # batches below this many tokens look their linear time up


@njit(cache=True)
def _make_costs(t_row, t_col, t_red, mu, inv_mu_lin, S, S2, lin, pre_time, s, N, d_pre, mu_nLin,
                overhead, lin_ideal, psa_ideal, chunk):
    ct = structref.new(COSTS)
    ct.t_row = t_row
    ct.t_col = t_col
    ct.t_red = t_red
    ct.mu = mu
    ct.inv_mu_lin = inv_mu_lin
    ct.S = S
    ct.S2 = S2
    ct.m_off = S.size
    ct.lin = lin
    ct.pre_time = pre_time
    ct.s = s
    ct.N = N
    ct.d_pre = d_pre
    ct.mu_nLin = mu_nLin
    ct.overhead = overhead
    ct.lin_ideal = lin_ideal
    ct.psa_ideal = psa_ideal
    ct.chunk = chunk
    return ct


@njit(cache=True)
def _set_shifts(ct, row_sh, col_sh, red_sh, pow2):
    ct.row_sh = row_sh
    ct.col_sh = col_sh
    ct.red_sh = red_sh
    ct.pow2 = pow2


def _shifts(cm: CostModel) -> tuple:
    """:func:`_set_shifts`'s arguments: log2 of each tile dimension, and whether all are powers
    of two (CUTLASS's and cuBLAS's tile shapes are)."""
    dims = [np.asarray(x, dtype=np.int64) for x in (cm.t_row, cm.t_col, cm.t_red)]
    pow2 = all(bool(np.all((d > 0) & (d & (d - 1) == 0))) for d in dims)
    sh = [np.round(np.log2(np.maximum(d, 1))).astype(np.int64) for d in dims]
    return (*sh, int(pow2))


@njit(cache=True)
def _set_terms(ct, lin_kind, law_c, law_a, law_b0, g_count, g_rows, g_red, g_wbytes, g_abytes,
               floor_bw, g_traffic, l2_bw, tok_s, batch_s, waves, att, att_waves, lm_out, psa_qk, psa_pv):
    ct.lin_kind = lin_kind
    ct.law_c = law_c
    ct.law_a = law_a
    ct.law_b0 = law_b0
    ct.g_count = g_count
    ct.g_rows = g_rows
    ct.g_red = g_red
    ct.g_wbytes = g_wbytes
    ct.g_abytes = g_abytes
    ct.floor_bw = floor_bw
    ct.g_traffic = g_traffic
    ct.l2_bw = l2_bw
    ct.tok_s = tok_s
    ct.batch_s = batch_s
    ct.waves = waves
    ct.att = att
    ct.att_waves = att_waves
    ct.lm_out = lm_out
    ct.psa_qk = psa_qk
    ct.psa_pv = psa_pv


def _terms_args(cm: CostModel) -> tuple:
    """The term fields of the tables (:func:`_set_terms`'s arguments after ``ct``)."""
    lt = cm.lin
    empty_i, empty_2 = np.zeros(0, dtype=np.int64), np.zeros((len(cm.tiles), 0), dtype=np.int64)
    kind, law_c, law_a, law_b0 = 0, 0.0, 0.0, 1
    g = (empty_i, empty_2, empty_2, np.zeros(0), np.zeros(0))
    traffic = np.zeros((len(cm.tiles), 0))
    floor_bw = l2_bw = tok_s = batch_s = 0.0
    if lt is not None and lt.law is not None:
        kind, law_c, law_a, law_b0 = 1, lt.law.c, lt.law.a, lt.law.b0
    elif lt is not None:
        kind = 2
        g = (lt.count.astype(np.int64), np.ascontiguousarray(lt.rows, dtype=np.int64),
             np.ascontiguousarray(lt.red, dtype=np.int64), lt.wbytes.astype(np.float64),
             lt.abytes.astype(np.float64))
        floor_bw, tok_s, batch_s = float(lt.floor_bw), float(lt.tok_s), float(lt.batch_s)
        traffic, l2_bw = np.ascontiguousarray(lt.traffic, dtype=np.float64), float(lt.l2_bw)
    rate = cm.s * cm.mu.astype(np.float64)
    d = int(cm.d_pre)
    psa_qk = -(-d // cm.t_red.astype(np.int64)) / rate
    psa_pv = -(-d // cm.t_row.astype(np.int64)) / rate
    return (kind, float(law_c), float(law_a), int(law_b0), *g, floor_bw, traffic, l2_bw, tok_s, batch_s,
            int(cm.waves), int(cm.attention), int(cm.attention_waves), float(cm.lm_out_s), psa_qk, psa_pv)


def build_tables(cm: CostModel, max_pos: int, chunk: int | None = None) -> Costs:
    """Cost tables for positions up to ``max_pos`` and whole prefills in chunks of ``chunk``
    (default t*_lcm) of prompts up to ``max_pos`` tokens."""
    t = cm.t_star
    chunk = int(chunk or cm.t_lcm)
    S = decode_prefix(cm, max_pos)
    Sm = decode_prefix(cm, max_pos, law="mixed") if cm.mixed_decode_eta else S
    if cm.lm_out_s:  # each decode's vocab-projection row; the engine multiplies S by N
        rows = np.arange(max_pos + 1) * (cm.lm_out_s / cm.N)
        S, Sm = (S + rows, Sm + rows) if cm.mixed_decode_eta else (S + rows,) * 2
    S2 = np.concatenate([S, Sm])
    lin_ideal = 1.0 / (cm.mu_Lin[0] * t.t_col) if cm.lin is None else linear_per_token(cm)
    psa_ideal = 2.0 * cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)
    ct = _make_costs(
        cm.t_row.copy(), cm.t_col.copy(), cm.t_red.copy(), cm.mu.astype(np.float64),
        (1.0 / cm.mu_Lin).astype(np.float64), S, S2,
        linear_table(cm, _lin_table_size(cm) - 1), np.zeros(max_pos + 1), float(cm.s), float(cm.N),
        int(cm.d_pre), float(cm.mu_nLin), float(cm.fixed_s), float(lin_ideal),
        float(psa_ideal if cm.attention else 0.0), chunk)
    _set_terms(ct, *_terms_args(cm))
    _set_shifts(ct, *_shifts(cm))
    _fill_prefill_table(ct)
    return ct


def _lin_table_size(cm: CostModel) -> int:
    """Entries of the linear table: :data:`LIN_TABLE`, or past every measured token count of a
    ``gemm_profile`` (beyond it every GeMM is the tile model's, which :func:`t_lin` computes)."""
    measured = None if cm.lin is None else cm.lin.measured
    return LIN_TABLE if measured is None else max(LIN_TABLE, measured.tau_max + 1)


@njit(cache=True)
def ceil_div(a, b):
    return -(-a // b)


@njit(cache=True)
def ceil_udiv(a, b):
    """ceil(a / b) for a >= 0, b >= 1, in unsigned arithmetic (half the cost of ``ceil_div``)."""
    return np.int64((np.uint64(a) + np.uint64(b - 1)) // np.uint64(b))


@njit(cache=True)
def _lin_terms(t_col, mu, g_count, g_rows, g_red, g_traffic, g_wbytes, g_abytes, s, waves, l2_bw,
               floor_bw, tok_s, batch_s, tau):
    """:class:`theory.terms.LinearTerms` at ``tau >= 1``, the same operations in the same order
    (the cost tables' fields passed one by one: see :func:`t_lin`)."""
    best = np.inf
    s_i = np.int64(s)
    for k in range(t_col.size):
        cols = ceil_div(tau, t_col[k])
        tot = 0.0
        for g in range(g_count.size):
            out = g_rows[k, g] * cols
            if waves:
                comp = ceil_div(out, s_i) * g_red[k, g] / mu[k]
            else:
                comp = out * g_red[k, g] / (s * mu[k])
            if l2_bw > 0.0:
                m2 = out * g_traffic[k, g] / l2_bw
                if m2 > comp:
                    comp = m2
            if floor_bw > 0.0:
                m = (g_wbytes[g] + g_abytes[g] * tau) / floor_bw
                if m > comp:
                    comp = m
            tot = tot + g_count[g] * comp
        if tot < best:
            best = tot
    return best + tok_s * tau + batch_s


@njit(cache=True)
def _lin_tiles(t_col, inv_mu_lin, tau):
    """Eq. 4 at the fastest tile, past the table."""
    best = np.inf
    for k in range(t_col.size):
        v = inv_mu_lin[k] * ceil_div(tau, t_col[k])
        if v < best:
            best = v
    return best


@njit(cache=True)
def _lin_size(ct):
    return ct.lin.size


@njit(cache=True)
def _lin_at(ct, tau):
    return ct.lin[tau]


@njit(cache=True)
def t_lin(ct, tau):
    """Eq. 4 at the fastest tile: min_t ceil(tau / t_col) / mu_Lin(t); 0 for tau = 0 (or, with
    terms on, the law or the terms' linear time past the table).

    Written for the hot loop: the table is read through one-line helpers and the paths past it
    get the fields they need, not the record. A compiled function that reads a structref's array
    inside a branch, or hands the structref to a callee with loops, pays an atomic reference
    count per call; this way it pays none (measured: ~10 ns a call before).
    """
    if tau < _lin_size(ct):
        return _lin_at(ct, tau)
    if ct.lin_kind == 1:
        return ct.law_c + ct.law_a * ceil_div(tau, ct.law_b0)
    if ct.lin_kind == 2:
        return _lin_terms(ct.t_col, ct.mu, ct.g_count, ct.g_rows, ct.g_red, ct.g_traffic,
                          ct.g_wbytes, ct.g_abytes, ct.s, ct.waves, ct.l2_bw, ct.floor_bw,
                          ct.tok_s, ct.batch_s, tau)
    return _lin_tiles(ct.t_col, ct.inv_mu_lin, tau)


@njit(cache=True)
def t_psa(ct, i, c):
    """Eq. 6 over N layers for PI(R, i, c): each GeMM on its fastest tile (in waves with
    ``attention_waves``), plus the chunk's vocab-projection row with ``lm_head``; 0 + that row without
    attention."""
    if ct.att == 0:
        return ct.lm_out
    e = i + c - 1
    qk = np.inf
    pv = np.inf
    if ct.att_waves:
        d = ct.d_pre
        s_i = np.int64(ct.s)
        for k in range(ct.t_col.size):
            cols = ceil_div(c, ct.t_col[k])
            v1 = ceil_div(ceil_div(e, ct.t_row[k]) * cols, s_i) * ceil_div(d, ct.t_red[k]) / ct.mu[k]
            v2 = ceil_div(ceil_div(d, ct.t_row[k]) * cols, s_i) * ceil_div(e, ct.t_red[k]) / ct.mu[k]
            qk = min(qk, v1)
            pv = min(pv, v2)
    elif ct.pow2:  # the same ceilings as shifts (tile dimensions are powers of two)
        for k in range(ct.t_col.size):
            cols = _ceil_shift(c, ct.col_sh[k])
            qk = min(qk, (_ceil_shift(e, ct.row_sh[k]) * cols) * ct.psa_qk[k])
            pv = min(pv, (_ceil_shift(e, ct.red_sh[k]) * cols) * ct.psa_pv[k])
    else:  # the chunk-free factors ceil(d / t) / (s mu) are tabulated (psa_qk, psa_pv)
        for k in range(ct.t_col.size):
            cols = ceil_udiv(c, ct.t_col[k])
            qk = min(qk, (ceil_udiv(e, ct.t_row[k]) * cols) * ct.psa_qk[k])
            pv = min(pv, (ceil_udiv(e, ct.t_red[k]) * cols) * ct.psa_pv[k])
    return ct.N * (qk + pv) + ct.lm_out


@njit(cache=True)
def _ceil_shift(a, s):
    """ceil(a / 2**s) for a >= 0: the same integer as ``ceil_udiv(a, 2**s)``."""
    return (a + (np.int64(1) << s) - 1) >> s


@njit(cache=True)
def t_fixed(ct, tau):
    """The part of Eq. 7 that depends on the token count only: linear + non-linear + overhead."""
    return t_lin(ct, tau) + tau / ct.mu_nLin + ct.overhead


@njit(cache=True)
def chunk_batch_time(ct, i, c):
    """T_B of a batch holding the single prefill chunk PI(R, i, c) (Eq. 7)."""
    return t_fixed(ct, c) + t_psa(ct, i, c)


@njit(cache=True)
def lin_waste(ct, tau):
    """Linear time lost to tiling in a batch of ``tau`` tokens: T_Lin(tau) minus tau tokens at t*."""
    return t_lin(ct, tau) - tau * ct.lin_ideal


@njit(cache=True)
def psa_waste(ct, i, c, actual):
    """Prefill-attention time lost to tiling: ``actual`` minus its FLOPs at t*'s rate, unpadded
    (the vocab-projection row ``lm_out`` is not tiling loss)."""
    return actual - ct.lm_out - ct.psa_ideal * (i + c - 1) * c


@njit(cache=True)
def _fill_prefill_table(ct):
    """pre_time[L] = sum over the chunks (1 + k chunk, min(chunk, L - k chunk)) of their batch
    times, accumulated chunk by chunk in the same order the engine's detail mode uses."""
    out = ct.pre_time
    chunk = ct.chunk
    full = 0.0  # time of the full chunks before the current one
    for L in range(1, out.size):
        k = (L - 1) // chunk  # index of the chunk holding token L
        i = 1 + k * chunk
        if (L - 1) % chunk == 0 and k > 0:
            full += chunk_batch_time(ct, i - chunk, chunk)
        out[L] = full + chunk_batch_time(ct, i, L - i + 1)
