"""Checks of the system and cost model: Sections 2.3 and 3, Eq. 2-7, Definitions 1-2.

The paper's formulas are transcribed here once more, from the text, as sympy expressions or exact
rationals (``printed_*``), and compared with their derivations (Eq. 5 and Eq. 6 from Eq. 2-3, Eq. 4
from the per-layer GeMMs) and with :mod:`theory.cost`, which implements them for the simulator.

References
----------
Bari, Hegde, de Veciana (2025), Sections 2.3, 3.1-3.2, Eq. 2-7, Definitions 1-2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import sympy as sp

from paper_checks.common import frac, gpus, models
from paper_checks.evidence import Points, Reading, Symbolic
from paper_checks.margins import EXACT, NOT_APPLICABLE
from paper_checks.pseudocode import Req, rad, violations
from paper_checks.registry import Result, Verdict, outcome, register
from theory import cost
from theory.builder import CostSpec, cost_model
from theory.models import Model, get_model

ceiling = sp.ceiling
tau, i_, c_ = sp.symbols("tau i c", integer=True, positive=True)
s_, mu_, N_ = sp.symbols("s mu N", positive=True)


# --- Eq. 2-3: tile counts -------------------------------------------------------------------


def gemm_tile_pairs(d_row: int, d_col: int, d_red: int, t_row: int, t_col: int, t_red: int) -> int:
    """Count, by enumerating the tile grid, the tile pairs a padded GeMM multiplies (Section 2.3).

    Each output entry ``(x, y)`` must lie in exactly one output tile, and each product term
    ``A[x, k] B[k, y]`` in exactly one tile pair; returns the number of tile pairs, or -1 if the
    covering is not exact.
    """
    out_tiles = [(a, b) for a in range(d_row) for b in range(d_col)
                 if a % t_row == 0 and b % t_col == 0]  # tile corners on the grid inside C
    cover = np.zeros((d_row, d_col), dtype=int)
    for a, b in out_tiles:
        cover[a:a + t_row, b:b + t_col] += 1
    red_tiles = [k for k in range(d_red) if k % t_red == 0]
    red_cover = np.zeros(d_red, dtype=int)
    for k in red_tiles:
        red_cover[k:k + t_red] += 1
    if not (np.all(cover == 1) and np.all(red_cover == 1)):
        return -1
    return len(out_tiles) * len(red_tiles)


@register("eq2_eq3.tile_counts", level="sample",
          domain="every GeMM and GeMV shape (dimensions >= 1) and every tile",
          evaluates=(Points("every shape with dimensions 1..9 (1..6 fast) and tiles in {1, 2, 3, 4, 8}, "
                            "enumerated"),),
          location="Section 2.3, Eq. 2 and Eq. 3",
          items=("Eq. 2", "Eq. 3"),
          claim="A GeMM on tiles t_row x t_col x t_red multiplies ceil(d_row/t_row) ceil(d_col/t_col) "
                "ceil(d_red/t_red) tile pairs (a GeMV: ceil(d_row/t_row) ceil(d_col/t_col) tiles), so "
                "it takes that count / (s mu).",
          method="Enumerate the zero-padded tile grid of every small GeMM (d <= 9, tiles in "
                 "{1,2,3,4,8}) and GeMV, check every entry and product term is covered exactly once, "
                 "count the tile pairs, and compare with Eq. 2-3 and with theory.cost.T_GeMM/T_GeMV.")
def eq2_eq3_tile_counts(fast: bool) -> Result:
    sizes, tiles = range(1, 10 if not fast else 7), (1, 2, 3, 4, 8)
    n, bad = 0, None
    for d_row in sizes:
        for d_col in sizes:
            for t_row in tiles:
                for t_col in tiles:
                    gemv = gemm_tile_pairs(d_row, d_col, 1, t_row, t_col, 1)
                    ok = gemv == math.ceil(d_row / t_row) * math.ceil(d_col / t_col)
                    ok &= math.isclose(float(cost.T_GeMV(d_row, d_col, t_row, t_col, 3.0, 7)), gemv / 21)
                    n += 1
                    for d_red in sizes if t_row in (1, 4) else ():
                        for t_red in (1, 2, 8):
                            pairs = gemm_tile_pairs(d_row, d_col, d_red, t_row, t_col, t_red)
                            want = (math.ceil(d_row / t_row) * math.ceil(d_col / t_col)
                                    * math.ceil(d_red / t_red))
                            t = float(cost.T_GeMM(d_row, d_col, d_red, t_row, t_col, t_red, 3.0, 7))
                            ok &= pairs == want and math.isclose(t, pairs / 21)
                            n += 1
                    if not ok and bad is None:
                        bad = {"d_row": d_row, "d_col": d_col, "t_row": t_row, "t_col": t_col}
    if bad:
        return Result(Verdict.FAIL, "a tile count differs from Eq. 2/3", counterexample=bad)
    return Result(Verdict.PASS, f"tile enumeration matches Eq. 2-3 and theory.cost on {n} shapes",
                  coverage=f"{n} GeMM/GeMV shapes: dims 1..{max(sizes)}, tiles {tiles}"
                           + (" (fast subset)" if fast else ""),
                  margin=EXACT)


# --- Eq. 4: linear layers -------------------------------------------------------------------


def paper_linear_gemms(m: Model) -> list[tuple[int, int, int]]:
    """The weight GeMMs of one batch as the paper lists them (Sections 2.1, 3.2.1), as
    ``(count, d_row, d_red)``: W_Q, W_K, W_V (d x d_x) and W_F1 (d_ff x d), W_F2 (d_x x d_ff) in
    each of N layers, and the final projection (d_out x d_x)."""
    return [(3 * m.N, m.d, m.d_x), (m.N, m.d_ff, m.d), (m.N, m.d_x, m.d_ff), (1, m.d_out, m.d_x)]


def printed_eq4_sum(m: Model, t_row, t_col, t_red, mu, s, tau):
    """The unnumbered display before Eq. 4, as printed (no ceilings on the model dimensions)."""
    d_x, d, d_ff, d_out, N = m.d_x, m.d, m.d_ff, m.d_out, m.N
    R = sp.Rational
    return (1 / (s * mu) * (3 * N * R(d_x, t_red) * R(d, t_row) + N * R(d, t_red) * R(d_ff, t_row)
                            + N * R(d_ff, t_red) * R(d_x, t_row) + R(d_x, t_red) * R(d_out, t_row))
            * ceiling(tau / t_col))


def eq4_core(mode: str = "paper", printed: Callable = printed_eq4_sum, gpu_keys=None,
             model_keys=None) -> tuple[bool, dict | None, int]:
    """Eq. 4 for every tile of every GPU and every model: the sum of the per-layer GeMMs (Eq. 2
    each, tau symbolic) equals ``ceil(tau/t_col) / mu_Lin(t)`` with theory.cost's mu_Lin, and (paper
    mode) equals the printed display and the model's ``linear_gemms``. Returns (ok, bad case, n)."""
    n = 0
    for g in gpu_keys or gpus():
        for mk in model_keys or models():
            m = get_model(mk)
            cm = cost_model(CostSpec(g, mk, mode))
            gemms = paper_linear_gemms(m) if mode == "paper" else [
                (x.count, x.d_row, x.d_red) for x in m.linear_gemms(mode)]
            if mode == "paper" and sorted(gemms) != sorted((x.count, x.d_row, x.d_red)
                                                          for x in m.linear_gemms("paper")):
                return False, {"gpu": g, "model": mk, "reason": "theory.models GeMM list"}, n
            for k, t in enumerate(cm.tiles):
                total = sp.Add(*[cnt * ceiling(sp.Integer(dr) / t.t_row) * ceiling(tau / t.t_col)
                                 * ceiling(sp.Integer(dk) / t.t_red) / (s_ * mu_) for cnt, dr, dk in gemms])
                pairs = sum(cnt * math.ceil(dr / t.t_row) * math.ceil(dk / t.t_red) for cnt, dr, dk in gemms)
                ok = sp.expand(total - pairs * ceiling(tau / t.t_col) / (s_ * mu_)) == 0
                # theory.cost's 1 / mu_Lin(t) is pairs / (s mu(t)) up to float rounding
                ok &= math.isclose(1 / cm.mu_Lin[k], pairs / (cm.s * cm.mu[k]), rel_tol=1e-12)
                if mode == "paper":
                    ok &= sp.expand(total - printed(m, t.t_row, t.t_col, t.t_red, mu_, s_, tau)) == 0
                n += 1
                if not ok:
                    return False, {"gpu": g, "model": mk, "mode": mode, "tile": str(t)}, n
    return True, None, n


