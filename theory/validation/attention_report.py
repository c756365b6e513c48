"""The self-attention part of ``llmq validate``'s outputs: console lines, Markdown, CSV and JSON.

Formats :attr:`theory.validation.results.Report.attention`
(:func:`theory.validation.attention.score_attention`);
nothing is computed here but formatting.
"""

from __future__ import annotations

from pathlib import Path

from theory.io import atomic_write_csv
from theory.validation.attention import COLUMNS, KINDS, SCHEMES
from theory.validation.results import Report

CSV_NAME = "validate_attention.csv"
NOTE = ("One layer's measured self-attention (LLMServingSim's profiler times a one-layer model) against "
        "T^{P,SA}(i, c) / N + decodes x T^{D,SA}(i) (Eq. 6 per layer, Eq. 5) + attention_call_s, with i - 1 "
        "the tokens already in the request's KV cache (theory.validation.attention). Held out: every 4th "
        "batch shape; attention_call_s fitted on the other shapes of the single-kind batches; before: the "
        "shipped preset without it, after: with the fitted value; mixed: also with mixed_decode_eta (a "
        "decode beside a prefill chunk priced at eta x Eq. 5 at the query heads' width) fitted on the other "
        "shapes of the mixed batches.")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


HELD_OUT = ("before", "after", "mixed")


def _cells(row: dict) -> list[str]:
    return ["-" if row[f"{s}_ratio_median"] is None else
            f"{_pct(row[f'{s}_median'])}/{_pct(row[f'{s}_p90'])} (x{row[f'{s}_ratio_median']:.2f})"
            for s in SCHEMES]


def _held_out(row: dict) -> list[str]:
    return [f"{_pct(row[f'{s}_median'])}/{_pct(row[f'{s}_p90'])}" for s in HELD_OUT]


def _call(row: dict) -> str:
    return "-" if row["call_s_fit"] is None else f"{row['call_s_fit'] * 1e6:.2f} us"


def _eta(row: dict) -> str:
    return "-" if row["eta_fit"] is None else f"{row['eta_fit']:.3f}"


def console_lines(report: Report) -> list[str]:
    """Lines for the console table (empty when no attention row was scored)."""
    if not report.attention:
        return []
    out = ["", "self-attention of one layer, Eq. 5-6 (median/p90 of |predicted/measured - 1|, "
               "(x median predicted/measured)):"]
    out += [f"{r['gpu']:<8}{r['model']:<14}TP {r['tp']:<3}{r['kind']:<8}{r['n']:>6}  "
            + "".join(f"{s + ' ' + c:>36}" for s, c in zip(SCHEMES, _cells(r), strict=True))
            + f"  held out {r['n_held_out']}: " + " -> ".join(_held_out(r))
            + f" (call {_call(r)}, eta {_eta(r)})"
            for r in report.attention]
    return out


def markdown_lines(report: Report) -> list[str]:
    """The Markdown section (empty when no attention row was scored)."""
    if not report.attention:
        return []
    header = ["GPU", "model", "TP", "kind", "n", *(f"{s} median / p90 (x ratio)" for s in SCHEMES),
              "held out", *(f"held out {s} median / p90" for s in HELD_OUT), "attention_call_s fitted",
              "mixed_decode_eta fitted"]
    lines = ["", "## Self-attention (Eq. 5-6) against measured batches, median / p90", "", NOTE, "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in [r["gpu"], r["model"], r["tp"], r["kind"], r["n"],
                                                  *_cells(r), r["n_held_out"], *_held_out(r), _call(r),
                                                  _eta(r)])
              + " |" for r in report.attention]
    lines += ["", "Kinds: " + "; ".join(f"`{k}`: {v}" for k, v in KINDS.items()) + "; `all`: every batch. "
              "Schemes: " + "; ".join(f"`{k}`: {v}" for k, v in SCHEMES.items()) + ". x ratio: the median "
              f"of predicted / measured. Columns of `{CSV_NAME}`: " + "; ".join(f"`{k}`: {v}" for k, v in
                                                                             COLUMNS.items()) + "."]
    return lines


def json_part(report: Report) -> dict:
    """The JSON members: the rows, their column meanings and the note."""
    return {"attention": report.attention, "attention_columns": COLUMNS, "attention_note": NOTE}


def write_csv(report: Report, out: Path) -> list[str]:
    """Write ``validate_attention.csv`` and its data dictionary ``validate_attention.columns.json``
    under ``out`` when attention rows were scored; their paths."""
    if not report.attention:
        return []
    path = Path(out) / CSV_NAME
    cols = {k: [("" if r.get(k) is None else r[k]) for r in report.attention] for k in COLUMNS}
    atomic_write_csv(path, cols, dictionary=COLUMNS)
    return [str(path), str(path.with_name(CSV_NAME.removesuffix(".csv") + ".columns.json"))]
