"""The outputs of ``llmq validate``: console table, Markdown, CSV, strict JSON and staircase figures.

Every number comes from a :class:`theory.validation.results.Report`; nothing is computed here but formatting.
JSON is strict (``allow_nan=False``): a statistic with nothing to score is ``null``, and the
meaning of ``null`` is stated in the file (``null_means``) next to the data dictionary of the CSV
columns (``columns``), which the Markdown report repeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from theory.io import atomic_write_csv, atomic_write_json, atomic_write_text
from theory.validation import attention_report as attention
from theory.validation import fan_out, fp8_report, moe_report
from theory.validation.batch_orderings import COLUMNS as ORDERING_COLUMNS
from theory.validation.results import COLUMNS, MEASURED_LABEL, NULL_MEANING, SCHEME_MEANING, SCHEMES, Report
from theory.validation.staircase import STEP_SCHEMES, STEP_TOLERANCE, staircase_verdict
from theory.validation.targets import TARGETS

SCHEMA = "llmq.validate/1"
BATCH_STACK_COLUMNS = {
    "profile": "the shipped profile of the rows (splitwise_perf_model, llmq_h100, llmq_h200) or the CSV "
               "given",
    "gpu, model, tp, operation": "GPU preset, model preset, tensor-parallel degree and batch kind of "
                                 "the whole-batch rows (prefill_batch, decode_batch; *_rank: one rank's "
                                 "share, timed without the all-reduces, scored against C alone)",
    "overhead_s, a_compute, a_allreduce, a_large": "the stack law T = overhead_s + a_compute C + "
                                                   "a_allreduce R + a_large L fitted per GPU x model x "
                                                   "TP on every batch shape (C: Eq. 7 without "
                                                   "its all-reduces, R: their time, L: the bandwidth time "
                                                   "of their bytes beyond 32 MiB per message; "
                                                   "overhead_s >= 0, a_compute and a_allreduce >= 1, "
                                                   "a_large >= 0; theory.validation.stack_law.StackLaw)",
    "n": "batch rows of the GPU x model x TP (both operations)",
    "folds": "k: fold j holds out every k-th interior shape of each operation's series, ranks = j mod "
             "k; the first and last shape of a series are trained on only "
             "(theory.validation.batches.batch_folds)",
    "n_held_out": "interior rows of the operation, each scored by the fold that holds it out",
    "before_median, before_p90": "held-out |predicted/measured - 1| of the shipped preset (Eq. 7)",
    "after_median, after_p90": "the same under the stack law fitted without the row's fold",
}
BATCH_VERDICT_COLUMNS = {
    "gpu, profile": "GPU preset and the profile of its whole-batch rows",
    "n": "held-out (interior) batch rows of every model and TP, pooled",
    "targets": "tokens_median and tokens_p90 of those rows, each under the stack law fitted without "
               "its fold, with its limit and whether it holds",
    "holds": "both targets hold",
    "kinds": "the operations pooled (prefill_batch, decode_batch; *_rank: one rank's share)",
    "in_sample": "n, median and p90 of |predicted/measured - 1| over every row with the stack law "
                 "fitted by least squares on every shape of its GPU x model x TP: no held-out figure",
    "in_sample_reach": "whether one stack law per GPU x model x TP x kind meets both targets on every "
                       "row: verdict reachable (with the median and p90 of such laws), unreachable or "
                       "undecided; n rows; solver: least squares where its laws meet them, else a "
                       "mixed-integer program (theory.validation.stack_law_reach)",
    "orderings": "per batch kind, the equal-token pairs of batch_orderings: pairs, inverted (measured "
                 "against Eq. 7's order), over_limit (error floor above limit, the p90 target: any "
                 "one stack law errs past it on one row of each) and the largest floor's pair",
}
NOT_PREDICTED_COLUMNS = {
    "profile": "the shipped profile (file name without .csv[.gz]) or the CSV given",
    "gpu": "GPU preset key", "model": "model preset key (empty: model-independent rows)",
    "tp": "tensor-parallel degree", "operation": "measured operation",
    "n": "rows of the profile x GPU x model x TP x operation not scored for this reason",
    "reason": "why they are not scored",
}
SCREENED_COLUMNS = {
    "profile, gpu, model, tp, operation": "the row's profile and group",
    "tokens, decodes, context, prefill_context, generated, bytes": "the row's shape as the profile "
                                                                   "states it (-1: not applicable)",
    "seconds": "measured time", "bound_s": "the roofline lower bound of the shape "
                                           "(theory.validation.plausibility.lower_bound); seconds < bound_s",
}
LABEL = {"roofline": "roofline", "shipped": "shipped", "tokens": "held-out tokens",
         "models": "held-out models", "paper": "paper", "measured_law": "measured law, tokens",
         "measured_law_models": "measured law, models"}


def _clean(x):
    """``x`` with numpy scalars as Python numbers and non-finite floats as ``None``."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


