"""Compiled twins of :mod:`theory.cost` for the simulator's hot loop (Eq. 4-7).

The engine needs batch times millions of times; numpy's per-call overhead would dominate at batch
sizes of a few hundred tokens, so the formulas are written once more as small numba functions over
a :data:`stability.sim.structs.COSTS` record. They choose tiles exactly as :mod:`theory.cost` does (the
fastest tile per GeMM; the linear GeMMs share theirs) and the tests check the two agree.

Terms beyond Eq. 2 (:mod:`theory.terms`) reach the engine through the tables alone: the linear
table and, past it, :func:`t_lin`'s law or :class:`~theory.linear_terms.LinearTerms` loop absorb the
memory floor, waves, tensor-parallel all-reduces, the embedding gather and a literature law (a
measured GeMM profile through the table alone, which then reaches past its last measured token
count); the decode prefix sums ``S`` and :func:`t_psa` are 0 without attention and carry the
vocab projection of each decode and prefill chunk with ``lm_head``; the added-time terms
(:mod:`theory.added_time`) ride on the fixed time per batch ``overhead`` and on ``S``. A decode
in a batch that holds a prefill chunk reads a second prefix table ``Sm`` (``mixed_decode_eta``:
:func:`theory.cost.T_D_SA_mixed`), kept after ``S`` in one array ``S2`` (``Sm`` at offset
``m_off``); with the term off ``Sm`` equals ``S``, so such batches cost what they did. Apart from
that offset for the batches with a chunk, the engine has no branch for the terms. With terms on,
the "wasted" time of a batch is its time above ``tau l*`` (Theorem 1's per-token rate,
:func:`theory.cost.linear_per_token`) rather than tile padding alone.

The tables are one record whose fields are declared in blocks
(:data:`stability.sim.structs.COST_BLOCKS`, which generates the record type and its factory);
:data:`COST_VALUES` fills each block from a cost model and :data:`COMPILED_TERMS` says which fields
carry each cost term of :mod:`theory.cost_terms`.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from stability.sim.structs import COST_FIELDS, Costs, make_costs
from theory import added_time
from theory.cost import CostModel, decode_prefix, linear_per_token, linear_table

LIN_TABLE = 1 << 14  # batches below this many tokens look their linear time up
MOE_LIN_TABLE = 1 << 16  # the same for a mixture of experts, whose experts' time only the table holds


@njit(cache=True)
def _new_costs(values):
    """A cost-table record holding ``values`` (:func:`stability.sim.structs.make_costs`)."""
    return make_costs(values)


def _core_values(cm: CostModel, max_pos: int, chunk: int | None) -> dict:
    """The ``core`` block: tiles and rates, the decode prefix sums ``S`` and ``S2`` (with each
    decode's vocab-projection row and added time, which the engine multiplies by N, so they enter
    divided by N), the linear table, room for the prefill table, and the scalars of Eq. 7."""
    t = cm.t_star
    S = decode_prefix(cm, max_pos)
    Sm = decode_prefix(cm, max_pos, law="mixed") if cm.mixed_decode_eta else S
    rows = _decode_rows(cm, max_pos)
    if rows is not None:
        S, Sm = (S + rows, Sm + rows) if cm.mixed_decode_eta else (S + rows,) * 2
    lin_ideal = 1.0 / (cm.mu_Lin[0] * t.t_col) if cm.lin is None else linear_per_token(cm)
    psa_ideal = 2.0 * cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)
    return {"t_row": cm.t_row.copy(), "t_col": cm.t_col.copy(), "t_red": cm.t_red.copy(),
            "mu": cm.mu.astype(np.float64), "inv_mu_lin": (1.0 / cm.mu_Lin).astype(np.float64), "S": S,
            "S2": np.concatenate([S, Sm]), "m_off": int(S.size),
            "lin": linear_table(cm, _lin_table_size(cm) - 1), "pre_time": np.zeros(max_pos + 1),
            "pre_waste": np.zeros(max_pos + 1), "pre_not_opt": np.zeros(max_pos + 1, dtype=np.int64),
            "s": float(cm.s), "N": float(cm.N), "d_pre": int(cm.d_pre), "mu_nLin": float(cm.mu_nLin),
            "overhead": float(cm.fixed_s), "lin_ideal": float(lin_ideal),
            "psa_ideal": float(psa_ideal if cm.attention else 0.0), "chunk": int(chunk or cm.t_lcm)}


def _decode_rows(cm: CostModel, max_pos: int) -> np.ndarray | None:
    """What the prefix sums add per decode besides attention, cumulated and divided by N: the
    vocab-projection row (``lm_head``) and the added-time terms' per-decode time; None if nothing."""
    per_decode = cm.added and added_time.adds_per_decode(cm)
    if not cm.lm_out_s and not per_decode:
        return None
    rows = np.arange(max_pos + 1) * (cm.lm_out_s / cm.N) if cm.lm_out_s else np.zeros(max_pos + 1)
    if per_decode:
        extra = np.zeros(max_pos + 1)
        np.cumsum(added_time.decode_s(cm, np.arange(1, max_pos + 1)), out=extra[1:])
        rows = rows + extra / cm.N
    return rows


