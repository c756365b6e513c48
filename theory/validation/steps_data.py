"""Measured whole serving-engine steps: the table's schema, its validating loader and its converter.

A *step table* holds one row per timed engine step of one model on one GPU at one tensor-parallel
degree, as ``benchmarks/device/measure_steps.py`` times them (its docstring and
``benchmarks/device/README.md`` give the method): decode-only steps and mixed steps (decodes plus
one prefill chunk), each as a CUDA-graph replay (``graph``: GPU time) and launched op by op from
Python (``eager``: host wall time). The packaged table is ``theory/data/profiles/llmq_h200_steps.csv``
(its provenance is in ``theory/data/profiles/README.md``); :mod:`theory.validation.steps` scores the
step-time terms on it.

Schema (header names; order free; a missing, unknown or duplicated column is an error):

==================== =========================================================================================
column               meaning
==================== =========================================================================================
``source``           who measured it (``llmq``: this repository's script)
``gpu``              llmq GPU preset key of the card (``theory/data/gpus.toml``)
``setup``            the card, dtype and software as the run recorded them (text, may be empty)
``model``            llmq model preset key whose shapes were run (random weights)
``tp``               tensor-parallel degree (the script runs TP 1)
``kind``             ``decode_step`` (decodes only) or ``mixed_step`` (decodes and one prefill chunk)
``mode``             ``graph`` (one CUDA graph replayed, GPU time) or ``eager`` (host wall time)
``decodes``          sequences decoding one token (padding rows not counted); ``>= 1`` for a ``decode_step``
``decode_context``   tokens in each decoding sequence's KV cache before the step; empty when ``decodes`` is 0
``chunk_tokens``     rows of the prefill chunk: 0 for a ``decode_step``, ``>= 1`` for a ``mixed_step``
``chunk_context``    tokens of the chunk's request already cached; empty for a ``decode_step``
``padded_to``        the CUDA-graph capture size a decode step's graph ran at (``>= decodes``); empty for
                     ``eager`` rows, for a ``graph`` row timed without padding and for mixed steps
``seconds``          median time of one step over ``reps`` repetitions, seconds (> 0)
``seconds_p10``      10th percentile of the repetitions, seconds (``0 < p10 <= seconds``)
``seconds_p90``      90th percentile of the repetitions, seconds (``seconds <= p90``)
``reps``             timed repetitions (``>= 1``)
==================== =========================================================================================

Every row of a table has the same ``gpu``, ``model`` and ``tp`` (one cost model scores it), and no
two rows time the same step (``kind, mode, decodes, decode_context, chunk_tokens, chunk_context,
padded_to``). Errors name the file, the row (its line, the header being line 1) and the column.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from theory.errors import FieldError, UnknownNameError
from theory.hardware import get_gpu
from theory.io import atomic_write_text, read_csv_table
from theory.models import get_model
from theory.terms import check_tp

KINDS = ("decode_step", "mixed_step")
MODES = ("graph", "eager")
COLUMNS = ("source", "gpu", "setup", "model", "tp", "kind", "mode", "decodes", "decode_context",
           "chunk_tokens", "chunk_context", "padded_to", "seconds", "seconds_p10", "seconds_p90", "reps")
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "profiles" / "llmq_h200_steps.csv"
RUN_COLUMNS = ("kind", "mode", "decodes", "decode_context", "chunk_tokens", "chunk_context", "tokens",
               "padded_to", "seconds", "seconds_p10", "seconds_p90", "reps")


@dataclass(frozen=True)
class StepRow:
    """One measured engine step (the schema's columns; ``None`` for an empty cell).

    ``line`` is the row's line in its file (the header is line 1).
    """

    kind: str
    mode: str
    decodes: int
    decode_context: int | None
    chunk_tokens: int
    chunk_context: int | None
    padded_to: int | None
    seconds: float
    seconds_p10: float
    seconds_p90: float
    reps: int
    line: int = 0

    @property
    def tokens(self) -> int:
        """Rows every GeMM and element-wise kernel ran on: ``padded_to`` for a padded graph, else
        ``decodes + chunk_tokens``."""
        return self.padded_to if self.padded_to is not None else self.decodes + self.chunk_tokens

    @property
    def lm_rows(self) -> int:
        """Rows the LM head ran on: one per decode and the chunk's last row (``measure_steps.py``,
        ``StepModel.step``; vLLM's ``logits_indices``)."""
        return self.decodes + (1 if self.chunk_tokens else 0)

    @property
    def unpadded(self) -> bool:
        """Whether the step ran on its real rows only (no padding row)."""
        return self.padded_to is None or self.padded_to == self.decodes

    def key(self) -> tuple:
        """What the row timed: kind, decodes, contexts and chunk, without the mode and padding."""
        return (self.kind, self.decodes, self.decode_context, self.chunk_tokens, self.chunk_context)


@dataclass(frozen=True)
class StepTable:
    """A loaded step table: its rows and the one GPU, model and TP they were measured for."""

    path: str
    source: str
    gpu: str
    setup: str
    model: str
    tp: int
    rows: tuple[StepRow, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, kind: str | None = None, mode: str | None = None) -> list[StepRow]:
        """The rows of one kind and/or mode, in file order."""
        return [r for r in self.rows if (kind is None or r.kind == kind) and (mode is None or r.mode == mode)]


def load_steps(path: str | Path | None = None) -> StepTable:
    """Read and validate a step table (the module docstring's schema).

    Parameters
    ----------
    path : str or Path, optional
        A CSV file; by default the packaged ``llmq_h200_steps.csv``.

    Returns
    -------
    StepTable

    Raises
    ------
    ConfigFileError
        The file is missing, empty or not CSV.
    FieldError
        A missing, unknown or duplicated column, or a bad cell; the message names the file, the
        row and the column.
    """
    path = Path(SHIPPED if path is None else path)
    header, raw = read_csv_table(path, f"the columns {', '.join(COLUMNS)}")
    _check_header(path, header)
    first = raw[0]
    ident = {c: (first.get(c) or "").strip() for c in ("source", "gpu", "setup", "model", "tp")}
    _check_identity(path, ident)
    rows, seen = [], {}
    for k, cells in enumerate(raw):
        line = k + 2
        for c in ("source", "gpu", "setup", "model", "tp"):
            if (cells.get(c) or "").strip() != ident[c]:
                raise FieldError(f"{path}: row {line}, column {c!r}", cells.get(c),
                                 f"{ident[c]!r} as on row 2 (one {c} per table)")
        row = _row(path, line, cells)
        ident_key = (*row.key(), row.mode, row.padded_to)
        if ident_key in seen:
            raise FieldError(f"{path}: row {line}", ident_key,
                             f"a step not timed before (row {seen[ident_key]} times the same)")
        seen[ident_key] = line
        rows.append(row)
    return StepTable(str(path), ident["source"], ident["gpu"], ident["setup"], ident["model"],
                     int(ident["tp"]), tuple(rows))


def _check_header(path: Path, header: list[str]) -> None:
    where = f"{path}: header (row 1)"
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise FieldError(f"{where}, column {dup[0]!r}", header, "each column once")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise FieldError(f"{where}, column {missing[0]!r}", header,
                         f"the column(s) {', '.join(missing)} (missing)")
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise FieldError(f"{where}, column {unknown[0]!r}", unknown[0],
                         f"a schema column ({', '.join(COLUMNS)})")


def _check_identity(path: Path, ident: dict) -> None:
    def where(c: str) -> str:
        return f"{path}: row 2, column {c!r}"

    for c in ("source", "gpu", "model"):
        if not ident[c]:
            raise FieldError(where(c), ident[c], "a non-empty name")
    try:
        get_gpu(ident["gpu"])
    except UnknownNameError as exc:
        raise FieldError(where("gpu"), ident["gpu"], f"a GPU preset ({exc})") from None
    try:
        model = get_model(ident["model"])
    except UnknownNameError as exc:
        raise FieldError(where("model"), ident["model"], f"a model preset ({exc})") from None
    tp = _integer(ident["tp"], 1)
    if tp is None:
        raise FieldError(where("tp"), ident["tp"], "an integer >= 1")
    try:
        check_tp(tp, model.n_heads, model.n_kv_heads, model.d_ff, "real", model.key, "tp")
    except FieldError as exc:
        raise FieldError(where("tp"), tp, exc.expected) from None


def _row(path: Path, line: int, cells: dict) -> StepRow:
    def where(c: str) -> str:
        return f"{path}: row {line}, column {c!r}"

    def text(c: str) -> str:
        return (cells.get(c) or "").strip()

    def integer(c: str, low: int, optional: bool = False) -> int | None:
        if optional and not text(c):
            return None
        value = _integer(text(c), low)
        if value is None:
            raise FieldError(where(c), cells.get(c),
                             f"an integer >= {low}" + (" or empty" if optional else ""))
        return value

    def seconds(c: str) -> float:
        try:
            value = float(text(c))
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise FieldError(where(c), cells.get(c), "a finite time > 0, in seconds")
        return value

    kind, mode = text("kind"), text("mode")
    if kind not in KINDS:
        raise FieldError(where("kind"), cells.get("kind"), f"one of {', '.join(KINDS)}")
    if mode not in MODES:
        raise FieldError(where("mode"), cells.get("mode"), f"one of {', '.join(MODES)}")
    decodes = integer("decodes", 1 if kind == "decode_step" else 0)
    decode_context = integer("decode_context", 0, optional=True)
    if decodes and decode_context is None:
        raise FieldError(where("decode_context"), cells.get("decode_context"),
                         f"an integer >= 0 (the row has {decodes} decodes)")
    if not decodes and decode_context is not None:
        raise FieldError(where("decode_context"), cells.get("decode_context"),
                         "empty (the row has no decodes)")
    chunk_tokens = integer("chunk_tokens", 0)
    chunk_context = integer("chunk_context", 0, optional=True)
    if kind == "decode_step" and (chunk_tokens or chunk_context is not None):
        field = "chunk_tokens" if chunk_tokens else "chunk_context"
        raise FieldError(where(field), cells.get(field), "0 and empty for a decode_step")
    if kind == "mixed_step" and (not chunk_tokens or chunk_context is None):
        field = "chunk_tokens" if not chunk_tokens else "chunk_context"
        raise FieldError(where(field), cells.get(field),
                         "a chunk of >= 1 token and its context for a mixed_step")
    padded_to = integer("padded_to", decodes, optional=True)
    if padded_to is not None and (kind != "decode_step" or mode != "graph"):
        raise FieldError(where("padded_to"), cells.get("padded_to"),
                         "empty (only a decode_step's graph is padded)")
    median, p10, p90 = seconds("seconds"), seconds("seconds_p10"), seconds("seconds_p90")
    if not p10 <= median <= p90:
        raise FieldError(where("seconds"), cells.get("seconds"),
                         f"between seconds_p10 ({p10:g}) and seconds_p90 ({p90:g})")
    return StepRow(kind, mode, decodes, decode_context, chunk_tokens, chunk_context, padded_to, median, p10,
                   p90, integer("reps", 1), line)


def _integer(text: str, low: int) -> int | None:
    """``text`` as an int >= ``low`` (``"3"`` or ``"3.0"``), or None if it is not one."""
    try:
        number = float(text)
    except ValueError:
        return None
    ok = math.isfinite(number) and number.is_integer() and number >= low
    return int(number) if ok else None


# --- Conversion of a measure_steps.py run ---------------------------------------------------


def convert_run(run: str | Path, tp: int = 1) -> str:
    """The step table (CSV text) of one ``measure_steps.py`` run directory.

    Reads ``steps.csv`` and ``meta.json``; keeps the schema's columns, with ``source = llmq``,
    ``gpu`` and ``model`` from ``meta.json`` (``gpu_key``, ``model``), ``setup`` = the card, the
    dtype and the PyTorch build it records, ``tp`` as given (the script runs TP 1). Drops ``tokens``
    after checking it equals ``padded_to`` where that is set, else ``decodes + chunk_tokens``
    (:attr:`StepRow.tokens` recomputes it). Times are copied as written (seconds). A run on the
    script's tiny CPU model (``meta.json``: ``tiny``) is refused.

    Parameters
    ----------
    run : str or Path
        The run's directory (e.g. ``benchmarks/device/runs/2026-11-27-h200-steps``).
    tp : int
        The tensor-parallel degree the run measured.

    Returns
    -------
    str
        CSV text with the header :data:`COLUMNS`; :func:`load_steps` checks it.
    """
    run = Path(run)
    meta_path = run / "meta.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FieldError(str(meta_path), str(exc)[:200], "the run's meta.json (JSON)") from None
    if meta.get("tiny"):
        raise FieldError(f"{meta_path}: tiny", True, "a run of the model's real shapes (tiny = false)")
    header, raw = read_csv_table(run / "steps.csv", f"the columns {', '.join(RUN_COLUMNS)}")
    missing = [c for c in RUN_COLUMNS if c not in header]
    if missing:
        raise FieldError(f"{run / 'steps.csv'}: header (row 1), column {missing[0]!r}", header,
                         "measure_steps.py's columns")
    dtype = str(meta.get("dtype", "")).removeprefix("torch.")
    setup = f"{meta.get('device', '')}/{dtype}/torch-{meta.get('torch', '')}"
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for k, cells in enumerate(raw):
        padded, rows = cells["padded_to"].strip(), int(cells["decodes"]) + int(cells["chunk_tokens"])
        if int(cells["tokens"]) != (int(padded) if padded else rows):
            raise FieldError(f"{run / 'steps.csv'}: row {k + 2}, column 'tokens'", cells["tokens"],
                             f"padded_to, else decodes + chunk_tokens ({padded or rows})")
        writer.writerow({"source": "llmq", "gpu": meta.get("gpu_key", ""), "setup": setup,
                         "model": meta.get("model", ""), "tp": tp,
                         **{c: cells[c].strip() for c in COLUMNS if c in RUN_COLUMNS}})
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    """``python -m theory.validation.steps_data RUN [--out FILE]``: convert a run, check the result
    with :func:`load_steps`, then write it (default: the packaged file)."""
    ap = argparse.ArgumentParser(description="Convert a measure_steps.py run into a step table.")
    ap.add_argument("run", type=Path, help="the run's directory (steps.csv, meta.json)")
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument("--tp", type=int, default=1)
    args = ap.parse_args(argv)
    text = convert_run(args.run, args.tp)
    check = args.out.with_name(args.out.name + ".check")
    atomic_write_text(check, text)
    try:
        table = load_steps(check)
    finally:
        check.unlink()
    atomic_write_text(args.out, text)
    print(f"{len(table)} rows ({table.gpu}, {table.model}, TP {table.tp}) -> {args.out}")


if __name__ == "__main__":
    main()
