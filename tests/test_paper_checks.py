"""paper_checks: every FAIL/ERRATUM replayed independently, mutations turn checks to FAIL, the runner.

(a) Each finding is replayed by a computation that does not go through the check's own code path:
theory.cost batch times, brute force over all chunkings, plain arithmetic, hand-written traces of
the pseudo-code. (b) A deliberate error planted in a formula (or a theory function) turns the
corresponding check to FAIL. (c) ``llmq check`` exit codes and ``--expect``. (d) The report
accounts for every numbered item of the paper.
"""

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import paper_checks.algorithms as algorithms
import paper_checks.appendix_b as appendix_b
import paper_checks.appendix_b_bounds as b_bounds
import paper_checks.appendix_c as appendix_c
import paper_checks.section3_assumptions as assumptions
import paper_checks.section3_model as section3
import paper_checks.section4_theorems as section4
from llmq.cli import main
from paper_checks import chunking, pseudocode
from paper_checks.appendix_c import toy_cost_model
from paper_checks.items import PAPER_ITEMS
from paper_checks.registry import _REGISTRY, Check, Level, Result, Verdict, all_checks, get_check
from paper_checks.report import to_markdown
from paper_checks.runner import run_checks
from theory import cost
from theory.bounds import T_bar_R, T_max, lambda_star, n_threshold
from theory.builder import CostSpec, cost_model
from theory.cost import Batch, T_batch, build_cost_model, tiling_efficiency
from theory.errors import UnknownNameError
from theory.hardware import Tile, get_gpu
from theory.models import get_model
from theory.workload import get_workload, sharegpt4_trace

ROOT = Path(__file__).resolve().parents[1]
RECORDED = json.loads((ROOT / "paper_checks" / "verdicts.json").read_text())


def compositions(L):
    """All chunkings of 1..L as [(i, c), ...]."""
    for cuts in itertools.product((0, 1), repeat=L - 1):
        chunks, start = [], 1
        for k, cut in enumerate(cuts, start=1):
            if cut:
                chunks.append((start, k - start + 1))
                start = k + 1
        chunks.append((start, L - start + 1))
        yield chunks


def eq12_prefill_seconds(cm, L):
    t = cm.t_star
    return cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red) * L * (L + t.t_lcm)


# --- (a) replays of every FAIL and ERRATUM ---------------------------------------------------


def replay_chunking_at_t_star():
    # Eq. 6 at t* via theory.cost on the A100 restricted to t*: chunks of 128 beat Eq. 12's term
    cm = cost_model(CostSpec("a100", tiles="t*"))
    two_chunks = float(cost.T_P_SA(cm, [1, 129], [128, 128]).sum())
    assert two_chunks < eq12_prefill_seconds(cm, 256)
    assert math.isclose(two_chunks / eq12_prefill_seconds(cm, 256), 7 / 8, rel_tol=1e-12)
    # and the DP equals brute force over all chunkings (theory.cost on a toy tile)
    toy = toy_cost_model(4, 2, 2)
    dp = chunking.dp_at_tile(Tile(4, 2, 2), 10)
    unit = toy.N * toy.d_pre / (toy.s * toy.mu[0] * 4 * 2 * 2)
    for L in range(1, 11):
        brute = min(sum(float(cost.T_P_SA(toy, i, c)) for i, c in ch) for ch in compositions(L))
        assert math.isclose(brute, dp.f[L] * unit, rel_tol=1e-12)


def replay_relaxation():
    for L in range(1, 12):
        brute = min(sum(2 * (i + c - 1) * c for i, c in ch) for ch in compositions(L))
        assert brute == L * (L + 1) < L * (L + 256)


def replay_prop1_and_thm1():
    # 128 requests (256, 1): each prompt as two 128-token batches, then one batch of 128 decodes
    cm = cost_model(CostSpec("a100", tiles="t*"))
    prefill = cost.T_batch(cm, cost.Batch.of(prefill=[(1, 128)])) + cost.T_batch(
        cm, cost.Batch.of(prefill=[(129, 128)]))
    decode = cost.T_batch(cm, cost.Batch.of(decode=[257] * 128))
    W = prefill + decode / 128
    T_bar = T_bar_R(cost_model(CostSpec("a100")), get_workload("deterministic:256,1"))
    assert W < T_bar  # (1/r) sum_j T*_R(j) = 128 T_bar > the schedule's 128 W
    lam = (1 / T_bar + 1 / W) / 2  # above lambda*, below 1/W: group drift 128 (lam W - 1) < 0
    assert lam > 1 / T_bar and 128 * (lam * W - 1) < 0
    # the corrected bound L(L+1) is below the DP minimum over every tile set
    for g in ("a100", "a10g"):
        over = chunking.gpu_dp(g, 512)[1].f
        L = np.arange(1, 513)
        assert np.all(over[1:] >= L * (L + 1) * (1 - 1e-12))


def replay_rad_not_optimal():
    cm = cost_model(CostSpec("a100", tiles="t*"))
    rad_256 = float(cost.chunked_prefill_time(cm, [256], 256)[0])
    halves = sum(cost.T_batch(cm, cost.Batch.of(prefill=[ch])) for ch in [(1, 128), (129, 128)])
    assert halves < rad_256


