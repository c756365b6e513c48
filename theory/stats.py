"""Student-t intervals: the one place the project turns replicates into a confidence interval.

References
----------
Student (1908), "The probable error of a mean", Biometrika 6(1); the interval of an i.i.d.
sample's mean, ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``.
"""

from __future__ import annotations

import math

import numpy as np


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t quantile ``t_{(1 + confidence)/2, dof}``."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, dof))


def t_interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of the Student-t interval of i.i.d. ``values`` at ``confidence``.

    One value gives NaN bounds (no spread to estimate), none a NaN mean as well.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return (math.nan, math.nan, math.nan)
    m = float(v.mean())
    if v.size < 2:
        return (m, math.nan, math.nan)
    half = float(t_quantile(confidence, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return (m, m - half, m + half)
