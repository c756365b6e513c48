"""File input and output: one CSV table reader, one strict-JSON writer, and atomic output (write to
a temporary file in the target directory, then rename).

An interrupted run never leaves a half-written results file behind, so a resumed sweep can trust
every file it finds. Every file is written with mode 0644.

Strict JSON (RFC 8259 has no NaN or Infinity): :func:`json_text` writes a non-finite float as
``null`` (``NULL_MEANING`` says what that means), so every JSON file and every ``--json`` print
parses with a strict reader. A result cache, which must give back exactly what it was given,
writes ``{"nonfinite": "nan" | "inf" | "-inf"}`` instead (:func:`json_text` with ``exact=True``,
read back by :func:`json_load_exact`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError

NULL_MEANING = ("null: a number that is not finite or not defined -- not applicable (a raw-prompt "
                "series has no Theorem 2 line), not measured (no DTMC for a non-RAD series), or "
                "unbounded (an upper confidence limit that is open above)")


def _plain(obj, exact: bool):
    """``obj`` with numpy scalars and arrays, tuples and paths made plain JSON values, and every
    non-finite float replaced (by ``None``, or with ``exact`` by a tagged object)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v, exact) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_plain(v, exact) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isfinite(x):
            return x
        if not exact:
            return None
        return {"nonfinite": "nan" if math.isnan(x) else "inf" if x > 0 else "-inf"}
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)  # paths and other names


def json_text(obj, indent: int | None = 1, exact: bool = False, sort_keys: bool = False) -> str:
    """``obj`` as strict JSON text (no NaN, no Infinity), ending in a newline when indented.

    Non-finite floats become ``null`` (see ``NULL_MEANING``), or with ``exact`` the tagged object
    ``{"nonfinite": ...}`` that :func:`json_load_exact` turns back into the float.
    """
    text = json.dumps(_plain(obj, exact), indent=indent, allow_nan=False, sort_keys=sort_keys,
                      separators=None if indent is not None else (",", ":"))
    return text + "\n" if indent is not None else text


def _exact_hook(d: dict):
    if len(d) == 1 and d.get("nonfinite") in ("nan", "inf", "-inf"):
        return float(d["nonfinite"])
    return d


def json_load_exact(text: str):
    """Parse strict JSON written by :func:`json_text` with ``exact=True`` (tagged non-finite floats
    become floats again); bare NaN/Infinity are rejected like any malformed text."""
    def reject(name: str):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, object_hook=_exact_hook, parse_constant=reject)


def atomic_write_json(path: str | Path, obj, indent: int | None = 1) -> Path:
    """Write ``obj`` as strict JSON (:func:`json_text`) to ``path``, atomically."""
    return atomic_write_text(path, json_text(obj, indent))