@register("eq4.linear_aggregation", level="sample",
          domain="every batch size tau, every tile and every model whose dimensions the tile divides",
          evaluates=(Points("every tile of every GPU preset x model preset x mode (paper, real), tau "
                            "symbolic"),),
          location="Section 3.2.1, the display before Eq. 4 and Eq. 4",
          items=("Eq. 4",),
          claim="With model dimensions divisible by the tiles, the linear layers of a batch of tau tokens "
                "(3N QKV GeMMs d x d_x, N FFN GeMMs d_ff x d and d_x x d_ff, one final d_out x d_x) take "
                "the printed sum, which is ceil(tau / t_col) / mu_Lin(t).",
          method="sympy with tau symbolic: sum the Eq. 2 times of the GeMMs transcribed from the text, "
                 "compare with the printed display and with ceil(tau/t_col)/mu_Lin (mu_Lin from "
                 "theory.cost) for every tile of every GPU preset and every model preset (paper mode; "
                 "real mode: the aggregation with the served architecture's GeMMs).")
def eq4_linear_aggregation(fast: bool) -> Result:
    results = {mode: eq4_core(mode) for mode in ("paper", "real")}
    bad = next((r[1] for r in results.values() if not r[0]), None)
    n = sum(r[2] for r in results.values())
    if bad:
        return Result(Verdict.FAIL, "Eq. 4 does not equal the sum of the per-layer GeMMs",
                      counterexample=bad)
    return Result(Verdict.PASS, "Eq. 4 equals the per-layer GeMM sum exactly, symbolically in tau",
                  coverage=f"{n} (GPU tile, model, mode) cases: every tile of {len(gpus())} GPU presets x "
                           f"{len(models())} models x paper/real modes",
                  margin=EXACT)


