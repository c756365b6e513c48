"""The figures of a replayed run and the data behind them: the measured and simulated
distributions of TTFT, TPOT and latency, and the running and waiting requests over time against
the engine's own per-second log.

Definitions, for requests ``j`` with queue time ``a_j``, first-scheduled time ``s_j`` and
last-token time ``f_j`` (measured: ``requests.csv``'s ``queued_s``, ``scheduled_s``,
``last_token_s``; simulated: the replay's ``arrival``, ``t_start``, ``t_finish``):

* the empirical CDF of a metric: ``F(x) = #{j : x_j <= x} / n`` over the ``n`` requests whose
  value is finite (TPOT is undefined for a one-token output);
* running and waiting at time ``t``: ``R(t) = #{j : s_j <= t < f_j}`` and
  ``W(t) = #{j : a_j <= t < s_j}``. Counted from per-request times, a preempted request stays
  running until it finishes; vLLM's scheduler puts it back in its waiting queue;
* in system: ``N(t) = R(t) + W(t) = #{j : a_j <= t < f_j}``, which preemption does not change.

vLLM's stat logger (the run's ``timeseries.csv``) records its running and waiting queues at the
last iteration of each one-second tick ``t_k``, on a clock that starts when the logger is made
(engine start-up), not at the first queue time. :func:`logger_offset` puts the ticks on the
requests' clock: the offset ``d`` minimising ``sum_k |R_k + W_k - N(t_k - d)|`` (measured ``N``),
searched on a grid of :data:`STEP` seconds over the :data:`WINDOW` seconds up to the first tick
whose prompt throughput is positive (the first request is queued and scheduled in it or in the
tick before).

References
----------
vllm-project/vllm ``vllm/v1/core/sched/scheduler.py`` (``make_stats``: ``num_running_reqs =
len(self.running)``, ``num_waiting_reqs = len(self.waiting)``; ``_preempt_request`` moves a
request from ``running`` back to ``waiting``); casys-kaist/LLMServingSim ``bench/core/stat_logger.py``
(one row per tick, the last iteration's scheduler stats), the source of ``timeseries.csv``
(``theory/data/runs/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stability.serving.replay import Replay
from theory.io import atomic_write_csv
from theory.validation.serving_io import check_increasing, read_columns

METRICS = ("ttft", "tpot", "latency")
SOURCES = ("measured", "llmq")
STEP = 1e-3  # the offset search's grid (seconds)
WINDOW = 2.0  # seconds searched before the first tick with prompt throughput

REQUESTS_COLUMNS = {
    "request_id": "the request's row of the run's trace.csv; rows in the engine's queue order",
    **{f"{src}_{m}": f"{m} of the request, {'measured (vLLM)' if src == 'measured' else 'llmq replay'}; "
       "seconds; empty: undefined (tpot of a one-token output). The figure's CDF panels plot the "
       "empirical CDF of each column" for m in METRICS for src in SOURCES},
    "llmq_preemptions": "times the replay preempted the request (recompute)",
}
QUEUES_COLUMNS = {
    "t": "seconds on the requests' clock (from the first queue time): vLLM's logger ticks shifted by "
         "the run's logger_offset_s, then one-second steps to the end of the replay",
    "vllm_running": "running requests vLLM's stat logger recorded at the tick (timeseries.csv); empty "
                    "past its last tick or where the run has no log",
    "vllm_waiting": "waiting requests vLLM's stat logger recorded at the tick; empty as vllm_running",
    "measured_running": "#{j: scheduled_s <= t < last_token_s} over the measured requests",
    "measured_waiting": "#{j: queued_s <= t < scheduled_s} over the measured requests",
    "llmq_running": "#{j: t_start <= t < t_finish} over the replay's requests",
    "llmq_waiting": "#{j: arrival <= t < t_start} over the replay's requests",
}
_READ_REQUESTS = {"request_id": ("int", 0), **{f"{s}_{m}": ("float?", 0.0) for m in METRICS for s in SOURCES},
                  "llmq_preemptions": ("int", 0)}
_READ_QUEUES = {"t": ("float", -np.inf), "vllm_running": ("int?", 0), "vllm_waiting": ("int?", 0),
                **{c: ("int", 0) for c in QUEUES_COLUMNS if c.startswith(("measured", "llmq"))}}


@dataclass(frozen=True)
class Queues:
    """Running and waiting requests over time (module docstring), on the requests' clock.

    Attributes
    ----------
    t : numpy.ndarray
        Times (seconds from the first queue time).
    offset : float or None
        The logger's offset (:func:`logger_offset`); None where the run has no running/waiting log.
    counts : dict of numpy.ndarray
        :data:`QUEUES_COLUMNS` but ``t``, each at ``t`` (``vllm_*``: NaN where not logged).
    """

    t: np.ndarray
    offset: float | None
    counts: dict


def cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of the finite ``values``: the sorted values and ``F`` at each."""
    v = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    return v, np.arange(1, v.size + 1) / v.size


def counts_at(t: np.ndarray, arrival: np.ndarray, start: np.ndarray, finish: np.ndarray) -> tuple:
    """``(R(t), W(t))`` of the module docstring at each time of ``t``."""
    def up_to(x):
        return np.searchsorted(np.sort(x), t, side="right")

    scheduled = up_to(start)
    return scheduled - up_to(finish), up_to(arrival) - scheduled