def check_output_dir(path: str | Path, field: str = "--out") -> Path:
    """``path`` if results can be written there; else a :class:`theory.errors.FieldError` naming
    ``field``, raised before any computing: the path is a file, its parent does not exist or is a
    file, or the directory (or the parent it would be created in) is not writable."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FieldError(field, str(path), "a directory (this is an existing file)")
    if not path.exists():
        _check_parent(path, field, str(path))
    elif not os.access(path, os.W_OK | os.X_OK):
        raise FieldError(field, str(path), "a writable directory")
    return path


def claim_output_dir(out: str | Path, command: str, identity: dict, *, field: str = "--out",
                     write: bool = True, cached: bool = True, adds: dict | None = None) -> Path:
    """Make ``out`` the directory of one run of ``llmq <command>``, identified by ``identity`` (the
    fields its results depend on), or refuse with a :class:`theory.errors.FieldError` naming
    ``field`` and the fields that differ.

    The run's manifest ``<out>/<command>.run.json`` is written before any result (``write``; with
    ``write=False`` only the check is made, for a command that validates more before it starts).
    A rerun with the same identity finds its own manifest and resumes; a run with another
    identity is refused instead of overwriting the other run's outputs. The refusal says how to
    proceed: another ``--out``, or removing the manifest (the override) to let this run overwrite
    the outputs (and, for a command with a result cache, ``cached``, that the cached runs are
    reused either way). A directory without a manifest is free. ``adds`` are options that only add
    to the same run's outputs (e.g. a verification of its results): recorded in the manifest as
    the latest run gave them, never compared, so a rerun with other ``adds`` rewrites the
    outputs of the same run. Returns the manifest's path.
    """
    out = Path(out)
    path = out / f"{command}.run.json"
    new = json_load_exact(json_text(identity, exact=True))  # as it reads back: tuples as lists
    try:
        old = json_load_exact(path.read_text(encoding="utf-8"))["run"]
        if not isinstance(old, dict):
            raise TypeError("run is not an object")
    except FileNotFoundError:
        old = None
    except (OSError, ValueError, KeyError, TypeError):
        raise FieldError(field, str(out), f"a directory for this run's outputs ({path} is not a "
                                          f"readable run manifest: remove it or choose another "
                                          f"{field})") from None
    differ = [] if old is None else sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if not differ:
        if write and (old is None or adds is not None):
            manifest = {"command": f"llmq {command}", "run": new, "about": (
                f"run: the fields that identify the run whose outputs this directory holds; llmq "
                f"{command} with other values refuses to write here (remove this file to allow it)")}
            if adds is not None:
                manifest["adds"] = json_load_exact(json_text(adds, exact=True))
                manifest["about"] += ("; adds: options of the latest run that only add to the same "
                                      "run's outputs (not compared)")
            atomic_write_json(path, manifest)
        return path
    shown = [f"{k} ({_short(old.get(k))} there, {_short(new.get(k))} here)" for k in differ[:4]]
    shown += [f"and {', '.join(differ[4:])}"] if differ[4:] else []
    raise FieldError(field, str(out), f"a directory without another run's outputs: {path} "
                                      f"records a run that differs in {', '.join(shown)}; "
                                      f"choose another {field}, or remove "
                                      f"{path.name} to let this run overwrite its outputs"
                                      + (" (cached runs are reused either way)" if cached else ""))


def _short(value, width: int = 48) -> str:
    text = json_text(value, indent=None)
    return text if len(text) <= width else text[:width - 3] + "..."


def _check_parent(path: Path, field: str, given: str) -> None:
    """The directory ``path`` would be created in exists and is writable."""
    parent = path.absolute().parent
    if parent.exists() and not parent.is_dir():
        raise FieldError(field, given, f"a location in a directory ({parent} is a file)")
    if not parent.is_dir():
        raise FieldError(field, given, f"a location in an existing directory ({parent} does not exist)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FieldError(field, given, f"a writable location ({parent} is not writable)")


def check_output_file(path: str | Path, field: str) -> Path:
    """``path`` if a file can be written there: not a directory, in an existing, writable one."""
    path = Path(path)
    if path.is_dir():
        raise FieldError(field, str(path), "a file name (this is a directory)")
    _check_parent(path, field, str(path))
    return path


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/llmq`` (default ``~/.cache/llmq``): where llmq keeps what it can compute
    again (the compiled simulator, validated profiles, results kept across runs)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmq"


def theory_kept_path(kind: str, key: str, suffix: str = ".npy") -> Path:
    """Where a result :mod:`theory` computes is kept across processes:
    ``cache_home()/<kind>/<theory digest>-<key><suffix>``, named by every source and data file of
    :mod:`theory` (:func:`theory.version.source_digest`) and by ``key``, the caller's digest of the
    inputs, so a change to either computes it anew."""
    from theory.version import source_digest

    return cache_home() / kind / f"{source_digest('theory')}-{key}{suffix}"


def read_kept_array(path: str | Path) -> np.ndarray | None:
    """An array kept by :func:`keep_array` (read without pickle), or None when there is none or it
    cannot be read: the caller computes it again."""
    try:
        with open(path, "rb") as fh:
            return np.load(fh, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None


def keep_array(path: str | Path, array: np.ndarray) -> None:
    """Keep ``array`` at ``path`` (``.npy``, written atomically) for a later process; a cache home
    that cannot be written is skipped."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError:
        pass


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


def atomic_write_csv(path: str | Path, columns: dict, dictionary: dict | None = None) -> Path:
    """Write equal-length ``columns`` (name -> sequence) as a CSV file, atomically.

    ``dictionary`` (column -> unit and meaning, every column) is written beside it as
    ``<stem>.columns.json``, the CSV's data dictionary; a CSV whose columns a JSON file of its own
    describes (``region.json``) goes without.
    """
    names = list(columns)
    if dictionary is not None:
        missing = [n for n in names if not dictionary.get(n)]
        if missing:
            raise ValueError(f"{path}: the data dictionary does not describe {missing}")
        atomic_write_json(Path(path).with_name(Path(path).name.removesuffix(".csv") + ".columns.json"),
                          {"file": Path(path).name, "columns": {n: dictionary[n] for n in names},
                           "null": "an empty cell, or nan/inf: " + NULL_MEANING.removeprefix("null: ")})
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
