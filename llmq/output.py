"""What every ``llmq`` command prints or writes the same way: ``--json`` as strict JSON, and the
output location checked before any computing (:mod:`theory.io`)."""

from __future__ import annotations

from pathlib import Path

from theory.io import check_output_dir, check_output_file, json_text

__all__ = ["check_output_file", "out_dir", "print_json"]


def print_json(obj: object) -> None:
    """Print ``obj`` as strict JSON (non-finite numbers as ``null``: :data:`theory.io.NULL_MEANING`)."""
    print(json_text(obj, indent=2), end="")


def out_dir(value: str | Path, field: str = "--out") -> Path:
    """The output directory ``value``, checked first (:func:`theory.io.check_output_dir`)."""
    return check_output_dir(Path(value), field)
