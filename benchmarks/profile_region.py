"""Where the time of ``llmq region`` (no options) goes, phase by phase, measured in one run.

Two measurements of the default sweep, each on an empty result cache (the numba cache is left as
it is: run once before to measure warm, or set ``XDG_CACHE_HOME`` to an empty directory to
measure cold):

1. **Wall clock with the process pool** (the command's default number of workers): the sweep runs
   in this process exactly as ``llmq.commands.region.run`` runs it (the same calls in the same
   order), with timers around its parts: imports (a fresh interpreter importing what the command
   imports), options and validation, the sweep, the CSV/JSON files and the figure. Inside the
   sweep, the tasks' own times (``elapsed_s`` of each result, measured in the worker) are summed
   by kind, and *workers idle* = workers x sweep wall - sum of task times: worker start-up,
   dispatch, and waiting at the end of a phase for the slowest run (a straggler).
2. **CPU time per part of a task** (``--breakdown``): the same sweep in this process on one
   worker, with every part timed by ``time.process_time`` (CPU seconds, which a loaded machine
   distorts less than wall time): loading the compiled kernels from numba's cache (once per
   process: a tiny run of each scheduler first), the compiled scheduler loops (the simulation
   proper), the rest of a simulation (cost tables, lambda*, sampling arrivals and lengths,
   collecting results), the verdict and saturated throughput, the DTMC tasks, task keys and seeds,
   cache reads and writes, and the sweep's own bookkeeping.

Before and after: ``--baseline DIR`` (a checkout of the code to compare with, e.g. ``git worktree
add ../base <commit>``) measures that checkout and this one alternately, ``--rounds`` times each,
every measurement in a fresh interpreter, and prints each phase before and after (the median of
the rounds) with the machine's load average. Measurement 2 runs in a process set up as the
checkout's pool workers are (one BLAS thread where its runner gives its workers one).

Run from the repository root: ``python benchmarks/profile_region.py [--breakdown]
[--baseline DIR [--rounds K]] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

IMPORTS = "import llmq.cli, stability.region"  # what `llmq region` imports before it computes


def import_seconds() -> float:
    """Wall seconds a fresh interpreter takes to import the command line and the sweep."""
    code = f"import time; t = time.perf_counter(); {IMPORTS}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], cwd=sys.path[0], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": sys.path[0]})
    return float(out.stdout.split()[-1])


def _spec_and_values(out: Path):
    from llmq.cli import build_parser
    from llmq.commands.region import spec_from
    from llmq.options import resolve

    args = build_parser().parse_args(["region", "--out", str(out), "--no-progress"])
    values = resolve(args)
    spec = spec_from(values, [])
    return spec, values


def _task_times(cache_dir: Path) -> dict:
    """Sum and count of the tasks' own times (``elapsed_s``) by kind, from the result cache."""
    by_kind: dict = defaultdict(lambda: [0.0, 0])
    for path in cache_dir.glob("*.json"):
        entry = json.loads(path.read_text(encoding="utf-8"))
        kind = entry["task"]["kind"]
        by_kind[kind][0] += entry["result"]["elapsed_s"]
        by_kind[kind][1] += 1
    return dict(by_kind)


def wall_profile(workers: int | None = None) -> dict:
    """Measurement 1: the default sweep with the process pool, wall seconds per part."""
    from stability import region

    phases = {"imports (fresh interpreter)": import_seconds()}
    with tempfile.TemporaryDirectory(prefix="llmq-profile-") as tmp:
        out = Path(tmp) / "out"
        t = time.perf_counter()
        spec, values = _spec_and_values(out)
        spec.validate()  # (the check that --out holds no other sweep's outputs: a fresh directory)
        phases["options and validation"] = time.perf_counter() - t
        workers = workers or values["workers"]
        t = time.perf_counter()
        res = region.run_sweep(spec, out / "cache", workers, None, progress=False)
        sweep = time.perf_counter() - t
        tasks = _task_times(out / "cache")
        busy = sum(s for s, _ in tasks.values())
        plot = region.plot_outputs
        plot_s = [0.0]

        def timed_plot(*a, **k):
            t0 = time.perf_counter()
            try:
                return plot(*a, **k)
            finally:
                plot_s[0] += time.perf_counter() - t0

        region.plot_outputs = timed_plot
        try:
            t = time.perf_counter()
            region.write_outputs(res, out)
            files = time.perf_counter() - t
        finally:
            region.plot_outputs = plot
        csv = (out / "region.csv").read_bytes()
    for kind, (s, n) in sorted(tasks.items()):
        phases[f"sweep: {n} '{kind}' tasks (sum of their times / workers)"] = s / workers
    phases["sweep: workers idle (start-up, dispatch, stragglers) / workers"] = sweep - busy / workers
    phases["region.csv and region.json"] = files - plot_s[0]
    phases["region.png (matplotlib import and drawing)"] = plot_s[0]
    import hashlib

    return {"workers": workers, "phases": phases, "total": sum(phases.values()), "sweep": sweep,
            "runs": res.computed, "csv_md5": hashlib.md5(csv).hexdigest()}


