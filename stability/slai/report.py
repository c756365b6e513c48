"""Run the Section 7 study and write its outputs (``llmq slai``).

Two phases: the rate sweep of every panel, then each panel's operating point (where the sweep's
Sarathi-FCFS median TTFT reaches the paper's value) for every policy and replicate. Outputs, under the
output directory:

* ``points.csv``: per panel, policy and rate, replicate means and 95% intervals of median/mean
  TTFT, P99 TBT and mean TTFT per class, gap attainment, mean batch time, KV peak, and the
  fraction of replicates meeting every TBT SLO;
* ``paper_vs_llmq.csv`` and ``.md``: the paper's numbers beside ours (:func:`paper_table`) and the
  qualitative claims (:func:`stability.slai.analysis.claims`);
* ``fig6_<panel>.png`` (Figs. 6, 9, 10), ``fig7_<panel>.png`` (Fig. 7b-c at the operating point),
  ``fig8_<panel>.png`` (Fig. 8), ``lengths.png``; ``cache/`` holds one JSON per simulated point.

References
----------
Bari, Hegde, de Veciana (2025), Section 7, Appendix F.
"""

from __future__ import annotations

import math
from pathlib import Path

from stability.slai.analysis import (
    aggregate,
    buckets,
    claims,
    operating_rate,
    paper_table,
    paper_ttft_base,
)
from stability.slai.study import (
    POLICIES,
    POLICY,
    TOTAL_CAP,
    Study,
    lambda_star,
    panel_gpu_file,
    rates,
    run_tasks,
    tasks_at,
)
from theory.io import atomic_write_csv, atomic_write_json, atomic_write_text

_METRICS = {
    "ttft_p50": "s; median time to first token", "ttft_mean": "s; mean time to first token",
    "t_bar_batch": "s; mean batch execution time", "kv_peak": "peak KV-cache occupancy (fraction)",
    "preemptions": "requests preempted (KV memory full)",
    **{f"{c}_{k}": f"{unit}; {c} class: {what}" for c in ("paying", "free") for k, unit, what in (
        ("tbt_p99", "s", "99th percentile time between tokens"), ("ttft_p50", "s", "median TTFT"),
        ("ttft_mean", "s", "mean TTFT"), ("gaps_within", "fraction", "token gaps within the TBT SLO"))},
}
# the data dictionaries of points.csv and paper_vs_llmq.csv (written beside them)
POINTS_COLUMNS = {
    "panel": "panel key: layer mode, workload, paying share (+floor with the weight-streaming floor, "
             "+engine... with the serving engine's costs)",
    "policy": "scheduling policy (POLICIES)", "rate": "req/s; arrival rate",
    "op": "true at the panel's operating point, false in the rate sweep",
    "replicates": "independent replicates (seeds) averaged",
    "tbt_met": "fraction of replicates meeting every class's P99 TBT SLO",
    **{k: f"{v} (mean over replicates)" for k, v in _METRICS.items()},
    **{f"{k}_lo": f"lower limit of the 95% t-interval of {k}" for k in _METRICS},
    **{f"{k}_hi": f"upper limit of the 95% t-interval of {k}" for k in _METRICS},
}
TABLE_COLUMNS = {
    "panel": "panel key (as in points.csv)", "mode": "layer mode: paper or real",
    "workload": "length law", "paying": "share of paying requests",
    "floor": "true with the weight-streaming floor on every batch",
    "quantity": "what is compared, with its unit in brackets", "paper": "the paper's value",
    "llmq": "llmq's value", "llmq_lo": "lower limit of llmq's 95% interval",
    "llmq_hi": "upper limit of llmq's 95% interval", "llmq_over_paper": "llmq / paper",
}


def n_points(study: Study) -> int:
    """Points the study simulates (sweep and operating points)."""
    return sum((len(rates(study, p)) + 1) * len(POLICIES) * study.seeds for p in study.panels)


def run_study(study: Study, out: str | Path, workers: int = 1, bar=None) -> list[dict]:
    """Simulate (or read from ``out/cache``) every point; rows of replicate results, the
    operating-point rows flagged ``op``."""
    out = Path(out)
    files = {p.key: panel_gpu_file(p, out)[1] for p in study.panels}
    sweep = [t for p in study.panels for t in tasks_at(study, p, rates(study, p), files[p.key])]
    rows = [{**r, "op": False} for r in run_tasks(sweep, out / "cache", workers, bar)]
    ops = [t for p in study.panels
           for t in tasks_at(study, p, [operating_rate(rows, p.key, paper_ttft_base(p.paying))],
                             files[p.key])]
    return rows + [{**r, "op": True} for r in run_tasks(ops, out / "cache", workers, bar)]


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def length_laws(study: Study) -> list[str]:
    """Markdown lines comparing the study's length laws (capped at 8192 tokens): marginal means and
    quantiles, E[L^P L^D] (the attention work grows with it) and lambda* of the real layers."""
    from theory.workload import get_workload

    names = sorted({p.workload for p in study.panels})
    lines = [f"## Length laws (L^P + L^D <= {TOTAL_CAP})", "",
             "| lengths | E[L^P] | L^P p50 / p90 / p99 | E[L^D] | L^D p50 / p90 / p99 | E[L^P L^D] "
             "| lambda* real layers [req/s] |", "|---|---|---|---|---|---|---|"]
    for name in names:
        w = get_workload(name).truncated(TOTAL_CAP)
        (mp, md), cross = w.mean(), w.expect(w.L_P.astype(float) * w.L_D)
        q = {k: " / ".join(f"{w.quantile(k, x):.0f}" for x in (0.5, 0.9, 0.99)) for k in ("prompt", "decode")}
        lines.append(f"| {name} | {mp:.0f} | {q['prompt']} | {md:.0f} | {q['decode']} | {cross:.3g} | "
                     f"{lambda_star('real', name):.3f} |")
    return [*lines, ""]


