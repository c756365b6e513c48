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
:func:`theory.capacity.law.law_from_cost_model` builds one from ``T_Lin``/``linear_table``,
``T_D_SA``, ``T_P_SA`` and ``overhead_s`` of a :class:`theory.cost.CostModel` (not from Eq. 2's
internals), so new terms of ``T_Lin`` plug in; :func:`staircase_law` gives ``t(b) = c + a
ceil(b / b0)`` with attention off. Optional caps: a token budget ``b_max`` (``tau <= b_max``,
hence chunks ``c <= b_max``) and at most ``q_max`` decodes per batch.

Theorem (compute bound). Let ``H`` be the largest batch size tabulated (``b_max`` if given) and
``sigma`` a per-token slope with ``G(tau) >= sigma tau`` for every ``tau > H`` (the law's
``tail_slope``). Define, per request,

* ``f(L)``: the least ``sum A_P(i, c)`` over chunkings of ``1..L`` with chunks ``c <= b_max``
  (a dynamic programme, :func:`theory.capacity.pieces.min_prefill_attention`);
* ``D(L_P, L_D) = sum_{k=1}^{L_D} A_D(L_P + k)``;
* ``Phi``: the value of the linear programme (LP)::

      min  sum_tau y_tau F(tau)   s.t.  sum_tau tau y_tau >= E[L_P + L_D],
                                       sum_tau min(tau, q_max) y_tau >= E[L_D],  y >= 0,

  over ``tau = 1..H`` (plus, when ``b_max`` is None, a tail column of cost ``sigma`` per token),
  which :func:`theory.capacity.pieces.linear_fixed_cost` evaluates by its dual: any ``u, v >= 0`` with
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
preset, by a small margin that ``llmq bounds`` prints). With a fixed
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

Mixture of experts. A MoE model (:mod:`theory.moe`) changes nothing in the theorem: its routed
experts' grouped GeMMs depend on the batch's token count alone, so their expected time
``MoETerms.time(tau)`` is part of ``T_Lin(tau)`` (:func:`theory.cost.T_Lin`, through
``linear_table``) and enters ``G(tau)`` for every ``tau``, and through it only; attention, and so
``A_D``, ``A_P`` and the KV bound (on the attention's ``n_kv_heads head_dim``; every expert's
weights resident), are the dense model's. What changes is the shape of ``G(tau) / tau``: a small
batch streams the weights of every expert it touches for few tokens, so the work per token is no
longer about constant past one tile but falls with the batch, as the experts are shared, towards
``MoETerms.per_token_limit``, which is also its infimum: per weight and tile the column blocks
``sum_e ceil(n_e / t_col)`` are at least ``tau k / t_col``, the floor's bytes at least the slots'
activations, and waves and launch times only add. So ``sigma`` (``l*`` of
:func:`theory.cost.linear_per_token`, which adds that limit) is a valid tail slope, and the LP's
best batch is the best composition under the token budget: with ``b_max`` the least ``F(tau) /
tau`` over ``tau <= b_max`` (near the budget, not necessarily at it: wave quantization leaves
``F(tau) / tau`` non-monotone); without one a supremum approached only by very large batches. The
bound is attained only by policies that form such batches, and their requests' KV must fit: where
it does not, the best batch is unreachable and the KV bound (certified but loose) does not say so.

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
deterministic L_P = 512, L_D = 64, r = 1: lam_C lies above lam* without caps and below it with
b_max = 2048; RAD's bound lies well below lam* (so Theorem 2 fails for small eps), while lock-step
groups of 256 and of 1024 requests (chunks of 128) come ever closer to lam_C (the test computes
each figure).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7, Theorem 1, Theorem 2, Algorithm 1, Appendix B.
Li, Dai, Peng (2025), "Throughput-optimal scheduling algorithms for LLM inference and AI agents",
arXiv:2504.07347 (the stability condition ``lam (m_p + m_d) < b / t_b`` of work-conserving
policies).

Modules
-------
law     the batch-time law (:class:`BatchLaw`) of a cost model or of the staircase law
pieces  the three pieces of the certified work: ``f(L)``, ``D(L_P, L_D)`` and ``Phi``
bound   the certified capacity and the KV-memory bound (:func:`capacity_bound`)
check   explicit feasible schedules and the check of a claimed capacity against both
"""

from __future__ import annotations

from theory.capacity.bound import CapacityBound, capacity_bound, kv_capacity_tokens, kv_token_seconds
from theory.capacity.check import (
    BoundCheck,
    Schedules,
    check_bound_against,
    lockstep_throughput,
    rad_overhead_rate_bound,
)
from theory.capacity.law import BatchLaw, law_from_cost_model, staircase_law
from theory.capacity.pieces import (
    DEFAULT_HORIZON,
    LinearFixedCost,
    decode_attention_sums,
    linear_fixed_cost,
    min_prefill_attention,
)

__all__ = ["DEFAULT_HORIZON", "BatchLaw", "BoundCheck", "CapacityBound", "LinearFixedCost", "Schedules",
           "capacity_bound", "check_bound_against", "decode_attention_sums", "kv_capacity_tokens",
           "kv_token_seconds", "law_from_cost_model", "linear_fixed_cost", "lockstep_throughput",
           "min_prefill_attention", "rad_overhead_rate_bound", "staircase_law"]
