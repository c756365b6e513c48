"""The README's first two commands are the ones CI runs and users copy."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_first_command_installs_and_runs_the_main_job():
    first = readme_commands()[0]
    assert "pip install ." in first and first.rstrip().endswith(("llmq bounds", "llmq region"))


def test_ci_runs_the_second_command_verbatim():
    second = readme_commands()[1]
    assert "pytest" in second and '".[test]"' in second
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert second in ci.splitlines()
