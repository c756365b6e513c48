"""The prefix relation of a request trace: which earlier prompt each prompt starts with, and how far.

A CSV trace (:func:`theory.workload.read_trace`) may carry two columns together:
``prefix_parent``, the 0-based data row of an earlier request whose prompt begins with the same
tokens (empty or -1: none), and ``shared_prefix_tokens``, how many leading tokens the two prompts
share (0 where there is no parent, at most either prompt). A prefix-caching engine reuses the KV
blocks of the shared part (:mod:`stability.sim.prefix_cache`). The measured serving runs record
the relation from their token ids (:mod:`theory.validation.serving_runs`).

References
----------
vllm-project/vllm ``vllm/v1/core/kv_cache_utils.py`` (block hashes chained over full blocks of
tokens: equal leading tokens give equal leading blocks).
"""

from __future__ import annotations

import numpy as np

from theory.errors import ConfigFileError

COLUMNS = ("prefix_parent", "shared_prefix_tokens")


def _integers(path, rows, name: str, empty: int | None = None) -> list[int]:
    out = []
    for k, row in enumerate(rows):
        raw = row[name].strip()
        if not raw and empty is not None:
            out.append(empty)
            continue
        try:
            value = float(raw)
        except ValueError:
            raise ConfigFileError(f"{path}: column {name!r}, row {k + 2}: {raw!r} is not a number") from None
        if not value.is_integer():
            raise ConfigFileError(f"{path}: column {name!r}, row {k + 2}: {raw!r} is not an integer")
        out.append(int(value))
    return out


def prefix_columns(path, rows: list[dict], header, prompt) -> dict[str, np.ndarray]:
    """``prefix_parent`` and ``shared_prefix_tokens`` of the trace's data ``rows`` (dicts by
    column), checked row by row against each other and the prompts' lengths ``prompt``; an error
    names the file, the row and the column."""
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        raise ConfigFileError(
            f"{path}: missing column {missing[0]!r} (prefix_parent and shared_prefix_tokens come together)"
        )
    parent = _integers(path, rows, "prefix_parent", empty=-1)
    shared = _integers(path, rows, "shared_prefix_tokens")
    for k, (p, s) in enumerate(zip(parent, shared, strict=True)):
        row = k + 2
        if s < 0 or (p < 0) != (s == 0):
            raise ConfigFileError(
                f"{path}: row {row}: shared_prefix_tokens {s} with prefix_parent "
                f"{p}: expected a count > 0 with a parent, 0 without one"
            )
        if p >= k:
            raise ConfigFileError(
                f"{path}: row {row}, column 'prefix_parent': {p}, not an earlier data row (0 .. {k - 1})"
            )
        if p >= 0 and s > min(prompt[k], prompt[p]):
            raise ConfigFileError(
                f"{path}: row {row}, column 'shared_prefix_tokens': {s} exceeds the "
                f"prompt ({int(prompt[k])}) or its parent's ({int(prompt[p])})"
            )
    return {
        "prefix_parent": np.array(parent, dtype=np.int64),
        "shared_prefix_tokens": np.array(shared, dtype=np.int64),
    }
