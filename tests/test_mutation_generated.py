"""The generation and apply step of benchmarks/generated_mutants.py (the slow run is not in CI).

Each generated edit is checked against cosmic-ray's own ``mutate_code`` (the file the tool would
write), so the trimmed edits cannot drift from the operators they come from.
"""

import difflib
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "generated_mutants", ROOT / "benchmarks" / "generated_mutants.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_mutants"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


G = load_script()
SOURCE = """from __future__ import annotations


def f(x: int | None, y=2, w: str | None = None) -> float | int:
    z: int | None = None
    if x is not None and x > 1:
        z = x + y * 3
    for k in range(y):
        z = -z if z else 0
    return z / 2
"""


@pytest.fixture(scope="module")
def edits():
    return G.generate_file("stats", "m.py", text=SOURCE)


def changed_spans(before: str, after: str) -> list:
    return [
        op
        for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]


def test_every_edit_is_cosmic_rays_mutant_at_one_location(edits):
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    assert len(edits) > 50
    for e in edits:
        mutated = e.mutant().apply(SOURCE)
        assert mutated == mutate_code(SOURCE, get_operator("core/" + e.operator)(), e.occurrence), e.id
        assert len(changed_spans(SOURCE, mutated)) == 1, e.id


def test_ids_are_unique_and_stable(edits):
    assert len({e.id for e in edits}) == len(edits)
    assert G.generate_file("stats", "m.py", text=SOURCE) == edits
    e = next(e for e in edits if e.operator == "ReplaceBinaryOperator_Add_Sub")
    assert e.id == "m.py:7:14:ReplaceBinaryOperator_Add_Sub:0" and (e.line, e.col) == (7, 14)
    assert (e.original, e.replacement) == ("+", "-")


def test_annotations_leave_the_frame_and_code_does_not(edits):
    bitor = [e for e in edits if e.operator.startswith("ReplaceBinaryOperator_BitOr")]
    # x: int | None, w: str | None = None and -> float | int, each | to 11 operators (cosmic-ray
    # itself does not offer the | of the variable annotation z: int | None)
    assert len(bitor) == 3 * 11 and {e.line for e in bitor} == {4}
    assert all("annotation" in e.frame for e in bitor)
    assert all(not e.frame for e in edits if e.line in (6, 7, 9, 10))


def test_apply_refuses_a_moved_source(edits):
    e = edits[0]
    with pytest.raises(ValueError, match="changed"):
        e.mutant().apply("\n" + SOURCE)


def test_the_sample_is_seeded_stratified_and_interleaved():
    def edit(stratum, k):
        return G.Edit(
            id=f"{stratum}:{k}",
            stratum=stratum,
            file="f",
            operator="o",
            occurrence=k,
            line=1,
            col=0,
            original="a",
            replacement="b",
        )

    pool = [edit(s, k) for s in G.STRATA for k in range(10)] + [
        G.Edit(
            id="x",
            stratum="cost",
            file="f",
            operator="o",
            occurrence=0,
            line=1,
            col=0,
            original="a",
            replacement="b",
            frame="in an annotation",
        )
    ]
    a, b = G.sample(pool, 3, seed=7), G.sample(list(reversed(pool)), 3, seed=7)
    assert a == b and len(a) == 3 * len(G.STRATA) and "x" not in {e.id for e in a}
    assert [e.stratum for e in a[: len(G.STRATA)]] == list(G.STRATA)
    assert G.sample(pool, 3, seed=8) != a


def test_wilson_interval_matches_its_closed_forms():
    z = 1.959964
    for n in (5, 12, 40):
        assert G.wilson(n, n)[0] == pytest.approx(n / (n + z * z))  # all killed: lower end
        assert G.wilson(0, n)[1] == pytest.approx(z * z / (n + z * z))  # none killed: upper end
    for k, n in ((9, 10), (37, 40), (1, 3)):
        p = k / n
        for end in G.wilson(k, n):  # the ends invert the score test: (p - p0)^2 = z^2 p0 (1 - p0) / n
            assert (p - end) ** 2 == pytest.approx(z * z * end * (1 - end) / n)


def stage(status, detail=""):
    return {"status": status, "detail": detail, "seconds": 1.0}


