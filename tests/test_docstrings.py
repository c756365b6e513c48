"""Every public function and class of the library has a docstring (the house style asks each to
name the paper's equation, lemma or section it implements; this test guards the presence)."""

import importlib
import inspect
import pkgutil

import pytest

import llmq
import paper_checks
import stability
import theory


def public_objects():
    for pkg in (theory, stability, paper_checks, llmq):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith(".__main__"):  # running it is the command line itself
                continue
            mod = importlib.import_module(info.name)
            for name, obj in vars(mod).items():
                if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                        and getattr(obj, "__module__", None) == mod.__name__):
                    yield f"{mod.__name__}.{name}", obj


def test_the_walk_finds_the_library():
    names = {name for name, _ in public_objects()}
    assert {"theory.cost.T_batch", "stability.sim.simulate.simulate", "theory.bounds.compute_bounds"} <= names


@pytest.mark.parametrize("package", ["theory", "stability", "paper_checks", "llmq"])
def test_every_public_function_and_class_has_a_docstring(package):
    missing = [name for name, obj in public_objects()
               if name.startswith(package + ".") and not (obj.__doc__ or "").strip()]
    assert not missing, missing


def test_no_tracked_file_points_outside_the_repository():
    """A reader who clones the repository must be able to follow every citation: no file cites a
    note that lives beside the repository instead of its public source."""
    import re
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    outside = re.compile(r"\.\./shared|shared/reference|scheduler_semantics\.md|gpu_model_facts")
    hits = [f"{f}:{k}" for f in files if (root / f).is_file() and not f.startswith("tests/test_docstrings")
            for k, line in enumerate((root / f).read_text(errors="ignore").splitlines(), 1)
            if outside.search(line)]
    assert not hits, hits
