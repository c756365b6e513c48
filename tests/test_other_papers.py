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


# --- Nie, Si, Zhou (2026): the KV-memory threshold ------------------------------------------------


def _g_by_iterations(s: int, o: int, chunk: int) -> int:
    """KV tokens held, summed iteration by iteration: prompt chunk j holds the tokens prefilled so
    far, decode k holds s + k."""
    held, done = 0, 0
    while done < s:
        done = min(done + chunk, s)
        held += done
    return held + sum(s + k for k in range(1, o + 1))


@pytest.mark.parametrize("s, o, chunk", [(16, 1024, 4096), (1000, 7, 256), (512, 1, 512), (513, 3, 512)])
def test_nsz_g_is_the_iteration_sum(s, o, chunk):
    from paper_checks import other_papers_kv as kv

    assert int(kv.g_kv(s, o, chunk)) == _g_by_iterations(s, o, chunk)


def test_nsz_threshold_closed_form():
    from paper_checks import other_papers_kv as kv

    w = get_workload("deterministic:16,1024")
    mu, delta = kv.nsz_threshold(65536, 0.005, w, 4096)
    assert mu == pytest.approx(65536 / (0.005 * _g_by_iterations(16, 1024, 4096)))
    assert delta == pytest.approx(1040 / 65536)


def test_nsz_check_passes_and_a_misstated_threshold_fails():
    from paper_checks import other_papers_kv as kv

    r = kv.nsz_runs(True)
    args = (r["delta"], r["measured"], r["case"])
    assert r["case"]["saturated"]
    assert kv.judge_threshold(r["mu"], *args).verdict is Verdict.PASS
    for factor in (0.8, 0.9, 1.1, 1.2):  # mu misstated by 10% and 20% either way
        assert kv.judge_threshold(factor * r["mu"], *args).verdict is Verdict.FAIL
    # g without KV growth during decode (s tokens held per decode): mu far too high
    w = get_workload("deterministic:16,1024")
    g_flat = 16 + 1024 * 16
    assert kv.judge_threshold(65536 / (r["b_bar"] * g_flat), *args).verdict is Verdict.FAIL
    assert w.expect(kv.g_kv(w.L_P, w.L_D, 4096)) > g_flat


def test_nsz_judge_both_sides():
    from paper_checks import other_papers_kv as kv

    case = {"workload": "w", "M tokens": 1, "replicates": 3, "requests": 10}
    assert kv.judge_threshold(10.0, 0.02, (9.9, 9.85, 9.95), case).verdict is Verdict.PASS
    assert kv.judge_threshold(10.0, 0.02, (10.5, 10.45, 10.55), case).verdict is Verdict.FAIL  # above mu
    assert kv.judge_threshold(10.0, 0.02, (9.5, 9.45, 9.55), case).verdict is Verdict.FAIL  # below mu(1-d)


# --- Zhang et al. (2026): the exclusive- versus mixed-batching crossover ---------------------------


def test_published_crossover_is_the_root_of_their_quadratic():
    from paper_checks import other_papers_batching as b

    for fit in b.PUBLISHED_FITS.values():
        r = b.published_crossover(fit["beta_d"], fit["abc"])
        a, bb, c = fit["abc"]
        assert 0 < r < 1
        assert a + bb * r + c * r * r == pytest.approx(fit["beta_d"], rel=1e-12)
    assert b.published_crossover(1.0, (2.0, 1.0, 1.0)) == 0.0  # mixed dearer even at r = 0
    assert b.published_crossover(10.0, (1.0, 1.0, 1.0)) == 1.0  # never dearer on [0, 1]


def test_crossover_is_the_first_share_above():
    from paper_checks import other_papers_batching as b

    assert b.crossover(0.5, lambda r: r) == pytest.approx(0.51)
    assert b.crossover(0.5, lambda r: 1 - r) == 0.0
    assert b.crossover(2.0, lambda r: r) == 1.0


def test_mixed_slope_at_share_zero_is_the_prefill_only_slope():
    """Independent route: explicit prefill-only batches of 512-token chunks, slope by hand."""
    import numpy as np

    from paper_checks import other_papers_batching as b
    from theory.builder import CostSpec, cost_model
    from theory.cost import Batch, T_batch

    cm = cost_model(CostSpec(gpu="h200", model=b.MODEL, mode="real"))
    n = np.array(b.STEP_TOKENS, dtype=float)
    t = np.array([T_batch(cm, Batch.of(prefill=[(1, 512)] * (m // 512) if m >= 512 else [(1, m)]))
                  for m in b.STEP_TOKENS])
    slope = ((n - n.mean()) * (t - t.mean())).sum() / ((n - n.mean()) ** 2).sum()
    assert b.mixed_slope(cm, 0.0) == pytest.approx(slope, rel=1e-9)


def test_crossover_check_fails_on_rtxpro6000_and_the_interference_term_decides():
    from dataclasses import replace

    from paper_checks import other_papers_batching as b

    found = b.llmq_crossovers()
    assert abs(found["h200"]["r_star"] - b.CLAIMED["h200"]) <= b.TOL
    assert abs(found["rtxpro6000"]["r_star"] - b.CLAIMED["rtxpro6000"]) > b.TOL
    ev = b.crossover_evidence(True)
    assert b.judge_crossover(found, b.CLAIMED, ev).verdict is Verdict.FAIL
    # the judge passes llmq's own shares and fails them moved by more than the tolerance
    own = {g: v["r_star"] for g, v in found.items()}
    assert b.judge_crossover(found, own, ev).verdict is Verdict.PASS
    assert b.judge_crossover(found, {g: r + 1.5 * b.TOL for g, r in own.items()}, ev).verdict is Verdict.FAIL
    # without the mixed-decode term the RTX PRO 6000's crossover moves far up; with twice it, to ~20%
    none = b.llmq_crossovers(transform=lambda cm: replace(cm, mixed_decode_eta=0.0))
    assert none["rtxpro6000"]["r_star"] > found["rtxpro6000"]["r_star"] + 0.3
    twice = b.llmq_crossovers(transform=lambda cm: replace(cm, mixed_decode_eta=2 * cm.mixed_decode_eta))
    assert b.judge_crossover(twice, b.CLAIMED, ev).verdict is Verdict.PASS


def test_nsz_spread_lengths_instance_passes_and_a_misstated_threshold_fails():
    from paper_checks import other_papers_kv as kv

    r = kv.nsz_runs(True, workload=kv.WORKLOADS[1])
    args = (r["delta"], r["measured"], r["case"])
    assert kv.judge_threshold(r["mu"], *args).verdict is Verdict.PASS
    for factor in (0.9, 1.1):
        assert kv.judge_threshold(factor * r["mu"], *args).verdict is Verdict.FAIL