LAW_LABEL = {"measured profile": f"the {MEASURED_LABEL}",
             "tile model": "the calibrated tile model (transfers to unprofiled shapes)"}


def _checks_text(checks: dict) -> str:
    parts = []
    for name, check in checks.items():
        stat = name.split("_")[1]
        state = "n/a" if check["holds"] is None else ("ok" if check["holds"] else "MISS")
        parts.append(f"{LABEL[check['scheme']]} {stat} {_pct(check['value'])} "
                     f"(target <= {check['target']:.0%}: {state})")
    return "; ".join(parts)


def gpu_verdict(row: dict) -> str:
    """One line per GPU: its status, the law real mode prices its linear GeMMs with, and whether
    each acceptance target holds for that law (misses named)."""
    if not row["targets"]:
        return f"{row['gpu']}: {row['status']}: no measured rows, not validated"
    verdict = {True: "targets hold", False: "targets MISSED", None: "targets not all checkable"}
    return (f"{row['gpu']}: {verdict[row['targets_hold']]} by real mode's default, "
            f"{LAW_LABEL[row['law']]}; {_checks_text(row['targets'])}; n = {row['n']}")


def other_law_verdict(report: Report, row: dict) -> str | None:
    """One line per GPU with data: the other law's figures against the same targets, and how many
    rows the measured law interpolated (None for a GPU without measured rows)."""
    if not row["targets"]:
        return None
    parts = [_checks_text(row["other_targets"])]
    for c in report.measured_coverage:
        if c["gpu"] == row["gpu"] and c["n"]:
            parts.append(f"{LABEL[c['scheme']]}: {c['interpolated'] / c['n']:.0%} of {c['n']} rows "
                         "interpolated, the rest the tile model")
    return f"{row['gpu']}: {LAW_LABEL[row['other_law']]}: " + "; ".join(parts)


def _other_law_lines(report: Report) -> list[str]:
    return [line for line in (other_law_verdict(report, r) for r in report.gpus) if line]


def batch_verdict(v: dict) -> str:
    """One line per profile x GPU with whole-batch rows: the stack law's held-out error against the
    held-out-token targets, the same law fitted on every shape by least squares, whether any laws
    of the form meet the targets on every row, and the equal-token pairs measured against Eq. 7."""
    verdict = "targets hold" if v["holds"] else "targets MISSED"
    kinds = "whole batches" + (" and ranks' shares" if any(k.endswith("_rank") for k in v["kinds"]) else "")
    ceiling = v["in_sample"]
    return (f"{v['gpu']}: {kinds} ({v['profile']}, the stack law on held-out batch shapes, every "
            f"model and TP): {verdict}; {_checks_text(v['targets'])}; n = {v['n']}; fitted on every "
            f"shape (in sample): median {_pct(ceiling['median'])}, p90 {_pct(ceiling['p90'])}; "
            f"{reach_text(v['in_sample_reach'])}"
            + (f"; equal-token pairs measured against Eq. 7's order: {orderings_text(v['orderings'])}"
               if v["orderings"] else ""))


def reach_text(reach: dict) -> str:
    """Whether laws of the stack law's form meet the targets on every row (in sample)."""
    head = f"one law per model, TP and kind meeting the targets on every row ({reach['solver']}): "
    if reach["verdict"] == "reachable":
        return head + f"reachable (median {_pct(reach['median'])}, p90 {_pct(reach['p90'])})"
    return head + ("no such laws (unreachable)" if reach["verdict"] == "unreachable" else "undecided")