class _Clock:
    """CPU seconds accumulated per label by wrapped functions, exclusive of nested labels, except
    that a label wrapped with ``whole`` keeps everything it calls."""

    def __init__(self):
        self.total: dict = defaultdict(float)
        self.stack: list = []

    def wrap(self, owner, name: str, label: str, whole: bool = False) -> None:
        fn = getattr(owner, name, None)
        if fn is None:  # not in this version of the code
            return
        clock = self

        def wrapped(*a, **k):
            if clock.stack and clock.stack[-1][3]:  # inside a label that keeps it all
                return fn(*a, **k)
            clock.stack.append([label, time.process_time(), 0.0, whole])
            try:
                return fn(*a, **k)
            finally:
                lab, t0, inner, _ = clock.stack.pop()
                spent = time.process_time() - t0
                clock.total[lab] += spent - inner
                if clock.stack:
                    clock.stack[-1][2] += spent

        setattr(owner, name, wrapped)


def _warm_kernels(spec) -> None:
    """A tiny run of every scheduler of the sweep and of RAD's cycle sampler: numba loads each
    compiled kernel from its cache on the first call in a process."""
    from stability.dtmc import CycleSampler
    from stability.sim.simulate import Scenario, simulate
    from theory.builder import CostSpec, cost_model
    from theory.workload import get_workload

    for name in spec.schedulers:
        opts = (("n", 64),) if name == "rad" else ()
        simulate(Scenario(gpu=spec.tilesets[0], scheduler=name, options=opts, load=0.5, rate=None,
                          n_requests=200, pad=True, seed=0))
    cm = cost_model(CostSpec(spec.tilesets[0], spec.model, spec.mode))
    CycleSampler(cm, get_workload(spec.workload).padded(cm.t_lcm), 8).saturated(4, 0)


def cpu_profile() -> dict:
    """Measurement 2: the default sweep in this process on one worker, CPU seconds per part."""
    import stability.points as points
    import stability.runner as runner
    import stability.sim.engine as engine
    import stability.sim.simulate as simulate
    from stability import region

    clock = _Clock()
    clock.wrap(engine, "run_loop", "simulation: compiled scheduler loops")
    clock.wrap(simulate, "simulate", "simulation set-up: tables, lambda*, arrivals, lengths, collect")
    for owner, name in ((points, "run_sim"), (getattr(points, "SimPoint", None), "run")):  # dicts, tasks
        clock.wrap(owner, name, "verdict and saturated throughput")
    for owner, name in ((points, "run_n_min"), (getattr(points, "NMinPoint", None), "run")):
        clock.wrap(owner, name, "RAD's n (auto): DTMC search", whole=True)
    for owner, name in ((points, "run_dtmc"), (getattr(points, "DtmcPoint", None), "run")):
        clock.wrap(owner, name, "DTMC predictions", whole=True)
    clock.wrap(runner.Cache, "get", "result cache: reads")
    clock.wrap(runner.Cache, "put", "result cache: writes")
    clock.wrap(runner, "task_key", "task keys")
    clock.wrap(region, "with_seed", "task seeds")
    clock.wrap(points, "derive_seed", "task seeds")
    clock.wrap(region, "write_outputs", "region.csv, region.json")
    clock.wrap(region, "plot_outputs", "region.png (matplotlib import and drawing)", whole=True)
    clock.wrap(region, "_theory", "theory: lambda*, Theorem 2, certified bound")
    with tempfile.TemporaryDirectory(prefix="llmq-profile-") as tmp:
        out = Path(tmp) / "out"
        c0 = time.process_time()
        spec, _ = _spec_and_values(out)
        spec.validate()
        clock.total["options and validation"] += time.process_time() - c0
        c0 = time.process_time()
        _warm_kernels(spec)
        clock.total["numba cache load (once per process)"] += time.process_time() - c0
        c0 = time.process_time()
        clock.wrap(region, "run_sweep", "sweep bookkeeping (boundaries, next rates)")
        res = region.run_sweep(spec, out / "cache", 1, None, progress=False)
        region.write_outputs(res, out)
        total = time.process_time() - c0
    phases = dict(sorted(clock.total.items(), key=lambda kv: -kv[1]))
    return {"phases": phases, "total": sum(phases.values()), "sweep_and_outputs": total,
            "runs": res.computed}


