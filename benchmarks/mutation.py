"""Mutation testing of the cost model, the bounds, the schedulers and the cycle DTMC.

Each mutant of ``benchmarks/mutants.toml`` replaces one exact snippet of one file (the snippet must
occur exactly once: a table whose snippets went missing or became ambiguous is refused before
anything runs, so it cannot drift silently). The script applies every mutant in its own copy of
the repository in a temporary directory (the working tree is never edited), with a fresh numba
cache, and runs

(a) ``python -m llmq check --quick --expect paper_checks/verdicts.json``, and
(b) the mutant's test files under pytest,

each with a timeout. A stage **kills** a mutant when a verdict differs from the recorded one (a)
or a test fails on an assertion (b); a stage whose only failures are exceptions, a segfault or a
timeout is a **crash**, which is not counted as a kill; otherwise the mutant **survived** it.
Equivalent mutants (``equivalent = true``, with the reason) are listed but not run (unless
``--include-equivalent``) and never enter the rates.

The kill rates, both over the non-equivalent mutants run: overall (check or tests) and
``llmq check --quick`` alone. Results go to ``out/mutation.json`` (strict JSON). Slow (from 40 s
a mutant on an idle machine to 3-4 minutes on a loaded 2-core one); not part of CI::

    python benchmarks/mutation.py [--only ID] [--jobs 1] [--fast-only]

After adding tests or checks, ``--resume-from OLD.json`` reruns only the mutants the check did not
kill in OLD (a kill by seeded checks of unchanged code cannot be undone), and ``--new-check ID``
then runs only the new checks and keeps OLD's result for the others.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "benchmarks" / "mutants.toml"
KILLED, CRASH, SURVIVED, SKIPPED = "KILLED", "CRASH", "SURVIVED", "SKIPPED"
# a failing test whose exception is one of these failed on a check of a value, not by crashing
DEFAULT_TIMEOUT = 240.0  # a normal check --quick takes about 40 s, a test file under a minute
ASSERTION_KINDS = ("AssertionError", "Failed", "assert ")


@dataclass(frozen=True)
class Mutant:
    """One reviewed mutant: replace ``original`` (exactly once in ``file``) by ``replacement``.

    Attributes
    ----------
    id, file, original, replacement : str
    models : str
        The mistake it models (e.g. "lambda instead of lambda / r").
    tests : tuple of str
        Test files run against it.
    equivalent : bool
    reason : str
        Why it is equivalent (required when it is).
    line, col : int
        Where ``original`` starts (1-based line, 0-based column) for a generated mutant, whose
        snippet need not be unique; 0 for a reviewed mutant (the snippet occurs exactly once).
    """

    id: str
    file: str
    original: str
    replacement: str
    models: str
    tests: tuple[str, ...] = ()
    equivalent: bool = False
    reason: str = ""
    line: int = 0
    col: int = 0

    def apply(self, text: str) -> str:
        """``text`` with this mutant's edit; ValueError when ``original`` is not where it belongs."""
        if not self.line:
            if text.count(self.original) != 1:
                raise ValueError(f"{self.id}: snippet occurs {text.count(self.original)} times")
            return text.replace(self.original, self.replacement)
        lines = text.splitlines(keepends=True)
        at = sum(len(x) for x in lines[: self.line - 1]) + self.col
        if self.line > len(lines) or text[at : at + len(self.original)] != self.original:
            raise ValueError(f"{self.id}: the source at line {self.line}, column {self.col} changed")
        return text[:at] + self.replacement + text[at + len(self.original) :]


@dataclass
class Stage:
    """The outcome of one stage (check or tests) on one mutant."""

    status: str
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Outcome:
    """A mutant's two stages and its overall classification."""

    mutant: Mutant
    check: Stage
    tests: Stage
    extra: dict = field(default_factory=dict)

    @property
    def overall(self) -> str:
        statuses = (self.check.status, self.tests.status)
        if KILLED in statuses:
            return KILLED
        return CRASH if CRASH in statuses else SURVIVED


