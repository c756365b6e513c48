"""Margins: how far the quantity a check computes may move before its PASS flips.

A check that compares a computed quantity ``q`` with a bound, a threshold or an interval PASSes
by some distance. Its *margin* is the smallest relative perturbation of ``q`` that flips the
verdict: the least ``m >= 0`` such that ``q * (1 + m)`` or ``q / (1 + m)`` (whichever direction
flips) crosses the comparison. It is derived analytically from the check's own comparison,
never by search:

* one comparison ``q <= t`` or ``q >= t`` (same sign): ``m = max(q / t, t / q) - 1``
  (:func:`ratio_margin`);
* several compared pairs: the least of their margins (:func:`least_margin`);
* a reference value ``p`` inside an interval ``[lo, hi]`` computed from ``q`` (a confidence
  interval scales with the estimate): the least factor that moves an end of the interval past
  ``p`` (:func:`interval_margin`); an end of the other sign than ``p`` never reaches it;
* an end of the t-interval of paired differences ``x - y`` against 0, ``x`` computed: the least
  growth of ``x`` that moves that end onto 0, a root of a quadratic (:func:`t_test_margin`);
* a stability verdict of a simulation: :func:`paper_checks.simulated.verdict_margin`.

A margin above :data:`BLIND_ABOVE` (the quantity may be off by more than a factor of two and the
check still PASSes) must come with a *blind spot*: what such an error does that the check cannot
see (:class:`paper_checks.registry.Result`).

Every PASS states its margin; a check that compares no quantity with a bound states which of two
kinds it is instead of a number, and the report prints the kind:

* :data:`EXACT` (``"exact"``, margin 0): a computed quantity of the library *equals* an
  independent value (an integer count, an exact rational or sympy expression, a float to
  round-off): any relative perturbation above round-off flips the PASS;
* :data:`NOT_APPLICABLE` (``"n/a"``): no quantity of the library is compared with a threshold: a
  reading of the printed text, a symbolic statement proved over the whole parameter family, or a
  predicate on discrete structure (an order, a membership, which request a batch holds) that no
  scaling of a quantity moves; such a check flips on a changed statement or a changed rule
  (``tests/test_paper_checks_two_sided.py``), not on a size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

BLIND_ABOVE = 1.0  # a margin above 1 is a factor above 2: the check must say what it cannot see
EXACT = "exact"  # an equality of a computed quantity: margin 0
NOT_APPLICABLE = "n/a"  # no computed quantity against a threshold (a reading, a proof, a discrete predicate)
KINDS = (EXACT, NOT_APPLICABLE)

Margin = float | str  # a relative size >= 0, or one of KINDS


def _factor_margin(r: float) -> float:
    """``max(r, 1/r) - 1`` for a positive ratio ``r`` (``inf`` for 0 or infinity)."""
    if r <= 0 or not math.isfinite(r):
        return math.inf
    return max(r, 1.0 / r) - 1.0


def ratio_margin(q: float, threshold: float) -> float:
    """The margin of a PASS comparing ``q`` with ``threshold`` (``q <= t`` or ``q >= t``): the
    relative perturbation of ``q`` that brings it onto ``threshold``.

    ``inf`` when ``q`` and ``threshold`` differ in sign or one is 0 (no scaling of ``q`` crosses
    the threshold; the check cannot be flipped by an error of ``q``'s size).
    """
    if q == 0 or threshold == 0 or (q > 0) != (threshold > 0):
        return math.inf
    return _factor_margin(q / threshold)


def least_margin(margins: Iterable[float]) -> float:
    """The margin of a PASS over several comparisons: the least of theirs (``inf`` if none)."""
    return min(margins, default=math.inf)


def interval_margin(reference: float, lo: float, hi: float) -> float:
    """The margin of a PASS "``reference`` lies in ``[lo, hi]``" where the interval scales with the
    computed quantity: the least factor moving ``lo`` or ``hi`` onto ``reference``.

    Only an end of the same sign as ``reference`` can reach it under scaling; ``inf`` when neither
    can (an interval through 0 and a reference of 0).
    """
    ends = [e for e in (lo, hi) if e != 0 and reference != 0 and (e > 0) == (reference > 0)]
    return least_margin(_factor_margin(reference / e) for e in ends)


def t_test_margin(x, y, confidence: float, end: str = "lower") -> float:
    """The margin of a PASS that reads one end of the two-sided ``confidence`` t-interval of the
    paired differences ``x - y`` against 0: ``end="lower"`` for the test "mean <= 0" that rejects
    when the lower end exceeds 0 (:func:`paper_checks.common.bound_test`), ``end="upper"`` for "the
    mean is negative" shown by an upper end below 0. The margin is the least relative growth
    ``f - 1`` of the computed samples ``x`` that moves that end of the interval of ``f x - y`` onto 0.

    The ends are ``f a - b -+ sqrt(k (f^2 v_x - 2 f c + v_y))`` (``a``, ``b`` the means, ``v`` the
    variances, ``c`` the covariance, ``k = t^2 / N``, ``t`` the Student quantile); one is 0 where
    ``(f a - b)^2 = k (f^2 v_x - 2 f c + v_y)``, the lower end with ``f a >= b``, the upper with
    ``f a <= b``: the least such root ``f >= 1`` of that quadratic (``inf`` if none).
    """
    from theory.stats import t_quantile

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    cov = np.cov(x, y, ddof=1)
    k = t_quantile(confidence, x.size - 1) ** 2 / x.size
    a, b = float(x.mean()), float(y.mean())
    quad = (a * a - k * cov[0, 0], -2 * (a * b - k * cov[0, 1]), b * b - k * cov[1, 1])
    roots = [float(r.real) for r in np.roots(quad) if abs(r.imag) < 1e-12]
    side = 1 if end == "lower" else -1
    return least_margin(f - 1 for f in roots if f >= 1 and side * (f * a - b) >= 0)


def blind_spot(margin: Margin, text: str) -> str:
    """``text`` (what the check cannot see) where ``margin`` is above :data:`BLIND_ABOVE`, else ``""``."""
    return text if not isinstance(margin, str) and margin > BLIND_ABOVE else ""


def margin_text(margin: Margin | None) -> str:
    """The margin as printed: a percentage, a factor ``x(1 + margin)`` above :data:`BLIND_ABOVE`,
    ``"inf"``, its kind (:data:`KINDS`), or ``"—"`` when none was derived."""
    if margin is None:
        return "—"
    if isinstance(margin, str):
        return margin
    if not math.isfinite(margin):
        return "inf"
    return f"x{1 + margin:.3g}" if margin > BLIND_ABOVE else f"{100 * margin:.3g}%"


# --- margins read off a check's recorded evidence --------------------------------------------------
#
# A check that does not compute its margin itself may still record the comparison it made; its
# margin is then derived from that record here, by the same rules. Each entry maps a check id to a
# function of the PASS result's evidence returning (margin, blind spot).


def _executed_cycles(evidence: dict) -> tuple[float, str]:
    # appC2.executed_cycles rejects "mean <= bound" when the 99% interval's lower end exceeds the
    # bound; scaling the cycle times scales that end
    m = least_margin(ratio_margin(row["test"]["ci"][0], row["test"]["bound"]) for row in evidence["cycles"])
    return m, ("Eq. 25's (t*_col - 1) T^max term dwarfs a cycle: cycle times wrong by less than this factor "
               "still pass; eq25.repaired_executed tests the tight bound")


def _decode_bound(evidence: dict) -> tuple[float, str]:
    # eq24.decode_bound: every inequality lhs <= rhs, recorded as its largest lhs / rhs
    return least_margin(ratio_margin(r, 1.0) for r in evidence["largest lhs/rhs per inequality"].values()), ""


def _executed_drift(evidence: dict) -> tuple[float, str]:
    # lemma3.executed_drift rejects "mean drift <= the corrected bound" when the 99% interval's lower
    # end exceeds it; scaling the drift samples scales that end
    bound = next(c["paper"] for c in evidence["checks"] if c["name"] == "Lemma 3 corrected")
    return ratio_margin(evidence["ci"][0], bound), (
        "the executed drift is far below the corrected bound: a drift wrong by less than this factor "
        "towards zero still passes; the sign of the drift, not its size, is what stability needs")


FROM_EVIDENCE = {"appC2.executed_cycles": _executed_cycles, "eq24.decode_bound": _decode_bound,
                 "lemma3.executed_drift": _executed_drift}


def from_evidence(check_id: str, evidence: dict) -> tuple[float | None, str]:
    """(margin, blind spot) of a PASS of ``check_id`` read off its ``evidence`` (:data:`FROM_EVIDENCE`);
    ``(None, "")`` for a check without an entry."""
    derive = FROM_EVIDENCE.get(check_id)
    if derive is None:
        return None, ""
    margin, blind = derive(evidence)
    return margin, blind_spot(margin, blind)
