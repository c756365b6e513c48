"""The speed a user feels: every command on its defaults, cold and warm, wall and CPU time, in one run.

Each command runs as a user runs it (``llmq ...`` in a fresh process, ``--out`` and the user cache
``XDG_CACHE_HOME`` in new temporary directories so that no result is reused: not ``llmq check``'s
cached checks, nor the entries of :mod:`stability.kept`), twice on one numba cache directory:

* **cold**: the cache directory is empty, so every compiled function the command reaches is
  compiled (what the first run after an install or a code change costs);
* **warm**: the same directory, now filled by the cold run;
* with ``--rerun``, **rerun**: the warm run again on the warm run's user cache (a command that
  keeps its results there, ``llmq check``, reads them back: what a rerun of unchanged code costs).

With ``--before DIR`` every command is measured first from the source tree ``DIR`` (another
version, e.g. ``git archive HEAD~1 | tar -x -C DIR``), then from this one, and both rows are
printed, so that a change is measured before and after in one run, under the same load.

Figures per run: *wall* seconds, *CPU* seconds (user + system of the command and of every process it
started, its pool workers included: ``resource.getrusage(RUSAGE_CHILDREN)`` before and after, the
forkserver's workers adopted by this process, :func:`adopt_orphans`),
and *CPU / wall* (how many of the cores did work). Where it spends the time, per command:

* *import*: a fresh interpreter importing the command's module (``python -X importtime`` is the
  finer tool: ``python -X importtime -m llmq COMMAND --help``);
* *compile*: cold wall - warm wall (compilation and cache writes);
* with ``--profile``, the warm run repeated in one process under :mod:`cProfile`, its cumulative
  time split by the package that spends it (simulator, solvers, plotting, file I/O, the rest);
  child processes (the sweeps' pool workers) are then seen only as the time the parent waits.

Run from the repository root: ``python benchmarks/bench_commands.py [--only region,bounds]
[--skip check] [--profile] [--rerun] [--before DIR] [--json FILE] [--md FILE]``. A full run
(``check`` in full, ``validate`` in full) takes tens of minutes on 2 cores; ``--only`` picks
commands. ``--md`` writes the printed table, with the command line that made it, to a generated
report (``benchmarks/COMMANDS.md``).
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


def adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    a command's pool workers are children of its forkserver, which outlives the command by a
    moment and is then nobody's child; adopted and waited for (:func:`reap_orphans`), their CPU
    time counts in :func:`children_cpu`. Elsewhere a no-op (their CPU time is then missed)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER = 36
    except (OSError, AttributeError):
        pass


def reap_orphans(timeout: float = 60.0) -> None:
    """Wait for every adopted descendant still running (a forkserver winding down), up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # none left
            return
        if pid == 0:
            time.sleep(0.05)


def run_once(args: str, numba_cache: Path, env: dict, tree: Path = ROOT,
             user_cache: Path | None = None) -> dict:
    """Wall and CPU seconds of ``llmq ARGS`` in a fresh process from the source ``tree``, with
    ``--out`` in a new directory and ``XDG_CACHE_HOME`` in ``user_cache`` (a new one if None)."""
    with tempfile.TemporaryDirectory(prefix="llmq-bench-") as out:
        argv = [sys.executable, "-m", "llmq", *shlex.split(args.format(out=out))]
        home = user_cache or Path(out) / "user-cache"
        cpu0, t0 = children_cpu(), time.perf_counter()
        proc = subprocess.run(argv, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**env, "NUMBA_CACHE_DIR": str(numba_cache), "XDG_CACHE_HOME": str(home),
                                   "PYTHONPATH": str(tree)})
        wall = time.perf_counter() - t0
        reap_orphans()
        cpu = children_cpu() - cpu0
    if proc.returncode not in (0, 1):  # check exits 1 on an unexpected verdict: still a timing
        raise SystemExit(f"llmq {args} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": cpu, "rc": proc.returncode}


