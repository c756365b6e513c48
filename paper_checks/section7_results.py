"""Section 7 and Appendix F: the paper's measured results against ``llmq slai``'s reproduction.

The study is :mod:`stability.slai` (Mistral-7B on one RTX 6000 Ada, real mode, Table-1 lengths
capped at 8192 tokens, Poisson arrivals, the paying shares of :data:`stability.slai.study.SHARES`),
restricted to the four policies the claims name: Sarathi-Serve FCFS and SPF, SLAI (SPF, dynamic
offset) and SLAI (SPF with priority, dynamic offset). Replicates use common random numbers, so
each gain is paired per replicate (:mod:`stability.slai.analysis`). The full run is ``llmq slai``'s full study
(:data:`stability.slai.study.FULL`'s sizes); ``--quick`` runs ``llmq slai --quick``'s run length
with more replicates and fewer rates (:func:`study_rows`). Points either shares with ``llmq slai``
are read from its cache (``out/slai/cache``) when it exists; otherwise the points are kept in
``cache_home()/slai-points`` (:func:`theory.io.cache_home`), named like every runner result by the
task and the code's digest, so that the processes checking these claims (``llmq check``'s workers, the
test suite's) run the study once. Short runs bias a capacity gain
against the full study's, so a ``--quick`` verdict on a figure can differ from the full run's, the
one that judges the paper.

Two kinds of check, each ``statistical``:

* a figure of the paper (the capacity gain, the median-TTFT cut) against llmq's 95% Student-t
  interval over replicates: PASS when the interval contains it (a two-sided t-test of
  "llmq's mean = the paper's figure" at alpha = 0.05 does not reject); its margin is the least
  scaling of llmq's replicate values that moves an end of the interval past the figure;
* a direction the paper states (SPF beats FCFS; paying users first under priority; the gain
  shrinks as paying users grow): a one-sided paired t-test at alpha = 0.05, on log ratios for
  latencies (one congested replicate would otherwise dominate the differences); its margin is the
  relative change of the better side that brings the statistic to its critical value
  (:func:`paired_direction`).

A FAIL is a finding about the paper's figure in llmq's model, not an error of the check.

References
----------
Bari, Hegde, de Veciana (2025), Section 7 (Fig. 6c and its text), Appendix F.2 (Fig. 8),
Appendix F.3 (Figs. 9-10).
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np

from paper_checks.evidence import Points, StatTest
from paper_checks.margins import interval_margin
from paper_checks.registry import Result, outcome, register

SLAI_CACHE = Path("out/slai/cache")  # where ``llmq slai`` caches its points (default --out)
POLICIES = ("sarathi_fcfs", "sarathi_spf", "slai_spf_dynamic", "slai_priority_dynamic")
ALPHA = 0.05
EFFECT = 0.25  # power is stated against a true value 25% of the reference away from it


@cache
def study_rows(fast: bool) -> tuple[tuple, list[dict]]:
    """(panels, rows) of the restricted study (see the module docstring); rows as
    :func:`stability.slai.report.run_study` gives them, the operating-point rows flagged ``op``."""
    from stability.slai.analysis import operating_rate, paper_ttft_base
    from stability.slai.study import FULL, SHARES, Panel, Study, rates, run_tasks, tasks_at
    from theory.io import cache_home

    panels = tuple(Panel("real", "table1", p) for p in SHARES)
    study = (Study(panels, seeds=6, n_requests=600, rel_rates=(0.8, 0.9, 0.95), paper_rates=(1.0, 1.6))
             if fast else Study(panels, FULL.seeds, FULL.n_requests, FULL.rel_rates))
    where = SLAI_CACHE if SLAI_CACHE.is_dir() else cache_home() / "slai-points"
    sweep = [t for p in panels for t in tasks_at(study, p, rates(study, p), None, POLICIES)]
    rows = [{**r, "op": False} for r in run_tasks(sweep, where)]
    ops = [t for p in panels for t in
           tasks_at(study, p, [operating_rate(rows, p.key, paper_ttft_base(p.paying))], None, POLICIES)]
    rows += [{**r, "op": True} for r in run_tasks(ops, where)]
    return panels, rows


def _sizes(fast: bool) -> str:
    return ("--quick: 600 requests x 6 replicates, rates 1.0, 1.6 req/s and 0.8, 0.9, 0.95 lambda* (short "
            "runs: their capacities are biased against the full study's)" if fast
            else "4096 requests x 4 replicates, the paper's eight rates and nine fractions of lambda* "
                 "(llmq slai's full study)")


def _power_two_sided(values: np.ndarray, delta: float) -> float:
    """Power of the two-sided one-sample t-test at :data:`ALPHA` against a true mean ``delta`` away
    (noncentral t; Casella and Berger, Statistical Inference, Section 8.3)."""
    from scipy.stats import nct, t

    n = values.size
    se = float(values.std(ddof=1) / math.sqrt(n))
    if n < 2 or se == 0:
        return 1.0
    crit, nc = float(t.ppf(1 - ALPHA / 2, n - 1)), abs(delta) / se
    return float(nct.sf(crit, n - 1, nc) + nct.cdf(-crit, n - 1, nc))


PAPER_FIGURES = {  # quantity -> the paper's figure, from its printed values (stability.slai.analysis.PAPER)
    "capacity gain [%]": ("cap_slai", "cap_base"),
    "median TTFT reduction at the operating point [%]": ("ttft_slai", "ttft_base"),
}


def paper_figure(quantity: str, paying: float) -> float:
    """The paper's figure of ``quantity`` at ``paying``, in percent, from its printed values."""
    from stability.slai.analysis import PAPER

    new, old = PAPER_FIGURES[quantity]
    return 100 * (PAPER[paying][new] / PAPER[paying][old] - 1)