# --- Eq. 5: decode attention ----------------------------------------------------------------


def printed_eq5(i, d, t_row, t_col, mu, s):
    """Eq. 5 exactly as printed: (1/mu) (d/t_col ceil(i/t_row) + ceil(i/t_col) d/t_row) (no s)."""
    i, d, t_row, t_col, mu, s = sp.sympify((i, d, t_row, t_col, mu, s))
    return (d / t_col * ceiling(i / t_row) + ceiling(i / t_col) * d / t_row) / mu


def corrected_eq5(i, d, t_row, t_col, mu, s):
    """Eq. 5 with the 1/s that Eq. 3 carries: (d/t_col ceil(i/t_row) + ceil(i/t_col) d/t_row) / (s mu)."""
    i, d, t_row, t_col, mu, s = sp.sympify((i, d, t_row, t_col, mu, s))
    return (d / t_col * ceiling(i / t_row) + ceiling(i / t_col) * d / t_row) / (s * mu)


def eq3(d_row, d_col, t_row, t_col, mu, s):
    """Eq. 3 as printed: ceil(d_row/t_row) ceil(d_col/t_col) / (s mu)."""
    d_row, d_col, t_row, t_col, mu, s = sp.sympify((d_row, d_col, t_row, t_col, mu, s))
    return ceiling(d_row / t_row) * ceiling(d_col / t_col) / (s * mu)