def replay_eq5():
    cm = cost_model(CostSpec("a100"))
    d, s = cm.d_dec, cm.s
    eq3_sum = float(cost.T_GeMV(1, d, 16, 16, 1.0, s) + cost.T_GeMV(d, 1, 16, 16, 1.0, s))
    printed = (d / 16 * 1 + 1 * d / 16) / 1.0
    assert math.isclose(printed / eq3_sum, s) and s > 1


def replay_def2():
    # the literal interpreter runs DI at L^P+1..L^P+L^D only; the printed condition also admits stop
    L_P, L_D = 3, 2
    stop = L_P + L_D + 1
    run = pseudocode.rad([pseudocode.Req(0, L_P, L_D)], n=1, t_col=1, t_lcm=2)
    executed = [it[2] for _, _, its in run.batches for it in its if it[0] == "DI"]
    assert executed == [4, 5] and stop not in executed
    assert section3.printed_def2_admits(stop, L_P, stop)
    assert not section3.printed_def2_admits(stop + 1, L_P, stop)


def replay_lcm_typo():
    # the printed LCM differs from the chunk RAD uses (theory.hardware.Tile.t_lcm) off the presets only
    assert assumptions.printed_assumption3_lcm(64, 64, 128) == 64 != Tile(64, 64, 128).t_lcm == 128
    assert all(assumptions.printed_assumption3_lcm(t.t_row, t.t_col, t.t_red) == t.t_lcm
               for t in get_gpu("a100").tiles)


def replay_assumption3():
    lp = sharegpt4_trace().L_P
    assert np.any(lp % 256 != 0) and 74 in lp.tolist()


def replay_assumption4():
    m, w = get_model("mistral-7b"), get_workload("sharegpt4")
    kv_per_token = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads x 128, FP16
    need = 128 * (w.l_P_max + w.l_D_max) * kv_per_token
    assert kv_per_token == m.kv_bytes_per_token() and need > 48e9 - 7.24e9 * 2


def replay_Ij_indices():
    t, L = 256, 512
    chunks = [(1, 256), (L - t, t)]  # printed: (1, t), ..., (L_P - t, t)
    covered = [sum(i <= x < i + c for i, c in chunks) for x in range(1, L + 1)]
    assert covered[255] == 2 and covered[511] == 0
    fixed = [(1, 256), (L - t + 1, t)]
    assert all(sum(i <= x < i + c for i, c in fixed) == 1 for x in range(1, L + 1))


def replay_eq13():
    cm = cost_model(CostSpec("a100"))
    worst = max(range(len(cm.tiles)), key=lambda k: 1 / cm.mu_Lin[k])
    one = build_single_tile(cm, worst)
    alone = (cost.T_batch(one, cost.Batch.of(prefill=[(1, 1)]))
             + cost.T_batch(one, cost.Batch.of(decode=[2])))
    assert alone > T_max(cm, 1, 1)
    star = cost_model(CostSpec("a100", tiles="t*"))
    rad_alone = (cost.T_batch(star, cost.Batch.of(prefill=[(1, 1)]))
                 + cost.T_batch(star, cost.Batch.of(decode=[2])))
    assert rad_alone <= T_max(cm, 1, 1)


def build_single_tile(cm, k):
    from theory.cost import build_cost_model
    return build_cost_model(cm.gpu.restrict(str(cm.tiles[k])), cm.model, cm.mode)


def replay_lemma1():
    # x = (1/r) sum T*_R - t = 1 > 0: neither printed case covers it; the chain's last '<' is an '=',
    # with Lemma 1's bound as theory.bounds computes it (Q >= (S/r - t)/T^max, S/r - t = 3, T^max = 3)
    assert not any(case(1) for case in b_bounds.LEMMA1_PRINTED_CASES)
    S, r, t, Tm = 10.0, 2.0, 2.0, 3.0
    Q = (S / r - t) / Tm
    assert t + Q * Tm == pytest.approx(S / r)


def replay_thm1_reference():
    # Eq. 1 holds no inequality in Q; Lemma 1 divided by t is the printed step (numerically too)
    import sympy as sp
    S, t, r, Tm, Q = sp.symbols("S t r T_max Q", positive=True)
    printed = sp.GreaterThan(Q / t, (S / (r * t) - 1) / Tm)
    assert Q not in b_bounds.eq1_statement().free_symbols
    assert b_bounds.implies_after_dividing_by_t(sp.GreaterThan(Q, (S / r - t) / Tm), printed, t)
    assert (7.0 / 2.0 - 3.0) / 5.0 / 3.0 == pytest.approx((7.0 / (2.0 * 3.0) - 1) / 5.0)


def replay_thm1_symbols():
    t_star = get_gpu("a100").optimal_tile()
    T_red = {t.t_red for t in get_gpu("a100").tiles}
    assert t_star.t_col not in T_red and t_star.t_red in T_red


def replay_thm1_premises():
    # RAD's own chunking of a 300-token prompt at t*_lcm = 256 needs a partial chunk: I_j does not exist
    run = pseudocode.rad([pseudocode.Req(0, 300, 1)], n=1, t_col=1, t_lcm=256)
    chunks = [it[3] for _, _, its in run.batches for it in its if it[0] == "PI"]
    assert chunks == [256, 44] and not all(c == 256 for c in chunks)


