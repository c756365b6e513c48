"""Check the internal links of the built site: every relative ``href``/``src`` of every HTML page
must name a file that exists, and a ``#fragment`` must name an id in that file.

Usage: ``python docs/check_links.py docs/_build/html``; exits 1 listing the broken links.
External links (with a scheme, or protocol-relative) are not followed: CI has no network.
"""

from __future__ import annotations

import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("preconnect", "dns-prefetch")):
                self.links.append(a[key])


@cache
def _parse(path: Path) -> _Collect:
    p = _Collect()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def broken_links(site: Path) -> tuple[int, list[str]]:
    """(links checked, descriptions of the broken ones) for every HTML page under ``site``."""
    checked, broken = 0, []
    for page in sorted(site.rglob("*.html")):
        for link in _parse(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            checked += 1
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            rel = page.relative_to(site)
            if not target.exists():
                broken.append(f"{rel}: {link} (no such file)")
            elif (parts.fragment and target.suffix == ".html"
                  and unquote(parts.fragment) not in _parse(target).ids):
                broken.append(f"{rel}: {link} (no id {parts.fragment!r})")
    return checked, broken


def main(argv: list[str] | None = None) -> int:
    """Check the site given as the only argument; print a summary; 1 if a link is broken."""
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0] if args else "docs/_build/html").resolve()
    pages = list(site.rglob("*.html"))
    if not pages:
        print(f"check_links: no HTML pages under {site}")
        return 1
    checked, broken = broken_links(site)
    for line in broken:
        print("broken:", line)
    print(f"check_links: {len(pages)} pages, {checked} internal links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
