"""Measured against predicted: the latency statistics of a replayed run, each with its error.

For every metric (TTFT, TPOT, latency: :mod:`theory.validation.serving_runs`) and statistic (mean,
median, 90th and 99th percentile, computed as vLLM's benchmark client computes them: ``np.mean``,
``np.percentile`` over the requests), a :class:`Row` holds the measured value, llmq's prediction
and its relative error ``predicted / measured - 1``, and the prediction the source publishes for
its own simulator on the same run (LLMServingSim 2.0) with that error, so both stand side by side.
A run that cannot be replayed (:func:`stability.serving.replay.unsupported`) gets its reason. A run
whose source publishes only aggregates (no per-request measurement: the H100 Llama-3.1-70B point)
is replayed from its trace and scored on the statistics published for the measured engine alone
(:data:`theory.validation.serving_published.MEASURED`: means of TTFT and TPOT), each row saying so
through :attr:`RunScore.available`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stability.serving.replay import Replay, ReplaySpec, replay, unsupported
from theory.validation.serving_published import MEASURED, SIMULATOR
from theory.validation.serving_runs import ServingRun, load_run, shipped_runs

METRICS = ("ttft", "tpot", "latency")
PER_REQUEST = "per request"
AGGREGATES = "published means only (no per-request measurement)"
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
    available: str = PER_REQUEST


def statistic(values: np.ndarray, name: str) -> float:
    """``name`` (``mean`` or ``pNN``) of ``values`` over the finite entries, as vLLM's client computes it."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.mean(v)) if name == "mean" else float(np.percentile(v, float(name[1:])))


def _published(run: ServingRun, framework: str, metric: str, stat: str) -> float | None:
    """The statistic ``framework`` published for ``run`` (None where it published none)."""
    for f in run.published:
        if (f.framework, f.metric, f.statistic) == (framework, metric, stat):
            return f.value
    return None


def _row(rep: Replay, metric: str, stat: str, measured: float) -> Row:
    """The row of ``stat`` of ``metric``: ``measured`` beside llmq's and the published prediction."""
    p, pub = statistic(rep.predicted[metric], stat), _published(rep.run, SIMULATOR, metric, stat)
    return Row(rep.run.name, metric, stat, measured, p, p / measured - 1, pub,
               None if pub is None else pub / measured - 1)


def score_run(spec: ReplaySpec) -> RunScore:
    """Replay ``spec.run`` and score every statistic (see the module docstring)."""
    run = load_run(spec.run)
    why = unsupported(run)
    if why:
        return RunScore(run.name, run.gpu, run.model, skipped=why)
    rep = replay(spec)
    if rep.measured is None:  # aggregates only: the statistics published for the measured engine
        pairs = [(m, s, _published(run, MEASURED, m, s)) for m in METRICS for s in STATS]
        rows = tuple(_row(rep, m, s, v) for m, s, v in pairs if v is not None)
        available, kept = AGGREGATES, None
    else:
        rows = tuple(_row(rep, m, s, statistic(rep.measured[m], s)) for m in METRICS for s in STATS)
        available, kept = PER_REQUEST, rep
    return RunScore(run.name, run.gpu, run.model, rows, rep.kv_blocks, run.kv_cache.get("num_gpu_blocks"),
                    rep.wall_s, int(rep.result.counters()["n_preempt"]), replay=kept, available=available)


def score_runs(scheduler: str = "vllm_v1", runs: tuple[str, ...] | None = None) -> list[RunScore]:
    """Every shipped run (or ``runs``) replayed on ``scheduler`` and scored."""
    return [score_run(ReplaySpec(name, scheduler)) for name in (runs or tuple(shipped_runs()))]
