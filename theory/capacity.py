"""A certified throughput bound for any batch-time law the toolkit expresses, and the KV-memory bound.

Setting (Section 3). Requests arrive at rate ``lam`` with i.i.d. lengths ``(L_P, L_D)`` from an
exact finite pmf (:class:`theory.workload.Workload`) and are served by ``r`` GPUs. A request is
``L_P`` prefill tokens, split into chunks ``PI(R, i, c)`` that partition ``1..L_P``
(Definition 1), then ``L_D`` decode iterations ``DI(R, L_P + k)``, k = 1..L_D, each in its own
batch. A batch ``B`` with ``tau`` tokens takes (Eq. 7, generalised)::

    T_B = F(tau) + sum_{decodes in B} A_D(i) + sum_{chunks in B} A_P(i, c),
    F(tau) = G(tau) + c_fix        (tau >= 1),

where ``G(tau)`` is the time of everything that depends on the batch's token count alone (Eq. 4's
``T_Lin(tau)`` and Section 3.2.3's ``tau / mu_nLin``; the memory floor, wave quantisation, LM head
and all-reduce terms being added to :mod:`theory.cost` end up here too), ``c_fix`` a fixed time
per batch (launch and CPU time, ``CostModel.overhead_s``), ``A_D(i) = N T^{D,SA}(i)`` (Eq. 5) and
``A_P(i, c) = T^{P,SA}(i, c)`` (Eq. 6). A :class:`BatchLaw` holds exactly these functions;
:func:`law_from_cost_model` builds one from ``T_Lin``/``linear_table``, ``T_D_SA``, ``T_P_SA`` and
``overhead_s`` of a :class:`theory.cost.CostModel` (not from Eq. 2's internals), so new terms of
``T_Lin`` plug in; :func:`staircase_law` gives ``t(b) = c + a ceil(b / b0)`` with attention off.
Optional caps: a token budget ``b_max`` (``tau <= b_max``, hence chunks ``c <= b_max``) and at
most ``q_max`` decodes per batch.

Theorem (compute bound). Let ``H`` be the largest batch size tabulated (``b_max`` if given) and
``sigma`` a per-token slope with ``G(tau) >= sigma tau`` for every ``tau > H`` (the law's
``tail_slope``). Define, per request,

* ``f(L)``: the least ``sum A_P(i, c)`` over chunkings of ``1..L`` with chunks ``c <= b_max``
  (a dynamic programme, :func:`min_prefill_attention`);
* ``D(L_P, L_D) = sum_{k=1}^{L_D} A_D(L_P + k)``;
* ``Phi``: the value of the linear programme (LP)::

      min  sum_tau y_tau F(tau)   s.t.  sum_tau tau y_tau >= E[L_P + L_D],
                                       sum_tau min(tau, q_max) y_tau >= E[L_D],  y >= 0,

  over ``tau = 1..H`` (plus, when ``b_max`` is None, a tail column of cost ``sigma`` per token),
  which :func:`linear_fixed_cost` evaluates by its dual: any ``u, v >= 0`` with
  ``tau u + min(tau, q_max) v <= F(tau)`` for all feasible ``tau`` give ``Phi >= u E[L_P + L_D]
  + v E[L_D]`` (weak duality); without a decode cap ``Phi = E[L_P + L_D] inf_tau F(tau) / tau``.

With ``T_bar_W = Phi + E[D(L_P, L_D)] + E[f(L_P)]``, if ``lam T_bar_W > r`` then for every
planner and scheduler (work-conserving or not, any chunking, any co-batching, any tile choice the
law allows) ``liminf Q(t) / t >= (lam T_bar_W - r) / w_max > 0`` almost surely, ``w_max`` being
the largest per-request charge ``w_j`` of the proof. So ``lam_C = r / T_bar_W`` bounds every
stable rate.

Proof. Fix a schedule and a time ``t``. The batches finished by ``t`` on the r GPUs take at most
``r t`` in all, and their time splits as ``sum_B F(tau_B)`` plus the attention of their items.
(a) Attention is per item, so a request ``j`` finished by ``t`` contributes at least
``D(L_P_j, L_D_j) + f(L_P_j)``: its decodes are at fixed positions and its chunks partition
``1..L_P_j`` with sizes ``<= b_max``. (b) For dual-feasible ``u, v`` every batch has
``F(tau_B) >= u tau_B + v min(tau_B, q_max) >= u tau_B + v (its decodes)``; summed over the
finished batches, which processed every token and decode of the finished requests,
``sum_B F(tau_B) >= sum_{j finished} (u (L_P_j + L_D_j) + v L_D_j)``. So with ``w_j = u (L_P_j +
L_D_j) + v L_D_j + D_j + f(L_P_j) <= w_max`` (finite pmf), ``sum_{j finished} w_j <= r t``. The
requests arrived by ``t`` and not finished number ``Q(t)``, so ``sum_{j <= A(t)} w_j - Q(t) w_max
<= r t``, and by the SLLN ``(1/t) sum_{j <= A(t)} w_j -> lam E[w] = lam T_bar_W`` a.s. (``u, v``
attaining the LP value at the pmf's means), which gives the claim. []

Exact versus upper bound. The bound is a relaxation: it charges attention and the token-count
cost separately and asks the LP only for token totals. Each piece is exact on its own: ``f`` is
the exact minimum over chunkings (DP), ``D`` is forced, ``Phi`` is the LP optimum. The bound is the
capacity when one schedule attains the three at once. For Eq. 2-7 without fixed cost or caps it
is: lock-step groups of t*_col requests of one length, each prompt in the DP-optimal chunks (the
group's chunks in one batch, ``tau`` a multiple of t*_col) and decodes in batches of t*_col, have
work per request exactly ``T_bar_W`` (a test times such a schedule batch by batch), so ``lam_C =
r / T_bar_W`` is ``r`` over the DP-minimal work per request: Theorem 1 with Eq. 12's
``L_P (L_P + t*_lcm)`` replaced by the exact chunking minimum. The paper's lam* is recovered where
the chunking lemma holds (t*_row <= t*_col) and undercuts this bound where t*_row > t*_col (every
preset: by 0.02-0.09 % on Table 1's law padded to t*_lcm, Mistral-7B, paper mode). With a fixed
cost and no caps, groups of G such requests pay ``c_fix`` per batch, ``c_fix (chunks + L_D) / G``
per request, so the bound is approached as G grows (a supremum, not attained). With caps or a
decode cap the packing may fail and the bound is an upper bound only.

Which chunk sizes the DP needs. If ``A_P(i, c) >= A_P(i, P) + A_P(i + P, c - P)`` for ``c > P``
(splitting never costs more), chunks larger than ``P`` are never needed. For Eq. 6 with each GeMM
on its fastest tile this holds with ``P`` = the LCM of the tiles' t_col: for a tile of width
t_col dividing ``P``, ``ceil(c / t_col) = P / t_col + ceil((c - P) / t_col)``, and the other
factor, ``ceil(e / t_row) ceil(d / t_red)`` (resp. ``ceil(d / t_row) ceil(e / t_red)``), does not
grow when the chunk ends earlier; the minimum over tiles of a sum is at least the sum of the
minima. ``BatchLaw.split_period`` carries ``P`` (``None``: the DP tries every chunk size).

Li, Dai and Peng. For ``t(b) = c + a ceil(b / b0)`` with budget ``b_max``, no attention and no
decode cap, ``Phi = E[L_P + L_D] min_{b <= b_max} t(b) / b``, and ``t(b) / b`` is least at the
largest multiple of ``b0`` not above ``b_max`` (at ``b_max`` if ``b_max < b0``): on
``((k - 1) b0, k b0]`` the time is ``c + a k``, and ``(c + a k) / (k b0)`` falls with ``k``. When
``b0`` divides ``b_max`` the bound is ``lam_C = (b_max / t(b_max)) / E[L_P + L_D]``: the
stability condition ``lam (m_p + m_d) < b / t_b`` of Li, Dai, Peng (2025) (``b`` the token budget,
``t_b`` the time of a full batch, ``m_p + m_d`` the mean tokens per request), which they show
work-conserving policies attain. When ``b0`` does not divide ``b_max``, batches of
``b0 floor(b_max / b0)`` tokens do better than full ones and the bound exceeds ``b_max / t(b_max)``
(a policy that always fills the budget is then not throughput-optimal in this law).

KV-memory bound. Each GPU holds at most ``M`` tokens of KV cache and a request's KV stays
resident from its prefill until it finishes (no eviction, recompute or swap). During the batch
that runs decode ``k`` of request ``j`` its KV holds at least ``L_P + k - 1`` tokens (positions
before the one being decoded), and that batch lasts at least ``F_min + A_D(L_P + k)``, with
``F_min = min_{1 <= tau <= b_max} F(tau)`` (the batch holds at least this token; its other items
only add time). So ``j`` occupies at least ``K_j = sum_{k=1}^{L_D} (L_P + k - 1) (F_min +
A_D(L_P + k))`` KV-token-seconds. The KV in use at any time is at most ``r M``, so the
KV-token-seconds of the requests finished by ``t`` are at most ``r M t``; the argument of the
theorem (with ``K_j <= K_max`` in place of ``w_j``) gives ``lam E[K] <= r M`` for every stable
schedule: ``lam_M = r M / E[K]``. It is certified but loose: ``F_min`` is the time of a batch of
one token, while big batches (which the compute bound favours) last longer. The certified
capacity is ``min(lam_C, lam_M)``; :class:`CapacityBound` says which binds.

Where Theorems 1-2 stop holding with a per-batch overhead ``c_fix > 0``. With a token budget
(or a decode cap) batches cannot amortise ``c_fix`` indefinitely and ``lam_C`` falls below the
paper's ``lam* = r / T_bar_R``, which ignores ``c_fix``: lam* is then not attainable. Without
caps, ``lam_C`` still equals the DP bound (huge batches amortise ``c_fix``), but RAD's cycles
run each prefill chunk of ``t*_lcm`` tokens alone and at most ``t*_col`` decodes per batch, so
RAD spends at least ``c_fix (E[ceil(L_P / t*_lcm)] + E[L_D] / t*_col)`` more per request
(:func:`rad_overhead_rate_bound`), and a lock-step schedule of large groups beats it: RAD is
strictly suboptimal and Theorem 2's "stable for lam <= lam* (1 - eps)" fails for small eps.
Computed example (checked in tests/test_capacity.py): A100, Mistral-7B, paper mode, c_fix = 5 ms,
deterministic L_P = 512, L_D = 64, r = 1: lam* = 24.694 req/s, lam_C = 24.739 without caps and
23.907 with b_max = 2048 (3.2 % below lam*); RAD sustains at most 18.896 (23.5 % below lam*, so
Theorem 2 fails for every eps < 0.235), while lock-step groups of 256 requests (chunks of 128)
sustain 23.952 and groups of 1024 sustain 24.537.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7, Theorem 1, Theorem 2, Algorithm 1, Appendix B.
Li, Dai, Peng (2025), "Throughput-optimal scheduling algorithms for LLM inference and AI agents",
arXiv:2504.07347 (the stability condition ``lam (m_p + m_d) < b / t_b`` of work-conserving
policies).
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import linprog

from theory.cost import T_P_SA, Batch, CostModel, T_batch, T_D_SA_least, linear_per_token, linear_table
from theory.errors import FieldError, require_positive, require_positive_int
from theory.terms import shard_memory
from theory.workload import Workload

DEFAULT_HORIZON = 8192  # batch sizes tabulated when b_max is None (the tail beyond is bounded by sigma)
# min_prefill_attention's tables by (law digest, L_max, largest chunk): with waves the DP evaluates
# Eq. 6 for every (end, chunk) pair (seconds per law), and a planner asks for the same law under
# several token budgets that leave the same largest chunk
_PREFILL_TABLES: dict[tuple, np.ndarray] = {}
_PREFILL_TABLES_KEPT = 16


# --- the batch-time law -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BatchLaw:
    """A batch-time law ``T_B = G(tau) + c_fix + sum A_D + sum A_P`` (see the module docstring).

    Attributes
    ----------
    name : str
    token_time : callable
        ``token_time(tau_max) -> ndarray`` of ``G(tau)``, tau = 0..tau_max (``G(0) = 0``): the time
        that depends on the batch's token count alone (Eq. 4 plus non-linear ops).
    fixed_s : float
        ``c_fix``, the time every non-empty batch pays (the per-batch fixed-time hook).
    tail_slope : float
        ``sigma``: a lower bound on ``G(tau) / tau`` for every tau (used beyond the tabulated
        range; checked on the table).
    decode_attention : callable or None
        ``A_D(i)``, whole-model attention time of one decode at position ``i`` (None: 0).
    prefill_attention : callable or None
        ``A_P(i, c)``, whole-model attention time of chunk ``PI(R, i, c)`` (None: 0).
    split_period : int or None
        ``P`` such that splitting a chunk of size ``c > P`` at ``P`` never costs more (None: the
        chunking DP tries every size).
    batch_time : callable
        ``batch_time(prefill=[(i, c), ...], decode=[i, ...]) -> float``: the time of one explicit
        batch, for the feasible schedules of :func:`lockstep_throughput`.
    content_key : str or None
        A digest of everything the law is built from (:func:`law_from_cost_model`: the pickled cost
        model), so that :func:`min_prefill_attention` can reuse a table for an equal law; None: never
        reused.
    """

    name: str
    token_time: Callable[[int], np.ndarray]
    fixed_s: float
    tail_slope: float
    decode_attention: Callable[[np.ndarray], np.ndarray] | None
    prefill_attention: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
    split_period: int | None
    batch_time: Callable[..., float]
    content_key: str | None = None


def law_from_cost_model(cm: CostModel, overhead_s: float | None = None) -> BatchLaw:
    """The batch-time law of a cost model, built on ``linear_table``, ``T_D_SA``, ``T_P_SA``.

    Parameters
    ----------
    cm : CostModel
    overhead_s : float, optional
        Fixed time per batch in place of ``cm.overhead_s`` (default: ``cm.overhead_s``, 0 reproduces
        Eq. 7); ``c_fix`` is it plus the attention calls ``N attention_call_s``
        (:attr:`theory.cost.CostModel.fixed_s`).

    Notes
    -----
    ``tail_slope`` is Eq. 4's floor ``min_t 1 / (mu_Lin(t) t_col) + 1 / mu_nLin``, a lower bound
    on ``G(tau) / tau`` for Eq. 4; with cost terms on (:mod:`theory.terms`) it is their infimum
    ``l* + 1 / mu_nLin`` (:func:`theory.cost.linear_per_token`; ``a / b0`` under a staircase law).
    :func:`capacity_bound` checks it on the table. ``split_period`` is the LCM of the tiles' t_col
    (module docstring); with ``attention_waves`` or ``lm_head`` (a row per chunk) splitting can
    cost more, so it is None and the DP tries every size (``waves`` on the linear GeMMs leaves
    Eq. 6, and so the split property, unchanged). ``lm_head``'s row per
    decode and per chunk is part of ``A_D`` and ``A_P``. With ``mixed_decode_eta`` a decode costs
    more or less beside a prefill chunk than alone (:mod:`theory.terms`), so ``A_D`` is the smaller
    of the two per position (:func:`theory.cost.T_D_SA_least`): part (a) of the proof still holds,
    and ``batch_time`` is the exact Eq. 7 of the batch.

    References
    ----------
    Eq. 4-7.
    """
    c_fix = cm.overhead_s if overhead_s is None else overhead_s
    if not (math.isfinite(float(c_fix)) and float(c_fix) >= 0):
        raise FieldError("overhead_s", overhead_s, "a finite number >= 0")
    cm_fixed = replace(cm, overhead_s=float(c_fix))

    def token_time(tau_max: int) -> np.ndarray:
        return linear_table(cm, tau_max) + np.arange(tau_max + 1) / cm.mu_nLin

    def batch_time(prefill=(), decode=()) -> float:
        return T_batch(cm_fixed, Batch.of(prefill=prefill, decode=decode))

    if cm.lin is None:
        tail_slope = float(np.min(1.0 / (cm.mu_Lin * cm.t_col)) + 1.0 / cm.mu_nLin)
    else:
        tail_slope = linear_per_token(cm) + 1.0 / cm.mu_nLin
    row = cm.lm_out_s  # lm_head: one vocab-projection row per decode and per prefill chunk
    return BatchLaw(
        name=f"{cm.describe()}, c_fix = {cm_fixed.fixed_s:.4g} s", token_time=token_time,
        fixed_s=cm_fixed.fixed_s, tail_slope=tail_slope,
        decode_attention=((lambda i: cm.N * T_D_SA_least(cm, i) + row) if row
                          else (lambda i: cm.N * T_D_SA_least(cm, i))),
        prefill_attention=(lambda i, c: T_P_SA(cm, i, c) + row) if row else (lambda i, c: T_P_SA(cm, i, c)),
        split_period=None if (cm.attention_waves or row) else int(np.lcm.reduce(cm.t_col)),
        batch_time=batch_time,
        content_key=hashlib.sha256(pickle.dumps(cm_fixed)).hexdigest())


def staircase_law(c: float, a: float, b0: int) -> BatchLaw:
    """``t(b) = c + a ceil(b / b0)`` for a batch of ``b >= 1`` tokens, attention off.

    References
    ----------
    Li, Dai, Peng (2025), arXiv:2504.07347 (batch time as a function of the batch's tokens).
    """
    if not (math.isfinite(float(c)) and float(c) >= 0):
        raise FieldError("c", c, "a finite number >= 0")
    require_positive("a", a)
    require_positive_int("b0", b0)

    def token_time(tau_max: int) -> np.ndarray:
        return a * (-(-np.arange(tau_max + 1) // b0)).astype(float)

    def batch_time(prefill=(), decode=()) -> float:
        b = sum(int(ch[1]) for ch in prefill) + len(list(decode))
        return 0.0 if b == 0 else float(c + a * math.ceil(b / b0))

    return BatchLaw(name=f"staircase c={c:.4g}, a={a:.4g}, b0={b0}", token_time=token_time,
                    fixed_s=float(c), tail_slope=float(a) / b0, decode_attention=None,
                    prefill_attention=None, split_period=None, batch_time=batch_time)


def _as_law(law: BatchLaw | CostModel, overhead_s: float | None = None) -> BatchLaw:
    if isinstance(law, CostModel):
        return law_from_cost_model(law, overhead_s)
    if isinstance(law, BatchLaw):
        if overhead_s is not None:
            raise FieldError("overhead_s", overhead_s, "None for a BatchLaw (set BatchLaw.fixed_s)")
        return law
    raise FieldError("law", type(law).__name__, "a BatchLaw or a theory.cost.CostModel")


def _check_caps(b_max, q_max) -> tuple[int | None, int | None]:
    if b_max is not None:
        b_max = require_positive_int("b_max", b_max)
    if q_max is not None:
        q_max = require_positive_int("max_decodes", q_max)
    return b_max, q_max


# --- the pieces -------------------------------------------------------------------------------


def min_prefill_attention(law: BatchLaw, L_max: int, b_max: int | None = None) -> np.ndarray:
    """``f(L)``, L = 0..L_max: least prefill attention over chunkings of ``1..L`` (chunks <= b_max).

    ``f(0) = 0``, ``f(e) = min_{1 <= c <= min(e, C)} f(e - c) + A_P(e - c + 1, c)`` with
    ``C = min(b_max, split_period)`` (module docstring); vectorised calls of ``A_P`` build the
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
        if len(_PREFILL_TABLES) >= _PREFILL_TABLES_KEPT:
            _PREFILL_TABLES.pop(next(iter(_PREFILL_TABLES)))
        _PREFILL_TABLES[key] = f.copy()
    return f


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
        The LP's primal optimum (HiGHS), equal to ``per_request_s`` up to solver tolerance.
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
    """Least token-count-plus-fixed time per request, ``Phi`` (the LP of the module docstring).

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
    b_max, q = _check_caps(b_max, max_decodes)
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


# --- the bound --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityBound:
    """A certified upper bound on the stable request rate (module docstring's theorem).

    Attributes
    ----------
    bound : float
        ``min(lam_C, lam_M)``, requests per second over the r GPUs.
    binds : str
        ``"compute"`` or ``"kv-memory"``.
    lam_compute, lam_kv : float
        ``r / T_bar_W`` and ``r M / E[K]`` (``inf`` when no KV capacity is given).
    work_per_request_s : float
        ``T_bar_W = Phi + E[D] + E[f(L_P)]``.
    pieces_s : dict
        ``{"linear+fixed": Phi, "decode_attention": E[D], "prefill_attention": E[f(L_P)]}``.
    best_batch_tokens : int or None
        A batch size attaining ``min F(tau) / tau`` (None: approached as tau -> infinity).
    batch_mix : dict
        An optimal LP mix ``{tau: batches per request}``.
    kv_token_seconds : float
        ``E[K]``, the certified KV-token-seconds per request (nan without M).
    r : int
    b_max, max_decodes : int or None
    law : str
    """

    bound: float
    binds: str
    lam_compute: float
    lam_kv: float
    work_per_request_s: float
    pieces_s: dict
    best_batch_tokens: int | None
    batch_mix: dict
    kv_token_seconds: float
    r: int
    b_max: int | None
    max_decodes: int | None
    law: str = field(default="")


def kv_token_seconds(law: BatchLaw, w: Workload, b_max: int | None = None,
                     horizon: int = DEFAULT_HORIZON) -> np.ndarray:
    """Certified KV-token-seconds ``K(L_P, L_D)`` per support point (module docstring).

    ``K = sum_{k=1}^{L_D} (L_P + k - 1) (F_min + A_D(L_P + k))`` with ``F_min`` the least time of a
    non-empty batch.
    """
    b_max, _ = _check_caps(b_max, None)
    H = b_max if b_max is not None else require_positive_int("horizon", horizon)
    F = np.asarray(law.token_time(H), dtype=float)[1:] + law.fixed_s
    F_min = float(F.min())
    if b_max is None:
        F_min = min(F_min, law.fixed_s + law.tail_slope * (H + 1))
    top = int((w.L_P + w.L_D).max())
    pos = np.arange(1, top + 1)
    a_d = (np.zeros(top) if law.decode_attention is None
           else np.asarray(law.decode_attention(pos), dtype=float))
    per = (pos - 1) * (F_min + a_d)  # decode at position i holds i - 1 tokens for >= F_min + A_D(i)
    S = np.concatenate([[0.0], np.cumsum(per)])
    return S[w.L_P + w.L_D] - S[w.L_P]


def kv_capacity_tokens(cm: CostModel, gpu_memory_utilization: float = 0.9) -> float:
    """KV-cache tokens that fit beside the weights in ``gpu_memory_utilization`` of one GPU's memory
    (the ``M`` of the KV-memory bound): ``(u M_gpu - W) / b_kv`` with ``b_kv`` the model's KV bytes per
    token; 0.9 is vLLM's default ``gpu_memory_utilization`` (vllm-project/vllm, ``EngineArgs``).
    For a tensor-parallel replica, ``W`` and ``b_kv`` are one GPU's shares
    (:func:`theory.terms.shard_memory`), and the result is the replica's capacity."""
    if not 0 < gpu_memory_utilization <= 1:
        raise FieldError("gpu_memory_utilization", gpu_memory_utilization, "a fraction in (0, 1]")
    weights, kv_per_token = shard_memory(cm.model, cm.gpu.terms.tp)
    return max(0.0, (gpu_memory_utilization * cm.gpu.memory_bytes - weights) / kv_per_token)


def capacity_bound(law: BatchLaw | CostModel, w: Workload, r: int = 1, *, b_max: int | None = None,
                   max_decodes: int | None = None, kv_tokens: float | None = None,
                   overhead_s: float | None = None, horizon: int = DEFAULT_HORIZON) -> CapacityBound:
    """The certified capacity ``min(lam_C, lam_M)`` of the module docstring's two theorems.

    Parameters
    ----------
    law : BatchLaw or CostModel
        A cost model is wrapped by :func:`law_from_cost_model` (with ``overhead_s``).
    w : Workload
    r : int
        Number of GPUs.
    b_max, max_decodes : int, optional
        Token budget and decode cap per batch.
    kv_tokens : float, optional
        ``M``, KV-cache capacity per GPU in tokens (None: no memory bound).
    overhead_s : float, optional
        Per-batch fixed time for a cost model (default ``cm.overhead_s``).
    horizon : int
        Batch sizes tabulated when ``b_max`` is None.

    Returns
    -------
    CapacityBound

    References
    ----------
    Bari, Hegde, de Veciana (2025), Theorem 1 (generalised); Li, Dai, Peng (2025).
    """
    r = require_positive_int("r", r)
    b_max, q = _check_caps(b_max, max_decodes)
    if not isinstance(w, Workload):
        raise FieldError("w", type(w).__name__, "a theory.workload.Workload")
    law = _as_law(law, overhead_s)
    m_tok = w.expect(w.L_P + w.L_D)
    m_dec = w.expect(w.L_D)
    lin = linear_fixed_cost(law, m_tok, m_dec, b_max, q, horizon)
    dec = w.expect(decode_attention_sums(law, w))
    f = min_prefill_attention(law, w.l_P_max, b_max)
    pre = w.expect(f[w.L_P])
    work = lin.per_request_s + dec + pre
    lam_c = r / work
    if kv_tokens is None:
        lam_m, kv = math.inf, float("nan")
    else:
        require_positive("kv_tokens", kv_tokens)
        kv = w.expect(kv_token_seconds(law, w, b_max, horizon))
        lam_m = r * float(kv_tokens) / kv if kv > 0 else math.inf
    bound = min(lam_c, lam_m)
    return CapacityBound(
        bound=bound, binds="compute" if lam_c <= lam_m else "kv-memory", lam_compute=lam_c,
        lam_kv=lam_m, work_per_request_s=work,
        pieces_s={"linear+fixed": lin.per_request_s, "decode_attention": dec, "prefill_attention": pre},
        best_batch_tokens=lin.best_tau, batch_mix=lin.batch_mix, kv_token_seconds=kv, r=r,
        b_max=b_max, max_decodes=q, law=law.name)


# --- explicit feasible schedules and the check ------------------------------------------------


def lockstep_throughput(law: BatchLaw | CostModel, w: Workload, r: int = 1, *, group: int,
                        chunk: int, b_max: int | None = None, max_decodes: int | None = None,
                        overhead_s: float | None = None) -> float:
    """Throughput (req/s) of an explicit feasible schedule: groups of ``group`` same-length requests.

    Per support point ``(L_P, L_D)``: the group's prompts advance in lock step, chunk ``s`` of
    every prompt (``PI(R, 1 + s chunk, min(chunk, L_P - s chunk))``) in one batch, then ``L_D``
    batches of ``group`` decodes; batches are timed by ``law.batch_time`` (for a cost model,
    :func:`theory.cost.T_batch`). Serving each length class in its own groups sustains
    ``r / E[W]`` with ``W`` the group's time per request. Returns 0 when the schedule breaks a cap.
    """
    law = _as_law(law, overhead_s)
    group = require_positive_int("group", group)
    chunk = require_positive_int("chunk", chunk)
    r = require_positive_int("r", r)
    b_max, q = _check_caps(b_max, max_decodes)
    if (b_max is not None and group > b_max) or (q is not None and group > q):
        return 0.0
    per = np.empty(w.p.size)
    for j, (lp, ld) in enumerate(zip(w.L_P.tolist(), w.L_D.tolist(), strict=True)):
        t = 0.0
        for s in range(-(-lp // chunk)):
            c = min(chunk, lp - s * chunk)
            if b_max is not None and group * c > b_max:
                return 0.0
            t += law.batch_time(prefill=[(1 + s * chunk, c)] * group, decode=[])
        for k in range(1, ld + 1):
            t += law.batch_time(prefill=[], decode=[lp + k] * group)
        per[j] = t / group
    return r / w.expect(per)


@dataclass(frozen=True)
class BoundCheck:
    """Verdict of :func:`check_bound_against`.

    Attributes
    ----------
    verdict : str
        ``"PASS"`` when ``best_feasible <= claimed <= certified`` (within ``rtol``); ``"FAIL"``
        otherwise.
    reason : str
    claimed, certified, best_feasible : float
    witness : dict
        The schedule (group, chunk) of ``best_feasible``.
    """

    verdict: str
    reason: str
    claimed: float
    certified: float
    best_feasible: float
    witness: dict


def check_bound_against(claimed: float, law: BatchLaw | CostModel, w: Workload, r: int = 1, *,
                        b_max: int | None = None, max_decodes: int | None = None,
                        overhead_s: float | None = None, groups=(1, 16, 128, 256),
                        chunks=(64, 128, 256, 512), rtol: float = 1e-9) -> BoundCheck:
    """Judge a claimed capacity (req/s) against explicit schedules and the certified bound.

    A claimed capacity is refuted from below if a feasible lock-step schedule
    (:func:`lockstep_throughput` over ``groups x chunks``) sustains more (then it is not an upper
    bound on throughput: e.g. the printed lam* of Theorem 1 where the chunking lemma fails), and
    from above if it exceeds :func:`capacity_bound` (no scheduler reaches it: e.g. lam* ignoring a
    per-batch fixed time under a token budget).

    Returns
    -------
    BoundCheck
    """
    require_positive("claimed", claimed)
    law = _as_law(law, overhead_s)
    cert = capacity_bound(law, w, r, b_max=b_max, max_decodes=max_decodes).bound
    best, wit = 0.0, {}
    for g in groups:
        for c in chunks:
            x = lockstep_throughput(law, w, r, group=g, chunk=c, b_max=b_max, max_decodes=max_decodes)
            if x > best:
                best, wit = x, {"group": g, "chunk": c}
    if best > claimed * (1 + rtol):
        return BoundCheck("FAIL", f"a feasible schedule {wit} sustains {best:.6g} req/s > claimed "
                                  f"{claimed:.6g} (+{best / claimed - 1:.3%}): not an upper bound",
                          claimed, cert, best, wit)
    if claimed > cert * (1 + rtol):
        return BoundCheck("FAIL", f"claimed {claimed:.6g} req/s exceeds the certified bound {cert:.6g} "
                                  f"(+{claimed / cert - 1:.3%}): no scheduler attains it",
                          claimed, cert, best, wit)
    return BoundCheck("PASS", f"{best:.6g} <= claimed {claimed:.6g} <= certified {cert:.6g}",
                      claimed, cert, best, wit)


def rad_overhead_rate_bound(cm: CostModel, w: Workload, r: int = 1, overhead_s: float | None = None) -> float:
    """An upper bound on RAD's stable rate when every batch pays ``c_fix`` (module docstring).

    RAD (Algorithm 1) runs each prefill chunk of ``t*_lcm`` tokens alone (``ceil(L_P / t*_lcm)``
    batches per request) and at most ``t*_col`` decodes per batch, so its time per request is at
    least the c_fix = 0 work ``T_bar_W`` plus ``c_fix (E[ceil(L_P / t*_lcm)] + E[L_D] / t*_col)``.

    References
    ----------
    Algorithm 1, lines 6-16.
    """
    law = law_from_cost_model(cm, overhead_s)
    base = capacity_bound(law_from_cost_model(cm, 0.0), w, r).work_per_request_s
    t = cm.t_star
    n_batches = w.expect(-(-w.L_P // t.t_lcm)) + w.expect(w.L_D) / t.t_col
    return r / (base + law.fixed_s * n_batches)


__all__ = ["DEFAULT_HORIZON", "BatchLaw", "BoundCheck", "CapacityBound", "LinearFixedCost",
           "capacity_bound", "check_bound_against", "decode_attention_sums", "kv_token_seconds",
           "law_from_cost_model", "linear_fixed_cost", "lockstep_throughput", "min_prefill_attention",
           "rad_overhead_rate_bound", "staircase_law"]
