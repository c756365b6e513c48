"""The error family of llmq: every bad input raises a ``LlmqError`` naming the field.

All errors subclass :class:`ValueError`, so callers that expect the standard exception for bad
values keep working, and the CLI can print the message without a traceback.
"""

from __future__ import annotations

import difflib
import math

import numpy as np


class LlmqError(ValueError):
    """Base class of every error llmq raises for bad input."""


def did_you_mean(name: object, known) -> str:
    """``"; did you mean 'x'?"`` naming the valid name nearest to ``name``
    (:func:`difflib.get_close_matches`), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class UnknownNameError(LlmqError):
    """A preset name (GPU, model, workload, scheduler) that does not exist."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        self.kind, self.name, self.known = kind, name, tuple(known)
        super().__init__(f"unknown {kind} {name!r}; expected one of: {', '.join(sorted(known))}"
                         + did_you_mean(name, known))


class FieldError(LlmqError):
    """A field with a value outside what is allowed."""

    def __init__(self, field: str, value: object, expected: str):
        self.field, self.value, self.expected = field, value, expected
        super().__init__(f"{field}: expected {expected}, got {value!r}")


class TileDivisibilityError(LlmqError):
    """A tile that does not divide a model dimension it is used on (Section 3.2.1 assumes it)."""


class ConfigFileError(LlmqError):
    """A malformed TOML or CSV file."""


def require_positive(field: str, value: float) -> float:
    """Return ``value`` if it is a finite number > 0, else raise :class:`FieldError`."""
    try:
        ok = math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise FieldError(field, value, "a finite number > 0")
    return value


def require_nonneg(field: str, value: object, unit: str | None = None) -> float:
    """Return ``value`` as a float if it is a finite number >= 0 (not a bool), else raise
    :class:`FieldError` (its expectation names ``unit`` if given)."""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not (number and math.isfinite(value) and value >= 0):
        raise FieldError(field, value, "a finite number >= 0" + (f" ({unit})" if unit else ""))
    return float(value)


def require_seed(field: str, value: object) -> int:
    """Return ``value`` as an int if it is a random seed numpy accepts (an integer >= 0), else raise
    :class:`FieldError`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise FieldError(field, value, "an integer >= 0")
    return int(value)


def require_positive_int(field: str, value: object) -> int:
    """Return ``value`` as an int if it is an integer >= 1, else raise :class:`FieldError`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise FieldError(field, value, "an integer >= 1")
    return int(value)
