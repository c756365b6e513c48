"""``llmq check`` through the sweeps' runner: a check's outcome read back from the cache gives the
same report as the run that computed it, and the same report as a run in this process; a crash is
recorded in the outcome (and run again next time), never raised; Ctrl-C and ``kill -9`` keep the
checks that finished, also those of the module still running; the number of workers changes
nothing but the time."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from llmq.cli import main
from paper_checks.common import jsonable
from paper_checks.registry import _REGISTRY, Check, Result, Verdict, all_checks
from paper_checks.report import to_json_text, to_markdown
from paper_checks.runner import (
    ALONE,
    LONGEST,
    CheckTask,
    Outcome,
    _plain,
    check_key,
    check_tasks,
    from_record,
    outcome_record,
    run_checks,
)
from stability.runner import task_key
from theory.io import json_load_exact, json_text

ROOT = Path(__file__).resolve().parents[1]
# cheap checks with every kind of record: a proof, a reading's ERRATUM with its counterexample, a
# sample whose evidence holds numpy values and tuples; two modules (two tasks)
CHEAP = ["def1.mask", "lemma1.case_split", "eq7.batch_sum"]


def untimed(outcomes):
    """The outcomes with their seconds set to 0 (the only field a rerun may change)."""
    return [replace(o, seconds=0.0, cached=False) for o in outcomes]


def reports(outcomes) -> tuple[str, str]:
    return to_markdown(outcomes, True), to_json_text(outcomes, True)


def test_a_record_reads_back_as_the_report_of_the_outcome():
    messy = {"a": (1, np.float64(2.5)), 3: np.arange(3), "f": Fraction(1, 3), "g": Fraction(4, 2),
             "nan": float("nan"), "inf": np.float64("-inf"), "s": frozenset({"x"}), "o": Path("p")}
    plain = _plain(messy)
    assert jsonable(plain) == jsonable(messy)
    assert math.isnan(plain["nan"]) and plain["inf"] == -math.inf  # kept, for the cache to write exactly
    back = json_load_exact(json_text(plain, indent=None, exact=True))
    assert jsonable(back) == jsonable(messy) and math.isnan(back["nan"])
    check = Check("test.record", "nowhere", ("Eq. 2",), "c", "m", lambda fast: None)
    result = Result(Verdict.PASS, "s", coverage="c", evidence=messy, margin=0.5)
    record = outcome_record(Outcome(check, result, None, 1.25))
    o = from_record(check, json_load_exact(json_text(record, indent=None, exact=True)))
    assert o.result.verdict is Verdict.PASS and o.result.margin == 0.5 and o.seconds == 1.25
    assert jsonable(o.result.evidence) == jsonable(messy)


def test_a_cache_hit_gives_the_same_outcomes_as_the_run_that_computed_them(tmp_path):
    first = run_checks(CHEAP, fast=True, cache=tmp_path)
    assert not any(o.cached for o in first)
    seen = []
    again = run_checks(CHEAP, fast=True, cache=tmp_path, progress=seen.append)
    assert all(o.cached for o in again) and sorted(o.check.id for o in seen) == sorted(CHEAP)
    assert [o.check.id for o in again] == CHEAP  # in the order asked
    assert reports(again) == reports(first)  # seconds included: read back from the same record
    in_process = run_checks(CHEAP, fast=True)  # today's path: no cache, this process
    assert reports(untimed(again)) == reports(untimed(in_process))
    assert [o.verdict for o in again] == ["PASS", "ERRATUM", "PASS"]
    full = run_checks(CHEAP[:1], fast=False, cache=tmp_path)  # the mode is part of the key
    assert not full[0].cached


def test_the_key_is_the_check_its_mode_and_the_code():
    keys = {check_key(i, f) for i in CHEAP for f in (False, True)}
    assert len(keys) == 2 * len(CHEAP)
    identity = CheckTask(("def1.mask",), True, "/anywhere").identity()
    assert identity["mode"] == "quick" and len(identity["paper_checks_source"]) == 16
    assert task_key(identity) != check_key("def1.mask", True)  # a task's entry is not a check's
    assert task_key(identity) == task_key(CheckTask(("def1.mask",), True).identity())  # wherever cached


def test_the_number_of_workers_changes_nothing_but_the_time(tmp_path):
    one = run_checks(CHEAP, fast=True, cache=tmp_path / "one", workers=1)
    two = run_checks(CHEAP, fast=True, cache=tmp_path / "two", workers=2)
    assert not any(o.cached for o in one + two)
    assert reports(untimed(one)) == reports(untimed(two))
    timings = json.loads((tmp_path / "two" / "timings" / "quick.json").read_text())
    assert sorted(timings) == sorted(CHEAP)  # the next run starts the longest first


def test_a_crash_is_recorded_not_raised_and_runs_again(monkeypatch, tmp_path):
    calls = []

    def boom(fast):
        calls.append(fast)
        raise RuntimeError("planted crash")

    monkeypatch.setitem(_REGISTRY, "test.crash", Check("test.crash", "nowhere", ("Eq. 2",), "c", "m", boom))
    for n in (1, 2):
        (o,) = run_checks(["test.crash"], fast=True, cache=tmp_path)
        assert o.verdict == "CRASH" and "planted crash" in o.error and not o.cached
        assert len(calls) == n  # a crash may come from the environment: it is not reused
    (record,) = CheckTask(("no.such.check",), True).run()["outcomes"]  # a check a worker does not know
    assert record["result"] is None and "no.such.check" in record["error"]


def test_the_command_line_reuses_the_cache(tmp_path, capsys):
    args = ["check", "--quick", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c"),
            "--workers", "1", "--no-progress", "--only", CHEAP[0], "--only", CHEAP[1]]
    assert main(args) == 0
    assert "2 checks run, 0 reused" in capsys.readouterr().err
    md = (tmp_path / "o" / "paper_checks.md").read_bytes()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "0 checks run, 2 reused" in err and f"PASS          {CHEAP[0]}" in err
    assert (tmp_path / "o" / "paper_checks.md").read_bytes() == md
    assert main([*args, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err


# a check that finishes at once and one that runs until stopped, registered in the command's process
STOPPED = ("import sys, time; from llmq.cli import main; "
           "from paper_checks.registry import _REGISTRY, Check, Result, Verdict; "
           "ok = lambda fast: Result(Verdict.PASS, 'ok', coverage='nothing'); "
           "_REGISTRY['test.quick'] = Check('test.quick', 'nowhere', ('Eq. 2',), 'c', 'm', ok); "
           "_REGISTRY['test.slow'] = Check('test.slow', 'nowhere', ('Eq. 2',), 'c', 'm', "
           "lambda fast: time.sleep(600)); sys.exit(main(sys.argv[1:]))")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as from a terminal (see tests/test_runner.py)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_ctrl_c_and_kill_keep_the_finished_checks(tmp_path, sig):
    cache = tmp_path / "c"
    args = ["check", "--quick", "--quiet", "--workers", "1", "--cache", str(cache),
            "--out", str(tmp_path / "o")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", STOPPED, *args, "--only", "test.quick", "--only",
                             "test.slow"], env=env, cwd=ROOT, preexec_fn=_default_sigint,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not list(cache.glob("*.json")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    (entry,) = cache.glob("*.json")  # test.quick's, written as it finished, in the same task as test.slow
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert err.decode() == (f"llmq check: interrupted; 1 runs cached in {cache}; rerun the same "
                                "command to resume\n")
    else:
        assert proc.returncode == -signal.SIGKILL
    mtime = entry.stat().st_mtime_ns
    rerun = subprocess.run([sys.executable, "-c", STOPPED, *args[:-1], str(tmp_path / "o2"),
                            "--no-progress", "--only", "test.quick"], env=env, cwd=ROOT, capture_output=True)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert entry.stat().st_mtime_ns == mtime  # read back, not computed again
    assert json.loads((tmp_path / "o2" / "paper_checks.json").read_text())["checks"][0]["verdict"] == "PASS"


def test_the_default_cache_is_made_under_the_user_cache_home(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))  # not there yet
    args = ["check", "--quick", "--no-progress", "--out", str(tmp_path / "o"), "--only", "def1.mask"]
    assert main(args) == 0
    cache = tmp_path / "home" / "llmq" / "check"
    assert f"1 checks run, 0 reused from the cache {cache}" in capsys.readouterr().err
    assert (cache / f"{check_key('def1.mask', True)}.json").is_file()


def test_the_tasks_hold_every_check_once_by_module_the_long_lone_ones_alone():
    checks = all_checks()
    tasks = check_tasks(checks, fast=False)
    ids = [i for t in tasks for i in t.check_ids]
    assert sorted(ids) == sorted(c.id for c in checks) and len(ids) == len(set(ids))
    order = {c.id: k for k, c in enumerate(checks)}
    module = {c.id: c.run.__module__ for c in checks}
    for t in tasks:
        assert list(t.check_ids) == sorted(t.check_ids, key=order.get)  # paper order within a task
        if set(t.check_ids) & ALONE:
            assert len(t.check_ids) == 1
        else:
            assert len({module[i] for i in t.check_ids}) == 1
            assert len([u for u in tasks if module[u.check_ids[0]] == module[t.check_ids[0]]
                        and not set(u.check_ids) & ALONE]) == 1
    # a fresh cache: the tasks of LONGEST first, in its order; then the others in paper order
    firsts = [next(i for i in LONGEST if i in t.check_ids) for t in tasks[: len(LONGEST)]]
    assert firsts == list(LONGEST)
    rest = [order[t.check_ids[0]] for t in tasks[len(LONGEST):]]
    assert rest == sorted(rest)


def test_known_timings_order_the_tasks_longest_first():
    checks = [c for c in all_checks() if c.id in {"def1.mask", "lemma1.case_split", "eq7.batch_sum",
                                                  "thm1.instability"}]
    seconds = {c.id: 1.0 for c in checks} | {"def1.mask": 50.0, "thm1.instability": 2.0}
    tasks = check_tasks(checks, fast=True, seconds=seconds)
    sums = [sum(seconds[i] for i in t.check_ids) for t in tasks]
    assert sums == sorted(sums, reverse=True) and "def1.mask" in tasks[0].check_ids
    del seconds["eq7.batch_sum"]  # a task with a check of unknown time goes first
    assert "eq7.batch_sum" in check_tasks(checks, fast=True, seconds=seconds)[0].check_ids
