"""The paper-check report: a terminal summary, ``paper_checks.md`` and ``paper_checks.json``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from paper_checks.common import jsonable
from paper_checks.runner import CRASH, Outcome, item_index
from theory.io import atomic_write_json, atomic_write_text

ORDER = ("PASS", "FAIL", "ERRATUM", "NOT_CHECKABLE", CRASH)
TITLE = ("Optimal Scheduling Algorithms for LLM Inference: Theory and Practice "
         "(Bari, Hegde, de Veciana 2025)")


def counts(outcomes: list[Outcome]) -> dict[str, int]:
    """How many checks got each verdict."""
    c = Counter(o.verdict for o in outcomes)
    return {v: c[v] for v in ORDER if c[v]}


def summary_table(outcomes: list[Outcome], width: int = 110) -> str:
    """One line per check: id, verdict, seconds, finding (cut to ``width``)."""
    lines = [f"{'check':<32} {'verdict':<13} {'s':>6}  finding", "-" * width]
    for o in outcomes:
        finding = o.result.summary if o.result else o.error.strip().splitlines()[-1]
        line = f"{o.check.id:<32} {o.verdict:<13} {o.seconds:>6.2f}  {finding}"
        lines.append(line if len(line) <= width else line[: width - 3] + "...")
    lines.append("-" * width)
    lines.append("  ".join(f"{k} {v}" for k, v in counts(outcomes).items())
                 + f"  ({sum(o.seconds for o in outcomes):.1f} s)")
    return "\n".join(lines)


def outcome_dict(o: Outcome) -> dict:
    """One check's outcome as JSON-ready data."""
    c, r = o.check, o.result
    d = {"id": c.id, "location": c.location, "items": list(c.items), "claim": c.claim, "method": c.method,
         "verdict": o.verdict, "seconds": round(o.seconds, 3)}
    if r is None:
        d["error"] = o.error
        return d
    d["summary"] = r.summary
    for key in ("coverage", "counterexample", "correction", "correction_check", "evidence"):
        value = getattr(r, key)
        if value:
            d[key] = jsonable(value)
    return d


def to_json(outcomes: list[Outcome], fast: bool) -> dict:
    """The whole report as JSON-ready data."""
    return {"paper": TITLE, "fast": fast, "counts": counts(outcomes),
            "items": {k: [{"check": i, "verdict": v} for i, v in rows]
                      for k, rows in item_index(outcomes).items()},
            "checks": [outcome_dict(o) for o in outcomes]}


def _block(value) -> str:
    return "```json\n" + json.dumps(jsonable(value), indent=1) + "\n```"


def to_markdown(outcomes: list[Outcome], fast: bool) -> str:
    """The readable report: counts, the index of paper items, a summary table, one section per check."""
    out = [f"# Paper checks: {TITLE}", "",
           f"Run: {'fast (CI subset of the ranges)' if fast else 'full'}; "
           + ", ".join(f"{v} {k}" for k, v in counts(outcomes).items())
           + f"; {sum(o.seconds for o in outcomes):.1f} s.", "",
           "Verdicts: **PASS** (could have been refuted, was not; coverage given), **FAIL** (false; minimal "
           "counterexample), **ERRATUM** (false as printed, an evident correction holds and is checked), "
           "**NOT_CHECKABLE** (why).", "",
           "## The paper's numbered items", "", "| item | checks |", "|---|---|"]
    for item, rows in item_index(outcomes).items():
        cell = ", ".join(f"`{i}` {v}" for i, v in rows) if rows else "**no check**"
        out.append(f"| {item} | {cell} |")
    out += ["", "## Summary", "", "| check | location | verdict | finding |", "|---|---|---|---|"]
    for o in outcomes:
        finding = (o.result.summary if o.result else "crashed").replace("|", "\\|")
        out.append(f"| [`{o.check.id}`](#{o.check.id.replace('.', '').lower()}) | "
                   f"{o.check.location.replace('|', '/')} | **{o.verdict}** | {finding} |")
    out += ["", "## Checks"]
    for o in outcomes:
        d = outcome_dict(o)
        out += ["", f"### {o.check.id}", "", f"**Verdict: {o.verdict}** ({d['seconds']} s)", "",
                f"- **Location**: {d['location']}",
                f"- **Items**: {', '.join(d['items']) or '(unnumbered)'}",
                f"- **Claim**: {d['claim']}", f"- **Method**: {d['method']}"]
        if o.result is None:
            out += ["", "Crashed:", "", "```", o.error.rstrip(), "```"]
            continue
        out.append(f"- **Finding**: {d['summary']}")
        if "coverage" in d:
            out.append(f"- **Coverage**: {d['coverage']}")
        if "correction" in d:
            out += [f"- **Correction**: {d['correction']}", "- **Correction checked by**: "
                                                            f"{d['correction_check']}"]
        if "counterexample" in d:
            out += ["", "Counterexample (replayable):", "", _block(d["counterexample"])]
        if "evidence" in d:
            out += ["", "Evidence:", "", _block(d["evidence"])]
    return "\n".join(out) + "\n"


def write_reports(outcomes: list[Outcome], out_dir: str | Path, fast: bool) -> tuple[Path, Path]:
    """Write ``paper_checks.md`` and ``paper_checks.json`` to ``out_dir`` (atomically)."""
    out_dir = Path(out_dir)
    md, js = out_dir / "paper_checks.md", out_dir / "paper_checks.json"
    atomic_write_text(md, to_markdown(outcomes, fast))
    atomic_write_json(js, to_json(outcomes, fast))
    return md, js
