"""The rows of :mod:`theory.profiles`' schema as the profile converters write them: the column order
(:data:`COLUMNS`), one row of merged repeated measurements (:func:`profile_row`), a source CSV read
with exact duplicate rows dropped (:func:`read_source_csv`) and the writer (:func:`write_profile`).

:mod:`theory.validation.profiles_convert` and :mod:`theory.validation.profiles_llmservingsim` convert
the sources into these rows; ``theory/data/profiles/README.md`` records the transformation.
"""

from __future__ import annotations

import csv
import gzip
import io
import statistics
from pathlib import Path

from theory.errors import ConfigFileError
from theory.profiles import INT_COLUMNS

COLUMNS = ("source", "gpu", "setup", "model", "tp", "operation", *INT_COLUMNS, "seconds")


def profile_row(source: str, gpu: str, setup: str, model: str, tp: int, op: str, ms: list[float],
                **ints: int) -> dict:
    """One schema row: the median of the repeated measurements ``ms`` (milliseconds) in seconds, their
    count in ``src_rows``, and the integer columns ``ints``; the columns not given are empty."""
    row = {c: "" for c in COLUMNS}
    row.update(source=source, gpu=gpu, setup=setup, model=model, tp=tp, operation=op,
               src_rows=len(ms), seconds=seconds_text(statistics.median(ms)))
    row.update(ints)
    return row



def seconds_text(ms: float) -> str:
    """Milliseconds as seconds, 8 significant digits (the sources give at most 7, plus a median)."""
    return f"{ms / 1e3:.8g}"



def read_source_csv(path: str | Path) -> list[dict]:
    """The rows of a source CSV, exact duplicate rows dropped (the first copy kept)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    seen, unique = set(), []
    for r in rows:
        key = tuple(r.items())
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return unique



def write_profile(rows: list[dict], path: str | Path) -> None:
    """Write schema rows as CSV (gzip-compressed, with a fixed timestamp, if ``path`` ends in .gz)."""
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = buf.getvalue().encode("utf-8")
    path = Path(path)
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=9, mtime=0)
    path.write_bytes(data)

