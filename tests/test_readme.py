"""The README is a user's guide: its first two commands are the ones CI runs and users copy, its
Python example runs as written, and it stays short."""

import argparse
import doctest
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_BYTES = 8 * 1024


def readme_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [block.strip() for block in re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)]


def readme_commands() -> list[str]:
    return readme_blocks("bash")


def test_first_command_installs_and_runs_the_main_job():
    first = readme_commands()[0]
    assert "pip install ." in first and first.rstrip().endswith(("llmq bounds", "llmq region"))


def test_ci_runs_the_second_command_verbatim():
    second = readme_commands()[1]
    assert "pytest" in second and '".[test]"' in second
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert second in ci.splitlines()


def test_the_readme_is_at_most_8_kb():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes; history goes to CHANGES.md, the rest to docs/"


def test_the_python_example_runs_as_a_doctest():
    """The README's one ``python`` block, run by :mod:`doctest`: every printed line is compared."""
    (example,) = readme_blocks("python")
    test = doctest.DocTestParser().get_doctest(example, {}, "README.md", str(README), 0)
    assert sum(bool(e.want) for e in test.examples) >= 2, "the example must print what it checks"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted == len(test.examples) >= 5 and result.failed == 0


def test_the_commands_section_has_one_line_per_command():
    from llmq.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Commands"):text.index("## Documentation")]
    listed = re.findall(r"^\* `llmq (\w+)`", section, flags=re.M)
    assert sorted(listed) == sorted(sub.choices), (listed, sorted(sub.choices))


def test_the_documentation_links_point_at_files():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and all((ROOT / link).exists() for link in links), \
        [link for link in links if not (ROOT / link).exists()]
