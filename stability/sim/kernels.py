"""Compiled twins of :mod:`theory.cost` for the simulator's hot loop (Eq. 4-7).

The engine needs batch times millions of times; numpy's per-call overhead would dominate at batch
sizes of a few hundred tokens, so the formulas are written once more as small numba functions over
a :data:`stability.sim.structs.COSTS` record. They choose tiles exactly as :mod:`theory.cost` does (the
fastest tile per GeMM; the linear GeMMs share theirs) and the tests check the two agree.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.experimental import structref

from stability.sim.structs import COSTS, Costs
from theory.cost import CostModel, decode_prefix, linear_table

LIN_TABLE = 1 << 14  # batches below this many tokens look their linear time up


@njit(cache=True)
def _make_costs(t_row, t_col, t_red, mu, inv_mu_lin, S, lin, pre_time, s, N, d_pre, mu_nLin,
                overhead, lin_ideal, psa_ideal, chunk):
    ct = structref.new(COSTS)
    ct.t_row = t_row
    ct.t_col = t_col
    ct.t_red = t_red
    ct.mu = mu
    ct.inv_mu_lin = inv_mu_lin
    ct.S = S
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


def build_tables(cm: CostModel, max_pos: int, chunk: int | None = None) -> Costs:
    """Cost tables for positions up to ``max_pos`` and whole prefills in chunks of ``chunk``
    (default t*_lcm) of prompts up to ``max_pos`` tokens."""
    t = cm.t_star
    chunk = int(chunk or cm.t_lcm)
    ct = _make_costs(
        cm.t_row.copy(), cm.t_col.copy(), cm.t_red.copy(), cm.mu.astype(np.float64),
        (1.0 / cm.mu_Lin).astype(np.float64), decode_prefix(cm, max_pos),
        linear_table(cm, LIN_TABLE - 1), np.zeros(max_pos + 1), float(cm.s), float(cm.N),
        int(cm.d_pre), float(cm.mu_nLin), float(cm.overhead_s),
        float(1.0 / (cm.mu_Lin[0] * t.t_col)),
        float(2.0 * cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)), chunk)
    _fill_prefill_table(ct)
    return ct


@njit(cache=True)
def ceil_div(a, b):
    return -(-a // b)


@njit(cache=True)
def t_lin(ct, tau):
    """Eq. 4 at the fastest tile: min_t ceil(tau / t_col) / mu_Lin(t); 0 for tau = 0."""
    if tau < ct.lin.size:
        return ct.lin[tau]
    best = np.inf
    for k in range(ct.t_col.size):
        v = ct.inv_mu_lin[k] * ceil_div(tau, ct.t_col[k])
        if v < best:
            best = v
    return best


@njit(cache=True)
def t_psa(ct, i, c):
    """Eq. 6 over N layers for PI(R, i, c): each GeMM on its fastest tile."""
    e = i + c - 1
    d = ct.d_pre
    qk = np.inf
    pv = np.inf
    for k in range(ct.t_col.size):
        cols = ceil_div(c, ct.t_col[k])
        rate = ct.s * ct.mu[k]
        v1 = ceil_div(e, ct.t_row[k]) * cols * ceil_div(d, ct.t_red[k]) / rate
        v2 = ceil_div(d, ct.t_row[k]) * cols * ceil_div(e, ct.t_red[k]) / rate
        if v1 < qk:
            qk = v1
        if v2 < pv:
            pv = v2
    return ct.N * (qk + pv)


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
    """Prefill-attention time lost to tiling: ``actual`` minus its FLOPs at t*'s rate, unpadded."""
    return actual - ct.psa_ideal * (i + c - 1) * c


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
