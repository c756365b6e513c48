"""The three pieces of the certified work per request (:mod:`theory.capacity`): the least prefill
attention over chunkings ``f(L)`` (a dynamic programme), the decode attention sums ``D(L_P, L_D)``
and the token-count-plus-fixed time ``Phi`` (a linear programme, evaluated by its dual).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 5-7, Appendix B.1.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

from theory.capacity.law import BatchLaw, check_caps
from theory.errors import FieldError, require_positive_int
from theory.io import keep_array, read_kept_array, theory_kept_path
from theory.workload import Workload

DEFAULT_HORIZON = 8192  # batch sizes tabulated when b_max is None (the tail beyond is bounded by sigma)
# min_prefill_attention's tables by (law digest, L_max, largest chunk): with waves the DP evaluates
# Eq. 6 for every (end, chunk) pair (seconds per law), and a planner asks for the same law under
# several token budgets that leave the same largest chunk; they are also kept on disk (_kept_path)
_PREFILL_TABLES: dict[tuple, np.ndarray] = {}
_PREFILL_TABLES_KEPT = 16


def min_prefill_attention(law: BatchLaw, L_max: int, b_max: int | None = None) -> np.ndarray:
    """``f(L)``, L = 0..L_max: least prefill attention over chunkings of ``1..L`` (chunks <= b_max).

    ``f(0) = 0``, ``f(e) = min_{1 <= c <= min(e, C)} f(e - c) + A_P(e - c + 1, c)`` with
    ``C = min(b_max, split_period)`` (:mod:`theory.capacity`); vectorised calls of ``A_P`` build the
    ``L_max x C`` table of chunk costs in blocks of rows.

    References
    ----------
    Eq. 6; Appendix B.1 (Proposition 1's minimum over chunkings, computed exactly).
    """
    L_max = int(L_max)
    f = np.zeros(L_max + 1)
    if law.prefill_attention is None or L_max == 0:
        return f
    C = L_max
    for cap in (b_max, law.split_period):
        if cap is not None:
            C = min(C, int(cap))
    key = None if law.content_key is None else (law.content_key, L_max, C)
    if key in _PREFILL_TABLES:
        return _PREFILL_TABLES[key].copy()
    kept = None if key is None else _kept_path(key)
    if kept is not None:
        f_kept = read_kept_array(kept)
        if f_kept is not None and f_kept.shape == f.shape and f_kept.dtype == f.dtype:
            _remember(key, f_kept)
            return f_kept.copy()
    if law.split_period is not None and L_max > law.split_period:
        _check_split(law, L_max)
    c = np.arange(1, C + 1)[None, :]
    rows = max(1, (1 << 21) // C)  # rows of the chunk-cost table per vectorised call (bounded memory)
    for lo in range(1, L_max + 1, rows):
        e = np.arange(lo, min(lo + rows, L_max + 1))[:, None]
        valid = c <= e
        i = np.where(valid, e - c + 1, 1)
        cost = np.asarray(law.prefill_attention(np.broadcast_to(i, valid.shape).ravel(),
                                                np.broadcast_to(c, valid.shape).ravel()), dtype=float)
        cost = np.where(valid, cost.reshape(valid.shape), np.inf)
        for row, k in enumerate(range(lo, lo + e.shape[0])):
            m = min(k, C)
            f[k] = np.min(f[k - m:k][::-1] + cost[row, :m])
    if key is not None:
        _remember(key, f.copy())
        keep_array(kept, f)
    return f


def _remember(key: tuple, f: np.ndarray) -> None:
    """Hold a prefill table in this process (the :data:`_PREFILL_TABLES_KEPT` latest)."""
    if len(_PREFILL_TABLES) >= _PREFILL_TABLES_KEPT:
        _PREFILL_TABLES.pop(next(iter(_PREFILL_TABLES)))
    _PREFILL_TABLES[key] = f


def _kept_path(key: tuple) -> Path:
    """Where a prefill table is kept across processes: ``cache_home()/capacity/<theory digest>-<key
    digest>.npy``, named by every source and data file of :mod:`theory` (which computes it) and by
    the law's content and the table's extent."""
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    return theory_kept_path("capacity", digest)


def _check_split(law: BatchLaw, L_max: int) -> None:
    """Spot-check the split property ``A_P(i, c) >= A_P(i, P) + A_P(i + P, c - P)`` (c > P) on a grid.

    Raises
    ------
    FieldError
        Naming ``split_period`` if the law's attention violates it (the DP would then be unsafe).
    """
    P = int(law.split_period)
    c = np.unique(np.clip(np.array([P + 1, P + 7, 2 * P, 2 * P + 3, 3 * P - 1, L_max]), P + 1, L_max))
    ends = np.unique(np.linspace(P + 1, L_max, 48).astype(np.int64))
    E, Cc = np.meshgrid(ends, c)
    ok = Cc <= E
    E, Cc = E[ok], Cc[ok]
    i = E - Cc + 1
    whole = np.asarray(law.prefill_attention(i, Cc), dtype=float)
    parts = (np.asarray(law.prefill_attention(i, np.full(i.shape, P)), dtype=float)
             + np.asarray(law.prefill_attention(i + P, Cc - P), dtype=float))
    if np.any(whole < parts * (1 - 1e-12)):
        k = int(np.argmax(whole < parts * (1 - 1e-12)))
        raise FieldError("split_period", P, f"a period at which splitting a chunk never costs more "
                                            f"(fails for chunk ({int(i[k])}, {int(Cc[k])}))")


def decode_attention_sums(law: BatchLaw, w: Workload) -> np.ndarray:
    """``D(L_P, L_D) = sum_{k=1}^{L_D} A_D(L_P + k)`` on the workload's support (Eq. 5)."""
    if law.decode_attention is None:
        return np.zeros(w.L_P.size)
    top = int((w.L_P + w.L_D).max())
    S = np.zeros(top + 1)
    S[1:] = np.cumsum(np.asarray(law.decode_attention(np.arange(1, top + 1)), dtype=float))
    return S[w.L_P + w.L_D] - S[w.L_P]


@dataclass(frozen=True)
class LinearFixedCost:
    """The LP value ``Phi`` per request and what attains it (see :func:`linear_fixed_cost`).

    Attributes
    ----------
    per_request_s : float
        Certified ``Phi`` (dual value ``u E[L_P + L_D] + v E[L_D]``).
    u_s_per_token, v_s_per_decode : float
        The dual prices.
    primal_s : float
        The primal optimum (HiGHS) of the LP as solved: beyond the table one column of tokens at
        ``sigma`` each with at most ``q / (H + 1)`` decodes a token, ``c_fix`` dropped. Equal to
        ``per_request_s`` up to solver tolerance where no such column enters (a token budget, or
        no decode cap); with a decode cap and no budget it may lie below, since the dual prices
        every batch beyond the table at ``c_fix + sigma tau``, which that column does not.
    batch_mix : dict
        ``{tau: batches per request}`` of an optimal primal solution; the key ``"tail"`` holds the
        tokens per request in batches beyond the table (sizes -> infinity).
    best_tau : int or None
        A batch size attaining ``min F(tau) / tau`` in the table, or None if only approached as
        tau -> infinity.
    """

    per_request_s: float
    u_s_per_token: float
    v_s_per_decode: float
    primal_s: float
    batch_mix: dict
    best_tau: int | None


def linear_fixed_cost(law: BatchLaw, m_tok: float, m_dec: float, b_max: int | None = None,
                      max_decodes: int | None = None, horizon: int = DEFAULT_HORIZON) -> LinearFixedCost:
    """Least token-count-plus-fixed time per request, ``Phi`` (the LP of :mod:`theory.capacity`).

    Parameters
    ----------
    law : BatchLaw
    m_tok, m_dec : float
        ``E[L_P + L_D]`` and ``E[L_D]``.
    b_max, max_decodes : int, optional
        Token budget and decode cap per batch.
    horizon : int
        Batch sizes tabulated when ``b_max`` is None; beyond it ``F(tau) >= c_fix + sigma tau``.

    Raises
    ------
    FieldError
        If the law's ``tail_slope`` exceeds ``G(tau) / tau`` somewhere on the table (the hook is
        then not a lower bound and the tail argument would not be certified).
    """
    b_max, q = check_caps(b_max, max_decodes)
    H = b_max if b_max is not None else require_positive_int("horizon", horizon)
    G = np.asarray(law.token_time(H), dtype=float)
    tau = np.arange(1, H + 1)
    sigma = law.tail_slope
    if np.any(G[1:] < sigma * tau * (1 - 1e-12)):
        bad = int(tau[np.argmax(G[1:] < sigma * tau * (1 - 1e-12))])
        raise FieldError("tail_slope", sigma, f"<= G(tau)/tau for every tau (fails at tau = {bad})")
    F = G[1:] + law.fixed_s
    per_tok = F / tau
    k = int(np.flatnonzero(per_tok <= per_tok.min() * (1 + 1e-12))[0])  # smallest size attaining it
    tail = b_max is None
    best_tau = int(tau[k]) if not (tail and sigma < per_tok[k]) else None
    if q is None or (q >= H and not tail):  # the decode row is implied by the token row
        u = float(min(per_tok[k], sigma)) if tail else float(per_tok[k])
        mix = {best_tau: m_tok / best_tau} if best_tau is not None else {"tail": m_tok}
        return LinearFixedCost(u * m_tok, u, 0.0, u * m_tok, mix, best_tau)
    # decode cap: a two-row LP; HiGHS for the primal and a dual guess, weak duality for the value
    dcap = np.minimum(tau, q).astype(float)
    cost = list(F)
    a_tok, a_dec = list(tau.astype(float)), list(dcap)
    if tail:  # one unit = one token of a batch beyond H: cost >= sigma, at most q / (H + 1) decodes
        cost.append(sigma)
        a_tok.append(1.0)
        a_dec.append(q / (H + 1))
    res = linprog(np.array(cost), A_ub=-np.array([a_tok, a_dec]), b_ub=-np.array([m_tok, m_dec]),
                  bounds=(0, None), method="highs")
    if res.status != 0:
        raise FieldError("max_decodes", q, f"a feasible batch-composition LP ({res.message})")
    v0 = max(0.0, -float(res.ineqlin.marginals[1]))
    # largest v with u = 0 feasible: min(tau, q) v <= F(tau) on the table and q v <= F(tau) beyond
    v_cap = float(np.min(F / dcap))
    if tail:
        v_cap = min(v_cap, (law.fixed_s + sigma * (H + 1)) / q)

    def u_of(v: float) -> float:
        u = float(np.min((F - dcap * v) / tau))
        if tail:  # tau u + q v <= c_fix + sigma tau for all tau > H
            u = min(u, sigma + min(0.0, (law.fixed_s - q * v) / (H + 1)))
        return u

    def dual_value(v: float) -> tuple[float, float, float]:
        v = max(0.0, v)
        if u_of(v) < 0:
            v = min(v, v_cap)
        u = max(0.0, u_of(v))
        return u * m_tok + v * m_dec, u, v

    val, u, v = max(dual_value(v0), dual_value(0.0))
    mix = {}
    for j, y in enumerate(res.x):
        if y > 1e-12:
            mix["tail" if j == H else int(tau[j])] = float(y)
    return LinearFixedCost(val, u, v, float(res.fun), mix, best_tau)
