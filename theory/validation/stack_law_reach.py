"""Can any stack law meet the error targets on the rows it is fitted on? A mixed-integer program.

The least-squares law of :func:`theory.validation.stack_law.fit_stack_law` minimises the squared relative
error, not the median or the 90th percentile the targets limit, so its in-sample figures are not
the least the law's form reaches. This module decides the question itself: for the rows of one GPU,
in groups that each get a law of their own (GPU x model x TP x kind), is there one law per group,
``T = c + a_compute C + a_allreduce R + a_large L`` with ``c >= 0``, ``a_compute, a_allreduce >= 1``
and ``a_large >= 0``, whose pooled median and p90 of ``|T / m - 1|`` meet the limits?

Each row ``i`` gets two binaries, ``z_i`` (allowed beyond the p90 limit) and ``y_i`` (beyond the
median limit), with ``|B_i x - 1| <= limit + M_i z_i`` (``B_i``: the row's parts over its measured
time) and at most as many rows beyond each limit as the quantile allows. A parameter above
``(1 + limit) / min_i B_ij`` puts every row it touches beyond both limits, so capping it there
loses no solution, and ``M_i = sum_j cap_j B_ij + 1`` then never binds a row allowed beyond.
numpy's quantile interpolates (``method="linear"``): ``q`` at ``pos = q (n - 1)`` is at most a limit
if no more than ``n - ceil(pos) - 1`` rows are beyond it (sufficient), and only if no more than
``n - floor(pos) - 1`` are (necessary). Under the necessary counts at the limits, an infeasible
program proves that no laws reach the targets (within the solver's tolerances). Witnesses are sought a hair
inside the limits (:data:`WITNESS_MARGIN`), first under the necessary counts, then under the
sufficient ones, and scored exactly (numpy's median and percentile, as
:class:`theory.validation.errors.ErrorStats`): laws that meet both limits make the targets reachable.

References
----------
Eq. 7; :class:`theory.validation.stack_law.StackLaw`. Solver: :func:`scipy.optimize.milp` (HiGHS).
"""

from __future__ import annotations

import math
import os
import sys
from contextlib import contextmanager

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

SOLVER = "scipy.optimize.milp (HiGHS)"
OPTIMAL, INFEASIBLE = 0, 2  # scipy.optimize.milp's status codes
WITNESS_MARGIN = 1e-6  # the witnesses' limits lie this far inside the targets


def beyond_allowed(n: int, q: float, necessary: bool) -> int:
    """The most of ``n`` errors that may exceed a limit for their ``q``-quantile (numpy's linear
    interpolation) to be at most the limit: ``n - floor(q (n - 1)) - 1`` is necessary, ``n -
    ceil(q (n - 1)) - 1`` sufficient (the order statistics the quantile interpolates)."""
    pos = q * (n - 1)
    return n - (math.floor(pos) if necessary else math.ceil(pos)) - 1


def _caps(design: np.ndarray, limit: float, lower) -> np.ndarray:
    """Each parameter's cap: beyond ``(1 + limit) / min_i B_ij`` every row it touches is beyond the
    limit; a column of zeros is fixed at its lower bound."""
    caps = np.array(lower, dtype=float)
    for j in range(design.shape[1]):
        touched = design[:, j] > 0
        if touched.any():
            caps[j] = max(lower[j], (1.0 + limit) / float(design[touched, j].min()))
    return caps


