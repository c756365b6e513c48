"""The FP8 part of ``llmq validate``: the H200's measured bf16 and FP8 GeMMs of each table of
:data:`theory.validation.fp8_gemm.FP8_TABLES` scored (:func:`theory.validation.fp8_gemm.score_fp8`)
as rows of the report, and their console lines, JSON and Markdown. Nothing is fitted here."""

from __future__ import annotations

from pathlib import Path

from theory.validation.fp8_gemm import (
    DYNAMIC_QUANT,
    FP8_TABLE,
    FP8_TABLES,
    GPU,
    QUANTITIES,
    Fp8Score,
    residual_by_tokens,
    score_fp8,
)
from theory.validation.fp8_quantize import gemm_less_quantize, score_quantize
from theory.validation.results import Report

PREDICTIONS = {
    "fp8": "the FP8 GeMM time: Eq. 2 on the FP8 tile rates, one-byte weights and inputs (theory.precision)",
    "bf16": "the bf16 GeMM time of the same shapes on the same tile model",
    "ratio": "the FP8/bf16 time ratio per shape and token count (predicted over measured)",
    "fp8+quant": "fp8 plus the bytes of the input's dynamic quantization (theory.precision."
    "activation_quant_s), for a table whose FP8 calls quantize their input",
    "ratio+quant": "ratio with fp8+quant as the FP8 time",
    "quant": "activation_quant_s against AIConfigurator's timing of the quantization alone "
    "(theory.validation.fp8_quantize)",
    "fp8+measured quant": "fp8 plus the measured quantization: a decomposition, not a model; what it "
    "leaves is the FP8 GeMM itself",
    "ratio+measured quant": "ratio with fp8+measured quant as the FP8 time",
}
RESIDUAL_KEYS = ("fp8", "fp8+quant", "fp8+measured quant")  # the predictions split by token count
COLUMNS = {
    "table": "the measured file",
    "gpu": "the preset that predicts (real mode, its tile model; the measured bf16 GeMM law off)",
    "quantity": "a key of PREDICTIONS",
    "n, median, p90": "points and |predicted/measured - 1| statistics; nothing is fitted on them",
}


def fp8_rows(score: Fp8Score, table: Path = FP8_TABLE, extra: tuple = ()) -> list[dict]:
    """One report row per quantity of ``score`` (the points of ``table``), then one per
    ``(name, score, quantity)`` of ``extra`` (the same points scored otherwise)."""
    out = []
    for name, sc, q in (*((q, score, q) for q in QUANTITIES), *extra):
        n, median, p90 = sc.stats(q)
        out.append(
            {"table": table.name, "gpu": sc.gpu, "quantity": name, "n": n, "median": median, "p90": p90}
        )
    return out


def _table_rows(table: Path) -> tuple[list[dict], dict]:
    """The report rows of ``table`` and, for a table of :data:`DYNAMIC_QUANT`, its rows with the
    quantization (the term, and the measured one of :mod:`theory.validation.fp8_quantize`) and its
    residuals by token count (:func:`residual_by_tokens`)."""
    plain = score_fp8(GPU, table)
    if table.name not in DYNAMIC_QUANT:
        return fp8_rows(plain, table), {}
    quant, measured = score_fp8(GPU, table, quant=True), gemm_less_quantize(GPU)
    extra = (
        ("fp8+quant", quant, "fp8"),
        ("ratio+quant", quant, "ratio"),
        ("quant", score_quantize(GPU), "quant"),
        ("fp8+measured quant", measured, "fp8"),
        ("ratio+measured quant", measured, "ratio"),
    )
    scores = dict(zip(RESIDUAL_KEYS, (plain, quant, measured), strict=True))
    residuals = {"table": table.name} | {k: residual_by_tokens(sc) for k, sc in scores.items()}
    return fp8_rows(plain, table, extra), residuals


def score_into(report: Report) -> None:
    """Score the FP8 GeMMs into ``report.fp8`` unless the settings' GPU filter leaves the H200 out,
    or a user file replaces the presets."""
    s = report.settings
    if (s.gpus and GPU not in s.gpus) or s.gpu_file or s.model_file:
        return
    parts = [_table_rows(t) for t in FP8_TABLES]
    report.fp8 = [r for rows, _ in parts for r in rows]
    report.fp8_residuals = [res for _, res in parts if res]


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def console_lines(report: Report) -> list[str]:
    """Lines for the console table (empty when the FP8 GeMMs were not scored)."""
    if not report.fp8:
        return []
    out = ["", "FP8 GeMMs (median/p90 of |predicted/measured - 1|, nothing fitted):"]
    out += [
        f"{r['table']:<38}{r['gpu']:<6}{r['quantity']:<21}{r['n']:>4}  {_pct(r['median'])}/{_pct(r['p90'])}"
        for r in report.fp8
    ]
    return out


def json_part(report: Report) -> dict:
    """The report's ``fp8`` keys for the JSON document."""
    return {
        "fp8": report.fp8,
        "fp8_residuals": report.fp8_residuals,
        "fp8_predictions": PREDICTIONS,
        "fp8_columns": COLUMNS,
    }


def _residual_line(prediction: str, r: dict) -> str:
    """One Markdown row of :func:`theory.validation.fp8_gemm.residual_by_tokens` (microseconds)."""
    us = [f"{r[k] * 1e6:.1f}" for k in ("measured_s", "predicted_s", "residual_s")]
    return f"| {prediction} | {r['tokens']} | {r['n']} | {' | '.join(us)} | {r['signed']:+.1%} |"


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
    for res in report.fp8_residuals:
        out += [
            "",
            f"What the FP8 prediction of `{res['table']}` leaves, by token count (medians; "
            "residual = measured - predicted):",
            "",
            "| prediction | tokens | n | measured us | predicted us | residual us | pred/meas - 1 |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [_residual_line(q, r) for q in RESIDUAL_KEYS for r in res[q]]
    return out
