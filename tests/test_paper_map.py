"""The paper map (paper_checks.paper_map and the page docs/_ext/llmq_docs.py writes from it)."""

import importlib
import json
import sys
from pathlib import Path

import pytest

from paper_checks.items import NOT_IMPLEMENTED, PAPER_ITEMS
from paper_checks.paper_map import Implementer, build, cited_items, load_report, marked_items, scan_docstrings
from paper_checks.registry import all_checks

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pm():
    return build()


def docs_extension():
    """The documentation site's extension module (docs/_ext/llmq_docs.py), imported without Sphinx."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        return importlib.import_module("llmq_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))


def resolve(name: str):
    """The object a qualified name ``package.module.Class.attr`` names (ImportError/AttributeError
    if there is none)."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def test_citations_are_parsed_with_ranges_lists_and_substeps():
    assert cited_items("Eq. 2-7") == {f"Eq. {k}" for k in range(2, 8)}
    assert cited_items("Eqs. 23–25 and Lemmas 3-4") == {"Eq. 23", "Eq. 24", "Eq. 25", "Lemma 3", "Lemma 4"}
    assert cited_items("Eq. 17, 18 and 20; Eq. 10a") == {"Eq. 17", "Eq. 18", "Eq. 20", "Eq. 10"}
    assert cited_items("Algorithm 1 (RAD), Appendix C.2, Theorem 2's n") == {
        "Algorithm 1", "Appendix C.2", "Theorem 2"}
    assert cited_items("no citation: equation of state, lemma") == set()


def test_every_numbered_item_has_exactly_one_row(pm):
    items = [r.item for r in pm.rows]
    assert len(items) == len(set(items))
    missing = [i for i in PAPER_ITEMS if i not in items]
    assert not missing, f"numbered items without a row: {missing}"
    assert [r.item for r in pm.rows if r.group == "numbered"] == list(PAPER_ITEMS)


def test_every_numbered_item_is_checked_and_implemented_or_says_why_not(pm):
    numbered = [r for r in pm.rows if r.group == "numbered"]
    for row in numbered:
        assert row.checks, f"{row.item}: no check covers it"
        implemented = bool(row.by_role("implements"))
        assert implemented != bool(row.not_implemented), (
            f"{row.item}: needs either an object whose docstring says 'Implements {row.item}' or a "
            f"reason in paper_checks.items.NOT_IMPLEMENTED, not both")
    assert set(NOT_IMPLEMENTED) <= set(PAPER_ITEMS)
    # the model, the bounds, the theorems and the algorithms have code; only proof steps and
    # definitions may say why not
    for row in numbered:
        if row.item.startswith(("Theorem", "Algorithm", "Assumption")) or row.item in {
                f"Eq. {k}" for k in (*range(2, 9), 12, 13, 23, 24, 25)}:
            assert row.by_role("implements"), row.item


def test_symbolic_twins_are_sympy_and_markers_name_items(pm):
    for row in pm.rows:
        for twin in row.by_role("twin"):
            module = sys.modules[resolve(twin.name).__module__]
            assert "sp" in vars(module) or "sympy" in vars(module), twin.name
    assert {r.item for r in pm.rows if r.by_role("twin")} >= {f"Eq. {k}" for k in (2, 3, 4, 5, 6, 7)}
    # every marked item is a row of the map (a marker naming no item of the paper is an error)
    rows = {r.item for r in pm.rows}
    marked = {item for item, found in scan_docstrings().items() for i in found if i.role != "cites"}
    assert marked <= rows, marked - rows


def test_markers_are_parsed_and_a_stray_one_is_caught():
    assert marked_items("T.\n\nImplements Eq. 7.\nSymbolic twin of Eqs. 11 and 12; see Eq. 2.") == {
        "implements": {"Eq. 7"}, "twin": {"Eq. 11", "Eq. 12"}}
    assert marked_items("implements Eq. 7 (lower case: a sentence, not a marker)") == {
        "implements": set(), "twin": set()}
    assert "Eq. 99" not in PAPER_ITEMS and marked_items("Implements Eq. 99.")["implements"] == {"Eq. 99"}


def test_every_numbered_equation_has_its_printed_latex(pm):
    for row in pm.rows:
        assert bool(row.latex) == row.item.startswith("Eq."), row.item
        if row.latex:
            assert row.latex.count("\\left") == row.latex.count("\\right"), row.item
            assert row.latex.count("{") == row.latex.count("}"), row.item
            assert "\\tag" not in row.latex, row.item


def test_every_row_points_at_objects_that_exist(pm):
    for row in pm.rows:
        for impl in row.implementers:
            obj = resolve(impl.name)
            assert row.item in cited_items(obj.__doc__ or ""), (row.item, impl.name)


def test_a_row_pointing_at_a_missing_function_is_caught():
    with pytest.raises(AttributeError):
        resolve(Implementer("theory.cost.no_such_function", "function").name)
    with pytest.raises(ImportError):
        resolve("no_such_package.f")


