"""A lognormal law truncated to a bounded support, fitted to two quantiles and discretized: the
length laws of Table 1 (:func:`theory.workload.table1_marginal`), which gives each length's median
and P90 only.

Its own module so that scipy (its distributions and root finder) is imported only where a Table-1
law is built.

References
----------
Bari, Hegde, de Veciana (2025), Table 1. SciPy ``scipy.stats.lognorm`` (``s`` = sigma,
``scale`` = exp(mu)) and ``scipy.optimize.root``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from theory.errors import LlmqError


def truncated_quantile(mu: float, sigma: float, q: float, cap: float) -> float:
    """The ``q`` quantile of lognormal(``mu``, ``sigma``) truncated to (0, ``cap``]."""
    dist = stats.lognorm(s=sigma, scale=math.exp(mu))
    return float(dist.ppf(q * dist.cdf(cap)))


def fit_to_quantiles(median: float, p90: float, cap: float) -> tuple[float, float]:
    """(mu, sigma) of a lognormal truncated to (0, cap] whose median and P90 are the given ones."""
    sigma0 = math.log(p90 / median) / stats.norm.ppf(0.9)

    def residual(x):
        mu, log_sigma = x
        s = math.exp(log_sigma)
        return [math.log(truncated_quantile(mu, s, 0.5, cap) / median),
                math.log(truncated_quantile(mu, s, 0.9, cap) / p90)]

    sol = optimize.root(residual, [math.log(median), math.log(sigma0)], tol=1e-12)
    if max(abs(r) for r in residual(sol.x)) > 1e-9:
        raise LlmqError(f"could not fit a truncated lognormal to median={median}, P90={p90}")
    return float(sol.x[0]), math.exp(sol.x[1])


def discretize(mu: float, sigma: float, cap: int, atoms: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer atoms of a lognormal truncated to [1, cap]: equal-mass bins, each at its median;
    (values, probabilities)."""
    dist = stats.lognorm(s=sigma, scale=math.exp(mu))
    lo, hi = dist.cdf(0.5), dist.cdf(cap + 0.5)
    mids = lo + (hi - lo) * (np.arange(atoms) + 0.5) / atoms
    values = np.clip(np.rint(dist.ppf(mids)), 1, cap).astype(np.int64)
    uniq, counts = np.unique(values, return_counts=True)
    return uniq, counts / atoms
