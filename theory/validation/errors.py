"""Absolute relative errors of predicted against measured times, and their summary statistics
(median and 90th percentile) as every score of :mod:`theory.validation` reports them."""

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


__all__ = [
    "ErrorStats",
    "abs_rel_error",
]
