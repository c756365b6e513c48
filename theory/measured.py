"""The measured-profile law of the linear GeMMs: measured times, interpolated in the token count.

A linear GeMM ``W (d_row x d_red)`` over ``tau`` activation columns (the batch's tokens) takes the
measured time of the profiled GeMMs with the same one-GPU weight shape ``(d_row, d_red)`` on the
profile's GPU (:func:`theory.profiles.gemm_shape` gives each measured series its shape, so the
match is by shape, not by model name: Mistral-7B's GeMMs are Llama-3-8B's), linearly
interpolated in ``tau`` between the measured token counts. Several series with one shape (two
models, or one model at two TP degrees with equal shards) are pooled: the median of their times
at each token count any of them measured. Outside ``[tau_min, tau_max]`` of the pooled table,
and for a shape no series has, the tile model prices the GeMM (:mod:`theory.terms`,
``gemm_profile``). The tables of a profile file are read by :func:`theory.profiles.gemm_tables`.

vidur's own simulator likewise prices each operator from its profiles
(microsoft/vidur @ 7d47513363ec447a741ac5e47241580b47724fbf,
``vidur/execution_time_predictor/sklearn_execution_time_predictor.py``: scikit-learn regressors,
random forest or linear regression, fitted per operator on the profiled ``num_tokens`` and
evaluated at the batch's token count); here the regressor is the piecewise-linear interpolant of
the measured points, which reproduces every measured time and is non-monotone wherever
cuBLAS's kernel choice is.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4 (the linear time of a batch is a sum of GeMM times);
data and conversion: ``theory/data/profiles/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class GemmTable:
    """The pooled measured times of one GeMM shape: ``seconds[j]`` at ``tau[j]`` tokens.

    Attributes
    ----------
    tau : ndarray of int64
        Distinct measured token counts, ascending.
    seconds : ndarray of float
        The median over the pooled series of the time at each count.
    series : int
        How many measured series (model x operation x TP) were pooled.
    """

    tau: np.ndarray
    seconds: np.ndarray
    series: int

    @property
    def tau_min(self) -> int:
        """The smallest measured token count."""
        return int(self.tau[0])

    @property
    def tau_max(self) -> int:
        """The largest measured token count."""
        return int(self.tau[-1])

    def covers(self, tau) -> np.ndarray:
        """Whether each token count lies in the measured range ``[tau_min, tau_max]``."""
        tau = np.asarray(tau)
        return (tau >= self.tau[0]) & (tau <= self.tau[-1])

    def time(self, tau) -> np.ndarray:
        """The linear interpolant at ``tau`` (meaningful where :meth:`covers`; clamped outside)."""
        return np.interp(np.asarray(tau, dtype=float), self.tau.astype(float), self.seconds)


def pooled_tables(d_row, d_red, tokens, seconds, series) -> dict[tuple[int, int], GemmTable]:
    """One :class:`GemmTable` per distinct shape ``(d_row, d_red)`` of the measured rows.

    Parameters
    ----------
    d_row, d_red, tokens : array_like of int
        Each row's one-GPU weight shape and token count.
    seconds : array_like of float
        Each row's measured time.
    series : array_like
        A label of each row's series (e.g. ``"model|operation|tp"``), to count the pooled series.

    Returns
    -------
    dict
        ``{(d_row, d_red): GemmTable}``; at a token count several series measured, the median
        of their times (the mean of the middle two for an even number).
    """
    d_row, d_red, tokens = (np.asarray(x, dtype=np.int64) for x in (d_row, d_red, tokens))
    seconds, series = np.asarray(seconds, dtype=float), np.asarray(series)
    out = {}
    for r, k in sorted(set(zip(d_row.tolist(), d_red.tolist(), strict=True))):
        on = (d_row == r) & (d_red == k)
        t, s = tokens[on], seconds[on]
        order = np.lexsort((s, t))
        t, s = t[order], s[order]
        counts, first = np.unique(t, return_index=True)
        n = np.diff(np.append(first, t.size))
        median = 0.5 * (s[first + (n - 1) // 2] + s[first + n // 2])
        out[(r, k)] = GemmTable(counts, median, int(np.unique(series[on]).size))
    return out


def interpolate_by_shape(tables: dict, d_row, d_red, tokens, out: np.ndarray) -> np.ndarray:
    """Write into ``out`` the measured time of every GeMM whose shape has a table of ``tables``
    (:func:`pooled_tables`) and whose token count lies in its range; return which were written.

    ``d_row``, ``d_red``, ``tokens`` and ``out`` have one shape (one entry per GeMM); the other
    entries of ``out`` are left as they are (the caller's fallback).
    """
    covered = np.zeros(np.shape(out), dtype=bool)
    for (r, k), table in tables.items():
        on = (d_row == r) & (d_red == k) & table.covers(tokens)
        out[on] = table.time(tokens[on])
        covered |= on
    return covered


@dataclass(frozen=True, eq=False)
class MeasuredLinear:
    """The measured-profile law of a cost model's linear GeMMs (one entry per GeMM of the batch).

    Attributes
    ----------
    tables : tuple of GemmTable or None
        Per linear GeMM (:attr:`theory.cost.CostModel.gemms` order), its shape's table, or
        ``None`` when no measured series has its shape.
    count : ndarray of int
        Instances of each GeMM per batch (``N`` per layer GeMM).
    gemm_overhead_s : float
        The tile model's fixed time per GeMM, which a measured time already includes.
    profile, gpu : str
        The profile and its ``gpu`` rows.
    by_shape : dict
        Every table of the profile's GPU, ``{(d_row, d_red): GemmTable}`` (per-GeMM predictions).
    """

    tables: tuple
    count: np.ndarray
    gemm_overhead_s: float
    profile: str
    gpu: str
    by_shape: dict

    @property
    def tau_max(self) -> int:
        """The largest token count any of the batch's GeMMs has measured (0 if none)."""
        return max((t.tau_max for t in self.tables if t is not None), default=0)

    def covered(self, tau: np.ndarray) -> np.ndarray:
        """``(G, len(tau))`` booleans: GeMM ``g`` is priced by its table at ``tau``."""
        out = np.zeros((len(self.tables), np.size(tau)), dtype=bool)
        for g, t in enumerate(self.tables):
            if t is not None:
                out[g] = t.covers(np.ravel(tau))
        return out.reshape((len(self.tables), *np.shape(tau)))

    def time(self, tau: np.ndarray, covered: np.ndarray) -> np.ndarray:
        """``sum_g count_g M_g(tau)`` over the GeMMs ``covered`` at ``tau``, minus the tile
        model's ``gemm_overhead_s`` each of them no longer pays (it is in the measured time)."""
        out = np.zeros(np.shape(tau))
        for g, t in enumerate(self.tables):
            if t is not None:
                out = out + np.where(covered[g], self.count[g] * (t.time(tau) - self.gemm_overhead_s), 0.0)
        return out

    def describe(self) -> str:
        """Which law priced which GeMM, in words (``llmq bounds``)."""
        n = sum(t is not None for t in self.tables)
        ranges = sorted({(t.tau_min, t.tau_max) for t in self.tables if t is not None})
        span = ", ".join(f"{a}-{b}" for a, b in ranges) or "none"
        return (f"measured profile {self.profile} ({self.gpu} rows): {n} of {len(self.tables)} linear "
                f"GeMM shapes interpolated over their measured tokens ({span}); the other GeMMs, and "
                "every GeMM past its measured range, by the tile model")


__all__ = ["GemmTable", "MeasuredLinear", "interpolate_by_shape", "pooled_tables"]
