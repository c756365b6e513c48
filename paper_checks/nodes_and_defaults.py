"""Checks at settings the other modules leave at their simplest: r > 1 nodes, default parameters,
prompts that are not multiples of t*_lcm, integer bounds, non-square GeMV tiles.

``sec41.r_nodes`` runs Theorems 1-2 and Lemmas 3-4 with r = 2 and 3 nodes behind the uniformly
random planner (Section 4.1), where a node sees Poisson arrivals of rate lambda / r: the executed
cycle DTMC against closed forms in lambda / r, and the bounds against their one-node forms at
lambda / r. ``alg123.default_parameters`` replays the batch logs of RAD, Algorithm 2 and
request-level batching run with their default parameters on the GPU presets, chunk by chunk,
against t*_lcm = LCM(t*_row, t*_col, t*_red) and t*_col taken from the GPU's optimal tile.
``eq7.partial_chunks_and_decode_runs`` sums Eq. 7 over the chunks of prompts that are not
multiples of t*_lcm, and Eq. 5 over decode runs; ``thm2.n_strictly_above`` sets Theorem 2's n
against integer bounds; ``eq5.gemv_orientation`` counts Eq. 5's tiles on non-square GeMV tiles.

All were added by mutation testing (``benchmarks/mutation.py``): every other check runs r = 1,
hands the schedulers explicit parameters and sums RAD's prefill over multiples of t*_lcm only, so
a node rate lambda where lambda / r belongs, a chunk t*_col where t*_lcm belongs, or a shifted last
chunk moved no verdict.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1, Theorems 1-2, Lemmas 3-4, Algorithms 1-3.
"""

from __future__ import annotations

import math

import numpy as np

from paper_checks.evidence import Points
from paper_checks.margins import EXACT, NOT_APPLICABLE
from paper_checks.registry import Result, Verdict, register
from paper_checks.simulated import run_gpu, small_tile_cost_model
from stability.sim.gpu import RunOptions
from stability.sim.registry import get_scheduler
from theory.builder import CostSpec, cost_model
from theory.cost import Batch, T_batch
from theory.hardware import get_gpu, gpu_names
from theory.workload import get_workload

PRESETS = ("a100", "h100", "l4")


def _close(a: float, b: float, rel: float = 1e-9) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b))


def _deterministic_cycles(cm, r: int, samples: int) -> list[str]:
    """n = 1, L^P = 16 = t*_lcm, L^D = 8: a cycle is one prefill chunk and 8 single decodes, T in
    closed form (Eq. 7); the drift is (lambda / r) T - 1 from x >= 1 and (lambda / r) T from
    x = 0, whose cycle first waits Exp(lambda / r) (mean r / lambda)."""
    from stability.dtmc import ChainOptions, build_chain

    w = get_workload("deterministic:16,8")
    T = T_batch(cm, Batch.of([(1, 16)], [])) + sum(T_batch(cm, Batch.of([], [i])) for i in range(17, 25))
    lam = 0.5 * r / T
    chain = build_chain(cm, w, n=1, lam=lam, r=r, options=ChainOptions(samples=samples, x_max=30))
    bad = []
    if not _close(chain.saturated_drift()[0], lam / r * T - 1):
        bad.append(f"r = {r}: drift at x >= 1 is {chain.saturated_drift()[0]:.6g}, "
                   f"(lambda / r) T - 1 = {lam / r * T - 1:.6g}")
    if not _close(float(chain.table["drift"][0]), lam / r * T):
        bad.append(f"r = {r}: drift at x = 0 is {chain.table['drift'][0]:.6g}, (lambda / r) T = "
                   f"{lam / r * T:.6g}")
    x = np.arange(chain.x_max + 1)
    low = x < chain.x_max - 10  # rows whose jumps do not reach the truncation
    if not np.allclose(chain.P.sum(axis=1), 1, atol=1e-12, rtol=0):
        bad.append(f"r = {r}: kernel rows do not sum to 1")
    if not np.allclose((chain.P @ x - x)[low], chain.table["drift"][low], atol=1e-9, rtol=0):
        bad.append(f"r = {r}: the kernel's mean jumps differ from the executed drift")
    if not chain.table["ET_lo"][0] <= r / lam + T <= chain.table["ET_hi"][0]:
        bad.append(f"r = {r}: E[T | x = 0] CI [{chain.table['ET_lo'][0]:.6g}, "
                   f"{chain.table['ET_hi'][0]:.6g}] misses r / lambda + T = {r / lam + T:.6g}")
    return bad


