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

Every check states the domain its claim quantifies over (``domain``), what it evaluates
(``evaluates``: symbolic statements, enumerations, points, statistical tests, readings of the text;
:mod:`paper_checks.evidence`) and its evidence :class:`Level`, which must be the one
:func:`paper_checks.evidence.level_of` derives from them: ``proof`` (symbolic statements over the
whole parameter family, by sympy or the SMT solver z3, none evaluated at a point), ``exhaustive``
(every case of the stated finite domain the claim quantifies over), ``statistical`` (a test with a
stated error rate, whose result names the test, its error rate and its power), ``sample`` (chosen
or seeded points, or part of the domain: the claim could fail off them), ``reading`` (the printed
text against a corrected transcription, or a definition restated: no change of the library can
move the verdict), ``none`` (NOT_CHECKABLE). A check is *two-sided* when the same code path has
been shown to return PASS on one input and FAIL or ERRATUM on another
(``tests/test_paper_checks_two_sided.py`` feeds each check a flipped premise, a corrected
statement or a mutated input); only two-sided checks count as covering a numbered item of the paper.

A check belongs to one :data:`SECTIONS`: ``paper`` (a claim of the paper), ``beyond`` (the
library's own extension of a result of the paper to what its model leaves out, e.g. a per-batch
overhead: ``extends`` names the items, and a FAIL there is not an error of the paper) or ``other``
(another paper's result).

Checks register themselves with :func:`register` when their module is imported;
:func:`all_checks` imports every module of the package in paper order.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum

from paper_checks.evidence import Method, level_of
from paper_checks.items import PAPER_ITEMS
from paper_checks.margins import BLIND_ABOVE, KINDS, Margin
from theory.errors import FieldError, UnknownNameError

MODULES = ("section3_model", "section3_assumptions", "appendix_b", "appendix_b_bounds", "section4_theorems",
           "appendix_c", "appendix_c_recurrence", "algorithms",
           "section5_claims", "section67_data", "slai_steps", "nodes_and_defaults", "proofs",
           "compiled_rad", "default_mode", "statements", "figure5", "section7_results", "beyond_paper",
           "beyond_planner", "other_papers")
SECTIONS = ("paper", "beyond", "other")


class Level(str, Enum):
    """The strength of a check's evidence (see the module docstring)."""

    PROOF = "proof"
    EXHAUSTIVE = "exhaustive"
    STATISTICAL = "statistical"
    SAMPLE = "sample"
    READING = "reading"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


STATISTICAL_EVIDENCE = ("test", "alpha", "power")  # what a statistical check's evidence must name


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
    shrunk : bool
        True when ``--quick`` enumerated less than the claim's whole finite domain (an exhaustive
        check run on a subset says so).
    margin : float, str or None
        For a PASS on a computed quantity: the smallest relative perturbation of that quantity
        that flips the verdict (:mod:`paper_checks.margins`); ``"exact"`` for an equality,
        ``"n/a"`` where the check compares no quantity with a threshold (a reading, a symbolic
        statement, a discrete predicate: :data:`paper_checks.margins.KINDS`); None where it has
        not been derived.
    blind_spot : str
        For a margin above :data:`paper_checks.margins.BLIND_ABOVE`: what an error of the
        quantity smaller than the margin does that the check cannot see.
    """

    verdict: Verdict
    summary: str
    coverage: str = ""
    counterexample: dict = field(default_factory=dict)
    correction: str = ""
    correction_check: str = ""
    evidence: dict = field(default_factory=dict)
    shrunk: bool = False
    margin: Margin | None = None
    blind_spot: str = ""

    def __post_init__(self):
        v = self.verdict
        if self.margin is not None:
            numeric = not isinstance(self.margin, str)
            if v is not Verdict.PASS or not (self.margin >= 0 if numeric else self.margin in KINDS):
                raise FieldError("Result.margin", self.margin,
                                 f"a margin >= 0 or one of {list(KINDS)}, on a PASS only")
            if numeric and self.margin > BLIND_ABOVE and not self.blind_spot:
                raise FieldError("Result.blind_spot", self.blind_spot,
                                 f"what the check cannot see, for a margin above {BLIND_ABOVE:g}")
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
    level : Level
        The strength of the evidence the method gives.
    domain : str
        What the claim quantifies over, in the paper's words.
    evaluates : tuple of Method
        What the check evaluates (:mod:`paper_checks.evidence`); ``level`` must be
        ``level_of(evaluates, domain)``.
    section : str
        One of :data:`SECTIONS`.
    extends : tuple of str
        For a ``beyond`` check: the numbered items of the paper it extends.
    """

    id: str
    location: str
    items: tuple[str, ...]
    claim: str
    method: str
    run: Callable[[bool], Result]
    level: Level = Level.SAMPLE
    domain: str = ""
    evaluates: tuple[Method, ...] = ()
    section: str = "paper"
    extends: tuple[str, ...] = ()

    @property
    def derived_level(self) -> str:
        """The level :func:`paper_checks.evidence.level_of` derives from ``evaluates``."""
        return level_of(self.evaluates, self.domain)

    def validate(self, result: Result) -> Result:
        """``result``, once it carries what the check's level promises.

        Raises
        ------
        FieldError
            If a statistical check's evidence does not name its test, error rate and power, a
            check that is not exhaustive says ``--quick`` shrank its domain, or a NOT_CHECKABLE
            verdict comes from a check with a level of evidence.
        """
        if result.verdict is Verdict.NOT_CHECKABLE:
            if self.level is not Level.NONE:
                raise FieldError(f"{self.id} level", str(self.level), "none, for a NOT_CHECKABLE verdict")
        elif self.level is Level.NONE:
            raise FieldError(f"{self.id} verdict", str(result.verdict), "NOT_CHECKABLE, for level none")
        elif self.level is Level.STATISTICAL:
            missing = [k for k in STATISTICAL_EVIDENCE if k not in result.evidence]
            if missing:
                raise FieldError(f"{self.id} evidence", sorted(result.evidence),
                                 f"the statistical test's {', '.join(missing)}")
        if result.shrunk and self.level is not Level.EXHAUSTIVE:
            raise FieldError(f"{self.id} shrunk", True, "False: only an exhaustive domain is shrunk")
        return result


