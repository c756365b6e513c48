"""Measured timings for calibration: GeMM timings (Eq. 2) and batch timings (Eq. 7), read from CSV.

Two kinds of CSV file, told apart by their columns (extra columns are ignored):

GeMM timings
    ``d_row, d_col, d_red, seconds`` and optionally ``count``: the time of ``count`` (default 1)
    GeMMs ``W Z`` with ``W`` of shape ``d_row x d_red`` and ``Z`` of shape ``d_red x d_col``,
    the operands of Eq. 2.
Batch timings
    ``seconds`` and either ``prefill_tokens`` (the chunk size ``c``) or ``tokens`` (the batch
    token count ``tau = c + decode_count``); optionally ``prefill_start`` (the chunk's first
    position ``i``, default 1), ``decode_count`` (default 0) and, when a row has decodes, their
    positions ``decode_positions`` (space-separated) or their sum ``decode_context_sum``. A row is
    one batch ``{PI(R, i, c)} + {DI(R_j, i_j)}`` of Section 3.1 (at most one prefill chunk).

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1 (batches), Eq. 2 and Eq. 7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError
from theory.io import read_csv_table

EXAMPLES = {
    # name: packaged file (theory/data/calibration/README.md gives source, commit and license)
    "vidur-a100-llama2-7b": "data/calibration/vidur_a100_llama2_7b_linear.csv",
}
GEMM_COLUMNS = ("d_row", "d_col", "d_red", "seconds")
BATCH_COLUMNS = ("prefill_tokens|tokens", "decode_count", "decode_positions|decode_context_sum",
                 "prefill_start", "seconds")


@dataclass(frozen=True, eq=False)
class GemmTimings:
    """Measured GeMM times: ``count`` GeMMs of shape ``(d_row x d_red) . (d_red x d_col)`` took
    ``seconds`` (Eq. 2's operands), one entry per row of the source."""

    d_row: np.ndarray
    d_col: np.ndarray
    d_red: np.ndarray
    count: np.ndarray
    seconds: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return int(self.seconds.size)


@dataclass(frozen=True, eq=False)
class BatchTimings:
    """Measured batch times (Eq. 7): one prefill chunk ``PI(R, prefill_start, prefill_tokens)``
    (none when ``prefill_tokens`` is 0) and ``decode_count`` decodes per row.

    ``decode_positions`` holds each row's decode positions when they were given; otherwise it is
    ``None`` and only ``decode_context_sum`` (their sum) is known.
    """

    prefill_start: np.ndarray
    prefill_tokens: np.ndarray
    decode_count: np.ndarray
    decode_context_sum: np.ndarray
    decode_positions: tuple[np.ndarray, ...] | None
    seconds: np.ndarray
    source: str = ""

    def __len__(self) -> int:
        return int(self.seconds.size)

    @property
    def tau(self) -> np.ndarray:
        """Token count per batch, ``tau = c + b^D`` (Section 3.2.1)."""
        return self.prefill_tokens + self.decode_count


def _rows(path: str | Path) -> tuple[list[str], list[dict]]:
    return read_csv_table(path, f"GeMM columns {','.join(GEMM_COLUMNS)} or batch columns "
                                f"{','.join(BATCH_COLUMNS)}")


def _missing(path, header: list[str], needed: tuple[str, ...], kind: str) -> None:
    absent = [n for n in needed if not any(alt in header for alt in n.split("|"))]
    if absent:
        raise ConfigFileError(f"{path}: {kind} timings need the column(s) {', '.join(absent)} "
                              f"(found: {', '.join(header)})")


def _number(path, row: dict, k: int, name: str, *, integer: bool, minimum: float) -> float:
    raw = row.get(name)
    where = f"{path}: column {name!r}, row {k + 2}"
    expected = (f"an integer >= {minimum:g}" if integer else
                "a finite number > 0" if minimum == 0 else f"a finite number >= {minimum:g}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise FieldError(where, raw, expected) from None
    bad_int = integer and not value.is_integer()
    too_small = value <= 0 if (minimum == 0 and not integer) else value < minimum
    if not math.isfinite(value) or bad_int or too_small:
        raise FieldError(where, raw, expected)
    return value


def _column(path, rows, name, *, integer=True, minimum=1, default=None) -> np.ndarray:
    if default is not None and name not in rows[0]:
        return np.full(len(rows), default, dtype=np.int64)
    values = [_number(path, row, k, name, integer=integer, minimum=minimum)
              for k, row in enumerate(rows)]
    return np.asarray(values, dtype=np.int64 if integer else float)


def _seconds(path, rows) -> np.ndarray:
    return _column(path, rows, "seconds", integer=False, minimum=0)


def _gemm(path, rows) -> GemmTimings:
    dims = {name: _column(path, rows, name) for name in ("d_row", "d_col", "d_red")}
    count = _column(path, rows, "count", default=1)
    return GemmTimings(count=count, seconds=_seconds(path, rows), source=str(path), **dims)


def _positions(path, rows) -> tuple[np.ndarray, ...]:
    out = []
    for k, row in enumerate(rows):
        raw = (row.get("decode_positions") or "").split()
        try:
            pos = np.array([int(p) for p in raw], dtype=np.int64)
        except ValueError:
            raise FieldError(f"{path}: column 'decode_positions', row {k + 2}",
                             row.get("decode_positions"),
                             "space-separated integer positions >= 1") from None
        if pos.size and pos.min() < 1:
            raise FieldError(f"{path}: column 'decode_positions', row {k + 2}",
                             row.get("decode_positions"), "space-separated integer positions >= 1")
        out.append(pos)
    return tuple(out)


def _decodes(path, rows, header) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...] | None]:
    """Decode counts, context sums and (if given) positions, checked against each other."""
    positions = _positions(path, rows) if "decode_positions" in header else None
    if "decode_count" in header:
        count = _column(path, rows, "decode_count", minimum=0)
    else:
        count = np.array([p.size for p in positions] if positions else [0] * len(rows), dtype=np.int64)
    if positions is not None:
        given = np.array([p.size for p in positions])
        if np.any(given != count):
            k = int(np.argmax(given != count))
            raise FieldError(f"{path}: column 'decode_positions', row {k + 2}", rows[k]["decode_positions"],
                             f"decode_count = {count[k]} positions")
        ctx = np.array([int(p.sum()) for p in positions], dtype=np.int64)
    elif "decode_context_sum" in header:
        ctx = _column(path, rows, "decode_context_sum", minimum=0)
        if np.any(ctx < count):
            k = int(np.argmax(ctx < count))
            raise FieldError(f"{path}: column 'decode_context_sum', row {k + 2}", int(ctx[k]),
                             f"at least decode_count = {count[k]} (every position is >= 1)")
    elif np.any(count > 0):
        raise ConfigFileError(f"{path}: rows with decode_count > 0 need the column decode_positions "
                              f"or decode_context_sum")
    else:
        ctx = np.zeros(len(rows), dtype=np.int64)
    return count, ctx, positions