def _linear_values(cm: CostModel) -> dict:
    """The ``linear`` block: the law or the :class:`~theory.linear_terms.LinearTerms` arrays that
    price a batch past the linear table (kind 0 is Eq. 4, whose rates are in ``core``). A mixture of
    experts' routed experts (:mod:`theory.moe`) are in the table; past it, their time is extrapolated
    linearly from the table's last entry at their least time per token (``tok_s``, ``batch_s``), an
    approximation of their expected time that ``tests/test_moe.py`` bounds."""
    lt = cm.lin
    k = len(cm.tiles)
    out = {"lin_kind": 0, "law_c": 0.0, "law_a": 0.0, "law_b0": 1,
           "g_count": np.zeros(0, dtype=np.int64), "g_rows": np.zeros((k, 0), dtype=np.int64),
           "g_red": np.zeros((k, 0), dtype=np.int64), "g_wbytes": np.zeros(0), "g_abytes": np.zeros(0),
           "floor_bw": 0.0, "g_traffic": np.zeros((k, 0)), "l2_bw": 0.0, "tok_s": 0.0, "batch_s": 0.0,
           "waves": int(cm.waves)}
    if lt is not None and lt.law is not None:
        out |= {"lin_kind": 1, "law_c": float(lt.law.c), "law_a": float(lt.law.a), "law_b0": int(lt.law.b0)}
    elif lt is not None:
        out |= {"lin_kind": 2, "g_count": lt.count.astype(np.int64),
                "g_rows": np.ascontiguousarray(lt.rows, dtype=np.int64),
                "g_red": np.ascontiguousarray(lt.red, dtype=np.int64),
                "g_wbytes": lt.wbytes.astype(np.float64),
                "g_abytes": lt.abytes.astype(np.float64), "floor_bw": float(lt.floor_bw),
                "g_traffic": np.ascontiguousarray(lt.traffic, dtype=np.float64), "l2_bw": float(lt.l2_bw),
                "tok_s": float(lt.tok_s), "batch_s": float(lt.batch_s)}
        if lt.moe is not None:  # past the table: the experts' time extrapolated from its last entry
            tau0 = _lin_table_size(cm) - 1  # at Theorem 1's least rate (theory.moe)
            slope = lt.moe.per_token_limit()
            out["tok_s"] += slope
            out["batch_s"] += float(lt.moe.time(tau0)[0]) - slope * tau0
    return out


def _attention_values(cm: CostModel) -> dict:
    """The ``attention`` block: Eq. 6 priced or not, in waves or not, the vocab-projection row of a
    chunk, and the chunk-free factors ``ceil(d / t) / (s mu)`` of the tiles :func:`t_psa` tries
    (:func:`_psa_candidates`)."""
    (_, _, qk), (_, _, pv) = _psa_candidates(cm)
    return {"att": int(cm.attention), "att_waves": int(cm.attention_waves), "lm_out": float(cm.lm_out_s),
            "psa_qk": qk, "psa_pv": pv}