_REGISTRY: dict[str, Check] = {}


CARD_REQUIRED = ("location", "items", "claim", "method", "level")  # the card fields without a default


def register(id: str, **card_fields) -> Callable[[Callable[[bool], Result]], Callable[[bool], Result]]:
    """Decorator: register ``fn(fast) -> Result`` as the check ``id``, whose card ``card_fields``
    are the fields of :class:`Check` but ``id`` and ``run`` (:data:`CARD_REQUIRED` without a
    default): its evidence ``level``, its claim's ``domain`` and what it ``evaluates``, its
    ``location``, ``claim``, ``method``, ``items``, ``section`` and ``extends``; a check without a
    docstring gets :func:`card`
    (its location, claim, domain, method and level), which must therefore be non-empty, and
    ``items`` (and a ``beyond`` check's ``extends``) must name numbered items of the paper
    (:data:`PAPER_ITEMS`). Whether ``level`` agrees with ``evaluates`` is the test's to say
    (``tests/test_paper_checks.py``), for every registered check at once.

    Raises
    ------
    FieldError
        If a card field is unknown or a required one missing, the id is taken, the level or
        section unknown, a description empty, an item unknown, a ``beyond`` check covers items of
        the paper instead of extending them, or the docstring (its own or the generated one) does
        not name the location, the claim, the method and the evidence level
        (:func:`docstring_misses`).
    """
    names = [f.name for f in fields(Check) if f.name not in ("id", "run")]
    unknown = sorted(set(card_fields) - set(names))
    if unknown:
        raise FieldError(f"{id} card", unknown, f"fields of a check's card, among {names}")
    missing = [k for k in CARD_REQUIRED if k not in card_fields]
    if missing:
        raise FieldError(f"{id} card", sorted(card_fields), f"the fields {', '.join(missing)} as well")
    location, items, claim = card_fields["location"], card_fields["items"], card_fields["claim"]
    method, level = card_fields["method"], card_fields["level"]
    domain, evaluates = card_fields.get("domain", ""), card_fields.get("evaluates", ())
    section, extends = card_fields.get("section", "paper"), card_fields.get("extends", ())

    def wrap(fn: Callable[[bool], Result]) -> Callable[[bool], Result]:
        if id in _REGISTRY:
            raise FieldError("check id", id, "an id not registered twice")
        try:
            lev = Level(level)
        except ValueError:
            raise FieldError(f"{id} level", level, f"one of {[str(v) for v in Level]}") from None
        for name, text in (("location", location), ("claim", claim), ("method", method)):
            if not isinstance(text, str) or not text.strip():
                raise FieldError(f"{id} {name}", text, "a non-empty description")
        unknown = [k for k in (*items, *extends) if k not in PAPER_ITEMS]
        if unknown:
            raise FieldError(f"{id} items", unknown,
                             f"numbered items of the paper, among {list(PAPER_ITEMS)}")
        if section not in SECTIONS:
            raise FieldError(f"{id} section", section, f"one of {list(SECTIONS)}")
        if (section == "beyond") != bool(extends) or (section == "beyond" and items):
            raise FieldError(f"{id} extends", extends, "the items a beyond-the-paper check extends "
                             "(and no items it covers); none for a check of another section")
        check = Check(id=id, location=location, items=tuple(items), claim=claim, method=method,
                      run=fn, level=lev, domain=domain, evaluates=tuple(evaluates), section=section,
                      extends=tuple(extends))
        fn.__doc__ = fn.__doc__ or card(check)
        missing = docstring_misses(check)
        if missing:
            raise FieldError(f"{id} docstring", fn.__doc__,
                             f"a docstring naming the check's {', '.join(missing)}")
        _REGISTRY[id] = check
        return fn

    return wrap