def _wald(r: int, samples: int) -> list[str]:
    """From x < n the arrivals in a cycle are a Poisson process stopped at the cycle's end, so the
    chain's count B + (lambda / r) exposure has mean (lambda / r) E[T] (Wald's identity)."""
    from scipy import stats

    from stability.dtmc import CycleSampler
    from theory.bounds import T_bar_R

    cm = small_tile_cost_model()
    w = get_workload("uniform:1-64,1-24").padded(cm.t_lcm)
    lam_node = 0.8 / T_bar_R(cm, w)
    sampler, bad = CycleSampler(cm, w, 4), []
    for x in range(4):
        s = sampler.from_state(x, lam_node, samples, seed=r)
        diff = s.B + lam_node * s.exposure - lam_node * s.T
        half = stats.t.ppf(0.9995, diff.size - 1) * diff.std(ddof=1) / np.sqrt(diff.size)
        if abs(diff.mean()) > half + 1e-12:
            bad.append(f"r = {r}, x = {x}: E[B + (lambda / r) exposure] - (lambda / r) E[T] = "
                       f"{diff.mean():.4g} (99.9% half-width {half:.3g})")
    return bad


def _bounds_scale(r: int) -> list[str]:
    """Theorem 1 and Lemmas 3-4 at r nodes are the one-node statements at lambda / r."""
    from theory.bounds import compute_bounds, lemma3_drift_bound, lemma4_bound

    cm, w = cost_model(CostSpec("a100")), get_workload("table1").padded(cost_model(CostSpec("a100")).t_lcm)
    one, many = compute_bounds(cm, w, 1), compute_bounds(cm, w, r)
    bad = []
    if not _close(many.lambda_star, r * one.lambda_star):
        bad.append(f"r = {r}: lambda* = {many.lambda_star:.6g}, r x one node's = {r * one.lambda_star:.6g}")
    # the corrected lambda* (Theorem 1's erratum): T_bar^R less N d E[L^P] (t*_lcm - 1) / (s mu t t t)
    t = get_gpu("a100").optimal_tile()
    coef = cm.N * cm.d_pre / (cm.s * get_gpu("a100").rate(t) * t.t_row * t.t_col * t.t_red)
    e_lp = sum(float(p) * int(lp) for lp, p in zip(w.L_P, w.p, strict=True))
    corrected = r / (many.T_bar_R_s - coef * e_lp * (math.lcm(t.t_row, t.t_col, t.t_red) - 1))
    if not _close(many.lambda_star_corrected, corrected):
        bad.append(f"r = {r}: corrected lambda* = {many.lambda_star_corrected:.6g}, r over the corrected "
                   f"T_bar^R = {corrected:.6g}")
    # both at lambda = r (1 - eps) / T_bar^R, with the printed T^max and with the corrected one
    for field in ("lemma4_bound_s", "lemma4_bound_corrected_s", "cycle_bound_corrected_s"):
        at_r, at_one = getattr(many, field), getattr(one, field)
        if not _close(at_r, at_one):
            bad.append(f"r = {r}: {field} {at_r:.12g} s, one node's {at_one:.12g} s")
    # Lemma 4's r / lambda alone (n T^max dwarfs it): the same at r nodes as at one
    for field, n_of, t_of in (("lemma4_bound_s", "n_min", "T_max_s"),
                              ("lemma4_bound_corrected_s", "n_min_corrected", "T_max_corrected_s")):
        at_r, at_one = (getattr(b, field) - getattr(b, n_of) * getattr(b, t_of) for b in (many, one))
        if not _close(at_r, at_one, rel=1e-6):  # a difference of two sums of about n T^max
            bad.append(f"r = {r}: r / lambda in {field} {at_r:.6g} s, one node's {at_one:.6g} s")
    lam, n, t_col = 0.9 * many.lambda_star, one.n_min, one.t_col
    args = (one.T_bar_R_s, t_col, one.T_max_s)
    if not _close(lemma3_drift_bound(n, lam, r, *args), lemma3_drift_bound(n, lam / r, 1, *args)):
        bad.append(f"r = {r}: corrected Lemma 3 at lambda differs from one node at lambda / r")
    if not _close(lemma4_bound(n, one.T_max_s, lam, r), lemma4_bound(n, one.T_max_s, lam / r, 1)):
        bad.append(f"r = {r}: Lemma 4 at lambda differs from one node at lambda / r")
    return bad