def measure(cmd: str, tree: Path, env: dict, rerun: bool, profile: bool) -> dict:
    """The cold and warm runs of ``cmd`` from ``tree`` (and the rerun, and the profile, if asked)."""
    with tempfile.TemporaryDirectory(prefix="llmq-numba-") as cache, \
            tempfile.TemporaryDirectory(prefix="llmq-home-") as home:
        cold = run_once(cmd, Path(cache), env, tree)
        warm = run_once(cmd, Path(cache), env, tree, Path(home))
        again = run_once(cmd, Path(cache), env, tree, Path(home)) if rerun else None
        parts = profile_parts(cmd, Path(cache), env) if profile else {}
    return {"cold": cold, "warm": warm, "rerun": again, "compile_s": cold["wall_s"] - warm["wall_s"],
            "warm_parts_s": parts}


def import_seconds(module: str, env: dict, tree: Path = ROOT) -> float:
    """Wall seconds a fresh interpreter takes to import ``module`` from the source ``tree`` (minus
    the bare interpreter's)."""
    def timed(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True)
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
    ap.add_argument("--rerun", action="store_true", help="also time a rerun on the warm run's user cache")
    ap.add_argument("--md", type=Path, metavar="FILE", help="also write the table to this markdown report")
    ap.add_argument("--before", type=Path, metavar="DIR",
                    help="also measure each command from this source tree (another version), first")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(COMMANDS)
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        ap.error(f"--only: unknown command(s) {unknown}; expected some of {list(COMMANDS)}")
    if args.before is not None and not (args.before / "llmq" / "__main__.py").is_file():
        ap.error(f"--before: {args.before} is not a source tree of llmq (no llmq/__main__.py)")
    names = [n for n in names if n not in {s.strip() for s in args.skip.split(",") if s.strip()}]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env["MPLBACKEND"] = "Agg"
    adopt_orphans()
    trees = [(" [before]", args.before.resolve()), ("", ROOT)] if args.before else [("", ROOT)]
    rows = []
    lines = [f"{'command':<27} {'import':>7} {'cold wall':>10} {'cold CPU':>9} {'warm wall':>10} "
             f"{'warm CPU':>9} {'CPU/wall':>8} {'compile':>8}"
             + (f" {'rerun wall':>10} {'rerun CPU':>9}" if args.rerun else "")]
    print(lines[-1], flush=True)
    for name in names:
        cmd, module = COMMANDS[name]
        for label, tree in trees:
            row = {"command": name + label, "tree": str(tree),
                   **measure(cmd, tree, env, args.rerun, args.profile and tree == ROOT)}
            row["import_s"] = import_seconds(module, {**env, "PYTHONPATH": str(tree)}, tree)
            rows.append(row)
            for line in row_lines(row):
                lines.append(line)
                print(line, flush=True)
    load = os.getloadavg()
    lines.append(f"(seconds; {os.cpu_count()} CPUs; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})")
    print(lines[-1])
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "cpus": os.cpu_count(), "load": load}, indent=1))
    if args.md:
        given = argv if argv is not None else sys.argv[1:]
        made = shlex.join(["python", "benchmarks/bench_commands.py", *given])
        args.md.write_text(f"# Commands: wall and CPU seconds\n\nGenerated by `{made}` (its docstring says "
                           "what each column measures): one run, on one machine, under the load printed "
                           "below.\n\n```\n" + "\n".join(lines) + "\n```\n")


def row_lines(row: dict) -> list[str]:
    """The table's line of one measured row (and its profile's, if any)."""
    cold, warm, again = row["cold"], row["warm"], row["rerun"]
    line = (f"{row['command']:<27} {row['import_s']:7.2f} {cold['wall_s']:10.1f} {cold['cpu_s']:9.1f} "
            f"{warm['wall_s']:10.1f} {warm['cpu_s']:9.1f} {warm['cpu_s'] / max(warm['wall_s'], 1e-9):8.2f} "
            f"{row['compile_s']:8.1f}" + (f" {again['wall_s']:10.1f} {again['cpu_s']:9.1f}" if again else ""))
    parts = sorted(row["warm_parts_s"].items(), key=lambda kv: -kv[1])
    return [line] + (["    warm, by part: " + ", ".join(f"{k} {v:.1f} s" for k, v in parts)] if parts else [])


if __name__ == "__main__":
    main()