def eq5_statements() -> dict:
    """sympy, i, D, t_row, t_col, mu, s symbolic and d = D t_row t_col: Eq. 5 as printed, Eq. 5 with
    the 1/s of Eq. 3, and theory.symbolic's decode attention, each minus the two Eq. 3 GeMV times
    (K^T q: i x d, V p: d x i) they should equal (zero when they do)."""
    from theory import symbolic

    Dm, tr, tc = sp.symbols("D t_row t_col", integer=True, positive=True)
    d = Dm * tr * tc
    derived = eq3(i_, d, tr, tc, mu_, s_) + eq3(d, i_, tr, tc, mu_, s_)
    return {"printed Eq. 5 - (Eq. 3 + Eq. 3)": printed_eq5(i_, d, tr, tc, mu_, s_) - derived,
            "corrected Eq. 5 - (Eq. 3 + Eq. 3)": corrected_eq5(i_, d, tr, tc, mu_, s_) - derived,
            "theory.symbolic decode attention - (Eq. 3 + Eq. 3)":
                symbolic.decode_attention_time(i_, d, tr, tc, mu_, s_) - derived}


@register("eq5.missing_1_over_s", level="proof",
          location="Section 3.2.2, Eq. 5",
          items=("Eq. 5",),
          claim="Eq. 5, the decode self-attention time at token i, is Eq. 3 applied to its two GeMVs "
                "(K^T q: i x d; V p: d x i).",
          domain="every token index i, attention width d divisible by the GeMV tile, GeMV tile, rate "
                 "mu and speed-up s",
          evaluates=(Symbolic("sympy", eq5_statements, "Eq. 5 (printed, corrected, theory.symbolic's) "
                                                       "minus Eq. 3 + Eq. 3, for symbolic i, d, tiles, "
                                                       "mu, s"),),
          method="sympy: printed Eq. 5 minus the sum of the two Eq. 3 GeMV times, with i, the tiles, mu "
                 "and s symbolic and d divisible by the tiles; then the same for Eq. 5 divided by s and "
                 "for theory.symbolic's corrected form (theory.cost.T_D_SA against it on the presets is "
                 "eq5.gemv_orientation).")
def eq5_missing_1_over_s(fast: bool) -> Result:
    gaps = {k: sp.simplify(v) for k, v in eq5_statements().items()}
    printed_gap, *corrected_gaps = gaps.values()
    printed_ok, corrected_ok = printed_gap == 0, all(g == 0 for g in corrected_gaps)
    d, s = 4096, 2  # an instance of the symbolic gap (Mistral-7B's d; any s > 1 shows it)
    cex = {"s": s, "i": 1, "d": d, "gemv tile": "16x16", "mu": 1,
           "printed Eq. 5": str(printed_eq5(1, d, 16, 16, 1, s)),
           "Eq. 3 + Eq. 3": str(eq3(1, d, 16, 16, 1, s) + eq3(d, 1, 16, 16, 1, s)),
           "printed - derived (symbolic)": str(printed_gap)}
    return outcome(printed_ok, corrected_holds=corrected_ok,
                   summary="Eq. 5 is Eq. 3 applied to its two GeMVs" if printed_ok else
                   "printed Eq. 5 is s times Eq. 3's time (it drops 1/s); divided by s it matches",
                   coverage="symbolic i, d, tiles, mu, s (the whole family)",
                   counterexample=cex,
                   correction="T^{D,SA}(i) = (1/(s mu(t_row,t_col))) (d/t_col ceil(i/t_row) + ceil(i/t_col) "
                              "d/t_row), i.e. Eq. 5 divided by s, as Eq. 3 prescribes",
                   correction_check="sympy: corrected Eq. 5 - (Eq. 3 + Eq. 3) == 0 for symbolic i, d, tiles, "
                                    "mu, s; theory.symbolic's form equals it",
                   evidence={"differences (sympy, simplified)": {k: str(v) for k, v in gaps.items()}})


# --- Eq. 6: prefill attention ---------------------------------------------------------------


def printed_eq6(i, c, d, N, tile, mu, s):
    """Eq. 6 as printed (all N layers), the tile ``(t_row, t_col, t_red)``."""
    t_row, t_col, t_red = tile
    i, c, d, N, t_row, t_col, t_red, mu, s = sp.sympify((i, c, d, N, t_row, t_col, t_red, mu, s))
    e = i + c - 1
    return N / (s * mu) * (ceiling(e / t_row) * ceiling(c / t_col) * d / t_red
                           + d / t_row * ceiling(c / t_col) * ceiling(e / t_red))


