"""Checks of Appendix B, the proof of Theorem 1: Eq. 9-16, the chunk set I_j, Propositions 1-2, Lemma 1.

The central computation is the minimum of the prefill-attention cost over *all* chunkings of a
prompt (:mod:`paper_checks.chunking`), which Appendix B claims is attained by chunks of t*_lcm
("the optimal set of chunk positions ... I_j"), giving Eq. 12's ``L^P (L^P + t*_lcm)``.

References
----------
Bari, Hegde, de Veciana (2025), Appendix B (Eq. 9-16, Propositions 1-2, Lemma 1, Theorem 1).
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
    grouped_schedule,
    relaxed_dp,
)
from paper_checks.common import PAPER_MODEL, PAPER_WORKLOADS, frac, gpus, models, t_star_first, workload
from paper_checks.evidence import Points, Reading, Symbolic
from paper_checks.registry import Result, Verdict, not_checkable, outcome, register
from theory import cost
from theory.bounds import T_bar_R, T_max, T_max_corrected, T_max_described
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
                   counterexample=cex or bad)


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
    n = 0
    for g in gpus():
        for t in get_gpu(g).tiles:
            lin_ok = np.all(t.t_col * (-(-tau // t.t_col)) >= tau)
            att = chunk_cost_units(e, c, t)
            att_ok = np.all(att[valid] >= (2 * e * c)[valid])
            n += 1
            if not (lin_ok and att_ok):
                return Result(Verdict.FAIL, "a ceiling term is below its ceiling-free value",
                              counterexample={"gpu": g, "tile": str(t)})
    return Result(Verdict.PASS, "every ceiling term dominates its ceiling-free value",
                  coverage=f"{n} (GPU, tile) pairs; tau <= 4096; 1 <= c <= e <= {top}")


def eq10b_core(cms) -> tuple[bool, dict | None, int]:
    """Eq. 10 (b): at every tile t the ceiling-free per-token linear cost 1/(t_col mu_Lin(t)) and
    the attention coefficient 1/(mu(t) t_row t_col t_red) are no smaller than at the cost model's
    t* (index 0), in exact rationals up to ties of relative size 1e-12."""
    n = 0
    for cm in cms:
        lin = [1 / (int(cm.t_col[k]) * frac(cm.mu_Lin[k])) for k in range(len(cm.tiles))]
        att = [1 / (frac(cm.mu[k]) * int(cm.t_row[k] * cm.t_col[k] * cm.t_red[k]))
               for k in range(len(cm.tiles))]
        for k in range(len(cm.tiles)):
            n += 1
            if lin[k] < lin[0] * (1 - Fraction(TIE)) or att[k] < att[0] * (1 - Fraction(TIE)):
                return False, {"gpu": cm.gpu.key, "model": cm.model.key, "mode": cm.mode,
                               "t*": str(cm.t_star), "cheaper tile": str(cm.tiles[k]),
                               "linear cost ratio t/t*": float(lin[k] / lin[0]),
                               "attention cost ratio t/t*": float(att[k] / att[0])}, n
    return True, None, n


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
    ok, bad, n = eq10b_core(cms)
    if not ok:
        return Result(Verdict.FAIL, "a tile beats t* in the ceiling-free bound", counterexample=bad)
    return Result(Verdict.PASS, "t* minimises both ceiling-free coefficients on every preset",
                  coverage=f"{n} (GPU, model, mode, tile) cases")


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
                  coverage="symbolic in m, t*_lcm, tiles, d (the whole family)")


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
                  coverage=f"{n} exact (GPU, L^P, L^D) cases" + (" (fast subset)" if fast else ""))


# --- Proposition 1 ---------------------------------------------------------------------------


def prop1_counterexample(gpu_key: str, model: str = PAPER_MODEL, L_D: int = 1, chunking: str = "dp") -> dict:
    """An explicit schedule of t*_col requests (L^P = t*_lcm, L^D = ``L_D``) on one node whose
    Eq. 7 time (every GeMM on t*, exact rationals) is below sum_j T*_R(j) (Eq. 12): each prompt
    in the DP-optimal chunks at t* (``chunking="dp"``) or in one chunk of t*_lcm (``"rad"``)."""
    cm = cost_model(CostSpec(gpu_key, model, tiles="t*"))
    t = cm.t_star
    at_t, _ = gpu_dp(gpu_key, t.t_lcm)
    chunks = at_t.chunks(t.t_lcm) if chunking == "dp" else [(1, t.t_lcm)]
    scm = SymbolicCostModel.from_cost_model(cm)
    batches = grouped_schedule(t.t_lcm, L_D, chunks, t.t_col)
    distinct = {(tuple(p), tuple(d)) for p, d in batches}
    cost_of = {b: scm.T_batch(prefill=b[0], decode=b[1]) for b in distinct}
    total = sp.Add(*[cost_of[(tuple(p), tuple(d))] for p, d in batches])
    bound = t.t_col * scm.T_star_R_closed(t.t_lcm, L_D)
    return {"gpu": gpu_key, "model": model, "mode": "paper", "tile": f"t* = {t} only (Eq. 7's common tile)",
            "r": 1, "k requests": t.t_col, "L_P": t.t_lcm, "L_D": L_D, "chunks per prompt": chunks,
            "schedule": f"each prompt alone in chunks {chunks} (tau multiple of t*_col), then {L_D} "
                        f"batch(es) of {t.t_col} decodes",
            "schedule time (s)": float(total), "(1/r) sum_j T*_R(j) (s)": float(bound),
            "schedule below bound": bool(bound - total > 0),
            "relative gap": float((bound - total) / bound)}


def corrected_bound_holds(L_max: int) -> tuple[bool, dict]:
    """The corrected Proposition 1 (L^P (L^P + 1) for L^P (L^P + t*_lcm)) is a lower bound: the
    relaxation's exact optimum is L(L+1), and every GPU's ceiling DP over all tiles is >= it."""
    L = np.arange(L_max + 1)
    ok = bool(np.array_equal(relaxed_dp(L_max).f, L * (L + 1)))
    worst = {}
    for g in gpus():
        over = gpu_dp(g, L_max)[1].f
        ratio = over[1:] / (L[1:] * (L[1:] + 1))
        worst[g] = round(float(ratio.min()), 6)
        ok &= bool(np.all(ratio >= 1 - 1e-12))
    return ok, worst


@register("prop1.drain_lower_bound", level="sample",
          domain="every set of k requests and every planner and scheduler",
          evaluates=(Points("one explicit schedule per GPU preset (the first in the fast run); exact DP "
                            "up to L = 1024 or 8192"),),
          location="Appendix B.1, Proposition 1",
          items=("Proposition 1", "Eq. 10", "Eq. 11"),
          claim="Any planner and scheduler need at least (1/r) sum_j T*_R(j) (Eq. 12) to serve k requests.",
          method="Build an explicit schedule on one node (t*_col requests with L^P = t*_lcm, each prompt in "
                 "the DP-optimal chunks at t*, decodes in full batches), time it with Eq. 7 at t* in exact "
                 "rationals (theory.symbolic), compare with sum_j T*_R(j); check the corrected bound "
                 "against the relaxation and the ceiling DP of every GPU.")
def prop1_drain_lower_bound(fast: bool) -> Result:
    L_max = dp_range(fast)
    cexs = {g: prop1_counterexample(g) for g in (gpus()[:1] if fast else gpus())}
    broken = [g for g, c in cexs.items() if c["schedule below bound"]]
    ok, worst = corrected_bound_holds(L_max)
    cex = cexs[broken[0]] if broken else {}
    return outcome(not broken, corrected_holds=ok,
                   summary="no schedule built finishes below (1/r) sum_j T*_R(j)" if not broken else
                   f"an explicit schedule finishes below (1/r) sum_j T*_R(j) on {len(broken)}/{len(cexs)} "
                   "GPU "
                   "presets checked; Eq. 12's L(L + t*_lcm) must be L(L + 1)",
                   coverage=f"{len(cexs)} GPU presets, one explicit schedule each; exact DP up to "
                            f"L = {L_max}",
                   counterexample=cex,
                  correction="T*_R(j) with L_j^P (L_j^P + 1) in place of L_j^P (L_j^P + t*_lcm): the minimum "
                             "of Eq. 10's ceiling-free bound over all chunkings (chunk size 1)",
                  correction_check=f"exact DP: the relaxation's minimum is L(L+1) for all L <= {L_max}; the "
                                   f"ceiling DP over every GPU's tile set is >= L(L+1) (min ratio per GPU: "
                                   f"{worst})",
                  evidence={"counterexamples": cexs})


# --- Proposition 2 ---------------------------------------------------------------------------


def eq12_vectorised(cm, L_P, L_D) -> np.ndarray:
    """Eq. 12 per request, written out term by term (independent of theory.bounds)."""
    t = cm.t_star
    tot = (L_P + L_D).astype(float)
    S = cost.decode_prefix(cm, int((L_P + L_D).max()))
    return (tot / (cm.mu_Lin[0] * t.t_col) + tot / cm.mu_nLin + cm.N * (S[L_P + L_D] - S[L_P])
            + cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red) * L_P * (L_P + t.t_lcm))


@register("prop2.slln_mean", level="sample",
          domain="every law of (L^P, L^D)",
          evaluates=(Points("sympy over K = 3 symbolic support points; the padded paper workloads on the "
                            "A100; 10^5 seeded samples"),),
          location="Appendix B.1, Proposition 2; Appendix B.3 step (a) of Eq. 15",
          items=("Proposition 2", "Eq. 15"),
          claim="(1/k) sum_j T*_R(j) -> T_bar^R a.s., i.e. T_bar^R (Theorem 1) is E[T*_R] with T*_R from "
                "Eq. 12.",
          method="sympy: the pmf-mean of Eq. 12 over K symbolic support points equals Theorem 1's T_bar^R "
                 "with E over the same points; numerically, theory.bounds.T_bar_R vs the pmf-mean of Eq. 12 "
                 "on the padded paper workloads; a seeded sample mean of 10^5 T*_R within 4 standard errors.")
def prop2_slln_mean(fast: bool) -> Result:
    K = 3
    p = sp.symbols(f"p0:{K}", positive=True)
    lp = sp.symbols(f"lp0:{K}", positive=True)
    ld = sp.symbols(f"ld0:{K}", positive=True)
    dsa = sp.symbols(f"dsa0:{K}", positive=True)
    muL, tc, mun, N, d, s, mu, tr, tk, t = sp.symbols("mu_Lin t_col mu_nLin N d s mu t_row t_red t_lcm",
                                                       positive=True)

    def T_star(a, b, z):
        return (a + b) / (muL * tc) + (a + b) / mun + N * z + N * d / (s * mu * tr * tc * tk) * a * (a + t)

    mean = sp.Add(*[p[j] * T_star(lp[j], ld[j], dsa[j]) for j in range(K)])
    E = lambda f: sp.Add(*[p[j] * f(j) for j in range(K)])  # noqa: E731
    E_total = E(lambda j: lp[j] + ld[j])
    T_bar = (E_total / (muL * tc) + E_total / mun + N * E(lambda j: dsa[j])
             + N * d / (s * mu * tr * tc * tk) * E(lambda j: lp[j] * (lp[j] + t)))
    symbolic_ok = sp.expand(mean - T_bar) == 0
    numeric = {}
    cm = cost_model(CostSpec("a100"))
    for wn in PAPER_WORKLOADS[: 1 if fast else None]:
        w = workload(wn).padded(cm.t_lcm)
        mean_eq12 = float(np.dot(w.p, eq12_vectorised(cm, w.L_P, w.L_D)))
        numeric[wn] = (mean_eq12, T_bar_R(cm, w))
    numeric_ok = all(math.isclose(a, b, rel_tol=1e-9) for a, b in numeric.values())
    w = workload("table1").padded(cm.t_lcm)
    lp_s, ld_s = w.sample(100_000, np.random.default_rng(2025))
    x = eq12_vectorised(cm, lp_s, ld_s)
    se = x.std(ddof=1) / math.sqrt(x.size)
    target = T_bar_R(cm, w)
    slln_ok = abs(x.mean() - target) <= 4 * se
    if not (symbolic_ok and numeric_ok and slln_ok):
        return Result(Verdict.FAIL, "T_bar^R is not the mean of Eq. 12",
                      counterexample={"symbolic": symbolic_ok, "numeric": numeric, "sample mean": x.mean(),
                                      "T_bar^R": target, "4 s.e.": 4 * se})
    return Result(Verdict.PASS, "T_bar^R is exactly the pmf-mean of Eq. 12; a seeded sample mean agrees",
                  coverage=f"symbolic (3 support points); a100/{list(numeric)} padded, rel 1e-9; 10^5 seeded "
                           f"samples of table1+pad: |mean - T_bar^R| = {abs(x.mean() - target):.3g} s <= 4 "
                           f"s.e. = {4 * se:.3g} s (an illustration of the a.s. limit, not a proof)")


# --- Eq. 13 -------------------------------------------------------------------------------------


def rad_alone(cm_star, l_P: int, l_D: int) -> float:
    """One request processed alone by RAD: prompt in chunks of t*_lcm, then decodes one by one,
    each iteration a batch of Eq. 7 (with the profile's fixed time per batch)."""
    j = np.arange(l_P + 1, l_P + l_D + 1)
    decode_batch = float(cost.T_Lin(cm_star, 1)) + cost.one_token_batch_rest(cm_star)
    return (float(cost.chunked_prefill_time(cm_star, [l_P], cm_star.t_lcm)[0])
            + l_D * decode_batch + cm_star.N * float(cost.T_D_SA(cm_star, j).sum()))


def eq13_cases(fast: bool):
    """The (GPU, model, mode, l^P,max, l^D,max) cases of eq13.tmax: every preset (both modes; the
    fast run: real mode, where a preset's linear time is its own) with lengths (1, 1), where RAD
    alone can exceed the printed T^max, so where the corrected T^max matters; then (256, 1) and the
    paper workloads' maxima on every preset (on 3 GPUs x 2 models in the fast run)."""
    rest = [(256, 1)] + [(workload(w).l_P_max, workload(w).l_D_max) for w in PAPER_WORKLOADS]
    for k, g in enumerate(gpus()):
        for j, mk in enumerate(models()):
            whole = not fast or (k < 3 and j < 2)
            for mode in ("paper", "real"):
                if whole:
                    yield from ((g, mk, mode, l_P, l_D) for l_P, l_D in [(1, 1), *rest])
                elif mode == "real":
                    yield g, mk, mode, 1, 1


@register("eq13.tmax", level="sample",
          domain="every GPU, model, mode and request length",
          evaluates=(Points("every GPU preset x model preset at lengths (1, 1) (real mode only in the fast "
                            "run); (256, 1) and the paper workloads' maxima on every preset x mode (3 GPUs "
                            "x 2 models in the fast run)"),),
          location="Appendix B.2, Eq. 13 (and Theorem 2's T^max)",
          items=("Eq. 13",),
          claim="T^max is the time of the worst way to serve a request -- maximal lengths, prefill in "
                "chunks of 1 without batching, decodes without batching -- so no request needs longer.",
          method="Time the described schedule with Eq. 7 (theory.bounds.T_max_described: chunk-1 prefill "
                 "iterations via Eq. 6, each iteration with the fixed time per batch, one tile for all "
                 "GeMMs, max over tiles) and compare with T^max (theory.bounds.T_max, which prices prompt "
                 "tokens as decode GeMVs), for every GPU x model x mode and lengths (1,1), Table 1 and "
                 "sharegpt4 maxima; then RAD's own processing of one request alone vs T^max and vs "
                 "theory.bounds.T_max_corrected, which must be max(T^max, the described schedule).")
def eq13_tmax(fast: bool) -> Result:
    cases, first_bad, rad_ok, worst_rad = 0, None, True, 0.0
    printed_misses = []  # RAD alone above T^max as printed: the cases the correction is needed for
    not_max = []  # theory.bounds.T_max_corrected other than max(printed, described)
    for g, mk, mode, l_P, l_D in eq13_cases(fast):
        cm, cm_star = cost_model(CostSpec(g, mk, mode)), cost_model(CostSpec(g, mk, mode, tiles="t*"))
        cases += 1
        tm = T_max(cm, l_P, l_D)
        desc, tile = T_max_described(cm, l_P, l_D)
        if desc > tm and first_bad is None:
            first_bad = {"gpu": g, "model": mk, "mode": mode, "l_P,max": l_P, "l_D,max": l_D,
                         "tile": str(tile), "described schedule (s)": desc, "T^max (s)": tm,
                         "excess": f"{desc / tm - 1:.3%}"}
        ra = rad_alone(cm_star, l_P, l_D)
        corrected = T_max_corrected(cm, l_P, l_D)  # the function llmq bounds reports Theorem 2's n with
        if corrected != max(tm, desc):
            not_max.append(f"{g}/{mk}/{mode} ({l_P}, {l_D}): T_max_corrected {corrected:.6g} s, "
                           f"max(printed, described) {max(tm, desc):.6g} s")
        worst_rad = max(worst_rad, ra / corrected)
        rad_ok &= ra <= corrected
        if ra > tm:
            printed_misses.append(f"{g}/{mk}/{mode} ({l_P}, {l_D}): RAD alone {ra:.6g} s, "
                                  f"T^max {tm:.6g} s (+{ra / tm - 1:.3%})")
    i = np.array([1, 64, 1024, 8192])
    per_token = {}
    for mode in ("paper", "real"):
        cm = cost_model(CostSpec("a100", PAPER_MODEL, mode))
        ratio = cost.T_P_SA(cm, i, np.ones_like(i)) / (cm.N * cost.T_D_SA(cm, i))
        per_token[mode] = ratio.round(3).tolist()
    return outcome(first_bad is None, corrected_holds=rad_ok and not not_max,
                   summary="no described chunk-1 schedule costs more than T^max" if first_bad is None else
                   "the described chunk-1 schedule costs more than T^max: T^max prices the prompt tokens "
                   "with the decode GeMV cost T^{D,SA}(i), not with Eq. 6's chunk-1 GeMMs",
                   coverage=f"{cases} GPU x model x mode x length cases" + (" (fast subset)" if fast else ""),
                   counterexample=first_bad,
                  correction="T^max is the time of the schedule the text describes, its prompt tokens priced "
                             "by Eq. 6 (chunks of 1): max(T^max as printed, that schedule at its worst "
                             "tile) (theory.bounds.T_max_corrected; llmq bounds reports Theorem 2's n "
                             "under it). Lemma 1 and Lemma 4 use that a request served alone by RAD finishes "
                             "within T^max, which the printed T^max does not always give (evidence: RAD "
                             "alone above it, where a preset's linear time leaves it no slack over Eq. 6's "
                             "chunk of 1)",
                  correction_check=f"theory.bounds.T_max_corrected is max(printed, described) and RAD alone "
                                   f"(t*_lcm chunks at t*, decodes one by one, Eq. 7) is within it on all "
                                   f"{cases} cases, those where RAD alone exceeds the printed T^max "
                                   f"included; largest ratio {worst_rad:.4f}"
                                   + (" (fast subset)" if fast else "")
                  if rad_ok and not not_max else
                  "violated: " + (not_max or ["RAD alone above theory.bounds.T_max_corrected"])[0],
                  evidence={"a100: Eq. 6 of PI(R, i, 1) (best tile) / N T^{D,SA}(i) at i = 1, 64, 1024, 8192":
                            per_token,
                            "RAD alone above T^max as printed": printed_misses or "none"})


# --- Lemma 1 and Eq. 14-16 ----------------------------------------------------------------------


LEMMA1_PRINTED_CASES = (lambda x: x <= 0, lambda x: x <= 0)  # Lemma 1's proof: both cases read '<='


@register("lemma1.case_split", level="reading",
          domain="every sign of x = (1/r) sum T*_R - t",
          evaluates=(Reading("Lemma 1's proof: the cases '(1/r) sum T*_R <= t' twice, and the chain's "
                             "last '<'"),),
          location="Appendix B.2, Lemma 1 and its proof",
          items=("Lemma 1",),
          claim="The proof by contradiction covers every case: first (1/r) sum T*_R <= t, then (as printed) "
                "again (1/r) sum T*_R <= t; and its chain t + Q T^max < ... < (1/r) sum T*_R is strict.",
          method="Evaluate the printed case conditions on x = (1/r) sum T*_R - t in {-1, 0, 1} and find the "
                 "uncovered case; sympy: the chain's last step t + ((1/r) sum - t)/T^max * T^max "
                 "simplifies to (1/r) sum (an equality, printed '<').")
def lemma1_case_split(fast: bool) -> Result:
    cases_fixed = [lambda x: x <= 0, lambda x: x > 0]
    xs = [Fraction(-1), Fraction(0), Fraction(1)]
    uncovered = [x for x in xs if not any(c(x) for c in LEMMA1_PRINTED_CASES)]
    fixed_ok = all(any(c(x) for c in cases_fixed) for x in xs)
    S, t, T = sp.symbols("S t T_max", positive=True)
    last_step = sp.simplify(t + (S - t) / T * T - S)
    return outcome(not uncovered, corrected_holds=fixed_ok,
                   summary="the printed cases cover every sign of (1/r) sum T*_R - t" if not uncovered else
                   "the second case repeats '<=' instead of '>': the case (1/r) sum T*_R > t (the one the "
                   "argument is about) is never stated; the chain's last '<' is an '='",
                   coverage="x = (1/r) sum T*_R - t in {-1, 0, 1} (every sign); the chain's step "
                            "symbolically",
                  counterexample={"x = (1/r) sum T*_R - t": str(uncovered[0]) if uncovered else None,
                                  "printed cases": ["x <= 0", "x <= 0"],
                                  "chain's last step minus right side (sympy)": str(last_step)},
                  correction="'Consider (1/r) sum_{j <= A(t)} T*_R(j) > t'; and '= (1/r) sum T*_R' in the "
                             "last step (the strict '<' comes from Q(t) < ...)",
                  correction_check="the corrected cases x <= 0, x > 0 cover x in {-1, 0, 1} (all signs); the "
                                   "contradiction then holds with Proposition 1 (itself needing the "
                                   "correction of prop1.drain_lower_bound)")


@register("eq14.poisson_slln", level="none",
          domain="every sample path of a Poisson process",
          location="Appendix B.3, Eq. 14",
          items=("Eq. 14",),
          claim="A(t)/t -> lambda almost surely for a Poisson process of rate lambda.",
          method="none")
def eq14_poisson_slln(fast: bool) -> Result:
    return not_checkable("it is the strong law of large numbers for a Poisson process (a theorem about "
                         "almost-sure limits); no finite computation can refute it")


@register("eq15.subsequence", level="none",
          domain="every sample path of the arrivals and lengths",
          location="Appendix B.3, Eq. 15",
          items=("Eq. 15",),
          claim="(1/A(t)) sum_{j <= A(t)} T*_R(j) -> T_bar^R a.s., since A(t) -> infinity a.s.",
          method="none (its algebraic ingredient, T_bar^R = E[T*_R], is prop2.slln_mean)")
def eq15_subsequence(fast: bool) -> Result:
    return not_checkable("it composes two almost-sure limits (A(t) -> infinity and the SLLN of "
                         "Proposition 2); the identity it relies on, E[T*_R] = T_bar^R, is checked by "
                         "prop2.slln_mean")


def printed_alpha(lam, T_bar, r, T_max):
    """alpha of Appendix B.3 as printed: (lambda T_bar^R / r - 1) / T^max."""
    return ((lam * T_bar) / r - 1) / T_max


@register("eq16.product_of_limits", level="reading",
          domain="all positive S, A, t, lambda, T_bar^R, r, T^max",
          evaluates=(Reading("Appendix B.3: (1/t) sum = (sum / A(t)) (A(t) / t) and alpha = (lambda "
                             "T_bar^R / r - 1) / T^max"),),
          location="Appendix B.3, Eq. 16 and the definition of alpha",
          items=("Eq. 16", "Theorem 1"),
          claim="(1/t) sum_{j<=A(t)} T*_R(j) = (sum/A(t)) (A(t)/t) -> lambda T_bar^R, and then "
                "lim Q(t)/t >= (lambda T_bar^R / r - 1)/T^max = alpha > 0 when lambda T_bar^R > r.",
          method="sympy: the factorisation is an identity, the product of the limits is lambda T_bar^R, "
                 "alpha follows by substitution, and alpha > 0 iff lambda T_bar^R > r.")
def eq16_product_of_limits(fast: bool) -> Result:
    S, A, t, lam, Tb, r, Tm = sp.symbols("S A t lambda T_bar r T_max", positive=True)
    ok = sp.simplify(S / A * (A / t) - S / t) == 0
    alpha = printed_alpha(lam, Tb, r, Tm)
    bound = (1 / r * (lam * Tb) - 1) / Tm
    ok &= sp.simplify(alpha - bound) == 0
    ok &= sp.solve_univariate_inequality(alpha > 0, lam, relational=False) == sp.Interval.open(r / Tb, sp.oo)
    if not ok:
        return Result(Verdict.FAIL, "the algebra of B.3 does not hold", counterexample={"alpha": str(alpha)})
    return Result(Verdict.PASS, "the algebra of Eq. 16 and alpha is exact",
                  coverage="symbolic (all positive S, A, t, lambda, T_bar, r, T^max)")


def eq1_statement() -> sp.Basic:
    """Eq. 1 (schematically): y = V softmax(K^T q / sqrt(d)), the statement B.3 cites."""
    y, V, K, q, d = sp.symbols("y V K q d")
    return sp.Eq(y, V * sp.Function("softmax")(K * q / sp.sqrt(d)))


CITED_IN_B3 = eq1_statement  # 'From Eq. 1 we have ...'


def implies_after_dividing_by_t(cited: sp.Basic, printed: sp.Basic, t: sp.Symbol) -> bool:
    """Whether ``printed`` is the inequality ``cited`` divided by the positive ``t`` (sympy):
    same relation, both sides equal to ``cited``'s over t."""
    if not isinstance(cited, sp.GreaterThan) or not isinstance(printed, sp.GreaterThan):
        return False
    return (sp.simplify(cited.lhs / t - printed.lhs) == 0) and (sp.simplify(cited.rhs / t - printed.rhs) == 0)


@register("thm1.proof_reference", level="reading",
          domain="the statement the step cites",
          evaluates=(Reading("Appendix B.3: 'From Eq. 1 we have (1/t) Q(t) >= ...'"),),
          location="Appendix B.3, 'From Eq. 1 we have ...'",
          items=("Theorem 1",),
          claim="The inequality (1/t) Q(t) >= ((1/r)(1/t) sum T*_R - 1)/T^max follows from Eq. 1.",
          method="sympy: the inequality is Lemma 1's bound divided by t; Eq. 1 (y = V softmax(K^T q / "
                 "sqrt(d))) contains no inequality and no Q(t).")
def thm1_proof_reference(fast: bool) -> Result:
    S, t, r, Tm, Q = sp.symbols("S t r T_max Q", positive=True)
    printed = sp.GreaterThan(Q / t, (S / (r * t) - 1) / Tm)
    cited = CITED_IN_B3()
    lemma1 = sp.GreaterThan(Q, (S / r - t) / Tm)
    follows_printed, from_lemma1 = implies_after_dividing_by_t(cited, printed, t), \
        implies_after_dividing_by_t(lemma1, printed, t)
    return outcome(follows_printed, corrected_holds=from_lemma1,
                   summary="the step follows from the statement it cites" if follows_printed else
                   "the step cites Eq. 1 (the attention formula); it is Lemma 1 divided by t",
                   coverage="symbolic in S, t, r, T^max, Q (all positive)",
                   counterexample={"cited": str(cited), "needed": "Lemma 1: " + str(lemma1),
                                   "symbols shared by the cited statement and the inequality": sorted(
                                       map(str, cited.free_symbols & printed.free_symbols))},
                  correction="'From Lemma 1 we have ...'",
                  correction_check="sympy: Lemma 1's bound (S/r - t)/T^max divided by t equals the printed "
                                   "right side (S/(r t) - 1)/T^max")