def replay_R_star():
    # a cycle of the literal RAD where |R*| = n - t*_col + 1 exactly: the weaker n - t*_col of the
    # 'i.e.' would allow |R \ R*| = t*_col, one more than the t*_col - 1 the proof needs
    n, t_col = 3, 2
    reqs = [pseudocode.Req(j, 1, ld) for j, ld in enumerate((1, 2, 2))]
    rows = appendix_c.cycle_rows(pseudocode.rad(reqs, n=n, t_col=t_col, t_lcm=2), t_col)
    full = [row for row in rows if len(row["R"]) == n]
    assert full and min(len(row["R*"]) for row in full) >= n - t_col + 1
    assert n - (n - t_col) == t_col > t_col - 1


def replay_tmax_typo():
    # the printed range (T_out, pairs) holds none of the A100's reduction tiles
    printed = appendix_c.printed_t_red_range(get_gpu("a100"))
    assert not {t.t_red for t in get_gpu("a100").tiles} & printed


def replay_completes_n():
    # hand-written trace: t*_col = 2, n = 3, three requests (L^P 1, L^D 1) at time 0
    run = pseudocode.rad([pseudocode.Req(j, 1, 1) for j in range(3)], n=3, t_col=2, t_lcm=2)
    assert [its for _, _, its in run.batches[:3]] == [
        (("PI", 0, 1, 1),), (("PI", 1, 1, 1),), (("DI", 0, 2), ("DI", 1, 2))]
    assert run.cycles[0]["started"] == [0, 1]  # the cycle ends after 2 < n completions


def replay_arrival_rate():
    # the simulator's random planner sends a node lambda / r requests per second, not lambda
    from stability.sim.simulate import Scenario, simulate
    r = 4
    res = simulate(Scenario(gpu="a100", pad=True, load=0.5, r=r, n_requests=20_000, seed=11))
    horizon = float(res.requests["arrival"][-1])
    lam = res.requests["arrival"].size / horizon
    to_node0 = np.count_nonzero(res.requests["node"] == 0)
    assert abs(to_node0 / horizon - lam / r) < 4 * math.sqrt(lam / r / horizon)
    assert abs(to_node0 / horizon - lam) > lam / 2


def replay_lemma3_drift():
    cm = cost_model(CostSpec("a100"))
    w = get_workload("table1").padded(cm.t_lcm)
    tb, tm, eps, r = T_bar_R(cm, w), T_max(cm, w.l_P_max, w.l_D_max), 0.1, 2
    n = n_threshold(128, tm, tb, eps)
    lam = r * (1 - eps) / tb
    assert -n * eps + 127 * lam * tm > 0 > -n * eps + 127 * lam / r * tm


def replay_algorithm_literals():
    # Algorithm 1 as printed, L^P = t*_lcm = 2: c = min(2, 2 - 1) = 1, then c = min(2, 2 - 2) = 0 ...
    with pytest.raises(pseudocode.NonTerminationError) as e:
        pseudocode.rad([pseudocode.Req(0, 2, 1)], n=1, t_col=1, t_lcm=2, printed=("line13",), max_steps=10)
    assert [its for _, _, its in e.value.run.batches[:3]] == [(("PI", 0, 1, 1),), (("PI", 0, 2, 0),),
                                                                (("PI", 0, 2, 0),)]
    for runner, kw in ((pseudocode.alg2, {"n": 1, "t_col": 1, "t_lcm": 2, "printed": ("line7",)}),
                       (pseudocode.alg2, {"n": 1, "t_col": 1, "t_lcm": 2, "printed": ("no_arrivals",)}),
                       (pseudocode.alg3, {"b": 1, "printed": ("line5",)}),
                       (pseudocode.alg4, {"budget": 2, "printed": ("line11",)}),
                       (pseudocode.alg4, {"budget": 2, "printed": ("line12",)})):
        with pytest.raises(pseudocode.NonTerminationError):
            runner([pseudocode.Req(0, 1, 1)], max_steps=50, **kw)
        fixed = {k: v for k, v in kw.items() if k != "printed"}
        assert pseudocode.violations(runner([pseudocode.Req(0, 1, 1)], **fixed)) == []


def replay_table1():
    # any law: Var >= 1/2 (mu - 415)^2 + 1/10 (834 - mu)^2 on [415, 834], more outside; grid over mu
    mu = np.linspace(0, 2000, 200_001)
    inside = 0.5 * (mu - 415) ** 2 + 0.1 * (834 - mu) ** 2
    bound = np.where(mu < 415, 0.1 * (834 - mu) ** 2, np.where(mu > 834, 0.5 * (mu - 415) ** 2, inside))
    least = math.sqrt(bound.min())
    assert 120.9 < least < 121.0 and least > 101
    w = get_workload("sharegpt4")
    assert (w.quantile("decode", 0.5), w.quantile("decode", 0.9)) == (415, 834)
    assert 265 < w.std("decode") < 266


def replay_capacity_gain_95():
    # the 95% t-interval of the replicate gains, recomputed with scipy, excludes the paper's
    # 1.15 -> 1.25 req/s (+8.7%)
    from scipy.stats import t

    from paper_checks.runner import kept_outcome

    r = kept_outcome("appF3.capacity_gain_95", True).result  # as `llmq check --quick` has it
    x = np.asarray(r.counterexample["replicates"])
    lo, hi = t.interval(0.95, x.size - 1, loc=x.mean(), scale=x.std(ddof=1) / math.sqrt(x.size))
    assert not lo <= 100 * (1.25 / 1.15 - 1) <= hi