def figure_in_interval(quantity: str, paying: float, fast: bool, paper_claim: str) -> Result:
    """The paper's figure of ``quantity`` at ``paying`` against llmq's 95% t-interval over its
    paired replicates (:func:`replicate_values`)."""
    from stability.slai.analysis import ci

    panels, rows = study_rows(fast)
    panel = next(p for p in panels if p.paying == paying)
    values = np.asarray(replicate_values(rows, panel, quantity), dtype=float)
    paper = paper_figure(quantity, paying)
    mean, lo, hi = ci(values.tolist())
    inside = bool(math.isfinite(lo) and lo <= paper <= hi)
    stat = {"test": f"two-sided one-sample t-test of 'llmq's mean = the paper's {paper:.3g}' "
                    f"({values.size} paired replicates): rejected when the 95% t-interval excludes it",
            "alpha": ALPHA,
            "power": {"against a true value off the paper's by": EFFECT * abs(paper),
                      "probability of rejecting": _power_two_sided(values, EFFECT * abs(paper))},
            "llmq mean": mean, "llmq 95% CI": [lo, hi], "paper": paper, "replicates": values.tolist()}
    margin = interval_margin(paper, lo, hi) if inside else None
    return outcome(
        inside,
        summary=(f"{quantity} at {paying:.0%} paying: llmq {mean:.3g} [{lo:.3g}, {hi:.3g}] "
                 f"{'contains' if inside else 'excludes'} the paper's {paper:.3g} ({paper_claim})"),
        coverage=f"{panel.label}; {_sizes(fast)}",
        counterexample={"panel": panel.key, "quantity": quantity, "paper": paper,
                        "llmq 95% CI": [lo, hi], "replicates": values.tolist()},
        evidence=stat, margin=margin,
        blind_spot=("the interval is wide (few replicates): llmq's value could move by more than a "
                    "factor of two, with the paper's figure still inside"
                    if margin is not None and margin > 1 else ""))


