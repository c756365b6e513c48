"""Margins (paper_checks.margins): derived from the comparison, printed, and just enough to flip."""

import itertools
import math
from functools import partial

import numpy as np
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
    assert margins.margin_text(margins.EXACT) == "exact"
    assert margins.margin_text(margins.NOT_APPLICABLE) == "n/a"


def test_result_refuses_a_margin_off_a_pass_and_a_wide_margin_without_its_blind_spot():
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.FAIL, "s", counterexample={"x": 1}, margin=0.1)
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.PASS, "s", coverage="c", margin=float("nan"))
    with pytest.raises(FieldError, match="blind_spot"):
        Result(Verdict.PASS, "s", coverage="c", margin=1.5)
    assert Result(Verdict.PASS, "s", coverage="c", margin=1.5, blind_spot="b").margin == 1.5
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.PASS, "s", coverage="c", margin="tight")  # a kind not among margins.KINDS
    with pytest.raises(FieldError, match="margin"):
        Result(Verdict.FAIL, "s", counterexample={"x": 1}, margin=margins.EXACT)


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
    exact = Outcome(check, Result(Verdict.PASS, "s", coverage="c", margin=margins.EXACT), None, 0.0)
    na = Outcome(check, Result(Verdict.PASS, "s", coverage="c", margin=margins.NOT_APPLICABLE), None, 0.0)
    assert margin_counts([narrow, wide, exact, na]) == {"PASS": 4, "with a margin": 4, "exact": 1, "n/a": 1,
                                                         "margin above x2": 1}
    table = summary_table([exact, na])
    assert " exact " in table and " n/a " in table  # shown as its kind, not as a blank
    assert outcome_dict(exact)["margin"] == "exact" and "**Margin**: n/a" in to_markdown([na], fast=True)


# --- a perturbation just above the margin flips a real check; just below it does not --------------

EPS = 1e-3


def _scaled(fn, factor, where=None):
    """``fn`` with its result multiplied by ``factor`` (at the argument ``where`` only, if given)."""
    def wrapped(*args):
        value = fn(*args)
        if where is not None and args[-1] != where:
            return value
        return [factor * v for v in value] if isinstance(value, list) else factor * value
    return wrapped


def fig5a_at(mp, k):
    """fig5a.budget_tradeoff with its closest comparison's quantity moved by (1 + margin) k."""
    from paper_checks import figure5

    base = figure5.fig5a_budget_tradeoff(True)
    t, bt = base.evidence["TTFT (s)"], base.evidence["mean batch time (s)"]
    budgets = sorted(bt)
    pairs = [(margins.ratio_margin(t[budgets[0]], t[budgets[-1]]), "ttft", budgets[-1], 1.0)]
    pairs += [(margins.ratio_margin(bt[b], bt[c]), "mean_batch_time", b, 1.0)
              for b, c in itertools.pairwise(budgets)]
    m, name, where, _ = min(pairs)
    assert m == pytest.approx(base.margin)  # the margin is the closest comparison's, recomputed here
    mp.setattr(figure5, name, _scaled(getattr(figure5, name), (1 + m) * k, where))
    return base, figure5.fig5a_budget_tradeoff(True)


def interval_at(mp, check_id, k):
    """An interval check of paper_checks.section7_results with llmq's replicate values scaled by
    (1 + margin) k towards the nearer end of the interval (their mean and interval scale with them)."""
    from paper_checks import section7_results as s7
    from paper_checks.registry import get_check

    base = get_check(check_id).run(True)
    lo, hi = base.evidence["llmq 95% CI"]
    paper = base.evidence["paper"]
    if base.margin is None:  # a FAIL: scale the mean onto the paper's figure
        factor = paper / base.evidence["llmq mean"]
    else:
        up = margins.ratio_margin(paper, lo) <= margins.ratio_margin(paper, hi)
        factor = ((1 + base.margin) * k) ** (1 if up == (paper > 0) else -1)
    mp.setattr(s7, "replicate_values", _scaled(s7.replicate_values, factor))
    return base, get_check(check_id).run(True)


def paired_at(mp, check_id, k):
    """A direction check of paper_checks.section7_results with its better side scaled by
    (1 + margin) k (a FAIL: by the factor that brings the worse side's mean ratio below 1)."""
    from paper_checks import section7_results as s7
    from paper_checks.registry import get_check

    base = get_check(check_id).run(True)
    if base.margin is not None:
        factor = (1 + base.margin) * k
    else:
        b, w = np.asarray(base.evidence["better"]), np.asarray(base.evidence["worse"])
        factor = 0.5 * float(np.min(w / b))
    judge = s7.paired_direction

    def scaled(better, worse, *args, **kw):
        return judge([factor * x for x in better], worse, *args, **kw)

    mp.setattr(s7, "paired_direction", scaled)
    return base, get_check(check_id).run(True)


@pytest.mark.parametrize("flip", [fig5a_at, partial(interval_at, check_id="sec7.capacity_gain_26"),
                                  partial(paired_at, check_id="sec7.spf_beats_fcfs"),
                                  partial(paired_at, check_id="appF3.gain_shrinks")],
                         ids=["fig5a.budget_tradeoff", "sec7.capacity_gain_26", "sec7.spf_beats_fcfs",
                              "appF3.gain_shrinks"])
def test_just_above_the_margin_flips_and_just_below_does_not(flip, monkeypatch):
    with monkeypatch.context() as mp:
        base, below = flip(mp, k=1 - EPS)
    assert base.verdict is Verdict.PASS and base.margin is not None
    assert below.verdict is Verdict.PASS
    with monkeypatch.context() as mp:
        _, above = flip(mp, k=1 + EPS)
    assert above.verdict is Verdict.FAIL


def test_a_margin_is_read_off_the_evidence_of_a_check_that_records_its_comparison():
    from paper_checks.registry import get_check
    from paper_checks.report import margin_of, outcome_dict
    from paper_checks.runner import Outcome

    row = {"test": {"ci": [146.0, 152.0], "bound": 19548.0}}
    cycles = Result(Verdict.PASS, "s", coverage="c", evidence={"cycles": [row, row]})
    o = Outcome(get_check("appC2.executed_cycles"), cycles, None, 0.0)
    assert margin_of(o) == pytest.approx(19548 / 146 - 1)
    assert "eq25.repaired_executed" in outcome_dict(o)["blind_spot"]  # far above x2: says what it misses
    ratios = {"a <= b": 0.6, "b <= c": 1.0}
    chain = Result(Verdict.PASS, "s", coverage="c", evidence={"largest lhs/rhs per inequality": ratios})
    assert margin_of(Outcome(get_check("eq24.decode_bound"), chain, None, 0.0)) == 0.0  # attained: tight
    assert margin_of(Outcome(get_check("def1.mask"), chain, None, 0.0)) is None  # records no comparison
    drift = Result(Verdict.PASS, "s", coverage="c", evidence={
        "ci": [-20.0, -18.0], "checks": [{"name": "Eq. 25", "paper": 9.0},
                                         {"name": "Lemma 3 corrected", "paper": -2.0}]})
    assert margin_of(Outcome(get_check("lemma3.executed_drift"), drift, None, 0.0)) == pytest.approx(9.0)
