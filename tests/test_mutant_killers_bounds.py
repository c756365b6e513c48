"""Theorem 1/2 quantities at r > 1 nodes and at the edges the random tests rarely hit.

Written to kill mutants of :mod:`theory.bounds` (see ``benchmarks/mutation.py``): a node behind
the uniformly random planner sees lambda / r, so each r-node quantity must equal the one-node
quantity at lambda / r (a scaling identity, not the formula again); Theorem 2's n must exceed
its bound strictly, which only matters when the bound is an integer (checked by brute force in
exact rationals).
"""

from fractions import Fraction

import pytest

from theory.bounds import (
    T_bar_R,
    compute_bounds,
    cycle_time_bound,
    lambda_star,
    lemma3_drift_bound,
    lemma4_bound,
    n_threshold,
)
from theory.cost import build_cost_model
from theory.hardware import get_gpu
from theory.models import get_model
from theory.workload import get_workload

CM = build_cost_model(get_gpu("a100"), get_model("mistral-7b"), "paper")
W = get_workload("table1").padded(CM.t_lcm)


@pytest.mark.parametrize("r", [2, 3, 7])
def test_r_nodes_are_one_node_at_lambda_over_r(r):
    one, many = compute_bounds(CM, W, 1), compute_bounds(CM, W, r)
    assert many.lambda_star == pytest.approx(r * one.lambda_star, rel=1e-12)
    assert many.lambda_star_corrected == pytest.approx(r * one.lambda_star_corrected, rel=1e-12)
    # Lemma 4 is evaluated at lambda = lambda* (1 - eps), i.e. the same per-node load for every r
    assert many.lemma4_bound_s == pytest.approx(one.lemma4_bound_s, rel=1e-12)
    assert many.n_min == one.n_min and many.cycle_bound_s == pytest.approx(one.cycle_bound_s, rel=1e-12)
    lam = 0.9 * many.lambda_star
    args = (one.T_bar_R_s, one.t_col, one.T_max_s)
    assert lemma3_drift_bound(one.n_min, lam, r, *args) == pytest.approx(
        lemma3_drift_bound(one.n_min, lam / r, 1, *args), rel=1e-12)
    assert lemma4_bound(one.n_min, one.T_max_s, lam, r) == pytest.approx(
        lemma4_bound(one.n_min, one.T_max_s, lam / r, 1), rel=1e-12)


@pytest.mark.parametrize("r", [2, 5])
def test_corrected_lemma3_is_poisson_arrivals_over_eq25_minus_n(r):
    """Lemma 3's corrected bound: (lambda / r) times Eq. 25's cycle bound, minus the n completions."""
    b = compute_bounds(CM, W, r)
    lam = 0.8 * b.lambda_star
    eq25 = cycle_time_bound(b.n_min, b.T_bar_R_s, b.t_col, b.T_max_s)
    assert lemma3_drift_bound(b.n_min, lam, r, b.T_bar_R_s, b.t_col, b.T_max_s) == pytest.approx(
        lam / r * eq25 - b.n_min, rel=1e-9)


def brute_force_n(t_col, tmax, tbar, eps):
    """The smallest integer n >= 1 with n eps T_bar > (t_col - 1) T_max, by counting up."""
    n = 1
    while not n * Fraction(eps) * Fraction(tbar) > (t_col - 1) * Fraction(tmax):
        n += 1
    return n


@pytest.mark.parametrize("t_col, tmax, tbar, eps", [
    (5, 0.5, 0.25, 0.5),  # bound 16 exactly
    (2, 1.0, 1.0, 0.25),  # bound 4 exactly
    (129, 0.125, 2.0, 0.5),  # bound 16 exactly
    (3, 0.75, 0.5, 0.375),  # bound 8 exactly
    (7, 0.3, 0.2, 0.1),  # not an integer
])
def test_n_threshold_is_strictly_above_an_integer_bound(t_col, tmax, tbar, eps):
    assert n_threshold(t_col, tmax, tbar, eps) == brute_force_n(t_col, tmax, tbar, eps)


def test_corrected_lambda_star_uses_the_corrected_T_bar_R():
    """The corrected T_bar^R is below the printed one by N d E[L^P] (t*_lcm - 1) / (s mu t t t) (the
    one-token rather than t*_lcm-token offset of Theorem 1's prefill term), so 1 / lambda* moves by
    that over r."""
    t = CM.t_star
    coef = CM.N * CM.d_pre / (CM.s * get_gpu("a100").rate(t) * t.t_row * t.t_col * t.t_red)
    e_lp = sum(float(p) * int(lp) for lp, p in zip(W.L_P, W.p, strict=True))
    for r in (1, 4):
        gap = 1 / lambda_star(CM, W, r) - 1 / lambda_star(CM, W, r, corrected=True)
        assert gap == pytest.approx(coef * e_lp * (t.t_lcm - 1) / r, rel=1e-9)
    assert T_bar_R(CM, W, corrected=True) < T_bar_R(CM, W)


def test_compute_bounds_defaults_to_one_node_and_a_ten_percent_margin():
    """``compute_bounds(cm, w)`` is the single-node case (r = 1) at Theorem 2's margin
    epsilon = 0.1, as its signature documents: lambda* = 1 / T_bar^R (Theorem 1) and the same
    numbers as the explicit call.

    Kills ``theory/bounds.py:325:56:NumberReplacer:53`` (the default ``r = 1`` -> ``r = 0``),
    which every test passed r to explicitly."""
    default = compute_bounds(CM, W)
    assert default.lambda_star == pytest.approx(1 / T_bar_R(CM, W), rel=1e-12)
    assert default == compute_bounds(CM, W, r=1, epsilon=0.1)