def _theorems_executed(r: int, fast: bool) -> tuple[list[str], dict]:
    """RAD's executed chain at r nodes: with lambda* = r / T_bar^R, negative drift for x >= n at
    0.9 lambda* and positive at 1.1 lambda*; compare_with_paper applies Theorem 1 only above."""
    from paper_checks.chain_statements import compare_with_paper
    from stability.dtmc import ChainOptions, CycleSampler, build_chain
    from theory.bounds import T_bar_R

    cm = small_tile_cost_model()
    w = get_workload("uniform:1-64,1-24").padded(cm.t_lcm)
    n, tbar = 48, T_bar_R(cm, w)
    sampler = CycleSampler(cm, w, n)
    sat = sampler.saturated(150 if fast else 600, seed=11)
    bad, rows = [], {}
    for load in (0.9, 1.1):
        lam = load * r / tbar
        chain = build_chain(cm, w, n, lam, r=r, sampler=sampler, sat=sat,
                            options=ChainOptions(samples=3 if fast else 10, x_max=n + 40))
        m, lo, hi = chain.saturated_drift()
        expected = float(np.mean(lam / r * sat.T - sat.K))
        info, checks = compare_with_paper(chain, cm, w)
        names = {c.name: c for c in checks}
        rows[f"{load} lambda*"] = {"drift": [m, lo, hi], "(lambda / r) E[T] - E[K]": expected,
                                   "lambda*": info["lambda_star"]}
        if not _close(m, expected):
            bad.append(f"r = {r}, {load} lambda*: drift {m:.6g} != (lambda / r) E[T] - E[K] = {expected:.6g}")
        if not _close(info["lambda_star"], r / tbar):
            bad.append(f"r = {r}: compare_with_paper's lambda* {info['lambda_star']:.6g} != r / T_bar^R")
        if load < 1 and not (hi < 0 and "Theorem 1" not in names and names["Lemma 4"].holds
                             and names["Lemma 3 corrected"].holds):
            bad.append(f"r = {r}, 0.9 lambda*: drift CI [{lo:.4g}, {hi:.4g}] not below 0, or Lemma 3/4 "
                       "fail, or Theorem 1 applied below lambda*")
        if load > 1 and not (lo > 0 and "Theorem 1" in names and names["Theorem 1"].holds):
            bad.append(f"r = {r}, 1.1 lambda*: drift CI [{lo:.4g}, {hi:.4g}] not above 0 (Theorem 1)")
    return bad, rows


