"""Print the bad-input cases of ``tests/test_bad_inputs.py`` as a markdown table: exit status,
the message (first line of stderr) and whether a traceback escaped.

Run from the repository root: ``python benchmarks/bad_inputs.py > bad_inputs.md``.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_bad_inputs import CASES, make_data_dir, run_case


def main() -> int:
    """Run every case and print the table; exit 1 if a case misbehaves (traceback, wrong status)."""
    warnings.simplefilter("ignore")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = make_data_dir(Path(tmp))
        print("| # | case | command line | rc | message | traceback |")
        print("|---|---|---|---|---|---|")
        for k, (name, (argv, rc_expected, text)) in enumerate(CASES.items(), 1):
            rc, err, escaped = run_case(argv, d)
            lines = [ln for ln in err.strip().splitlines() if not ln.startswith(("usage:", "  "))]
            message = (lines[-1] if lines else "(accepted)").replace(tmp, "…").replace("|", "\\|")
            ok = escaped is None and rc == rc_expected and text in err
            bad += not ok
            shown = " ".join(argv).replace("{d}/", "").replace("|", "\\|")
            print(f"| {k} | {name} | `llmq {shown}` | {rc} | {message[:160]} | "
                  f"{'yes: ' + escaped if escaped else 'no'} |")
    print(f"\n{len(CASES)} cases, {bad} not as expected", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