def replay_rad_tiling_not_rare():
    # the naive reference simulator, batches classified with theory.cost (no engine, no check code)
    from tests import reference_sim

    cm = build_cost_model(get_gpu("a100"), get_model("mistral-7b"))
    w = get_workload("table1").padded(cm.t_lcm)
    rng = np.random.default_rng(0)
    n = 80
    arrival = np.cumsum(rng.exponential(1 / (0.9 * lambda_star(cm, w)), n))
    L_P, L_D = w.sample(n, rng)
    sim, _ = reference_sim.rad(cm, arrival, L_P, L_D, 2000, cm.t_star.t_col, cm.t_lcm)
    flags = [tiling_efficiency(cm, Batch.of([(i, c) for _, i, c in pre], [i for _, i in dec])) < 1 - 1e-9
             for _, _, pre, dec in sim.batches]
    assert np.mean(flags) > 0.3  # far from rare
    for (_, _, pre, dec), bad in zip(sim.batches, flags, strict=True):
        assert not bad or (not pre and len(dec) < cm.t_star.t_col)


def _overhead_a100():
    cm = replace(build_cost_model(get_gpu("a100"), get_model("mistral-7b")), overhead_s=0.005)
    return cm, get_workload("deterministic:512,64")


def replay_thm1_overhead():
    # theory.cost alone: a batch of tau decodes at position 1 costs G(tau) + c_fix + tau N T_D_SA(1),
    # so min_tau<=2048 (G + c) / tau per token plus the forced decode attention (prefill attention
    # left out: a weaker bound) already falls below lambda*
    cm, w = _overhead_a100()
    a1 = cm.N * float(cost.T_D_SA(cm, np.array([1]))[0])
    per_tok = min((T_batch(cm, Batch.of(decode=[1] * tau)) - tau * a1) / tau for tau in range(1, 2049))
    dec = cm.N * float(np.sum(cost.T_D_SA(cm, np.arange(513, 577))))
    assert 1 / (576 * per_tok + dec) < lambda_star(cm, w) * 0.99


def replay_thm2_rad_overhead():
    # RAD's own work per request is Eq. 12's T_bar^R (512 is a multiple of t*_lcm), and each of its
    # ceil(512 / t*_lcm) lone chunks and >= 64 / t*_col decode batches pays c_fix
    cm, w = _overhead_a100()
    t = cm.t_star
    assert 512 % t.t_lcm == 0
    batches = 512 // t.t_lcm + 64 / t.t_col
    assert 1 / (T_bar_R(cm, w) + 0.005 * batches) < 0.9 * lambda_star(cm, w)


def replay_common_tile():
    # Eq. 2 by hand at tau = 1 on the A100 (Mistral-7B's W_Q, W_K, W_V: 4096 x 4096, paper mode): t*'s
    # 256x128x32 pays for 128 token columns where 256x64x32 pays for 64, at the rates of the roofline
    gpu = get_gpu("a100")
    t_star, t_small = gpu.optimal_tile(), Tile(256, 64, 32)
    assert t_star == Tile(256, 128, 32) and t_small in gpu.tiles

    def eq2(t, tau):
        return (math.ceil(4096 / t.t_row) * math.ceil(tau / t.t_col) * math.ceil(4096 / t.t_red)
                / (gpu.s * gpu.rate(t)))

    assert eq2(t_star, 1) / eq2(t_small, 1) == pytest.approx(1.7845606837606838, rel=1e-12)
    # at a multiple of t*_col the common tile is (at least tied) fastest: the correction
    assert all(eq2(t_star, 128 * k) <= eq2(t, 128 * k) * (1 + 1e-12) for t in gpu.tiles for k in (1, 2, 32))


def replay_eb_mb_crossover():
    # Eq. 7 by hand on the RTX PRO 6000 preset (llama-3.1-8b, real mode, decodes at position 768): at
    # a decode share of 30% a mixed step's least-squares slope over 256..4096 tokens (the rest prefill
    # in 512-token chunks) is still below a decode-only step's over 16..1024 decodes, so the share at
    # which mixing costs more per token is above 0.3, not about 0.2
    cm = cost_model(CostSpec(gpu="rtxpro6000", model="llama-3.1-8b", mode="real"))

    def slope(xs, ts):
        x, t = np.asarray(xs, float), np.asarray(ts, float)
        return ((x - x.mean()) * (t - t.mean())).sum() / ((x - x.mean()) ** 2).sum()

    counts = (16, 32, 64, 128, 256, 384, 512, 768, 1024)
    beta_d = slope(counts, [T_batch(cm, Batch.of(decode=[768] * k)) for k in counts])
    sizes = (256, 512, 1024, 2048, 4096)
    mixed = []
    for m in sizes:
        d = round(0.3 * m)
        chunks = [(1, min(512, m - d - j)) for j in range(0, m - d, 512)]
        mixed.append(T_batch(cm, Batch.of(prefill=chunks, decode=[768] * d)))
    assert slope(sizes, mixed) < beta_d


