"""Checks of Section 4: Theorem 1 (upper bound), Theorem 2 (RAD), RAD's design principles.

The decisive computation is the true minimum mean work per request of the model (the DP of
:mod:`paper_checks.chunking` in place of Eq. 12's ``L^P (L^P + t*_lcm)``): if it is below T_bar^R,
a scheduler exists whose work per request is below T_bar^R, and Theorem 1's lambda* = r / T_bar^R
is not an upper bound on the stable arrival rates.

References
----------
Bari, Hegde, de Veciana (2025), Section 4, Theorems 1-2, Assumption 3.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import z3

from paper_checks.chunking import closed_form_units, dp_range, gpu_dp, relaxed_dp
from paper_checks.common import PAPER_MODEL, gpus, models
from paper_checks.evidence import Points, Reading, Symbolic
from paper_checks.margins import EXACT, NOT_APPLICABLE, blind_spot, t_test_margin
from paper_checks.registry import Result, Verdict, judged, outcome, register
from theory import cost
from theory.bounds import T_bar_R_terms, lemma3_drift_bound, n_threshold
from theory.builder import CostSpec, cost_model
from theory.hardware import Tile, get_gpu
from theory.workload import Workload, get_workload


def printed_thm1_member(t: Tile) -> int:
    """The component of t* that Theorem 1 requires in T_red, as printed: t*_col."""
    return t.t_col


@register("thm1.symbols", level="reading",
          domain="the tile sets of every GPU",
          evaluates=(Reading("Theorem 1: '(t*_row, t*_col) in T_out and t*_col in T_red'"),
                     Points("the tile sets of every GPU preset"),),
          location="Theorem 1 statement: '(t*_row, t*_col) in T_out and t*_col in T_red'",
          items=("Theorem 1",),
          claim="Theorem 1 takes (t*_row, t*_col) in T_out and t*_col in T_red.",
          method="Test the printed membership t*_col in T_red, and the evident t*_red in T_red, on every "
                 "GPU.")
def thm1_symbols(fast: bool) -> Result:
    printed, corrected, cex = True, True, {}
    for g in gpus():
        gpu = get_gpu(g)
        t = gpu.optimal_tile()
        T_red = sorted({u.t_red for u in gpu.tiles})
        member = printed_thm1_member(t)
        if member not in T_red and not cex:
            cex = {"gpu": g, "t*": str(t), "printed member t*_col": member, "T_red": T_red}
        printed &= member in T_red
        corrected &= t.t_red in T_red
    return outcome(printed, corrected_holds=corrected,
                   summary="t*_col is in T_red on every GPU preset" if printed
                   else "typo: t*_col in T_red should be t*_red in T_red",
                   coverage=f"every tile set of the {len(gpus())} GPU presets",
                   counterexample=cex, correction="(t*_row, t*_col) in T_out and t*_red in T_red",
                   correction_check=f"t*_red is in T_red on all {len(gpus())} GPU presets")


@register("thm1.premises", level="reading",
          domain="every prompt length L^P",
          evaluates=(Reading("Theorem 1: 'Under Assumptions 1 and 2'; Appendix B.1: 'By Assumption 3, "
                             "L_j^P is a multiple of t*_lcm'"),
                     Points("L^P <= 1024 at the A100's t*_lcm; the relaxed DP up to 1024"),),
          location="Theorem 1 ('Under Assumptions 1 and 2') vs Appendix B.1 ('By "
                                    "Assumption 3, L_j^P is a multiple of t*_lcm')",
          items=("Theorem 1", "Assumption 3"),
          claim="Theorem 1 holds under Assumptions 1 and 2 alone.",
          method="The proof's chunk set I_j needs L^P to be a multiple of t*_lcm: count the prompt lengths "
                 "L <= 1024 for which chunks of exactly t*_lcm can partition 1..L; then check the corrected "
                 "bound L(L+1) (appB / prop1) for every L, which needs no Assumption 3.")
def thm1_premises(fast: bool) -> Result:
    return premises_core(get_gpu(gpus()[0]).optimal_tile().t_lcm, fast)


def premises_core(t: int, fast: bool) -> Result:
    """Whether chunks of exactly ``t`` (= t*_lcm) partition every prompt length <= 1024."""
    L = np.arange(1, 1025)
    partitionable = L % t == 0
    L_max = dp_range(True)
    relax_ok = bool(np.array_equal(relaxed_dp(L_max).f, np.arange(L_max + 1) * (np.arange(L_max + 1) + 1)))
    first = int(L[~partitionable][0]) if not partitionable.all() else None
    return outcome(bool(partitionable.all()), corrected_holds=relax_ok,
                   summary=f"the proof's chunk set exists only for L^P multiple of t*_lcm "
                           f"({int(partitionable.sum())} "
                           f"of {L.size} lengths <= 1024): Assumption 3 is a hidden premise of Theorem 1"
                   if first else "chunks of exactly t*_lcm partition every prompt length <= 1024",
                   coverage=f"prompt lengths 1..{L.size} at t*_lcm = {t}",
                   counterexample={"t*_lcm": t, "L_P": first,
                                   "why": f"no chunking into chunks of exactly {t} covers 1..{first}"},
                   correction="add Assumption 3 to Theorem 1's premises, or use the bound with L^P (L^P + 1) "
                             "(prop1.drain_lower_bound's correction), which holds for every L^P",
                  correction_check=f"the exact relaxed DP minimum is L(L+1) for every L <= {L_max}, whether "
                                   "or not L is a multiple of t*_lcm")


def work_gaps(gpu: str, w: Workload, L_max: int, model: str = PAPER_MODEL) -> dict:
    """T_bar^R (Theorem 1) and the mean work per request with Eq. 12's prefill-attention term
    replaced by the DP minimum at t* (achievable), over all tiles (a true lower bound), and the
    relaxation L(L+1); with the corresponding lambda = 1 / work (r = 1)."""
    cm = cost_model(CostSpec(gpu, model))
    t = cm.t_star
    terms = T_bar_R_terms(cm, w)
    T_bar = sum(terms.values())
    coef = cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)
    at_t, over = gpu_dp(gpu, L_max)
    L = w.L_P
    closed = w.expect(closed_form_units(L, t))
    out = {"T_bar^R (s)": T_bar}
    for label, f in (("DP at t* (achievable)", at_t.f[L]), ("DP over tiles (lower bound)", over.f[L]),
                     ("relaxation L(L+1) (lower bound)", L * (L + 1))):
        work = T_bar - coef * (closed - w.expect(f))
        out[label] = {"work (s)": work, "lambda (req/s)": 1 / work,
                      "vs lambda* = 1/T_bar^R": f"{T_bar / work - 1:+.4%}"}
    out["lambda* (req/s)"] = 1 / T_bar
    return out


def grouped_scheduler_drift(gpu: str, L_P: int, L_D: int, chunking: str = "dp") -> dict:
    """A stable scheduler above lambda*: groups of t*_col requests (L^P, L^D deterministic), each prompt
    in the DP-optimal chunks at t*, decodes in full batches. Its work per request W < T_bar^R; at the
    load lambda = (1/T_bar^R + 1/W)/2 > lambda* the queue at group starts, X' = X - t*_col + A with
    A ~ Poisson(lambda t*_col W) when X >= t*_col, has drift t*_col (lambda W - 1) < 0 (Foster)."""
    cm = cost_model(CostSpec(gpu, tiles="t*"))
    t = cm.t_star
    chunks = gpu_dp(gpu, L_P)[0].chunks(L_P) if chunking == "dp" else [(1, L_P)]  # "rad": one chunk
    pre = sum(cost.T_batch(cm, cost.Batch.of(prefill=[ch])) for ch in chunks)
    dec = sum(cost.T_batch(cm, cost.Batch.of(decode=[L_P + k] * t.t_col)) for k in range(1, L_D + 1))
    W = pre + dec / t.t_col
    T_bar = sum(T_bar_R_terms(cost_model(CostSpec(gpu)), get_workload(f"deterministic:{L_P},{L_D}")).values())
    lam = (1 / T_bar + 1 / W) / 2
    return {"gpu": gpu, "model": PAPER_MODEL, "mode": "paper", "r": 1, "L_P": L_P, "L_D": L_D,
            "scheduler": f"groups of {t.t_col}; prompt chunks {chunks} at t* = {t}, each alone; "
                         f"{L_D} batch(es) of {t.t_col} decodes",
            "work per request W (s)": W, "T_bar^R (s)": T_bar, "lambda* = 1/T_bar^R": 1 / T_bar,
            "load lambda": lam, "lambda > lambda*": lam > 1 / T_bar,
            "drift per group at lambda": t.t_col * (lam * W - 1), "stable (drift < 0)": lam * W < 1}


@register("thm1.upper_bound", level="sample",
          domain="every planner and scheduler, every GPU and workload",
          evaluates=(Points("one grouped scheduler (A100, L^P = 256, L^D = 1); 2 (fast) or all GPU "
                            "presets x 2 or 4 workloads"),),
          location="Theorem 1 (Section 4.3) and its proof (Appendix B)",
          items=("Theorem 1", "Eq. 12"),
          claim="If lambda T_bar^R > r, every planner and scheduler is unstable: lambda* = r / T_bar^R "
                "bounds the stable arrival rates, T_bar^R being the least mean work per request.",
          method="Exhibit a scheduler in the paper's model (Eq. 7, common tile t*) whose work per request "
                 "W < T_bar^R (exact DP chunking, timed with theory.cost), and show by the Foster drift of "
                 "its group-start chain that it is stable at a load above lambda*; then compare T_bar^R with "
                 "the true minimum mean work (DP) on each GPU and workload, and check the corrected bound.")
def thm1_upper_bound(fast: bool) -> Result:
    L_max = dp_range(fast)
    cex = grouped_scheduler_drift("a100", 256, 1)
    wls = ["deterministic:256,1", "uniform:1-1024,1-256"] + ([] if fast else ["table1", "sharegpt4"])
    table, lower_ok = {}, True
    for g in gpus()[: 2 if fast else None]:
        for wn in wls:
            w = get_workload(wn).padded(get_gpu(g).optimal_tile().t_lcm)
            gaps = work_gaps(g, w, L_max)
            table[f"{g}/{wn}+pad"] = gaps
            lower_ok &= gaps["DP over tiles (lower bound)"]["work (s)"] >= gaps["relaxation L(L+1) (lower "
                                                                                "bound)"][
                "work (s)"] * (1 - 1e-12)
    printed_holds = not (cex["lambda > lambda*"] and cex["stable (drift < 0)"])
    gain = [v["DP at t* (achievable)"]["work (s)"] for v in table.values()]
    rel = [v["T_bar^R (s)"] / x - 1 for v, x in zip(table.values(), gain, strict=True)]
    return outcome(printed_holds, corrected_holds=lower_ok,
                   coverage=f"{len(table)} GPU x workload cases, exact DP up to L = {L_max}",
                   summary=f"a scheduler with work {cex['work per request W (s)']:.6g} s < T_bar^R = "
                  f"{cex['T_bar^R (s)']:.6g} s per request is stable above lambda* (a100, L^P = 256); "
                  f"achievable rates exceed lambda* by {min(rel):.3%} to {max(rel):.3%} on the cases of the "
                  "evidence" if not printed_holds else "the grouped scheduler is not stable above lambda*",
                  counterexample=cex,
                  correction="T_bar^R with E[L^P (L^P + 1)] in place of E[L^P (L^P + t*_lcm)] (the "
                             "relaxation's exact minimum; or, tighter, E[f(L^P)] with f the ceiling DP over "
                             "the tile set): if lambda times it exceeds r, no scheduler is stable",
                  correction_check="the corrected T_bar (relaxation) is below the DP-over-tiles lower bound "
                                   "and the achievable work on every GPU x workload checked; its validity "
                                   "rests on prop1.drain_lower_bound's correction (exact DP, all L "
                                   f"<= {L_max})",
                  evidence={"mean work per request and lambda (r = 1)": table})


@register("thm1.instability", level="sample",
          domain="every scheduler and every lambda above lambda*",
          evaluates=(Points("every registered scheduler but WAIT at 1.05 lambda*, 20000 (fast) or "
                            "100000 requests, A100, Table 1 padded"),),
          location="Theorem 1, 'lim Q(t)/t > alpha almost surely'",
          items=("Theorem 1",),
          claim="Above lambda* every scheduler's queue grows linearly.",
          method="simulation of every scheduler above lambda*")
def thm1_instability(fast: bool) -> Result:
    from stability.sim.registry import scheduler_names

    # above lambda* and above the corrected bound (thm1.upper_bound: +0.04% at most). WAIT is left
    # out: without thresholds every (L^P, L^D) pair is a type of its own, and its step over the
    # eligible types is quadratic in their number (Table 1's law has tens of thousands); its own
    # region is checked by other.aslw_fluid_region
    names = [name for name in scheduler_names() if name != "wait"]
    return instability_core(1.05, 20000 if fast else 100000, names)


def instability_core(load: float, n_req: int, names: list[str]) -> Result:
    """Simulate each scheduler of ``names`` at ``load`` x lambda* and judge growth of the work."""
    from paper_checks.simulated import UNSTABLE_BLIND, default_setting, run, verdict_margin

    rows, margin = {}, math.inf
    for name in names:
        v = run(name, load, n_req, seed=3, **default_setting(name)).verdict()
        rows[name] = {"verdict": v.verdict, "accumulating fraction": v.growth,
                      "99% CI": [v.ci_low, v.ci_high]}
        margin = min(margin, verdict_margin(v.as_dict()))
    stable = {k: r for k, r in rows.items() if r["verdict"] != "unstable"}
    first = next(iter(rows))
    return outcome(not stable,
                   summary=f"not unstable at {load} lambda*: {', '.join(stable)}" if stable else
                   f"every scheduler accumulates work at {load} lambda* ({first}: "
                   f"{rows[first]['accumulating fraction']:.3f} of the offered work)",
                   coverage=f"{', '.join(rows)} at {load} x lambda*, {n_req} requests, A100, Mistral-7B, "
                            "Table-1 padded; verdict by regression of the work in system (99% CI)",
                   counterexample={"load": load, "schedulers": stable}, evidence={"schedulers": rows},
                   margin=margin, blind_spot=blind_spot(margin, UNSTABLE_BLIND))


def threshold_of(t_col, T_max, T_bar, eps):
    """Theorem 2's threshold (t*_col - 1) T^max / (eps T_bar^R), written as the product it bounds:
    n > threshold iff n eps T_bar^R > (t*_col - 1) T^max."""
    return (t_col - 1) * T_max, eps * T_bar


def threshold_statement(threshold: Callable | None = None):
    """z3 over the reals: n above ``threshold`` (Theorem 2's unless a test feeds another),
    lambda = theta r (1 - eps) / T_bar^R with 0 < theta <= 1 and 0 < eps < 1, r >= 1, t*_col >= 1,
    T^max >= 0 imply that the drift bound n (lambda T_bar^R / r - 1) + (lambda / r)(t*_col - 1) T^max
    of the cycle chain (Lemma 3 with the per-node rate lambda / r) is negative. Returns
    ``(claim, premises)``."""
    threshold = threshold or threshold_of
    lam, r, tb, tm, eps, theta, n, tc = z3.Reals("lam r T_bar T_max eps theta n t_col")
    num, den = threshold(tc, tm, tb, eps)
    premises = [r >= 1, tb > 0, tm >= 0, eps > 0, eps < 1, theta > 0, theta <= 1, tc >= 1,
                lam * tb == theta * r * (1 - eps), n * den > num]
    return n * (lam / r * tb - 1) + lam / r * (tc - 1) * tm < 0, premises


@register("thm2.threshold", level="proof",
          location="Theorem 2, n > (t*_col - 1) T^max / (eps T_bar^R); Lemma 3 step (b)",
          items=("Theorem 2", "Lemma 3"),
          claim="With n above Theorem 2's threshold, the drift bound of the cycle DTMC (with arrivals at "
                "rate lambda/r per node) is negative for every lambda <= r (1 - eps) / T_bar^R.",
          domain="every r >= 1, T_bar^R > 0, T^max >= 0, eps in (0, 1), t*_col >= 1, lambda <= "
                 "r (1 - eps) / T_bar^R and n above the threshold",
          evaluates=(Symbolic("z3", threshold_statement, "threshold and load imply a negative drift "
                                                         "bound, over the reals"),),
          method="z3 over the reals: Theorem 2's threshold on n, lambda = theta r (1 - eps)/T_bar^R with "
                 "0 < theta <= 1, and the other parameters' ranges imply n (lambda T_bar/r - 1) + "
                 "(lambda/r)(t*_col - 1) T^max < 0 (theory.bounds's n and drift on a grid are "
                 "thm2.threshold_grid).")
def thm2_threshold(fast: bool) -> Result:
    from paper_checks.proofs import prove

    holds, cex = prove(*threshold_statement())
    if not holds:
        return Result(Verdict.FAIL, "the threshold does not make the drift negative", counterexample=cex)
    return Result(Verdict.PASS, "proved: negative drift for all lambda <= r(1-eps)/T_bar once n exceeds the "
                                "threshold (with the corrected rate lambda/r, see lemma3.drift)",
                  coverage="z3 over the reals: every r >= 1, T_bar^R, T^max, eps in (0, 1), t*_col >= 1, "
                           "theta in (0, 1] and n above the threshold",
                  margin=NOT_APPLICABLE)


@register("thm2.threshold_grid", level="sample",
          location="Theorem 2's n and Lemma 3's drift bound, as theory.bounds computes them",
          items=("Theorem 2", "Lemma 3"),
          claim="theory.bounds.n_threshold is above Theorem 2's threshold and "
                "theory.bounds.lemma3_drift_bound is the corrected drift bound, which it makes negative for "
                "every lambda <= r (1 - eps) / T_bar^R.",
          domain="every r, eps, t*_col, T^max / T_bar^R and lambda <= r (1 - eps) / T_bar^R",
          evaluates=(Points("a grid of 4 x 4 x 5 x 4 x 3 points: r 1..8, eps 0.01..0.9, t*_col 1..256, "
                            "T^max / T_bar^R 0.5..1e4, theta in (0, 1]; exact rationals"),),
          method="theory.bounds.n_threshold and lemma3_drift_bound on the grid against the drift in exact "
                 "rationals at lambda = theta r (1 - eps)/T_bar: negative, and equal to 1e-9.")
def thm2_threshold_grid(fast: bool) -> Result:
    grid_ok, n_grid, bad = threshold_grid(fast)
    if not grid_ok:
        return Result(Verdict.FAIL, "theory.bounds's threshold does not make the drift negative",
                      counterexample=bad)
    return Result(Verdict.PASS, "theory.bounds's n makes its drift bound negative, and the bound is the "
                                "exact corrected drift",
                  coverage=f"{n_grid} grid points (r 1..8, eps, t*_col 1..256, T^max/T_bar up to 1e4, "
                           "theta in (0, 1])",
                  margin=EXACT)


def threshold_grid(fast: bool) -> tuple[bool, int, dict | None]:
    """theory.bounds's n threshold and corrected drift at lambda = theta r (1 - eps)/T_bar, exactly."""
    n_pts = 0
    for r in (1, 2, 3, 8):
        for eps in (0.01, 0.1, 0.5, 0.9):
            for t_col in (1, 2, 64, 128, 256):
                for ratio in (0.5, 3.0, 1e2, 1e4):
                    T_bar, T_mx = 1.0, ratio
                    n = n_threshold(t_col, T_mx, T_bar, eps)
                    for theta in (Fraction(1, 100), Fraction(1, 2), Fraction(1)):
                        lam = Fraction(r) * (1 - Fraction(eps)) / Fraction(T_bar) * theta
                        drift = (n * (lam / r * Fraction(T_bar) - 1) + lam / r * (t_col - 1) * Fraction(T_mx))
                        n_pts += 1
                        num = lemma3_drift_bound(n, float(lam), r, T_bar, t_col, T_mx)
                        if not (drift < 0 and math.isclose(num, float(drift), rel_tol=1e-9, abs_tol=1e-9)):
                            return False, n_pts, {"r": r, "eps": eps, "t_col": t_col, "T_max/T_bar": ratio,
                                                  "theta": str(theta), "n": n, "drift": float(drift)}
    return True, n_pts, None


DRIFT_BLIND = ("Theorem 2's n is far above the n a negative drift needs (the evidence's n_min): cycle times "
               "wrong by less than this factor keep the drift negative at it")


@register("thm2.dtmc_threshold", level="sample",
          domain="every GPU, workload, eps and state x >= n",
          evaluates=(Points("eps in {0.1} (fast) or {0.05, 0.1, 0.2} on an A100 with one 16x4x16 tile; "
                            "the A100 preset for the empirical n_min"),),
          location="Theorem 2's n vs the cycle DTMC",
          items=("Theorem 2",),
          claim="With n above Theorem 2's threshold and lambda <= lambda* (1 - eps), the drift of RAD's "
                "cycle chain is negative for every large x.",
          method="Executed cycles (stability.dtmc): at Theorem 2's own n, on a tile set where it is "
                 "affordable (an A100 with one 16x4x16 tile), the drift for x >= n at lambda* (1 - eps) "
                 "with its 99% CI; and on the A100 preset the empirical smallest n with negative drift "
                 "set against Theorem 2's n.")
def thm2_dtmc_threshold(fast: bool) -> Result:
    from paper_checks.simulated import small_tile_cost_model
    from stability.dtmc import CycleSampler, empirical_n_min
    from theory.bounds import T_bar_R, T_max, n_threshold
    from theory.stats import t_interval

    rows, margin = [], math.inf
    cm = small_tile_cost_model()
    w = get_workload("uniform:1-64,1-24").padded(cm.t_lcm)
    tbar, tmax = T_bar_R(cm, w), T_max(cm, w.l_P_max, w.l_D_max)
    for eps in ((0.1,) if fast else (0.05, 0.1, 0.2)):
        n = n_threshold(cm.t_star.t_col, tmax, tbar, eps)
        sat = CycleSampler(cm, w, n).saturated(100 if fast else 400, seed=7)
        drift = sat.drift_samples((1 - eps) / tbar)
        m, lo, hi = t_interval(drift, 0.99)
        # the arrivals of a cycle (drift + K) grown until the interval's upper end reaches 0
        margin = min(margin, t_test_margin(drift + sat.K, sat.K, 0.99, end="upper"))
        rows.append({"tile set": "a100 16x4x16", "epsilon": eps, "Theorem 2's n": n,
                     "drift for x >= n": [m, lo, hi]})
    bad = [r for r in rows if r["drift for x >= n"][2] >= 0]
    cm_a = cost_model(CostSpec("a100"))
    w_a = get_workload("table1").padded(cm_a.t_lcm)
    emp = empirical_n_min(cm_a, w_a, 0.1, samples=60 if fast else 200, seed=7)
    evidence = {"at Theorem 2's n": rows,
                "A100 preset, eps = 0.1": {"empirical n_min": emp.n_min, "Theorem 2's n": emp.n_threshold,
                                           "drift at n_min": list(emp.drift)}}
    if bad:
        return Result(Verdict.FAIL, "the executed drift is not negative at Theorem 2's n",
                      counterexample={"cases": bad})
    ratio = emp.n_threshold / emp.n_min if emp.n_min else float("nan")
    return Result(Verdict.PASS, f"drift < 0 at Theorem 2's n in every case; on the A100 preset an n "
                                f"{ratio:,.0f} times smaller already suffices (n_min = {emp.n_min} vs "
                                f"{emp.n_threshold:,} at eps = 0.1)",
                  coverage=f"{len(rows)} values of eps on an A100 with one 16x4x16 tile (Theorem 2's n "
                           "in the hundreds), uniform:1-64,1-24 padded; A100 preset, Table-1 padded, for "
                           "the empirical n_min; 99% CIs over executed cycles", evidence=evidence,
                  margin=margin, blind_spot=blind_spot(margin, DRIFT_BLIND))


@register("sec4.rad_tiling_rare", level="sample",
          domain="every load below lambda*, every GPU and workload",
          evaluates=(Points("loads 0.9 (fast) or 0.7, 0.9, 0.97 x lambda*, A100, Mistral-7B, Table 1 "
                            "padded, RAD n = 2000"),),
          location="Section 4.2, 'This tiling strategy is violated only in rare "
                                           "cases-specifically, near the end of a cycle'",
          items=("Algorithm 1",),
          claim="RAD leaves optimal tiling only rarely, near the end of a cycle.",
          method="Simulate RAD (n = 2000) below lambda* with the batch log; count batches not optimally "
                 "tiled and, for each, whether n requests had started in its cycle (the end of a cycle) or "
                 "no request was waiting (line 6's P = empty branch).")
def sec4_rad_tiling_rare(fast: bool) -> Result:
    return tiling_core((0.9,) if fast else (0.7, 0.9, 0.97), 1500 if fast else 3000)


def tiling_core(loads: tuple[float, ...], n_requests: int) -> Result:
    """RAD's batches that are not optimally tiled, at each load of ``loads`` (x lambda*)."""
    from paper_checks.simulated import RAD_N
    from stability.sim.simulate import Scenario, simulate

    rows, explained = [], True
    for load in loads:
        res = simulate(Scenario(gpu="a100", pad=True, load=load, n_requests=n_requests,
                                detail=True, log=True, options=(("n", RAD_N),)))
        rq, log, cyc = res.requests, res.batch_log(), res.runs[0].cycles
        bad = ~log["optimal"]
        s = log["start"][bad]
        c0 = cyc["start"][np.maximum(np.searchsorted(cyc["start"], s, side="right") - 1, 0)]
        t_start, arrival = np.sort(rq["t_start"]), np.sort(rq["arrival"])
        started = np.searchsorted(t_start, s, side="left") - np.searchsorted(t_start, c0, side="left")
        waiting = np.searchsorted(arrival, s, side="right") - np.searchsorted(t_start, s, side="right")
        at_end, idle_queue = int(np.sum(started == RAD_N)), int(np.sum(waiting == 0))
        explained &= bool(np.all((started == RAD_N) | (waiting == 0)))
        rows.append({"load": load, "batches": int(bad.size), "not optimally tiled": int(bad.sum()),
                     "fraction of batches": float(bad.mean()),
                     "fraction of busy time": float(log["duration"][bad].sum() / log["duration"].sum()),
                     "at the end of a cycle (n started)": int(at_end),
                     "no request waiting": int(idle_queue)})
    return tiling_verdict(rows, explained)


def tiling_verdict(rows: list[dict], explained: bool) -> Result:
    """The verdict on the per-load ``rows`` of :func:`tiling_core`: rare (< 5% of batches) and near
    the end of a cycle (at least half with n requests started), else ERRATUM when every such batch
    is explained by line 6 (``explained``)."""
    rare = all(r["fraction of batches"] < 0.05 for r in rows)
    near_end = all(r["at the end of a cycle (n started)"] >= 0.5 * r["not optimally tiled"] for r in rows)
    verdict = judged(rare and near_end, explained)
    if verdict is Verdict.PASS:
        return Result(verdict, "RAD's non-optimal batches are rare and at cycle ends",
                      coverage=f"loads {[r['load'] for r in rows]}", evidence={"runs": rows})
    worst = max(rows, key=lambda r: r["fraction of batches"])
    return Result(verdict, f"at {worst['load']} lambda*, {worst['fraction of batches']:.0%} of RAD's "
                           f"batches ({worst['fraction of busy time']:.0%} of its busy time) are not "
                           "optimally tiled, almost all mid-cycle because no request is waiting",
                  counterexample={"scenario": "A100, Mistral-7B, Table-1 padded, RAD n = 2000, Poisson "
                                              "arrivals, seed 0", **worst},
                  correction="RAD runs a batch that is not optimally tiled exactly when line 6 sends it to "
                             "decode with fewer than t*_col requests in D because no request is waiting or n "
                             "have started in the cycle; below saturation that is most of its batches",
                  correction_check="every logged non-optimal batch of every run had an empty queue or n "
                                   "requests started in its cycle" if explained else "violated",
                  evidence={"runs": rows})


@register("sec4.rad_optimal_tiling", level="sample",
          domain="RAD's batches on every GPU and model",
          evaluates=(Points("every GPU preset x model preset (paper mode): decode batches of t*_col and "
                            "t*_lcm tokens, chunks (1 + k t*_lcm, t*_lcm), k < 32 (8 fast)"),),
          location="Section 4.2, 'Optimal GeMM tiling' principle of RAD",
          items=("Algorithm 1", "Assumption 1"),
          claim="RAD's batches -- t*_col decode iterations, or one prefill chunk of t*_lcm tokens at a "
                "multiple of t*_lcm -- are optimally tiled: every GeMM is perfectly tiled at t*, and t* "
                "is (one of) the fastest tiles for it.",
          method="For every GPU x model (paper mode): padding-free check of each GeMM at t* (exact "
                 "integers), and theory.cost's per-tile times of Eq. 4 and Eq. 6 for RAD's batches vs "
                 "t*'s (ties within 1e-12), chunks at 1 + k t*_lcm, k < 32.")
def sec4_rad_optimal_tiling(fast: bool) -> Result:
    n = 0
    for g in gpus():
        for mk in models():
            cm = cost_model(CostSpec(g, mk))
            t = cm.t_star
            for tau in (t.t_col, t.t_lcm):
                lin = cost.T_Lin(cm, tau)
                lin_t = cost.T_Lin(cm, tau, tile=0)
                n += 1
                if lin_t > lin * (1 + 1e-12) or tau % t.t_col:
                    return Result(Verdict.FAIL, "a RAD batch's linear GeMMs are not optimally tiled at t*",
                                  counterexample={"gpu": g, "model": mk, "tau": tau})
            k = np.arange(32 if not fast else 8)
            i = 1 + k * t.t_lcm
            c = np.full(k.size, t.t_lcm)
            e = i + c - 1
            padded = np.any((e % t.t_row) | (e % t.t_red) | (c % t.t_col))
            best = cost.T_P_SA(cm, i, c)
            at_t = cost.T_P_SA(cm, i, c, tile=0)
            n += k.size
            if padded or np.any(at_t > best * (1 + 1e-12)):
                return Result(Verdict.FAIL, "a RAD prefill chunk is not optimally tiled at t*",
                              counterexample={"gpu": g, "model": mk, "t*": str(t)})
    return Result(Verdict.PASS, "RAD's batches are padding-free at t* and t* is fastest for them",
                  coverage=f"{n} (GPU, model, batch) cases: decode batches of t*_col and t*_lcm tokens, "
                           f"prefill chunks (1 + k t*_lcm, t*_lcm), k < {32 if not fast else 8}",
                  margin=EXACT)


@register("sec4.rad_throughput_optimal", level="sample",
          domain="every scheduler, GPU and workload",
          evaluates=(Points("A100 preset, prompt lengths t*_lcm..1024 (fast) or 8192 in steps of t*_lcm; "
                            "one grouped scheduler"),),
          location="Abstract, Section 4 title and Theorem 2's name "
                                                  "('Throughput Optimality of RAD'), Conclusion",
          items=("Theorem 2", "Algorithm 1"),
          claim="RAD (with chunks of t*_lcm) is throughput optimal: no scheduler is stable at a higher "
                "arrival rate.",
          method="RAD's own prefill time per request equals Eq. 12's prefill terms exactly (perfect tiling), "
                 "and each decode iteration costs at least its Eq. 12 share, so RAD's work per request is at "
                 "least T*_R (its throughput at most r/T_bar^R); compare with the grouped t*_col-chunk "
                 "scheduler of thm1.upper_bound (work W < T_bar^R, stable up to r/W).")
def sec4_rad_throughput_optimal(fast: bool) -> Result:
    L_max = dp_range(fast)
    g = "a100"
    cm_star, cm = cost_model(CostSpec(g, tiles="t*")), cost_model(CostSpec(g))
    t = cm.t_star
    L = np.arange(t.t_lcm, L_max + 1, t.t_lcm)
    rad_prefill = cost.chunked_prefill_time(cm_star, L, t.t_lcm)
    coef = cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)
    eq12_prefill = L / (cm.mu_Lin[0] * t.t_col) + L / cm.mu_nLin + coef * closed_form_units(L, t)
    exact = np.allclose(rad_prefill, eq12_prefill, rtol=1e-12, atol=0)
    per_decode_floor = 1 / (cm.mu_Lin[0] * t.t_col)
    decode_batch_ok = all(float(cost.T_Lin(cm_star, k)) >= k * per_decode_floor * (1 - 1e-12)
                          for k in range(1, t.t_col + 1))
    at_t = gpu_dp(g, L_max)[0]
    better = L[at_t.f[L] < closed_form_units(L, t)]
    alt = grouped_scheduler_drift(g, t.t_lcm, 1)
    holds = not (exact and decode_batch_ok and better.size and alt["stable (drift < 0)"])
    return outcome(holds,
                   coverage=f"A100 preset, prompt lengths t*_lcm..{L_max} in steps of t*_lcm, exact DP at t*",
                   summary="no scheduler of the comparison beats RAD's work per request" if holds else
                   "RAD's work per request is T*_R exactly in its prefill and at least T*_R's share per "
                   "decode, while chunks of t*_col do better on every multiple of t*_lcm "
                   f"({better.size}/{L.size} lengths <= {L_max}); RAD's capacity r/T_bar^R is below the "
                   "grouped scheduler's",
                  counterexample={"gpu": g, "RAD prefill time = Eq. 12 prefill terms (all L)": bool(exact),
                                  "RAD decode batches cost >= their Eq. 12 share": decode_batch_ok,
                                  "better scheduler": alt},
                  evidence={"capacity gain of the better scheduler (deterministic L^P = t*_lcm, L^D = 1)":
                            f"{alt['T_bar^R (s)'] / alt['work per request W (s)'] - 1:.4%}"})