def load_table(path: Path = TABLE) -> list[Mutant]:
    """The mutants of ``path``, validated against the working tree.

    Raises
    ------
    SystemExit
        If a mutant is malformed, its file is missing, or its snippet does not occur exactly once.
    """
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    mutants, problems, seen = [], [], set()
    for raw in data.get("mutant", []):
        try:
            m = Mutant(id=raw["id"], file=raw["file"], original=raw["original"],
                       replacement=raw["replacement"], models=raw["models"],
                       tests=tuple(raw.get("tests", ())), equivalent=bool(raw.get("equivalent", False)),
                       reason=raw.get("reason", ""))
        except KeyError as exc:
            problems.append(f"{raw.get('id', '?')}: missing field {exc}")
            continue
        if m.id in seen:
            problems.append(f"{m.id}: duplicate id")
        seen.add(m.id)
        if m.equivalent and not m.reason:
            problems.append(f"{m.id}: equivalent without a reason")
        if m.original == m.replacement:
            problems.append(f"{m.id}: replacement equals the original")
        src = ROOT / m.file
        if not src.is_file():
            problems.append(f"{m.id}: no file {m.file}")
        else:
            count = src.read_text(encoding="utf-8").count(m.original)
            if count != 1:
                problems.append(f"{m.id}: snippet occurs {count} times in {m.file} (must be exactly once)")
        for t in m.tests:
            if not (ROOT / t).is_file():
                problems.append(f"{m.id}: no test file {t}")
        mutants.append(m)
    if problems:
        raise SystemExit("mutant table refused:\n  " + "\n  ".join(problems))
    return mutants


def repo_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files of the working tree (what a copy needs)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def make_copy(m: Mutant, files: list[str], base: Path) -> Path:
    """A copy of the repository under ``base`` with mutant ``m`` applied."""
    repo = base / "repo"
    for f in files:
        dst = repo / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst)
    target = repo / m.file
    target.write_text(m.apply(target.read_text(encoding="utf-8")), encoding="utf-8")
    return repo