REPLAYS = {
    "eq5.missing_1_over_s": replay_eq5,
    "def2.stop_index": replay_def2,
    "assumption3.workloads": replay_assumption3,
    "assumption3.lcm_typo": replay_lcm_typo,
    "assumption4.presets": replay_assumption4,
    "appB.Ij_indices": replay_Ij_indices,
    "appB.Ij_optimal_relaxed": replay_relaxation,
    "appB.relaxed_bound_proof": replay_relaxation,
    "appB.Ij_optimal_ceil": replay_chunking_at_t_star,
    "prop1.drain_lower_bound": replay_prop1_and_thm1,
    "eq13.tmax": replay_eq13,
    "lemma1.case_split": replay_lemma1,
    "thm1.proof_reference": replay_thm1_reference,
    "thm1.symbols": replay_thm1_symbols,
    "thm1.premises": replay_thm1_premises,
    "thm1.upper_bound": replay_prop1_and_thm1,
    "sec4.rad_throughput_optimal": replay_rad_not_optimal,
    "sec4.rad_tiling_rare": replay_rad_tiling_not_rare,
    "appC2.R_star_count": replay_R_star,
    "appC2.tmax_typo": replay_tmax_typo,
    "lemma3.completes_n": replay_completes_n,
    "lemma3.arrival_rate": replay_arrival_rate,
    "lemma3.drift": replay_lemma3_drift,
    "alg1.line13": replay_algorithm_literals,
    "alg2.line7": replay_algorithm_literals,
    "alg2.arrivals": replay_algorithm_literals,
    "alg3.line5": replay_algorithm_literals,
    "alg4.termination": replay_algorithm_literals,
    "table1.decode_column": replay_table1,
    "beyond.thm1_overhead": replay_thm1_overhead,
    "beyond.thm2_rad_overhead": replay_thm2_rad_overhead,
    "sec321.common_tile": replay_common_tile,
    "other.eb_mb_crossover": replay_eb_mb_crossover,
    "appF3.capacity_gain_95": replay_capacity_gain_95,
}


def test_every_recorded_finding_has_a_replay():
    findings = {k for k, v in RECORDED.items() if v in ("FAIL", "ERRATUM")}
    assert findings == set(REPLAYS)


@pytest.mark.parametrize("check_id", sorted(set(REPLAYS)))
def test_replay(check_id):
    REPLAYS[check_id]()


# --- (b) mutations: a planted error turns the check to FAIL ------------------------------


def verdict(check_id):
    return get_check(check_id).run(True).verdict


def test_mutation_eq4_linear_gemms(monkeypatch):
    assert verdict("eq4.linear_aggregation") is Verdict.PASS
    original = type(get_model("mistral-7b")).linear_gemms
    monkeypatch.setattr(type(get_model("mistral-7b")), "linear_gemms",
                        lambda self, mode="paper": original(self, mode)[:-1])  # final projection lost
    assert verdict("eq4.linear_aggregation") is Verdict.FAIL


def test_mutation_eq5_decode_attention_without_1_over_s(monkeypatch):
    original = cost.T_D_SA
    monkeypatch.setattr(cost, "T_D_SA", lambda cm, i: original(cm, i) * cm.s)
    assert verdict("eq5.gemv_orientation") is Verdict.FAIL
    assert verdict("eq5.missing_1_over_s") is Verdict.ERRATUM  # the proof reads no implementation


def test_mutation_eq6_prefill_attention(monkeypatch):
    original = cost.T_P_SA
    monkeypatch.setattr(cost, "T_P_SA", lambda cm, i, c, tile=None: original(cm, i, c, tile) * 1.001)
    assert verdict("eq6.cost_at_t_star") is Verdict.FAIL
    assert verdict("eq6.two_gemms") is Verdict.PASS


def test_mutation_eq10b_a_slower_t_star(monkeypatch):
    slow = get_gpu("a100")
    slow = replace(slow, t_star=Tile(64, 64, 32))

    def mutated(spec):
        from theory.cost import build_cost_model
        gpu = slow if spec.gpu == "a100" else get_gpu(spec.gpu)
        return build_cost_model(gpu, get_model(spec.model), spec.mode)

    monkeypatch.setattr(appendix_b, "cost_model", mutated)
    assert verdict("eq10b.tile_replacement") is Verdict.FAIL


def test_mutation_prop2_T_bar_R(monkeypatch):
    monkeypatch.setattr(b_bounds, "T_bar_R", lambda cm, w: T_bar_R(cm, w) * 1.0001)
    assert verdict("prop2.slln_mean") is Verdict.FAIL


