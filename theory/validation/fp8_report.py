"""The FP8 part of ``llmq validate``: the H200's measured bf16 and FP8 GeMMs of each table of
:data:`theory.validation.fp8_gemm.FP8_TABLES` scored (:func:`theory.validation.fp8_gemm.score_fp8`)
as rows of the report, and their console lines, JSON and Markdown. Nothing is fitted here."""

from __future__ import annotations

from pathlib import Path

from theory.validation.fp8_gemm import FP8_TABLE, FP8_TABLES, GPU, QUANTITIES, Fp8Score, score_fp8
from theory.validation.results import Report

PREDICTIONS = {
    "fp8": "the FP8 GeMM time: Eq. 2 on the FP8 tile rates, one-byte weights and inputs (theory.precision)",
    "bf16": "the bf16 GeMM time of the same shapes on the same tile model",
    "ratio": "the FP8/bf16 time ratio per shape and token count (predicted over measured)",
}
COLUMNS = {
    "table": "the measured file",
    "gpu": "the preset that predicts (real mode, its tile model; the measured bf16 GeMM law off)",
    "quantity": "fp8, bf16 or ratio (PREDICTIONS)",
    "n, median, p90": "points and |predicted/measured - 1| statistics; nothing is fitted on them",
}


def fp8_rows(score: Fp8Score, table: Path = FP8_TABLE) -> list[dict]:
    """One report row per quantity of ``score`` (the points of ``table``)."""
    out = []
    for q in QUANTITIES:
        n, median, p90 = score.stats(q)
        out.append(
            {"table": table.name, "gpu": score.gpu, "quantity": q, "n": n, "median": median, "p90": p90}
        )
    return out


def score_into(report: Report) -> None:
    """Score the FP8 GeMMs into ``report.fp8`` unless the settings' GPU filter leaves the H200 out,
    or a user file replaces the presets."""
    s = report.settings
    if (s.gpus and GPU not in s.gpus) or s.gpu_file or s.model_file:
        return
    report.fp8 = [r for t in FP8_TABLES for r in fp8_rows(score_fp8(GPU, t), t)]


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def console_lines(report: Report) -> list[str]:
    """Lines for the console table (empty when the FP8 GeMMs were not scored)."""
    if not report.fp8:
        return []
    out = ["", "FP8 GeMMs (median/p90 of |predicted/measured - 1|, nothing fitted):"]
    out += [
        f"{r['table']:<38}{r['gpu']:<6}{r['quantity']:<7}{r['n']:>4}  {_pct(r['median'])}/{_pct(r['p90'])}"
        for r in report.fp8
    ]
    return out


def json_part(report: Report) -> dict:
    """The report's ``fp8`` keys for the JSON document."""
    return {"fp8": report.fp8, "fp8_predictions": PREDICTIONS, "fp8_columns": COLUMNS}


def markdown_lines(report: Report) -> list[str]:
    """A Markdown section (empty when the FP8 GeMMs were not scored)."""
    if not report.fp8:
        return []
    out = [
        "",
        "## FP8 GeMMs on the H200",
        "",
        "Each table of theory/data/profiles/fp8, every point predicted with nothing fitted on it "
        "(theory.validation.fp8_gemm). Predictions:",
        "",
    ]
    out += [f"- `{k}`: {v}" for k, v in PREDICTIONS.items()]
    out += ["", "| table | GPU | quantity | n | median | p90 |", "|---|---|---|---|---|---|"]
    out += [
        f"| `{r['table']}` | {r['gpu']} | {r['quantity']} | {r['n']} "
        f"| {_pct(r['median'])} | {_pct(r['p90'])} |"
        for r in report.fp8
    ]
    return out
