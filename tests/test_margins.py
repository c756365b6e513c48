"""Margins (paper_checks.margins): derived from the comparison, printed, and just enough to flip."""

import math

import pytest

from paper_checks import margins
from paper_checks.registry import Result, Verdict, outcome
from theory.errors import FieldError


def test_ratio_margin_is_the_factor_onto_the_threshold():
    assert margins.ratio_margin(1.2, 1.0) == pytest.approx(0.2)
    assert margins.ratio_margin(1.0, 1.2) == pytest.approx(0.2)  # q = 1 <= 1.2: x1.2 reaches it
    assert margins.ratio_margin(-3.0, -1.0) == pytest.approx(2.0)
    assert margins.ratio_margin(1.0, -1.0) == math.inf  # no scaling crosses a threshold of the other sign


def test_least_margin_is_the_closest_pair():
    pairs = [(2.0, 1.0), (1.05, 1.0), (0.5, 1.0)]
    assert margins.least_margin(margins.ratio_margin(q, t) for q, t in pairs) == pytest.approx(0.05)
    assert margins.least_margin([]) == math.inf


def test_interval_margin_moves_the_nearer_end_past_the_reference():
    # reference 26 inside [20, 30]: scaling by 26/30 (down) or 26/20 (up): the nearer is x30/26
    assert margins.interval_margin(26.0, 20.0, 30.0) == pytest.approx(30 / 26 - 1)
    # negative quantities: -53 inside [-68, -37]
    assert margins.interval_margin(-53.0, -68.0, -37.0) == pytest.approx(min(68 / 53, 53 / 37) - 1)
    # an interval through 0: only the end of the reference's sign can reach it
    assert margins.interval_margin(5.0, -1.0, 10.0) == pytest.approx(1.0)


def test_margin_text():
    assert margins.margin_text(None) == "—"
    assert margins.margin_text(0.125) == "12.5%"
    assert margins.margin_text(2.2) == "x3.2"
    assert margins.margin_text(math.inf) == "inf"


def test_result_refuses_a_margin_off_a_pass_and_a_wide_margin_without_its_blind_spot():
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.FAIL, "s", counterexample={"x": 1}, margin=0.1)
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.PASS, "s", coverage="c", margin=float("nan"))
    with pytest.raises(FieldError, match="blind_spot"):
        Result(Verdict.PASS, "s", coverage="c", margin=1.5)
    assert Result(Verdict.PASS, "s", coverage="c", margin=1.5, blind_spot="b").margin == 1.5


def test_outcome_keeps_the_margin_on_a_pass_only():
    ok = outcome(True, summary="s", coverage="c", margin=0.3)
    bad = outcome(False, summary="s", coverage="c", counterexample={"x": 1}, margin=0.3)
    assert ok.margin == 0.3 and bad.margin is None


def test_the_report_prints_each_margin_and_what_a_wide_one_cannot_see():
    from paper_checks.registry import Check
    from paper_checks.report import margin_counts, outcome_dict, summary_table, to_markdown
    from paper_checks.runner import Outcome

    def fake(fast):
        raise AssertionError("not run")

    check = Check(id="x.fake", location="nowhere", items=(), claim="c", method="m", run=fake)
    narrow = Outcome(check, Result(Verdict.PASS, "s", coverage="c", margin=0.125), None, 0.0)
    wide = Outcome(check, Result(Verdict.PASS, "s", coverage="c", margin=3.0, blind_spot="a 3x error"),
                   None, 0.0)
    assert "12.5%" in summary_table([narrow]) and "x4" in summary_table([wide])
    assert outcome_dict(wide)["margin"] == 3.0 and outcome_dict(wide)["blind_spot"] == "a 3x error"
    md = to_markdown([narrow, wide], fast=True)
    assert "**Margin**: 12.5%" in md and "**Cannot see**: a 3x error" in md
    assert margin_counts([narrow, wide]) == {"PASS": 2, "with a margin": 2, "margin above x2": 1}