def logger_offset(log: dict, arrival: np.ndarray, finish: np.ndarray) -> float:
    """The offset of vLLM's logger clock from the requests' (module docstring), seconds."""
    ticks = np.asarray(log["t"], dtype=float)
    logged = np.asarray(log["running"]) + np.asarray(log["waiting"])
    first = ticks[np.argmax(np.asarray(log["prompt_throughput"]) > 0)]
    grid = first - np.arange(0.0, WINDOW + STEP / 2, STEP)[::-1]
    x = ticks[None, :] - grid[:, None]
    in_system = np.searchsorted(np.sort(arrival), x, side="right") - np.searchsorted(np.sort(finish), x,
                                                                                       side="right")
    best = grid[np.argmin(np.abs(in_system - logged[None, :]).sum(axis=1))]
    return round(float(best), 9)  # the grid's value, without the float noise of its construction


def queues(rep: Replay) -> Queues:
    """The measured, logged and simulated queues of ``rep`` over time (module docstring)."""
    rq, got = rep.run.requests, rep.result.requests
    origin = float(rq.arrival[0])
    a, s, f = rq.arrival - origin, rq.scheduled - origin, rq.last_token - origin
    log = rep.run.timeseries if rep.run.timeseries is not None and "running" in rep.run.timeseries else None
    end = max(float(np.max(f)), float(np.max(got["t_finish"])))
    offset = None if log is None else logger_offset(log, a, f)
    ticks = np.empty(0) if log is None else np.asarray(log["t"], dtype=float) - offset
    last = ticks[-1] if ticks.size else 0.0
    t = np.concatenate([ticks, last + np.arange(1.0, max(end - last, 0.0) + 2.0)])
    counts = {}
    for name in ("running", "waiting"):
        logged = np.full(t.size, np.nan)
        if log is not None:
            logged[:ticks.size] = log[name]
        counts[f"vllm_{name}"] = logged
    counts["measured_running"], counts["measured_waiting"] = counts_at(t, a, s, f)
    counts["llmq_running"], counts["llmq_waiting"] = counts_at(t, got["arrival"], got["t_start"],
                                                               got["t_finish"])
    return Queues(t, offset, counts)


def per_request(rep: Replay) -> dict:
    """The columns of ``serving_<run>_requests.csv`` (:data:`REQUESTS_COLUMNS`)."""
    cols = {"request_id": rep.run.requests.request_id}
    for m in METRICS:
        cols[f"measured_{m}"], cols[f"llmq_{m}"] = rep.measured[m], rep.predicted[m]
    cols["llmq_preemptions"] = rep.result.requests["preemptions"].astype(np.int64)
    return cols


def _cells(a: np.ndarray, integer: bool = False) -> list:
    """CSV cells of ``a``: empty where not finite; integers written as such where ``integer``."""
    return ["" if isinstance(x, float) and not np.isfinite(x) else int(x) if integer else x
            for x in np.asarray(a).tolist()]


def write_data(rep: Replay, q: Queues, out: Path) -> list[Path]:
    """``serving_<run>_requests.csv`` and ``serving_<run>_queues.csv``, each with its column dictionary."""
    name = rep.run.name
    queue_cols = {"t": _cells(q.t), **{k: _cells(v, integer=True) for k, v in q.counts.items()}}
    return [atomic_write_csv(out / f"serving_{name}_requests.csv",
                             {k: _cells(v) for k, v in per_request(rep).items()}, REQUESTS_COLUMNS),
            atomic_write_csv(out / f"serving_{name}_queues.csv", queue_cols, QUEUES_COLUMNS)]


def read_requests(path: str | Path) -> dict[str, np.ndarray]:
    """``serving_<run>_requests.csv`` read back strictly: every column, every cell checked (NaN: empty)."""
    return read_columns(Path(path), _READ_REQUESTS)


def read_queues(path: str | Path) -> Queues:
    """``serving_<run>_queues.csv`` read back strictly (times increasing; counts integers >= 0)."""
    path = Path(path)
    c = read_columns(path, _READ_QUEUES)
    check_increasing(path, c, "t", strict=True)
    counts = {k: np.where(v < 0, np.nan, v) if k.startswith("vllm") else v for k, v in c.items() if k != "t"}
    return Queues(c["t"], None, counts)


def figure(rep: Replay, q: Queues):
    """The run's figure: the three CDFs, measured and simulated, and the running and waiting
    requests over time (vLLM's log, the measured requests' count, llmq's)."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 6.4))
    grid = fig.add_gridspec(2, 6)
    for k, m in enumerate(METRICS):
        ax = fig.add_subplot(grid[0, 2 * k: 2 * k + 2])
        ax.plot(*cdf(rep.measured[m]), "-", label="measured (vLLM)")
        ax.plot(*cdf(rep.predicted[m]), "--", label="llmq")
        ax.set(xlabel=f"{m} (s)", ylabel="fraction of requests", title=f"{m} CDF")
        ax.legend(fontsize=8)
    for k, name in enumerate(("running", "waiting")):
        ax = fig.add_subplot(grid[1, 3 * k: 3 * k + 3])
        if q.offset is not None:
            ax.plot(q.t, q.counts[f"vllm_{name}"], "-", lw=1.6, label="vLLM's log (timeseries.csv)")
        ax.plot(q.t, q.counts[f"measured_{name}"], ":", label="measured requests' times")
        ax.plot(q.t, q.counts[f"llmq_{name}"], "--", label="llmq")
        ax.set(xlabel="time from the first queued request (s)", ylabel="requests", title=name)
        ax.legend(fontsize=8)
    shift = "" if q.offset is None else f"; vLLM's log ticks moved by {-q.offset:+.3f} s (logger_offset)"
    fig.suptitle(f"{rep.run.name}: measured vs llmq{shift}")
    fig.tight_layout()
    return fig


def plot(rep: Replay, q: Queues, path: Path) -> Path:
    """:func:`figure` written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure(rep, q)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
