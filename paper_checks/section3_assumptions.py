"""Checks of the model's assumptions on the presets: Assumptions 1-4 of Section 3.2.

Each assumption is evaluated by :mod:`theory.assumptions` on every GPU preset, model and workload;
Assumption 3's printed lcm is read against the tile's. The cost model itself (Eq. 2-7, Definitions
1-2) is checked in :mod:`paper_checks.section3_model`.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2, Assumptions 1-4."""

from __future__ import annotations

import math

from paper_checks.common import PAPER_GPU, PAPER_MODEL, PAPER_WORKLOADS, gpus, models, workload
from paper_checks.evidence import Enumeration, Points, Reading
from paper_checks.margins import blind_spot, least_margin, ratio_margin
from paper_checks.proofs import d_col_one_times
from paper_checks.registry import Result, Verdict, outcome, register
from theory.assumptions import assumption1, assumption2, assumption3, assumption4
from theory.builder import CostSpec, cost_model
from theory.hardware import get_gpu

# --- Assumptions 1-4 --------------------------------------------------------------------------


def _matrix(fn, per_mode: bool) -> tuple[dict, list]:
    grid, fails = {}, []
    for g in gpus():
        for mk in models():
            for mode in ("paper", "real") if per_mode else ("paper",):
                rep = fn(cost_model(CostSpec(g, mk, mode)))
                grid[f"{g}/{mk}/{mode}"] = rep.holds
                if not rep.holds:
                    fails.append({"gpu": g, "model": mk, "mode": mode, "detail": rep.detail})
    return grid, fails


def _cost_models() -> list:
    modes = ("paper", "real")
    return [cost_model(CostSpec(g, mk, mode)) for g in gpus() for mk in models() for mode in modes]


def _volume(cm, k: int) -> int:
    return int(cm.t_row[k] * cm.t_col[k] * cm.t_red[k])


@register("assumption1.presets", level="exhaustive",
          domain="every GPU preset x model preset x mode (paper, real)",
          evaluates=(Enumeration("every GPU preset x model preset x mode (paper, real)",
                                 lambda: len(gpus()) * len(models()) * 2),),
          location="Section 2.3, Assumption 1 and the remark after it",
          items=("Assumption 1",),
          claim="Each GPU has a tile t* reaching its maximal FLOP rate on large perfectly tiled GeMMs, and "
                "the model dimensions are divisible by it; on A100, t* is 128x256 or 256x128 with t_red 32.",
          method="theory.assumptions.assumption1 (t* maximises mu(t) t_row t_col t_red over the tile "
                 "set of the preset's roofline, dimensions divisible) on every GPU x model x mode.")
def assumption1_presets(fast: bool) -> Result:
    grid, fails = _matrix(assumption1, per_mode=True)
    a100 = get_gpu("a100").optimal_tile()
    a100_ok = (a100.t_row, a100.t_col) in ((128, 256), (256, 128)) and a100.t_red == 32
    if fails or not a100_ok:
        return Result(Verdict.FAIL, "Assumption 1 fails on a preset", counterexample=(fails or [{}])[0]
                      | {"a100 t*": str(a100)})
    ties = {g: [str(t) for t in get_gpu(g).tiles if get_gpu(g).flop_rate(t)
                >= get_gpu(g).flop_rate(get_gpu(g).optimal_tile()) * (1 - 1e-12)] for g in gpus()}
    # t*'s FLOP rate against the best other tile's (a tie: 0); the divisibility and A100 tile are exact
    margin = least_margin(ratio_margin(cm.mu[0] * _volume(cm, 0), max(cm.mu[k] * _volume(cm, k)
                                                                        for k in range(1, len(cm.tiles))))
                          for cm in _cost_models() if len(cm.tiles) > 1)
    return Result(Verdict.PASS, f"holds on all {len(grid)} cases; A100 t* = {a100}",
                  coverage=f"{len(gpus())} GPUs x {len(models())} models x 2 modes (roofline rates, "
                           "not measurements)",
                  evidence={"tiles tied with t* at maximal FLOP rate": ties}, margin=float(margin),
                  blind_spot=blind_spot(float(margin), "how far t* is ahead of the other tiles"))


