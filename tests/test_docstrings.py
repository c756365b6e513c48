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
from paper_checks import registry
from paper_checks.registry import Level, Result, Verdict, all_checks, docstring_misses, register
from theory.errors import FieldError


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


def test_every_check_docstring_names_its_location_claim_method_and_level():
    """``register`` writes the check functions' docstrings, so the presence test above cannot fail
    for them; this one reads what each says."""
    checks = all_checks()
    bad = {c.id: docstring_misses(c) for c in checks if docstring_misses(c)}
    assert checks and not bad, bad


def _fn(fast):
    return Result(Verdict.PASS, "holds", coverage="nothing")


CARD = {"location": "Section 6", "items": ("Eq. 8",), "claim": "a claim", "method": "a method",
        "level": "sample"}


@pytest.mark.parametrize("field", ["claim", "method", "location"])
def test_registering_a_check_with_an_empty_description_fails(field):
    with pytest.raises(FieldError, match=field):
        register(f"test.empty_{field}", **{**CARD, field: "  "})(_fn)
    assert f"test.empty_{field}" not in registry._REGISTRY


def test_registering_a_check_whose_docstring_lacks_the_card_fails(monkeypatch):
    def own_docstring(fast):
        """A docstring of its own that names neither the claim nor the evidence level."""
        return _fn(fast)

    with pytest.raises(FieldError, match="claim, method, evidence level"):
        register("test.own_docstring", **CARD)(own_docstring)
    real = registry.card
    monkeypatch.setattr(registry, "card", lambda c: real(c).replace("Evidence: ", ""))  # drops the label
    with pytest.raises(FieldError, match="evidence level"):
        register("test.card_without_level", **CARD)(lambda fast: _fn(fast))
    assert not {"test.own_docstring", "test.card_without_level"} & set(registry._REGISTRY)


def test_the_docstring_test_flags_a_check_missing_its_level():
    check = next(c for c in all_checks() if c.level is not Level.PROOF)
    proof = registry.Check(**{**vars(check), "level": Level.PROOF})  # same docstring, other level
    assert docstring_misses(proof) == ["evidence level"] and docstring_misses(check) == []


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
