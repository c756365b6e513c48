"""Sweep tasks: plain dicts that run anywhere, cached by content, on an in-process, process-pool
or Dask executor.

A task is ``{"kind": "sim" | "n_min" | "dtmc", ...}`` with every input spelled out; its result is a
dict. :func:`task_key` hashes the task with the source of ``theory/`` and ``stability/`` (a GPU
file is named by its content), and :func:`with_seed` derives the task's seed the same way, so a
result depends on the task alone: not on the worker, the order, or the number of workers.
:class:`Cache` keeps results as ``<dir>/<key>.json`` written atomically, so an interrupted sweep
loses only the tasks in flight.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the uniformly random planner of the ``sim`` tasks),
Appendix C (the ``n_min`` and ``dtmc`` tasks, :mod:`stability.dtmc`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np

from theory.errors import FieldError, LlmqError
from theory.io import atomic_write_text

G_MIN = 0.002  # a run is unstable when its accumulating fraction g exceeds this with confidence


@cache
def cost_model(tileset: str, model: str, mode: str, gpu_file: str | None):
    """The cost model of a (possibly restricted) GPU tile set, cached per process."""
    from theory.cost import build_cost_model
    from theory.hardware import get_gpu
    from theory.models import get_model

    return build_cost_model(get_gpu(tileset, gpu_file), get_model(model), mode)


@cache
def workload(spec: str, pad_to: int | None):
    """A workload, padded to multiples of ``pad_to`` if given (Assumption 3), cached per process."""
    from theory.workload import get_workload

    w = get_workload(spec)
    return w.padded(pad_to) if pad_to else w


@cache
def code_version() -> str:
    """SHA-256 prefix of the sources results depend on (theory/ and stability/, data included)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in ("theory", "stability"):
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".toml", ".csv") and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@cache
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _identity(task: dict) -> str:
    """The task as canonical text, with a GPU file named by its content, not its path."""
    if task.get("gpu_file"):
        task = {**task, "gpu_file": _file_digest(task["gpu_file"])}
    return _canonical(task)


def with_seed(task: dict, base_seed: int) -> dict:
    """The task with its seed derived from its content and the sweep's base seed (so a result
    does not depend on which worker runs it, or when, or where a GPU file lies)."""
    body = {k: v for k, v in task.items() if k != "seed"}
    seed = int.from_bytes(hashlib.sha256(f"{base_seed}|{_identity(body)}".encode()).digest()[:4], "big")
    return {**body, "seed": seed}


def task_key(task: dict) -> str:
    """Cache key of a task: its identity and the code version."""
    return hashlib.sha256(f"{code_version()}|{_identity(task)}".encode()).hexdigest()[:24]


def run_task(task: dict) -> dict:
    """Run one task (``kind`` = ``sim``, ``n_min`` or ``dtmc``) and return its result dict."""
    t0 = time.perf_counter()
    kind = task["kind"]
    if kind == "sim":
        out = _run_sim(task)
    elif kind == "n_min":
        out = _run_n_min(task)
    elif kind == "dtmc":
        out = _run_dtmc(task)
    else:
        raise FieldError("task kind", kind, "sim, n_min or dtmc")
    return {**out, "elapsed_s": time.perf_counter() - t0}


def _run_sim(task: dict) -> dict:
    from stability.sim.simulate import Scenario, simulate

    sc = Scenario(gpu=task["tileset"], model=task["model"], mode=task["mode"],
                  workload=task["workload"], pad=task["variant"] == "pad", gpu_file=task["gpu_file"],
                  scheduler=task["scheduler"], options=tuple(map(tuple, task["options"])), r=task["r"],
                  rate=task["rate"], load=None, n_requests=task["n_requests"], seed=task["seed"])
    res = simulate(sc)
    v = res.verdict(g_min=G_MIN)
    rq = res.requests
    done = np.isfinite(rq["t_finish"])
    horizon = float(np.nanmax(rq["t_finish"]) - rq["arrival"].min()) if done.any() else float("nan")
    # requests a KV-memory model refused at arrival (where the simulator reports them) never wait
    admitted = ~(np.asarray(rq["reject"]) > 0) if "reject" in rq else np.ones(done.size, dtype=bool)
    return {"verdict": v.verdict, "growth": v.growth, "g_low": v.ci_low, "g_high": v.ci_high,
            "completed": int(done.sum()), "throughput": float(done.sum() / horizon),
            **saturated_throughput(rq["arrival"][admitted], rq["t_finish"][admitted],
                                   rq["node"][admitted], task["r"])}


def saturated_throughput(arrival, finish, node, r: int, warmup: float = 0.2) -> dict:
    """Completions per second between the first and the last completion that fall from the
    ``warmup`` arrival quantile to the last arrival (``(k - 1) / span``, exact for evenly spaced
    completions), and the fewest requests pending at any node right after a completion in that
    window (> 0: no node ever emptied, so the window measured the capacity under backlog)."""
    from stability.sim.metrics import in_system

    t0, t1 = float(arrival[int(warmup * (arrival.size - 1))]), float(arrival[-1])
    inside = (finish > t0) & (finish <= t1)
    done = finish[inside]
    rate = (done.size - 1) / float(done.max() - done.min()) if done.size > 1 else float("nan")
    fewest = min((int(in_system(arrival[node == g], finish[node == g],
                                finish[inside & (node == g)]).min())
                  if np.any(inside & (node == g)) else 0) for g in range(r))
    return {"sat_throughput": rate, "min_pending": fewest}


def _dtmc_inputs(task: dict):
    cm = cost_model(task["tileset"], task["model"], task["mode"], task["gpu_file"])
    return cm, workload(task["workload"], cm.t_lcm if task["variant"] == "pad" else None)


def _run_n_min(task: dict) -> dict:
    from stability.dtmc import empirical_n_min

    cm, w = _dtmc_inputs(task)
    res = empirical_n_min(cm, w, task["epsilon"], task["samples"], task["seed"], n_max=task["n_max"])
    return {"n_min": res.n_min, "n_threshold": res.n_threshold, "drift": list(res.drift)}


def _run_dtmc(task: dict) -> dict:
    from stability.dtmc import CycleSampler, ratio_ci

    cm, w = _dtmc_inputs(task)
    sat = CycleSampler(cm, w, task["n"]).saturated(task["samples"], task["seed"])
    per_node = ratio_ci(sat.K, sat.T, 0.99)
    return {"per_node": list(per_node), "early_end_fraction": float(np.mean(sat.K < task["n"]))}


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
            ctx.set_forkserver_preload(["stability.runner"])
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

    def __init__(self, cache: Cache, executor, bar, on_result: Callable | None):
        self.cache, self.executor, self.bar, self.on_result = cache, executor, bar, on_result
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
