"""The speed a user feels: every command on its defaults, cold and warm, wall and CPU time, in one run.

Each command runs as a user runs it (``llmq ...`` in a fresh process, ``--out`` in a new temporary
directory so that no result is reused), twice on one numba cache directory:

* **cold**: the cache directory is empty, so every compiled function the command reaches is
  compiled (what the first run after an install or a code change costs);
* **warm**: the same directory, now filled by the cold run.

Figures per run: *wall* seconds, *CPU* seconds (user + system of the command and every process it
waited for, its pool workers included: ``resource.getrusage(RUSAGE_CHILDREN)`` before and after),
and *CPU / wall* (how many of the cores did work). Where it spends the time, per command:

* *import*: a fresh interpreter importing the command's module (``python -X importtime`` is the
  finer tool: ``python -X importtime -m llmq COMMAND --help``);
* *compile*: cold wall - warm wall (compilation and cache writes);
* with ``--profile``, the warm run repeated in one process under :mod:`cProfile`, its cumulative
  time split by the package that spends it (simulator, solvers, plotting, file I/O, the rest);
  child processes (the sweeps' pool workers) are then seen only as the time the parent waits.

Run from the repository root: ``python benchmarks/bench_commands.py [--only region,bounds]
[--skip check] [--profile] [--json FILE]``. A full run (``check`` in full, ``validate`` in full)
takes tens of minutes on 2 cores; ``--only`` picks commands.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (arguments after `llmq`, the module the command imports); "{out}" is a fresh directory
COMMANDS: dict[str, tuple[str, str]] = {
    "bounds": ("bounds", "llmq.commands.bounds"),
    "simulate": ("simulate", "llmq.commands.simulate"),
    "dtmc": ("dtmc --out {out}", "llmq.commands.dtmc"),
    "region": ("region --out {out} --no-progress", "llmq.commands.region"),
    "plan": ("plan --out {out}", "llmq.commands.plan"),
    "slai --quick": ("slai --quick --out {out}", "llmq.commands.slai"),
    "validate --quick": ("validate --quick --out {out}", "llmq.commands.validate"),
    "validate": ("validate --out {out}", "llmq.commands.validate"),
    "check --quick": ("check --quick --out {out}", "llmq.commands.check"),
    "check": ("check --out {out}", "llmq.commands.check"),
}

# cProfile's cumulative time by where it is spent: the first matching prefix of a frame's file wins
PARTS = (
    ("simulation", ("stability/sim", "stability/schedulers", "numba")),
    ("solvers", ("scipy", "sympy", "z3")),
    ("plotting", ("matplotlib",)),
    ("file I/O", ("json", "csv", "theory/io")),
)


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process this one has waited for."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(args: str, numba_cache: Path, env: dict) -> dict:
    """Wall and CPU seconds of ``llmq ARGS`` in a fresh process, with ``--out`` in a new directory."""
    with tempfile.TemporaryDirectory(prefix="llmq-bench-") as out:
        argv = [sys.executable, "-m", "llmq", *shlex.split(args.format(out=out))]
        cpu0, t0 = children_cpu(), time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, env={**env, "NUMBA_CACHE_DIR": str(numba_cache)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode not in (0, 1):  # check exits 1 on an unexpected verdict: still a timing
        raise SystemExit(f"llmq {args} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": cpu, "rc": proc.returncode}


def import_seconds(module: str, env: dict) -> float:
    """Wall seconds a fresh interpreter takes to import ``module`` (minus the bare interpreter's)."""
    def timed(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
        return time.perf_counter() - t0

    return max(0.0, timed(f"import {module}") - timed("pass"))


def profile_parts(args: str, numba_cache: Path, env: dict) -> dict[str, float]:
    """Seconds of a warm in-process run under cProfile, by the part of the code that spends them."""
    code = (
        "import cProfile, pstats, sys, io\n"
        "from llmq.cli import main\n"
        "pr = cProfile.Profile()\n"
        f"sys.argv = ['llmq', *{shlex.split(args)!r}]\n"
        "pr.enable()\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "pr.disable()\n"
        "st = pstats.Stats(pr)\n"
        "tot = {}\n"
        "for (f, _, _), (_, _, tt, _, _) in st.stats.items():\n"
        f"    part = next((p for p, pre in {PARTS!r} if any(x in f for x in pre)), 'the rest')\n"
        "    tot[part] = tot.get(part, 0.0) + tt\n"
        "import json; sys.stderr.write('PARTS ' + json.dumps(tot))\n"
    )
    with tempfile.TemporaryDirectory(prefix="llmq-bench-") as out:
        code = code.replace("{out}", out)
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              env={**env, "NUMBA_CACHE_DIR": str(numba_cache)})
    line = next((x for x in proc.stderr.splitlines() if x.startswith("PARTS ")), None)
    return json.loads(line[6:]) if line else {}


def main(argv: list[str] | None = None) -> None:
    """Measure the commands (see the module docstring) and print one table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"comma list of commands (default all: {', '.join(COMMANDS)})")
    ap.add_argument("--skip", default="", help="comma list of commands to leave out")
    ap.add_argument("--profile", action="store_true", help="also split a warm run by part (cProfile)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(COMMANDS)
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        ap.error(f"--only: unknown command(s) {unknown}; expected some of {list(COMMANDS)}")
    names = [n for n in names if n not in {s.strip() for s in args.skip.split(",") if s.strip()}]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["MPLBACKEND"] = "Agg"
    rows = []
    print(f"{'command':<18} {'import':>7} {'cold wall':>10} {'cold CPU':>9} {'warm wall':>10} "
          f"{'warm CPU':>9} {'CPU/wall':>8} {'compile':>8}", flush=True)
    for name in names:
        cmd, module = COMMANDS[name]
        with tempfile.TemporaryDirectory(prefix="llmq-numba-") as cache:
            cold = run_once(cmd, Path(cache), env)
            warm = run_once(cmd, Path(cache), env)
            parts = profile_parts(cmd, Path(cache), env) if args.profile else {}
        imp = import_seconds(module, env)
        row = {"command": name, "import_s": imp, "cold": cold, "warm": warm,
               "compile_s": cold["wall_s"] - warm["wall_s"], "warm_parts_s": parts}
        rows.append(row)
        print(f"{name:<18} {imp:7.2f} {cold['wall_s']:10.1f} {cold['cpu_s']:9.1f} {warm['wall_s']:10.1f} "
              f"{warm['cpu_s']:9.1f} {warm['cpu_s'] / max(warm['wall_s'], 1e-9):8.2f} "
              f"{row['compile_s']:8.1f}", flush=True)
        if parts:
            print("    warm, by part: " + ", ".join(f"{k} {v:.1f} s" for k, v in
                                                   sorted(parts.items(), key=lambda kv: -kv[1])), flush=True)
    load = os.getloadavg()
    print(f"(seconds; {os.cpu_count()} CPUs; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "cpus": os.cpu_count(), "load": load}, indent=1))


if __name__ == "__main__":
    main()
