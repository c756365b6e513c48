"""The paper map: one row per numbered item of the paper, with the code and the checks behind it.

Every row is computed, never kept by hand:

* the items are the numbered list of :mod:`paper_checks.items` (equations, assumptions,
  propositions, lemmas, theorems, definitions, algorithms), then every appendix section named in a
  registered check's ``location`` ("Appendix C.2"), then, for the checks that name neither, the
  table or section their location starts with ("Table 1", "Section 7");
* the code of an item is found by scanning the docstrings of the installed packages
  (:data:`PACKAGES`, walked with :mod:`pkgutil`, so a module that moves is followed). The object
  that computes an item says so in its docstring with a sentence "Implements Eq. 7." (its role
  ``"implements"``), its sympy counterpart with "Symbolic twin of Eq. 7." (``"twin"``); every
  other object whose docstring cites the item ("Eq. 7", "Eqs. 23-25", "Lemmas 3-4",
  "Algorithm 1", "Appendix C.2") is listed as citing it (``"cites"``). A numbered item with no
  implementing object has its reason in :data:`paper_checks.items.NOT_IMPLEMENTED` (a step of a
  proof, a definition). The registered check functions are the checks, not implementations, and
  the check machinery (:data:`NOT_IMPLEMENTATIONS`) is left out;
* each numbered equation carries its printed LaTeX (:data:`EQUATIONS_PATH`), which the site renders
  as math;
* the checks are the registry's (:func:`paper_checks.registry.all_checks`), each listed under
  every item it covers (its ``items``, and the appendix sections of its ``location``); a check
  beyond the paper (the library's own extension of a result, section ``beyond``) is listed in its
  own column of the items it extends, never among the checks of those items, so its FAIL is not
  read as a FAIL of the paper;
* the verdict of a check is the recorded one (``verdicts.json``); the finding, coverage,
  counterexample, correction and margin come from a report of ``llmq check``
  (``paper_checks.json``) when one is given.

``python -m paper_checks.paper_map`` prints the counts.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path

from paper_checks.items import NOT_IMPLEMENTED, PAPER_ITEMS
from paper_checks.registry import Check, all_checks
from theory.config import read_toml

PACKAGES = ("theory", "stability", "paper_checks", "llmq")
# modules whose docstrings cite items without implementing them: the list of items itself, this
# map and the check machinery (their docstrings cite items as examples)
NOT_IMPLEMENTATIONS = ("paper_checks.items", "paper_checks.paper_map", "paper_checks.registry",
                       "paper_checks.runner", "paper_checks.report")
# the module docstrings of paper_checks list the items their checks cover: the checks column says
# that; their functions (the exact computations the checks compare with the printed claims) stay
CHECKS_PACKAGE = "paper_checks"
VERDICTS_PATH = Path(__file__).with_name("verdicts.json")
# the printed equations in LaTeX, with their source and transformation
EQUATIONS_PATH = Path(__file__).parent / "data" / "equations.toml"
ROLES = ("implements", "twin", "cites")

_KINDS = {
    "eq": "Eq.", "eqs": "Eq.", "equation": "Eq.", "equations": "Eq.",
    "assumption": "Assumption", "assumptions": "Assumption",
    "proposition": "Proposition", "propositions": "Proposition",
    "lemma": "Lemma", "lemmas": "Lemma",
    "theorem": "Theorem", "theorems": "Theorem",
    "definition": "Definition", "definitions": "Definition",
    "algorithm": "Algorithm", "algorithms": "Algorithm",
}
_NUM = r"\d+[a-z]?(?:\s*[-–]\s*\d+)?"
_CITATION = re.compile(
    r"\b(Eqs?\.|Equations?|Assumptions?|Propositions?|Lemmas?|Theorems?|Definitions?|Algorithms?)"
    rf"\s*({_NUM}(?:\s*(?:,|and|&)\s*{_NUM})*)")
_APPENDIX = re.compile(r"\bAppendix\s+([A-Z](?:\.\d+)?)\b")
# the markers of the implementing object and of its symbolic twin: the items up to the line's end
# or a semicolon ("Implements Eq. 7.", "Symbolic twin of Eqs. 11 and 12.")
_MARKERS = {"implements": re.compile(r"\bImplements\s+([^\n;]*)"),
            "twin": re.compile(r"\bSymbolic twin of\s+([^\n;]*)")}
_LOCATION_HEAD = re.compile(r"^(Table\s+\d+|Section\s+\d+|Abstract|Other papers)")


def cited_items(text: str) -> set[str]:
    """The items of the paper that ``text`` cites, in the spelling of :data:`PAPER_ITEMS`.

    Parameters
    ----------
    text : str
        A docstring or a check location.

    Returns
    -------
    set of str
        ``"Eq. 7"``, ``"Lemma 3"``, ``"Appendix C.2"``, ...: ranges are expanded ("Eqs. 23-25",
        "Lemmas 3-4"), lists split ("Eq. 17, 18 and 20"), sub-steps dropped ("Eq. 10a" is Eq. 10).

    Examples
    --------
    >>> sorted(cited_items("Eqs. 23-25 and Lemma 4 (Appendix C.2)"))
    ['Appendix C.2', 'Eq. 23', 'Eq. 24', 'Eq. 25', 'Lemma 4']
    """
    out = set()
    for kind, numbers in _CITATION.findall(text or ""):
        name = _KINDS[kind.lower().rstrip(".")]
        for part in re.split(r"\s*(?:,|and|&)\s*", numbers):
            bounds = [int(re.match(r"\d+", b).group()) for b in re.split(r"\s*[-–]\s*", part) if b]
            if not bounds:
                continue
            lo, hi = bounds[0], bounds[-1]
            for k in range(lo, hi + 1) if hi >= lo and hi - lo < 40 else (lo,):
                out.add(f"{name} {k}")
    out.update(f"Appendix {a}" for a in _APPENDIX.findall(text or ""))
    return out


def marked_items(text: str) -> dict[str, set[str]]:
    """The items ``text`` marks itself as implementing, or as the symbolic twin of.

    Parameters
    ----------
    text : str
        A docstring.

    Returns
    -------
    dict
        ``{"implements": items, "twin": items}``: the items cited after "Implements" and after
        "Symbolic twin of", up to the end of the line or a semicolon.

    Examples
    --------
    >>> marked_items("Implements Eq. 7; see Eq. 2.")
    {'implements': {'Eq. 7'}, 'twin': set()}
    """
    return {role: {i for m in pattern.finditer(text or "") for i in cited_items(m.group(1))}
            for role, pattern in _MARKERS.items()}


@dataclass(frozen=True)
class Implementer:
    """A documented object of the packages whose docstring cites an item.

    Attributes
    ----------
    name : str
        Fully qualified name, ``module.Class.method``: the anchor of its API reference entry.
    kind : str
        ``"function"``, ``"class"``, ``"method"`` or ``"module"``.
    role : str
        ``"implements"`` (its docstring says "Implements <item>"), ``"twin"`` ("Symbolic twin of
        <item>") or ``"cites"`` (it cites the item otherwise).
    """

    name: str
    kind: str
    role: str = "cites"


@dataclass(frozen=True)
class CheckEntry:
    """One registered check as the paper map shows it.

    Attributes
    ----------
    id, location, claim, method : str
        From the registry.
    items : tuple of str
        The rows it is listed under (for a check beyond the paper: the items it extends).
    verdict : str
        The recorded verdict (``verdicts.json``), ``"unrecorded"`` if none.
    finding : dict
        ``summary``, ``coverage``, ``counterexample``, ``correction``, ``correction_check``,
        ``evidence`` from a ``llmq check`` report, those it has; empty without a report.
    level : str
        The evidence level.
    domain : str
        The domain the claim quantifies over.
    section : str
        ``"paper"``, ``"beyond"`` or ``"other"`` (:data:`paper_checks.registry.SECTIONS`).
    """

    id: str
    location: str
    claim: str
    method: str
    items: tuple[str, ...]
    verdict: str
    finding: dict = field(default_factory=dict)
    level: str = ""
    domain: str = ""
    section: str = "paper"


@dataclass(frozen=True)
class Row:
    """One item of the paper.

    Attributes
    ----------
    item : str
        ``"Eq. 7"``, ``"Appendix C.2"``, ``"Table 1"``, ...
    group : str
        ``"numbered"`` (:data:`PAPER_ITEMS`), ``"appendix"`` or ``"other"``.
    implementers : tuple of Implementer
        Every object whose docstring marks or cites the item, implementing ones first.
    checks : tuple of str
        Ids of the checks listed under it.
    beyond : tuple of str
        Ids of the checks beyond the paper that extend it (their own column).
    latex : str
        The printed equation (numbered equations only; else empty).
    not_implemented : str
        Why no object implements the item (:data:`paper_checks.items.NOT_IMPLEMENTED`), or empty.
    """

    item: str
    group: str
    implementers: tuple[Implementer, ...]
    checks: tuple[str, ...]
    beyond: tuple[str, ...] = ()
    latex: str = ""
    not_implemented: str = ""

    def by_role(self, role: str) -> tuple[Implementer, ...]:
        """The implementers with ``role`` (:data:`ROLES`)."""
        return tuple(i for i in self.implementers if i.role == role)


def _modules(packages: tuple[str, ...]):
    for pkg_name in packages:
        pkg = importlib.import_module(pkg_name)
        yield pkg
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
            if info.name.endswith(".__main__"):
                continue
            yield importlib.import_module(info.name)


def _documented(mod):
    """(qualified name, kind, docstring) of the module and its public objects defined in it."""
    yield mod.__name__, "module", mod.__doc__ or ""
    for name, obj in vars(mod).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
            continue
        qual = f"{mod.__name__}.{name}"
        if inspect.isclass(obj):
            yield qual, "class", obj.__doc__ or ""
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                fn = fn.fget if isinstance(fn, property) else fn
                if inspect.isfunction(fn) and fn.__doc__:
                    yield f"{qual}.{attr}", "method", fn.__doc__
        elif inspect.isfunction(obj) or hasattr(obj, "py_func"):  # numba dispatchers have py_func
            yield qual, "function", obj.__doc__ or ""


def scan_docstrings(packages: tuple[str, ...] = PACKAGES,
                    exclude: frozenset[str] = frozenset()) -> dict[str, list[Implementer]]:
    """Item -> the documented objects of ``packages`` whose docstring cites it.

    Parameters
    ----------
    packages : tuple of str
        Top-level packages, walked recursively.
    exclude : frozenset of str
        Qualified names to leave out (the registered check functions). The modules of
        :data:`NOT_IMPLEMENTATIONS` and the module docstrings of :data:`CHECKS_PACKAGE` are
        always left out.

    Returns
    -------
    dict
        ``{item: [Implementer, ...]}``: the implementing objects, then the symbolic twins, then the
        objects citing it (objects before the modules that hold them), each in walk order.
    """
    found: dict[str, list[Implementer]] = {}
    seen = set()
    for mod in _modules(packages):
        if mod.__name__ in NOT_IMPLEMENTATIONS:
            continue
        for qual, kind, doc in _documented(mod):
            if kind == "module" and qual.split(".")[0] == CHECKS_PACKAGE:
                continue
            if qual in exclude or qual in seen:
                continue
            seen.add(qual)
            marked = marked_items(doc)
            for item in cited_items(doc):
                role = next((r for r in ("implements", "twin") if item in marked[r]), "cites")
                found.setdefault(item, []).append(Implementer(qual, kind, role))
    order = {"function": 0, "class": 0, "method": 0, "module": 1}
    return {k: sorted(v, key=lambda i: (ROLES.index(i.role), order[i.kind])) for k, v in found.items()}


def load_equations(path: str | Path = EQUATIONS_PATH) -> dict[str, str]:
    """``{"Eq. 2": latex, ...}``: the printed equations (:data:`EQUATIONS_PATH`)."""
    return {k: v["latex"].strip() for k, v in read_toml(path)["equations"].items()}


def check_items(check: Check) -> tuple[str, ...]:
    """The rows a check is listed under: its numbered ``items``, the appendix sections its
    ``location`` names, or (when it has neither) the table or section its location starts with; for
    a check beyond the paper, the items it extends (in their beyond-the-paper column)."""
    if check.section == "beyond":
        return tuple(check.extends)
    items = list(dict.fromkeys(check.items))
    items += sorted(i for i in cited_items(check.location) if i.startswith("Appendix") and i not in items)
    if not items:
        head = _LOCATION_HEAD.match(check.location)
        items.append(head.group(1) if head else check.location.split(",")[0].strip())
    return tuple(items)


def _appendix_key(item: str):
    letter, _, num = item.removeprefix("Appendix ").partition(".")
    return letter, int(num or 0)


def load_report(path: str | Path | None) -> dict[str, dict]:
    """``{check id: finding}`` from a ``llmq check`` report (``paper_checks.json``); empty if
    ``path`` is None or does not exist."""
    if path is None or not Path(path).is_file():
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    keys = ("summary", "coverage", "counterexample", "correction", "correction_check", "evidence")
    return {c["id"]: {k: c[k] for k in (*keys, "margin") if c.get(k) or (k == "margin" and k in c)}
            for c in data.get("checks", [])}


@dataclass(frozen=True)
class PaperMap:
    """The whole map: rows in paper order and the checks they point at.

    Attributes
    ----------
    rows : tuple of Row
    checks : dict
        ``{check id: CheckEntry}`` in registry (paper) order.
    """

    rows: tuple[Row, ...]
    checks: dict[str, CheckEntry]

    def counts(self) -> dict[str, int]:
        """Items, numbered items, rows with an implementing object, rows with a symbolic twin, rows
        with checks, checks listed (beyond-the-paper checks included)."""
        listed = {c for r in self.rows for c in (*r.checks, *r.beyond)}
        return {"items": len(self.rows),
                "numbered items": sum(r.group == "numbered" for r in self.rows),
                "rows with functions": sum(bool(r.by_role("implements")) for r in self.rows),
                "rows with symbolic twins": sum(bool(r.by_role("twin")) for r in self.rows),
                "rows with checks": sum(bool(r.checks) for r in self.rows),
                "checks listed": len(listed)}


def build(report: str | Path | None = None, verdicts_path: str | Path = VERDICTS_PATH,
          packages: tuple[str, ...] = PACKAGES) -> PaperMap:
    """Compute the paper map.

    Parameters
    ----------
    report : path, optional
        A ``paper_checks.json`` written by ``llmq check``; its findings are shown with the checks.
    verdicts_path : path
        The recorded verdicts (default: the package's ``verdicts.json``).
    packages : tuple of str
        The packages whose docstrings are scanned.

    Returns
    -------
    PaperMap
    """
    checks = all_checks()
    recorded = json.loads(Path(verdicts_path).read_text(encoding="utf-8"))
    findings = load_report(report)
    exclude = frozenset(f"{c.run.__module__}.{c.run.__name__}" for c in checks)
    implementers = scan_docstrings(packages, exclude)

    entries = {c.id: CheckEntry(c.id, c.location, c.claim, c.method, check_items(c),
                                recorded.get(c.id, "unrecorded"), findings.get(c.id, {}), str(c.level),
                                c.domain, c.section)
               for c in checks}
    by_item: dict[str, list[str]] = {}
    extended: dict[str, list[str]] = {}
    for e in entries.values():
        for item in e.items:
            (extended if e.section == "beyond" else by_item).setdefault(item, []).append(e.id)

    appendix = sorted((i for i in by_item if i.startswith("Appendix")), key=_appendix_key)
    other = [i for i in by_item if i not in PAPER_ITEMS and i not in appendix]
    groups = ([(i, "numbered") for i in PAPER_ITEMS] + [(i, "appendix") for i in appendix]
              + [(i, "other") for i in other])
    equations = load_equations()
    rows = tuple(Row(item, group, tuple(implementers.get(item, ())), tuple(by_item.get(item, ())),
                     tuple(extended.get(item, ())), equations.get(item, ""), NOT_IMPLEMENTED.get(item, ""))
                 for item, group in groups)
    return PaperMap(rows, entries)


def main() -> None:
    """Print the paper map's counts."""
    pm = build()
    print(", ".join(f"{k}: {v}" for k, v in pm.counts().items()))
    missing = [r.item for r in pm.rows if r.group == "numbered" and not r.by_role("implements")
               and not r.not_implemented]
    if missing:
        print("numbered items with neither an implementing object nor a reason:", ", ".join(missing))


if __name__ == "__main__":  # pragma: no cover
    main()
