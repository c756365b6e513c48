"""Run the paper checks, index their verdicts by paper item, compare with recorded verdicts.

A check that raises is a *crash* (a bug in the check or in the code it exercises), recorded with
its traceback; a FAIL verdict is a finding, not a crash. Each outcome says whether its verdict
rests on the claim's whole domain or on part of it (:attr:`Outcome.scope`); the checks beyond the
paper are indexed by the items they extend, apart from the checks of those items.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from paper_checks.evidence import covers_whole_domain
from paper_checks.items import PAPER_ITEMS
from paper_checks.registry import Check, Result, all_checks, get_check
from theory.errors import ConfigFileError

CRASH = "CRASH"


@dataclass(frozen=True)
class Outcome:
    """One check's run: its result, or the traceback it crashed with, and how long it took."""

    check: Check
    result: Result | None
    error: str | None
    seconds: float

    @property
    def verdict(self) -> str:
        """The verdict's name, or ``CRASH``."""
        return self.result.verdict.value if self.result is not None else CRASH

    @property
    def scope(self) -> str:
        """``"whole"`` when the verdict rests on the claim's whole domain, ``"part"`` when on part
        of it (a PASS, or an ERRATUM's correction, checked on part: samples, statistical tests, an
        enumeration ``--quick`` shrank), ``""`` when it rests on no domain (a FAIL's counterexample
        refutes the claim wherever it was found; NOT_CHECKABLE; a crash)."""
        if self.result is None or self.verdict in ("FAIL", "NOT_CHECKABLE"):
            return ""
        return "whole" if covers_whole_domain(str(self.check.level), self.result.shrunk) else "part"

    @property
    def verdict_text(self) -> str:
        """The verdict, followed by "on part of its domain" when :attr:`scope` is ``"part"``."""
        return self.verdict + (" on part of its domain" if self.scope == "part" else "")


def run_checks(ids: list[str] | None = None, fast: bool = False,
               progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run the checks ``ids`` (all, in paper order, if None); ``progress`` sees each outcome.

    Raises
    ------
    UnknownNameError
        If an id is not registered.
    """
    checks = all_checks() if not ids else [get_check(i) for i in ids]
    out = []
    for check in checks:
        start = time.perf_counter()
        try:
            result, error = check.validate(check.run(fast)), None
        except Exception:  # a crash is reported, never hidden
            result, error = None, traceback.format_exc()
        outcome = Outcome(check, result, error, time.perf_counter() - start)
        out.append(outcome)
        if progress is not None:
            progress(outcome)
    return out


def item_index(outcomes: list[Outcome]) -> dict[str, list[tuple[str, str]]]:
    """Each numbered item of the paper -> [(check id, verdict), ...] of the checks that cover it
    (the beyond-the-paper checks extend items, they do not cover them: :func:`beyond_index`)."""
    index: dict[str, list[tuple[str, str]]] = {item: [] for item in PAPER_ITEMS}
    for o in outcomes:
        for item in o.check.items:
            index.setdefault(item, []).append((o.check.id, o.verdict))
    return index


def beyond_index(outcomes: list[Outcome]) -> dict[str, list[tuple[str, str]]]:
    """Each numbered item that a beyond-the-paper check extends -> [(check id, verdict), ...]."""
    index: dict[str, list[tuple[str, str]]] = {}
    for o in outcomes:
        for item in o.check.extends:
            index.setdefault(item, []).append((o.check.id, o.verdict))
    return index


def verdicts(outcomes: list[Outcome]) -> dict[str, str]:
    """``{check id: verdict}`` in run order."""
    return {o.check.id: o.verdict for o in outcomes}


def load_expected(path: str | Path) -> dict[str, str]:
    """Recorded verdicts (a JSON object ``{check id: verdict}``).

    Raises
    ------
    ConfigFileError
        If the file is missing or is not such an object.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigFileError(f"{path}: expected a JSON object {{check id: verdict}}")
    return data


def mismatches(outcomes: list[Outcome], expected: dict[str, str]) -> list[str]:
    """Lines describing every check whose verdict differs from ``expected`` (or is not recorded)."""
    out = []
    for o in outcomes:
        want = expected.get(o.check.id)
        if want is None:
            out.append(f"{o.check.id}: {o.verdict}, but no verdict is recorded for it")
        elif want != o.verdict:
            out.append(f"{o.check.id}: {o.verdict}, recorded {want}")
    return out