def test_mutation_thm2_threshold_halved(monkeypatch):
    monkeypatch.setattr(section4, "n_threshold", lambda *a: max(1, n_threshold(*a) // 2))
    assert verdict("thm2.threshold_grid") is Verdict.FAIL
    assert verdict("thm2.threshold") is Verdict.PASS
    monkeypatch.setattr(section4, "threshold_of", lambda tc, tm, tb, eps: ((tc - 1) * tm / 2, eps * tb))
    res = get_check("thm2.threshold").run(True)
    assert res.verdict is Verdict.FAIL and res.counterexample  # z3's instance below the true threshold


def test_mutation_rad_decode_index(monkeypatch):
    algorithms.corrected_runs.cache_clear()
    monkeypatch.setattr(pseudocode.Run, "next_decode", lambda self, r: r.L_P + self.decoded[r.rid] + 2)
    try:
        assert verdict("alg1.invariants") is Verdict.FAIL
    finally:
        algorithms.corrected_runs.cache_clear()


def test_mutation_cores():
    assert appendix_b.eq9_core(trials=200)[0] and not appendix_b.eq9_core(reduce=min, trials=200)[0]
    assert appendix_b.eq11_eq12_core()[0]
    assert not appendix_b.eq11_eq12_core(closed=lambda L, t: L * (L + t - 1))[0]
    assert section3.eq7_core(k=3)[0]
    mutated_t_batch = lambda cm, b: cost.T_batch(cm, b) - b.tau / cm.mu_nLin  # noqa: E731
    assert not section3.eq7_core(t_batch=mutated_t_batch, k=3)[0]
    ok, bad = section3.eq6_core(printed=lambda i, c, d, N, tile, mu, s: section3.printed_eq6(
        i, c, d, N, (tile[1], tile[0], tile[2]), mu, s))  # t_row and t_col swapped
    assert not ok and bad
    assert not section3.eq4_core(printed=lambda m, *a: section3.printed_eq4_sum(
        replace(m, d_out=m.d_out // 2), *a), gpu_keys=["a100"], model_keys=["mistral-7b"])[0]
    from paper_checks.section67_data import TABLE1, table1_core
    assert table1_core("prompt")["printed std feasible"]
    mutated = {**TABLE1, "prompt": {**TABLE1["prompt"], "std": 1000}}
    assert not table1_core("prompt", table=mutated)["printed std feasible"]


# --- (c) the runner and the command line ------------------------------------------------------


def test_check_cli_exit_codes_and_expect(capsys, tmp_path):
    args = ["check", "--quick", "--quiet", "--out", str(tmp_path), "--only", "def1.mask",
            "--only", "lemma1.case_split"]
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"def1.mask": "PASS", "lemma1.case_split": "ERRATUM"}))
    assert main([*args, "--expect", str(good)]) == 0
    report = json.loads((tmp_path / "paper_checks.json").read_text())
    assert [c["verdict"] for c in report["checks"]] == ["PASS", "ERRATUM"]
    assert (tmp_path / "paper_checks.md").read_text().count("### ") == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"def1.mask": "FAIL", "lemma1.case_split": "ERRATUM"}))
    assert main([*args, "--expect", str(bad)]) == 1
    assert "def1.mask: PASS, recorded FAIL" in capsys.readouterr().err
    assert main(["check", "--only", "no.such.check"]) == 2
    assert "unknown check id" in capsys.readouterr().err


def test_a_crashing_check_exits_1_and_is_reported(monkeypatch, capsys, tmp_path):
    def boom(fast):
        raise RuntimeError("planted crash")

    monkeypatch.setitem(_REGISTRY, "test.crash", Check("test.crash", "nowhere", ("Eq. 2",), "c", "m", boom))
    assert main(["check", "--quick", "--quiet", "--out", str(tmp_path), "--only", "test.crash"]) == 1
    assert "planted crash" in (tmp_path / "paper_checks.md").read_text()
    assert "crashed: test.crash" in capsys.readouterr().err


def test_a_fail_verdict_is_not_a_crash(tmp_path):
    assert main(["check", "--quick", "--quiet", "--out", str(tmp_path), "--only", "lemma3.completes_n"]) == 0


def test_unknown_id_is_an_llmq_error():
    with pytest.raises(UnknownNameError):
        get_check("eq99.nothing")


def test_results_need_their_evidence():
    with pytest.raises(ValueError):
        Result(Verdict.PASS, "no coverage")
    with pytest.raises(ValueError):
        Result(Verdict.ERRATUM, "x", counterexample={"a": 1})  # no correction


# --- (d) the report covers the paper ----------------------------------------------------------


# the items no computation can refute (measure-theoretic steps and almost-sure limits; see their checks)
ONLY_NOT_CHECKABLE = {"Eq. 14", "Eq. 17", "Eq. 18", "Eq. 20", "Eq. 21", "Eq. 22"}


def test_every_numbered_item_has_a_check():
    """Coverage counts only two-sided checks (tests/test_paper_checks_two_sided.py shows each return
    both verdicts); an item only NOT_CHECKABLE checks cover must be one of ONLY_NOT_CHECKABLE."""
    from tests.test_paper_checks_two_sided import FLIPS

    checks = all_checks()
    two_sided = {item for c in checks if c.id in FLIPS for item in c.items}
    not_checkable = {item for c in checks if c.level is Level.NONE for item in c.items}
    assert len(PAPER_ITEMS) == 24 + 4 + 2 + 4 + 2 + 2 + 5
    assert set(PAPER_ITEMS) - two_sided == ONLY_NOT_CHECKABLE
    assert ONLY_NOT_CHECKABLE <= not_checkable


