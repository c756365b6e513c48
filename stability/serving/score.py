"""Measured against predicted: the latency statistics of a replayed run, each with its error.

For every metric (TTFT, TPOT, latency: :mod:`theory.validation.serving_runs`) and statistic (mean,
median, 90th and 99th percentile, computed as vLLM's benchmark client computes them: ``np.mean``,
``np.percentile`` over the requests), a :class:`Row` holds the measured value, llmq's prediction
and its relative error ``predicted / measured - 1``, and the prediction the source publishes for
its own simulator on the same run (LLMServingSim 2.0) with that error, so both stand side by side.
A run that cannot be replayed (:func:`stability.serving.replay.unsupported`) gets its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stability.serving.replay import Replay, ReplaySpec, replay, unsupported
from theory.validation.serving_published import SIMULATOR
from theory.validation.serving_runs import load_run, shipped_runs

METRICS = ("ttft", "tpot", "latency")
STATS = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True)
class Row:
    """One statistic of one metric of one run (seconds; errors as fractions, None where absent)."""

    run: str
    metric: str
    statistic: str
    measured: float
    predicted: float
    error: float
    published: float | None
    published_error: float | None


@dataclass(frozen=True)
class RunScore:
    """The score of one run: its rows, the KV blocks (llmq's and vLLM's), the simulation's wall time
    and preemptions, or why it was not replayed (``skipped``)."""

    run: str
    gpu: str
    model: str | None
    rows: tuple[Row, ...] = ()
    kv_blocks: int | None = None
    vllm_kv_blocks: int | None = None
    wall_s: float | None = None
    preemptions: int | None = None
    skipped: str | None = None
    replay: Replay | None = field(default=None, repr=False, compare=False)


def statistic(values: np.ndarray, name: str) -> float:
    """``name`` (``mean`` or ``pNN``) of ``values`` over the finite entries, as vLLM's client computes it."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.mean(v)) if name == "mean" else float(np.percentile(v, float(name[1:])))


def _published(rep: Replay, metric: str, stat: str) -> float | None:
    for f in rep.run.published:
        if (f.framework, f.metric, f.statistic) == (SIMULATOR, metric, stat):
            return f.value
    return None


def score_run(spec: ReplaySpec) -> RunScore:
    """Replay ``spec.run`` and score every statistic (see the module docstring)."""
    run = load_run(spec.run)
    why = unsupported(run)
    if why:
        return RunScore(run.name, run.gpu, run.model, skipped=why)
    rep = replay(spec)
    rows = []
    for metric in METRICS:
        for stat in STATS:
            m = statistic(rep.measured[metric], stat)
            p = statistic(rep.predicted[metric], stat)
            pub = _published(rep, metric, stat)
            rows.append(Row(run.name, metric, stat, m, p, p / m - 1, pub,
                            None if pub is None else pub / m - 1))
    return RunScore(run.name, run.gpu, run.model, tuple(rows), rep.kv_blocks,
                    run.kv_cache.get("num_gpu_blocks"), rep.wall_s,
                    int(rep.result.counters()["n_preempt"]), replay=rep)


def score_runs(scheduler: str = "vllm_v1", runs: tuple[str, ...] | None = None) -> list[RunScore]:
    """Every shipped run (or ``runs``) replayed on ``scheduler`` and scored."""
    return [score_run(ReplaySpec(name, scheduler)) for name in (runs or tuple(shipped_runs()))]