def _psa_candidates(cm: CostModel) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """The tiles :func:`t_psa` tries for each GeMM of Eq. 6 without waves, as (rows, columns,
    factor): Q K^T costs ``ceil(e / t_row) ceil(c / t_col) ceil(d / t_red) / (s mu)`` and P V
    ``ceil(e / t_red) ceil(c / t_col) ceil(d / t_row) / (s mu)`` (e = i + c - 1). A tile whose
    rows and columns are at most another's and whose factor is at least that tile's never costs
    less at any (e, c), so only the others are kept (of equal ones, the first): the least cost
    over them is the least over every tile, the same number (a product of a whole number and a
    factor is monotone in each)."""
    rate = cm.s * cm.mu.astype(np.float64)
    d = int(cm.d_pre)
    t_row, t_col, t_red = (np.asarray(x, dtype=np.int64) for x in (cm.t_row, cm.t_col, cm.t_red))
    return (_undominated(t_row, t_col, -(-d // t_red) / rate),
            _undominated(t_red, t_col, -(-d // t_row) / rate))


def _undominated(rows: np.ndarray, cols: np.ndarray, factor: np.ndarray) -> tuple[np.ndarray, ...]:
    """The candidates (rows, cols, factor) that no other beats: none has rows and cols at least
    theirs and a factor at most theirs (of identical ones, the first is kept)."""
    n = rows.size
    keep = [i for i in range(n)
            if not any(rows[j] >= rows[i] and cols[j] >= cols[i] and factor[j] <= factor[i]
                       and (j < i or (rows[j], cols[j], factor[j]) != (rows[i], cols[i], factor[i]))
                       for j in range(n) if j != i)]
    return rows[keep].copy(), cols[keep].copy(), factor[keep].astype(np.float64)


def _shift_values(cm: CostModel) -> dict:
    """The ``shifts`` block: the rows and columns of the tiles :func:`t_psa` tries
    (:func:`_psa_candidates`), as log2 when every tile dimension is a power of two (CUTLASS's and
    cuBLAS's tile shapes are; ``pow2``), else as they are."""
    dims = [np.asarray(x, dtype=np.int64) for x in (cm.t_row, cm.t_col, cm.t_red)]
    pow2 = all(bool(np.all((d > 0) & (d & (d - 1) == 0))) for d in dims)
    (qk_row, qk_col, _), (pv_red, pv_col, _) = _psa_candidates(cm)

    def log2(d: np.ndarray) -> np.ndarray:
        return np.round(np.log2(np.maximum(d, 1))).astype(np.int64) if pow2 else d

    return {"qk_row": log2(qk_row), "qk_col": log2(qk_col), "pv_red": log2(pv_red), "pv_col": log2(pv_col),
            "pow2": int(pow2)}


# How each block of stability.sim.structs.COST_BLOCKS is filled from a cost model.
COST_VALUES = {"core": _core_values, "linear": _linear_values, "attention": _attention_values,
               "shifts": _shift_values}

# The fields of the cost tables through which each cost term of theory.cost_terms reaches the
# engine (the linear table `lin` holds every term of the linear time below LIN_TABLE tokens). An
# added-time term reaches it through ADDED_SLOTS and is not listed here.
COMPILED_TERMS: dict[str, tuple[str, ...]] = {
    "memory_floor": ("lin", "g_wbytes", "g_abytes", "floor_bw"),
    "waves": ("lin", "waves"),
    "attention_waves": ("att_waves",),
    "l2_bandwidth_gbs": ("lin", "g_traffic", "l2_bw"),
    "overhead_s": ("overhead", "pre_time"),
    "gemm_overhead_s": ("lin", "batch_s"),
    "attention_call_s": ("overhead", "pre_time"),
    "mixed_decode_eta": ("S2", "m_off"),
    "linear_law": ("lin", "lin_kind", "law_c", "law_a", "law_b0"),
    "gemm_profile": ("lin",),
    "tp": ("lin", "tok_s", "batch_s"),
    "attention": ("att", "S", "S2", "psa_ideal"),
    "lm_head": ("lin", "tok_s", "batch_s", "lm_out", "S", "S2"),
    "moe": ("lin", "lin_ideal", "tok_s", "batch_s"),
    "ep": ("lin", "lin_ideal"),
    "cudagraph_capture_sizes": ("lin",),  # every capture size lies inside the linear table
}
ADDED_SLOTS = ("overhead", "S", "S2")  # the per-batch time, and the per-decode time in the prefix sums


def build_tables(cm: CostModel, max_pos: int, chunk: int | None = None) -> Costs:
    """Cost tables for positions up to ``max_pos`` and whole prefills in chunks of ``chunk``
    (default t*_lcm) of prompts up to ``max_pos`` tokens: each block of
    :data:`stability.sim.structs.COST_BLOCKS` filled by :data:`COST_VALUES`."""
    values = {}
    for block, fill in COST_VALUES.items():
        values |= fill(cm, max_pos, chunk) if block == "core" else fill(cm)
    if set(values) != set(COST_FIELDS):
        raise ValueError(f"cost-table values {sorted(set(values) ^ set(COST_FIELDS))} are not the fields "
                         "of stability.sim.structs.COST_BLOCKS")
    ct = _new_costs(tuple(values[name] for name in COST_FIELDS))
    _fill_prefill_table(ct)
    return ct


def _lin_table_size(cm: CostModel) -> int:
    """Entries of the linear table: :data:`LIN_TABLE`, or past every measured token count of a
    ``gemm_profile`` (beyond it every GeMM is the tile model's, which :func:`t_lin` computes); for a
    mixture of experts :data:`MOE_LIN_TABLE`, since the experts' time (:mod:`theory.moe`) is read
    from the table alone."""
    measured = None if cm.lin is None else cm.lin.measured
    size = LIN_TABLE if cm.lin is None or cm.lin.moe is None else MOE_LIN_TABLE
    return size if measured is None else max(size, measured.tau_max + 1)


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
    """:class:`theory.linear_terms.LinearTerms` at ``tau >= 1``, the same operations in the same order
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
    count per call; this way it pays none.
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
        for k in range(ct.psa_qk.size):
            qk = min(qk, (_ceil_shift(e, ct.qk_row[k]) * _ceil_shift(c, ct.qk_col[k])) * ct.psa_qk[k])
        for k in range(ct.psa_pv.size):
            pv = min(pv, (_ceil_shift(e, ct.pv_red[k]) * _ceil_shift(c, ct.pv_col[k])) * ct.psa_pv[k])
    else:  # the chunk-free factors ceil(d / t) / (s mu) are tabulated (psa_qk, psa_pv)
        for k in range(ct.psa_qk.size):
            qk = min(qk, (ceil_udiv(e, ct.qk_row[k]) * ceil_udiv(c, ct.qk_col[k])) * ct.psa_qk[k])
        for k in range(ct.psa_pv.size):
            pv = min(pv, (ceil_udiv(e, ct.pv_red[k]) * ceil_udiv(c, ct.pv_col[k])) * ct.psa_pv[k])
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
def lin_waste(ct, tau):
    """Linear time lost to tiling in a batch of ``tau`` tokens: T_Lin(tau) minus tau tokens at t*."""
    return t_lin(ct, tau) - tau * ct.lin_ideal


@njit(cache=True)
def psa_waste(ct, i, c, actual):
    """Prefill-attention time lost to tiling: ``actual`` minus its FLOPs at t*'s rate, unpadded
    (the vocab-projection row ``lm_out`` is not tiling loss)."""
    return actual - ct.lm_out - ct.psa_ideal * (i + c - 1) * c


@njit(cache=True)
def chunk_batch_cost(ct, i, c):
    """(T_B, time lost to tiling) of a batch holding the single prefill chunk PI(R, i, c) (Eq. 7)."""
    att = t_psa(ct, i, c)
    return t_fixed(ct, c) + att, lin_waste(ct, c) + psa_waste(ct, i, c, att)


@njit(cache=True)
def _fill_prefill_table(ct):
    """pre_time[L] = sum over the chunks (1 + k chunk, min(chunk, L - k chunk)) of their batch
    times, accumulated chunk by chunk in the same order the engine's detail mode uses; pre_waste[L]
    and pre_not_opt[L] the same sums of each chunk's tiling loss and of the chunks not optimally
    tiled (by :func:`stability.sim.recording.count_batch`'s rule)."""
    out = ct.pre_time
    chunk = ct.chunk
    full = 0.0  # time of the full chunks before the current one
    full_waste = 0.0
    full_not_opt = 0
    for L in range(1, out.size):
        k = (L - 1) // chunk  # index of the chunk holding token L
        i = 1 + k * chunk
        if (L - 1) % chunk == 0 and k > 0:
            dur, w = chunk_batch_cost(ct, i - chunk, chunk)
            full += dur
            full_waste += w
            full_not_opt += 1 if w > 1e-12 * dur else 0
        dur, w = chunk_batch_cost(ct, i, L - i + 1)
        out[L] = full + dur
        ct.pre_waste[L] = full_waste + w
        ct.pre_not_opt[L] = full_not_opt + (1 if w > 1e-12 * dur else 0)
