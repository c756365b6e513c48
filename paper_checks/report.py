"""The paper-check report: a terminal summary, ``paper_checks.md`` and ``paper_checks.json``.

The JSON is strict (a float NaN or infinity becomes ``null``); each check's entry holds its
section (``paper``, ``beyond``, ``other``), its verdict and whether it rests on the claim's whole
domain or on part of it (``scope``), its evidence level (``proof``, ``exhaustive``,
``statistical``, ``sample``, ``reading``, ``none``), the domain its claim quantifies over, what it
evaluates, and the evidence itself. The checks beyond the paper (the library's own extensions of
its results) are counted and listed apart from the paper's. A PASS on a computed quantity prints its
margin (the least relative perturbation of the quantity that flips it, :mod:`paper_checks.margins`)
and, above a factor of two, what the check cannot see.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from paper_checks.common import jsonable
from paper_checks.evidence import describe
from paper_checks.margins import BLIND_ABOVE, EXACT, KINDS, NOT_APPLICABLE, Margin, from_evidence, margin_text
from paper_checks.registry import SECTIONS, Level
from paper_checks.runner import CRASH, Outcome, beyond_index, item_index
from theory.io import atomic_write_text

ORDER = ("PASS", "FAIL", "ERRATUM", "NOT_CHECKABLE", CRASH)
TITLE = ("Optimal Scheduling Algorithms for LLM Inference: Theory and Practice "
         "(Bari, Hegde, de Veciana 2025)")
SECTION_TITLES = {"paper": "the paper's claims",
                  "beyond": "beyond the paper (the library's own extensions)", "other": "other papers"}
LEVELS_TEXT = ("**proof** (symbolic statements over the whole parameter family, sympy or z3, none "
               "evaluated at a point), **exhaustive** (every case of the finite domain the claim "
               "quantifies over), **statistical** (a test with a stated error rate and its power), "
               "**sample** (chosen or seeded points, or part of the domain), **reading** (the printed "
               "text against a corrected transcription, or a definition restated: no change of the code "
               "can move it), **none**")


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many checks got each verdict."""
    c = Counter(o.verdict for o in outcomes)
    return {v: c[v] for v in ORDER if c[v]}


