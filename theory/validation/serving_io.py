"""Strict readers of a serving run's CSV and TSV files: every column named, every cell checked.

Errors name the file, the row and the column (:class:`theory.errors.FieldError`); the arrays they
return are read-only. Used by :mod:`theory.validation.serving_runs` and
:mod:`theory.validation.serving_published`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError
from theory.io import read_csv_table


def check_increasing(path: Path, c: dict, col: str, strict: bool = False) -> None:
    """Raise a FieldError naming the first row where column ``col`` of ``c`` decreases (or, with
    ``strict``, does not increase)."""
    x = c[col]
    bad = np.flatnonzero(x[1:] <= x[:-1]) if strict else np.flatnonzero(x[1:] < x[:-1])
    if bad.size:
        k = int(bad[0]) + 1
        raise FieldError(f"{path}: row {k + 2}, column {col!r}", x[k].item(),
                         f"{'>' if strict else '>='} {x[k - 1].item()!r} (the previous row's: rows in "
                         "time order)")


def read_columns(path: Path, spec: dict, delimiter: str = ",") -> dict[str, np.ndarray]:
    """The columns of ``spec`` of a CSV (TSV) file as read-only arrays, every cell checked."""
    if delimiter == ",":
        header, rows = read_csv_table(path, f"the columns {', '.join(spec)}")
    else:
        header, rows = read_tsv(path)
    where = f"{path}: header (row 1)"
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise FieldError(f"{where}, column {dup[0]!r}", header, "each column once")
    missing = [c for c in spec if c not in header]
    if missing:
        raise FieldError(f"{where}, column {missing[0]!r}", header,
                         f"the column(s) {', '.join(missing)} (missing)")
    unknown = [h for h in header if h not in spec]
    if unknown:
        raise FieldError(f"{where}, column {unknown[0]!r}", header, f"only the columns {', '.join(spec)}")
    out = {}
    for col, (kind, low) in spec.items():
        values = [read_cell(f"{path}: row {k + 2}, column {col!r}", (row.get(col) or "").strip(), kind, low)
                  for k, row in enumerate(rows)]
        out[col] = frozen(np.array(values, dtype=np.int64 if kind.startswith("int") else float))
    return out


def read_cell(where: str, text: str, kind: str, low: float) -> float:
    """One cell as a number of ``kind`` (``int``, ``float``; ``?`` suffix: empty allowed) at least
    ``low``; a FieldError naming ``where`` otherwise."""
    if not text and kind.endswith("?"):
        return -1 if kind == "int?" else math.nan
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    integer = kind.startswith("int")
    if not math.isfinite(value) or value < low or (integer and not value.is_integer()):
        raise FieldError(where, text, f"{'an integer' if integer else 'a finite number'} >= {low}")
    return int(value) if integer else value


def read_tsv(path: Path) -> tuple[list[str], list[dict]]:
    """The header and the rows (dicts by column) of a tab-separated file."""
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    if not lines:
        raise ConfigFileError(f"{path}: empty file")
    header = [h.strip() for h in lines[0].split("\t")]
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:]]


def frozen(a: np.ndarray) -> np.ndarray:
    """``a``, made read-only."""
    a.flags.writeable = False
    return a
