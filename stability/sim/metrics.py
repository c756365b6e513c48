"""Metrics of a simulated run: TTFT, TBT, latency, throughput, queue paths, stability verdict.

* TTFT = first token time - arrival; end-to-end latency = finish - arrival (Section 1).
* TBT gaps are recorded by the engine in per-class log-spaced histograms (100 bins per decade),
  so quantiles are exact up to one bin (a relative error below 2.3%) whatever the run length.
* The number in system Q(t) and the work in system U(t) are step functions rebuilt from arrival
  and finish times: U(t) sums the optimal work T*_R(j) (Eq. 12) of the requests present at t.
* The stability verdict tests the drift of U(t) over the arrival window. After a warm-up (the first
  ``WARMUP`` fraction of the window, :func:`warmup_end`; the planner leaves the same warm-up out of
  its latency metrics), the window
  is split into K batches and U is averaged over each on a fine grid (batch means). Two estimates
  of the drift, each divided by the offered work rate (lambda E[T*_R]) to give g, the fraction of
  arriving work that accumulates:

  - *levels*: the OLS slope of the K batch means on the batch midpoints, with its t-interval
    (K - 2 degrees of freedom). Right when U is stationary (a stable queue): batch means are then
    nearly independent, and the interval shrinks like T^-1.5.
  - *increments*: the mean of the K - 1 differences of consecutive batch means, with its
    t-interval. Right when U is a random walk with drift (an unstable queue accumulates every
    fluctuation), where the levels interval is too narrow (its nominal coverage is not met);
    conservative for a stationary U.

  The run is *unstable* when the increments interval lies above ``g_min``; *stable* when, besides,
  the levels interval lies below ``g_tol`` and reaches down to ``g_min`` (no significant
  accumulation even by the sharper interval); *inconclusive* otherwise. The reported interval is
  the one that decided (for an inconclusive run, the union of both); both are kept.

References
----------
Bari, Hegde, de Veciana (2025), Section 1 (TTFT, TBT), Theorem 1 (growth of Q(t)), Eq. 12.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from stability.sim.engine import TBT_BINS, TBT_LO, TBT_PER_DECADE
from theory import added_time
from theory.cost import CostModel, decode_prefix, linear_per_token
from theory.stats import t_quantile


def optimal_work(cm: CostModel, L_P, L_D) -> np.ndarray:
    """T*_R(j) of Eq. 12 for each request: its work at the optimal tile with no padding.

    With cost terms on (:mod:`theory.terms`) it is the per-request work behind Theorem 1's
    ``T_bar^R`` as :func:`theory.bounds.T_bar_R_terms` takes it: linear work at ``l*``, no prefill
    attention without attention, ``(L^D + 1) h`` for ``lm_head``, and the decode attention's least
    law with ``mixed_decode_eta``, and the added-time terms' per-decode time
    (:func:`theory.added_time.decode_sums`).

    Implements Eq. 12.
    """
    L_P = np.asarray(L_P, dtype=np.int64)
    L_D = np.asarray(L_D, dtype=np.int64)
    t = cm.t_star
    total = L_P + L_D
    S = decode_prefix(cm, int(total.max(initial=1)), law="least")
    coef = cm.N * cm.d_pre / (cm.s * cm.mu[0] * t.t_row * t.t_col * t.t_red)
    linear = total / (cm.mu_Lin[0] * t.t_col) if cm.lin is None else total * linear_per_token(cm)
    prefill = coef * L_P * (L_P + t.t_lcm).astype(float) if cm.attention else 0.0
    work = linear + total / cm.mu_nLin + cm.N * (S[total] - S[L_P]) + prefill
    work = work + cm.lm_out_s * (L_D + 1) if cm.lm_out_s else work
    return work + added_time.decode_sums(cm, L_P, L_D) if cm.added else work


def in_system(arrival, finish, times, weights=None) -> np.ndarray:
    """Sum of ``weights`` (default 1) over requests with arrival <= t < finish, at each t."""
    arrival = np.asarray(arrival, dtype=float)
    finish = np.where(np.isnan(finish), np.inf, np.asarray(finish, dtype=float))
    w = np.ones(arrival.size) if weights is None else np.asarray(weights, dtype=float)
    a_order = np.argsort(arrival, kind="stable")
    f_order = np.argsort(finish, kind="stable")
    a_cum = np.concatenate([[0.0], np.cumsum(w[a_order])])
    f_cum = np.concatenate([[0.0], np.cumsum(w[f_order])])
    times = np.asarray(times, dtype=float)
    return (a_cum[np.searchsorted(arrival[a_order], times, side="right")]
            - f_cum[np.searchsorted(finish[f_order], times, side="right")])


WARMUP = 0.1  # fraction of the arrival window the stability verdict leaves out at its start


def warmup_end(arrival, warmup: float = WARMUP) -> float:
    """The end of the warm-up: ``min + warmup (max - min)`` of the arrival times, where the window
    the stability verdict tests begins."""
    arrival = np.asarray(arrival, dtype=float)
    return float(arrival.min() + warmup * (arrival.max() - arrival.min()))


def histogram_quantile(hist: np.ndarray, q: float) -> float:
    """The q-quantile of values recorded in the engine's log-spaced TBT histogram (bin midpoint
    on the log scale; nan for an empty histogram)."""
    total = hist.sum()
    if total <= 0:
        return float("nan")
    k = int(np.searchsorted(np.cumsum(hist), q * total - 1e-9 * total))
    if k == 0:
        return 0.0
    return float(10 ** (TBT_LO + (k - 0.5) / TBT_PER_DECADE))


@dataclass(frozen=True)
class Verdict:
    """A stability verdict with its evidence (see the module docstring)."""

    verdict: str  # "stable", "unstable" or "inconclusive"
    growth: float  # estimated fraction of offered work that accumulates (levels regression)
    ci_low: float  # the interval that decided the verdict
    ci_high: float
    confidence: float
    batches: int
    window: tuple[float, float]
    ci_levels: tuple[float, float] = (float("nan"), float("nan"))
    ci_increments: tuple[float, float] = (float("nan"), float("nan"))

    def describe(self) -> str:
        return (f"{self.verdict} (accumulating fraction of offered work {self.growth:+.4f}, "
                f"{self.confidence:.0%} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}]; "
                f"{self.batches} batch means over t in [{self.window[0]:.4g}, {self.window[1]:.4g}] s)")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DriftTest:
    """The settings of the drift test (see the module docstring).

    Attributes
    ----------
    confidence : float
        Level of the t-intervals.
    batches, samples : int
        Number of batch means K, and grid points averaged in each.
    warmup : float
        Fraction of the arrival window discarded at its start (:data:`WARMUP`).
    g_tol, g_min : float
        Unstable if the increments interval lies above ``g_min``; stable if not, and the levels
        interval lies within ``(-inf, g_tol)`` and reaches ``g_min`` or below.
    """

    confidence: float = 0.99
    batches: int = 20
    samples: int = 50
    warmup: float = WARMUP
    g_tol: float = 0.01
    g_min: float = 0.002


def stability_verdict(arrival, finish, work, test: DriftTest = DriftTest()) -> Verdict:
    """Drift test on the work in system U(t) (see the module docstring).

    Parameters
    ----------
    arrival, finish, work : array_like
        Per-request arrival and finish times (nan = not finished) and work T*_R(j).
    test : DriftTest
        The test's level, batch means, warm-up and thresholds.
    """
    confidence, batches, samples = test.confidence, test.batches, test.samples
    warmup, g_tol, g_min = test.warmup, test.g_tol, test.g_min
    arrival = np.asarray(arrival, dtype=float)
    work = np.asarray(work, dtype=float)
    t0 = warmup_end(arrival, warmup)
    t1 = arrival.max()
    if not t1 > t0 or arrival.size < 10 * batches:
        nan = float("nan")
        return Verdict("inconclusive", nan, nan, nan, confidence, 0, (float(t0), float(t1)))
    grid = np.linspace(t0, t1, batches * samples + 1)[:-1] + (t1 - t0) / (2 * batches * samples)
    levels = in_system(arrival, finish, grid, work).reshape(batches, samples).mean(axis=1)
    mids = grid.reshape(batches, samples).mean(axis=1)
    offered = work.sum() / (arrival.max() - arrival.min())
    fit = stats.linregress(mids, levels)
    growth, half = fit.slope / offered, t_quantile(confidence, batches - 2) * fit.stderr / offered
    ci_levels = (float(growth - half), float(growth + half))
    steps = np.diff(levels) / np.diff(mids) / offered
    half = t_quantile(confidence, steps.size - 1) * steps.std(ddof=1) / np.sqrt(steps.size)
    ci_increments = (float(steps.mean() - half), float(steps.mean() + half))
    if ci_increments[0] > g_min:
        verdict, ci = "unstable", ci_increments
    elif ci_levels[1] < g_tol and ci_levels[0] <= g_min:
        verdict, ci = "stable", ci_levels
    else:
        verdict, ci = "inconclusive", (min(ci_levels[0], ci_increments[0]),
                                       max(ci_levels[1], ci_increments[1]))
    return Verdict(verdict, float(growth), ci[0], ci[1], confidence, batches, (float(t0), float(t1)),
                   ci_levels, ci_increments)


def summarize_latency(values: np.ndarray) -> dict:
    """Mean and percentiles (50, 90, 99) of finite values, in seconds."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"mean": float("nan"), "p50": float("nan"), "p90": float("nan"), "p99": float("nan")}
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return {"mean": float(v.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def summarize_tbt(hist: np.ndarray, stat: np.ndarray) -> dict:
    """TBT summary of one class from its histogram and (count, sum, max)."""
    count, total, largest = stat
    return {"count": int(count), "mean": float(total / count) if count else float("nan"),
            "p50": histogram_quantile(hist, 0.5), "p90": histogram_quantile(hist, 0.9),
            "p99": histogram_quantile(hist, 0.99), "max": float(largest) if count else float("nan")}


__all__ = ["TBT_BINS", "WARMUP", "DriftTest", "Verdict", "histogram_quantile", "in_system", "optimal_work",
           "stability_verdict", "summarize_latency", "summarize_tbt", "warmup_end"]
