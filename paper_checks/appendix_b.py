"""Checks of Appendix B, the proof of Theorem 1: Eq. 9-12 and the chunk set I_j.

The central computation is the minimum of the prefill-attention cost over *all* chunkings of a
prompt (:mod:`paper_checks.chunking`), which Appendix B claims is attained by chunks of t*_lcm
("the optimal set of chunk positions ... I_j"), giving Eq. 12's ``L^P (L^P + t*_lcm)``.

References
----------
Bari, Hegde, de Veciana (2025), Appendix B.1 (Eq. 9-12, Theorem 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import numpy as np
import sympy as sp
import z3

from paper_checks.chunking import (
    chunk_cost_units,
    closed_form_units,
    dp_at_tile,
    dp_range,
    gpu_dp,
    relaxed_dp,
)
from paper_checks.common import frac, gpus, models, t_star_first
from paper_checks.evidence import Points, Reading, Symbolic
from paper_checks.margins import EXACT, NOT_APPLICABLE, ratio_margin
from paper_checks.registry import Result, Verdict, outcome, register
from theory.builder import CostSpec, cost_model
from theory.hardware import Tile, get_gpu
from theory.symbolic import SymbolicCostModel

TIE = 1e-12  # relative tolerance for ties between float tile rates of the roofline


# --- Eq. 9 -------------------------------------------------------------------------------------


def eq9_core(reduce=max, trials: int = 2000, seed: int = 9) -> tuple[bool, dict | None]:
    """Eq. 9: the drain time max_r' sum_m T_B >= (1/r) sum_r' sum_m T_B, on seeded random
    per-node busy times (exact rationals); ``reduce`` is the printed max (a mutation may swap it)."""
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        r = int(rng.integers(1, 9))
        busy = [Fraction(int(x), int(y)) for x, y in zip(rng.integers(0, 10**6, r), rng.integers(1, 997, r),
                                                        strict=True)]
        if not reduce(busy) >= sum(busy, Fraction(0)) / r:
            return False, {"per-node busy times": [str(b) for b in busy]}
    return True, None


DRAIN = "max"  # Eq. 9's drain time: the largest per-node busy time ("min" plants an error)


def eq9_proof(r_max: int, drain: str) -> tuple[bool, dict]:
    """z3: for every r <= ``r_max`` and every vector of real per-node busy times, the ``drain``
    ("max" as printed) of the r times is at least their mean; otherwise z3's counterexample."""
    from paper_checks.proofs import prove

    for r in range(1, r_max + 1):
        x = z3.Reals(" ".join(f"x{k}" for k in range(r)))
        top = x[0]
        for v in x[1:]:
            top = z3.If(v > top, v, top) if drain == "max" else z3.If(v < top, v, top)
        ok, cex = prove(r * top >= z3.Sum(x), [v >= 0 for v in x])
        if not ok:
            return False, {"r": r, **cex}
    return True, {}


@register("eq9.max_ge_mean", level="reading",
          domain="every r >= 1 and every vector of r per-node busy times",
          evaluates=(Reading("Eq. 9: the drain time, max over nodes of the busy time, against the mean "
                             "busy time"),
                     Points("z3 for each r <= 16; seeded random vectors, r <= 8"),),
          location="Appendix B.1, Eq. 9",
          items=("Eq. 9",),
          claim="The drain time of r nodes (the largest per-node busy time) is at least the mean busy "
                "time over the nodes.",
          method="z3: r max(x) >= sum(x) for every real busy-time vector x, r = 1..16; and exact rationals "
                 "on seeded random vectors, r = 1..8.")
def eq9_max_ge_mean(fast: bool) -> Result:
    proved, cex = eq9_proof(16, DRAIN)
    ok, bad = eq9_core(reduce=max if DRAIN == "max" else min, trials=500 if fast else 5000)
    holds = proved and ok
    return outcome(holds, summary="proved: the drain time (the largest busy time) is at least the mean for "
                   "every r <= 16" if holds else "the drain time can be below the mean busy time",
                   coverage=f"every real vector of r <= 16 busy times (z3); {500 if fast else 5000} seeded "
                            "random vectors, r = 1..8, exact rationals",
                   counterexample=cex or bad,
                   margin=NOT_APPLICABLE)


