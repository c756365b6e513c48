"""Checks of unnumbered statements: the common tile of Section 3.2.1, Appendix D's TBT and TTFT
comparison of Algorithm 2 with RAD, Fig. 5c's batch times, and what only measurements can show.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2.1, Appendix D, Section 6.1 (Fig. 5), Section 7 and
Appendix F (Figs. 6-10).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from paper_checks.common import PAPER_GPU, PAPER_MODEL, gpus, models
from paper_checks.evidence import Enumeration, Points
from paper_checks.margins import NOT_APPLICABLE, least_margin, ratio_margin
from paper_checks.pseudocode import alg2, instances, rad
from paper_checks.registry import Result, not_checkable, outcome, register
from theory import cost
from theory.builder import CostSpec, cost_model
from theory.cost import CostModel

TIE = 1e-12  # relative tolerance for ties between float tile rates of the roofline


# --- Section 3.2.1: one tile for every linear GeMM --------------------------------------------------


TAU_MAX = 4096  # the largest batch token count checked (the paper's batches of 512-token budgets and more)


def slower_than_best(cm: CostModel, taus: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per linear GeMM of ``cm``'s model: (name, time at t* / fastest tile's, index of the fastest
    tile) at every token count of ``taus`` (Eq. 2 with the tiles' own rates; t* is tile 0)."""
    out = []
    for g in cm.model.linear_gemms(cm.mode):
        times = np.array([cost.T_GeMM(g.d_row, taus, g.d_red, cm.t_row[k], cm.t_col[k], cm.t_red[k], cm.mu[k],
                                      cm.s) for k in range(len(cm.tiles))])
        out.append((g.name, times[0] / times.min(axis=0), np.argmin(times, axis=0)))
    return out


