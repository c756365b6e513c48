"""Sweep tasks: plain dicts that run anywhere, cached by content, on an in-process, process-pool
or Dask executor.

A task is ``{"kind": ..., ...}`` with every input spelled out (``TASK_KINDS`` says which function
computes each kind: the points of ``llmq region`` in :mod:`stability.points`, a Section 7 point in
:mod:`stability.slai.study`); its result is a dict. :func:`task_key` hashes the task with the
source of ``theory/`` and ``stability/`` (GPU and model files are named by their content),
and :func:`with_seed` derives the task's seed the same way, so a result depends on the task
alone: not on the worker, the order, or the number of workers. :class:`Cache` keeps results as
``<dir>/<key>.json`` written atomically, so an interrupted sweep loses only the tasks in flight.

One runner serves every sweep: ``llmq region``, ``llmq slai`` and ``llmq plan`` (:mod:`stability.plan`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from theory.builder import file_digest
from theory.errors import FieldError, LlmqError
from theory.io import atomic_write_text
from theory.version import source_digest


def code_version() -> str:
    """Digest of the code and data results depend on: ``theory`` and ``stability`` (the layering
    says nothing else can change a result), see :func:`theory.version.source_digest`."""
    return source_digest("theory", "stability")


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _identity(task: dict) -> str:
    """The task as canonical text, with GPU and model files named by their content, not their path."""
    named = {k: file_digest(task[k]) for k in ("gpu_file", "model_file") if task.get(k)}
    return _canonical({**task, **named})


def with_seed(task: dict, base_seed: int) -> dict:
    """The task with its seed derived from its content and the sweep's base seed (so a result
    does not depend on which worker runs it, or when, or where a GPU file lies)."""
    body = {k: v for k, v in task.items() if k != "seed"}
    seed = int.from_bytes(hashlib.sha256(f"{base_seed}|{_identity(body)}".encode()).digest()[:4], "big")
    return {**body, "seed": seed}


def task_key(task: dict) -> str:
    """Cache key of a task: its identity and the code version."""
    return hashlib.sha256(f"{code_version()}|{_identity(task)}".encode()).hexdigest()[:24]


# task kind -> "module:function" that computes it (imported where the task runs)
TASK_KINDS = {
    "sim": "stability.points:run_sim",
    "n_min": "stability.points:run_n_min",
    "dtmc": "stability.points:run_dtmc",
    "slai": "stability.slai.study:run_point_task",
    "plan": "stability.plan:run_plan_task",
    "plan_mixed": "stability.plan_mixed:run_mixed_task",
}


def run_task(task: dict) -> dict:
    """Run one task by its ``kind`` (see ``TASK_KINDS``) and return its result dict, timed."""
    from importlib import import_module

    t0 = time.perf_counter()
    kind = task.get("kind")
    if kind not in TASK_KINDS:
        raise FieldError("task kind", kind, ", ".join(TASK_KINDS))
    module, _, name = TASK_KINDS[kind].partition(":")
    out = getattr(import_module(module), name)(task)
    return {**out, "elapsed_s": time.perf_counter() - t0}


class Cache:
    """Task results as ``<dir>/<key>.json``, written atomically."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def get(self, key: str) -> dict | None:
        path = self.dir / f"{key}.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))["result"]
        except (OSError, ValueError, KeyError):
            return None  # unreadable: redo it

    def put(self, key: str, task: dict, result: dict) -> None:
        atomic_write_text(self.dir / f"{key}.json", json.dumps({"task": task, "result": result}))


class LocalExecutor:
    """Runs tasks in this process (``workers = 1``) or on a process pool."""

    def __init__(self, workers: int = 1):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise FieldError("workers", workers, "an integer >= 1")
        self.workers = workers
        self._pool = None

    def map_unordered(self, tasks: list[dict]) -> Iterator[tuple[int, dict]]:
        if self.workers == 1 or len(tasks) <= 1:
            for k, task in enumerate(tasks):
                yield k, run_task(task)
            return
        from concurrent.futures import as_completed

        pool = self._get_pool()
        futures = {pool.submit(run_task, task): k for k, task in enumerate(tasks)}
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def _get_pool(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # forkserver: workers never inherit this process's threads (tqdm, dask); they import
            # the simulator once, preloaded in the server
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["stability.runner", "stability.sim.simulate"])
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """Runs tasks on a Dask distributed cluster at ``address`` (``tcp://host:port``)."""

    def __init__(self, address: str, timeout: float = 5.0):
        try:
            from distributed import Client
        except ImportError:  # the dist extra is not installed
            raise LlmqError("--dask needs the 'dist' extra: pip install 'llmq[dist]'") from None
        try:
            self.client = Client(address, timeout=f"{timeout}s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise LlmqError(f"dask: cannot reach the scheduler at {address!r} within {timeout:g} s "
                            f"({type(exc).__name__}: {exc})") from None

    def map_unordered(self, tasks: list[dict]) -> Iterator[tuple[int, dict]]:
        from distributed import as_completed

        futures = self.client.map(run_task, tasks, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        try:
            for fut, result in as_completed(futures, loop=self.client.loop, with_results=True):
                yield index[fut.key], result
        finally:
            self.client.cancel(futures)

    def close(self) -> None:
        self.client.close()


class Runner:
    """Runs batches of tasks through the cache and an executor, with a progress bar."""

    def __init__(self, cache: Cache, executor, bar=None, on_result: Callable | None = None,
                 grow_total: bool = True):
        self.cache, self.executor, self.bar, self.on_result = cache, executor, bar, on_result
        self.grow_total = grow_total  # add each batch's size to the bar's total (unknown up front)
        self.computed = self.cached = 0

    def run(self, tasks: list[dict]) -> list[dict]:
        keys = [task_key(t) for t in tasks]
        results: list = [None] * len(tasks)
        todo = []
        for k, key in enumerate(keys):
            hit = self.cache.get(key)
            if hit is not None:
                results[k] = hit
                self.cached += 1
            else:
                todo.append(k)
        if self.bar is not None:
            if self.grow_total:
                self.bar.total = (self.bar.total or 0) + len(tasks)
            self.bar.update(len(tasks) - len(todo))
        for j, result in self.executor.map_unordered([tasks[k] for k in todo]):
            k = todo[j]
            self.cache.put(keys[k], tasks[k], result)
            results[k] = result
            self.computed += 1
            if self.bar is not None:
                self.bar.update(1)
            if self.on_result is not None:
                self.on_result(tasks[k], result)
        return results