def card(check: Check) -> str:
    """The docstring :func:`register` gives a check function: id, location, claim, the claim's
    domain, method and evidence level."""
    domain = f"\n\nDomain of the claim: {check.domain}" if check.domain else ""
    return (f"Check {check.id} ({check.location}): {check.claim}{domain}\n\nMethod: {check.method}"
            f"\n\nEvidence: {check.level}.")


def docstring_misses(check: Check) -> list[str]:
    """What the docstring of ``check``'s function fails to name, among its location, claim,
    method and evidence level (``"Evidence: <level>"``); empty when it names them all."""
    doc = check.run.__doc__ or ""
    parts = (("location", check.location), ("claim", check.claim), ("method", check.method),
             ("evidence level", f"Evidence: {check.level}"))
    return [name for name, text in parts if text not in doc]


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


OUTCOME_FIELDS = ("counterexample", "correction", "correction_check", "evidence", "shrunk", "margin",
                  "blind_spot")  # the fields of Result that outcome() passes on


def outcome(printed_holds: bool, *, summary: str, coverage: str, corrected_holds: bool | None = None,
            **result_fields) -> Result:
    """The one code path from a computed finding to a :class:`Result`, for either verdict.

    ``printed_holds`` decides PASS; otherwise ``corrected_holds`` decides ERRATUM (with
    ``correction`` and ``correction_check``) or FAIL. The caller passes ``coverage`` and, when the
    claim failed, the ``counterexample`` its computation found, so every branch carries its
    evidence and a check cannot crash merely because the other verdict came out. ``result_fields``
    are the :class:`Result` fields of :data:`OUTCOME_FIELDS` (``counterexample`` and ``evidence``
    None or absent: empty); a PASS keeps ``margin`` and ``blind_spot``, an ERRATUM the correction,
    a FAIL neither.

    Raises
    ------
    FieldError
        If a field is not one of :data:`OUTCOME_FIELDS`, or the claim failed without a
        counterexample (a bug of the check, not a finding).
    """
    unknown = sorted(set(result_fields) - set(OUTCOME_FIELDS))
    if unknown:
        raise FieldError("outcome fields", unknown, f"fields of a result, among {list(OUTCOME_FIELDS)}")
    counterexample = result_fields.get("counterexample")
    correction = result_fields.get("correction", "")
    correction_check = result_fields.get("correction_check", "")
    evidence, shrunk = result_fields.get("evidence"), result_fields.get("shrunk", False)
    margin, blind_spot = result_fields.get("margin"), result_fields.get("blind_spot", "")
    verdict = judged(printed_holds, corrected_holds)
    if verdict is Verdict.PASS:
        return Result(verdict, summary, coverage=coverage, evidence=evidence or {}, shrunk=shrunk,
                      margin=margin, blind_spot=blind_spot)
    if verdict is Verdict.FAIL:
        correction = correction_check = ""
    return Result(verdict, summary, coverage=coverage, counterexample=counterexample or {},
                  correction=correction, correction_check=correction_check, evidence=evidence or {},
                  shrunk=shrunk)


def not_checkable(because: str) -> Result:
    """A NOT_CHECKABLE result; ``because`` completes "not checkable because ..."."""
    return Result(Verdict.NOT_CHECKABLE, f"not checkable because {because}")