def replicate_values(rows: list[dict], panel, quantity: str) -> list[float]:
    """llmq's per-replicate values of ``quantity`` (one of :data:`PAPER_FIGURES`), paired per
    replicate as :func:`stability.slai.analysis.paper_table` pairs them."""
    from stability.slai.analysis import capacities
    from stability.slai.study import BASELINE, SLAI_DYNAMIC

    if quantity == "capacity gain [%]":
        cb, cs = capacities(rows, panel.key, BASELINE), capacities(rows, panel.key, SLAI_DYNAMIC)
        return [100 * (cs[s] / cb[s] - 1) for s in sorted(cb) if s in cs and cb[s] > 0]
    pick: dict[int, dict[str, float]] = {}
    for r in rows:
        if r["panel"] == panel.key and r["op"] and r["policy"] in (BASELINE, SLAI_DYNAMIC):
            pick.setdefault(r["seed"], {})[r["policy"]] = r["ttft_p50"]
    return [100 * (v[SLAI_DYNAMIC] / v[BASELINE] - 1) for _, v in sorted(pick.items()) if len(v) == 2]


def paired_direction(better: list[float], worse: list[float], what: str, coverage: str,
                     log: bool = True) -> Result:
    """PASS when a one-sided paired t-test at :data:`ALPHA` finds ``better`` below ``worse``.

    With ``log`` (positive quantities such as latencies) the test is on the log ratios
    ``log(worse / better)``: scaling ``better`` by ``1 + m`` shifts every log ratio by
    ``log(1 + m)`` and leaves their spread, so the margin is exactly ``exp(mean - t_crit se) - 1``.
    Without it the test is on the differences and the margin is the least scaling of ``better``
    that brings the statistic to its critical value (:func:`_difference_margin`). Power is
    stated against a true effect of :data:`EFFECT` (a ratio ``1 + EFFECT``, or ``EFFECT`` times
    ``better``'s mean).
    """
    from scipy.stats import t

    b, w = np.asarray(better, dtype=float), np.asarray(worse, dtype=float)
    d = np.log(w / b) if log else w - b
    n = d.size
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    crit = float(t.ppf(1 - ALPHA, n - 1)) if n > 1 else math.inf
    stat = float(d.mean() / se) if se > 0 else (math.inf if d.mean() > 0 else -math.inf)
    holds = bool(n > 1 and stat > crit)
    margin = None
    if holds and log:
        margin = math.expm1(float(d.mean()) - crit * se)
    elif holds:
        margin = _difference_margin(b, w, crit)
    delta = math.log1p(EFFECT) if log else EFFECT * float(abs(b.mean()))
    power = float(t.sf(crit - delta / se, n - 1)) if n > 1 and se > 0 else 1.0
    scale = "log ratios worse / better" if log else "differences worse - better"
    evidence = {"test": f"one-sided paired t-test of 'mean of the {scale} <= 0' ({n} replicates), "
                        "rejected when t > t_(1-alpha, n-1)", "alpha": ALPHA,
                "power": {"against a true difference of": delta,
                          "probability of rejecting (normal shift of t)": power},
                "t": stat, "critical t": crit, "better": b.tolist(), "worse": w.tolist()}
    return outcome(
        holds,
        summary=(f"{what}: mean {b.mean():.3g} vs {w.mean():.3g}, paired t = {stat:.2f} "
                 f"{'>' if holds else '<='} {crit:.2f} (alpha {ALPHA})"),
        coverage=coverage, counterexample={"better": b.tolist(), "worse": w.tolist(), "t": stat,
                                           "critical t": crit},
        evidence=evidence, margin=margin,
        blind_spot=("the difference is large against its spread: the better side's value could grow "
                    "by more than a factor of two before the test stops rejecting"
                    if margin is not None and margin > 1 else ""))


def _difference_margin(b: np.ndarray, w: np.ndarray, crit: float) -> float:
    """The least ``m`` with the paired t statistic of ``w - (1 + m) b`` at ``crit``.

    With ``f = 1 + m`` the statistic is ``(mu_w - f mu_b) / sqrt(v(f) / n)``, ``v(f) = V_w - 2 f C
    + f^2 V_b`` (sample variances and covariance), so ``f`` solves the quadratic
    ``(mu_w - f mu_b)^2 = crit^2 v(f) / n`` with ``mu_w - f mu_b > 0``; scaling ``better`` down
    only raises the statistic when ``mu_b > 0``. ``inf`` when no such ``f > 1`` exists.
    """
    n = b.size
    cov = np.cov(np.vstack([w, b]), ddof=1)
    c = crit * crit / n
    mw, mb = float(w.mean()), float(b.mean())
    roots = np.roots([mb * mb - c * cov[1, 1], -2 * (mw * mb - c * cov[0, 1]), mw * mw - c * cov[0, 0]])
    ok = [float(r.real) for r in roots if abs(r.imag) < 1e-12 and r.real > 1 and mw - r.real * mb > 0]
    return min(ok) - 1 if ok else math.inf