# --- Eq. 10 ------------------------------------------------------------------------------------


@register("eq10a.ceiling_removal", level="sample",
          domain="every tau, every chunk (i, c) and every tile",
          evaluates=(Points("tau <= 4096 and 1 <= c <= e <= 2048 (512 fast), every tile of every GPU "
                            "preset"),),
          location="Appendix B.1, Eq. 10 step (a)",
          items=("Eq. 10",),
          claim="Removing the ceilings of Eq. 7 lowers it: ceil(tau/t_col) >= tau/t_col and Eq. 6 with "
                "ceilings >= Eq. 6 without.",
          method="Exact integers, every tile of every GPU preset: t_col ceil(tau/t_col) >= tau for tau "
                 "<= 4096 and t_col ceil(c/t_col)(t_row ceil(e/t_row) + t_red ceil(e/t_red)) >= 2 e c "
                 "(Eq. 6 in S-units of the tile) for all 1 <= c <= e <= 2048 (512 fast).")
def eq10a_ceiling_removal(fast: bool) -> Result:
    top = 512 if fast else 2048
    tau = np.arange(1, 4097)
    e = np.arange(1, top + 1)[:, None]
    c = np.arange(1, top + 1)[None, :]
    valid = c <= e
    n, least = 0, math.inf  # least: the smallest ratio ceiling term / ceiling-free term
    for g in gpus():
        for t in get_gpu(g).tiles:
            lin = t.t_col * (-(-tau // t.t_col)) / tau
            att = chunk_cost_units(e, c, t)[valid] / (2 * e * c)[valid]
            least = min(least, float(lin.min()), float(att.min()))
            n += 1
            if not (np.all(lin >= 1) and np.all(att >= 1)):
                return Result(Verdict.FAIL, "a ceiling term is below its ceiling-free value",
                              counterexample={"gpu": g, "tile": str(t)})
    return Result(Verdict.PASS, "every ceiling term dominates its ceiling-free value",
                  coverage=f"{n} (GPU, tile) pairs; tau <= 4096; 1 <= c <= e <= {top}",
                  evidence={"least ceiling / ceiling-free ratio": least},
                  margin=ratio_margin(least, 1.0))


def eq10b_core(cms) -> tuple[bool, dict | None, int]:
    """Eq. 10 (b): at every tile t the ceiling-free per-token linear cost 1/(t_col mu_Lin(t)) and
    the attention coefficient 1/(mu(t) t_row t_col t_red) are no smaller than at the cost model's
    t* (index 0), in exact rationals up to ties of relative size 1e-12. Returns ``(holds,
    counterexample, cases, least)``, ``least`` the smallest ratio of another tile's coefficient to
    t*'s (1 where a tile ties with t*)."""
    n, least = 0, math.inf
    for cm in cms:
        lin = [1 / (int(cm.t_col[k]) * frac(cm.mu_Lin[k])) for k in range(len(cm.tiles))]
        att = [1 / (frac(cm.mu[k]) * int(cm.t_row[k] * cm.t_col[k] * cm.t_red[k]))
               for k in range(len(cm.tiles))]
        for k in range(len(cm.tiles)):
            n += 1
            if k:
                least = min(least, float(lin[k] / lin[0]), float(att[k] / att[0]))
            if lin[k] < lin[0] * (1 - Fraction(TIE)) or att[k] < att[0] * (1 - Fraction(TIE)):
                return False, {"gpu": cm.gpu.key, "model": cm.model.key, "mode": cm.mode,
                               "t*": str(cm.t_star), "cheaper tile": str(cm.tiles[k]),
                               "linear cost ratio t/t*": float(lin[k] / lin[0]),
                               "attention cost ratio t/t*": float(att[k] / att[0])}, n, least
    return True, None, n, least


@register("eq10b.tile_replacement", level="sample",
          domain="every tile of every GPU meeting Assumption 1, every model",
          evaluates=(Points("every tile of every GPU preset x model preset x mode"),),
          location="Appendix B.1, Eq. 10 step (b)",
          items=("Eq. 10", "Assumption 1"),
          claim="In the ceiling-free bound, replacing the batch's tile by t* can only lower it "
                "(this follows from Assumption 1).",
          method="Exact rationals of every tile's ceiling-free linear and attention coefficients vs t*'s, "
                 "every tile of every GPU x model x mode (float roofline ties within 1e-12 count as ties).")
def eq10b_tile_replacement(fast: bool) -> Result:
    cms = [cost_model(CostSpec(g, m, mode)) for g in gpus() for m in models() for mode in ("paper", "real")]
    ok, bad, n, least = eq10b_core(cms)
    if not ok:
        return Result(Verdict.FAIL, "a tile beats t* in the ceiling-free bound", counterexample=bad)
    return Result(Verdict.PASS, "t* minimises both ceiling-free coefficients on every preset",
                  coverage=f"{n} (GPU, model, mode, tile) cases",
                  evidence={"least coefficient ratio tile / t*": least}, margin=ratio_margin(least, 1.0))


# --- the chunk set I_j -------------------------------------------------------------------------


def printed_Ij(L: int, t: int) -> list[tuple[int, int]]:
    """I_j as printed: (1, t), (t+1, t), ... continuing the pattern, and the last element (L-t, t)."""
    return [(1 + k * t, t) for k in range(L // t - 1)] + [(L - t, t)]


PRINTED_IJ = printed_Ij  # the set the check reads as printed (a test feeds it the corrected one)


def corrected_Ij(L: int, t: int) -> list[tuple[int, int]]:
    """I_j with its last element (L-t+1, t): chunks (1 + k t, t), k = 0..L/t - 1."""
    return [(1 + k * t, t) for k in range(L // t)]


def coverage(chunks: list[tuple[int, int]], L: int) -> np.ndarray:
    """How many times each token 1..L is covered by the chunks."""
    cnt = np.zeros(L + 2, dtype=int)
    for i, c in chunks:
        cnt[max(i, 0):i + c] += 1
    return cnt[1:L + 1]


@register("appB.Ij_indices", level="reading",
          domain="every prompt length L^P = m t*_lcm, m >= 1",
          evaluates=(Reading("Appendix B.1: I_j = {(1, t*_lcm), (t*_lcm + 1, t*_lcm), ..., (L^P - "
                             "t*_lcm, t*_lcm)}"),
                     Points("t*_lcm of every GPU preset, m = 2..32; Eq. 11 summed with m symbolic"),),
          location="Appendix B.1 after Eq. 10 (I_j), and Appendix C.2 (same set)",
          items=("Eq. 11", "Eq. 23"),
          claim="I_j = {(1, t*_lcm), (t*_lcm + 1, t*_lcm), ..., (L^P - t*_lcm, t*_lcm)} is a chunking of "
                "the prompt 1..L^P (each token prefilled once), and Eq. 11 summed over it gives Eq. 12.",
          method="Literal coverage counts of the printed set for t*_lcm of every GPU preset and L^P = m "
                 "t*_lcm, m = 2..32; sympy sum of Eq. 11's attention term over the printed and corrected "
                 "sets (m symbolic) against Eq. 12.")
def appB_Ij_indices(fast: bool) -> Result:
    bad = None
    lcms = sorted({get_gpu(g).optimal_tile().t_lcm for g in gpus()})
    for t in lcms:
        for m in range(2, 33):
            L = m * t
            cov_p, cov_c = coverage(PRINTED_IJ(L, t), L), coverage(corrected_Ij(L, t), L)
            if bad is None and not np.all(cov_p == 1):
                bad = {"t*_lcm": t, "L_P": L, "printed I_j": PRINTED_IJ(L, t),
                       "tokens covered twice": (np.flatnonzero(cov_p == 2) + 1).tolist(),
                       "tokens never covered": (np.flatnonzero(cov_p == 0) + 1).tolist()}
            if not np.all(cov_c == 1):
                return Result(Verdict.FAIL, "even the corrected chunk set does not cover the prompt",
                              counterexample={"t": t, "L": L})
    m, k, t = sp.symbols("m k t", integer=True, positive=True)
    L = m * t

    def attention(i):  # Eq. 11's bracket over t_row t_col t_red / d, for chunk (i, t): 2 (i + t - 1) t
        return 2 * (i + t - 1) * t

    closed = L * (L + t)
    s_corrected = sp.summation(attention(1 + k * t), (k, 0, m - 1))
    s_printed = sp.summation(attention(1 + k * t), (k, 0, m - 2)) + attention(L - t)
    corrected_ok = sp.simplify(s_corrected - closed) == 0
    printed_gap = sp.factor(sp.simplify(s_printed - closed))
    return outcome(bad is None, corrected_holds=corrected_ok,
                   summary="the printed I_j covers every prompt token once" if bad is None else
                   "the printed last chunk (L^P - t*_lcm, t*_lcm) re-covers token L^P - t*_lcm and never "
                   f"covers L^P; Eq. 11 over the printed set = Eq. 12 + ({printed_gap}) in units of Eq. 12's "
                   "prefactor",
                   coverage=f"t*_lcm in {lcms}, L^P = m t*_lcm for m = 2..32; m symbolic in the sums",
                   counterexample=bad,
                  correction="last element (L^P - t*_lcm + 1, t*_lcm), i.e. I_j = {(1 + k t*_lcm, t*_lcm) : "
                             "k = 0..L^P/t*_lcm - 1}",
                  correction_check=f"covers 1..L^P exactly once for t*_lcm in {lcms}, m = 2..32; sympy: Eq. "
                                   "11 summed over it equals Eq. 12's L^P (L^P + t*_lcm) for symbolic m")


@register("appB.Ij_optimal_relaxed", level="sample",
          domain="every prompt length L^P multiple of t*_lcm and every chunking of it",
          evaluates=(Points("every L <= 1024 (fast) or 8192, every chunking (exact DP), t*_lcm of every "
                            "GPU preset"),),
          location="Appendix B.1, after Eq. 10: 'the optimal set of chunk "
                                            "positions and chunk size ... in minimal time is I_j'",
          items=("Eq. 10", "Eq. 11", "Eq. 12"),
          claim="Among all chunkings of a prompt, chunks of t*_lcm (I_j) minimise the prefill attention of "
                "the ceiling-free bound of Eq. 10 (the bound the proof sums), giving L^P (L^P + t*_lcm).",
          method="Exact dynamic programme over chunk boundaries of the ceiling-free cost 2 e c (S-units) "
                 "for every L <= L_max; compare the minimum with L (L + t*_lcm) at every multiple of "
                 "t*_lcm of every GPU preset.")
def appB_Ij_optimal_relaxed(fast: bool) -> Result:
    return relaxed_core(dp_range(fast), sorted({get_gpu(g).optimal_tile().t_lcm for g in gpus()}))


def relaxed_core(L_max: int, lcms: list[int]) -> Result:
    """The relaxation's exact DP minimum against L (L + t_lcm) at every multiple of each t_lcm."""
    dp = relaxed_dp(L_max)
    L = np.arange(L_max + 1)
    closed_relaxed = L * (L + 1)
    exact_form = bool(np.array_equal(dp.f, closed_relaxed))
    below = {}
    for t in lcms:
        mult = np.arange(t, L_max + 1, t)
        below[t] = (mult, mult[dp.f[mult] < mult * (mult + t)])
    if all(b.size == 0 for _, b in below.values()):
        return Result(Verdict.PASS, "chunks of t*_lcm are optimal in the relaxation",
                      coverage=f"L <= {L_max}, t*_lcm in {lcms}")
    t = next(t for t in lcms if below[t][1].size)
    mult, below = below[t]
    L0 = int(below[0])
    cex = {"t*_lcm": t, "L_P": L0, "optimal chunking": f"{len(dp.chunks(L0))} chunks of size 1",
           "its cost (S-units)": int(dp.f[L0]), "I_j's cost L(L + t*_lcm)": int(L0 * (L0 + t)),
           "smallest L overall": int(np.flatnonzero(dp.f[1:] < L[1:] * (L[1:] + t))[0] + 1),
           "cost at L = 1": int(dp.f[1]), "I_j-type cost L(L + t*_lcm) at L = 1": 1 + t}
    return Result(Verdict.FAIL,
                  "the relaxation's optimum is chunk size 1 with cost exactly L(L+1) < L(L+t*_lcm) for "
                  f"every L >= 1 (exact DP, L <= {L_max})", counterexample=cex,
                  coverage=f"L <= {L_max}, every chunking (exact DP), t*_lcm in {lcms}",
                  evidence={"DP minimum equals L(L+1) for all L <= L_max": exact_form,
                            "every multiple of t*_lcm is a counterexample": bool(below.size == mult.size)})


def ceiling_gap(gpu_key: str, L_max: int) -> dict:
    """DP minimum with ceilings (at t*, and over all tiles) vs Eq. 12's closed form, for one GPU."""
    g = get_gpu(gpu_key)
    t = g.optimal_tile()
    at_t, over = gpu_dp(gpu_key, L_max)
    mult = np.arange(t.t_lcm, L_max + 1, t.t_lcm)
    closed = closed_form_units(mult, t)
    below_t = mult[at_t.f[mult] < closed]
    L_all = np.arange(1, L_max + 1)
    below_any = L_all[at_t.f[1:] < closed_form_units(L_all, t)]
    tiles = t_star_first(g)
    sample = t.t_lcm * np.array([1, 2, 4, 8])
    L0 = int(below_t[0]) if below_t.size else None
    out = {"t*": str(t), "t*_lcm": t.t_lcm,
           "multiples of t*_lcm where min < closed form": f"{below_t.size} of {mult.size}",
           "ratio min/closed at t* (L = t*_lcm, 2 t*_lcm, 4 t*_lcm, 8 t*_lcm)":
               [round(float(at_t.f[x] / closed_form_units(x, t)), 5) for x in sample if x <= L_max],
           "ratio min over tiles/closed (same L)":
               [round(float(over.f[x] / closed_form_units(x, t)), 5) for x in sample if x <= L_max],
           "smallest L (any) with min < closed form": int(below_any[0]) if below_any.size else None}
    if L0 is not None:
        out |= {"L_P": L0, "optimal chunking at t*": at_t.chunks(L0), "its cost (S-units)": int(at_t.f[L0]),
                "closed form L(L + t*_lcm)": int(closed_form_units(L0, t)),
                "I_j (chunks of t*_lcm) cost at t* (S-units)":
                    int(sum(chunk_cost_units(i + c - 1, c, t) for i, c in
                            [(1 + k * t.t_lcm, t.t_lcm) for k in range(L0 // t.t_lcm)])),
                "optimal chunking over all tiles": over.chunks(L0),
                "its tiles (K^T Q, V P)": [(str(tiles[a]), str(tiles[b])) for a, b in over.tiles_used(L0)],
                "cost over tiles (S-units)": round(float(over.f[L0]), 3)}
    return out


def t_star_shapes() -> list[Tile]:
    """Every distinct t* of the GPU presets, each in both orientations (t_row x t_col and t_col x
    t_row: Assumption 1 allows either, e.g. 128x256 or 256x128 on the A100)."""
    shapes = {get_gpu(g).optimal_tile() for g in gpus()}
    both = {Tile(a, b, t.t_red) for t in shapes for a, b in ((t.t_row, t.t_col), (t.t_col, t.t_row))}
    return sorted(both, key=lambda t: (t.t_row, t.t_col, t.t_red))


def ceil_core(shapes: list[Tile], L_max: int) -> Result:
    """Appendix B's optimality of I_j with Eq. 6's ceilings, per tile shape: the exact integer DP
    over all chunkings at the tile (S-units, so independent of the GPU's rates and of the model)
    against the closed form L (L + t_lcm) at every multiple of t_lcm up to ``L_max``."""
    rows, cex = {}, {}
    for t in shapes:
        at_t = dp_at_tile(t, L_max)
        mult = np.arange(t.t_lcm, L_max + 1, t.t_lcm)
        below = mult[at_t.f[mult] < closed_form_units(mult, t)]
        rows[str(t)] = {"orientation": "t_row <= t_col" if t.t_row <= t.t_col else "t_row > t_col",
                        "multiples of t_lcm where a chunking beats L(L + t_lcm)":
                            f"{below.size} of {mult.size}"}
        if below.size and not cex:
            L0 = int(below[0])
            cex = {"tile": str(t), "t_lcm": t.t_lcm, "L_P": L0, "optimal chunking": at_t.chunks(L0),
                   "its cost (S-units)": int(at_t.f[L0]),
                   "closed form L(L + t_lcm)": int(closed_form_units(L0, t)),
                   "units": "S = N d / (s mu(t) t_row t_col t_red), Eq. 12's prefactor (any model, any mu)"}
    failing = [k for k, v in rows.items() if not v["multiples of t_lcm where a chunking beats L(L + "
                                                    "t_lcm)"].startswith("0 ")]
    holding = [k for k in rows if k not in failing]
    return outcome(not failing,
                   summary=(f"no chunking beats L(L + t_lcm) at tiles {holding}" if not failing else
                            f"a chunking beats Eq. 12 at {failing} (e.g. {cex['optimal chunking']} costs "
                            f"{cex['its cost (S-units)']} < {cex['closed form L(L + t_lcm)']}); it holds at "
                            f"{holding or 'no tile'}: chunks of t_col avoid padding in K^T Q's rows when "
                            "t_row > t_col"),
                   coverage=f"{len(shapes)} tile shapes (every distinct t* of the presets, both "
                            "orientations), "
                            f"every multiple of t_lcm <= {L_max}, exact integer DP over all chunkings",
                   counterexample=cex, evidence={"per tile shape": rows})


@register("appB.Ij_optimal_ceil", level="sample",
          domain="every prompt length L^P = m t*_lcm, every chunking, every t* tile",
          evaluates=(Points("every multiple of t*_lcm <= 1024 (fast) or 8192, every chunking (exact DP), "
                            "every distinct t* of the presets in both orientations"),),
          location="Appendix B.1, I_j and Eq. 12 (as used by Theorem 1 and RAD)",
          items=("Eq. 6", "Eq. 12", "Assumption 1"),
          claim="With Eq. 6's ceilings (the real model), chunks of t*_lcm at tile t* are the cheapest way "
                "to prefill a prompt of length L^P = m t*_lcm: no chunking costs less than Eq. 12's "
                "N d L^P (L^P + t*_lcm) / (s mu t*_row t*_col t*_red).",
          method="Exact integer DP over all chunk boundaries of Eq. 6 (S-units, which depend on the tile "
                 "shape alone) for every distinct t* of the GPU presets in both orientations, every multiple "
                 "of t*_lcm <= 8192 (1024 fast); the GPU presets' DP over their whole tile sets (is t* even "
                 "the right tile?) as evidence.")
def appB_Ij_optimal_ceil(fast: bool) -> Result:
    L_max = dp_range(fast)
    res = ceil_core(t_star_shapes(), L_max)
    per_gpu = {g: ceiling_gap(g, min(L_max, 1024)) for g in gpus()}
    over = {g: v["ratio min over tiles/closed (same L)"] for g, v in per_gpu.items()}
    return replace(res, evidence={**res.evidence, "presets per t*": {
        str(t): [g for g in gpus() if get_gpu(g).optimal_tile() == t] for t in t_star_shapes()},
        "ratio of the DP over each preset's tile set to the closed form at L = t*_lcm, 2, 4, 8 t*_lcm":
        over})


# --- Eq. 11 = Eq. 12 ------------------------------------------------------------------------


def eq12_prefill_term(L, t_lcm):
    """Eq. 12's prefill-attention factor L (L + t*_lcm)."""
    return L * (L + t_lcm)


def eq11_eq12_statement(closed: Callable | None = None):
    """sympy, the number of chunks m, t*_lcm, tiles and d symbolic: Eq. 11's attention bracket
    summed over the corrected I_j (chunks (1 + k t, t), k = 0..m-1) minus Eq. 12's
    d L^P (L^P + t*_lcm) / (t_row t_col t_red) (``closed``: Eq. 12's factor, as printed unless a test
    feeds another)."""
    closed = closed or eq12_prefill_term
    m, k, t, tr, tc, tk, d = sp.symbols("m k t t_row t_col t_red d", integer=True, positive=True)
    L = m * t
    e = 1 + k * t + t - 1  # last token of chunk k
    term = sp.summation(e / tr * t / tc * d / tk + d / tr * t / tc * e / tk, (k, 0, m - 1))
    return term - d / (tr * tc * tk) * closed(L, t)


def eq11_eq12_core(closed: Callable | None = None) -> tuple[bool, dict | None]:
    """Eq. 11 (the sum over the corrected I_j) == Eq. 12, symbolically: (holds, the difference)."""
    gap = sp.simplify(eq11_eq12_statement(closed))
    return gap == 0, (None if gap == 0 else {"Eq. 11's attention sum - Eq. 12's term (symbolic)": str(gap)})


@register("eq11_eq12.closed_form", level="proof",
          location="Appendix B.1, Eq. 11 = Eq. 12",
          items=("Eq. 11", "Eq. 12"),
          claim="Summing the ceiling-free attention of Eq. 11 over I_j (chunks of t*_lcm) gives Eq. 12's "
                "N d L^P (L^P + t*_lcm) / (s mu t*_row t*_col t*_red); the other terms are identical.",
          domain="every prompt length L^P = m t*_lcm (m >= 1), t*_lcm, tile and d",
          evaluates=(Symbolic("sympy", eq11_eq12_statement,
                              "Eq. 11's bracket summed over m chunks of t minus Eq. 12's, all symbolic"),),
          method="sympy summation with the number of chunks m, t*_lcm, the tiles and d symbolic "
                 "(theory.symbolic's two forms on the presets are eq12.symbolic_twin).")
def eq11_eq12_closed_form(fast: bool) -> Result:
    ok, bad = eq11_eq12_core()
    if not ok:
        return Result(Verdict.FAIL, "Eq. 11 != Eq. 12", counterexample=bad)
    return Result(Verdict.PASS, "Eq. 11 = Eq. 12 (over the corrected I_j, see appB.Ij_indices)",
                  coverage="symbolic in m, t*_lcm, tiles, d (the whole family)",
                  margin=NOT_APPLICABLE)


def symbolic_twin_core(fast: bool = True, closed_of: Callable | None = None) -> tuple[bool, dict | None, int]:
    """theory.symbolic's T*_R summed chunk by chunk (Eq. 11 at t*) against its closed form (Eq. 12),
    exactly, for several (L^P, L^D) on the GPU presets; ``closed_of(scm, l_P, l_D)`` is
    ``scm.T_star_R_closed`` unless a test feeds another. Returns (holds, first difference, cases)."""
    closed_of = closed_of or (lambda scm, l_P, l_D: scm.T_star_R_closed(l_P, l_D))
    n = 0
    lengths = [(256, 1), (512, 3)] if fast else [(256, 1), (512, 3), (1024, 7), (2048, 2)]
    for g in gpus()[: 2 if fast else None]:
        scm = SymbolicCostModel.from_cost_model(cost_model(CostSpec(g)))
        for l_P, l_D in lengths:
            n += 1
            if sp.simplify(scm.T_star_R(l_P, l_D) - closed_of(scm, l_P, l_D)) != 0:
                return False, {"gpu": g, "L_P": l_P, "L_D": l_D,
                               "Eq. 11 summed (s)": float(scm.T_star_R(l_P, l_D)),
                               "Eq. 12 closed form (s)": float(closed_of(scm, l_P, l_D))}, n
    return True, None, n


@register("eq12.symbolic_twin", level="sample",
          location="Appendix B.1, Eq. 11 = Eq. 12, as theory.symbolic computes them",
          items=("Eq. 11", "Eq. 12"),
          claim="theory.symbolic's T*_R summed over RAD's chunks (Eq. 11) equals its closed form (Eq. 12) on "
                "the GPU presets, in exact rationals.",
          domain="every request (L^P multiple of t*_lcm, L^D) on every GPU",
          evaluates=(Points("(L^P, L^D) in {(256, 1), (512, 3)} (+ (1024, 7), (2048, 2) in the full run) "
                            "on 2 (fast) or all GPU presets, exact rationals"),),
          method="theory.symbolic.SymbolicCostModel.T_star_R (Eq. 11 chunk by chunk) minus T_star_R_closed "
                 "(Eq. 12), simplified exactly, on the GPU presets.")
def eq12_symbolic_twin(fast: bool) -> Result:
    ok, bad, n = symbolic_twin_core(fast)
    if not ok:
        return Result(Verdict.FAIL, "theory.symbolic's Eq. 11 and Eq. 12 differ", counterexample=bad)
    return Result(Verdict.PASS, "theory.symbolic's Eq. 11 sum equals its Eq. 12 exactly",
                  coverage=f"{n} exact (GPU, L^P, L^D) cases" + (" (fast subset)" if fast else ""),
                  margin=EXACT)
