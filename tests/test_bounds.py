"""Theorem 1/2 quantities: exact pmf formulas vs Monte Carlo, vs sympy, and their properties."""

from dataclasses import replace

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import symbolic as sym
from theory.bounds import (
    T_bar_R,
    T_bar_R_terms,
    T_max,
    T_max_corrected,
    T_max_described,
    compute_bounds,
    cycle_time_bound,
    lambda_star,
    lemma3_drift_bound,
    lemma4_bound,
    n_threshold,
)
from theory.cost import T_D_SA, build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.workload import Workload, get_workload

CM = build_cost_model(get_gpu("a100"), get_model("mistral-7b"), "paper")
SCM = sym.SymbolicCostModel.from_cost_model(CM)


def optimal_work_of_one_request(cm, l_P, l_D):
    """Eq. 11 for one request, term by term with plain loops (no prefix sums, no pmf)."""
    t = cm.t_star
    k = 0
    work = (l_P + l_D) / (cm.mu_Lin[k] * t.t_col) + (l_P + l_D) / cm.mu_nLin
    work += cm.N * float(np.sum(T_D_SA(cm, np.arange(l_P + 1, l_P + l_D + 1))))
    att = 0.0
    for i in range(1, l_P + 1, t.t_lcm):  # chunk set I_j of Appendix B.1
        c, e = t.t_lcm, i + t.t_lcm - 1
        att += e / t.t_row * c / t.t_col * cm.d_pre / t.t_red + cm.d_pre / t.t_row * c / t.t_col * e / t.t_red
    return work + cm.N / (cm.s * cm.mu[k]) * att


def test_T_bar_R_agrees_with_a_monte_carlo_mean_within_its_99pct_ci():
    w = get_workload("table1").padded(CM.t_lcm)
    lp, ld = w.sample(3000, np.random.default_rng(2025))
    work = np.array([optimal_work_of_one_request(CM, int(a), int(b)) for a, b in zip(lp, ld,
                                                                                      strict=True)])
    half = 2.576 * work.std(ddof=1) / np.sqrt(work.size)
    assert abs(work.mean() - T_bar_R(CM, w)) <= half


def test_T_bar_R_numeric_equals_exact_rational():
    w = Workload.from_pairs("x", [256, 512, 768, 256], [1, 40, 7, 300], [0.1, 0.2, 0.3, 0.4])
    exact = sym.T_bar_R_exact(SCM, w)
    assert T_bar_R(CM, w) == pytest.approx(float(exact), rel=1e-12)


def test_theorem1_moment_form_equals_the_pmf_sum_exactly():
    """Theorem 1 writes T_bar^R through three moments of the length law; computed from the pmf
    as exact rationals they give the pmf-weighted sum of Eq. 11 to the last digit."""
    w = Workload.from_pairs("x", [256, 512, 768, 256], [1, 40, 7, 300], [0.1, 0.2, 0.3, 0.4])
    lcm = sp.ilcm(*SCM.tiles[0][:3])
    p = [sym.exact(float(q)) for q in w.p]
    pairs = [(int(a), int(b)) for a, b in zip(w.L_P, w.L_D, strict=True)]
    e_total = sp.Add(*[q * (a + b) for q, (a, b) in zip(p, pairs, strict=True)])
    e_pp = sp.Add(*[q * a * (a + lcm) for q, (a, b) in zip(p, pairs, strict=True)])
    e_dsa = sp.Add(*[q * sp.Add(*[SCM.T_D_SA(sp.Integer(a + i)) for i in range(1, b + 1)])
                     for q, (a, b) in zip(p, pairs, strict=True)])
    moments = sym.T_bar_R_expr(SCM.printed(0), E_total=e_total, E_PP=e_pp, E_DSA=e_dsa)
    assert sp.simplify(moments - sym.T_bar_R_exact(SCM, w)) == 0
    # two-sided: the moment form with t*_lcm left out of E_PP is not T_bar^R
    e_pp_wrong = sp.Add(*[q * a * a for q, (a, b) in zip(p, pairs, strict=True)])
    wrong = sym.T_bar_R_expr(SCM.printed(0), E_total=e_total, E_PP=e_pp_wrong, E_DSA=e_dsa)
    assert sp.simplify(wrong - sym.T_bar_R_exact(SCM, w)) != 0


@pytest.mark.parametrize("l_P, l_D", [(256, 1), (512, 30), (1024, 5)])
def test_eq11_equals_eq12_exactly(l_P, l_D):
    assert sp.simplify(SCM.T_star_R(l_P, l_D) - SCM.T_star_R_closed(l_P, l_D)) == 0


@pytest.mark.parametrize("l_P_max, l_D_max", [(1, 1), (100, 20), (300, 64)])
def test_T_max_numeric_equals_symbolic(l_P_max, l_D_max):
    assert T_max(CM, l_P_max, l_D_max) == pytest.approx(float(SCM.T_max(l_P_max, l_D_max)),
                                                        rel=1e-12)


@pytest.mark.parametrize("l_P_max, l_D_max", [(1, 1), (100, 20), (300, 64)])
def test_T_max_described_numeric_equals_symbolic(l_P_max, l_D_max):
    got, tile = T_max_described(CM, l_P_max, l_D_max)
    assert got == pytest.approx(float(SCM.T_max_described(l_P_max, l_D_max)), rel=1e-12)
    assert tile in CM.tiles