def section_counts(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Verdict counts per section (:data:`paper_checks.registry.SECTIONS`) that has checks."""
    return {s: counts(group) for s in SECTIONS if (group := [o for o in outcomes if o.check.section == s])}


def level_counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many checks give each level of evidence."""
    c = Counter(o.check.level for o in outcomes)
    return {str(v): c[v] for v in Level if c[v]}


def margin_of(o: Outcome) -> Margin | None:
    """The outcome's margin (its result's, else read off its evidence:
    :func:`paper_checks.margins.from_evidence`), or None (no PASS, no computed quantity, or not
    derived)."""
    return _margin(o)[0]


def _margin(o: Outcome) -> tuple[Margin | None, str]:
    r = o.result
    if r is None or o.verdict != "PASS":
        return None, ""
    if r.margin is not None:
        return r.margin, r.blind_spot
    return from_evidence(o.check.id, r.evidence)


def margin_counts(outcomes: list[Outcome]) -> dict[str, int]:
    """PASS checks, those with a margin (a size, or its kind: exact, n/a), and those whose margin is
    above a factor of two."""
    passed = [margin_of(o) for o in outcomes if o.verdict == "PASS"]
    sizes = [m for m in passed if m is not None and not isinstance(m, str)]
    return {"PASS": len(passed), "with a margin": sum(m is not None for m in passed),
            **{kind: sum(m == kind for m in passed) for kind in KINDS},
            "margin above x2": sum(m > BLIND_ABOVE for m in sizes)}


def _finding(o: Outcome) -> str:
    return o.result.summary if o.result else o.error.strip().splitlines()[-1]


def summary_table(outcomes: list[Outcome], width: int = 120) -> str:
    """One line per check: id, verdict (``/part`` when it rests on part of the claim's domain), level,
    margin, seconds, finding (cut to ``width``); the beyond-the-paper checks under their own heading."""
    lines = [f"{'check':<32} {'verdict':<18} {'level':<11} {'margin':>7} {'s':>6}  finding", "-" * width]
    for section in SECTIONS:
        group = [o for o in outcomes if o.check.section == section]
        if not group:
            continue
        if section != "paper":
            lines.append(f"-- {SECTION_TITLES[section]}")
        for o in group:
            verdict = o.verdict + ("/part" if o.scope == "part" else "")
            line = (f"{o.check.id:<32} {verdict:<18} {o.check.level!s:<11} {margin_text(margin_of(o)):>7} "
                    f"{o.seconds:>6.2f}  {_finding(o)}")
            lines.append(line if len(line) <= width else line[: width - 3] + "...")
    lines.append("-" * width)
    for section, c in section_counts(outcomes).items():
        lines.append(f"{SECTION_TITLES[section]}: " + "  ".join(f"{k} {v}" for k, v in c.items()))
    lines.append(f"({sum(o.seconds for o in outcomes):.1f} s; /part: the PASS, or the correction of the "
                 "ERRATUM, rests on part of the claim's domain)")
    lines.append("evidence: " + "  ".join(f"{k} {v}" for k, v in level_counts(outcomes).items()))
    lines.append("margins: " + "  ".join(f"{k} {v}" for k, v in margin_counts(outcomes).items())
                 + " (margin: the least relative change of the computed quantity that flips the PASS)")
    return "\n".join(lines)


def outcome_dict(o: Outcome) -> dict:
    """One check's outcome as JSON-ready data."""
    c, r = o.check, o.result
    d = {"id": c.id, "section": c.section, "location": c.location, "items": list(c.items),
         "claim": c.claim, "domain": c.domain, "method": c.method,
         "evaluates": [describe(m) for m in c.evaluates], "verdict": o.verdict, "scope": o.scope,
         "level": str(c.level), "seconds": round(o.seconds, 3)}
    if c.extends:
        d["extends"] = list(c.extends)
    if r is None:
        d["error"] = o.error
        return d
    d["summary"] = r.summary
    for key in ("coverage", "counterexample", "correction", "correction_check", "evidence"):
        value = getattr(r, key)
        if value:
            d[key] = jsonable(value)
    margin, blind = _margin(o)
    if margin is not None:
        d["margin"] = margin
    if blind:
        d["blind_spot"] = blind
    return d


def to_json(outcomes: list[Outcome], fast: bool) -> dict:
    """The whole report as JSON-ready data."""
    return {"paper": TITLE, "fast": fast, "counts": counts(outcomes), "sections": section_counts(outcomes),
            "levels": level_counts(outcomes), "margins": margin_counts(outcomes),
            "items": {k: [{"check": i, "verdict": v} for i, v in rows]
                      for k, rows in item_index(outcomes).items()},
            "beyond the paper": {k: [{"check": i, "verdict": v} for i, v in rows]
                                 for k, rows in beyond_index(outcomes).items()},
            "checks": [outcome_dict(o) for o in outcomes]}


def to_json_text(outcomes: list[Outcome], fast: bool) -> str:
    """The whole report as strict JSON text (no NaN or infinity: they are ``null``)."""
    return json.dumps(jsonable(to_json(outcomes, fast)), indent=1, allow_nan=False) + "\n"


def _block(value) -> str:
    return "```json\n" + json.dumps(jsonable(value), indent=1, allow_nan=False) + "\n```"


def _anchor(check_id: str) -> str:
    return check_id.replace(".", "").lower()


def _summary_rows(outcomes: list[Outcome]) -> list[str]:
    out = ["| check | location | verdict | evidence | margin | finding |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        finding = (o.result.summary if o.result else "crashed").replace("|", "\\|")
        part = " (part of its domain)" if o.scope == "part" else ""
        out.append(f"| [`{o.check.id}`](#{_anchor(o.check.id)}) | {o.check.location.replace('|', '/')} | "
                   f"**{o.verdict}**{part} | {o.check.level} | {margin_text(margin_of(o))} | {finding} |")
    return out


def _check_section(o: Outcome) -> list[str]:
    d = outcome_dict(o)
    scope = {"part": " on part of the claim's domain",
             "whole": " on the claim's whole domain"}.get(o.scope, "")
    out = ["", f"### {o.check.id}", "", f"**Verdict: {o.verdict}**{scope} ({d['seconds']} s)", "",
           f"- **Evidence level**: {d['level']}", f"- **Location**: {d['location']}"]
    if o.check.extends:
        out.append(f"- **Extends (beyond the paper)**: {', '.join(o.check.extends)}")
    else:
        out.append(f"- **Items**: {', '.join(d['items']) or '(unnumbered)'}")
    out += [f"- **Claim**: {d['claim']}", f"- **Domain of the claim**: {d['domain'] or '(not stated)'}",
            f"- **Method**: {d['method']}"]
    if o.result is None:
        return [*out, "", "Crashed:", "", "```", o.error.rstrip(), "```"]
    out.append(f"- **Finding**: {d['summary']}")
    if "coverage" in d:
        out.append(f"- **Checked**: {d['coverage']}")
    elif o.verdict == "FAIL":
        out.append("- **Checked**: until the counterexample below, which refutes the claim")
    if "margin" in d:
        what = {EXACT: "an equality: any change of the computed quantity flips the PASS",
                NOT_APPLICABLE: "no computed quantity against a threshold"}.get(
            d["margin"], "the least relative change of the computed quantity that flips the PASS")
        out.append(f"- **Margin**: {margin_text(d['margin'])} ({what})")
    if "blind_spot" in d:
        out.append(f"- **Cannot see**: {d['blind_spot']}")
    if "correction" in d:
        out += [f"- **Correction**: {d['correction']}",
                f"- **Correction checked by**: {d['correction_check']}"]
    if "counterexample" in d:
        out += ["", "Counterexample (replayable):", "", _block(d["counterexample"])]
    if "evidence" in d:
        out += ["", "Evidence:", "", _block(d["evidence"])]
    return out


def to_markdown(outcomes: list[Outcome], fast: bool) -> str:
    """The readable report: counts, the index of paper items (with the beyond-the-paper verdicts in
    their own column), a summary table per section, one section per check."""
    beyond = beyond_index(outcomes)
    out = [f"# Paper checks: {TITLE}", "",
           f"Run: {'fast (CI subset of the ranges)' if fast else 'full'}; "
           + "; ".join(f"{SECTION_TITLES[s]}: " + ", ".join(f"{v} {k}" for k, v in c.items())
                       for s, c in section_counts(outcomes).items())
           + f"; {sum(o.seconds for o in outcomes):.1f} s. Evidence: "
           + ", ".join(f"{v} {k}" for k, v in level_counts(outcomes).items()) + ". Margins: "
           + ", ".join(f"{k} {v}" for k, v in margin_counts(outcomes).items()) + ".", "",
           "Verdicts: **PASS** (could have been refuted, was not; what was checked is given), "
           "**FAIL** (false; minimal counterexample), **ERRATUM** (false as printed, an evident "
           "correction holds and is checked), **NOT_CHECKABLE** (why). A PASS, or an ERRATUM's "
           "correction, *on part of its domain* was checked on less than the domain its claim "
           "quantifies over. Evidence levels: "
           + LEVELS_TEXT + ".", "",
           "## The paper's numbered items", "",
           "| item | checks | beyond the paper |", "|---|---|---|"]
    for item, rows in item_index(outcomes).items():
        cell = ", ".join(f"`{i}` {v}" for i, v in rows) if rows else "**no check**"
        ext = ", ".join(f"`{i}` {v}" for i, v in beyond.get(item, ())) or "—"
        out.append(f"| {item} | {cell} | {ext} |")
    for section in SECTIONS:
        group = [o for o in outcomes if o.check.section == section]
        if group:
            title = "Summary" if section == "paper" else SECTION_TITLES[section].capitalize()
            out += ["", f"## {title}", "", *_summary_rows(group)]
    for section in SECTIONS:
        group = [o for o in outcomes if o.check.section == section]
        if group:
            out += ["", "## Checks" if section == "paper" else
                    f"## Checks: {SECTION_TITLES[section]}"]
            for o in group:
                out += _check_section(o)
    return "\n".join(out) + "\n"


def write_reports(outcomes: list[Outcome], out_dir: str | Path, fast: bool) -> tuple[Path, Path]:
    """Write ``paper_checks.md`` and ``paper_checks.json`` to ``out_dir`` (atomically)."""
    out_dir = Path(out_dir)
    md, js = out_dir / "paper_checks.md", out_dir / "paper_checks.json"
    atomic_write_text(md, to_markdown(outcomes, fast))
    atomic_write_text(js, to_json_text(outcomes, fast))
    return md, js