def reach_in_sample(groups: list[tuple[np.ndarray, np.ndarray]], median_limit: float,
                    p90_limit: float, lower: tuple[float, ...], time_limit_s: float = 120.0) -> dict:
    """Whether one stack law per group meets both limits on the pooled rows of ``groups``.

    Parameters
    ----------
    groups : list of (parts, measured)
        Per group, its rows' Eq. 7 parts as an ``(n, 3)`` array of ``(compute, allreduce, large)``
        (:func:`theory.validation.batches.batch_parts`) and their measured seconds.
    median_limit, p90_limit : float
        The limits on the pooled median and 90th percentile of ``|T / m - 1|``.
    lower : tuple of float
        The lower bounds of ``(c, a_compute, a_allreduce, a_large)``, each >= 0
        (:attr:`theory.validation.stack_law.StackLaw.LOWER`).
    time_limit_s : float
        The solver's time limit per program; a program it does not settle leaves the verdict
        ``"undecided"``.

    Returns
    -------
    dict
        ``verdict``: ``"reachable"`` (laws found that meet both limits, scored exactly: their
        ``median`` and ``p90``), ``"unreachable"`` (no laws of the form meet both; ``median`` and
        ``p90`` are then ``None``) or ``"undecided"``; the ``n`` rows pooled and the solver.
    """
    designs = [np.column_stack([np.ones(len(m)), np.asarray(p, dtype=float)]) / np.asarray(m, float)[:, None]
               for p, m in groups]
    n = sum(len(d) for d in designs)
    out = {"verdict": "undecided", "n": n, "median": None, "p90": None, "solver": SOLVER}
    # witnesses a hair inside the limits, so that the solver's feasibility tolerance cannot put a
    # row past a limit when they are scored exactly; the proof of "unreachable" at the limits
    for necessary, inside in ((True, WITNESS_MARGIN), (True, 0.0), (False, WITNESS_MARGIN)):
        res = _solve(designs, median_limit - inside, p90_limit - inside, lower, necessary, time_limit_s)
        if res.status == INFEASIBLE and not inside:
            return out | {"verdict": "unreachable"}
        if res.status != OPTIMAL or not inside:
            continue
        x = res.x[:4 * len(designs)]
        errors = np.concatenate([np.abs(d @ x[4 * g:4 * g + 4] - 1.0) for g, d in enumerate(designs)])
        median, p90 = float(np.median(errors)), float(np.percentile(errors, 90))
        if median <= median_limit and p90 <= p90_limit:
            return out | {"verdict": "reachable", "median": median, "p90": p90}
    return out


def _solve(designs: list[np.ndarray], median_limit: float, p90_limit: float, lower, necessary: bool,
           time_limit_s: float):
    """The feasibility program of the module docstring (:func:`scipy.optimize.milp`'s result)."""
    n, k = sum(len(d) for d in designs), 4 * len(designs)
    caps = [_caps(d, max(median_limit, p90_limit), lower) for d in designs]
    rows, cols, vals, upper = [], [], [], []
    row = first = 0
    for g, (d, cap) in enumerate(zip(designs, caps, strict=True)):
        big = d @ cap + 1.0
        for i in range(len(d)):
            for limit, offset in ((p90_limit, k), (median_limit, k + n)):
                for sign in (1.0, -1.0):  # sign (B_i x - 1) <= limit + M_i (binary)
                    rows += [row] * 5
                    cols += [4 * g + j for j in range(4)] + [offset + first + i]
                    vals += [*(sign * d[i]), -big[i]]
                    upper.append(limit + sign)
                    row += 1
        first += len(d)
    fit = coo_matrix((vals, (rows, cols)), shape=(row, k + 2 * n)).tocsr()
    beyond = np.zeros((2, k + 2 * n))
    beyond[0, k:k + n], beyond[1, k + n:] = 1.0, 1.0
    allowed = [beyond_allowed(n, 0.9, necessary), beyond_allowed(n, 0.5, necessary)]
    bounds = Bounds(np.r_[np.tile(lower, len(designs)), np.zeros(2 * n)],
                    np.r_[np.concatenate(caps), np.ones(2 * n)])
    with _solver_notes_to_devnull():
        return milp(np.zeros(k + 2 * n), integrality=np.r_[np.zeros(k), np.ones(2 * n)], bounds=bounds,
                    constraints=[LinearConstraint(fit, -np.inf, upper),
                                 LinearConstraint(beyond, -np.inf, allowed)],
                    options={"time_limit": time_limit_s})


@contextmanager
def _solver_notes_to_devnull():
    """Point file descriptor 1 at ``/dev/null`` while HiGHS runs: it prints notes of its own there
    (``HighsMipSolverData::transformNewIntegerFeasibleSolution``, scipy 1.17) whatever its options,
    and a command's standard output must stay its own (``llmq validate --json``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