def test_T_max_corrected_is_the_described_schedule_where_eq13_prices_prompts_as_gemvs():
    """Eq. 13 prices prompt token i as a decode GeMV; its own text serves it as Eq. 6's chunk of one
    at the schedule's tile, which costs more on the A100 preset (eq13.tmax), so the corrected T^max
    is the described schedule there and Theorem 2's n grows with it. Without attention the two
    prices of a prompt token vanish alike and the corrected T^max is the printed one."""
    w = get_workload("table1")
    printed, described = T_max(CM, w.l_P_max, w.l_D_max), T_max_described(CM, w.l_P_max, w.l_D_max)[0]
    assert described > printed and T_max_corrected(CM, w.l_P_max, w.l_D_max) == described
    b = compute_bounds(CM, w, 1, 0.1)
    assert b.T_max_s == printed and b.T_max_corrected_s == described
    assert b.n_min_corrected == n_threshold(CM.t_star.t_col, described, b.T_bar_R_s, 0.1) > b.n_min
    assert b.cycle_bound_corrected_s == pytest.approx(
        cycle_time_bound(b.n_min_corrected, b.T_bar_R_s, b.t_col, described), rel=1e-12)
    assert b.lemma4_bound_corrected_s == pytest.approx(
        lemma4_bound(b.n_min_corrected, described, b.lambda_star * 0.9, 1), rel=1e-12)
    assert b.cycle_bound_corrected_s > b.cycle_bound_s and b.lemma4_bound_corrected_s > b.lemma4_bound_s
    model = get_model("mistral-7b")
    flat = build_cost_model(get_gpu("a100"), replace(model, terms=replace(model.terms, attention=False)),
                            "real")
    assert T_max_described(flat, 300, 64)[0] == pytest.approx(T_max(flat, 300, 64), rel=1e-12)
    assert T_max_corrected(flat, 300, 64) == pytest.approx(T_max(flat, 300, 64), rel=1e-12)


@settings(max_examples=200)
@given(st.integers(1, 512), st.floats(1e-3, 1e4), st.floats(1e-3, 10), st.floats(1e-4, 0.999))
def test_n_threshold_is_the_smallest_integer_above_the_bound(t_col, tmax, tbar, eps):
    n = n_threshold(t_col, tmax, tbar, eps)
    bound = sym.n_threshold_expr(t_col, sym.exact(tmax), sym.exact(eps), sym.exact(tbar))
    assert n > bound and (n - 1 <= bound or n == 1)


@settings(max_examples=200)
@given(st.integers(1, 10**6), st.floats(1e-4, 10), st.integers(1, 512), st.floats(1e-3, 1e3),
       st.floats(1e-3, 100), st.integers(1, 8))
def test_cycle_lemma_bounds_match_their_expressions(n, tbar, t_col, tmax, lam, r):
    assert cycle_time_bound(n, tbar, t_col, tmax) == pytest.approx(
        float(sym.cycle_bound_expr(n, sym.exact(tbar), t_col, sym.exact(tmax))), rel=1e-12)
    assert lemma4_bound(n, tmax, lam, r) == pytest.approx(
        float(sym.lemma4_expr(n, sym.exact(tmax), sym.exact(lam), r)), rel=1e-12)
    for printed in (False, True):
        assert lemma3_drift_bound(n, lam, r, tbar, t_col, tmax, printed) == pytest.approx(
            float(sym.lemma3_drift_expr(n, sym.exact(lam), r, sym.exact(tbar), t_col,
                                        sym.exact(tmax), printed)), rel=1e-9, abs=1e-9)


def test_printed_and_corrected_lemma3_agree_only_for_one_node():
    args = (1000, 1.0, 1, 0.5, 128, 10.0)
    assert lemma3_drift_bound(*args) == lemma3_drift_bound(*args, printed=True)
    args = (1000, 1.0, 4, 0.5, 128, 10.0)
    assert lemma3_drift_bound(*args) < lemma3_drift_bound(*args, printed=True)


def test_corrected_T_bar_R_lowers_only_the_prefill_attention_term():
    w = get_workload("table1").padded(CM.t_lcm)
    printed, corrected = T_bar_R_terms(CM, w), T_bar_R_terms(CM, w, corrected=True)
    t = CM.t_star
    coef = CM.N * CM.d_pre / (CM.s * CM.mu[0] * t.t_row * t.t_col * t.t_red)
    diff = coef * (t.t_lcm - 1) * w.expect(w.L_P)  # N d E[L^P] (t_lcm - 1) / (s mu t t t)
    assert printed["prefill_attention"] - corrected["prefill_attention"] == pytest.approx(diff, rel=1e-9)
    assert all(printed[k] == corrected[k] for k in printed if k != "prefill_attention")
    assert lambda_star(CM, w, corrected=True) > lambda_star(CM, w)


def test_n_threshold_grows_as_epsilon_shrinks():
    b = [compute_bounds(CM, get_workload("table1"), 1, eps).n_min for eps in (0.5, 0.1, 0.01)]
    assert b[0] < b[1] < b[2]


def test_lambda_star_depends_on_the_gpu_and_scales_with_r():
    w = get_workload("table1")
    h100 = build_cost_model(get_gpu("h100"), get_model("mistral-7b"))
    assert lambda_star(h100, w) > lambda_star(CM, w)
    assert lambda_star(CM, w, r=4) == pytest.approx(4 * lambda_star(CM, w), rel=1e-12)


def test_T_max_dominates_every_requests_optimal_work():
    w = get_workload("deterministic:2048,512")
    assert T_max(CM, 2048, 512) > T_bar_R(CM, w)


@pytest.mark.parametrize("call", [
    lambda: compute_bounds(CM, get_workload("table1"), 0, 0.1),
    lambda: compute_bounds(CM, get_workload("table1"), 1, 1.5),
    lambda: n_threshold(128, 1.0, 1.0, 0.0),
    lambda: lambda_star(CM, get_workload("table1"), r=-2),
    lambda: lemma4_bound(10, 1.0, -1.0),
])
def test_bad_inputs(call):
    with pytest.raises(FieldError):
        call()