def orderings_text(summary: dict) -> str:
    """Per batch kind: pairs inverted, those whose error floor exceeds the limit, the largest."""
    parts = []
    for operation, s in summary.items():
        text = f"{operation} {s['inverted']} of {s['pairs']}"
        if s["largest"]:
            w = s["largest"]
            text += (f" ({s['over_limit']} with a floor above {s['limit']:.0%}; largest "
                     f"{w['error_floor']:.1%}: {w['model']} TP {w['tp']}, {w['tokens']} tokens, "
                     f"shape {tuple(w['light'])} measured slower than {tuple(w['heavy'])})")
        parts.append(text)
    return ", ".join(parts)


def _verdict_lines(report: Report) -> list[str]:
    """The acceptance lines: each GPU's GeMM verdict under real mode's law, then each GPU's
    whole-batch verdict."""
    return [gpu_verdict(r) for r in report.gpus] + [batch_verdict(v) for v in report.batch_verdicts]


def _stat_cells(row: dict) -> list[str]:
    return [f"{_pct(row[f'{s}_median'])}/{_pct(row[f'{s}_p90'])}" for s in SCHEMES]


def console_lines(report: Report, files: list[str]) -> list[str]:
    """The table printed by ``llmq validate``: groups, per GPU x TP, per-GPU verdicts."""
    head = f"{'GPU':<8}{'model':<15}{'TP':>3} {'operation':<15}{'n':>6}  " + "".join(
        f"{LABEL[s] + ' med/p90':>24}" for s in SCHEMES)
    out = ["predicted vs measured: |predicted/measured - 1|, median/p90 per group", head, "-" * len(head)]
    for row in report.groups:
        out.append(f"{row['gpu']:<8}{row['model']:<15}{row['tp']:>3} {row['operation']:<15}{row['n']:>6}  "
                   + "".join(f"{c:>24}" for c in _stat_cells(row)))
    out += ["", "per GPU x TP (all models and GeMMs pooled):"]
    for row in report.summary:
        out.append(f"{row['gpu']:<8}TP {row['tp']:<3}{row['n']:>7}  "
                   + "".join(f"{c:>24}" for c in _stat_cells(row)))
    out += ["", "per GPU x token band (where the error lives):"]
    for row in report.bands:
        out.append(f"{row['gpu']:<8}{row['tokens']:<11}{row['n']:>7}  "
                   + "".join(f"{c:>24}" for c in _stat_cells(row))
                   + f"   tile model below measured: {row['tile_below']:.0%}")
    out += attention.console_lines(report)
    out += moe_report.console_lines(report)
    out += fp8_report.console_lines(report)
    out += ["", "not predicted (rows counted, with the reason):"]
    for reason, n, where in _not_predicted_by_reason(report):
        out.append(f"  {n} rows ({where}): {reason}")
    out += ["", "acceptance per GPU (held-out tokens: median <= 5%, p90 <= 12%; "
                "across models: median <= 10%):"]
    out += [f"  {line}" for line in (*_verdict_lines(report), *_other_law_lines(report))]
    if report.staircase:
        out += ["", f"A100 staircase, Llama-2-7B TP 1 (step heights of the tile model calibrated on the "
                    f"training token counts, |calibrated - measured| <= {STEP_TOLERANCE:.0%} points; real "
                    f"mode's default takes them from the measurements): {staircase_line(report)}"]
        out += [f"  {r['operation']:<15} after {r['after']:>4}: measured {_pct(r['measured']):>6}, "
                f"calibrated {_pct(r['calibrated']):>6}, shipped {_pct(r['shipped']):>6} "
                f"({'ok' if r['calibrated_within'] else 'MISS'})"
                for r in report.staircase if r["operation"] == "layer"]
    out += ["", "wrote " + ", ".join(files)]
    return out


def staircase_line(report: Report) -> str:
    """The staircase verdict in words: the layer's steps and the per-GeMM steps reproduced."""
    v = staircase_verdict(report.staircase)
    per = sum(c["within"] for c in v["per_gemm"].values()), sum(c["steps"] for c in v["per_gemm"].values())
    env = v["layer_against_envelope"]
    return (f"layer {v['layer']['within']}/{v['layer']['steps']} steps within "
            f"({'holds' if v['holds'] else 'MISSED'}); single GeMMs {per[0]}/{per[1]}; layer against "
            f"the measured monotone envelope {env['within']}/{env['steps']}")