def _batch(path, rows, header) -> BatchTimings:
    if "prefill_tokens" in header and "tokens" in header:
        raise ConfigFileError(f"{path}: give either 'prefill_tokens' (chunk size) or 'tokens' "
                              f"(batch token count), not both")
    count, ctx, positions = _decodes(path, rows, header)
    if "prefill_tokens" in header:
        prefill = _column(path, rows, "prefill_tokens", minimum=0)
    else:
        tokens = _column(path, rows, "tokens", minimum=1)
        if np.any(tokens < count):
            k = int(np.argmax(tokens < count))
            raise FieldError(f"{path}: column 'tokens', row {k + 2}", int(tokens[k]),
                             f"at least decode_count = {count[k]}")
        prefill = tokens - count
    if np.any(prefill + count == 0):
        k = int(np.argmax(prefill + count == 0))
        raise FieldError(f"{path}: row {k + 2}", "0 tokens", "a batch with at least one token")
    start = _column(path, rows, "prefill_start", default=1)
    return BatchTimings(prefill_start=start, prefill_tokens=prefill, decode_count=count,
                        decode_context_sum=ctx, decode_positions=positions,
                        seconds=_seconds(path, rows), source=str(path))


def timings_path(name: str | Path) -> Path:
    """The path of a packaged example (a key of ``EXAMPLES``), or ``name`` itself as a path."""
    if str(name) in EXAMPLES:
        return Path(str(resources.files("theory").joinpath(EXAMPLES[str(name)])))
    return Path(name)


def read_timings(path: str | Path) -> GemmTimings | BatchTimings:
    """Read a timings CSV (or a packaged example by name), telling GeMM from batch timings by its
    columns (module docstring).

    Raises
    ------
    ConfigFileError
        A missing, empty or malformed file, or missing columns (the message lists the expected ones).
    FieldError
        A cell that is not a number of the expected kind (the field names column and row).
    """
    path = timings_path(path)
    header, rows = _rows(path)
    if any(name in header for name in GEMM_COLUMNS[:3]):
        _missing(path, header, GEMM_COLUMNS, "GeMM")
        return _gemm(path, rows)
    if "prefill_tokens" in header or "tokens" in header:
        _missing(path, header, ("seconds",), "batch")
        return _batch(path, rows, header)
    raise ConfigFileError(f"{path}: expected GeMM columns {','.join(GEMM_COLUMNS)} or batch columns "
                          f"{','.join(BATCH_COLUMNS)} (found: {', '.join(header)})")


__all__ = ["EXAMPLES", "BatchTimings", "GemmTimings", "read_timings", "timings_path"]
