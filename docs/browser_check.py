"""Open pages of the built site in headless Chromium and check that they show what they should.

Usage: ``python docs/browser_check.py docs/_build/html out/docs-shots``. For each page it dumps
the DOM after scripts ran (``--dump-dom``) and asserts its content, and saves a screenshot:

* ``index.html``: the title names llmq and the table of contents links the paper map;
* ``generated/paper_map.html``: the paper-map table, one row per numbered item of the paper at
  least, with links into the API reference;
* the first notebook page: at least one figure ``<img>`` whose file exists.

Exits 1 (listing what is missing) if a page lacks any of it. ``$CHROMIUM`` names the browser
(default: ``chromium``, then ``chromium-browser``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,2000"]


class Dom(HTMLParser):
    """The parts of a page the checks look at."""

    def __init__(self, html: str):
        super().__init__()
        self.title, self._in_title = "", False
        self.tables: list[list[str]] = []  # class attribute of each table
        self.rows_in: dict[str, int] = {}  # table class -> rows
        self._table: str | None = None
        self.imgs: list[str] = []
        self.hrefs: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "title" and not self.title:  # the page's; SVG icons have titles too
            self._in_title = True
        elif tag == "table":
            self._table = a.get("class") or ""
            self.rows_in.setdefault(self._table, 0)
        elif tag == "tr" and self._table is not None:
            self.rows_in[self._table] += 1
        elif tag == "img" and a.get("src"):
            self.imgs.append(a["src"])
        elif tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def browser() -> str:
    """The Chromium executable."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise SystemExit("browser_check: no chromium on PATH (apt-get install -y chromium)")


def open_page(page: Path, shot: Path) -> Dom:
    """Dump the DOM of ``page`` and save its screenshot to ``shot``."""
    exe, url = browser(), page.resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        common = [exe, *FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
        subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=120)
    if dom.returncode != 0 or not dom.stdout.strip():
        raise RuntimeError(f"chromium could not open {url}: {dom.stderr[-2000:]}")
    return Dom(dom.stdout)


def check_site(site: Path, shots: Path, n_items: int) -> list[str]:
    """Open the pages and return what is missing (empty when every page shows what it should)."""
    shots.mkdir(parents=True, exist_ok=True)
    problems = []
    notebooks = sorted((site / "generated" / "notebooks").glob("*.html"))
    if not notebooks:
        return ["no notebook page in the site"]
    pages = {"index": site / "index.html", "paper_map": site / "generated" / "paper_map.html",
             "notebook": notebooks[0]}
    for name, page in pages.items():
        if not page.exists():
            problems.append(f"{name}: {page} does not exist")
            continue
        shot = shots / f"{name}.png"
        dom = open_page(page, shot)
        if not shot.exists() or shot.stat().st_size == 0:
            problems.append(f"{name}: no screenshot")
        if "llmq" not in dom.title:
            problems.append(f"{name}: title {dom.title!r} does not name llmq")
        if name == "index" and not any("paper_map.html" in h for h in dom.hrefs):
            problems.append("index: no link to the paper map")
        if name == "paper_map":
            rows = max((n for cls, n in dom.rows_in.items() if "paper-map" in cls), default=0)
            if rows < n_items + 1:
                problems.append(f"paper_map: the paper-map table has {rows} rows, expected > {n_items}")
            if not any("generated/api/" in h or h.startswith("api/") for h in dom.hrefs):
                problems.append("paper_map: no link into the API reference")
        if name == "notebook":
            figures = [s for s in dom.imgs if s.endswith((".png", ".svg", ".jpg"))
                       and (page.parent / s).resolve().exists()]
            if not figures:
                problems.append(f"notebook {page.name}: no figure <img> with an existing file "
                                f"(imgs: {dom.imgs[:5]})")
        print(f"browser_check: {name}: {page.relative_to(site)}: title {dom.title.strip()!r}, "
              f"{len(dom.imgs)} img, {sum(dom.rows_in.values())} table rows -> {shot}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check the site ``argv[0]``, saving screenshots to ``argv[1]``; 1 if a page lacks something."""
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0] if args else "docs/_build/html")
    shots = Path(args[1] if len(args) > 1 else "out/docs-shots")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from paper_checks.items import PAPER_ITEMS

    problems = check_site(site, shots, len(PAPER_ITEMS))
    for p in problems:
        print("browser_check: MISSING:", p)
    print(f"browser_check: {3 - len({p.split(':')[0] for p in problems})} of 3 pages complete")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
