"""The fixed time per engine step: ``eager - graph`` of the steps timed both ways, and the laws
that describe it (item 3 of :mod:`theory.validation.steps`).

A constant fitted on half the rows predicts ``eager = graph + c`` on the other half (two folds,
alternate rows in order of batch size; :func:`fit_constant`), beside the launch overlap law
``eager = max(h, graph + c)`` (:func:`fit_overlap`). ``eager`` is PyTorch launching the measuring
script's forward pass op by op, not a serving engine's per-step overhead.

References
----------
CUDA C++ Programming Guide, "Asynchronous Concurrent Execution";
``benchmarks/device/measure_steps.py`` (how the steps are timed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from theory.errors import FieldError
from theory.validation.errors import Accuracy, Summary
from theory.validation.steps_data import StepRow, StepTable

TOKEN_BANDS = ((1, 16), (17, 128), (129, 512), (513, None))  # rows of the step, inclusive; None: no end
FOLDS = 2  # the constant is fitted on one half of the rows and scored on the other


@dataclass(frozen=True)
class FixedTime:
    """``eager - graph`` per step and the laws that describe it (:mod:`theory.validation.steps`, item 3).

    Attributes
    ----------
    overhead : Summary
        Of ``eager - graph`` (seconds) over every step timed both ways.
    bands : tuple of dict
        Per :data:`TOKEN_BANDS` band of rows: ``low``, ``high`` (``None``: no end) and ``overhead``
        (:class:`theory.validation.errors.Summary`).
    rank_correlation : float or None
        Spearman's rank correlation of ``eager - graph`` with the step's rows.
    constant, overlap : dict
        The two laws: ``folds`` (the fitted values per fold: ``c``, and ``h`` for the overlap law,
        seconds) and ``held_out`` (:class:`theory.validation.errors.Accuracy` of the predicted eager
        time on the rows each fold did not see).
    steps : tuple of dict
        Every step timed both ways, in order of rows: its ``kind``, ``tokens``, ``graph_s``,
        ``eager_s`` and ``fold`` (the half it was held out in).
    """

    overhead: Summary
    bands: tuple[dict, ...]
    rank_correlation: float | None
    constant: dict
    overlap: dict
    steps: tuple[dict, ...] = field(repr=False)


def unpadded_graphs(table: StepTable) -> dict[tuple, StepRow]:
    """The ``graph`` rows run without padding rows, by :meth:`StepRow.key`."""
    return {r.key(): r for r in table.select(mode="graph") if r.unpadded}


def fit_constant(graph, eager) -> float:
    """The ``c`` of ``eager = graph + c`` with the least squared relative error,
    ``sum_i ((graph_i + c) / eager_i - 1)^2``: ``c = sum_i o_i / e_i^2 / sum_i 1 / e_i^2`` with
    ``o_i = eager_i - graph_i``."""
    g, e = np.asarray(graph, dtype=float), np.asarray(eager, dtype=float)
    if not e.size:
        raise FieldError("eager", 0, "one or more steps timed both ways")
    w = 1.0 / e**2
    return float(np.sum((e - g) * w) / np.sum(w))


def fit_overlap(graph, eager) -> tuple[float, float]:
    """``(h, c)`` of ``eager = max(h, graph + c)`` with the least squared relative error over the
    candidates ``h`` in the measured eager times and ``c`` in the measured ``eager - graph`` (an
    exhaustive search: the law is piecewise, and on data it describes exactly both values are
    among the candidates).

    References
    ----------
    The host launches kernels asynchronously while the GPU runs earlier ones (CUDA C++ Programming
    Guide, "Asynchronous Concurrent Execution"), so an eager step lasts the longer of its host
    launch time ``h`` and its GPU time, plus what does not overlap.
    """
    g, e = np.asarray(graph, dtype=float), np.asarray(eager, dtype=float)
    if not e.size:
        raise FieldError("eager", 0, "one or more steps timed both ways")
    hs, cs = np.unique(e), np.unique(e - g)
    pred = np.maximum(hs[:, None, None], g[None, None, :] + cs[None, :, None])
    loss = np.sum((pred / e - 1.0) ** 2, axis=-1)
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return float(hs[i]), float(cs[j])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks ``0 .. n-1`` of ``x``, tied values taking the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size)
    _, group = np.unique(x, return_inverse=True)
    return (np.bincount(group, ranks) / np.bincount(group))[group]


def rank_correlation(x, y) -> float | None:
    """Spearman's rank correlation of ``x`` and ``y``: the Pearson correlation of their ranks, tied
    values taking their mean rank; ``None`` when either is constant.

    References
    ----------
    Spearman (1904), "The proof and measurement of association between two things", Am. J. Psychol.
    15(1); the tie convention of :func:`scipy.stats.spearmanr`.
    """
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def score_fixed(table: StepTable) -> FixedTime:
    """:class:`FixedTime` over every step timed ``eager`` and, unpadded, ``graph``."""
    graph = unpadded_graphs(table)
    both = sorted(((graph[r.key()], r) for r in table.select(mode="eager") if r.key() in graph),
                  key=lambda ge: (ge[0].tokens, ge[0].seconds))
    if not both:
        raise FieldError(f"{table.path}: rows", 0, "one or more steps timed both graph (unpadded) and eager")
    tokens = np.array([g.tokens for g, _ in both])
    g = np.array([g.seconds for g, _ in both])
    e = np.array([e.seconds for _, e in both])
    over = e - g
    bands = tuple({"low": lo, "high": hi,
                   "overhead": Summary.of(over[(tokens >= lo) & (tokens <= (hi or tokens.max()))])}
                  for lo, hi in TOKEN_BANDS)
    rho = rank_correlation(tokens, over) if len(both) > 2 else None
    fold = np.arange(len(both)) % FOLDS
    constant, overlap = {"folds": []}, {"folds": []}
    pred_c, pred_o = np.full(len(both), np.nan), np.full(len(both), np.nan)
    for j in range(FOLDS):
        train, held = fold != j, fold == j
        c = fit_constant(g[train], e[train])
        pred_c[held] = g[held] + c
        h, c2 = fit_overlap(g[train], e[train])
        pred_o[held] = np.maximum(h, g[held] + c2)
        constant["folds"].append({"c": c})
        overlap["folds"].append({"h": h, "c": c2})
    constant["held_out"] = Accuracy.of(e, pred_c)
    overlap["held_out"] = Accuracy.of(e, pred_o)
    steps = tuple({"kind": gr.kind, "tokens": gr.tokens, "graph_s": gr.seconds, "eager_s": er.seconds,
                   "fold": int(f)} for (gr, er), f in zip(both, fold, strict=True))
    return FixedTime(Summary.of(over), bands, rho, constant, overlap, steps)