def _paired_rows(rows: list[dict], panel_key: str, pick, policies: tuple[str, str], field) -> tuple:
    by_seed: dict[int, dict[str, float]] = {}
    for r in rows:
        if r["panel"] == panel_key and pick(r) and r["policy"] in policies:
            by_seed.setdefault(r["seed"], {})[r["policy"]] = field(r)
    seeds = sorted(s for s, v in by_seed.items() if len(v) == 2)
    return [by_seed[s][policies[0]] for s in seeds], [by_seed[s][policies[1]] for s in seeds]


def _stat(test: str) -> tuple:
    return (StatTest(test, ALPHA),
            Points("llmq slai's study (real mode, Table-1 lengths, seeded replicates) at a few rates"))


CI_TEST = "two-sided one-sample t-test of llmq's mean against the paper's figure (95% t-interval)"
PAIRED_TEST = "one-sided paired t-test over common-random-number replicates"


@register("sec7.ttft_cut_53", level="statistical", domain="the study of Section 7 at 5% paying users",
          evaluates=_stat(CI_TEST),
          location="Section 7, 'TTFT behaviour' and Fig. 6c; abstract; Section 8", items=(),
          claim="SLAI (SPF, dynamic offset) cuts the median TTFT of Sarathi-Serve (FCFS) under high load "
                "from 1.5 s to 0.7 s: -53%.",
          method="llmq slai: at the operating point (the rate where Sarathi-FCFS's median TTFT reaches "
                 "1.5 s), the paired per-replicate median-TTFT change; PASS when its 95% t-interval "
                 "contains -53.3%.")
def sec7_ttft_cut_53(fast: bool) -> Result:
    return figure_in_interval("median TTFT reduction at the operating point [%]", 0.05, fast,
                              "Section 7: 1.5 s -> 0.7 s")


@register("sec7.capacity_gain_26", level="statistical", domain="the study of Section 7 at 5% paying users",
          evaluates=_stat(CI_TEST),
          location="Section 7, 'TTFT behaviour' and Fig. 6; abstract; Section 8", items=(),
          claim="SLAI (SPF, dynamic offset) raises the largest rate with median TTFT <= 0.5 s and every "
                "class within its P99 TBT SLO from 1.15 to 1.45 req/s over Sarathi-Serve (FCFS): +26%.",
          method="llmq slai: each replicate's capacity of both policies (stability.slai.analysis), the "
                 "paired gain; PASS when its 95% t-interval contains +26.1%.")
def sec7_capacity_gain_26(fast: bool) -> Result:
    return figure_in_interval("capacity gain [%]", 0.05, fast, "Section 7: 1.15 -> 1.45 req/s")


@register("appF3.capacity_gain_50", level="statistical",
          domain="the study of Appendix F.3 at 50% paying users", evaluates=_stat(CI_TEST),
          location="Appendix F.3, Fig. 9", items=(),
          claim="At 50% paying users SLAI (SPF, dynamic offset) raises capacity from 1.15 to 1.4 req/s "
                "over Sarathi-Serve (FCFS): +21.7%.",
          method="llmq slai at 50% paying: the paired capacity gain; PASS when its 95% t-interval "
                 "contains +21.7%.")
def appF3_capacity_gain_50(fast: bool) -> Result:
    return figure_in_interval("capacity gain [%]", 0.5, fast, "Fig. 9: 1.15 -> 1.4 req/s")


