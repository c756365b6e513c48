"""Throughput bounds: T_bar^R, T^max, lambda* = r / T_bar^R, Theorem 2's n, Eq. 25, Lemmas 3-4.

Theorem 1 (upper bound). With ``t*`` the optimal tile of Assumption 1 and ``t*_lcm`` its LCM::

    T_bar^R = E[L^P + L^D] / (mu_Lin(t*) t*_col) + E[L^P + L^D] / mu_nLin
              + N E[sum_{i=1}^{L^D} T^{D,SA}(L^P + i)]
              + N d / (s mu(t*) t*_row t*_col t*_red) E[L^P (L^P + t*_lcm)]

and no planner and scheduler are stable when ``lambda T_bar^R > r``: ``lambda* = r / T_bar^R``.

Erratum (``llmq check``: ``prop1.drain_lower_bound``, ``thm1.upper_bound``): the minimal prefill
attention over all chunkings is ``N d L^P (L^P + 1) / (s mu t t t)``, not ``... (L^P + t*_lcm)``
(chunks smaller than t*_lcm cost less), so the printed T_bar^R over-states the least mean work and
its lambda* is not a valid upper bound. ``corrected=True`` gives the corrected T_bar^R, whose
``r / T_bar^R`` is one; the two differ by a few hundredths of a percent on the presets.

Theorem 2 (RAD). With ``T^max`` the worst-case time of one request (Eq. 13), RAD with
``n > (t*_col - 1) T^max / (eps T_bar^R)`` is stable for ``lambda T_bar^R <= r (1 - eps)``.
Its proof bounds the cycle time (Eq. 25), ``E[T_cycle] <= n T_bar^R + (t*_col - 1) T^max``, and
the drift of the cycle DTMC (Lemma 3), and Lemma 4 bounds every cycle's mean length by
``r / lambda + n T^max``.

Erratum (``llmq check``: ``eq13.tmax``): Eq. 13 prices each prompt token as a decode GeMV, less
than the chunk of one token its own text describes (Eq. 6), so the described schedule takes longer
than the printed T^max on Table 1's lengths (``llmq bounds`` prints both), and a request served
alone by RAD can exceed
it (the H200, RTX 4090 and RTX PRO 6000 real-mode presets at (1, 1)). :func:`T_max_corrected`
is the max of the two (:func:`T_max_described`); :class:`Bounds` reports Theorem 2's n, Eq. 25
and Lemma 4 under both.

Terms beyond Eq. 2 (:mod:`theory.terms`, all off by default) change the inputs as that module's
docstring states: the linear term becomes ``E[L^P + L^D] l*`` with ``l* = inf_tau T_Lin(tau)/tau``
(:func:`theory.cost.linear_per_token`), the attention terms vanish without attention, ``lm_head``
adds ``(E[L^D] + 1) h``, and ``T^max`` takes the linear time of a one-token batch under the terms
(:func:`theory.cost.linear_single`) plus, per token, the fixed time per batch
(:attr:`theory.cost.CostModel.fixed_s`: ``overhead_s`` and ``N attention_call_s``) and ``h``. With
every term off the formulas are the printed ones, computed along the same lines.

Each function here has a symbolic twin in :mod:`theory.symbolic`; tests check they agree.

References
----------
Bari, Hegde, de Veciana (2025), Theorems 1-2, Eq. 12-13, Eq. 25, Lemmas 3-4.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

from theory import added_time, cost
from theory.capacity.law import law_from_cost_model
from theory.cost import (
    T_D_SA,
    T_P_SA,
    CostModel,
    T_D_SA_least,
    decode_prefix,
    linear_per_token,
    linear_single,
)
from theory.errors import FieldError, require_positive, require_positive_int
from theory.hardware import Tile
from theory.workload import Workload


def T_bar_R_terms(cm: CostModel, w: Workload, corrected: bool = False) -> dict[str, float]:
    """The four terms of T_bar^R (Theorem 1), in seconds, keyed by what they pay for.

    ``corrected=True`` uses E[L^P (L^P + 1)] in the prefill-attention term (see the module
    docstring's erratum) instead of the printed E[L^P (L^P + t*_lcm)].

    With terms on (:mod:`theory.terms`) the linear term is ``E[L^P + L^D] l*``, the prefill
    attention term is 0 without attention (and with ``attention_waves`` stays the unwaved lower
    bound), the decode term takes the smaller of Eq. 5 and the mixed-batch law per position
    (``mixed_decode_eta``, :func:`theory.cost.T_D_SA_least`),
    ``lm_head`` adds the key ``"lm_head"``: ``(E[L^D] + 1) h``, and the added-time terms with a
    per-decode time add the key ``"added"``: ``E[sum_{k=1}^{L^D} a(L^P + k)]``
    (:func:`theory.added_time.decode_sums`; their per-batch time is amortized, as ``overhead_s``).

    The prefill-attention term keeps Theorem 1's unpadded ``d / (t_row t_col t_red)`` at t*. In
    real mode a width ``d`` that t*_row or t*_red does not divide is priced by Eq. 6 with
    ``ceil(d / t)`` (partial tiles, :func:`theory.cost_model.build_cost_model`); the term is then
    a lower bound of that work (``ceil(x) >= x``), no longer attained by RAD's chunks.

    Implements Eqs. 23 and 24 (per request: E[T^PM] / n and E[T^DM] / n).

    References
    ----------
    Theorem 1; Eq. 12 (T*_R(j), whose mean it is).
    """
    t = cm.t_star
    total = w.L_P + w.L_D
    S = decode_prefix(cm, int(total.max()), law="least")
    k = 0  # t* is index 0 of the cost model's tile arrays
    coef = cm.N * cm.d_pre / (cm.s * cm.mu[k] * t.t_row * t.t_col * t.t_red)
    if cm.lin is None:
        linear = float(w.expect(total) / (cm.mu_Lin[k] * t.t_col))
    else:
        linear = float(w.expect(total)) * linear_per_token(cm)
    prefill = 0.0
    if cm.attention:
        prefill = float(coef * w.expect(w.L_P * (w.L_P + (1 if corrected else t.t_lcm)).astype(float)))
    terms = {
        "linear": linear,
        "nonlinear": float(w.expect(total) / cm.mu_nLin),
        "decode_attention": float(cm.N * w.expect(S[total] - S[w.L_P])),
        "prefill_attention": prefill,
    }
    if cm.lm_out_s:
        terms["lm_head"] = cm.lm_out_s * (float(w.expect(w.L_D)) + 1.0)
    if cm.added and added_time.adds_per_decode(cm):
        terms["added"] = float(w.expect(added_time.decode_sums(cm, w.L_P, w.L_D)))
    return terms


def T_bar_R(cm: CostModel, w: Workload, corrected: bool = False) -> float:
    """Mean optimal work per request T_bar^R (Theorem 1), seconds; ``corrected`` as in
    :func:`T_bar_R_terms`.

    References
    ----------
    Theorem 1.
    """
    return float(sum(T_bar_R_terms(cm, w, corrected).values()))


def T_max(cm: CostModel, l_P_max: int, l_D_max: int) -> float:
    """Worst-case time to complete one request alone, T^max (Theorem 2, Eq. 13), seconds.

    ``max over tiles of (l/mu_Lin(t) + l/mu_nLin + N sum_{i=1}^{l} T^{D,SA}(i))`` with
    ``l = l^{P,max} + l^{D,max}``: every token processed alone, as a GeMV. Each of those ``l``
    one-token batches also pays the profile's fixed time per batch (``overhead_s`` and ``N
    attention_call_s``, :attr:`theory.cost.CostModel.fixed_s`; 0 in Eq. 13) and, with ``lm_head``,
    one vocab-projection row; with terms on, ``1/mu_Lin(t)`` is the linear time of a one-token
    batch at tile t (:func:`theory.cost.linear_single`), and each token, a decode of Eq. 13, pays
    the added-time terms' per-decode time (:func:`theory.added_time.decode_s`).

    Implements Eq. 13.

    References
    ----------
    Theorem 2; Eq. 13.
    """
    require_positive_int("l_P_max", l_P_max)
    require_positive_int("l_D_max", l_D_max)
    ell = l_P_max + l_D_max
    S = decode_prefix(cm, ell)
    t = float(ell * (linear_single(cm) + cost.one_token_batch_rest(cm)) + cm.N * S[ell])
    if cm.added:
        t += float(added_time.decode_s(cm, np.arange(1, ell + 1)).sum())
    return t


def T_max_described(cm: CostModel, l_P_max: int, l_D_max: int) -> tuple[float, Tile]:
    """The schedule Eq. 13's text describes for T^max, timed by Eq. 7: its seconds and tile.

    Theorem 2 defines T^max as the time of the worst way to serve one request: maximal lengths,
    the prompt in chunks of one token, every iteration alone, one tile for all GeMMs. Each of the
    ``l = l^{P,max} + l^{D,max}`` one-token iterations is a batch of Eq. 7 at tile t: the linear
    time of one token (:func:`theory.cost.T_Lin` at t), ``1/mu_nLin``, the profile's fixed time
    per batch and, with ``lm_head``, one vocab-projection row; prompt token i adds Eq. 6's chunk of
    one at t, decode j adds ``N T^{D,SA}(j)`` (Eq. 5) and the added-time terms' per-decode time.
    The max over tiles.

    Eq. 13 as printed (:func:`T_max`) prices prompt token i as a decode GeMV, ``N T^{D,SA}(i)``,
    which is less than Eq. 6's chunk of one; so this schedule can take longer than the printed
    T^max (``llmq check``: ``eq13.tmax``).

    References
    ----------
    Theorem 2; Eq. 5-7, Eq. 13.
    """
    require_positive_int("l_P_max", l_P_max)
    require_positive_int("l_D_max", l_D_max)
    ell = l_P_max + l_D_max
    prompt = np.arange(1, l_P_max + 1)
    decode = cm.N * float(cost.T_D_SA(cm, np.arange(l_P_max + 1, ell + 1)).sum())
    if cm.added:  # the decodes' added time (the prompt tokens are chunks of one, not decodes)
        decode += float(added_time.decode_s(cm, np.arange(l_P_max + 1, ell + 1)).sum())
    per_batch = cost.one_token_batch_rest(cm)
    best, tile = -1.0, cm.tiles[0]
    for k, t in enumerate(cm.tiles):
        total = (ell * (float(cost.T_Lin(cm, 1, tile=k)) + per_batch)
                 + float(cost.T_P_SA(cm, prompt, np.ones_like(prompt), tile=k).sum()))
        if total > best:
            best, tile = total, t
    return best + decode, tile


def T_max_corrected(cm: CostModel, l_P_max: int, l_D_max: int) -> float:
    """T^max that is what Theorem 2 says it is: ``max(T^max as printed, the described schedule)``
    (:func:`T_max`, :func:`T_max_described`). It bounds the schedule Eq. 13's text describes by
    construction, and RAD serving the request alone on every GPU x model x mode x length case
    ``llmq check``'s ``eq13.tmax`` times (where the printed T^max does not always).

    References
    ----------
    Theorem 2; Eq. 13; Lemmas 1 and 4 (which use that a request alone finishes within T^max).
    """
    return max(T_max(cm, l_P_max, l_D_max), T_max_described(cm, l_P_max, l_D_max)[0])


def lambda_star(cm: CostModel, w: Workload, r: int = 1, corrected: bool = False) -> float:
    """Theorem 1's throughput limit lambda* = r / T_bar^R, requests per second (``corrected``: with
    the corrected T_bar^R, a valid upper bound).

    Implements Theorem 1.

    References
    ----------
    Theorem 1.
    """
    return require_positive_int("r", r) / T_bar_R(cm, w, corrected)


def n_threshold(t_col: int, T_max_value: float, T_bar_R_value: float, epsilon: float) -> int:
    """Smallest integer n with ``n > (t*_col - 1) T^max / (eps T_bar^R)`` (Theorem 2).

    Implements Theorem 2.

    References
    ----------
    Theorem 2.
    """
    require_positive_int("t_col", t_col)
    require_positive("T_max", T_max_value)
    require_positive("T_bar_R", T_bar_R_value)
    if not (0 < epsilon < 1):
        raise FieldError("epsilon", epsilon, "a number in (0, 1)")
    # exact rational arithmetic: a float quotient can round onto the integer it should exceed
    bound = Fraction(t_col - 1) * Fraction(T_max_value) / (Fraction(epsilon) * Fraction(T_bar_R_value))
    return max(1, math.floor(bound) + 1)


def cycle_time_bound(n: int, T_bar_R_value: float, t_col: int, T_max_value: float) -> float:
    """Eq. 25: E[T_cycle] <= n T_bar^R + (t*_col - 1) T^max when a cycle starts with >= n requests.

    Implements Eq. 25.

    References
    ----------
    Eq. 25 (Appendix C.2).
    """
    require_positive_int("n", n)
    return n * T_bar_R_value + (t_col - 1) * T_max_value


def lemma4_bound(n: int, T_max_value: float, lam: float, r: int = 1) -> float:
    """Lemma 4: every cycle's mean length is at most r / lambda + n T^max.

    Implements Lemma 4.

    References
    ----------
    Lemma 4 (Appendix C.4).
    """
    require_positive_int("n", n)
    require_positive("lambda", lam)
    return require_positive_int("r", r) / lam + n * T_max_value


def lemma3_drift_bound(n: int, lam: float, r: int, T_bar_R_value: float, t_col: int,
                       T_max_value: float, printed: bool = False) -> float:
    """Lemma 3's bound on the drift E[X[c+1] - X[c] | X[c] = x], x >= n, of the cycle DTMC.

    The corrected form follows from Eq. 25 and Poisson(lambda/r) arrivals at a node::

        n (lambda T_bar^R / r - 1) + (lambda / r) (t*_col - 1) T^max

    ``printed=True`` gives the expression as printed, whose second term has ``lambda`` where
    ``lambda / r`` belongs (the two agree for r = 1).

    Implements Lemma 3.

    References
    ----------
    Lemma 3 (Appendix C.3).
    """
    require_positive_int("n", n)
    require_positive("lambda", lam)
    require_positive_int("r", r)
    rate = lam if printed else lam / r
    return n * (lam / r * T_bar_R_value - 1) + rate * (t_col - 1) * T_max_value


@dataclass(frozen=True)
class Bounds:
    """Everything ``llmq bounds`` reports for one GPU, model, workload, r and epsilon."""

    gpu: str
    model: str
    workload: str
    mode: str
    r: int
    epsilon: float
    t_star: str
    t_row: int
    t_col: int
    t_red: int
    t_lcm: int
    T_bar_R_s: float
    T_max_s: float
    T_max_corrected_s: float
    lambda_star: float
    lambda_star_corrected: float
    n_min: int
    n_min_corrected: int
    cycle_bound_s: float
    lemma4_bound_s: float
    cycle_bound_corrected_s: float
    lemma4_bound_corrected_s: float
    l_P_max: int
    l_D_max: int
    assumption3_mass: float
    terms_s: dict

    def as_dict(self) -> dict:
        return asdict(self)


def compute_bounds(cm: CostModel, w: Workload, r: int = 1, epsilon: float = 0.1) -> Bounds:
    """Theorem 1/2 quantities for ``cm`` and ``w`` with r nodes and margin epsilon.

    The Eq. 25 and Lemma 4 bounds are evaluated at Theorem 2's smallest n and at the load
    ``lambda = lambda* (1 - epsilon)``; the ``*_corrected`` fields with the corrected T^max
    (:func:`T_max_corrected`) and the n it gives.
    """
    require_positive_int("r", r)
    if not (0 < epsilon < 1):
        raise FieldError("epsilon", epsilon, "a number in (0, 1)")
    t: Tile = cm.t_star
    terms = T_bar_R_terms(cm, w)
    tbar = float(sum(terms.values()))
    tmax = T_max(cm, w.l_P_max, w.l_D_max)
    tmax_corrected = T_max_corrected(cm, w.l_P_max, w.l_D_max)
    n_min = n_threshold(t.t_col, tmax, tbar, epsilon)
    n_corrected = n_threshold(t.t_col, tmax_corrected, tbar, epsilon)
    lam = r / tbar
    return Bounds(
        gpu=cm.gpu.key, model=cm.model.spec_name, workload=w.name, mode=cm.mode, r=r, epsilon=epsilon,
        t_star=str(t), t_row=t.t_row, t_col=t.t_col, t_red=t.t_red, t_lcm=t.t_lcm,
        T_bar_R_s=tbar, T_max_s=tmax, T_max_corrected_s=tmax_corrected, lambda_star=lam,
        lambda_star_corrected=lambda_star(cm, w, r, corrected=True), n_min=n_min,
        n_min_corrected=n_corrected,
        cycle_bound_s=cycle_time_bound(n_min, tbar, t.t_col, tmax),
        lemma4_bound_s=lemma4_bound(n_min, tmax, lam * (1 - epsilon), r),
        cycle_bound_corrected_s=cycle_time_bound(n_corrected, tbar, t.t_col, tmax_corrected),
        lemma4_bound_corrected_s=lemma4_bound(n_corrected, tmax_corrected, lam * (1 - epsilon), r),
        l_P_max=w.l_P_max, l_D_max=w.l_D_max, assumption3_mass=w.assumption3(t.t_lcm),
        terms_s=terms)


# Where Theorems 1-2 and the certified capacity (theory.capacity) take each cost term of
# theory.cost_terms: the functions whose inputs carry it (theory.terms, "Theorem 1's inputs"). An
# added-time term reaches them through its slots (theory.added_time) and is not listed here.
BOUNDS_TERMS: dict[str, tuple] = {
    "memory_floor": (linear_per_token, linear_single),
    "waves": (linear_per_token, linear_single),
    "attention_waves": (T_max_described, law_from_cost_model),
    "l2_bandwidth_gbs": (linear_per_token, linear_single),
    "overhead_s": (T_max, T_max_described, law_from_cost_model),
    "gemm_overhead_s": (linear_single, T_max),
    "attention_call_s": (T_max, T_max_described, law_from_cost_model),
    "mixed_decode_eta": (T_bar_R_terms, T_D_SA_least, law_from_cost_model),
    "linear_law": (linear_per_token, linear_single, law_from_cost_model),
    "gemm_profile": (linear_per_token, linear_single),
    "tp": (linear_per_token, linear_single),
    "attention": (T_bar_R_terms, T_max, T_D_SA, T_P_SA),
    "lm_head": (T_bar_R_terms, T_max, law_from_cost_model),
    "moe": (linear_per_token, linear_single, T_bar_R_terms, law_from_cost_model),
    "ep": (linear_per_token, linear_single),
    "cudagraph_capture_sizes": (linear_single, law_from_cost_model),  # through T_Lin (theory.engine_terms)
}
