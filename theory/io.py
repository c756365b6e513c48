"""File input and output: one CSV table reader, and atomic output (write to a temporary file in the
target directory, then rename).

An interrupted run never leaves a half-written results file behind, so a resumed sweep can trust
every file it finds.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import tempfile
from pathlib import Path

from theory.errors import ConfigFileError


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (creating its directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make results private to their writer
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, UTF-8 (creating its directory)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_csv(path: str | Path, columns: dict) -> Path:
    """Write equal-length ``columns`` (name -> sequence) as a CSV file, atomically."""
    names = list(columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(zip(*(columns[n] for n in names), strict=True))
    return atomic_write_text(path, buf.getvalue())


def read_csv_table(path: str | Path, expected: str) -> tuple[list[str], list[dict]]:
    """The header and rows (dicts, keys stripped) of a CSV file, ``.gz`` or plain, UTF-8 with or
    without a byte-order mark; errors name the file, and ``expected`` says what the header should
    hold when the file is empty."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigFileError(f"{path}: is a directory, expected a CSV file") from None
    try:
        if path.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        reader = csv.DictReader(io.StringIO(raw.decode("utf-8-sig"), newline=""))
        rows = list(reader)
        header = [(h or "").strip() for h in (reader.fieldnames or [])]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigFileError(f"{path}: malformed CSV: {exc}") from None
    if not header:
        raise ConfigFileError(f"{path}: empty file; expected a header with {expected}")
    if not rows:
        raise ConfigFileError(f"{path}: no data rows")
    return header, [{(k or "").strip(): v for k, v in row.items()} for row in rows]
