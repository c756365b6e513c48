"""Independent jobs of one validation run (the profile loads, the calibrations, the figures) spread
over worker processes.

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
import pickle
import signal
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from theory.errors import FieldError, LlmqError
from theory.profiles import Profile, load_profile

# the thread counts of the BLAS libraries numpy may load (OpenBLAS, its OpenMP build, MKL)
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PRELOAD = [
    "theory.validation.gemm_fit",
    "theory.validation.report",
    "matplotlib.pyplot",
]  # imported once, in the forkserver


class Job(Protocol):
    """What :func:`start` runs: ``run()`` computes the result; ``cost`` orders the jobs."""

    cost: float

    def run(self):
        """The job's result (picklable)."""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Raised:
    """An error a job raised in a worker that does not survive pickling (an error of
    :mod:`theory.errors` whose ``__init__`` takes its fields): its message, raised again here as a
    :class:`theory.errors.LlmqError` (what the command line reports, exit 2)."""

    def __init__(self, message: str):
        self.message = message


def _run(job: Job):
    try:
        return job.run()
    except LlmqError as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:  # e.g. FieldError's three-argument __init__
            return _Raised(str(exc))
        raise


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
            if isinstance(self._done[index], _Raised):
                self.close()
                raise LlmqError(self._done[index].message)
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


@dataclass(frozen=True)
class ProfileJob:
    """:func:`theory.profiles.load_profile` of ``name`` (a shipped profile's name or a path), as a job."""

    name: str

    @property
    def cost(self) -> float:
        from theory.profiles import shipped_profiles

        path = Path(shipped_profiles().get(self.name, self.name))
        return float(path.stat().st_size) if path.is_file() else 0.0

    def run(self) -> Profile:
        return load_profile(self.name)


def load_profiles(names: dict[str, str], workers: int = 1) -> dict[str, Profile]:
    """``{key: load_profile(name)}`` for ``names`` (``{key: name or path}``), on ``workers`` processes."""
    keys = list(names)
    return dict(zip(keys, start([ProfileJob(names[k]) for k in keys], workers).results(), strict=True))


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
    "ProfileJob",
    "check_workers",
    "load_profiles",
    "start",
]
