"""paper_checks.other_papers: every judge returns both verdicts; a deliberately wrong bound is caught.

The judges take the numbers a check computes; here they get the right ones (from independent
routes where the check computes them otherwise) and wrong ones.
"""

from __future__ import annotations

import pytest

from paper_checks import other_papers as op
from paper_checks.registry import Verdict
from theory.workload import get_workload


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