def eq2(d_row, d_col, d_red, t_row, t_col, t_red, mu, s):
    """Eq. 2 as printed."""
    d_row, d_col, d_red, t_row, t_col, t_red, mu, s = sp.sympify((d_row, d_col, d_red, t_row, t_col,
                                                                   t_red, mu, s))
    return ceiling(d_row / t_row) * ceiling(d_col / t_col) * ceiling(d_red / t_red) / (s * mu)


def eq6_statement(printed: Callable | None = None):
    """sympy, i, c, D, tiles, N, mu, s symbolic and d = D t_row t_red: Eq. 6 (``printed``, as
    printed unless a test feeds another) minus N x (Eq. 2 of K^T Q + Eq. 2 of V P)."""
    printed = printed or printed_eq6
    Dm, tr, tc, tk = sp.symbols("D t_row t_col t_red", integer=True, positive=True)
    d = Dm * tr * tk
    e = i_ + c_ - 1
    derived = N_ * (eq2(e, c_, d, tr, tc, tk, mu_, s_) + eq2(d, c_, e, tr, tc, tk, mu_, s_))
    return printed(i_, c_, d, N_, (tr, tc, tk), mu_, s_) - derived


def eq6_core(printed: Callable | None = None) -> tuple[bool, dict | None]:
    """Eq. 6 minus N x (Eq. 2 + Eq. 2), simplified symbolically: (holds, the difference if not)."""
    gap = sp.simplify(eq6_statement(printed))
    return gap == 0, (None if gap == 0 else {"printed Eq. 6 - N (Eq. 2 + Eq. 2)": str(gap)})


@register("eq6.two_gemms", level="proof",
          location="Section 3.2.2, Eq. 6",
          items=("Eq. 6",),
          claim="The prefill self-attention of PI(R, i, c) over N layers is two GeMMs, (i+c-1) x d times "
                "d x c and d x (i+c-1) times (i+c-1) x c, each timed by Eq. 2: that is Eq. 6.",
          domain="every chunk (i, c), tile, attention width d divisible by t_row and t_red, N, mu and s",
          evaluates=(Symbolic("sympy", eq6_statement, "printed Eq. 6 - N (Eq. 2 + Eq. 2), all symbolic"),),
          method="sympy: printed Eq. 6 - N (Eq. 2 + Eq. 2) with i, c, tiles, N, mu, s symbolic and d "
                 "divisible by t_row and t_red (theory.cost.T_P_SA against it is eq6.cost_at_t_star).")
def eq6_two_gemms(fast: bool) -> Result:
    ok, bad = eq6_core()
    if not ok:
        return Result(Verdict.FAIL, "Eq. 6 does not match its two GeMMs", counterexample=bad)
    return Result(Verdict.PASS, "Eq. 6 = N (Eq. 2 + Eq. 2) symbolically",
                  coverage="symbolic identity: every i, c, tile, d, N, mu, s",
                  margin=NOT_APPLICABLE)


def eq6_cost_core(printed: Callable | None = None, fast: bool = True) -> tuple[bool, dict | None, int]:
    """theory.cost.T_P_SA at t* against Eq. 6 (``printed``) in exact rationals on a grid of chunks,
    every GPU preset: (holds, first differing case, cases)."""
    printed = printed or printed_eq6
    grid = [1, 2, 127, 128, 129, 256, 1000] if fast else [1, 2, 31, 64, 127, 128, 129, 255, 256, 1000, 4095]
    n = 0
    for g in gpus():
        cm = cost_model(CostSpec(g, tiles="t*"))
        t = cm.t_star
        for i in grid:
            for c in grid:
                want = printed(sp.Integer(i), sp.Integer(c), cm.d_pre, cm.N, (t.t_row, t.t_col, t.t_red),
                               sp.Rational(frac(cm.mu[0])), cm.s)
                got = float(cost.T_P_SA(cm, i, c))
                n += 1
                if not math.isclose(got, float(want), rel_tol=1e-12):
                    return False, {"gpu": g, "i": i, "c": c, "theory.cost": got, "Eq. 6": float(want)}, n
    return True, None, n