@register("sec41.r_nodes", level="sample",
          domain="every r >= 1 and every lambda",
          evaluates=(Points("r = 2, 3: deterministic cycles and the A100 preset's bounds; r = 2: the "
                            "executed chain at n = 48, 0.9 and 1.1 lambda*"),),
          location="Section 4.1 (uniformly random planner), Theorems 1-2 and Lemmas 3-4 "
                                    "with r > 1 nodes",
          items=("Theorem 1", "Theorem 2", "Lemma 3", "Lemma 4"),
          claim="With r nodes behind the uniformly random planner each node sees Poisson arrivals of rate "
                "lambda / r: lambda* = r / T_bar^R, Lemmas 3-4 at r nodes are their one-node forms at "
                "lambda / r (the corrected lambda* too), and RAD's cycle chain has negative drift below "
                "lambda* and positive above.",
          method="For r = 2 and 3: the executed cycle DTMC (stability.dtmc) on a deterministic workload "
                 "against the closed-form drift (lambda / r) T - 1 and E[T | x = 0] = r / lambda + T, "
                 "its kernel's rows (laws whose mean jump is that drift), Wald's identity for the "
                 "arrivals of the cycles from x < n; "
                 "theory.bounds at r against one node at lambda / r on the A100 preset (llmq bounds' "
                 "Lemma 4 bound with the printed and the corrected T^max, and Eq. 25's with the corrected); "
                 "and at r = 2 the "
                 "executed drift for x >= n = 48 (A100 with one 16x4x16 tile) at 0.9 and 1.1 lambda*.")
def sec41_r_nodes(fast: bool) -> Result:
    cm = small_tile_cost_model()
    bad: list[str] = []
    for r in (2, 3):
        bad += _deterministic_cycles(cm, r, 30 if fast else 200)
        bad += _wald(r, 1500 if fast else 4000)
        bad += _bounds_scale(r)
    more, rows = _theorems_executed(2, fast)
    bad += more
    if bad:
        return Result(Verdict.FAIL, f"{len(bad)} r-node statements fail: {bad[0]}",
                      counterexample={"failures": bad})
    return Result(Verdict.PASS, "every quantity at r nodes is the one-node quantity at lambda / r; drift "
                                "< 0 at 0.9 lambda* and > 0 at 1.1 lambda* with r = 2",
                  coverage="r = 2, 3: deterministic cycles (closed forms), A100 preset bounds; r = 2: "
                           f"executed chain at n = 48 ({150 if fast else 600} saturated cycles"
                           f"{', fast subset' if fast else ''})", evidence={"r = 2": rows},
                  margin=EXACT)