@register("appF3.capacity_gain_95", level="statistical",
          domain="the study of Appendix F.3 at 95% paying users", evaluates=_stat(CI_TEST),
          location="Appendix F.3, Fig. 10", items=(),
          claim="At 95% paying users SLAI (SPF, dynamic offset) raises capacity from 1.15 to 1.25 req/s "
                "over Sarathi-Serve (FCFS): +8.7%.",
          method="llmq slai at 95% paying: the paired capacity gain; PASS when its 95% t-interval "
                 "contains +8.7%.")
def appF3_capacity_gain_95(fast: bool) -> Result:
    return figure_in_interval("capacity gain [%]", 0.95, fast, "Fig. 10: 1.15 -> 1.25 req/s")


@register("appF3.gain_shrinks", level="statistical",
          domain="the study of Appendix F.3 at 5% and 95% paying users", evaluates=_stat(PAIRED_TEST),
          location="Appendix F.3", items=(),
          claim="As the share of paying users grows (5% -> 95%), SLAI's capacity gain over Sarathi-Serve "
                "(FCFS) becomes smaller.",
          method="llmq slai: per replicate, the capacity gain at 95% and at 5% paying (common random "
                 "numbers across shares); one-sided paired t-test that the 95% gain is lower.")
def appF3_gain_shrinks(fast: bool) -> Result:
    panels, rows = study_rows(fast)
    low, high = (next(p for p in panels if p.paying == s) for s in (0.05, 0.95))
    g5 = replicate_values(rows, low, "capacity gain [%]")
    g95 = replicate_values(rows, high, "capacity gain [%]")
    n = min(len(g5), len(g95))
    return paired_direction(g95[:n], g5[:n], "capacity gain [%] at 95% vs 5% paying",
                            f"{low.label} and {high.label}; {_sizes(fast)}", log=False)


@register("sec7.spf_beats_fcfs", level="statistical", domain="the study of Section 7 at 5% paying users",
          evaluates=_stat(PAIRED_TEST),
          location="Section 7, 'TTFT behaviour' (Fig. 6c); Appendix F.1 (Fig. 7c)", items=(),
          claim="Sarathi-Serve with shortest prefill first yields a lower median TTFT than its FCFS "
                "counterpart.",
          method="llmq slai at the operating point (Sarathi-FCFS median TTFT = 1.5 s): per replicate, "
                 "the median TTFT of Sarathi SPF and FCFS; one-sided paired t-test on the log ratios "
                 "that SPF's is lower.")
def sec7_spf_beats_fcfs(fast: bool) -> Result:
    panels, rows = study_rows(fast)
    panel = next(p for p in panels if p.paying == 0.05)
    spf, fcfs = _paired_rows(rows, panel.key, lambda r: r["op"], ("sarathi_spf", "sarathi_fcfs"),
                             lambda r: r["ttft_p50"])
    return paired_direction(spf, fcfs, "median TTFT [s], Sarathi SPF vs FCFS at the operating point",
                            f"{panel.label}; {_sizes(fast)}")


@register("appF2.priority_paying_first", level="statistical",
          domain="the study of Appendix F.2 at 5% paying users and 1.6 req/s", evaluates=_stat(PAIRED_TEST),
          location="Appendix F.2, Fig. 8", items=(),
          claim="Under SLAI (SPF with priority, dynamic offset), at 1.6 req/s the mean TTFT of paying users "
                "is lower than that of free-tier users.",
          method="llmq slai at 1.6 req/s: per replicate, the mean TTFT of each class under the priority "
                 "variant; one-sided paired t-test on the log ratios that the paying class's is lower.")
def appF2_priority_paying_first(fast: bool) -> Result:
    panels, rows = study_rows(fast)
    panel = next(p for p in panels if p.paying == 0.05)
    pay, free = [], []
    for r in sorted(rows, key=lambda r: r["seed"]):
        if (r["panel"] == panel.key and not r["op"] and r["policy"] == "slai_priority_dynamic"
                and abs(r["rate"] - 1.6) < 1e-9):
            pay.append(r["classes"][0]["ttft_mean"])
            free.append(r["classes"][1]["ttft_mean"])
    return paired_direction(pay, free, "mean TTFT [s], paying vs free users under priority at 1.6 req/s",
                            f"{panel.label}; {_sizes(fast)}")