@register("eq6.cost_at_t_star", level="sample",
          location="Section 3.2.2, Eq. 6, as theory.cost implements it",
          items=("Eq. 6",),
          claim="theory.cost.T_P_SA, the simulator's prefill attention, is Eq. 6 at the GPU's t*.",
          domain="every chunk (i, c) on every GPU",
          evaluates=(Points("chunks (i, c) on a grid of 7 (fast) or 11 values each, at t* of every GPU "
                            "preset, exact rationals"),),
          method="theory.cost.T_P_SA on each GPU preset restricted to t* against printed Eq. 6 in exact "
                 "rationals, i and c on a grid around tile multiples (1, 2, 127-129, 256, 1000, ...).")
def eq6_cost_at_t_star(fast: bool) -> Result:
    ok, bad, n = eq6_cost_core(fast=fast)
    if not ok:
        return Result(Verdict.FAIL, "theory.cost.T_P_SA differs from Eq. 6", counterexample=bad)
    return Result(Verdict.PASS, "theory.cost.T_P_SA equals Eq. 6 at t* to 1e-12",
                  coverage=f"{n} (GPU, i, c) cases at t* on {len(gpus())} GPU presets, rel. tol. 1e-12",
                  margin=EXACT)


# --- Eq. 7: batch time ------------------------------------------------------------------------


