"""The how-to guides' commands run as written (docs/howto/*.md).

Every ```` ```bash ```` block of a guide is a test, run with bash in order in one temporary
directory per guide, with ``llmq`` (and ``python``) on PATH running the checked-out packages.
Blocks whose first line is ``# slow`` run only when ``LLMQ_HOWTO_SLOW=1``; ``LLMQ_HOWTO_SLOW=only``
runs only them (CI's docs step, after the suite has run the others).
Background processes a block starts (a Dask scheduler and workers) are ended when it finishes.
"""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOWTO = ROOT / "docs" / "howto"
SLOW = os.environ.get("LLMQ_HOWTO_SLOW", "")
TIMEOUT_S = {False: 60, True: 240}


def howto_blocks() -> list[tuple[str, int, str]]:
    """(guide, block number, code) of every bash block of the guides, in page order."""
    out = []
    for page in sorted(HOWTO.glob("*.md")):
        blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        out += [(page.stem, k, code) for k, code in enumerate(blocks)]
    return out


def is_slow(code: str) -> bool:
    return code.lstrip().startswith("# slow")


BLOCKS = howto_blocks()


def test_the_guides_have_commands():
    pages = {p for p, _, _ in BLOCKS}
    assert {"load", "calibrate", "scheduler", "cluster", "add-scheduler"} <= pages
    assert all(any("llmq " in c or "python " in c for p2, _, c in BLOCKS if p2 == p) for p in pages)


@pytest.fixture(scope="session")
def shim(tmp_path_factory) -> Path:
    """A bin directory with ``llmq`` running this checkout, first on PATH."""
    bin_dir = tmp_path_factory.mktemp("bin")
    llmq = bin_dir / "llmq"
    llmq.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m llmq "$@"\n', encoding="utf-8")
    llmq.chmod(llmq.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


@pytest.fixture(scope="session")
def workdirs(tmp_path_factory) -> dict:
    return {}


@pytest.mark.parametrize("page,k,code", BLOCKS, ids=[f"{p}-{k}" for p, k, _ in BLOCKS])
def test_howto_block_runs_as_written(page, k, code, shim, workdirs, tmp_path_factory):
    if is_slow(code) and SLOW not in ("1", "only"):
        pytest.skip("slow how-to block: set LLMQ_HOWTO_SLOW=1")
    if SLOW == "only" and not is_slow(code) and page not in {p for p, _, c in BLOCKS if is_slow(c)}:
        pytest.skip("LLMQ_HOWTO_SLOW=only: a fast block of a guide without slow blocks")
    cwd = workdirs.setdefault(page, tmp_path_factory.mktemp(f"howto-{page}"))
    path = [str(shim), str(Path(sys.executable).parent), os.environ["PATH"]]
    pythonpath = [str(ROOT), str(cwd), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, MPLBACKEND="Agg", PATH=os.pathsep.join(path),
               PYTHONPATH=os.pathsep.join(pythonpath))
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + code
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S[is_slow(code)])
    assert proc.returncode == 0, (f"{page}.md block {k} failed:\n{code}\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    assert proc.stdout.strip() or list(cwd.iterdir()), f"{page}.md block {k} printed and wrote nothing"
