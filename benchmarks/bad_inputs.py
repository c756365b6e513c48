"""Print the bad-input cases of ``tests/test_bad_inputs.py`` as markdown: one row per case (its
class of fault, exit status, the message: first line of stderr, its wall seconds, whether a
traceback escaped, and whether it was silently accepted), then one row per class.

*Silent* means accepted (exit status 0) where the case expects a refusal: a bad input
reinterpreted without a word. A case that expects acceptance (a UTF-8 byte-order mark, a request
exactly as long as the model's context) is never silent. *Slow* means refused only after
``REFUSED_WITHIN_S`` seconds or more: after the work it should have come before.

Run from the repository root: ``python benchmarks/bad_inputs.py > bad_inputs.md``.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_bad_inputs import CASES, CLASS, REFUSED_WITHIN_S, import_once, make_data_dir, run_case


def main() -> int:
    """Run every case and print the tables; exit 1 if a case misbehaves (traceback, silent
    acceptance, wrong status or message)."""
    warnings.simplefilter("ignore")
    per_class: dict[str, dict] = {}
    bad = 0
    import_once()
    with tempfile.TemporaryDirectory() as tmp:
        d = make_data_dir(Path(tmp))
        print("| # | class | case | command line | rc | message | s | traceback | silent |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k, (name, (argv, rc_expected, text)) in enumerate(CASES.items(), 1):
            rc, err, escaped, seconds = run_case(argv, d)
            lines = [ln for ln in err.strip().splitlines() if not ln.startswith(("usage:", "  "))]
            message = (lines[-1] if lines else "(accepted)").replace(tmp, "…").replace("|", "\\|")
            silent = rc == 0 and rc_expected != 0
            slow = rc_expected != 0 and seconds >= REFUSED_WITHIN_S
            ok = escaped is None and rc == rc_expected and text in err and not slow
            bad += not ok
            row = per_class.setdefault(CLASS[name], {"cases": 0, "rc": set(), "traceback": 0,
                                                     "silent": 0, "slow": 0, "accepted": 0,
                                                     "unexpected": 0})
            row["cases"] += 1
            row["rc"].add(rc)
            row["traceback"] += escaped is not None
            row["silent"] += silent
            row["slow"] += slow
            row["accepted"] += rc_expected == 0
            row["unexpected"] += not ok
            shown = " ".join(argv).replace("{d}/", "").replace("|", "\\|")
            print(f"| {k} | {CLASS[name]} | {name} | `llmq {shown}` | {rc} | {message[:160]} | "
                  f"{seconds:.1f} | "
                  f"{'yes: ' + escaped if escaped else 'no'} | {'yes' if silent else 'no'} |")
    print("\n| class | cases | exit statuses | tracebacks | silent | slow | accepted as right "
          "| not as expected |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in per_class.items():
        print(f"| {name} | {row['cases']} | {', '.join(map(str, sorted(row['rc'])))} | "
              f"{row['traceback']} | {row['silent']} | {row['slow']} | {row['accepted']} | "
              f"{row['unexpected']} |")
    total = {k: sum(r[k] for r in per_class.values())
             for k in ("cases", "traceback", "silent", "slow", "unexpected")}
    print(f"| all | {total['cases']} | | {total['traceback']} | {total['silent']} | {total['slow']} | | "
          f"{total['unexpected']} |")
    print(f"\n{len(CASES)} cases, {bad} not as expected", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