def test_registering_a_check_without_its_description_is_refused():
    from paper_checks.registry import register
    from theory.errors import FieldError

    for bad in ({"claim": ""}, {"method": " "}, {"items": ("Eq. 99",)}, {"level": "hunch"}):
        kw = {"location": "nowhere", "items": ("Eq. 2",), "claim": "c", "method": "m",
              "level": "sample"} | bad
        with pytest.raises(FieldError):
            register("test.refused", **kw)(lambda fast: None)
    card = {"location": "nowhere", "items": ("Eq. 2",), "claim": "c", "method": "m", "level": "sample"}
    with pytest.raises(FieldError, match="claims"):  # a misspelled card field, named
        register("test.refused", **{**card, "claims": "c"})(lambda fast: None)
    with pytest.raises(FieldError, match="method"):  # a required one missing, named
        register("test.refused", **{k: v for k, v in card.items() if k != "method"})(lambda fast: None)
    assert "test.refused" not in _REGISTRY


def test_an_outcome_field_that_a_result_lacks_is_refused():
    from paper_checks.registry import outcome
    from theory.errors import FieldError

    assert outcome(True, summary="s", coverage="c", margin=0.5).margin == 0.5
    with pytest.raises(FieldError, match="counterexampel"):
        outcome(False, summary="s", coverage="c", counterexampel={"x": 1})


def test_recorded_verdicts_name_every_check():
    assert list(RECORDED) == [c.id for c in all_checks()]


def test_report_lists_every_item():
    md = to_markdown(run_checks(["def1.mask"], fast=True), fast=True)
    for item in PAPER_ITEMS:
        assert f"| {item} |" in md