def _not_predicted_by_reason(report: Report) -> list[tuple[str, int, str]]:
    by: dict[str, list[dict]] = {}
    for row in report.not_predicted:
        by.setdefault(row["reason"], []).append(row)
    out = []
    for reason, rows in by.items():
        profiles = sorted({r["profile"] for r in rows})
        gpus = sorted({r["gpu"] for r in rows})
        out.append((reason, sum(r["n"] for r in rows), f"{', '.join(profiles)} on {', '.join(gpus)}"))
    return out


def to_json(report: Report, files: list[str], elapsed_s: float | None = None) -> dict:
    """The strict-JSON document of a report (``null`` as ``null_means`` says)."""
    s = report.settings
    doc = {
        "schema": SCHEMA,
        "settings": {"every": s.every, "max_train": s.max_train, "seed": s.seed, "quick": s.quick,
                     "fit_memory_floor": s.floor, "fit_waves": s.waves, "fit_l2_traffic": s.l2,
                     "gpus": list(s.gpus) or "all", "models": list(s.models) or "all",
                     "gpu_file": s.gpu_file, "model_file": s.model_file,
                     "screen_implausible_rows": s.screen},
        "schemes": SCHEME_MEANING,
        "targets": TARGETS,
        "columns": COLUMNS,
        "pooled_rows": "gpus, summary (per GPU x TP) and bands (per GPU x token band) carry the same "
                       "<scheme>_n/_median/_p90 columns as groups, pooled over their rows; bands add "
                       "tile_below, the fraction of rows the calibrated tile model (the token-split fit at "
                       "every row) under-predicts",
        "null_means": NULL_MEANING,
        "gpus": report.gpus,
        "verdicts": _verdict_lines(report),
        "other_law_verdicts": _other_law_lines(report),
        "batch_verdicts": report.batch_verdicts,
        "batch_verdicts_columns": BATCH_VERDICT_COLUMNS,
        "measured_coverage": report.measured_coverage,
        "measured_coverage_columns": {
            "gpu, scheme": "GPU preset and measured scheme (measured_law: held-out token counts; "
                           "measured_law_models: leave one model out)",
            "n": "rows scored", "interpolated": "rows priced by a measured table of the same shape",
            "fallback": "rows priced by the tile model (no training series of the shape, or a token "
                        "count outside its range)"},
        "summary": report.summary,
        "bands": report.bands,
        "groups": report.groups,
        "not_predicted": report.not_predicted,
        "staircase": report.staircase,
        "staircase_verdict": staircase_verdict(report.staircase) if report.staircase else None,
        "staircase_columns": {
            "after, next": "token counts: the step is T(next) / T(after) - 1",
            "measured, <scheme>": "relative step height measured and predicted (shipped: the real-mode "
                                  "preset, for these GeMMs the measured law; calibrated: the tile model's "
                                  "held-out-token fit on every point, which the verdict scores; models: "
                                  "the fit without the model)",
            "<scheme>_within": f"|predicted - measured| <= {STEP_TOLERANCE} (absolute: percentage points)",
            "envelope": "relative step of the measured monotone envelope min_{m >= n} T(m) (the least time "
                        "measured for at least as many tokens; for the layer the sum of the GeMMs' "
                        "envelopes): the most a model running each GeMM on its fastest tile can show",
            "<scheme>_within_envelope": f"|predicted - envelope| <= {STEP_TOLERANCE}",
            "operation": "a GeMM of the layer, or 'layer': the sum of its four GeMMs (Eq. 4's linear time)"},
        "fits": report.fits,
        "batch_stack": report.batch_stack,
        "batch_stack_columns": BATCH_STACK_COLUMNS,
        "batch_orderings": report.batch_orderings,
        "batch_orderings_columns": ORDERING_COLUMNS,
        "not_predicted_columns": NOT_PREDICTED_COLUMNS,
        "screened": report.screened,
        "screened_columns": SCREENED_COLUMNS,
        **attention.json_part(report),
        **moe_report.json_part(report),
        **fp8_report.json_part(report),
        "files": files,
    }
    if elapsed_s is not None:
        doc["elapsed_s"] = elapsed_s
    return _clean(doc)


def _md_table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in r) + " |" for r in rows)]