@pytest.mark.parametrize(
    ("tests", "check", "expected"),
    [
        (stage("KILLED", "1 failed: t: AssertionError"), stage("SKIPPED"), "assertion"),
        (stage("CRASH", "1 raised: t: TypeError: x"), stage("SKIPPED"), "exception"),
        (
            stage("CRASH", "(file by file after 'signal 11') a.py: 2 raised: t: ValueError"),
            stage("SKIPPED"),
            "exception",
        ),
        (stage("CRASH", "exit 2: collection error"), stage("SKIPPED"), "exception"),
        (stage("CRASH", "signal 11"), stage("SKIPPED"), "died"),
        (stage("CRASH", "(file by file after 'signal 6') a.py: signal 6"), stage("SKIPPED"), "died"),
        (stage("CRASH", "timeout"), stage("SKIPPED"), "died"),
        (stage("SURVIVED"), stage("KILLED", "x: FAIL (recorded PASS)"), "assertion"),
        (stage("SURVIVED"), stage("CRASH", "checks raised: a, b"), "exception"),
        (stage("SURVIVED"), stage("CRASH", "no report: Traceback"), "exception"),
        (stage("SURVIVED"), stage("CRASH", "timeout"), "died"),
        (stage("SURVIVED"), stage("SURVIVED"), "survived"),
    ],
)
def test_each_outcome_has_one_class(tests, check, expected):
    assert G.verdict({"id": "m", "tests": tests, "check": check}) == expected


def test_equivalence_needs_a_survivor_and_leaves_the_denominator(tmp_path):
    why = {"a": {"why": "identical", "equivalent": True}, "b": {"why": "a gap"}}
    rows = [
        {"id": "a", "tests": stage("SURVIVED"), "check": stage("SURVIVED")},
        {"id": "b", "tests": stage("SURVIVED"), "check": stage("SURVIVED")},
        {"id": "c", "tests": stage("CRASH", "1 raised: t: TypeError"), "check": stage("SKIPPED")},
        {"id": "d", "tests": stage("CRASH", "signal 11"), "check": stage("SKIPPED")},
    ]
    t = G.tally(rows, why)
    assert (t["equivalent"], t["survived"], t["exception"], t["died"], t["n"]) == (1, 1, 1, 1, 3)
    with pytest.raises(SystemExit, match="marked equivalent"):
        G.classify(rows[2], {"c": {"why": "no", "equivalent": True}})
    path = tmp_path / "why.toml"
    path.write_text('["x:1"]\nequivalent = true\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="without a why"):
        G.read_why(path)


def test_the_warm_cache_plan_follows_callees_and_constants():
    W = G.warm_cache

    def fn(file, entry, *deps):
        return {"file": file, "entry": entry, "deps": [file, *deps]}

    g = {
        "functions": {
            "p.a.f": fn("p/a.py", "p/a.f-"),
            "p.b.g": fn("p/b.py", "p/b.g-", "dispatcher:p.a.f"),
            "p.c.h": fn("p/c.py", "p/c.h-", "dispatcher:p.b.g", "q/consts.py"),
            "p.d.k": fn("p/d.py", "p/d.k-", "dispatcher:p.d.k"),  # recursion
        },
        "numba_files": ["p/a.py", "p/b.py", "p/c.py", "p/d.py", "p/types.py"],
    }
    assert W.plan(g, "p/a.py") == (W.PARTIAL, ["p/a.f-", "p/b.g-", "p/c.h-"])
    assert W.plan(g, "q/consts.py") == (W.PARTIAL, ["p/c.h-"])
    assert W.plan(g, "p/d.py") == (W.PARTIAL, ["p/d.k-"])
    assert W.plan(g, "q/pure.py") == (W.WHOLE, [])
    assert W.plan(g, "p/types.py") == (W.FRESH, [])  # numba used for something no name lookup follows


def test_the_graph_of_the_tree_finds_the_compiled_functions_and_their_callees():
    import re

    W = G.warm_cache
    g = W.graph(ROOT)
    text = (ROOT / "stability" / "schedulers" / "rad.py").read_text(encoding="utf-8")
    names = re.findall(r"^@njit[^\n]*\ndef (\w+)", text, flags=re.M)
    assert names and {f"stability.schedulers.rad.{n}" for n in names} <= set(g["functions"])
    loop = g["functions"]["stability.schedulers.rad.loop"]
    assert loop["entry"] == "stability_schedulers/rad.loop-"
    assert "dispatcher:stability.sim.engine.begin_cycle" in loop["deps"]  # named in the loop
    mode, entries = W.plan(g, "stability/sim/engine.py")
    assert mode == W.PARTIAL and "stability_schedulers/rad.loop-" in entries
