"""The registry of paper checks: a check is a claim of the paper, a computation, and a verdict.

A :class:`Check` names where the claim is (section, equation, algorithm line), states it in our
own words, says how it is tested, and lists the numbered items of the paper it covers (``"Eq. 5"``,
``"Lemma 3"``, ...). Its ``run(fast)`` computes a :class:`Result`; no verdict is ever written by
hand. Verdicts:

PASS
    the computation could have refuted the claim and did not; ``coverage`` says over what.
FAIL
    the claim is false; ``counterexample`` is a minimal concrete instance anyone can replay.
ERRATUM
    the claim as printed is false (``counterexample``) but an evident correction holds:
    ``correction`` states it and ``correction_check`` how it was checked.
NOT_CHECKABLE
    no computation can refute it (``summary`` says why).

Checks register themselves with :func:`register` when their module is imported;
:func:`all_checks` imports every module of the package in paper order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from theory.errors import FieldError, UnknownNameError

MODULES = ("section3_model", "appendix_b", "section4_theorems", "appendix_c", "algorithms",
           "section5_claims", "section67_data", "nodes_and_defaults", "other_papers")


class Verdict(str, Enum):
    """The outcome of a check (see the module docstring)."""

    PASS = "PASS"
    FAIL = "FAIL"
    ERRATUM = "ERRATUM"
    NOT_CHECKABLE = "NOT_CHECKABLE"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Result:
    """What a check found.

    Attributes
    ----------
    verdict : Verdict
    summary : str
        One line: the finding, with its decisive numbers.
    coverage : str
        For PASS: what was covered (GPUs, tile sets, ranges, sample sizes).
    counterexample : dict
        For FAIL and ERRATUM: concrete inputs that refute the claim as printed.
    correction : str
        For ERRATUM: the corrected statement.
    correction_check : str
        For ERRATUM: how the correction was checked, and over what.
    evidence : dict
        Further numbers (JSON-serialisable).
    """

    verdict: Verdict
    summary: str
    coverage: str = ""
    counterexample: dict = field(default_factory=dict)
    correction: str = ""
    correction_check: str = ""
    evidence: dict = field(default_factory=dict)

    def __post_init__(self):
        v = self.verdict
        if v is Verdict.PASS and not self.coverage:
            raise FieldError("Result.coverage", self.coverage, "a description of what a PASS covered")
        if v in (Verdict.FAIL, Verdict.ERRATUM) and not self.counterexample:
            raise FieldError("Result.counterexample", self.counterexample,
                             f"a concrete counterexample for a {v} verdict")
        if v is Verdict.ERRATUM and not (self.correction and self.correction_check):
            raise FieldError("Result.correction", self.correction,
                             "a correction and how it was checked, for an ERRATUM verdict")


@dataclass(frozen=True)
class Check:
    """One claim of the paper as an executable check.

    Attributes
    ----------
    id : str
        Stable identifier, e.g. ``"eq5.missing_1_over_s"``.
    location : str
        Where the claim is in the paper.
    items : tuple of str
        Numbered items it covers: ``"Eq. 5"``, ``"Assumption 3"``, ``"Algorithm 1"``, ...
    claim : str
        The claim in our words.
    method : str
        The computation that could refute it.
    run : callable
        ``run(fast: bool) -> Result``; ``fast`` shrinks ranges (the result says so in coverage).
    """

    id: str
    location: str
    items: tuple[str, ...]
    claim: str
    method: str
    run: Callable[[bool], Result]


_REGISTRY: dict[str, Check] = {}


def register(id: str, *, location: str, items: tuple[str, ...] | list[str], claim: str,
             method: str) -> Callable[[Callable[[bool], Result]], Callable[[bool], Result]]:
    """Decorator: register ``fn(fast) -> Result`` as the check ``id``; a check without a docstring
    gets one from its location, claim and method."""

    def wrap(fn: Callable[[bool], Result]) -> Callable[[bool], Result]:
        if id in _REGISTRY:
            raise FieldError("check id", id, "an id not registered twice")
        _REGISTRY[id] = Check(id=id, location=location, items=tuple(items), claim=claim,
                              method=method, run=fn)
        fn.__doc__ = fn.__doc__ or f"Check {id} ({location}): {claim}\n\nMethod: {method}"
        return fn

    return wrap


def all_checks() -> list[Check]:
    """Every registered check, in paper order (imports all check modules)."""
    for name in MODULES:
        importlib.import_module(f"paper_checks.{name}")
    order = {f"paper_checks.{name}": k for k, name in enumerate(MODULES)}
    return sorted(_REGISTRY.values(), key=lambda c: order.get(c.run.__module__, len(order)))


def get_check(check_id: str) -> Check:
    """The check with id ``check_id``.

    Raises
    ------
    UnknownNameError
        If no check has that id.
    """
    checks = {c.id: c for c in all_checks()}
    if check_id not in checks:
        raise UnknownNameError("check id", check_id, list(checks))
    return checks[check_id]


# --- verdict helpers --------------------------------------------------------------------------


def judged(printed_holds: bool, corrected_holds: bool | None = None) -> Verdict:
    """PASS if the printed claim holds; else ERRATUM if a checked correction holds; else FAIL."""
    if printed_holds:
        return Verdict.PASS
    return Verdict.ERRATUM if corrected_holds else Verdict.FAIL


def not_checkable(because: str) -> Result:
    """A NOT_CHECKABLE result; ``because`` completes "not checkable because ..."."""
    return Result(Verdict.NOT_CHECKABLE, f"not checkable because {because}")
