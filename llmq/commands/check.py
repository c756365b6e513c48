"""``llmq check``: run every claim of the paper as an executable check and write the report."""

from __future__ import annotations

import os
import sys

from llmq.options import add, command, renamed, resolve

HELP = "run the paper's claims as executable checks; write out/paper_checks.md and .json"


def add_parser(sub) -> None:
    """Register ``llmq check`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "check", HELP, HELP + ". Exit status 1 when a check crashes or (with --expect) a "
                                           "verdict differs from the recorded one; a FAIL verdict is a "
                                           "finding.")
    add(p, "--quick", False, "the CI subset: smaller ranges, same checks")
    add(p, "--only", None, "run only this check (repeatable)", action="append", metavar="ID")
    add(p, "--out", "out", "default out", metavar="DIR")
    add(p, "--expect", None, "recorded verdicts (e.g. paper_checks/verdicts.json); exit 1 on any difference",
        metavar="FILE")
    add(p, "--record", None, "write this run's verdicts to FILE (deliberate updates)", metavar="FILE")
    add(p, "--list", False, "list the check ids and exit", action="store_true")
    add(p, "--quiet", False, "print only the summary table", action="store_true")
    add(p, "--json", False, "the report as strict JSON (NaN as null) instead of the summary table")
    add(p, "--workers", os.cpu_count() or 1, "default: the CPU count")
    add(p, "--cache", None, "keyed by the code, so a rerun of unchanged code reuses every finished "
                            "check (default $XDG_CACHE_HOME/llmq/check, shared with the notebooks)")
    add(p, "--no-progress", True)
    renamed(p, "--fast", "--quick", "the CI subset")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``llmq check`` on the parsed ``args``; the exit code."""
    from tqdm import tqdm

    from llmq.output import check_output_file, out_dir
    from paper_checks.registry import all_checks, get_check
    from paper_checks.report import summary_table, to_json_text, write_reports
    from paper_checks.runner import default_cache_dir, load_expected, mismatches, run_checks, verdicts
    from theory.errors import require_positive_int
    from theory.io import atomic_write_json

    values = resolve(args)
    if values["list"]:
        for c in all_checks():
            print(f"{c.id:<32} {c.level!s:<11} {c.location}")
        return 0
    out = out_dir(values["out"])
    if values["record"]:
        check_output_file(values["record"], "--record")
    expected = load_expected(values["expect"]) if values["expect"] else None
    quick, quiet, as_json = bool(values["quick"]), bool(values["quiet"]), bool(values["json"])

    checks = [get_check(i) for i in values["only"]] if values["only"] else all_checks()
    workers = require_positive_int("--workers", values["workers"])
    cache = out_dir(values["cache"] or _made(default_cache_dir()), "--cache")
    bar = None if quiet or as_json or not values["progress"] else tqdm(
        total=len(checks), unit=" checks", desc="llmq check", dynamic_ncols=True)

    def progress(o):
        if not (quiet or as_json):
            tqdm.write(f"  {o.verdict:<13} {o.check.id} ({o.seconds:.1f} s{', cached' if o.cached else ''})",
                       file=sys.stderr)

    try:
        outcomes = run_checks([c.id for c in checks], fast=quick, progress=progress, workers=workers,
                              cache=cache, bar=bar)
    finally:
        if bar is not None:
            bar.close()
    if not quiet:
        reused = sum(o.cached for o in outcomes)
        print(f"{len(outcomes) - reused} checks run, {reused} reused from the cache {cache}", file=sys.stderr)
    md, js = write_reports(outcomes, out, quick)
    if as_json:
        print(to_json_text(outcomes, quick), end="")
    else:
        print(summary_table(outcomes))
        print(f"report: {md}  {js}")
    log = sys.stderr if as_json else sys.stdout
    status = 0
    crashed = [o.check.id for o in outcomes if o.result is None]
    if crashed:
        print(f"crashed: {', '.join(crashed)}", file=sys.stderr)
        status = 1
    if values["record"]:
        atomic_write_json(values["record"], verdicts(outcomes))  # 0644, strict JSON
        print(f"recorded verdicts: {values['record']}", file=log)
    if expected is not None:
        diff = mismatches(outcomes, expected)
        if diff:
            print(f"verdicts differ from {values['expect']}:\n  " + "\n  ".join(diff), file=sys.stderr)
            status = 1
        else:
            print(f"all {len(outcomes)} verdicts match {values['expect']}", file=log)
    return status


def _made(directory):
    """``directory``, created with its parents if it can be (the default cache under the user's cache
    home, which may not exist yet); one that cannot be is left to the check of ``--cache``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    return directory