def _replay(name: str, gpu: str, requests: int) -> list[str]:
    """Run ``name`` with its default parameters on a burst and replay its batch log."""
    cm = cost_model(CostSpec(gpu))
    t = get_gpu(gpu).optimal_tile()
    t_lcm, t_col = math.lcm(t.t_row, t.t_col, t.t_red), t.t_col
    rng = np.random.default_rng(17)
    L_P = rng.integers(1, 3 * t_lcm + 1, size=requests)
    L_D = rng.integers(1, 40, size=requests)
    arrival = np.zeros(requests)
    sch = get_scheduler(name)
    params = sch.make_params(cm, n=2 * t_col) if name in ("rad", "alg2") else sch.make_params(cm)
    run = run_gpu(cm, sch, params, arrival, L_P, L_D, options=RunOptions(detail=True, log=True))
    items, batches = run.items, run.batches
    pre = items["c"] > 0
    bad = []
    if name in ("rad", "alg2"):
        for j in range(requests):
            mine = np.flatnonzero(pre & (items["request"] == j))
            mine = mine[np.argsort(items["batch"][mine], kind="stable")]
            starts = 1 + t_lcm * np.arange(-(-int(L_P[j]) // t_lcm))
            want_c = np.minimum(t_lcm, L_P[j] - starts + 1)
            got = list(zip(items["i"][mine].tolist(), items["c"][mine].tolist(), strict=True))
            if got != list(zip(starts.tolist(), want_c.tolist(), strict=True)):
                bad.append(f"{name} on {gpu}: request {j} (L^P = {L_P[j]}) got chunks {got[:4]}, "
                           f"t*_lcm = {t_lcm}")
                break
        if np.any(batches["prefills"] > 1) or np.any((batches["prefills"] > 0) & (batches["decodes"] > 0)):
            bad.append(f"{name} on {gpu}: a prefill chunk shares its batch")
        started = run.cycles["started"]
        if started.max() != params.n:  # the burst fills the first cycle with exactly n requests
            bad.append(f"{name} on {gpu}: cycles start up to {started.max()} requests, n = {params.n}")
    else:
        if batches["prefills"].max() != t_col or np.any(items["i"][pre] != 1) or not np.array_equal(
                items["c"][pre], L_P[items["request"][pre]]):
            bad.append(f"{name} on {gpu}: prefill batches of up to {batches['prefills'].max()} whole "
                       f"prompts, expected up to b = t*_col = {t_col}")
    if batches["decodes"].max() != t_col:
        bad.append(f"{name} on {gpu}: decode batches of up to {batches['decodes'].max()} requests, "
                   f"t*_col = {t_col}")
    return bad


@register("alg123.default_parameters", level="sample",
          domain="every GPU and every burst of requests",
          evaluates=(Points("A100 (fast) or A100, H100, L4: one seeded burst of 2 t*_col + 7 requests "
                            "per scheduler"),),
          location="Algorithm 1, lines 6-16; Algorithm 2, lines 4-15; "
                                                "Algorithm 3, line 14",
          items=("Algorithm 1", "Algorithm 2", "Algorithm 3"),
          claim="RAD and Algorithm 2 start at most n requests per cycle, prefill each prompt alone in chunks "
                "of t*_lcm = LCM(t*_row, t*_col, t*_red) and decode in batches of at most t*_col; "
                "request-level batching admits b = t*_col whole prompts.",
          method="Run each scheduler with its default parameters on a burst of requests on the GPU "
                 "presets and replay the batch log: every chunk (i, c) against (1 + k t*_lcm, min(t*_lcm, "
                 "L^P - k t*_lcm)), batch sizes against t*_col, both from the preset's optimal tile, and the "
                 "requests started per cycle against n.")
def alg123_default_parameters(fast: bool) -> Result:
    gpus = PRESETS[:1] if fast else PRESETS
    bad = []
    for gpu in gpus:
        t_col = get_gpu(gpu).optimal_tile().t_col
        for name in ("rad", "alg2", "request_level"):
            bad += _replay(name, gpu, 2 * t_col + 7)
    if bad:
        return Result(Verdict.FAIL, f"{bad[0]}", counterexample={"failures": bad})
    return Result(Verdict.PASS, "every logged chunk is t*_lcm (the last one the rest of the prompt), every "
                                "batch at most t*_col, as Algorithms 1-3 prescribe",
                  coverage=f"{', '.join(gpus)}{' (fast subset)' if fast else ''}: a burst of 2 t*_col + 7 "
                           "requests per scheduler, every batch replayed",
                  margin=NOT_APPLICABLE)


@register("eq7.partial_chunks_and_decode_runs", level="sample",
          domain="every prompt length and every run of decode positions",
          evaluates=(Points("8 prompt lengths around multiples of t*_lcm and 5 position ranges on A100 "
                            "(fast) or A100, H100, L4"),),
          location="Eq. 5 and Eq. 7 summed over RAD's batches "
                                                         "(Algorithm 1, lines 7-16), any prompt length",
          items=("Eq. 5", "Eq. 7", "Algorithm 1"),
          claim="RAD's prefill of a prompt of any length, its last chunk the rest of the prompt, takes the "
                "sum of Eq. 7 over its chunks; a run of decodes of one request over positions a+1..b has "
                "the attention time N sum_{i=a+1}^{b} T^{D,SA}(i) of Eq. 5.",
          method="On the GPU presets: theory.cost.chunked_prefill_time (the simulator's prefill) against "
                 "Eq. 7 evaluated batch by batch on the chunks (1 + k t*_lcm, min(t*_lcm, L^P - k t*_lcm)) "
                 "for prompt lengths around multiples of t*_lcm; theory.cost.decode_prefix differences "
                 "against Eq. 5 summed position by position.")
def eq7_partial_chunks_and_decode_runs(fast: bool) -> Result:
    from theory.cost import T_D_SA, chunked_prefill_time, decode_prefix

    gpus = PRESETS[:1] if fast else PRESETS
    bad, cases = [], 0
    for gpu in gpus:
        cm = cost_model(CostSpec(gpu))
        t = get_gpu(gpu).optimal_tile()
        lcm = math.lcm(t.t_row, t.t_col, t.t_red)
        lengths = sorted({1, 2, lcm - 1, lcm, lcm + 1, 2 * lcm + 3, 3 * lcm - 1, 5 * lcm + lcm // 2})
        for L in lengths:
            by_batch = sum(T_batch(cm, Batch.of([(i, min(lcm, L - i + 1))], []))
                           for i in range(1, L + 1, lcm))
            cases += 1
            if not _close(float(chunked_prefill_time(cm, [L], lcm)[0]), by_batch, 1e-12):
                bad.append(f"{gpu}: prefill of L^P = {L} in chunks of {lcm}")
        S = decode_prefix(cm, 1300)
        for a, b in ((0, 1), (0, 17), (16, 17), (255, 1024), (1000, 1300)):
            direct = sum(float(T_D_SA(cm, i)) for i in range(a + 1, b + 1))
            cases += 1
            if not _close(float(S[b] - S[a]), direct, 1e-9):
                bad.append(f"{gpu}: decode positions {a + 1}..{b}")
    if bad:
        return Result(Verdict.FAIL, f"{len(bad)} sums differ: {bad[0]}", counterexample={"failures": bad})
    return Result(Verdict.PASS, "RAD's prefill time is Eq. 7 summed over its chunks, partial last chunk "
                                "included; decode runs are Eq. 5 summed over their positions",
                  coverage=f"{cases} prompt lengths and position ranges on {', '.join(gpus)}"
                           f"{' (fast subset)' if fast else ''}",
                  margin=EXACT)


@register("thm2.n_strictly_above", level="sample",
          domain="every t*_col, T^max, T_bar^R and eps",
          evaluates=(Points("7 cases, 5 of them with an integer bound"),),
          location="Theorem 2: n > (t*_col - 1) T^max / (eps T_bar^R)",
          items=("Theorem 2",),
          claim="Theorem 2's n is strictly above its bound: where the bound is an integer, the smallest "
                "admissible n is that integer plus one.",
          method="theory.bounds.n_threshold against counting n up in exact rationals, on dyadic T^max, "
                 "T_bar^R and eps that make the bound an integer (where >= and > differ) and on some that "
                 "do not.")
def thm2_n_strictly_above(fast: bool) -> Result:
    from fractions import Fraction

    from theory.bounds import n_threshold

    cases = [(5, 0.5, 0.25, 0.5), (2, 1.0, 1.0, 0.25), (129, 0.125, 2.0, 0.5), (3, 0.75, 0.5, 0.375),
             (256, 1.5, 0.75, 0.125), (7, 0.3, 0.2, 0.1), (128, 3.1, 0.07, 0.05)]
    bad = []
    for t_col, tmax, tbar, eps in cases:
        n = 1
        while not n * Fraction(eps) * Fraction(tbar) > (t_col - 1) * Fraction(tmax):
            n += 1
        if n_threshold(t_col, tmax, tbar, eps) != n:
            bad.append({"t_col": t_col, "T_max": tmax, "T_bar_R": tbar, "eps": eps,
                        "n_threshold": n_threshold(t_col, tmax, tbar, eps), "smallest n": n})
    if bad:
        return Result(Verdict.FAIL, f"theory.bounds.n_threshold misses the strict inequality in {len(bad)} "
                                    "cases", counterexample={"cases": bad})
    return Result(Verdict.PASS, "n_threshold is the smallest n strictly above the bound, integer bounds "
                                "included", coverage=f"{len(cases)} cases, 5 with an integer bound",
                  margin=EXACT)


ASYMMETRIC_GEMV = """
[gemv]
rows = [{rows}]
cols = [{cols}]

[gpus.asym]
base = "a100"
"""


@register("eq5.gemv_orientation", level="sample",
          domain="every token index i on every GPU and GeMV tile",
          evaluates=(Points("10 positions on GeMV tiles 16x64 and 128x16; i = 1, 17, 513, 4096 on every "
                            "GPU preset"),),
          location="Eq. 5 (from Eq. 3)", items=("Eq. 5",),
          claim="The decode attention of token i takes (d/t_col) ceil(i/t_row) + ceil(i/t_col) (d/t_row) "
                "GeMV tiles over s mu (Eq. 5 with Eq. 3's 1/s): K^T q is an i x d GeMV and P V a d x i one; "
                "theory.cost.T_D_SA, the simulator's decode attention, is that time.",
          method="A GPU file with one GeMV tile that is not square (16 x 64, 128 x 16; the presets' tile "
                 "sets are symmetric, where the orientation cannot show): theory.cost.T_D_SA against the "
                 "tile count of Eq. 5 over s mu(t_row, t_col), for positions around tile multiples; and on "
                 "every GPU preset, in exact rationals, against the corrected Eq. 5 with each GeMV on its "
                 "fastest GeMV tile.")
def eq5_gemv_orientation(fast: bool) -> Result:
    import tempfile
    from pathlib import Path

    from theory.cost import T_D_SA, build_cost_model
    from theory.hardware import load_gpus
    from theory.models import get_model

    bad, cases = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for rows, cols in ((16, 64), (128, 16)):
            path = Path(tmp) / f"asym_{rows}x{cols}.toml"
            path.write_text(ASYMMETRIC_GEMV.format(rows=rows, cols=cols), encoding="utf-8")
            gpu = load_gpus(path)["asym"]
            cm = build_cost_model(gpu, get_model("mistral-7b"), "paper")
            d = cm.d_dec
            for i in (1, 15, 16, 17, 63, 64, 65, 129, 1000, 4097):
                tiles = math.ceil(i / rows) * math.ceil(d / cols) + math.ceil(d / rows) * math.ceil(i / cols)
                cases += 1
                if not _close(float(T_D_SA(cm, i)), tiles / (gpu.s * gpu.mu_gemv[0]), 1e-12):
                    bad.append({"gemv tile": f"{rows}x{cols}", "i": i, "T_D_SA": float(T_D_SA(cm, i)),
                                "Eq. 5": tiles / (gpu.s * gpu.mu_gemv[0])})
    presets = preset_decode_attention_gaps()
    bad += presets
    if bad:
        return Result(Verdict.FAIL, f"T^D,SA differs from Eq. 5's tile count in {len(bad)} cases",
                      counterexample={"cases": bad[:5]})
    return Result(Verdict.PASS, "T^D,SA counts Eq. 5's tiles on non-square GeMV tiles and is the corrected "
                                "Eq. 5 on every GPU preset",
                  coverage=f"{cases} positions on GeMV tiles 16x64 and 128x16 (A100, Mistral-7B); i = "
                           f"{', '.join(map(str, PRESET_POSITIONS))} on {len(gpu_names())} GPU presets",
                  margin=EXACT)


PRESET_POSITIONS = (1, 17, 513, 4096)


def preset_decode_attention_gaps(positions: tuple[int, ...] = PRESET_POSITIONS) -> list[dict]:
    """theory.cost.T_D_SA on every GPU preset against the corrected Eq. 5 (Eq. 3 for K^T q and V p,
    each GeMV on its fastest GeMV tile) in exact rationals at ``positions``; the differing cases."""
    from fractions import Fraction

    from paper_checks.common import frac
    from theory.cost import T_D_SA

    bad = []
    for g in gpu_names():
        cm = cost_model(CostSpec(g))
        d = cm.d_dec
        gemv = list(zip(cm.g_row.tolist(), cm.g_col.tolist(), cm.mu_gemv.tolist(), strict=True))
        got = T_D_SA(cm, np.array(positions))
        for p, x in zip(positions, got, strict=True):
            want = (min(Fraction(-(-p // r) * -(-d // c)) / (cm.s * frac(m)) for r, c, m in gemv)
                    + min(Fraction(-(-d // r) * -(-p // c)) / (cm.s * frac(m)) for r, c, m in gemv))
            if not _close(float(x), float(want), 1e-12):
                bad.append({"gpu": g, "i": p, "T_D_SA": float(x), "corrected Eq. 5": float(want)})
    return bad


@register("alg4.sarathi_chunks", level="sample",
          domain="every arrival sequence and request lengths",
          evaluates=(Points("A100 preset: 12 spaced requests and a burst of 20, seeded"),),
          location="Algorithm 4, lines 5-17 (corrected), and Sarathi-Serve's "
                                          "scheduler (Section 5)",
          items=("Algorithm 4",),
          claim="Sarathi-Serve prefills a prompt that fits in the free token budget in one chunk of L^P "
                "tokens (line 12 with L^P - i + 1), admits a request with a chunk, keeps prefill chunks "
                "within the token budget, and the "
                "real system runs at most max_num_seqs requests at once.",
          method="Simulate Algorithm 4 (stability.schedulers.sarathi_paper) and Sarathi-Serve "
                 "(stability.schedulers.sarathi) on the A100 preset and replay the batch logs: requests "
                 "arriving one at a time with prompts below the budget (one chunk each, c = L^P); a burst "
                 "with max_num_seqs = 3 (at most and, once, exactly 3 requests in a batch), every request "
                 "admitted with its first chunk, chunks adding up to the prompts, batches within the budget.")
def alg4_sarathi_chunks(fast: bool) -> Result:
    cm = cost_model(CostSpec("a100"))
    bad = []
    rng = np.random.default_rng(23)
    m = 12
    L_P, L_D = rng.integers(1, 200, size=m), rng.integers(1, 6, size=m)
    spaced = np.arange(m) * 10.0  # each request alone on the GPU
    for name, opts in (("sarathi_paper", {"chunk_size": 256}), ("sarathi", {"chunk_size": 256})):
        sch = get_scheduler(name)
        run = run_gpu(cm, sch, sch.make_params(cm, **opts), spaced, L_P, L_D,
                      options=RunOptions(detail=True, log=True))
        items = run.items
        pre = items["c"] > 0
        counts = np.bincount(items["request"][pre], minlength=m)
        if np.any(counts != 1) or not np.array_equal(items["c"][pre], L_P[items["request"][pre]]):
            bad.append(f"{name}: prompts below the budget took {counts.tolist()} chunks")
    burst_m = 20
    L_P, L_D = rng.integers(1, 300, size=burst_m), rng.integers(5, 40, size=burst_m)
    for name, opts in (("sarathi", {"chunk_size": 128, "max_num_seqs": 3}),
                       ("sarathi_paper", {"chunk_size": 128})):
        sch = get_scheduler(name)
        run = run_gpu(cm, sch, sch.make_params(cm, **opts), np.zeros(burst_m), L_P, L_D,
                      options=RunOptions(detail=True, log=True))
        b = run.batches
        per_batch = b["decodes"] + b["prefills"]
        if name == "sarathi" and per_batch.max() != 3:
            bad.append(f"sarathi: batches of up to {per_batch.max()} requests with max_num_seqs = 3")
        it = run.items
        first = np.full(burst_m, np.inf)
        np.minimum.at(first, it["request"][it["c"] > 0], b["start"][it["batch"][it["c"] > 0]])
        if not np.allclose(run.t_start, first, rtol=1e-12, atol=0):
            bad.append(f"{name}: a request starts before its first chunk runs (admitted without a chunk)")
        tokens_prefill = np.bincount(run.items["request"], weights=run.items["c"], minlength=burst_m)
        if not np.array_equal(tokens_prefill, L_P.astype(float)):
            bad.append(f"{name}: the chunks do not add up to the prompts")
        over = (b["prefills"] > 0) & (b["tokens"] > opts["chunk_size"]) & (b["decodes"] < opts["chunk_size"])
        if np.any(over):
            bad.append(f"{name}: a batch with prefill chunks exceeds the token budget")
    if bad:
        return Result(Verdict.FAIL, bad[0], counterexample={"failures": bad})
    return Result(Verdict.PASS, "one chunk per prompt below the budget, at most max_num_seqs requests per "
                                "batch, chunks adding up to the prompts, budgets kept",
                  coverage="A100 preset, Algorithm 4 and Sarathi-Serve: 12 spaced requests, a burst of 20",
                  margin=NOT_APPLICABLE)
