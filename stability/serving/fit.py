"""The engine's host time per step (``engine_step_s``) fitted on serving runs, scored on a run
left out of the fit.

The fit is a grid search: each candidate value is replayed on every training run (vLLM v1's
scheduler, :func:`stability.serving.replay.replay`) and scored by the mean over runs and over the
mean and p90 of TTFT, TPOT and latency of ``|predicted / measured - 1|``; the least wins. Scoring a
run with the value fitted on the others (:func:`held_out`) keeps the term off the run it is scored
on.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 7 (the constant per batch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.errors import FieldError

STATISTICS = ("mean", "p90")
METRICS = ("ttft", "tpot", "latency")
GRID_S = tuple(round(k * 1e-4, 6) for k in range(0, 21))  # 0 to 2 ms per step, in 0.1 ms


def _stat(x: np.ndarray, statistic: str) -> float:
    return float(np.mean(x)) if statistic == "mean" else float(np.percentile(x, 90))


def replay_error(run: str, engine_step_s: float) -> float:
    """The mean ``|predicted / measured - 1|`` of :data:`STATISTICS` of :data:`METRICS` on ``run``
    replayed with ``engine_step_s`` (the run's CUDA-graph padding as its configuration says)."""
    from stability.serving.replay import EngineCosts, ReplaySpec, replay

    rp = replay(ReplaySpec(run, engine=EngineCosts(engine_step_s=engine_step_s)))
    errs = [abs(_stat(rp.predicted[m], s) / _stat(rp.measured[m], s) - 1)
            for m in METRICS for s in STATISTICS]
    return float(np.mean(errs))


@dataclass(frozen=True)
class StepFit:
    """``engine_step_s`` fitted on ``runs`` (seconds) and the training error at each grid value."""

    runs: tuple[str, ...]
    engine_step_s: float
    errors: dict


def fit_engine_step(runs: tuple[str, ...], grid: tuple[float, ...] = GRID_S) -> StepFit:
    """The grid value of ``engine_step_s`` with the least mean error over ``runs`` (module docstring)."""
    if not runs:
        raise FieldError("runs", runs, "at least one serving run to fit on")
    if not grid or any(isinstance(g, bool) or not isinstance(g, (int, float)) or not g >= 0 for g in grid):
        raise FieldError("grid", grid, "a non-empty list of numbers >= 0 (seconds per step)")
    errors = {float(g): float(np.mean([replay_error(r, float(g)) for r in runs])) for g in grid}
    best = min(errors, key=lambda g: (errors[g], g))
    return StepFit(tuple(runs), best, errors)


def held_out(runs: tuple[str, ...], grid: tuple[float, ...] = GRID_S) -> dict:
    """Per run: ``engine_step_s`` fitted on the other runs (leave one out)."""
    if len(runs) < 2:
        raise FieldError("runs", runs, "at least two serving runs (one held out, the others fitted on)")
    return {r: fit_engine_step(tuple(o for o in runs if o != r), grid).engine_step_s for r in runs}