def common_tile_core(cms: Iterable[CostModel], taus_of: Callable[[CostModel], np.ndarray] | None = None
                     ) -> Result:
    """Whether t* is at least as fast as every other tile for every linear GeMM of the model at every
    token count ``taus_of(cm)`` (every tau = 1..TAU_MAX, the claim's domain, unless a test narrows it),
    and, as the correction, at every multiple of the GPU's own t*_col up to TAU_MAX."""
    taus_of = taus_of or (lambda cm: np.arange(1, TAU_MAX + 1))
    n, cex, per_gpu, corrected_ok, n_corr = 0, {}, {}, True, 0
    for cm in cms:
        taus = taus_of(cm)
        aligned = np.arange(1, TAU_MAX // cm.t_star.t_col + 1) * cm.t_star.t_col
        row = per_gpu.setdefault(cm.gpu.key, {"t*": str(cm.tiles[0]), "t*_col": cm.t_star.t_col,
                                              "token counts where t* is not fastest": set(),
                                              "worst time at t* / best": 1.0})
        for name, ratio, best in slower_than_best(cm, taus):
            n += taus.size
            worse = np.flatnonzero(ratio > 1 + TIE)
            row["token counts where t* is not fastest"].update(taus[worse].tolist())
            row["worst time at t* / best"] = max(row["worst time at t* / best"], float(ratio.max()))
            if worse.size and not cex:
                j = int(worse[0])
                cex = {"gpu": cm.gpu.key, "model": cm.model.key, "mode": cm.mode, "weight": name,
                       "tau": int(taus[j]), "t*": str(cm.tiles[0]),
                       "faster tile": str(cm.tiles[int(best[j])]), "time at t* / best": float(ratio[j])}
        for _, ratio, _ in slower_than_best(cm, aligned):
            n_corr += aligned.size
            corrected_ok &= bool(np.all(ratio <= 1 + TIE))
    for row in per_gpu.values():
        bad = sorted(row.pop("token counts where t* is not fastest"))
        row |= {"token counts <= TAU_MAX where t* is not fastest": len(bad),
                "smallest such": bad[0] if bad else None, "largest such": bad[-1] if bad else None}
    return outcome(
        not cex,
        corrected_holds=corrected_ok,
        summary="t* is a fastest tile for every linear GeMM of every model at once, at every token count"
        if not cex
        else f"at tau = {cex['tau']} ({cex['gpu']}, {cex['weight']}) t* = {cex['t*']} is "
        f"{cex['time at t* / best']:.2f}x slower than {cex['faster tile']}: decode-only batches below "
        "t*_col and partial chunks are such token counts; t* is fastest at every multiple of t*_col",
        coverage=f"{n} (GPU, model, weight, tau) cases: tau = 1..{TAU_MAX} on every GPU and model given",
        counterexample=cex,
        correction="one tile, t*, is optimal for every linear GeMM at once when the batch's token count is a "
        "multiple of t*_col (the batches RAD forms: t*_col decodes, chunks of t*_lcm), as Assumption 1's "
        "perfectly tiled GeMMs; at other token counts a tile with a smaller t_col can be faster",
        correction_check=f"t* is at least as fast as every tile for every linear GeMM at every multiple of "
        f"the GPU's own t*_col up to {TAU_MAX} ({n_corr} cases)" if corrected_ok else "violated",
        evidence={"per GPU (all models given)": per_gpu},
    )


@register(
    "sec321.common_tile",
    level="sample",
    domain="every batch token count tau >= 1 (decode-only batches and partial chunks included), every linear "
    "GeMM, every GPU and model",
    evaluates=(Points(f"tau = 1..{TAU_MAX} on every GPU preset x model preset (2 models in the fast run), "
                      "paper mode"),),
    location="Section 3.2.1: 'a common tile configuration across transformations, as Assumption 1 "
    "implies a single tile configuration can achieve optimal performance across different GeMM "
    "dimensions'",
    items=("Eq. 4", "Assumption 1"),
    claim="One tile, t*, is optimal for every linear GeMM of the model at once, whatever the batch's "
    "token count tau.",
    method=f"Eq. 2 on every tile of each GPU preset for every linear weight of every model (paper mode), "
    f"every tau = 1..{TAU_MAX}: t*'s time against the fastest tile's; the correction at every multiple of "
    f"the GPU's t*_col.",
)
def sec321_common_tile(fast: bool) -> Result:
    cms = [cost_model(CostSpec(g, mk)) for g in gpus() for mk in (models()[:2] if fast else models())]
    return common_tile_core(cms)


# --- Appendix D: TBT and TTFT of Algorithm 2 against RAD --------------------------------------------


def latencies(run) -> tuple[list[int], list[int]]:
    """Per request, from a literal run with unit batch times: the batches from its arrival to its first
    decode iteration (TTFT in batches), and the largest number of batches between two of its
    consecutive decode iterations (TBT in batches; 0 with one decode)."""
    first, gaps = {}, {}
    last = {}
    for k, (_, _, its) in enumerate(run.batches):
        for it in its:
            if it[0] == "DI":
                rid = it[1]
                first.setdefault(rid, k + 1)
                if rid in last:
                    gaps[rid] = max(gaps.get(rid, 0), k - last[rid])
                last[rid] = k
    return [first[r] for r in sorted(first)], [gaps.get(r, 0) for r in sorted(first)]


def appD_core(
    max_requests: int, n_values=(1, 2, 3, 4), t_cols=(1, 2, 3), algorithm2=alg2, algorithm1=rad
) -> Result:
    """On every burst of small requests: Algorithm 2 runs each request's decode iterations in
    consecutive batches (TBT of one batch), and its mean TTFT is at least RAD's, RAD's largest TBT at
    least Algorithm 2's (Appendix D: 'complementary to the RAD scheduler'). ``algorithm2`` and
    ``algorithm1`` are the literal interpreters unless a test feeds others."""
    cases, cex, tbt_rad = 0, {}, 0
    for t_col in t_cols:
        for n in n_values:
            for reqs in instances(max_requests, (1, 2, 3), (1, 2, 3), staggers=(0.0,)):
                a = latencies(algorithm2(reqs, n=n, t_col=t_col, t_lcm=2))
                r = latencies(algorithm1(reqs, n=n, t_col=t_col, t_lcm=2))
                cases += 1
                tbt_rad = max(tbt_rad, max(r[1]))
                ok = max(a[1]) <= 1 and np.mean(a[0]) >= np.mean(r[0]) and max(r[1]) >= max(a[1])
                if not ok and not cex:
                    cex = {
                        "t_col": t_col,
                        "n": n,
                        "requests (L_P, L_D), all at 0": [(q.L_P, q.L_D) for q in reqs],
                        "Algorithm 2: TTFT, TBT (batches)": a,
                        "RAD: TTFT, TBT (batches)": r,
                    }
    return outcome(
        not cex,
        summary=(
            "Algorithm 2 decodes every request in consecutive batches and never has a "
            f"lower mean TTFT than RAD, whose TBT reaches {tbt_rad} batches"
        )
        if not cex
        else "Algorithm 2's TBT or TTFT is not the complement of RAD's on an instance",
        coverage=f"{cases} bursts of <= {max_requests} requests (L^P, L^D in 1..3), t*_col in {t_cols}, "
        f"n in {n_values}, literal interpreters, unit batch times",
        counterexample=cex,
        margin=NOT_APPLICABLE,
    )


@register(
    "appD.tbt_ttft",
    level="sample",
    domain="every arrival sequence and request lengths",
    evaluates=(Points("every burst of <= 3 (fast) or 4 requests, L^P, L^D in 1..3, t*_col 1..3, n 1..4"),),
    location="Appendix D, the paragraph after Algorithm 2",
    items=("Algorithm 2", "Algorithm 1"),
    claim="Under Algorithm 2 a request's decode iterations run in consecutive batches (low TBT) but its "
    "first token waits for the cycle's n prefills (high TTFT); RAD is the complement (higher TBT, "
    "lower TTFT).",
    method="The literal interpreters of Algorithms 1 and 2 on every burst of small requests: the largest "
    "gap between a request's decode batches, and the mean number of batches to its first decode.",
)
def appD_tbt_ttft(fast: bool) -> Result:
    return appD_core(3 if fast else 4)


# --- Fig. 5c: decode pressure at a fixed token budget ------------------------------------------------


def fig5c_core(position: int = 513, budget: int = 512) -> Result:
    """Eq. 7 time of a batch of N decodes at token ``position`` and one prefill chunk of budget - N
    tokens, for N = 0..budget - 1, on the paper's GPU and model (real mode)."""
    cm = cost_model(CostSpec(PAPER_GPU, PAPER_MODEL, "real"))
    N = np.arange(0, budget)
    t = np.array(
        [cost.T_batch(cm, cost.Batch.of(prefill=[(1, budget - k)], decode=[position] * int(k))) for k in N]
    )
    step = cm.t_star.t_col // 4
    coarse = t[::step]
    rising = bool(np.all(np.diff(coarse) >= 0))
    growth = float(t[-1] / t[0])
    holds = rising and growth >= 1.5
    # the growth onto 1.5, or the least step ratio onto 1 (one batch time scaled onto its neighbour)
    steps = coarse[1:] / coarse[:-1]
    margin = least_margin([ratio_margin(growth, 1.5), ratio_margin(float(steps.min()), 1.0)])
    return outcome(
        holds,
        summary=(
            f"the batch time grows with the decodes in it: x{growth:.2f} from N = 0 to {budget - 1} (Eq. 7)"
            if holds
            else f"the batch time barely grows with the decodes (x{growth:.3f})"
        ),
        coverage=f"{PAPER_GPU}, {PAPER_MODEL} (real mode), budget {budget}, decodes at token "
        f"{position}, N = 0..{budget - 1} (non-decreasing on steps of {step})",
        counterexample={
            "position": position,
            "t(0) (s)": float(t[0]),
            f"t({budget - 1}) (s)": float(t[-1]),
            "non-decreasing on steps": rising,
        },
        evidence={"t(N) at N = 0, 128, 256, 384, 511 (s)": [float(t[k]) for k in (0, 128, 256, 384, 511)]},
        margin=margin,
    )


@register(
    "fig5c.decode_pressure",
    level="exhaustive",
    domain="N = 0..511 decodes at token 513 in a 512-token batch, RTX 6000 Ada, Mistral-7B (real mode)",
    evaluates=(Enumeration("N = 0..511 decodes at token 513 in a 512-token batch, RTX 6000 Ada, "
                           "Mistral-7B (real mode)", lambda: 512),),
    location="Section 6.1.3 and Fig. 5c",
    items=("Eq. 7",),
    claim="At a fixed token budget of 512, a batch takes significantly longer as decode iterations (at "
    "token 513) replace prefill tokens.",
    method="Eq. 7 (theory.cost.T_batch) on the RTX 6000 Ada with Mistral-7B, real mode, for every N: "
    "non-decreasing on steps of t*_col/4 decodes and at least 1.5 times longer at N = 511 than at 0.",
)
def fig5c_decode_pressure(fast: bool) -> Result:
    return fig5c_core()


# --- measurements ----------------------------------------------------------------------------------


@register(
    "sec7.measured_results",
    level="none",
    domain="the measurements of Section 7, Appendix F and Figs. 5a-5b",
    location="Section 7 and Appendix F (Figs. 6-10), Fig. 5a-5b",
    items=(),
    claim="SLAI lowers the median TTFT by 53% and raises capacity by 26% against Sarathi-Serve; Fig. 5a's "
    "TTFT against the token budget and Fig. 5b's memory against concurrency.",
    method="none",
)
def sec7_measured_results(fast: bool) -> Result:
    return not_checkable(
        "they are measurements of vLLM-based schedulers on the authors' RTX 6000 Ada "
        "(latencies, kernel-launch and synchronisation overheads, memory in use) that "
        "need that GPU and the authors' code; Eq. 7 has no launch overhead, and the "
        "arithmetic of the printed percentages is sec7.reported_numbers"
    )