def markdown(report: Report, files: list[str], elapsed_s: float | None = None) -> str:
    """The Markdown report: verdicts, per GPU x TP, groups, not predicted, staircase, dictionary."""
    s = report.settings
    terms = ", ".join(n for n, on in (("the memory floor", s.floor), ("waves", s.waves),
                                      ("the L2 traffic", s.l2)) if on) or "no term"
    lines = ["# llmq validate: predicted vs measured", "",
             f"Settings: hold out every k-th distinct token count, k = {s.every}; at most {s.max_train} "
             f"training rows per calibration; seed {s.seed}; calibrations fit {terms} with the tile "
             f"rates and c_0; {'quick subset' if s.quick else 'all rows'}"
             + (f"; {elapsed_s:.1f} s" if elapsed_s is not None else "") + ".", "",
             "Error: |predicted / measured - 1| per point; median and 90th percentile (numpy's linear "
             "interpolation). Schemes:", ""]
    lines += [f"- **{LABEL[k]}** (`{k}`): {v}" for k, v in SCHEME_MEANING.items()]
    lines += ["", "Paper mode prices a different layer (three d x d_x projections where GQA models fuse "
              "d + 2 d_kv rows, one d_ff x d FFN matrix where SwiGLU fuses 2 d_ff rows, no output "
              "projection): its error measures that layer mismatch, not the GPU model."]
    lines += ["", "## Acceptance per GPU", ""]
    lines += [f"- {line}" for line in (*_verdict_lines(report), *_other_law_lines(report))]
    lines += ["", "## Per GPU x TP (all models and GeMMs pooled), median / p90", ""]
    lines += _md_table(["GPU", "TP", "n", *(LABEL[x] for x in SCHEMES)],
                       [[r["gpu"], r["tp"], r["n"], *_stat_cells(r)] for r in report.summary])
    lines += ["", "## Per GPU x token band (where the error lives), median / p90", ""]
    lines += _md_table(["GPU", "tokens", "n", *(LABEL[x] for x in SCHEMES), "tile model below measured"],
                       [[r["gpu"], r["tokens"], r["n"], *_stat_cells(r), f"{r['tile_below']:.0%}"]
                        for r in report.bands])
    lines += ["", "\"tile model below measured\": the fraction of the band's points the calibrated tile "
              "model (the token-split fit at every point) under-predicts. Eq. 2 charges a GeMM its "
              "tiles at a compute rate; a GeMM over few tokens is bound by reading its weights from "
              "DRAM, which the roofline presets do not price (the calibrated presets have the memory "
              "floor), so a band where nearly every point is under-predicted is where that term is "
              "missing."]
    lines += ["", "## Per GPU x model x TP x operation, median / p90", ""]
    lines += _md_table(["GPU", "model", "TP", "operation", "n", *(LABEL[x] for x in SCHEMES), "note"],
                       [[r["gpu"], r["model"], r["tp"], r["operation"], r["n"], *_stat_cells(r), r["note"]]
                        for r in report.groups])
    if report.batch_stack:
        lines += ["", "## Whole batches: the stack law per GPU x model x TP, interior shapes held out", ""]
        lines += _md_table(["profile", "GPU", "model", "TP", "operation", "c (ms)", "a_compute",
                            "a_allreduce", "a_large", "rows / held out", "Eq. 7 median / p90",
                            "stack law median / p90"],
                           [[r["profile"], r["gpu"], r["model"], r["tp"], r["operation"],
                             f"{r['overhead_s'] * 1e3:.2f}", f"{r['a_compute']:.3f}",
                             f"{r['a_allreduce']:.3f}", f"{r['a_large']:.3f}",
                             f"{r['n']} / {r['n_held_out']}",
                             f"{_pct(r['before_median'])} / {_pct(r['before_p90'])}",
                             f"{_pct(r['after_median'])} / {_pct(r['after_p90'])}"]
                            for r in report.batch_stack])
        lines += ["", "T = c + a_compute C + a_allreduce R + a_large L, C being Eq. 7 without its "
                  "all-reduces, R their time under the GPU's all-reduce law (fitted on vidur's NCCL "
                  "profile) and L the bandwidth time of their bytes beyond 32 MiB per message "
                  "(theory.validation.stack_law.LARGE_MESSAGE_BYTES); c >= 0, a_compute and a_allreduce "
                  ">= 1, "
                  "a_large >= 0, fitted on the prompt and token batches of one GPU x model x TP "
                  "together (theory.validation.stack_law.fit_stack_law; the parameters shown: every shape). "
                  "The "
                  "held-out errors come from k folds, each interior shape predicted by the law fitted "
                  "without its fold (theory.validation.batches.batch_folds). "
                  "It is the 'held-out tokens' scheme "
                  "of the batch groups, not part of the shipped presets: it describes one serving "
                  "stack."]
        inverted = [r for r in report.batch_orderings if r["inverted"]]
        lines += ["", "### Equal-token pairs measured against Eq. 7's order", "",
                  "Two batches with the same tokens differ under Eq. 7 only in attention (and, with "
                  "the LM head, in vocab rows), so every stack law orders them as Eq. 7 does "
                  "(theory.validation.batch_orderings). Where the batch Eq. 7 "
                  "prices lower measured slower, any one law errs on one of the two rows by at least "
                  "the error floor. "
                  f"{len(inverted)} of {len(report.batch_orderings)} pairs are inverted; the ten with "
                  "the largest floor:", ""]
        lines += _md_table(["profile", "GPU", "model", "TP", "operation", "tokens", "light (Eq. 7 lower)",
                            "heavy", "measured light / heavy (ms)", "error floor"],
                           [[r["profile"], r["gpu"], r["model"], r["tp"], r["operation"], r["tokens"],
                             tuple(r["light"]), tuple(r["heavy"]),
                             f"{r['light_measured_s'] * 1e3:.1f} / {r['heavy_measured_s'] * 1e3:.1f}",
                             _pct(r["error_floor"])]
                            for r in sorted(inverted, key=lambda r: -r["error_floor"])[:10]])
    lines += attention.markdown_lines(report)
    lines += moe_report.markdown_lines(report)
    lines += fp8_report.markdown_lines(report)
    lines += ["", "## Not predicted", ""]
    lines += _md_table(["rows", "where", "reason"],
                       [[n, w, r] for r, n, w in _not_predicted_by_reason(report)])
    if report.screened:
        lines += ["", "Rows faster than the roofline lower bound of their shape (left out of every "
                  "score):", ""]
        lines += _md_table(["profile", "GPU", "model", "TP", "operation", "tokens", "context",
                            "measured (s)", "bound (s)"],
                           [[r["profile"], r["gpu"], r["model"], r["tp"], r["operation"], r["tokens"],
                             r["context"], f"{r['seconds']:.4g}", f"{r['bound_s']:.4g}"]
                            for r in report.screened])
    lines += ["", "## Staircase: relative step T(next)/T(after) - 1", ""]
    lines += _md_table(["GPU", "model", "TP", "operation", "after", "next", "measured", "envelope",
                        *STEP_SCHEMES],
                       [[r["gpu"], r["model"], r["tp"], r["operation"], r["after"], r["next"],
                         _pct(r["measured"]), _pct(r["envelope"]), *(_pct(r[k]) for k in STEP_SCHEMES)]
                        for r in report.staircase])
    if report.staircase:
        lines += ["", f"Step heights reproduced within {STEP_TOLERANCE:.0%} points by `calibrated` (the "
                      f"tile model; `shipped`, real mode's default, prices these GeMMs by the measured law "
                      f"and takes its steps from the measurements): {staircase_line(report)}."]
    lines += ["", "`calibrated`: the held-out-token fit evaluated on every point; `models`: the fit "
              "without the model; `layer`: the sum of the four GeMMs; `envelope`: the step of the "
              "measured monotone envelope (the least time measured for at least as many tokens), the "
              "most a model running each GeMM on its fastest tile can show. Where the measured step "
              "exceeds it, cuBLAS ran a kernel slower than one it runs for more tokens.", "",
              "## Data dictionary (validate.csv)", ""]
    lines += _md_table(["column", "meaning"], [[k, v] for k, v in COLUMNS.items()])
    lines += ["", NULL_MEANING + ".", "", "Files: " + ", ".join(files), ""]
    return "\n".join(lines)


