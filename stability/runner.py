"""Sweep tasks: typed task objects that run anywhere, cached by content, on an in-process,
process-pool or Dask executor.

A task is any object with ``identity()``, a JSON-able dict with every input spelled out, and
``run()``, its result as a dict (:class:`Task`). Each client module defines its own task types
(frozen dataclasses, most holding the :class:`stability.sim.simulate.Scenario` they run) and
builds them; the runner imports and names none of them: a task travels to a worker pickled, and
the worker imports the task's module from its class. :func:`task_key` hashes the identity with
the source of ``theory/`` and ``stability/`` (input files, GPU and model profiles, traces and CSV
workloads, are named by their content), and :func:`derive_seed` derives a task's seed from its
identity the same way, so a result depends on the task alone: not on the worker, the order, or
the number of workers. :class:`Cache` keeps results as ``<dir>/<key>.json`` written atomically in
strict JSON (non-finite floats tagged, so a result reads back exactly as it was computed), so an
interrupted sweep loses only the tasks in flight; an entry that does not parse or has the wrong
shape counts as missing (a warning says so) and is recomputed.

Dispatch: :meth:`Runner.run` runs a batch of tasks; :meth:`Runner.run_dynamic` runs tasks whose
successors depend on their results (a sweep's bisection) as soon as each finishes, the longest
waiting one first, so that no worker waits for a whole batch to end. Pool workers start from a
forkserver with the simulator imported, and with one BLAS thread each (the workers fill the cores).

Interrupts and crashes: Ctrl-C during a run raises :class:`SweepInterrupted`, which
says how many runs the cache holds (the command line prints it as one line and exits 130). Local
pool workers ignore SIGINT (the parent decides) and watch the parent: a worker whose parent is
gone (``kill -9``) exits within ``WATCH_S`` seconds instead of staying behind.

One runner serves every sweep of the command line (capacity regions, the Section 7 study, the
planner).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
import re
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from theory.builder import file_digest
from theory.errors import FieldError, LlmqError
from theory.io import atomic_write_text, json_load_exact, json_text
from theory.version import source_digest

WATCH_S = 0.5  # how often a pool worker checks that its parent is alive


def code_version() -> str:
    """Digest of the code and data results depend on: ``theory`` and ``stability`` (the layering
    says nothing else can change a result), see :func:`theory.version.source_digest`."""
    return source_digest("theory", "stability")


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


FILE_FIELDS = ("gpu_file", "model_file", "trace")  # fields, at any depth, that name an input file


@runtime_checkable
class Task(Protocol):
    """What the runner runs: ``identity()``, the task's inputs as a JSON-able dict (what its cache
    key and its seed are computed from, and what the cache entry records), and ``run()``, which
    computes its result, a JSON-able dict. Instances must pickle (a worker process or a Dask worker
    runs them): frozen dataclasses defined at module level."""

    def identity(self) -> dict:
        """The task's inputs, every one spelled out."""

    def run(self) -> dict:
        """Compute the task's result."""


def _identity(task: dict) -> str:
    """A task's identity as canonical text, with every input file named by its content, not its
    path: GPU and model files, traces, and CSV workloads (also inside a mixture), at any depth (a
    scenario nested in a task). A file edited in place is a new task."""
    return _canonical(_by_content(task))


