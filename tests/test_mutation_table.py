"""The mutation-testing script's table and classification (the slow run itself is not in CI).

The table must stay valid as the code moves: every snippet occurs exactly once in its file, so a
refactoring that removes or duplicates one fails here rather than silently shrinking the run.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "benchmarks" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


M = load_script()


def test_the_table_applies_to_the_tree():
    mutants = M.load_table()
    live = [m for m in mutants if not m.equivalent]
    assert len(live) >= 30
    assert {Path(m.file).name for m in mutants} >= {"cost.py", "bounds.py", "rad.py", "alg2.py",
                                                    "request_level.py", "sarathi.py", "dtmc.py"}
    for m in mutants:
        text = (ROOT / m.file).read_text(encoding="utf-8")
        assert text.count(m.original) == 1, m.id
        assert text.replace(m.original, m.replacement) != text, m.id
        assert m.tests and all((ROOT / t).is_file() for t in m.tests), m.id
        assert not m.equivalent or len(m.reason) > 20, m.id


def test_a_missing_or_repeated_snippet_is_refused(tmp_path):
    table = tmp_path / "t.toml"
    table.write_text('[[mutant]]\nid = "x"\nfile = "theory/cost.py"\noriginal = "no such text here"\n'
                     'replacement = "y"\nmodels = "m"\ntests = ["tests/test_cost.py"]\n'
                     '[[mutant]]\nid = "z"\nfile = "theory/cost.py"\noriginal = "return"\n'
                     'replacement = "y"\nmodels = "m"\ntests = ["tests/test_cost.py"]\n')
    with pytest.raises(SystemExit, match=r"x: snippet occurs 0 times[\s\S]*z: snippet occurs \d+ times"):
        M.load_table(table)


def junit(tmp_path, *failures, text=""):
    cases = "".join(f'<testcase classname="t" name="n{k}"><{tag} message="{msg}">{text}</{tag}></testcase>'
                    for k, (tag, msg) in enumerate(failures))
    path = tmp_path / "j.xml"
    path.write_text(f'<testsuites><testsuite>{cases}<testcase classname="t" name="ok"/></testsuite>'
                    '</testsuites>')
    return path


def test_assertions_kill_exceptions_crash(tmp_path):
    assert M.classify_tests(1, "", junit(tmp_path, ("failure", "AssertionError: 1 == 2")))[0] == M.KILLED
    assert M.classify_tests(1, "", junit(tmp_path, ("failure", "Failed: DID NOT RAISE")))[0] == M.KILLED
    assert M.classify_tests(1, "", junit(tmp_path, ("failure", "IndexError: index 0")))[0] == M.CRASH
    assert M.classify_tests(1, "", junit(tmp_path, ("error", "collection failure")))[0] == M.CRASH
    assert M.classify_tests(0, "", junit(tmp_path))[0] == M.SURVIVED
    group = ("failure", "ExceptionGroup: Hypothesis found 2 distinct failures.")
    assert M.classify_tests(1, "", junit(tmp_path, group, text="E   AssertionError: x"))[0] == M.KILLED
    assert M.classify_tests(1, "", junit(tmp_path, group, text="E   IndexError: x"))[0] == M.CRASH
    assert M.classify_tests(-11, "", tmp_path / "none.xml")[0] == M.CRASH
    assert M.classify_tests(None, "", tmp_path / "none.xml") == (M.CRASH, "timeout")


def test_a_moved_verdict_kills_a_raising_check_crashes(tmp_path):
    report = tmp_path / "r.json"
    expected = {"a": "PASS", "b": "ERRATUM"}

    def verdicts(a, b):
        report.write_text(json.dumps({"checks": [{"id": "a", "verdict": a}, {"id": "b", "verdict": b}]}))
        return report

    assert M.classify_check(1, "", verdicts("FAIL", "CRASH"), expected)[0] == M.KILLED
    assert M.classify_check(1, "", verdicts("PASS", "CRASH"), expected)[0] == M.CRASH
    assert M.classify_check(0, "", verdicts("PASS", "ERRATUM"), expected)[0] == M.SURVIVED
    assert M.classify_check(-11, "", tmp_path / "none.json", expected) == (M.CRASH, "signal 11")


def test_rates_leave_out_equivalents_and_do_not_count_crashes():
    def row(i, check, overall, equivalent=False):
        return {"id": i, "equivalent": equivalent, "overall": overall, "check": {"status": check}}

    rows = [row("a", M.KILLED, M.KILLED), row("b", M.SURVIVED, M.KILLED), row("c", M.CRASH, M.CRASH),
            row("d", M.SURVIVED, M.SURVIVED), row("e", M.SKIPPED, None, equivalent=True)]
    r = M.rates(rows)
    assert (r["mutants_run"], r["killed"], r["killed_by_check"], r["crashed"]) == (4, 2, 1, 1)
    assert r["kill_rate"] == 2 / 4 and r["check_kill_rate"] == 1 / 4 and r["survived"] == ["d"]
