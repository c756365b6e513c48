"""paper_checks.other_papers: every judge returns both verdicts; a deliberately wrong bound is caught.

The judges take the numbers a check computes; here they get the right ones (from independent
routes where the check computes them otherwise) and wrong ones.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from paper_checks import other_papers as op
from paper_checks.registry import Verdict
from theory.bounds import lambda_star
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound, rad_overhead_rate_bound
from theory.workload import get_workload


@pytest.fixture(scope="module")
def overhead_case():
    return op._overhead_case()


def test_theorem1_judge_passes_the_certified_bound_and_catches_wrong_ones(overhead_case):
    cm, w = overhead_case
    cert = capacity_bound(cm, w, b_max=op.OVERHEAD_BUDGET).bound
    assert op.judge_capacity_claim(cert, cm, w, op.OVERHEAD_BUDGET, "certified").verdict is Verdict.PASS
    too_high = op.judge_capacity_claim(1.02 * cert, cm, w, op.OVERHEAD_BUDGET, "wrong")
    assert too_high.verdict is Verdict.FAIL and "exceeds the certified bound" in too_high.summary
    too_low = op.judge_capacity_claim(0.5 * cert, cm, w, op.OVERHEAD_BUDGET, "wrong")
    assert too_low.verdict is Verdict.FAIL and "not an upper bound" in too_low.summary
    # lambda* ignores c_fix: the registered check fails, with the instance to replay
    res = op.other_thm1_overhead(True)
    assert res.verdict is Verdict.FAIL and res.counterexample["token_budget"] == op.OVERHEAD_BUDGET
    assert res.counterexample["claimed (lambda*) req/s"] == pytest.approx(lambda_star(cm, w))


def test_theorem1_holds_without_overhead_where_the_chunking_lemma_holds():
    # t*_row <= t*_col on the 128x128 tile: lambda* is the certified bound (theory.capacity tests)
    cm = cost_model(CostSpec("a100", "mistral-7b", tiles="128x128"))
    w = get_workload("deterministic:512,64")
    assert op.judge_capacity_claim(lambda_star(cm, w), cm, w, None, "lambda*").verdict is Verdict.PASS


def test_rad_judge_both_verdicts(overhead_case):
    cm, w = overhead_case
    feasible, at = op._best_lockstep(cm, w)
    assert op.judge_rad(cm, w, op.EPSILON, rad_overhead_rate_bound(cm, w), feasible, at).verdict \
        is Verdict.FAIL
    cm0 = replace(cm, overhead_s=0.0)
    f0, at0 = op._best_lockstep(cm0, w)
    rad0 = rad_overhead_rate_bound(cm0, w)
    assert op.judge_rad(cm0, w, op.EPSILON, rad0, f0, at0).verdict is Verdict.PASS
    wrong = op.judge_rad(cm0, w, op.EPSILON, 0.5 * rad0, f0, at0)  # a deliberately wrong RAD bound
    assert wrong.verdict is Verdict.FAIL and "unstable" in wrong.summary


def test_ldp_closed_form_is_the_affine_capacity():
    w = get_workload(op.LDP_WORKLOAD)
    t_b = op.LDP_C + op.LDP_A * op.LDP_BUDGET / op.LDP_B0  # b0 divides b
    assert op.ldp_closed_form(w) == pytest.approx(op.LDP_BUDGET / t_b / w.expect(w.L_P + w.L_D))


def test_work_conserving_judge_both_verdicts():
    cap = 10.0
    good = {"sarathi": (9.95, 9.9, 10.0)}
    assert op.judge_work_conserving(cap, cap, good).verdict is Verdict.PASS
    assert op.judge_work_conserving(1.1 * cap, cap, good).verdict is Verdict.FAIL  # above the bound
    assert op.judge_work_conserving(cap, cap, {"sarathi": (9.0, 8.9, 9.1)}).verdict is Verdict.FAIL


def test_registered_ldp_checks_run_and_a_wrong_capacity_is_caught():
    bound, closed, runs = op._ldp_runs(op.WORK_CONSERVING + op.NOT_WORK_CONSERVING, True)
    assert closed == pytest.approx(bound, rel=1e-12)
    work = {k: v for k, v in runs.items() if k == "sarathi"}
    other = {k: v for k, v in runs.items() if k != "sarathi"}
    assert op.judge_work_conserving(closed, bound, work).verdict is Verdict.PASS
    assert op.judge_work_conserving(1.05 * closed, bound, work).verdict is Verdict.FAIL
    assert op.judge_unstable_below(closed, other).verdict is Verdict.PASS
    assert op.judge_unstable_below(0.5 * closed, other).verdict is Verdict.FAIL
