"""Appendix C's statements set against one executed cycle DTMC: Eq. 25 (printed and repaired),
Lemma 3 (printed and corrected, and its premise), Lemma 4 and Theorems 1-2.

The registered checks of :mod:`paper_checks.appendix_c` evaluate them on fixed scenarios;
``llmq dtmc`` evaluates them on the user's chain. Each statement is decided on the chain's
confidence interval.

References
----------
Bari, Hegde, de Veciana (2025), Appendix C (Eq. 25, Lemmas 3-4), Theorems 1-2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stability.dtmc import CycleChain
from theory.cost import CostModel
from theory.stats import t_interval
from theory.workload import Workload


@dataclass(frozen=True)
class ChainStatement:
    """One statement of Appendix C set against the executed chain.

    ``holds`` is decided on the confidence interval: a bound fails only when the executed
    interval lies wholly beyond it. ``states`` names the states where it fails ('' if none).
    """

    name: str
    claim: str
    paper: float
    executed: float
    lo: float
    hi: float
    holds: bool | None  # None: the statement does not apply here
    states: str = ""


def _states_text(xs: np.ndarray, x_max: int) -> str:
    """Compact text for a set of states, e.g. 'x in 0-3, 7, every x >= 37'."""
    xs = np.asarray(xs, dtype=int)
    if xs.size == 0:
        return ""
    groups = np.split(xs, np.flatnonzero(np.diff(xs) != 1) + 1)
    parts = [f"{g[0]}" if g.size == 1 else f"{g[0]}-{g[-1]}" for g in groups]
    if groups[-1][-1] == x_max:
        parts[-1] = f"every x >= {groups[-1][0]}"
    return "x in " + ", ".join(parts)


def compare_with_paper(chain: CycleChain, cm: CostModel, w: Workload) -> tuple[dict, list[ChainStatement]]:
    """Eq. 25, Lemma 3 (printed and corrected), Lemma 4 and Theorems 1-2 against the chain.

    Returns the paper's quantities (T_bar^R, T^max, lambda*, the margin eps of this lambda and
    Theorem 2's n for it) and one :class:`ChainStatement` per statement. Also checked: the repaired
    cycle bound ``E[T] <= E[K] T_bar^R + P(K = n) (t*_col - 1) T^max`` -- a cycle that line 9 ends
    before n requests started ran only full decode batches, so only cycles with K = n can lose
    time to tiling (Wald's identity gives E[sum of T*_R over the K requests] = E[K] T_bar^R).

    References
    ----------
    Eq. 25, Lemmas 3-4, Theorems 1-2.
    """
    from theory.bounds import (
        T_bar_R,
        T_max,
        cycle_time_bound,
        lemma3_drift_bound,
        lemma4_bound,
        n_threshold,
    )

    tbar, tmax = T_bar_R(cm, w), T_max(cm, w.l_P_max, w.l_D_max)
    t_col, n, lam, r, conf = chain.sat_params()
    lam_star = r / tbar
    eps = 1 - lam / lam_star
    n_thr = n_threshold(t_col, tmax, tbar, eps) if 0 < eps < 1 else None
    info = {"T_bar_R_s": tbar, "T_max_s": tmax, "lambda_star": lam_star, "lambda": lam, "r": r,
            "n": n, "t_col": t_col, "epsilon_of_lambda": eps, "n_threshold": n_thr,
            "early_end_fraction": chain.early_end_fraction()}
    sat, tb = chain.sat, chain.table
    ET = t_interval(sat.T, conf)
    drift = chain.saturated_drift()
    checks = []
    eq25 = cycle_time_bound(n, tbar, t_col, tmax)
    checks.append(ChainStatement("Eq. 25", "E[T_cycle | x >= n] <= n T_bar^R + (t*_col - 1) T^max",
                             eq25, *ET, ET[1] <= eq25, "" if ET[1] <= eq25 else f"every x >= {n}"))
    slack = sat.T - (sat.K * tbar + (sat.K == n) * (t_col - 1) * tmax)
    m, lo, hi = t_interval(slack, conf)
    checks.append(ChainStatement(
        "Eq. 25 repaired", "E[T - K T_bar^R - 1{K = n} (t*_col - 1) T^max | x >= n] <= 0",
        0.0, m, lo, hi, lo <= 0, "" if lo <= 0 else f"every x >= {n}"))
    checks.append(ChainStatement("Lemma 3 premise", "K = n completions in every cycle with x >= n",
                             float(n), float(sat.K.mean()), float(sat.K.min()), float(sat.K.max()),
                             bool(np.all(sat.K == n)),
                             "" if np.all(sat.K == n) else f"every x >= {n} (P(K < n) = "
                                                           f"{info['early_end_fraction']:.3g})"))
    printed = lemma3_drift_bound(n, lam, r, tbar, t_col, tmax, printed=True)
    equal = drift[1] <= printed <= drift[2]
    checks.append(ChainStatement("Lemma 3 as printed", "drift = n (lambda T_bar^R / r - 1) + "
                             "lambda (t*_col - 1) T^max for x >= n", printed, *drift, equal,
                             "" if equal else f"every x >= {n}"))
    corrected = lemma3_drift_bound(n, lam, r, tbar, t_col, tmax)
    ok = drift[1] <= corrected
    checks.append(ChainStatement("Lemma 3 corrected", "drift <= n (lambda T_bar^R / r - 1) + "
                             "(lambda / r) (t*_col - 1) T^max for x >= n", corrected, *drift, ok,
                             "" if ok else f"every x >= {n}"))
    l4 = lemma4_bound(n, tmax, lam, r)
    bad = np.flatnonzero(tb["ET_lo"] > l4)
    worst = int(np.argmax(tb["ET"]))
    checks.append(ChainStatement("Lemma 4", "E[T_cycle | x] <= r / lambda + n T^max for every x", l4,
                             float(tb["ET"][worst]), float(tb["ET_lo"][worst]),
                             float(tb["ET_hi"][worst]), bad.size == 0, _states_text(bad, chain.x_max)))
    if n_thr is not None:
        applies = n >= n_thr
        checks.append(ChainStatement(
            "Theorem 2", f"n >= {n_thr} and lambda <= lambda* (1 - eps) with eps = {eps:.3g} "
            "=> drift < 0 for large x", 0.0, *drift, (drift[2] < 0) if applies else None,
            "" if not applies or drift[2] < 0 else f"every x >= {n}"))
    if lam > lam_star:
        checks.append(ChainStatement("Theorem 1", "lambda > lambda* => no scheduler is stable: drift "
                                 "> 0 for large x", 0.0, *drift, drift[1] > 0,
                                 "" if drift[1] > 0 else f"every x >= {n}"))
    return info, checks