def test_check_json_is_strict_and_files_are_readable(capsys, tmp_path):
    import stat

    from paper_checks.common import jsonable

    assert jsonable({"a": float("nan"), "b": [np.float64("inf"), 1.5]}) == {"a": None, "b": [None, 1.5]}
    assert main(["check", "--quick", "--json", "--out", str(tmp_path), "--only", "def1.mask",
                 "--only", "thm2.repaired_drift", "--record", str(tmp_path / "v.json")]) == 0

    def no_nan(name):
        raise ValueError(f"non-strict JSON constant {name}")

    report = json.loads(capsys.readouterr().out, parse_constant=no_nan)
    assert [(c["id"], c["verdict"], c["level"], c["scope"]) for c in report["checks"]] == [
        ("def1.mask", "PASS", "proof", "whole"), ("thm2.repaired_drift", "PASS", "proof", "whole")]
    assert report["levels"] == {"proof": 2}
    assert report["checks"][0]["evaluates"][0]["tool"] == "z3" and report["checks"][0]["domain"]
    for name in ("paper_checks.json", "paper_checks.md", "v.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644
    assert "| evidence |" in (tmp_path / "paper_checks.md").read_text()


# --- (e) evidence levels: each level means one thing, and every check's level is the one its method gives


def test_every_check_level_is_the_one_its_method_gives():
    """The registry records what each check evaluates; the level must be the one those computations
    give (paper_checks.evidence.level_of), every statement and enumeration well formed: a proof
    builds sympy or z3 statements over free symbols and nothing else, an exhaustive check enumerates
    the very domain its claim quantifies over, a statistical one states its error rate, a reading
    names the printed text."""
    from paper_checks.evidence import method_problems

    problems = {}
    for c in all_checks():
        found = method_problems(c.evaluates)
        if str(c.level) != c.derived_level:
            found.append(f"level {c.level}, but what it evaluates gives {c.derived_level}")
        if not c.domain.strip():
            found.append("no domain stated for its claim")
        if found:
            problems[c.id] = found
    assert not problems, problems


def test_the_level_rules_distinguish_the_methods():
    import sympy as sp
    import z3

    from paper_checks.evidence import (
        Enumeration,
        Points,
        Reading,
        StatTest,
        Symbolic,
        level_of,
        method_problems,
    )

    x = sp.Symbol("x")
    proof = Symbolic("sympy", lambda: x**2 - 1, "x^2 - 1 = 0")
    dom = "every x"
    assert level_of((proof,), dom) == "proof"
    assert level_of((proof, Points("x = 1, 2")), dom) == "sample"  # a point evaluation: no proof
    assert level_of((proof, Enumeration(dom, lambda: 3)), dom) == "exhaustive"
    assert level_of((Enumeration("x in 1..3", lambda: 3),), dom) == "sample"  # not the claim's domain
    assert level_of((StatTest("t-test", 0.01), Points("seeded")), dom) == "statistical"
    assert level_of((Reading("as printed"), proof), dom) == "reading"
    assert level_of((), dom) == "none"
    # a statement evaluated at a point has no free symbol; a number is no statement; a bad error rate
    assert not method_problems((proof,))
    assert method_problems((Symbolic("sympy", lambda: (x**2 - 1).subs(x, 1), "at x = 1"),))
    assert method_problems((Symbolic("z3", lambda: z3.IntVal(1) < 2, "closed"),))
    assert method_problems((Symbolic("sympy", lambda: 0, "a number"),))
    assert method_problems((StatTest("t-test", 1.5),)) and method_problems((Enumeration("none", lambda: 0),))
    assert not method_problems((Symbolic("z3", lambda: (z3.Int("n") > 0, [z3.Int("n") >= 1]), "n > 0"),))


def test_proof_checks_evaluate_no_cost_model(monkeypatch):
    """A proof rests on symbolic statements alone: with every way to a numeric cost model cut off,
    each proof check still returns its recorded verdict."""
    import importlib

    from paper_checks.registry import MODULES

    def cut(*a, **k):
        raise AssertionError("a proof check evaluated a cost model")

    monkeypatch.setattr("theory.builder.cost_model", cut)
    monkeypatch.setattr("theory.cost.build_cost_model", cut)
    for name in MODULES:
        mod = importlib.import_module(f"paper_checks.{name}")
        for attr in ("cost_model", "build_cost_model"):
            if hasattr(mod, attr):
                monkeypatch.setattr(mod, attr, cut)
    proofs = [c for c in all_checks() if c.level is Level.PROOF]
    assert len(proofs) >= 8
    for c in proofs:
        assert c.validate(c.run(True)).verdict.value == RECORDED[c.id], c.id


def test_statistical_evidence_names_its_error_rate():
    from paper_checks.evidence import StatTest
    from theory.errors import FieldError

    check = Check("test.stat", "nowhere", ("Eq. 2",), "c", "m", lambda fast: None, Level.STATISTICAL,
                  "every x", (StatTest("t-test", 0.01),))
    full = {"test": "t-test", "alpha": 0.01, "power": 0.9}
    assert check.validate(Result(Verdict.PASS, "holds", coverage="x", evidence=full))
    with pytest.raises(FieldError, match="alpha"):
        check.validate(Result(Verdict.PASS, "holds", coverage="x", evidence={"test": "t", "power": 0.9}))
    with pytest.raises(FieldError, match="shrunk"):  # only an exhaustive domain is shrunk by --quick
        check.validate(Result(Verdict.PASS, "holds", coverage="x", evidence=full, shrunk=True))


def test_a_verdict_on_part_of_the_domain_says_so(tmp_path):
    from paper_checks.report import summary_table

    outcomes = run_checks(["def1.mask", "eq7.batch_sum", "appB.Ij_optimal_relaxed"], fast=True)
    assert [o.scope for o in outcomes] == ["whole", "part", ""]  # a FAIL's counterexample needs no domain
    assert outcomes[1].verdict_text == "PASS on part of its domain"
    table = summary_table(outcomes)
    assert "PASS/part" in table and "FAIL/part" not in table
    md = to_markdown(outcomes, fast=True)
    assert "**Verdict: PASS** on part of the claim's domain" in md
    assert "**Verdict: PASS** on the claim's whole domain" in md
    assert md.count("- **Domain of the claim**: ") == 3 and md.count("- **Checked**: ") == 3


def test_common_tile_is_judged_on_every_token_count():
    from paper_checks import statements

    cm = cost_model(CostSpec("a100"))
    res = statements.common_tile_core([cm])
    assert res.verdict is Verdict.ERRATUM and res.counterexample["tau"] == 1
    assert "tau = 1..4096" in res.coverage
    # the former domain (multiples of t*_col) is where the correction holds, and only there
    aligned = statements.common_tile_core([cm], lambda c: np.arange(1, 33) * c.t_star.t_col)
    assert aligned.verdict is Verdict.PASS


def test_beyond_the_paper_stays_out_of_the_items_it_extends():
    from paper_checks.report import to_json
    from paper_checks.runner import beyond_index, item_index

    outcomes = run_checks(["beyond.thm1_overhead", "thm1.premises"], fast=True)
    assert [i for i, _ in item_index(outcomes)["Theorem 1"]] == ["thm1.premises"]
    assert beyond_index(outcomes) == {"Theorem 1": [("beyond.thm1_overhead", "FAIL")]}
    report = to_json(outcomes, fast=True)
    assert report["sections"] == {"paper": {"ERRATUM": 1}, "beyond": {"FAIL": 1}}
    md = to_markdown(outcomes, fast=True)
    assert "| Theorem 1 | `thm1.premises` ERRATUM | `beyond.thm1_overhead` FAIL |" in md
    assert "## Checks: beyond the paper" in md


def test_the_default_event_skipping_path_is_checked(monkeypatch):
    """Users' runs take the engine's default mode (decode runs priced in closed form, no log); a
    price that is wrong there alone, by one part in a million, moves alg1.compiled_replay to FAIL."""
    from dataclasses import replace as dc_replace

    from paper_checks import compiled_rad

    original = compiled_rad.run_gpu

    def skipping_off_by_ppm(*a, **k):
        run = original(*a, **k)
        options = k.get("options") or (a[7] if len(a) > 7 else None)
        detail = options is not None and options.detail
        return run if detail else dc_replace(run, t_finish=run.t_finish * (1 + 1e-6))

    monkeypatch.setattr(compiled_rad, "run_gpu", skipping_off_by_ppm)
    res = compiled_rad.replay_core([0])
    assert res.verdict is Verdict.FAIL and res.counterexample["mode"].startswith("default")


def test_the_corrected_tmax_users_get_is_checked_where_it_matters(monkeypatch):
    """theory.bounds.T_max_corrected (llmq bounds' Theorem 2 n) reverting to the printed T^max is
    caught by the fast run: it covers the presets where RAD alone exceeds the printed T^max."""
    assert verdict("eq13.tmax") is Verdict.ERRATUM
    monkeypatch.setattr(b_bounds, "T_max_corrected", lambda cm, l_P, l_D: T_max(cm, l_P, l_D))
    assert verdict("eq13.tmax") is Verdict.FAIL
