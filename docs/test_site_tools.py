"""Tests of the site's checking scripts (run by CI's docs step: ``pytest docs/test_site_tools.py``).

A small fake site is written to a temporary directory; each script must pass it when it is
complete and name what is wrong when it is not.
"""

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import browser_check
import check_links


def page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


def write_site(root: Path, rows: int, figure: bool) -> Path:
    (root / "generated" / "notebooks").mkdir(parents=True)
    (root / "_images").mkdir()
    (root / "_images" / "fig.png").write_bytes(
        bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                      "1f15c4890000000d49444154789c6300010000050001a5f645400000000049454e44ae426082"))
    (root / "index.html").write_text(page("llmq", '<a href="generated/paper_map.html#paper-eq-2">map</a>'))
    trs = "".join(f'<tr><td id="r{k}">Eq. {k}</td><td><a href="api/x.html">f</a></td></tr>'
                  for k in range(rows))
    (root / "generated" / "paper_map.html").write_text(page(
        "Paper map - llmq", f'<span id="paper-eq-2"></span><table class="paper-map">{trs}</table>'))
    img = '<img src="../../_images/fig.png">' if figure else "<p>no figure</p>"
    (root / "generated" / "notebooks" / "01.html").write_text(page("01 - llmq", img))
    return root


def test_check_links_finds_missing_files_and_fragments(tmp_path):
    site = write_site(tmp_path, rows=3, figure=True)
    (site / "generated" / "api").mkdir()
    (site / "generated" / "api" / "x.html").write_text(page("x", '<p id="f">f</p>'))
    checked, broken = check_links.broken_links(site)
    assert checked >= 5 and broken == []
    (site / "index.html").write_text(page("llmq", '<a href="nowhere.html">a</a> <a href="#gone">b</a> '
                                                  '<a href="https://example.org/">external</a>'))
    check_links._parse.cache_clear()
    checked, broken = check_links.broken_links(site)
    assert len(broken) == 2 and "nowhere.html" in broken[0] and "gone" in broken[1]
    assert check_links.main([str(site)]) == 1


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="needs chromium (apt-get install -y chromium)")
def test_browser_check_fails_on_a_page_that_lacks_its_content(tmp_path):
    good = write_site(tmp_path / "good", rows=5, figure=True)
    assert browser_check.check_site(good, tmp_path / "shots", n_items=3) == []
    assert (tmp_path / "shots" / "paper_map.png").stat().st_size > 0
    bad = write_site(tmp_path / "bad", rows=2, figure=False)
    problems = browser_check.check_site(bad, tmp_path / "shots-bad", n_items=3)
    assert any(p.startswith("paper_map:") for p in problems)
    assert any(p.startswith("notebook") for p in problems)
