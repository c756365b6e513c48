"""What a check evaluates, and the evidence level that follows from it.

Every registered check declares the computations its verdict rests on (``evaluates``), each one
of:

:class:`Symbolic`
    a sympy identity or inequality, or a z3 validity, over free symbols: the whole parameter family
    at once. ``build`` is the function the check itself calls to state it, so the statement can be
    inspected without running the check.
:class:`Enumeration`
    every case of a stated finite domain, with its size.
:class:`Points`
    chosen or seeded points: presets, a grid, random batches, a bounded part of an infinite
    domain, a simulation at a few loads.
:class:`StatTest`
    a statistical test with a stated error rate ``alpha``.
:class:`Reading`
    the printed text against a corrected transcription, or a definition restated: nothing the
    library computes can change the verdict.

:func:`level_of` derives the evidence level those computations give, the one rule a check's
declared level must agree with (``tests/test_paper_checks.py`` inspects every check):

* ``reading`` when the verdict rests on a reading of the text (whatever else the check computes:
  it cannot fail on a change of the library);
* ``statistical`` when it rests on a test with a stated error rate;
* ``sample`` when it evaluates chosen points or only part of the domain its claim quantifies over;
* ``exhaustive`` when every enumeration covers the whole finite domain the claim quantifies over
  (the check's ``domain``), with symbolic statements beside them or not;
* ``proof`` when it rests on symbolic statements alone, none evaluated at a point;
* ``none`` when nothing is evaluated (NOT_CHECKABLE).

A check's claim ``domain`` is what its claim quantifies over, in the paper's words; its result's
coverage is what was checked. Only ``proof``, ``exhaustive`` (over the whole domain, not shrunk by
``--quick``) and ``reading`` cover the claim's whole domain; every other check covers part of it,
and the report says so beside its verdict (:func:`covers_whole_domain`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SYMBOLIC_TOOLS = ("sympy", "z3")


@dataclass(frozen=True)
class Symbolic:
    """A symbolic statement over the whole parameter family.

    Attributes
    ----------
    tool : str
        ``"sympy"`` or ``"z3"``.
    build : callable
        ``build()`` returns the statement(s) the check decides: a sympy expression or relation
        (an expression stands for ``expr == 0``), a z3 formula, or a tuple or dict of them (z3:
        a ``(claim, premises)`` pair counts as one statement).
    what : str
        The statement in words.
    """

    tool: str
    build: Callable[[], object]
    what: str


@dataclass(frozen=True)
class Enumeration:
    """Every case of a finite domain.

    Attributes
    ----------
    domain : str
        The domain enumerated, in the words of the check's claim ``domain`` when it is that one.
    size : callable
        ``size()`` is the number of cases.
    """

    domain: str
    size: Callable[[], int]


@dataclass(frozen=True)
class Points:
    """Chosen or seeded points of a domain (never all of it).

    Attributes
    ----------
    what : str
        Which points: presets, a grid, seeded samples, a bounded part of the domain.
    """

    what: str


@dataclass(frozen=True)
class StatTest:
    """A statistical test with a stated error rate.

    Attributes
    ----------
    test : str
        The test (its statistic and null hypothesis).
    alpha : float
        Its error rate (level), in (0, 1).
    """

    test: str
    alpha: float


@dataclass(frozen=True)
class Reading:
    """The printed text against a corrected transcription, or a definition restated.

    Attributes
    ----------
    text : str
        What is read: the printed words or formula.
    """

    text: str


Method = Symbolic | Enumeration | Points | StatTest | Reading


def level_of(evaluates: tuple[Method, ...], domain: str) -> str:
    """The evidence level that the computations ``evaluates`` give a claim over ``domain``.

    Parameters
    ----------
    evaluates : tuple of Method
        What the check evaluates (see the module docstring).
    domain : str
        The domain its claim quantifies over.

    Returns
    -------
    str
        ``"reading"``, ``"statistical"``, ``"sample"``, ``"exhaustive"``, ``"proof"`` or ``"none"``.
    """
    kinds = {type(m) for m in evaluates}
    if not evaluates:
        return "none"
    if Reading in kinds:
        return "reading"
    if StatTest in kinds:
        return "statistical"
    partial = [m for m in evaluates if isinstance(m, Enumeration) and m.domain != domain]
    if Points in kinds or partial:
        return "sample"
    if Enumeration in kinds:
        return "exhaustive"
    return "proof"


def method_problems(evaluates: tuple[Method, ...]) -> list[str]:
    """What is malformed in ``evaluates``: a symbolic statement that is no sympy or z3 object or
    has no free symbol (a point evaluation), an empty or non-positive enumeration, an error rate
    outside (0, 1), an empty description. Builds every symbolic statement. Empty when well formed."""
    out = []
    for m in evaluates:
        if isinstance(m, Symbolic):
            if m.tool not in SYMBOLIC_TOOLS:
                out.append(f"symbolic tool {m.tool!r} is not one of {SYMBOLIC_TOOLS}")
                continue
            for name, stmt in statements(m.build()):
                free = free_symbols(stmt, m.tool)
                if free is None:
                    out.append(f"{m.what}: {name} is no {m.tool} statement ({type(stmt).__name__})")
                elif not free:
                    out.append(f"{m.what}: {name} has no free symbol (a point evaluation)")
        elif isinstance(m, Enumeration):
            if not m.domain.strip() or m.size() < 1:
                out.append(f"enumeration of {m.domain!r} is empty")
        elif isinstance(m, StatTest):
            if not 0 < m.alpha < 1 or not m.test.strip():
                out.append(f"test {m.test!r} with error rate {m.alpha} (want a test and 0 < alpha < 1)")
        elif isinstance(m, (Points, Reading)):
            text = m.what if isinstance(m, Points) else m.text
            if not text.strip():
                out.append(f"{type(m).__name__} without a description")
        else:
            out.append(f"{m!r} is not a method of paper_checks.evidence")
    return out


def statements(built) -> list[tuple[str, object]]:
    """``(name, statement)`` pairs of what a :class:`Symbolic` ``build()`` returned."""
    if isinstance(built, dict):
        return [(str(k), v) for k, v in built.items()]
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[1], (list, tuple)):
        return [("statement", built)]  # a z3 (claim, premises) pair
    if isinstance(built, (list, tuple)):
        return [(f"statement {k + 1}", v) for k, v in enumerate(built)]
    return [("statement", built)]


def free_symbols(stmt, tool: str) -> set[str] | None:
    """The names of the free symbols of a sympy statement or of the uninterpreted constants of a z3
    one (a ``(claim, premises)`` pair: of all of them); None if ``stmt`` is not a ``tool`` object."""
    if tool == "sympy":
        import sympy as sp

        return {str(s) for s in stmt.free_symbols} if isinstance(stmt, sp.Basic) else None
    import z3

    parts = [stmt[0], *stmt[1]] if isinstance(stmt, tuple) else [stmt]
    if not all(isinstance(p, z3.ExprRef) for p in parts):
        return None
    found: set[str] = set()
    todo = list(parts)
    while todo:
        e = todo.pop()
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found.add(str(e))
        todo.extend(e.children())
    return found


def describe(m: Method) -> dict:
    """``m`` as JSON-ready data: its kind and its description (a symbolic statement's tool and words,
    an enumeration's domain and size, a test's error rate)."""
    if isinstance(m, Symbolic):
        return {"kind": "symbolic", "tool": m.tool, "statement": m.what}
    if isinstance(m, Enumeration):
        return {"kind": "enumeration", "domain": m.domain, "size": m.size()}
    if isinstance(m, StatTest):
        return {"kind": "statistical test", "test": m.test, "alpha": m.alpha}
    if isinstance(m, Points):
        return {"kind": "points", "points": m.what}
    return {"kind": "reading", "text": m.text}


def covers_whole_domain(level: str, shrunk: bool) -> bool:
    """Whether a check of evidence ``level`` covered its claim's whole domain: a proof, a reading,
    and an exhaustive enumeration that ``--quick`` did not shrink (``shrunk``) do; samples and
    statistical tests never do."""
    return level in ("proof", "reading") or (level == "exhaustive" and not shrunk)
