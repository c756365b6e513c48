"""Independent jobs of one validation run (the calibrations, the figures) spread over worker processes.

A job is a picklable object with ``run()`` (a frozen dataclass defined at module level) and
``cost``, a rough measure of its work. :func:`start` hands every job to a pool of ``workers``
processes, the costliest first so that no worker is left with a long job at the end, and returns
a :class:`Pending` whose :meth:`Pending.result` waits for one job's result. Each job is a pure
function of its own inputs (a calibration's random starts are seeded by its settings), so the
results do not depend on the number of workers or on which worker ran which job; with
``workers = 1`` the jobs run in this process, in order, when their results are first asked for.

The pool's processes start from a forkserver with one BLAS thread each (the workers already fill
the cores), ignore SIGINT, and end with the pool: Ctrl-C in this process cancels the jobs not yet
started and stops the pool (:meth:`Pending.close`). Nothing is kept across runs here; the whole
report is (:mod:`theory.validation.kept`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Protocol

from theory.errors import FieldError

# the thread counts of the BLAS libraries numpy may load (OpenBLAS, its OpenMP build, MKL)
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PRELOAD = ["theory.validation.gemm_fit", "theory.validation.report"]  # imported once, in the forkserver


class Job(Protocol):
    """What :func:`start` runs: ``run()`` computes the result; ``cost`` orders the jobs."""

    cost: float

    def run(self):
        """The job's result (picklable)."""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(job: Job):
    return job.run()


class Pending:
    """The results of :func:`start`'s jobs, by index, as they finish."""

    def __init__(self, jobs: Sequence[Job], pool: ProcessPoolExecutor | None, futures: dict[int, Future]):
        self._jobs, self._pool, self._futures = list(jobs), pool, futures
        self._done: dict[int, object] = {}

    def result(self, index: int):
        """The result of job ``index`` (waits for it; runs it here when there is no pool)."""
        if index not in self._done:
            try:
                self._done[index] = (
                    self._futures[index].result() if self._futures else self._jobs[index].run()
                )
            except BaseException:
                self.close()
                raise
        return self._done[index]

    def results(self) -> list:
        """Every job's result, in the order of the jobs; the pool is then stopped."""
        out = [self.result(i) for i in range(len(self._jobs))]
        self.close()
        return out

    def close(self) -> None:
        """Cancel the jobs not started and stop the pool (no-op without one)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def check_workers(workers) -> int:
    """``workers`` if it is an integer >= 1, else a :class:`theory.errors.FieldError`."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise FieldError("workers", workers, "an integer >= 1 (worker processes)")
    return workers


def start(jobs: Sequence[Job], workers: int = 1) -> Pending:
    """Hand ``jobs`` to ``min(workers, len(jobs))`` worker processes, the costliest first (module
    docstring); with one worker (or one job) they run in this process when asked for."""
    workers = min(check_workers(workers), len(jobs))
    if workers <= 1:
        return Pending(jobs, None, {})
    saved = {k: os.environ.get(k) for k in BLAS_THREADS}
    os.environ.update({k: v or "1" for k, v in saved.items()})  # a thread count set by the user wins
    try:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_ignore_sigint)
        order = sorted(range(len(jobs)), key=lambda i: (-jobs[i].cost, i))
        futures = {i: pool.submit(_run, jobs[i]) for i in order}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
    return Pending(jobs, pool, futures)


__all__ = [
    "BLAS_THREADS",
    "Job",
    "Pending",
    "check_workers",
    "start",
]