@register("assumption2.presets", level="sample",
          domain="every GPU preset x model preset x mode (paper, real), every d_col >= 1",
          evaluates=(Points("d_col = 1..4096 (1..512 fast) on every GPU preset x model preset x mode"),),
          location="Section 2.3, Assumption 2",
          items=("Assumption 2",),
          claim="Computing d_col GeMVs y(i) = A x(i) takes longer than the one GeMM Y = A X.",
          method="theory.assumptions.assumption2: every weight matrix of every model, d_col = 1..4096 "
                 "(1..512 fast), each side on its fastest tile, every GPU x model x mode.")
def assumption2_presets(fast: bool) -> Result:
    top = 512 if fast else 4096
    grid, fails = _matrix(lambda cm: assumption2(cm, d_col_max=top), per_mode=True)
    if fails:
        return Result(Verdict.FAIL, "Assumption 2 fails on a preset", counterexample=fails[0])
    # the least ratio (d_col GeMVs) / GeMM is at d_col = 1 (assumption2.all_d_col: the best GeMM grows
    # at most linearly in d_col); the GeMV time scaled onto the GeMM's flips it
    least = min(gemv / gemm1 for cm in _cost_models() for _, gemv, gemm1 in d_col_one_times(cm))
    return Result(Verdict.PASS, f"holds on all {len(grid)} cases",
                  coverage=f"{len(gpus())} GPUs x {len(models())} models x 2 modes, d_col = 1..{top}",
                  evidence={"least (d_col GeMVs) / GeMM, at d_col = 1": float(least)},
                  margin=(m := ratio_margin(float(least), 1.0)),
                  blind_spot=blind_spot(m, "how much slower the GeMVs are than the GeMM"))


@register("assumption3.workloads", level="exhaustive",
          domain="every GPU preset x workload of the paper (openchat_sharegpt4, Table 1)",
          evaluates=(Enumeration("every GPU preset x workload of the paper (openchat_sharegpt4, Table 1)",
                                 lambda: len(gpus()) * len(PAPER_WORKLOADS)),),
          location="Section 4.3, Assumption 3",
          items=("Assumption 3",),
          claim="Prompt lengths are multiples of t*_lcm almost surely and bounded, for the workload the "
                "paper evaluates (openchat_sharegpt4 and its Table 1 fit) on every GPU preset. (The paper "
                "makes the assumption 'to simplify'; this measures how far Theorem 2 reaches.)",
          method="theory.assumptions.assumption3 (mass of L^P divisible by t*_lcm; bounded support) for "
                 "every GPU x workload, raw and with prompts padded up to multiples of t*_lcm.")
def assumption3_workloads(fast: bool) -> Result:
    grid, fails = {}, []
    for g in gpus():
        cm = cost_model(CostSpec(g))
        for wn in PAPER_WORKLOADS:
            for pad in (False, True):
                w = workload(wn).padded(cm.t_lcm) if pad else workload(wn)
                rep = assumption3(cm, w)
                grid[f"{g}/{wn}{'+pad' if pad else ''}"] = rep.holds
                if not rep.holds and not pad:
                    fails.append({"gpu": g, "workload": wn, "t*_lcm": cm.t_lcm, "detail": rep.detail,
                                  "e.g. L^P": int(w.L_P[w.L_P % cm.t_lcm != 0][0])})
    padded_ok = all(v for k, v in grid.items() if k.endswith("+pad"))
    if fails:
        return Result(Verdict.FAIL, f"fails on {len(fails)} raw GPU x workload cases; holds once padded: "
                                    f"{padded_ok}", counterexample=fails[0], evidence={"holds": grid})
    return Result(Verdict.PASS, "holds on every case", coverage=f"{len(grid)} GPU x workload cases",
                  evidence={"holds": grid})


def printed_assumption3_lcm(t_row: int, t_col: int, t_red: int) -> int:
    """Assumption 3's chunk as printed: LCM(t*_row, t*_col, t*_row) (``t_red`` unused, as printed)."""
    return math.lcm(t_row, t_col, t_row)


@register("assumption3.lcm_typo", level="reading",
          domain="every tile (t_row, t_col, t_red)",
          evaluates=(Reading("Assumption 3: multiples of LCM(t*_row, t*_col, t*_row)"),
                     Points("power-of-2 tiles 16..256 and every preset tile"),),
          location="Assumption 3 and the remark after it",
          items=("Assumption 3",),
          claim="Assumption 3 asks for multiples of LCM(t*_row, t*_col, t*_row) -- as printed, t*_row twice.",
          method="Compare the printed LCM(t_row, t_col, t_row) with RAD's t*_lcm = LCM(t_row, t_col, t_red) "
                 "for every tile of every GPU preset.")