def _by_content(obj, key: str | None = None):
    if isinstance(obj, dict):
        return {k: _by_content(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_by_content(v) for v in obj]
    if isinstance(obj, str) and key in FILE_FIELDS and Path(obj).is_file():
        return f"sha256:{file_digest(obj)}"
    if isinstance(obj, str) and key == "workload":
        from theory.workload import csv_paths

        for path in sorted(csv_paths(obj), key=len, reverse=True):  # a.csv inside aa.csv: longest first
            if Path(path).is_file():
                obj = obj.replace(path, f"sha256:{file_digest(path)}")
    return obj


def derive_seed(identity: dict, base_seed: int) -> int:
    """A task's seed: a hash of its identity (less any ``"seed"`` entry) and the sweep's base seed,
    so that a result does not depend on which worker runs it, or when, or where a GPU file lies."""
    body = {k: v for k, v in identity.items() if k != "seed"}
    return int.from_bytes(hashlib.sha256(f"{base_seed}|{_identity(body)}".encode()).digest()[:4], "big")


def task_key(identity: dict) -> str:
    """Cache key of a task's ``identity`` (:meth:`Task.identity`): the identity and the code version."""
    return hashlib.sha256(f"{code_version()}|{_identity(identity)}".encode()).hexdigest()[:24]


def _checked(task) -> Task:
    """``task`` if it is a :class:`Task`, else a :class:`theory.errors.FieldError` naming its type."""
    if not isinstance(task, Task):
        raise FieldError("task", type(task).__name__, "an object with identity() and run() "
                                                      "(stability.runner.Task)")
    return task


RESULT_FIELDS = ("elapsed_s",)  # in every result run_task returns: a cache entry without them is malformed


def run_task(task: Task) -> dict:
    """Run one task (:meth:`Task.run`) and return its result dict, timed (``elapsed_s``)."""
    _checked(task)
    t0 = time.perf_counter()
    out = task.run()
    return {**out, "elapsed_s": time.perf_counter() - t0}


class _Pending:
    """A task handed to an in-process executor: it runs when waited for."""

    def __init__(self, task: Task):
        self.task = task


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep; ``str()`` is the one line to print (how many runs are cached where)."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self.cached = len(list(self.cache_dir.glob("*.json"))) if self.cache_dir.is_dir() else 0
        super().__init__(f"interrupted; {self.cached} runs cached in {self.cache_dir}; rerun the "
                         "same command to resume")


class Cache:
    """Task results as ``<dir>/<key>.json`` (``{"task": ..., "result": {...}}``), written atomically
    in strict JSON; an unreadable or malformed entry is a miss, with a warning."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def get(self, key: str, required: tuple[str, ...] = ()) -> dict | None:
        """The result cached under ``key``, or None; an entry whose result lacks a ``required`` field
        is malformed (a miss, with a warning)."""
        path = self.dir / f"{key}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            return self._bad(path, f"unreadable ({exc})")
        try:
            entry = json_load_exact(text)
        except ValueError as exc:
            return self._bad(path, f"not valid JSON ({exc})")
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            return self._bad(path, 'not of the shape {"task": ..., "result": {...}}')
        missing = [k for k in required if k not in entry["result"]]
        if missing:
            return self._bad(path, f"a result without {', '.join(missing)}")
        return entry["result"]

    @staticmethod
    def _bad(path: Path, why: str) -> None:
        warnings.warn(f"cache entry {path} is {why}: recomputing it", RuntimeWarning, stacklevel=3)
        return None

    def put(self, key: str, identity: dict, result: dict) -> None:
        """Store ``result`` under ``key``, with the ``identity`` of the task it is of."""
        atomic_write_text(self.dir / f"{key}.json",
                          json_text({"task": identity, "result": result}, indent=None, exact=True))


def _watch_parent(parent: int) -> None:
    """Exit this worker as soon as the process ``parent`` is gone (or this worker is re-parented,
    as when the forkserver that started it exits with the parent)."""
    ppid = os.getppid()
    while True:
        time.sleep(WATCH_S)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # the pid now belongs to another user's process
            os._exit(1)
        if os.getppid() != ppid:
            os._exit(1)


def _init_worker(parent: int) -> None:
    """Pool worker start-up: leave SIGINT to the parent, and watch it (:func:`_watch_parent`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="llmq-watch-parent").start()


# the thread counts of the BLAS libraries numpy may load (OpenBLAS, its OpenMP build, MKL)
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Environment under which the forkserver starts, and with it every pool worker: one BLAS
    thread each. The workers already keep every core busy; a BLAS library's own threads would
    spin against them (on a loaded machine, many times longer for the dot products of one T_bar^R
    with OpenBLAS's default threads than with one). A thread count set by the user wins."""
    saved = {k: os.environ.get(k) for k in BLAS_THREADS}
    os.environ.update({k: v or "1" for k, v in saved.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


class LocalExecutor:
    """Runs tasks in this process (``workers = 1``) or on a process pool."""

    def __init__(self, workers: int = 1):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise FieldError("workers", workers, "an integer >= 1")
        self.workers = workers
        self._pool = None

    @property
    def slots(self) -> int:
        """Tasks to keep handed out: one per worker and one more in the pool's queue, so that no
        worker waits for this process between two tasks."""
        return 1 if self.workers == 1 else self.workers + 1

    def submit(self, task: Task, priority: float = 0.0):
        """Hand ``task`` out (``priority`` is the runner's business here: it hands out the most
        urgent first); a handle for :meth:`wait` (in this process: the task, run there)."""
        if self.workers == 1:
            return _Pending(task)
        return self._get_pool().submit(run_task, task)

    def wait(self, handles: list) -> list[tuple[object, dict]]:
        """Block until at least one of ``handles`` is done; ``(handle, result)`` of those done."""
        if self.workers == 1:
            return [(handles[0], run_task(handles[0].task))]
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_futures

        done, _ = wait_futures(handles, return_when=FIRST_COMPLETED)
        return [(fut, fut.result()) for fut in handles if fut in done]

    def map_unordered(self, tasks: list[Task]) -> Iterator[tuple[int, dict]]:
        """``(index, result)`` of every task of ``tasks``, in the order they finish."""
        if self.workers == 1 or len(tasks) <= 1:
            for k, task in enumerate(tasks):
                yield k, run_task(task)
            return
        from concurrent.futures import as_completed

        pool = self._get_pool()
        futures = {pool.submit(run_task, task): k for k, task in enumerate(tasks)}
        # tasks left over when the consumer stops are cancelled by close(), not here: a future
        # cancelled before close(abort=True) ends the workers makes the pool's manager thread die
        # with an InvalidStateError traceback (CPython gh-107219, fixed in 3.12 by PR #108974)
        for fut in as_completed(futures):
            yield futures[fut], fut.result()

    def _get_pool(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            from multiprocessing import forkserver

            # forkserver: workers never inherit this process's threads (tqdm, dask); they import
            # the simulator once, preloaded in the server
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["stability.runner", "stability.sim.simulate"])
            with _one_blas_thread():
                forkserver.ensure_running()
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                             initializer=_init_worker, initargs=(os.getpid(),))
        return self._pool

    def close(self, abort: bool = False) -> None:
        """Shut the pool down, cancelling the tasks not started; with ``abort`` (an interrupt) stop
        the running tasks at once."""
        if self._pool is not None:
            if abort:  # the executor has no public way to stop a running task: end its processes
                for proc in list((self._pool._processes or {}).values()):
                    proc.terminate()
            self._pool.shutdown(wait=not abort, cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """Runs tasks on a Dask distributed cluster at ``address`` (``tcp://host:port``)."""

    def __init__(self, address: str, timeout: float = 5.0):
        try:
            from distributed import Client
        except ImportError:  # the dist extra is not installed
            raise LlmqError("--dask needs the 'dist' extra: pip install 'llmq[dist]'") from None
        if not str(address).startswith("inproc://"):  # an in-process cluster (tests) has no socket
            _reach(address, timeout)
        try:
            self.client = Client(address, timeout=f"{timeout}s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise LlmqError(f"--dask: cannot connect to the scheduler at {address!r} "
                            f"({type(exc).__name__}: {exc})") from None
        self._finished = None  # distributed.as_completed of the submitted tasks

    slots = math.inf  # the scheduler queues every task and starts them by their priority

    def submit(self, task: Task, priority: float = 0.0):
        """Hand ``task`` to the cluster (higher ``priority`` first); a future for :meth:`wait`."""
        if self._finished is None:
            from distributed import as_completed

            self._finished = as_completed(loop=self.client.loop)
        future = self.client.submit(run_task, task, pure=False, priority=priority)
        self._finished.add(future)
        return future

    def wait(self, handles: list) -> list[tuple[object, dict]]:
        """Block until at least one submitted task is done; ``(handle, result)`` of those done."""
        done = [next(self._finished), *self._finished.next_batch(block=False)]
        return [(fut, fut.result()) for fut in done]

    def map_unordered(self, tasks: list[Task]) -> Iterator[tuple[int, dict]]:
        """``(index, result)`` of every task of ``tasks``, in the order they finish."""
        from distributed import as_completed

        futures = self.client.map(run_task, tasks, pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        try:
            for fut, result in as_completed(futures, loop=self.client.loop, with_results=True):
                yield index[fut.key], result
        finally:
            self.client.cancel(futures)

    def close(self, abort: bool = False) -> None:
        """Disconnect from the scheduler (the cluster keeps running)."""
        self.client.close()


_DASK_ADDRESS = re.compile(r"(?:tcp|tls)://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def _reach(address: str, timeout: float) -> None:
    """Open and close a TCP connection to the scheduler, so that an unreachable one is a clear
    error at once (a :class:`distributed.Client` that fails half-way leaves an 'Exception
    ignored' trace and a hang behind)."""
    import socket

    host, port = parse_dask_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise LlmqError(f"--dask: cannot reach the scheduler at {address!r} within {timeout:g} s "
                        f"({type(exc).__name__}: {exc})") from None


def parse_dask_address(address: str) -> tuple[str, int]:
    """Host and port of a Dask scheduler address ``tcp://HOST:PORT`` (or ``tls://``); a
    :class:`theory.errors.FieldError` for anything else."""
    m = _DASK_ADDRESS.fullmatch(str(address).strip())
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise FieldError("--dask", address, "a scheduler address tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    return m.group(1).strip("[]"), int(m.group(2))


class Runner:
    """Runs batches of tasks through the cache and an executor, with a progress bar."""

    def __init__(self, cache: Cache, executor, bar=None, on_result: Callable | None = None,
                 grow_total: bool = True):
        self.cache, self.executor, self.bar, self.on_result = cache, executor, bar, on_result
        self.grow_total = grow_total  # add each batch's size to the bar's total (unknown up front)
        self.computed = self.cached = 0

    def run(self, tasks: list[Task]) -> list[dict]:
        """The result of every task of ``tasks`` (in their order): from the cache, or computed by the
        executor and cached; ``on_result(task, result)`` after each one computed."""
        keys = [task_key(_checked(t).identity()) for t in tasks]
        results: list = [None] * len(tasks)
        todo = []
        for k, key in enumerate(keys):
            hit = self.cache.get(key, RESULT_FIELDS)
            if hit is not None:
                results[k] = hit
                self.cached += 1
            else:
                todo.append(k)
        if self.bar is not None:
            if self.grow_total:
                self.bar.total = (self.bar.total or 0) + len(tasks)
            self.bar.update(len(tasks) - len(todo))
        try:
            for j, result in self.executor.map_unordered([tasks[k] for k in todo]):
                k = todo[j]
                self.cache.put(keys[k], tasks[k].identity(), result)
                results[k] = result
                self.computed += 1
                if self.bar is not None:
                    self.bar.update(1)
                if self.on_result is not None:
                    self.on_result(tasks[k], result)
        except KeyboardInterrupt:
            self.executor.close(abort=True)
            raise SweepInterrupted(self.cache.dir) from None
        return results

    def run_dynamic(self, start: list[tuple[object, Task]],
                    then: Callable[[object, Task, dict], list[tuple[object, Task]]],
                    cost: Callable[[Task], float] = lambda task: 0.0,
                    on_start: Callable[[object], None] | None = None) -> None:
        """Run the tasks of ``start`` (``(tag, task)`` pairs), and after each one, cached or
        computed, the pairs that ``then(tag, task, result)`` returns, until none is left: a sweep
        whose next runs depend on earlier results goes on without waiting for a whole batch.

        Among the tasks that wait for a worker, the one of highest ``cost(task)`` starts first
        (the longest first, so that no long run is left alone at the end); the executor holds at
        most ``executor.slots`` at a time. A task asked for again while it is waiting or running
        (the same key) runs once, and every tag that asked is told. ``on_start(tag)`` is called
        as a task is handed out. Results do not depend on this order: a task's result is a
        function of the task alone.
        """
        waiting: list = []  # heap of (-cost, order, key)
        tags: dict = {}  # key -> (task, [tags]) of tasks waiting or running
        running: dict = {}  # handle -> key
        ready: list = []  # (tag, task, result) for then()
        order = 0

        def add(pairs) -> None:
            nonlocal order
            for tag, task in pairs:
                key = task_key(_checked(task).identity())
                if key in tags:
                    tags[key][1].append(tag)
                    continue
                hit = self.cache.get(key, RESULT_FIELDS)
                if hit is not None:
                    self.cached += 1
                    if self.bar is not None:
                        self.bar.update(1)
                    ready.append((tag, task, hit))
                    continue
                tags[key] = (task, [tag])
                heapq.heappush(waiting, (-cost(task), order, key))
                order += 1

        try:
            add(start)
            while ready or waiting or running:
                while ready:
                    add(then(*ready.pop(0)))
                while waiting and len(running) < self.executor.slots:
                    priority, _, key = heapq.heappop(waiting)
                    task, asked = tags[key]
                    if on_start is not None:
                        on_start(asked[0])
                    running[self.executor.submit(task, -priority)] = key
                if not running:
                    continue
                for handle, result in self.executor.wait(list(running)):
                    key = running.pop(handle)
                    task, asked = tags.pop(key)
                    self.cache.put(key, task.identity(), result)
                    self.computed += 1
                    if self.bar is not None:
                        self.bar.update(1)
                    if self.on_result is not None:
                        self.on_result(task, result)
                    ready += [(tag, task, result) for tag in asked]
        except KeyboardInterrupt:
            self.executor.close(abort=True)
            raise SweepInterrupted(self.cache.dir) from None