def _plot_groups(report: Report) -> dict[tuple[str, str], int]:
    """GPU x model -> the TP of its figure (TP 1 when measured, else the smallest)."""
    out: dict[tuple[str, str], int] = {}
    for g, m, tp, _ in report.series:
        out[(g, m)] = min(tp, out.get((g, m), tp))
    return out


def plot(report: Report, gpu: str, model: str, tp: int, path: Path) -> Path:
    """Measured and predicted time against tokens for the four GeMMs of one layer (up to 1,024
    tokens, where the steps are), with the measured step positions (jumps > 10%) marked."""
    return _figure(report, gpu, model, tp, path).run()


def _figure(report: Report, gpu: str, model: str, tp: int, path: Path) -> Figure:
    """The :class:`Figure` of GPU x model x TP, with the series it draws."""
    series = {k: v for k, v in report.series.items() if k[:3] == (gpu, model, tp)}
    return Figure(series, gpu, model, tp, Path(path))


@dataclass(frozen=True, eq=False)
class Figure:
    """One staircase figure (:func:`plot`) with the series it draws: a job of
    :mod:`theory.validation.fan_out`, drawn in whichever process runs it."""

    series: dict
    gpu: str
    model: str
    tp: int
    path: Path
    cost: float = 1.0

    def run(self) -> Path:
        """Draw and save the figure (matplotlib's Agg backend); its path."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from theory.profiles import LLMSERVINGSIM_GEMMS, VIDUR_GEMMS
        from theory.validation.staircase import step_positions

        gpu, model, tp, path = self.gpu, self.model, self.tp, self.path
        measured_as = {LLMSERVINGSIM_GEMMS.get(o, o): o for _, _, _, o in self.series}
        fig, axes = plt.subplots(2, 2, figsize=(12, 8))
        for ax, op in zip(axes.flat, VIDUR_GEMMS, strict=True):
            op = measured_as.get(op, op)  # vLLM's layer name where the profile uses it
            ser = self.series.get((gpu, model, tp, op))
            ax.set_title(f"{gpu.upper()} / {model} / TP {tp} / {op}", fontsize=9)
            if ser is None:
                ax.text(0.5, 0.5, "no rows", ha="center", transform=ax.transAxes)
                continue
            x = ser["token_count"]
            keep = x <= 1024
            ax.plot(x[keep], ser["measured"][keep] * 1e3, "k.", ms=3, label="measured")
            for k, style in (("shipped", "C0-"), ("calibrated", "C1-"), ("paper", "C2:")):
                y = ser[k][keep]
                if np.isfinite(y).any():
                    label = "calibrated (train tokens)" if k == "calibrated" else k
                    ax.plot(x[keep], y * 1e3, style, lw=1, label=label)
            for at in step_positions(x[keep], ser["measured"][keep]):
                ax.axvline(at, color="0.6", lw=0.6, ls="--")
            ax.set_xlabel("tokens (GeMM columns)")
            ax.set_ylabel("time [ms]")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"{gpu.upper()} {model} TP {tp}: measured vs predicted; "
                     f"dashed: measured steps > 10%")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path


def write_outputs(report: Report, out: Path, elapsed_s: float | None = None, workers: int = 1) -> list[str]:
    """Write ``validate.md``, ``.csv``, ``.json`` and the figures under ``out`` (the figures drawn on
    ``workers`` processes, :mod:`theory.validation.fan_out`); their paths."""
    out = Path(out)
    jobs = [_figure(report, g, m, tp, out / f"validate_{g}_{m}.png")
            for (g, m), tp in sorted(_plot_groups(report).items())]
    pending = fan_out.start(jobs, workers)  # drawn there while the tables are written here
    figures = [str(f.path) for f in jobs]
    try:
        files = [str(out / f"validate.{ext}") for ext in ("md", "csv", "json")] + figures
        cols = {k: [("" if r.get(k) is None else r.get(k)) for r in report.groups] for k in COLUMNS}
        atomic_write_csv(out / "validate.csv", cols)
        atomic_write_csv(out / "validate_not_predicted.csv",
                         {k: [r[k] for r in report.not_predicted] for k in NOT_PREDICTED_COLUMNS},
                         dictionary=NOT_PREDICTED_COLUMNS)
        files += [str(out / "validate_not_predicted.csv"), str(out / "validate_not_predicted.columns.json")]
        files += attention.write_csv(report, out)
        atomic_write_json(out / "validate.json", to_json(report, files, elapsed_s))
        atomic_write_text(out / "validate.md", markdown(report, files, elapsed_s))
        pending.results()
    finally:
        pending.close()
    return files