def assumption3_lcm_typo(fast: bool) -> Result:
    powers = [16, 32, 64, 128, 256]
    generic = [(r, c, k) for r in powers for c in powers for k in powers
               if printed_assumption3_lcm(r, c, k) != math.lcm(r, c, k)]
    preset = [{"gpu": g, "tile": str(t)} for g in gpus() for t in get_gpu(g).tiles
              if printed_assumption3_lcm(t.t_row, t.t_col, t.t_red) != t.t_lcm]
    corrected_ok = all(math.lcm(t.t_row, t.t_col, t.t_red) == t.t_lcm
                       for g in gpus() for t in get_gpu(g).tiles)
    cex = {}
    if generic:
        r, c, k = generic[0]
        cex = {"printed": "LCM(t*_row, t*_col, t*_row)",
               "intended (Algorithm 1 line 13)": "LCM(t*_row, t*_col, "
                                                                                           "t*_red)",
               "tile": f"{r}x{c}x{k}", "printed value": printed_assumption3_lcm(r, c, k),
               "t*_lcm": math.lcm(r, c, k), "power-of-2 tiles (16..256) where they differ": len(generic),
               "preset tiles where they differ": len(preset)}
    return outcome(not generic, corrected_holds=corrected_ok,
                   summary="the printed LCM is t*_lcm on every power-of-2 tile" if not generic else
                   f"typo: t*_row for t*_red; harmless on the presets ({len(preset)} preset tiles differ)",
                   coverage=f"{len(powers) ** 3} power-of-2 tiles (16..256) and every preset tile",
                   counterexample=cex,
                   correction="LCM(t*_row, t*_col, t*_red) (= t*_lcm of Algorithm 1 and Theorem 1)",
                   correction_check="the corrected LCM equals theory.hardware.Tile.t_lcm, RAD's chunk, on "
                                    "every tile of every GPU preset (and the printed one coincides with it "
                                    "there)")


@register("assumption4.presets", level="exhaustive",
          domain="every GPU preset x model preset x workload of the paper, raw and padded",
          evaluates=(Enumeration("every GPU preset x model preset x workload of the paper, raw and padded",
                                 lambda: len(gpus()) * len(models()) * len(PAPER_WORKLOADS) * 2),),
          location="Section 4.3, Assumption 4 and the remark after it",
          items=("Assumption 4",),
          claim="Assumption 4 is mild: a node holds the KV cache of t*_col requests of maximal length "
                "(t*_col is typically 64 or 128) -- in particular in the paper's own setting.",
          method="theory.assumptions.assumption4 (weights + t*_col x (l^P,max + l^D,max) tokens of KV, "
                 "FP16, GQA KV width) on every GPU x model x workload (raw and padded).")
def assumption4_presets(fast: bool) -> Result:
    grid, holds = {}, []
    for g in gpus():
        for mk in models():
            cm = cost_model(CostSpec(g, mk))
            for wn in PAPER_WORKLOADS:
                for pad in (False, True):
                    w = workload(wn).padded(cm.t_lcm) if pad else workload(wn)
                    rep = assumption4(cm, w)
                    grid[f"{g}/{mk}/{wn}{'+pad' if pad else ''}"] = rep.holds
                    if rep.holds:
                        holds.append(f"{g}/{mk}/{wn}{'+pad' if pad else ''}")
    paper = assumption4(cost_model(CostSpec(PAPER_GPU, PAPER_MODEL)), workload("sharegpt4"))
    if not paper.holds or len(holds) < len(grid):
        return Result(Verdict.FAIL, f"fails in the paper's own setting and in {len(grid) - len(holds)} of "
                                    f"{len(grid)} cases", counterexample={
                                        "gpu": PAPER_GPU, "model": PAPER_MODEL, "workload": "sharegpt4",
                                        "detail": paper.detail},
                      evidence={"holds only for": holds})
    return Result(Verdict.PASS, "holds everywhere", coverage=f"{len(grid)} cases")