def printed_eq7(cm: cost.CostModel, prefill, decode) -> Fraction:
    """Eq. 7 as printed, in exact rationals, at the common tile t* (tile index 0), with Eq. 5's
    value taken from theory.cost.T_D_SA (checked separately against Eq. 3)."""
    t = cm.t_star
    tau_m = sum(c for _, c in prefill) + len(decode)
    out = Fraction(-(-tau_m // t.t_col)) / frac(cm.mu_Lin[0]) + Fraction(tau_m) / frac(cm.mu_nLin)
    out += cm.N * sum((frac(x) for x in cost.T_D_SA(cm, np.array(decode))), Fraction(0)) if decode else 0
    for i, c in prefill:
        e = i + c - 1
        out += Fraction(cm.N) / (cm.s * frac(cm.mu[0])) * (
            Fraction(-(-e // t.t_row) * -(-c // t.t_col) * cm.d_pre, t.t_red)
            + Fraction(cm.d_pre * -(-c // t.t_col) * -(-e // t.t_red), t.t_row))
    return out


def random_batches(rng: np.random.Generator, k: int) -> list[tuple[list, list]]:
    """``k`` random batches: up to 3 prefill chunks and up to 300 decodes."""
    out = []
    for _ in range(k):
        pre = [(int(rng.integers(1, 5000)), int(rng.integers(1, 700))) for _ in range(rng.integers(0, 4))]
        dec = [int(x) for x in rng.integers(1, 8000, size=rng.integers(0 if pre else 1, 300))]
        out.append((pre, dec))
    return out


def eq7_core(t_batch: Callable | None = None, k: int = 40, seed: int = 7) -> tuple[bool, dict | None, int]:
    """theory.cost.T_batch (or ``t_batch``) with every GeMM on t* vs printed Eq. 7, on ``k`` random
    batches per GPU."""
    t_batch = t_batch or cost.T_batch
    rng = np.random.default_rng(seed)
    n = 0
    for g in gpus():
        cm = cost_model(CostSpec(g, tiles="t*"))
        for pre, dec in random_batches(rng, k):
            want = printed_eq7(cm, pre, dec)
            got = t_batch(cm, cost.Batch.of(prefill=pre, decode=dec))
            n += 1
            if not math.isclose(got, float(want), rel_tol=1e-12):
                return False, {"gpu": g, "prefill": pre, "decode": dec[:10], "n_decodes": len(dec),
                               "theory.cost": got, "Eq. 7": float(want)}, n
    return True, None, n


@register("eq7.batch_sum", level="sample",
          domain="every batch (prefill chunks and decodes) on every GPU",
          evaluates=(Points("seeded random batches (<= 3 chunks, <= 300 decodes), 15 (fast) or 60 per "
                            "GPU preset at t*"),),
          location="Section 3.2.3, Eq. 7",
          items=("Eq. 7",),
          claim="A batch's time is the sum of its linear time (Eq. 4), tau / mu_nLin, N T^{D,SA} per "
                "decode (Eq. 5) and Eq. 6 per prefill chunk, all GeMMs on one tile.",
          method="Evaluate printed Eq. 7 (transcribed here, exact rationals, tile t*) on seeded random "
                 "batches and compare with theory.cost.T_batch on each GPU restricted to t*.")
def eq7_batch_sum(fast: bool) -> Result:
    ok, bad, n = eq7_core(k=15 if fast else 60)
    if not ok:
        return Result(Verdict.FAIL, "theory.cost.T_batch differs from Eq. 7", counterexample=bad)
    return Result(Verdict.PASS, "Eq. 7 is the sum of Eq. 4-6 and the non-linear term; theory.cost agrees",
                  coverage=f"{n} seeded random batches (<= 3 chunks, <= 300 decodes) on {len(gpus())} "
                           f"GPU presets at t*, rel. tol. 1e-12",
                  margin=EXACT)


# --- Definitions 1-2 ------------------------------------------------------------------------


def printed_mask_zero(k1, k2, i) -> list:
    """The entries where the masking matrix M of PI(R, i, c) is 0, as printed: the conjuncts
    ``k1 > i`` and ``k2 <= k1 - i`` (z3 or numpy operands)."""
    return [k1 > i, k2 <= k1 - i]


def mask_statement():
    """z3, integers i, c >= 1, 1 <= k1 <= i + c - 1, 1 <= k2 <= c: M(k1, k2) = 0 as printed exactly
    when key k1 is not among the keys 1..i + k2 - 1 that query k2 (token i + k2 - 1) may see."""
    import z3

    i, c, k1, k2 = z3.Ints("i c k1 k2")
    premises = [i >= 1, c >= 1, k1 >= 1, k1 <= i + c - 1, k2 >= 1, k2 <= c]
    return z3.And(*printed_mask_zero(k1, k2, i)) == (k1 > i + k2 - 1), premises


@register("def1.mask", level="proof",
          location="Section 3.2.2, the masking matrix M of PI(R, i, c)",
          items=("Definition 1", "Eq. 6"),
          claim="M ((i+c-1) x c) is 1 except where k1 > i and k2 <= k1 - i; so query k2 (token i+k2-1) "
                "sees exactly the keys of tokens 1..i+k2-1 (causal attention).",
          domain="every chunk (i, c) and every entry (k1, k2) of its mask",
          evaluates=(Symbolic("z3", mask_statement, "M(k1, k2) = 0 as printed iff k1 > i + k2 - 1, for "
                                                    "all integers i, c, k1, k2 in range"),),
          method="z3 over the integers: the printed zero pattern of M equals the complement of the causal "
                 "mask for every i, c >= 1 and every entry.")
def def1_mask(fast: bool) -> Result:
    from paper_checks.proofs import prove

    holds, cex = prove(*mask_statement())
    if not holds:
        return Result(Verdict.FAIL, "the printed mask is not causal", counterexample=cex)
    return Result(Verdict.PASS, "proved: the printed mask is exactly the causal mask",
                  coverage="every i, c >= 1 and every entry (z3 over the integers)",
                  margin=NOT_APPLICABLE)


@register("defs.index_conventions", level="sample",
          domain="every request (L^P, L^D >= 1)",
          evaluates=(Points("every request with L^P, L^D <= 5 (fast) or 8, run by the literal RAD with "
                            "chunk 2"),),
          location="Definitions 1-2, Eq. 5-6, Theorem 1 (T_bar^R)",
          items=("Definition 1", "Definition 2"),
          claim="PI(R, i, c) covers tokens i..i+c-1 and needs the KV of 1..i-1, so Eq. 6's K has "
                "i+c-1 rows; a request's decode iterations DI(R, i) run at i = L^P+1..L^P+L^D, so its "
                "decode attention is sum_{i=1}^{L^D} T^{D,SA}(L^P+i) as in T_bar^R.",
          method="Run the literal (corrected) RAD interpreter on every request with L^P, L^D <= 6, read "
                 "off the iterations, and compare with the index sets the formulas use; then sum "
                 "T^{D,SA} over the executed decode indices and compare with theory.cost.decode_prefix.")
def defs_index_conventions(fast: bool) -> Result:
    top = 5 if fast else 8
    cm = cost_model(CostSpec("a100"))
    S = cost.decode_prefix(cm, 2 * top)
    n = 0
    for L_P in range(1, top + 1):
        for L_D in range(1, top + 1):
            run = rad([Req(0, L_P, L_D)], n=1, t_col=1, t_lcm=2)
            pis = [it for _, _, its in run.batches for it in its if it[0] == "PI"]
            dis = [it[2] for _, _, its in run.batches for it in its if it[0] == "DI"]
            tokens = [t for _, _, i, c in pis for t in range(i, i + c)]
            rows_ok = not violations(run)  # PI(R, i, c) only after tokens 1..i-1 are cached
            dsa = float(cost.T_D_SA(cm, np.array(dis)).sum())
            n += 1
            if (tokens != list(range(1, L_P + 1)) or dis != list(range(L_P + 1, L_P + L_D + 1))
                    or not rows_ok or not math.isclose(dsa, S[L_P + L_D] - S[L_P], rel_tol=1e-12)):
                return Result(Verdict.FAIL, "the executed indices differ from the formulas' index sets",
                              counterexample={"L_P": L_P, "L_D": L_D, "PI": pis, "DI": dis})
    return Result(Verdict.PASS, "executed PI/DI indices match Eq. 6's K rows and T_bar^R's decode sum",
                  coverage=f"{n} requests, L^P, L^D in 1..{top}, chunk 2",
                  margin=NOT_APPLICABLE)


def printed_def2_admits(i: int, L_P: int, stop: int) -> bool:
    """Definition 2's condition as printed: DI(R, i) when i > L^P and i does not follow the stop
    token (i > stop is excluded, i = stop is not)."""
    return i > L_P and not i > stop


@register("def2.stop_index", level="reading",
          domain="every request (L^P, L^D >= 1) and token index i",
          evaluates=(Reading("Definition 2: DI(R, i) when i is not a prompt token and does not follow "
                             "the stop token"),
                     Points("every L^P, L^D <= 50"),),
          location="Definition 2 and the paragraph after it; Section 2.2",
          items=("Definition 2",),
          claim="DI(R, i) may be scheduled when i is not a prompt token and does not follow the stop token; "
                "a request thus has exactly the L^D decode iterations that T_bar^R and Eq. 13 count.",
          method="Enumerate, for L^P, L^D <= 50, the indices i that the printed conditions admit (KV of "
                 "1..i-1 computable, i > L^P, i not after the stop token at L^P+L^D+1) and compare with "
                 "the L^D indices L^P+1..L^P+L^D; then the same with the corrected condition.")
def def2_stop_index(fast: bool) -> Result:
    bad = None
    for L_P in range(1, 51):
        for L_D in range(1, 51):
            stop = L_P + L_D + 1
            tokens = range(1, stop + 5)
            printed = [i for i in tokens if printed_def2_admits(i, L_P, stop)]
            corrected = [i for i in tokens if i > L_P and not i >= stop]
            if bad is None and printed != list(range(L_P + 1, L_P + L_D + 1)):
                bad = {"L_P": L_P, "L_D": L_D, "stop token index": stop, "admitted indices": printed,
                       "decode iterations counted by T_bar^R": list(range(L_P + 1, L_P + L_D + 1))}
            if corrected != list(range(L_P + 1, L_P + L_D + 1)):
                return Result(Verdict.FAIL, "even the corrected condition admits other indices",
                              counterexample={"L_P": L_P, "L_D": L_D})
    return outcome(bad is None, corrected_holds=True,
                   summary="the printed condition admits exactly the L^D decode iterations" if bad is None
                   else "the printed condition also admits DI at the stop token's own index (L^D + 1 "
                        "iterations, generating a token after stop)",
                   coverage="every L^P, L^D in 1..50", counterexample=bad,
                   correction="index i must be neither a prompt token nor the stop token nor after it "
                              "(i <= L^P + L^D)",
                   correction_check="the corrected condition admits exactly i = L^P+1..L^P+L^D for every "
                                    "L^P, L^D in 1..50")
