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


# --- Ao, Luo, Simchi-Levi, Wang (2025): the fluid region under KV memory and WAIT ----------------


def test_aslw_stage_memory_is_the_iteration_sum():
    from theory.fluid_kv import stage_memory

    for prompt, out in [(1, 1), (16, 64), (64, 16), (7, 300)]:
        assert stage_memory(prompt, out)[0] == sum(prompt + s for s in range(out + 1))


def test_aslw_fluid_memory_is_their_example_and_solves_flow_balance():
    """Their Example (l = l' = 1, lam = 4 per iteration of d0 = 1, d1 = 0): n* = 4 at each stage,
    M* = 4 x 1 + 4 x 2 = 12; with d1 > 0, M* solves (d0 + d1 M*) lam_j = n*_j, M* = sum n*_j W_j."""
    from theory.fluid_kv import fluid_boundary, fluid_memory, stage_memory

    assert fluid_memory(4.0, 1, 1, 1.0, 0.0) == pytest.approx(12.0)
    lam, L_P, L_D, d0, d1 = [3.0, 5.0], [16, 64], [64, 16], 0.005, 1e-6
    m = fluid_memory(lam, L_P, L_D, d0, d1)
    n = [x * (d0 + d1 * m) for x in lam]
    assert m == pytest.approx(sum(k * w for k, w in zip(n, stage_memory(L_P, L_D), strict=True)), rel=1e-12)
    assert fluid_memory([1e4], 16, 64, d0, 1.0) == float("inf")  # d1 lam W >= 1 (Proposition large_rate)
    edge = fluid_boundary([0.5, 0.5], L_P, L_D, d0, d1, m)  # M* along the mix reaches C = m at the edge
    assert fluid_memory([0.5 * edge, 0.5 * edge], L_P, L_D, d0, d1) == pytest.approx(m, rel=1e-12)


def test_aslw_thresholds_fill_memory_with_slack_and_refuse_outside():
    from theory.errors import FieldError
    from theory.fluid_kv import stage_memory, wait_thresholds

    n = wait_thresholds([570.0, 570.0], [16, 64], [64, 16], 0.005, 0.0, 21720)
    assert n.tolist() == [5, 5] and n @ stage_memory([16, 64], [64, 16]) <= 21720
    with pytest.raises(FieldError, match="slack"):  # 5 / 1000 is not above d0
        wait_thresholds([1000.0, 1000.0], [16, 64], [64, 16], 0.005, 0.0, 21720)


def test_aslw_judge_both_verdicts():
    from paper_checks import other_papers_wait as ow

    case = {"workload": "w", "C KV tokens": 10, "d0 s": 0.005, "types (l, l', p)": [(16, 64, 1.0)],
            "replicates": 3, "requests": 9}
    good = {"lam_star": 1200.0, "claimed": 1200.0, "thresholds": ((16, 64, 6),), "why": "", "case": case,
            "saturated": {"wait": (1200.1, 1199.0, 1201.2)}, "below": ["stable"] * 3}
    r = ow.judge_region(good)
    assert r.verdict is Verdict.PASS and r.margin == pytest.approx(1212 / 1200.1 - 1)
    above = {"sarathi": (1250.0, 1240.0, 1260.0)}
    assert ow.judge_region({**good, "saturated": above}).verdict is Verdict.FAIL
    assert ow.judge_region({**good, "below": ["stable", "unstable", "stable"]}).verdict is Verdict.FAIL
    assert ow.judge_region({**good, "thresholds": None, "why": "no slack"}).verdict is Verdict.FAIL


def test_aslw_check_passes_and_a_misstated_region_fails():
    """The instance as computed PASSes; a claimed edge 10% low is sustained above by WAIT (FAIL),
    one 10% high leaves WAIT's thresholds without slack at 0.95 of it (FAIL)."""
    from paper_checks import other_papers_wait as ow

    r = ow.aslw_runs(True)
    assert r["lam_star"] == pytest.approx(18720 / (0.005 * 3120))
    assert ow.judge_region(r).verdict is Verdict.PASS
    assert r["saturated"]["vllm"][2] < 0.9 * r["lam_star"]  # prefill-first vLLM thrashes: a finding
    for factor in (0.9, 1.1):
        wrong = ow.aslw_runs(True, region=factor * r["lam_star"])
        assert ow.judge_region(wrong).verdict is Verdict.FAIL, factor