def _measure(root: Path, what: str, env: dict | None = None) -> dict:
    """One measurement (``--wall-only`` or ``--cpu-only``) of the code at ``root``, in a fresh
    interpreter."""
    out = subprocess.run([sys.executable, __file__, what, "--root", str(root), "--json"],
                         capture_output=True, text=True, env=env, cwd=root)
    if out.returncode:
        raise SystemExit(f"measuring {root} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def _worker_env(root: Path) -> dict:
    """The environment the pool workers of the checkout at ``root`` run in: one BLAS thread each
    where its runner sets ``BLAS_THREADS``, else this environment."""
    code = "import stability.runner as r; print(' '.join(getattr(r, 'BLAS_THREADS', ())))"
    names = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONPATH": str(root)}).stdout.split()
    return {**os.environ, **{k: os.environ.get(k, "1") for k in names}}


def profile(root: Path, breakdown: bool) -> dict:
    """Measurement 1 (and 2 with ``breakdown``) of the checkout at ``root``."""
    report = {"load_average": os.getloadavg()[0], "wall": _measure(root, "--wall-only")}
    if breakdown:
        report["cpu"] = _measure(root, "--cpu-only", _worker_env(root))
    report["load_average_after"] = os.getloadavg()[0]
    return report


def _rows(reports: list[dict], part: str) -> dict:
    """Median over rounds of each phase of ``part`` ("wall" or "cpu"), and of the total."""
    import statistics

    names = list(dict.fromkeys(n for r in reports for n in r[part]["phases"]))
    rows = {n: statistics.median(r[part]["phases"].get(n, 0.0) for r in reports) for n in names}
    rows["total"] = statistics.median(r[part]["total"] for r in reports)
    return rows


def _print_table(title: str, after: dict, before: dict | None) -> None:
    head = f"{title:<70}" + (f"{'before':>9}{'after':>9}{'ratio':>7}" if before else f"{'s':>9}")
    print(f"\n{head}")
    for name in dict.fromkeys([*(before or {}), *after]):
        a = after.get(name, 0.0)
        if before is None:
            print(f"{name:<70}{a:>9.2f}")
            continue
        b = before.get(name, 0.0)
        ratio = f"{a / b:>7.2f}" if b > 0 else f"{'':>7}"
        print(f"{name:<70}{b:>9.2f}{a:>9.2f}{ratio}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, help="pool workers (default: the command's default)")
    p.add_argument("--breakdown", action="store_true", help="also measure CPU per part of a task")
    p.add_argument("--baseline", type=Path, help="a checkout to compare with, measured alternately")
    p.add_argument("--rounds", type=int, default=1, help="measurements of each checkout (median)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    p.add_argument("--wall-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cpu-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sys.path.insert(0, str(args.root.resolve()))
    if args.wall_only or args.cpu_only:  # one measurement, in this fresh interpreter
        print(json.dumps(wall_profile(args.workers) if args.wall_only else cpu_profile()))
        return 0
    after, before = [], []
    for _ in range(args.rounds):
        if args.baseline:
            before.append(profile(args.baseline.resolve(), args.breakdown))
        after.append(profile(args.root.resolve(), args.breakdown))
    if args.json:
        print(json.dumps({"after": after, "before": before}, indent=1))
        return 0
    for label, reports in (("before", before), ("after", after)):
        for r in reports:
            w = r["wall"]
            print(f"{label}: {w['runs']} runs, {w['workers']} workers, region.csv md5 {w['csv_md5']}; "
                  f"load average {r['load_average']:.2f} before, {r['load_average_after']:.2f} after")
    base = _rows(before, "wall") if before else None
    _print_table("phase, llmq region with its pool (wall seconds)", _rows(after, "wall"), base)
    if args.breakdown:
        base = _rows(before, "cpu") if before else None
        _print_table("part, one worker (CPU seconds)", _rows(after, "cpu"), base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
