"""Tests of theory.capacity: reductions to the DP bound, Theorem 1 and Li-Dai-Peng, monotonicity,
feasible schedules below the bound, the KV-memory bound, and check_bound_against's two verdicts.

Every expected value comes from an independent computation: paper_checks' chunking DP and Theorem
1's terms (theory.bounds), closed forms, explicit schedules timed batch by batch with
theory.cost.T_batch, or a brute-force vertex enumeration of the batch-composition LP.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from paper_checks.chunking import gpu_dp
from paper_checks.section4_theorems import work_gaps
from theory.bounds import lambda_star
from theory.builder import CostSpec, cost_model
from theory.capacity import (
    BatchLaw,
    Schedules,
    capacity_bound,
    check_bound_against,
    law_from_cost_model,
    linear_fixed_cost,
    lockstep_throughput,
    min_prefill_attention,
    rad_overhead_rate_bound,
    staircase_law,
)
from theory.cost import Batch, T_batch
from theory.errors import FieldError
from theory.hardware import gpu_names
from theory.workload import Workload, get_workload

PAPER_MODEL = "mistral-7b"


def preset(gpu: str, tiles: str | None = None):
    """The paper-mode Mistral-7B cost model of a GPU preset (optionally restricted to some tiles)."""
    return cost_model(CostSpec(gpu, PAPER_MODEL, tiles=tiles))


@cache
def paper_workload(t_lcm: int) -> Workload:
    """Table 1's law padded to multiples of t*_lcm (Assumption 3), the paper's workload."""
    return get_workload("table1").padded(t_lcm)


# --- (i) reductions under Eq. 2-7 ---------------------------------------------------------------


@pytest.mark.parametrize("gpu", gpu_names())
def test_equals_dp_minimal_work_on_every_preset(gpu):
    cm = preset(gpu)
    w = paper_workload(cm.t_star.t_lcm)
    b = capacity_bound(cm, w, r=1)
    gaps = work_gaps(gpu, w, w.l_P_max)  # paper_checks: Theorem 1's terms + the chunking DP over tiles
    dp_work = gaps["DP over tiles (lower bound)"]["work (s)"]
    assert b.bound == pytest.approx(1.0 / dp_work, rel=1e-9)
    t = cm.t_star
    if t.t_row > t.t_col:  # every preset today: the printed lam* undercuts the exact bound
        assert lambda_star(cm, w) < b.bound * (1 - 1e-4)
    else:
        assert lambda_star(cm, w) == pytest.approx(b.bound, rel=1e-12)
    assert b.binds == "compute" and b.lam_kv == math.inf


@pytest.mark.parametrize(("gpu", "tiles"), [("a100", "128x256"), ("a100", "64x256"),
                                            ("h100", "128x128"), ("l4", "64x128,128x256")])
def test_equals_paper_lambda_star_where_chunking_lemma_holds(gpu, tiles):
    cm = preset(gpu, tiles)
    t = cm.t_star
    assert t.t_row <= t.t_col
    w = paper_workload(t.t_lcm)
    assert capacity_bound(cm, w).bound == pytest.approx(lambda_star(cm, w), rel=1e-12)


@pytest.mark.parametrize(("gpu", "lp", "ld"), [("a100", 512, 8), ("l40s", 384, 3)])
def test_attained_by_lockstep_groups_with_dp_chunks(gpu, lp, ld):
    """Exactness under Eq. 2-7: t*_col requests in lock step, prompts in the DP-optimal chunks over
    tiles (paper_checks), decodes in batches of t*_col, timed batch by batch, reach the bound; with a
    fixed cost c, groups of G pay exactly c (chunks + L_D) / G more per request."""
    cm = preset(gpu)
    w = get_workload(f"deterministic:{lp},{ld}")
    chunks = gpu_dp(gpu, lp)[1].chunks(lp)
    tc = cm.t_star.t_col

    def group_time(model, g):
        t = sum(T_batch(model, Batch.of(prefill=[ch] * g)) for ch in chunks)
        return t + sum(T_batch(model, Batch.of(decode=[lp + k] * g)) for k in range(1, ld + 1))

    bound = capacity_bound(cm, w).bound
    assert tc / group_time(cm, tc) == pytest.approx(bound, rel=1e-9)
    c = 0.004
    assert capacity_bound(cm, w, overhead_s=c).bound == pytest.approx(bound, rel=1e-12)
    for g in (tc, 4 * tc):
        per = group_time(replace(cm, overhead_s=c), g) / g
        assert per == pytest.approx(1 / bound + c * (len(chunks) + ld) / g, rel=1e-9)


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_split_period_loses_nothing(gpu):
    """The DP restricted to chunks <= LCM(t_col) equals the DP over every chunk size (Eq. 6)."""
    law = law_from_cost_model(preset(gpu))
    full = min_prefill_attention(replace(law, split_period=None), 700)
    assert law.split_period == 256
    np.testing.assert_allclose(min_prefill_attention(law, 700), full, rtol=1e-13, atol=0)
    capped = min_prefill_attention(law, 700, b_max=100)  # a budget can only cost more
    assert np.all(capped >= full * (1 - 1e-13)) and capped[700] > full[700]


def test_split_period_survives_waves_on_the_linear_gemms():
    """Waves on the linear GeMMs (the calibrated A100 of real mode) leave Eq. 6 as it is, so the
    split period still loses nothing; waves on Eq. 6 itself remove it."""
    cm = cost_model(CostSpec("a100", "mistral-7b", "real", None, None, None))
    assert cm.waves and not cm.attention_waves
    law = law_from_cost_model(cm)
    assert law.split_period == int(np.lcm.reduce(cm.t_col))
    full = min_prefill_attention(replace(law, split_period=None, content_key=None), 700)
    np.testing.assert_allclose(min_prefill_attention(law, 700), full, rtol=1e-13, atol=0)
    assert law_from_cost_model(replace(cm, attention_waves=True)).split_period is None


# --- (ii) Li, Dai, Peng (2025): lam (m_p + m_d) < b / t_b --------------------------------------


@settings(max_examples=40)
@given(c=st.floats(0.0, 0.05), a=st.floats(1e-4, 0.05), b0=st.integers(1, 256), m=st.integers(1, 32),
       lp=st.integers(1, 3000), ld=st.integers(1, 500), r=st.integers(1, 4))
def test_staircase_equals_li_dai_peng_when_b0_divides_b_max(c, a, b0, m, lp, ld, r):
    b_max = m * b0
    law = staircase_law(c, a, b0)
    w = get_workload(f"deterministic:{lp},{ld}")
    t_bmax = c + a * math.ceil(b_max / b0)
    expected = r * (b_max / t_bmax) / (lp + ld)  # tokens/s at full batches, over E[L_P + L_D]
    b = capacity_bound(law, w, r, b_max=b_max)
    assert b.bound == pytest.approx(expected, rel=1e-12)
    assert b.pieces_s["prefill_attention"] == 0 and b.pieces_s["decode_attention"] == 0


@settings(max_examples=40)
@given(c=st.floats(0.0, 0.05), a=st.floats(1e-4, 0.05), b0=st.integers(1, 100), b_max=st.integers(1, 400))
def test_staircase_equals_best_batch_size_by_brute_force(c, a, b0, b_max):
    w = get_workload("uniform:1-9,1-5")
    m_tok = w.expect(w.L_P + w.L_D)
    best = max(b / (c + a * math.ceil(b / b0)) for b in range(1, b_max + 1))
    assert capacity_bound(staircase_law(c, a, b0), w, b_max=b_max).bound == pytest.approx(best / m_tok,
                                                                                           rel=1e-12)


def test_staircase_beats_full_batches_when_b0_does_not_divide_b_max():
    c, a, b0, b_max = 0.01, 0.004, 64, 65
    w = get_workload("uniform:10-20,5-9")
    m_tok = w.expect(w.L_P + w.L_D)
    full = (b_max / (c + 2 * a)) / m_tok  # Li-Dai-Peng's b / t_b at b = b_max
    best = (b0 / (c + a)) / m_tok  # batches of b0 tokens
    b = capacity_bound(staircase_law(c, a, b0), w, b_max=b_max)
    assert b.bound == pytest.approx(best, rel=1e-12) and b.bound > full
    assert b.best_batch_tokens == b0


# --- (iii) the check catches wrong bounds -----------------------------------------------------


def test_check_passes_the_certified_bound_and_fails_the_printed_lambda_star():
    cm = preset("a100")
    w = get_workload("deterministic:256,1")
    ours = capacity_bound(cm, w).bound
    ok = check_bound_against(ours, cm, w, schedules=Schedules(groups=(1, 128), chunks=(128, 256)))
    assert ok.verdict == "PASS" and ok.best_feasible <= ours
    bad = check_bound_against(lambda_star(cm, w), cm, w,
                              schedules=Schedules(groups=(1, 128), chunks=(128, 256)))
    assert bad.verdict == "FAIL" and "not an upper bound" in bad.reason
    # the witness, retimed by hand: 128 prompts in two lock-step chunks of 128, one decode batch
    assert bad.witness == {"group": 128, "chunk": 128}
    t = (T_batch(cm, Batch.of(prefill=[(1, 128)] * 128)) + T_batch(cm, Batch.of(prefill=[(129, 128)] * 128))
         + T_batch(cm, Batch.of(decode=[257] * 128)))
    assert bad.best_feasible == pytest.approx(128 / t, rel=1e-12)
    assert 128 / t > lambda_star(cm, w)


def test_check_fails_lambda_star_that_ignores_the_fixed_cost():
    cm = preset("a100")
    w = get_workload("deterministic:512,64")
    kw = {"overhead_s": 0.005, "b_max": 2048, "schedules": Schedules(groups=(16,), chunks=(128,))}
    naive = capacity_bound(cm, w, overhead_s=0.0).bound  # the exact bound with c_fix ignored
    res = check_bound_against(naive, cm, w, **kw)
    assert res.verdict == "FAIL" and "exceeds the certified bound" in res.reason
    good = capacity_bound(cm, w, overhead_s=0.005, b_max=2048).bound
    assert check_bound_against(good, cm, w, **kw).verdict == "PASS"
    assert check_bound_against(0.5 * good, cm, w, **kw).verdict == "FAIL"


# --- monotonicity -----------------------------------------------------------------------------


@settings(max_examples=30)
@given(c=st.floats(0.0, 0.02), a=st.floats(1e-4, 0.02), b0=st.integers(1, 64), b1=st.integers(1, 600),
       b2=st.integers(1, 600), q=st.one_of(st.none(), st.integers(1, 64)), r=st.integers(1, 4),
       dc=st.floats(0.0, 0.02))
def test_monotone_in_gpus_budget_and_fixed_cost(c, a, b0, b1, b2, q, r, dc):
    w = get_workload("uniform:1-40,1-30")
    lo, hi = sorted((b1, b2))
    law = staircase_law(c, a, b0)
    base = capacity_bound(law, w, r, b_max=lo, max_decodes=q).bound
    assert capacity_bound(law, w, r + 1, b_max=lo, max_decodes=q).bound >= base * (1 - 1e-12)
    # a decode cap's bound comes from a linear program (HiGHS, theory.capacity.pieces): equal up to its
    # tolerance (a relative 2.4e-9 was seen at c = 1e-9, q = 3, b_max = 14 against none)
    tol = 1e-9 if q is None else 1e-8
    assert capacity_bound(law, w, r, b_max=hi, max_decodes=q).bound >= base * (1 - tol)
    assert capacity_bound(law, w, r, b_max=None, max_decodes=q).bound >= base * (1 - tol)
    more_c = capacity_bound(staircase_law(c + dc, a, b0), w, r, b_max=lo, max_decodes=q).bound
    assert more_c <= base * (1 + 1e-9)


def test_monotone_under_eq7():
    cm = preset("l4")
    w = get_workload("deterministic:300,20")
    vals = [capacity_bound(cm, w, b_max=b, overhead_s=0.002).bound for b in (64, 256, 1024, None)]
    assert all(x <= y * (1 + 1e-12) for x, y in itertools.pairwise(vals))
    cs = [capacity_bound(cm, w, b_max=512, overhead_s=c).bound for c in (0.0, 0.001, 0.01)]
    assert cs[0] > cs[1] > cs[2]
    three = capacity_bound(cm, w, r=3, b_max=256, overhead_s=0.002).bound
    assert three == pytest.approx(3 * vals[1], rel=1e-12)


# --- feasible schedules never beat the bound ---------------------------------------------------


def full_batch_throughput(c, a, b0, b, lp, ld) -> float:
    """Independent closed form: b requests in lock step, one prompt token each per batch, then their
    decodes: lp + ld batches of exactly b tokens, each c + a ceil(b / b0)."""
    return b / ((c + a * math.ceil(b / b0)) * (lp + ld))


@settings(max_examples=30)
@given(c=st.floats(0.0, 0.02), a=st.floats(1e-4, 0.02), b0=st.integers(1, 64), b=st.integers(1, 300),
       lp=st.integers(1, 30), ld=st.integers(1, 20))
def test_staircase_full_batches_of_every_size_below_bound(c, a, b0, b, lp, ld):
    w = get_workload(f"deterministic:{lp},{ld}")
    law = staircase_law(c, a, b0)
    for cap in (b, None):
        assert full_batch_throughput(c, a, b0, b, lp, ld) <= capacity_bound(law, w, b_max=cap).bound * (
            1 + 1e-12)
    # and the module's lock-step schedules, timed by the law, agree with the closed form
    assert lockstep_throughput(law, w, group=b, chunk=1) == pytest.approx(
        full_batch_throughput(c, a, b0, b, lp, ld), rel=1e-12)


@pytest.mark.parametrize(("overhead", "b_max", "q"), [(0.0, None, None), (0.005, None, None),
                                                      (0.005, 2048, None), (0.001, 512, None),
                                                      (0.002, None, 32), (0.002, 256, 4)])
def test_eq7_lockstep_schedules_below_bound(overhead, b_max, q):
    cm = preset("a100")
    w = Workload.from_pairs("two-point", [256, 512], [8, 32], [0.7, 0.3])
    bound = capacity_bound(cm, w, overhead_s=overhead, b_max=b_max, max_decodes=q).bound
    cm_c = replace(cm, overhead_s=overhead)
    checked = 0
    for g, k in itertools.product((1, 4, 128), (64, 256)):
        if (b_max is not None and g * k > b_max) or (q is not None and g > q):
            continue
        per = []
        for lp, ld in ((256, 8), (512, 32)):  # timed batch by batch with theory.cost.T_batch
            t = sum(T_batch(cm_c, Batch.of(prefill=[(i, min(k, lp - i + 1))] * g))
                    for i in range(1, lp + 1, k))
            t += sum(T_batch(cm_c, Batch.of(decode=[lp + j] * g)) for j in range(1, ld + 1))
            per.append(t / g)
        thr = 1 / (0.7 * per[0] + 0.3 * per[1])
        assert thr <= bound * (1 + 1e-12)
        assert lockstep_throughput(cm, w, group=g, chunk=k, overhead_s=overhead, b_max=b_max,
                                   max_decodes=q) == pytest.approx(thr, rel=1e-12)
        checked += 1
    assert checked >= 3


# --- the decode-capped LP against brute force ---------------------------------------------------


def lp_by_vertices(F, q, m_tok, m_dec) -> float:
    """min sum y F(tau) s.t. sum tau y >= m_tok, sum min(tau, q) y >= m_dec: every basic solution
    has at most two non-zero columns; enumerate them all."""
    tau = np.arange(1, len(F) + 1, dtype=float)
    d = np.minimum(tau, q)
    best = math.inf
    for i in range(len(F)):
        best = min(best, F[i] * max(m_tok / tau[i], m_dec / d[i]))
        for j in range(i + 1, len(F)):
            det = tau[i] * d[j] - tau[j] * d[i]
            if det == 0:
                continue
            yi = (m_tok * d[j] - tau[j] * m_dec) / det
            yj = (tau[i] * m_dec - m_tok * d[i]) / det
            if yi >= -1e-15 and yj >= -1e-15:
                best = min(best, F[i] * yi + F[j] * yj)
    return best


@settings(max_examples=25)
@given(c=st.floats(0.0, 0.02), a=st.floats(1e-4, 0.02), b0=st.integers(1, 16), b_max=st.integers(2, 60),
       q=st.integers(1, 60), m_p=st.floats(0.5, 50), m_d=st.floats(0.5, 50))
def test_decode_cap_lp_matches_vertex_enumeration(c, a, b0, b_max, q, m_p, m_d):
    law = staircase_law(c, a, b0)
    F = c + a * np.ceil(np.arange(1, b_max + 1) / b0)
    lin = linear_fixed_cost(law, m_p + m_d, m_d, b_max=b_max, max_decodes=q)
    exact = lp_by_vertices(F, q, m_p + m_d, m_d)
    assert lin.per_request_s <= exact * (1 + 1e-9)  # certified: never above the LP value
    assert lin.per_request_s == pytest.approx(exact, rel=1e-6)


@settings(max_examples=25)
@given(c=st.floats(1e-4, 0.02), a=st.floats(1e-4, 0.02), b0=st.integers(1, 16), horizon=st.integers(2, 40),
       q=st.integers(1, 60), m_p=st.floats(0.5, 50), m_d=st.floats(0.5, 50))
def test_decode_cap_lp_beyond_the_horizon_is_a_feasible_and_tight_dual(c, a, b0, horizon, q, m_p, m_d):
    """With no token budget the LP tabulates batches up to the horizon H and prices every larger
    one at least c_fix + sigma tau. Its dual (u, v), priced in closed form, must be feasible for the
    law itself at every batch size, beyond H too (tau u + min(tau, q) v <= F(tau)); so its value
    is at most the LP over an explicit table of sizes 1 .. 50 H (solved apart). And it is at least
    the primal of the coarser relaxation HiGHS solves (beyond H one column of tokens at sigma each,
    c_fix dropped), whose dual constraints are stricter."""
    law = staircase_law(c, a, b0)
    m_tok = m_p + m_d
    lin = linear_fixed_cost(law, m_tok, m_d, max_decodes=q, horizon=horizon)
    tau = np.arange(1, 50 * horizon + 1)
    F = c + a * np.ceil(tau / b0)
    u, v = lin.u_s_per_token, lin.v_s_per_decode
    assert np.all(tau * u + np.minimum(tau, q) * v <= F * (1 + 1e-9))
    explicit = linprog(F, A_ub=-np.array([tau, np.minimum(tau, q)], dtype=float), b_ub=[-m_tok, -m_d],
                       bounds=(0, None), method="highs")
    assert lin.per_request_s <= explicit.fun * (1 + 1e-7)
    assert lin.per_request_s >= lin.primal_s * (1 - 1e-7)


# --- the KV-memory bound ----------------------------------------------------------------------


@pytest.mark.parametrize(("lp", "ld", "M", "r"), [(100, 50, 400, 1), (7, 3, 10, 2), (1000, 1, 5000, 3)])
def test_kv_bound_closed_form(lp, ld, M, r):
    c, a, b0 = 0.003, 0.001, 16
    w = get_workload(f"deterministic:{lp},{ld}")
    b = capacity_bound(staircase_law(c, a, b0), w, r, kv_tokens=M, b_max=64)
    # fastest batch: one token, c + a; decode k holds lp + k - 1 tokens for at least that long
    K = (c + a) * (ld * lp + ld * (ld - 1) / 2)
    assert b.kv_token_seconds == pytest.approx(K, rel=1e-12)
    assert b.lam_kv == pytest.approx(r * M / K, rel=1e-12)
    assert b.bound == min(b.lam_kv, b.lam_compute)
    assert b.binds == ("kv-memory" if b.lam_kv < b.lam_compute else "compute")


def test_kv_bound_binds_and_is_not_below_a_memory_feasible_schedule():
    c, a, b0 = 0.003, 0.001, 16
    lp, ld = 100, 50
    w = get_workload(f"deterministic:{lp},{ld}")
    M = lp + ld  # room for one request's KV: serve them one at a time
    b = capacity_bound(staircase_law(c, a, b0), w, kv_tokens=M, b_max=64)
    assert b.binds == "kv-memory"
    prefill = (c + a * math.ceil(64 / b0)) + (c + a * math.ceil(36 / b0))  # chunks of 64 and 36
    one_at_a_time = 1 / (prefill + (c + a) * ld)
    assert one_at_a_time <= b.bound


def test_kv_bound_under_eq7_uses_decode_attention():
    cm = preset("a100")
    w = get_workload("deterministic:512,64")
    b = capacity_bound(cm, w, kv_tokens=2000)
    law = law_from_cost_model(cm)
    F1 = law.token_time(1)[1] + law.fixed_s
    K = sum((512 + k - 1) * (F1 + law.decode_attention(np.array([512 + k]))[0]) for k in range(1, 65))
    assert b.kv_token_seconds == pytest.approx(K, rel=1e-12)
    assert b.lam_kv == pytest.approx(2000 / K, rel=1e-12)


# --- (6) Theorems 1-2 under a per-batch overhead ------------------------------------------------


def test_overhead_breaks_lambda_star_and_rad():
    cm = preset("a100")
    w = get_workload("deterministic:512,64")
    c = 0.005
    lam = lambda_star(cm, w)
    # with a token budget the fixed cost cannot be amortised: the capacity falls below lam*
    capped = capacity_bound(cm, w, overhead_s=c, b_max=2048)
    assert capped.bound < lam * 0.98
    # without caps the bound keeps the DP value, and a lock-step schedule of 256 requests gets close
    free = capacity_bound(cm, w, overhead_s=c)
    assert free.bound == pytest.approx(capacity_bound(cm, w).bound, rel=1e-12)
    cm_c = replace(cm, overhead_s=c)
    t = sum(T_batch(cm_c, Batch.of(prefill=[(i, 128)] * 256)) for i in range(1, 513, 128))
    t += sum(T_batch(cm_c, Batch.of(decode=[512 + j] * 256)) for j in range(1, 65))
    lockstep = 256 / t
    assert lockstep <= free.bound
    # RAD pays c per prefill chunk of t*_lcm and per batch of <= t*_col decodes
    tl, tc = cm.t_star.t_lcm, cm.t_star.t_col
    rad = rad_overhead_rate_bound(cm, w, overhead_s=c)
    assert rad == pytest.approx(1 / (1 / free.bound + c * (512 / tl + 64 / tc)), rel=1e-12)
    assert rad < lockstep  # RAD is strictly suboptimal ...
    assert rad < lam * (1 - 0.2)  # ... and not stable up to lam* (1 - eps) for eps = 0.2


# --- plug-in and errors -------------------------------------------------------------------------


def test_a_new_token_count_term_plugs_in():
    """A term added to the token-count time (e.g. an LM head of fixed cost per token) moves the bound
    exactly as the per-token minimum says."""
    cm = preset("h100")
    w = get_workload("deterministic:256,16")
    base = law_from_cost_model(cm)
    extra = 1e-6
    law = BatchLaw(base.name + " + head", lambda n: base.token_time(n) + extra * np.arange(n + 1),
                   base.fixed_s, base.tail_slope + extra, base.decode_attention, base.prefill_attention,
                   base.split_period, base.batch_time)
    w0 = capacity_bound(base, w).work_per_request_s
    assert capacity_bound(law, w).work_per_request_s == pytest.approx(w0 + extra * (256 + 16), rel=1e-12)


def test_bad_inputs_name_the_field():
    cm = preset("a100")
    w = get_workload("deterministic:64,4")
    for kwargs, field in (({"r": 0}, "r"), ({"b_max": 0}, "b_max"), ({"max_decodes": -1}, "max_decodes"),
                          ({"kv_tokens": 0.0}, "kv_tokens"), ({"overhead_s": -1.0}, "overhead_s")):
        with pytest.raises(FieldError) as err:
            capacity_bound(cm, w, **kwargs)
        assert err.value.field == field
    base = law_from_cost_model(cm)
    wrong = replace(base, tail_slope=base.tail_slope * 2)
    with pytest.raises(FieldError) as err:
        capacity_bound(wrong, w)
    assert err.value.field == "tail_slope"
    with pytest.raises(FieldError) as err:
        capacity_bound(base, w, overhead_s=0.1)
    assert err.value.field == "overhead_s"
    with pytest.raises(FieldError) as err:  # 64 is not a split period of Eq. 6 on a tile set with t_col 128
        capacity_bound(replace(base, split_period=64), get_workload("deterministic:600,4"))
    assert err.value.field == "split_period"


def test_prefill_tables_are_reused_only_for_equal_laws():
    """min_prefill_attention keeps its table per (law digest, L_max, largest chunk): an equal law
    built again reuses it, another law does not, and a reused table equals a fresh computation."""
    from theory import capacity
    from theory.capacity import pieces as capacity_pieces

    capacity_pieces._PREFILL_TABLES.clear()
    law = capacity.law_from_cost_model(cost_model(CostSpec("a100")))
    f1 = capacity.min_prefill_attention(law, 600)
    again = capacity.law_from_cost_model(cost_model(CostSpec("a100")))
    assert again.content_key == law.content_key and len(capacity_pieces._PREFILL_TABLES) == 1
    f1[5] = -1.0  # the caller's copy: the kept table is not changed through it
    f2 = capacity.min_prefill_attention(again, 600)
    fresh = capacity.min_prefill_attention(replace(law, content_key=None), 600)
    assert np.array_equal(f2, fresh) and f2[5] > 0 and len(capacity_pieces._PREFILL_TABLES) == 1
    other = capacity.law_from_cost_model(cost_model(CostSpec("a100", mode="real")))
    assert other.content_key != law.content_key
    f3 = capacity.min_prefill_attention(other, 600)
    assert len(capacity_pieces._PREFILL_TABLES) == 2 and not np.array_equal(f3, fresh)


def test_prefill_tables_are_kept_across_processes_and_read_back_exactly(tmp_path, monkeypatch):
    """A second process (here: the in-process tables cleared) reads the kept table instead of
    running the DP again: the same array, and Eq. 6 is not evaluated; a kept file that cannot be
    read is computed anew; another law or extent gets an entry of its own."""
    from theory.capacity import pieces

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pieces, "_PREFILL_TABLES", {})
    law = law_from_cost_model(preset("a100"))
    first = min_prefill_attention(law, 600)
    (entry,) = (tmp_path / "home" / "llmq" / "capacity").glob("*.npy")
    calls = []
    counting = replace(law, prefill_attention=lambda i, c: calls.append(1) or law.prefill_attention(i, c))
    pieces._PREFILL_TABLES.clear()
    again = min_prefill_attention(counting, 600)  # the same content_key: the kept table
    assert not calls and again.dtype == first.dtype and np.array_equal(again, first)
    entry.write_bytes(b"not an array")
    pieces._PREFILL_TABLES.clear()
    assert np.array_equal(min_prefill_attention(counting, 600), first) and calls
    min_prefill_attention(law, 601)
    min_prefill_attention(law_from_cost_model(preset("h100")), 600)
    assert len(list(entry.parent.glob("*.npy"))) == 3