def run(cmd: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int | None, str, float]:
    """Run ``cmd``; (return code or None on timeout, output tail, seconds). Kills the whole
    process group on timeout."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = None
    except BaseException:  # Ctrl-C or SIGTERM: the stage's own session would outlive us
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return rc, out.decode(errors="replace")[-3000:], time.perf_counter() - start


def classify_check(rc: int | None, tail: str, report: Path, expected: dict) -> tuple[str, str]:
    """KILLED when a verdict that was computed differs from the recorded one; CRASH when the run
    timed out, died, wrote no report or only had checks that raised; else SURVIVED."""
    if rc is None:
        return CRASH, "timeout"
    if rc < 0:
        return CRASH, f"signal {-rc}"
    if not report.is_file():
        return CRASH, "no report: " + tail.strip().splitlines()[-1] if tail.strip() else "no report"
    got = {c["id"]: c["verdict"] for c in json.loads(report.read_text(encoding="utf-8"))["checks"]}
    moved = [f"{k}: {v} (recorded {expected.get(k)})" for k, v in got.items()
             if v != "CRASH" and expected.get(k) != v]
    crashed = [k for k, v in got.items() if v == "CRASH"]
    if moved:
        return KILLED, "; ".join(moved)
    if crashed:
        return CRASH, "checks raised: " + ", ".join(crashed)
    if rc != 0:
        return CRASH, f"exit {rc} without a verdict change"
    return SURVIVED, ""


def classify_tests(rc: int | None, tail: str, junit: Path) -> tuple[str, str]:
    """KILLED when a test failed on an assertion (or pytest.fail / DID NOT RAISE); CRASH when
    the only failures are other exceptions, collection errors, a dead process or a timeout."""
    if rc is None:
        return CRASH, "timeout"
    if rc < 0:
        return CRASH, f"signal {-rc}"
    if not junit.is_file():
        return CRASH, f"exit {rc}, no junit report"
    asserted, raised = [], []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        for bad in list(case.iter("failure")) + list(case.iter("error")):
            message = (bad.get("message") or "").strip()
            # Hypothesis reports several distinct failures as one ExceptionGroup: an assertion among
            # them is an assertion failure
            grouped = message.startswith("ExceptionGroup") and "AssertionError" in (bad.text or "")
            assertion = message.startswith(ASSERTION_KINDS) or grouped
            kind = asserted if bad.tag == "failure" and assertion else raised
            kind.append(f"{name}: {message[:120]}")
    if asserted:
        return KILLED, f"{len(asserted)} failed: " + " | ".join(asserted[:3])
    if raised:
        return CRASH, f"{len(raised)} raised: " + " | ".join(raised[:3])
    if rc not in (0, 5):  # 5: no tests collected
        return CRASH, f"exit {rc}: " + (tail.strip().splitlines() or [""])[-1]
    return SURVIVED, ""


def run_tests(files: tuple[str, ...], repo: Path, env: dict, base: Path, timeout: float,
              first_failure: bool = False) -> Stage:
    """pytest on ``files`` (stopping at the first failure with ``first_failure``); when the process
    dies (a segfault or abort loses every result), each file again on its own, so that an assertion
    failure in one file is not hidden by a crash in another."""
    stop = ("-x",) if first_failure else ()

    def once(names, tag):
        junit = base / f"junit-{tag}.xml"
        rc, tail, sec = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                             "no:randomly", *stop, f"--junitxml={junit}", *names], repo, env, timeout)
        return Stage(*classify_tests(rc, tail, junit), sec)

    stage = once(files, "all")
    if stage.status != CRASH or len(files) < 2 or (base / "junit-all.xml").is_file():
        return stage
    parts = [once((f,), str(k)) for k, f in enumerate(files)]
    seconds = stage.seconds + sum(p.seconds for p in parts)
    for status in (KILLED, CRASH):
        hit = [f"{f}: {p.detail}" for f, p in zip(files, parts, strict=True) if p.status == status]
        if hit:
            return Stage(status, f"(file by file after '{stage.detail}') " + " | ".join(hit), seconds)
    return Stage(SURVIVED, f"file by file after '{stage.detail}'", seconds)


def run_check(repo: Path, env: dict, base: Path, args, expected: dict) -> Stage:
    """``llmq check --quick`` against the recorded verdicts, one worker, a fresh result cache."""
    only = [a for c in getattr(args, "new_check", ()) for a in ("--only", c)]
    rc, tail, sec = run([sys.executable, "-m", "llmq", "check", "--quick", "--quiet", "--no-progress",
                         "--workers", "1", "--cache", str(base / "check-cache"), "--expect",
                         "paper_checks/verdicts.json", "--out", str(base / "check"), *only],
                        repo, env, args.check_timeout)
    return Stage(*classify_check(rc, tail, base / "check" / "paper_checks.json", expected), sec)


def mutant_env(repo: Path, base: Path) -> dict:
    """The environment of a mutant's stages: its own copy first on the path, a fresh numba cache and
    a fresh cache home (results kept across runs, ``theory.io.cache_home``)."""
    return {**os.environ, "NUMBA_CACHE_DIR": str(base / "numba"), "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(repo), "XDG_CACHE_HOME": str(base / "xdg")}


def run_mutant(m: Mutant, files: list[str], args, expected: dict) -> Outcome:
    """Apply ``m`` in a temporary copy and run its stages."""
    with tempfile.TemporaryDirectory(prefix="llmq-mut-") as tmp:
        base = Path(tmp)
        repo = make_copy(m, files, base)
        env = mutant_env(repo, base)
        if args.tests_only:
            check = Stage(SKIPPED, "--tests-only")
        else:
            check = run_check(repo, env, base, args, expected)
        if args.fast_only or not m.tests:
            tests = Stage(SKIPPED, "--fast-only" if args.fast_only else "no test files")
        elif check.status == KILLED and not args.all_stages:
            tests = Stage(SKIPPED, "killed by the check")
        else:
            tests = run_tests(m.tests, repo, env, base, args.test_timeout)
    return Outcome(m, check, tests)


def rates(rows: list[dict]) -> dict:
    """Kill rates over the non-equivalent mutants that were run (crashes are not kills)."""
    live = [r for r in rows if not r["equivalent"] and r["overall"] is not None]
    n = len(live)
    killed = sum(r["overall"] == KILLED for r in live)
    by_check = sum(r["check"]["status"] == KILLED for r in live)
    return {"mutants_run": n, "killed": killed, "killed_by_check": by_check,
            "crashed": sum(r["overall"] == CRASH for r in live),
            "survived": sorted(r["id"] for r in live if r["overall"] == SURVIVED),
            "not_killed_by_check": sorted(r["id"] for r in live if r["check"]["status"] != KILLED),
            "kill_rate": killed / n if n else 0.0, "check_kill_rate": by_check / n if n else 0.0}


def row_of(o: Outcome) -> dict:
    """The JSON row of one run mutant."""
    m = o.mutant
    return {"id": m.id, "file": m.file, "models": m.models, "equivalent": m.equivalent,
            "reason": m.reason, "tests_run": list(m.tests),
            "check": vars(o.check), "tests": vars(o.tests), "overall": o.overall}


def equivalent_row(m: Mutant) -> dict:
    """The JSON row of an equivalent mutant that was not run."""
    skipped = {"status": SKIPPED, "detail": "equivalent", "seconds": 0.0}
    return {"id": m.id, "file": m.file, "models": m.models, "equivalent": True, "reason": m.reason,
            "tests_run": list(m.tests), "check": skipped, "tests": skipped, "overall": None}


def print_table(rows: list[dict]) -> None:
    """One line per mutant: the two stages and the overall classification."""
    print(f"{'id':<28} {'check':<9} {'tests':<9} {'overall':<9} models")
    for r in rows:
        overall = r["overall"] or "EQUIV"
        print(f"{r['id']:<28} {r['check']['status']:<9} {r['tests']['status']:<9} {overall:<9} "
              f"{r['models'][:60]}")


def markdown(rows: list[dict], summary: dict) -> str:
    """The results as a markdown table with the two kill rates."""
    lines = ["| mutant | file | models | check --quick | tests | overall |", "|---|---|---|---|---|---|"]
    for r in rows:
        overall = r["overall"] or "equivalent: " + r["reason"]
        lines.append(f"| `{r['id']}` | `{r['file']}` | {r['models']} | {r['check']['status']} | "
                     f"{r['tests']['status']} | {overall} |")
    n = summary["mutants_run"]
    lines += ["", f"Non-equivalent mutants: {n}; equivalent: {len(summary['equivalent'])}.",
              f"Killed by tests + check: {summary['killed']}/{n} ({summary['kill_rate']:.1%}); "
              f"by `llmq check --quick` alone: {summary['killed_by_check']}/{n} "
              f"({summary['check_kill_rate']:.1%}); crashes (not kills): {summary['crashed']}.",
              f"Survivors: {', '.join(summary['survived']) or 'none'}. Not killed by the check: "
              f"{', '.join(summary['not_killed_by_check']) or 'none'}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the mutants (see the module docstring); the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", metavar="ID", help="run only this mutant (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    p.add_argument("--fast-only", action="store_true", help="run only llmq check --quick, no pytest")
    p.add_argument("--tests-only", action="store_true",
                   help="run only the pytest stage (to try new tests; the rates then lack the check)")
    p.add_argument("--resume-from", type=Path, metavar="FILE",
                   help="run only the mutants that the check did not kill in FILE (an earlier "
                        "out/mutation.json) and keep FILE's rows for the others: adding tests or "
                        "checks cannot undo a kill by the recorded checks")
    p.add_argument("--new-check", action="append", default=[], metavar="ID",
                   help="with --resume-from: run only these (newly added) checks; the check stage "
                        "kills when they move a verdict and otherwise keeps FILE's result (the other "
                        "checks are seeded and the code they ran is unchanged)")
    p.add_argument("--all-stages", action="store_true",
                   help="run the tests even when the check already killed the mutant")
    p.add_argument("--include-equivalent", action="store_true", help="also run equivalent mutants")
    p.add_argument("--table", type=Path, default=TABLE, help="mutant table (default benchmarks/mutants.toml)")
    p.add_argument("--out", type=Path, default=ROOT / "out" / "mutation.json")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of --out for mutants not run now (batches of --only)")
    p.add_argument("--check-timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds")
    p.add_argument("--test-timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds")
    p.add_argument("--list", action="store_true", help="validate and list the table, run nothing")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table as markdown")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: rewrite --out from --resume-from and --merge's file")
    args = p.parse_args(argv)

    mutants = load_table(args.table)
    if args.list:
        for m in mutants:
            print(f"{m.id:<28} {'EQUIV ' if m.equivalent else ''}{m.file}: {m.models}")
        print(f"{len(mutants)} mutants, {sum(m.equivalent for m in mutants)} equivalent")
        return 0
    if args.only:
        unknown = set(args.only) - {m.id for m in mutants}
        if unknown:
            raise SystemExit(f"unknown mutant ids: {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.id in args.only]
    previous = {}
    if args.resume_from:
        previous = {r["id"]: r for r in json.loads(args.resume_from.read_text(encoding="utf-8"))["mutants"]}
        mutants = [m for m in mutants
                   if m.id not in previous or previous[m.id]["check"]["status"] != KILLED]
    todo = [m for m in mutants if (args.include_equivalent or not m.equivalent) and not args.report_only]
    expected = json.loads((ROOT / "paper_checks" / "verdicts.json").read_text(encoding="utf-8"))
    files = repo_files()
    start = time.perf_counter()

    if args.new_check and not args.resume_from:
        raise SystemExit("--new-check needs --resume-from")

    def one(m: Mutant) -> Outcome:
        o = run_mutant(m, files, args, expected)
        before = previous.get(m.id)
        died = before is not None and before["check"]["detail"].startswith(("signal", "timeout", "no report"))
        if args.new_check and died:  # the whole check died before the new checks (they run last)
            o.check = Stage(CRASH, "the earlier full check died (the new checks run last): "
                            + before["check"]["detail"], before["check"]["seconds"] + o.check.seconds)
        elif args.new_check and before is not None and o.check.status != KILLED:
            o.check = Stage(before["check"]["status"], "new checks moved no verdict; earlier run: "
                            + before["check"]["detail"], before["check"]["seconds"] + o.check.seconds)
        elif args.new_check and before is not None:
            o.check.detail = "new check: " + o.check.detail
        print(f"  {m.id:<28} check {o.check.status:<8} ({o.check.seconds:5.0f} s)  tests "
              f"{o.tests.status:<8} ({o.tests.seconds:5.0f} s)  {o.check.detail or o.tests.detail}"[:160],
              flush=True)
        return o

    table = load_table(args.table)
    old = {}
    if args.merge and args.out.is_file():
        old = {r["id"]: r for r in json.loads(args.out.read_text(encoding="utf-8"))["mutants"]}
    done: dict[str, dict] = {}
    lock = threading.Lock()

    def write() -> tuple[list[dict], dict]:
        """Rows in table order (this run, then --merge's file, then --resume-from) and rates;
        written after every mutant, so an interrupted run keeps what it did."""
        ordered = []
        for m in table:  # the table decides what is equivalent, not an old file
            row = done.get(m.id) or old.get(m.id) or previous.get(m.id)
            if m.equivalent and (row is None or not row["equivalent"]):
                row = equivalent_row(m)
            if row is not None:
                ordered.append({**row, "equivalent": m.equivalent, "reason": m.reason})
        summary = rates(ordered)
        summary["seconds_this_run"] = time.perf_counter() - start
        summary["equivalent"] = sorted(r["id"] for r in ordered if r["equivalent"])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"summary": summary, "mutants": ordered}, indent=1,
                                       allow_nan=False) + "\n", encoding="utf-8")
        return ordered, summary

    def one_and_write(m: Mutant) -> None:
        o = one(m)
        with lock:
            done[m.id] = row_of(o)
            write()

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one_and_write, todo))
    ordered, summary = write()
    print_table(ordered)
    print(f"\nnon-equivalent mutants run: {summary['mutants_run']}; equivalent (not counted): "
          f"{len(summary['equivalent'])}")
    print(f"kill rate, tests + check: {summary['killed']}/{summary['mutants_run']} = "
          f"{summary['kill_rate']:.1%}   (crashes, not counted as kills: {summary['crashed']})")
    print(f"kill rate, llmq check --quick alone: {summary['killed_by_check']}/{summary['mutants_run']} = "
          f"{summary['check_kill_rate']:.1%}")
    print(f"survivors: {', '.join(summary['survived']) or 'none'}")
    print(f"run time: {summary['seconds_this_run']:.0f} s")
    print(f"wrote {args.out}")
    if args.markdown:
        args.markdown.write_text(markdown(ordered, summary), encoding="utf-8")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
