"""paper_checks.beyond_paper: every judge returns both verdicts; a deliberately wrong bound is caught;
the checks stand apart from the items they extend.

The judges take the numbers a check computes; here they get the right ones (from independent
routes where the check computes them otherwise) and wrong ones.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from paper_checks import beyond_paper as bp
from paper_checks.registry import Verdict, all_checks, register
from theory.bounds import lambda_star
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound, rad_overhead_rate_bound
from theory.errors import FieldError
from theory.workload import get_workload


@pytest.fixture(scope="module")
def overhead_case():
    return bp._overhead_case()


def test_theorem1_judge_passes_the_certified_bound_and_catches_wrong_ones(overhead_case):
    cm, w = overhead_case
    cert = capacity_bound(cm, w, b_max=bp.OVERHEAD_BUDGET).bound
    assert bp.judge_capacity_claim(cert, cm, w, bp.OVERHEAD_BUDGET, "certified").verdict is Verdict.PASS
    too_high = bp.judge_capacity_claim(1.02 * cert, cm, w, bp.OVERHEAD_BUDGET, "wrong")
    assert too_high.verdict is Verdict.FAIL and "exceeds the certified bound" in too_high.summary
    too_low = bp.judge_capacity_claim(0.5 * cert, cm, w, bp.OVERHEAD_BUDGET, "wrong")
    assert too_low.verdict is Verdict.FAIL and "not an upper bound" in too_low.summary
    # lambda* ignores c_fix: the registered check fails, with the instance to replay
    res = bp.beyond_thm1_overhead(True)
    assert res.verdict is Verdict.FAIL and res.counterexample["token_budget"] == bp.OVERHEAD_BUDGET
    assert res.counterexample["claimed (lambda*) req/s"] == pytest.approx(lambda_star(cm, w))


def test_theorem1_holds_without_overhead_where_the_chunking_lemma_holds():
    # t*_row <= t*_col on the 128x128 tile: lambda* is the certified bound (theory.capacity tests)
    cm = cost_model(CostSpec("a100", "mistral-7b", tiles="128x128"))
    w = get_workload("deterministic:512,64")
    assert bp.judge_capacity_claim(lambda_star(cm, w), cm, w, None, "lambda*").verdict is Verdict.PASS


def test_rad_judge_both_verdicts(overhead_case):
    cm, w = overhead_case
    feasible, at = bp._best_lockstep(cm, w)
    assert bp.judge_rad(cm, w, bp.EPSILON, rad_overhead_rate_bound(cm, w), feasible, at).verdict \
        is Verdict.FAIL
    cm0 = replace(cm, overhead_s=0.0)
    f0, at0 = bp._best_lockstep(cm0, w)
    rad0 = rad_overhead_rate_bound(cm0, w)
    assert bp.judge_rad(cm0, w, bp.EPSILON, rad0, f0, at0).verdict is Verdict.PASS
    wrong = bp.judge_rad(cm0, w, bp.EPSILON, 0.5 * rad0, f0, at0)  # a deliberately wrong RAD bound
    assert wrong.verdict is Verdict.FAIL and "unstable" in wrong.summary


def test_beyond_checks_extend_items_and_cover_none():
    beyond = {c.id: c for c in all_checks() if c.section == "beyond"}
    assert set(beyond) == {"beyond.thm1_overhead", "beyond.thm2_rad_overhead", "beyond.moe_capacity",
                           "beyond.planner_prices", "beyond.planner_tie_break"}
    for key in ("beyond.thm1_overhead", "beyond.moe_capacity", "beyond.planner_prices",
                "beyond.planner_tie_break"):
        assert beyond[key].extends == ("Theorem 1",) and not beyond[key].items
    assert beyond["beyond.thm2_rad_overhead"].extends == ("Theorem 2",)
    card = {"location": "Beyond the paper", "claim": "c", "method": "m", "level": "sample"}
    with pytest.raises(FieldError):  # a beyond check must not cover the items it extends
        register("test.beyond_covering", items=("Theorem 1",), section="beyond", extends=("Theorem 1",),
                 **card)(lambda fast: None)
    with pytest.raises(FieldError):  # nor extend nothing
        register("test.beyond_empty", items=(), section="beyond", **card)(lambda fast: None)
    with pytest.raises(FieldError):  # and only a beyond check extends
        register("test.paper_extending", items=("Eq. 2",), extends=("Theorem 1",), **card)(lambda fast: None)


def test_moe_capacity_judge_catches_a_low_bound_and_an_unattained_one():
    """The judge on the check's own simulated runs: the certified bound PASSes; a bound 10% low lies
    wholly below the policies' intervals (FAIL: not an upper bound); one 10% high is not attained
    within 2% (FAIL)."""
    bound, runs, case = bp.moe_capacity_runs(True)
    assert bp.judge_moe_capacity(bound, runs, case).verdict is Verdict.PASS
    low = bp.judge_moe_capacity(0.9 * bound, runs, case)
    assert low.verdict is Verdict.FAIL and "more than the certified bound" in low.summary
    high = bp.judge_moe_capacity(1.1 * bound, runs, case)
    assert high.verdict is Verdict.FAIL and "below the bound" in high.summary
    # the bound is the LP's with the budget, recomputed here from the cost model
    cm = cost_model(CostSpec(bp.MOE_GPU, bp.MOE_MODEL, mode="real"))
    w = get_workload(bp.MOE_WORKLOAD)
    assert bound == pytest.approx(capacity_bound(cm, w, b_max=bp.MOE_BUDGET).bound, rel=1e-12)