def test_checks_are_the_registry_with_their_recorded_verdicts(pm):
    registered = {c.id for c in all_checks()}
    recorded = json.loads((ROOT / "paper_checks" / "verdicts.json").read_text(encoding="utf-8"))
    assert list(pm.checks) == [c.id for c in all_checks()]
    listed = {cid for row in pm.rows for cid in (*row.checks, *row.beyond)}
    assert listed == registered, registered - listed
    for entry in pm.checks.values():
        assert entry.verdict == recorded[entry.id]
        assert entry.level and entry.domain
        for item in entry.items:  # a check's items are rows, and the rows list it back
            row = next(r for r in pm.rows if r.item == item)
            assert entry.id in (row.beyond if entry.section == "beyond" else row.checks)


def test_beyond_the_paper_has_its_own_column(pm):
    """The library's own extensions (a per-batch overhead) FAIL, but never in the checks column of the
    theorems they extend: those columns hold the paper's verdicts only."""
    beyond = {e.id for e in pm.checks.values() if e.section == "beyond"}
    planner = {"beyond.planner_prices", "beyond.planner_tie_break"}
    assert beyond == {"beyond.thm1_overhead", "beyond.thm2_rad_overhead", "beyond.moe_capacity", *planner}
    rows = {r.item: r for r in pm.rows}
    assert not beyond & {cid for r in pm.rows for cid in r.checks}
    assert set(rows["Theorem 1"].beyond) == {"beyond.thm1_overhead", "beyond.moe_capacity", *planner}
    assert rows["Theorem 2"].beyond == ("beyond.thm2_rad_overhead",)
    assert not any(r.item.startswith("Beyond") for r in pm.rows)


def test_appendix_claims_have_rows_from_the_checks_locations(pm):
    appendix = {r.item for r in pm.rows if r.group == "appendix"}
    assert {"Appendix B.1", "Appendix C.2", "Appendix C.3"} <= appendix
    for item in appendix:
        row = next(r for r in pm.rows if r.item == item)
        assert all(item in cited_items(pm.checks[c].location) for c in row.checks)


def test_the_report_findings_are_attached(tmp_path):
    report = tmp_path / "paper_checks.json"
    report.write_text(json.dumps({"checks": [
        {"id": "eq5.missing_1_over_s", "summary": "off by 1/s", "correction": "divide by s",
         "counterexample": {"gpu": "a100"}, "coverage": ""},
        {"id": "eq2_eq3.tile_counts", "summary": "holds", "margin": 0.05}]}), encoding="utf-8")
    assert load_report(report) == {"eq5.missing_1_over_s": {
        "summary": "off by 1/s", "correction": "divide by s", "counterexample": {"gpu": "a100"}},
        "eq2_eq3.tile_counts": {"summary": "holds", "margin": 0.05}}
    assert load_report(tmp_path / "absent.json") == {}
    pm = build(report=report)
    assert pm.checks["eq5.missing_1_over_s"].finding["correction"] == "divide by s"
    llmq_docs = docs_extension()
    page = llmq_docs.paper_map_rst(pm)
    assert "<check-eq2-eq3-tile-counts>` **" in page and "margin 5%)" in page  # the margin is shown


def test_the_page_links_items_functions_and_checks_both_ways(pm):
    llmq_docs = docs_extension()
    page = llmq_docs.paper_map_rst(pm)
    for row in pm.rows:
        assert f".. _{llmq_docs.item_label(row.item)}:" in page  # the row's anchor
        for impl in row.by_role("cites"):  # the item's section -> API reference
            assert f"<{impl.name}>`" in page or f":py:mod:`{impl.name}`" in page
        for cid in (*row.checks, *row.beyond):  # row -> check
            assert f"`{cid} <{llmq_docs.check_label(cid)}>`" in page
    for row in pm.rows:  # the item's section: its equation as math, its code, its checks
        if row.latex:
            assert ".. math::\n\n" + llmq_docs._indent(row.latex, 3) in page
        for impl in (*row.by_role("implements"), *row.by_role("twin")):
            assert f":py:obj:`{impl.name}`" in page
        if row.not_implemented:
            assert llmq_docs._esc(row.not_implemented) in page
    for entry in pm.checks.values():  # check -> its section with the verdict, and back to the rows
        assert f".. _{llmq_docs.check_label(entry.id)}:" in page
        assert f"**Verdict (recorded): {entry.verdict}**" in page
        assert f"- **Evidence level**: {entry.level}" in page
        for item in entry.items:
            assert f"`{item} <{llmq_docs.item_label(item)}>`" in page
    counts = pm.counts()
    print("paper map:", ", ".join(f"{k} {v}" for k, v in counts.items()))
    assert counts["items"] == len(pm.rows) and counts["checks listed"] == len(pm.checks)
