"""Absolute relative errors of predicted against measured times, and their summary statistics
(median and 90th percentile) as every score of :mod:`theory.validation` reports them; the spread of
a set of values (:class:`Summary`) and the accuracy of a set of predicted times (:class:`Accuracy`)
as the step scores report them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def abs_rel_error(measured, predicted) -> np.ndarray:
    """``|predicted / measured - 1|`` elementwise (measured times are > 0, the loader checks it)."""
    return np.abs(np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0)


@dataclass(frozen=True)
class ErrorStats:
    """Median and 90th percentile of absolute relative errors over ``n`` points.

    The percentile is numpy's default (linear interpolation between order statistics: the
    ``q``-quantile of sorted ``e_0 <= ... <= e_{n-1}`` is ``e_j + f (e_{j+1} - e_j)`` with
    ``j + f = q (n - 1)``). With ``n = 0`` both are ``None`` (nothing was scored).
    """

    n: int
    median: float | None
    p90: float | None

    @classmethod
    def of(cls, errors) -> ErrorStats:
        """The statistics of the finite entries of ``errors`` (NaN marks a row not predicted)."""
        e = np.asarray(errors, dtype=float)
        e = e[np.isfinite(e)]
        if not e.size:
            return cls(0, None, None)
        return cls(int(e.size), float(np.median(e)), float(np.percentile(e, 90)))


@dataclass(frozen=True)
class Summary:
    """Median, 10th and 90th percentile, least and largest of ``n`` values (``None`` when empty)."""

    n: int
    median: float | None
    p10: float | None
    p90: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, values) -> Summary:
        """The summary of the finite entries of ``values`` (numpy's linear-interpolation percentiles)."""
        v = np.asarray(values, dtype=float)
        v = v[np.isfinite(v)]
        if not v.size:
            return cls(0, None, None, None, None, None)
        p10, p50, p90 = np.percentile(v, [10, 50, 90])
        return cls(int(v.size), float(p50), float(p10), float(p90), float(v.min()), float(v.max()))


@dataclass(frozen=True)
class Accuracy:
    """One set of steps: :class:`ErrorStats` of ``|predicted / measured
    - 1|`` and the median of ``predicted / measured``."""

    errors: ErrorStats
    ratio_median: float | None

    @classmethod
    def of(cls, measured, predicted) -> Accuracy:
        """The accuracy of ``predicted`` against ``measured`` times (equal lengths, measured > 0)."""
        m, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
        return cls(ErrorStats.of(abs_rel_error(m, p)), float(np.median(p / m)) if m.size else None)


__all__ = [
    "Accuracy",
    "ErrorStats",
    "Summary",
    "abs_rel_error",
]