def markdown(study: Study, table: list[dict], verdicts: dict) -> str:
    """The paper-vs-llmq tables (one per panel) and the claims, as markdown; a smoke-test study
    (``llmq slai --quick``) says so above the tables and in each one's heading."""
    smoke = ("**Smoke test (`--quick`)**: too few requests and replicates to judge the paper's "
             "numbers or claims; the intervals are wide and may cross zero. It checks that the "
             "pipeline runs end to end; `llmq slai` without `--quick` is the experiment.")
    lines = ["# SLAI, Section 7: paper vs llmq" + (" (smoke test)" if study.smoke else ""), "",
             *([smoke, ""] if study.smoke else []),
             f"Mistral-7B on an RTX 6000 Ada, KV memory model on; {study.seeds} replicates of "
             f"{study.n_requests} Poisson requests per point; 95% Student-t intervals over "
             "replicates; capacity = largest rate with median TTFT <= 0.5 s and every class's P99 "
             "TBT within its SLO (0.1 s paying, 0.5 s free); operating point = the rate where "
             "Sarathi-FCFS's median TTFT reaches the paper's value there (1.5 s; 2 s at 95% "
             "paying), the paper's being 1.6 req/s.", "", *length_laws(study)]
    for panel in study.panels:
        rows = [r for r in table if r["panel"] == panel.key]
        heading = f"## {panel.label}" + (" (smoke test: see above)" if study.smoke else "")
        lines += [heading, "", "| quantity | paper | llmq (95% CI) | llmq / paper |",
                  "|---|---|---|---|"]
        for r in rows:
            interval = (f" [{_fmt(r['llmq_lo'])}, {_fmt(r['llmq_hi'])}]"
                        if math.isfinite(r["llmq_lo"]) else "")
            lines.append(f"| {r['quantity']} | {_fmt(r['paper'])} | {_fmt(r['llmq'])}{interval} | "
                         f"{_fmt(r['llmq_over_paper'], 2)} |")
        v = verdicts[panel.key]
        order = ", ".join(f"{POLICY[p].label} {rate:.2f}" for p, rate in v["paying_violation_order"])
        lines += ["", "Claims of Section 7 in this panel:", "",
                  f"* SLAI (SPF, dynamic) has the lowest median TTFT among policies meeting the TBT "
                  f"SLOs: at {_fmt(100 * v['lowest_ttft'], 3)}% of the {v['rates_slai_meets_tbt']} "
                  "rates where it meets them itself",
                  f"* vLLM violates the paying P99 TBT first: {'yes' if v['vllm_first'] else 'no'} "
                  f"(first rate above 0.1 s: {order or 'none'})",
                  f"* Sarathi-serve SPF beats FCFS on median TTFT: "
                  f"{'yes' if v['spf_beats_fcfs'] else 'no'}", ""]
    return "\n".join(lines)


def write_outputs(study: Study, rows: list[dict], out: str | Path, figures: bool = True) -> dict:
    """Aggregate, compare with the paper, write the files; returns {name: path}."""
    out = Path(out)
    agg = aggregate(rows)
    table = paper_table(rows, study.panels)
    verdicts = {p.key: claims(agg, p.key) for p in study.panels}
    written = {
        "points": atomic_write_csv(out / "points.csv", {k: [a[k] for a in agg] for k in agg[0]},
                                   POINTS_COLUMNS),
        "table_csv": atomic_write_csv(out / "paper_vs_llmq.csv",
                                      {k: [t[k] for t in table] for k in table[0]}, TABLE_COLUMNS),
        "table_md": atomic_write_text(out / "paper_vs_llmq.md", markdown(study, table, verdicts)),
        "claims": atomic_write_json(out / "claims.json", verdicts),
    }
    if figures:
        written.update(write_figures(study, rows, agg, out))
    return {k: str(v) for k, v in written.items()}


def write_figures(study: Study, rows: list[dict], agg: list[dict], out: Path) -> dict:
    """Figs. 6-8 analogues per panel and the length laws."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from stability.slai import plots as slai_plots

    written = {}

    def save(fig, name):
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written[name] = path

    for panel in study.panels:
        save(slai_plots.fig6(agg, panel, lambda_star(panel.mode, panel.workload)), f"fig6_{panel.key}")
        per_policy = {p.key: buckets(rows, panel.key, p.key) for p in POLICIES}
        save(slai_plots.fig7_buckets(per_policy, panel), f"fig7_{panel.key}")
        save(slai_plots.fig8_priority(agg, panel), f"fig8_{panel.key}")
    save(slai_plots.fig_lengths(), "lengths")
    return written
