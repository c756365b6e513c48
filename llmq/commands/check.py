"""``llmq check``: run every claim of the paper as an executable check and write the report."""

from __future__ import annotations

import sys

HELP = "run the paper's claims as executable checks; write out/paper_checks.md and .json"


def add_parser(sub) -> None:
    """Register ``llmq check`` and its options on the sub-command parser ``sub``."""
    p = sub.add_parser("check", help=HELP, description=HELP + ". Exit status 1 when a check crashes or "
                                                             "(with --expect) a verdict differs from the "
                                                             "recorded one; a FAIL verdict is a finding.")
    p.add_argument("--fast", action="store_true", help="the CI subset: smaller ranges, same checks")
    p.add_argument("--only", action="append", metavar="ID", help="run only this check (repeatable)")
    p.add_argument("--out", default="out", help="output directory (default out)")
    p.add_argument("--expect", metavar="FILE",
                   help="recorded verdicts (e.g. paper_checks/verdicts.json); exit 1 on any difference")
    p.add_argument("--record", metavar="FILE", help="write this run's verdicts to FILE (deliberate updates)")
    p.add_argument("--list", action="store_true", help="list the check ids and exit")
    p.add_argument("--quiet", action="store_true", help="print only the summary table")
    p.add_argument("--json", action="store_true",
                   help="print the report as strict JSON (NaN as null) instead of the summary table")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``llmq check`` on the parsed ``args``; the exit code."""
    from paper_checks.registry import all_checks
    from paper_checks.report import summary_table, to_json_text, write_reports
    from paper_checks.runner import load_expected, mismatches, run_checks, verdicts
    from theory.io import atomic_write_json

    if args.list:
        for c in all_checks():
            print(f"{c.id:<32} {c.level!s:<11} {c.location}")
        return 0
    expected = load_expected(args.expect) if args.expect else None

    def progress(o):
        if not (args.quiet or args.json):
            print(f"  {o.verdict:<13} {o.check.id} ({o.seconds:.1f} s)", file=sys.stderr, flush=True)

    outcomes = run_checks(args.only, fast=args.fast, progress=progress)
    md, js = write_reports(outcomes, args.out, args.fast)
    if args.json:
        print(to_json_text(outcomes, args.fast), end="")
    else:
        print(summary_table(outcomes))
        print(f"report: {md}  {js}")
    log = sys.stderr if args.json else sys.stdout
    status = 0
    crashed = [o.check.id for o in outcomes if o.result is None]
    if crashed:
        print(f"crashed: {', '.join(crashed)}", file=sys.stderr)
        status = 1
    if args.record:
        atomic_write_json(args.record, verdicts(outcomes))  # 0644, strict JSON
        print(f"recorded verdicts: {args.record}", file=log)
    if expected is not None:
        diff = mismatches(outcomes, expected)
        if diff:
            print("verdicts differ from " + args.expect + ":\n  " + "\n  ".join(diff), file=sys.stderr)
            status = 1
        else:
            print(f"all {len(outcomes)} verdicts match {args.expect}", file=log)
    return status
