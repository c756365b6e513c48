"""``import llmq``: the documented API, imported lazily from the packages that own it."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import llmq

ROOT = Path(__file__).resolve().parents[1]


def fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter on this checkout and return what it prints."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return proc.stdout.strip()


def test_import_llmq_loads_none_of_the_library():
    """The front door costs nothing until a name is used: no numpy, numba or job package."""
    loaded = fresh_python("import sys, llmq; dir(llmq); print(' '.join(sorted(sys.modules)))").split()
    heavy = [m for m in loaded if m.split(".")[0] in ("numpy", "numba", "scipy", "sympy", "theory",
                                                       "stability", "paper_checks")]
    assert "llmq" in loaded and not heavy, heavy


def test_the_cost_model_does_not_load_scipy_stats():
    """scipy.stats costs seconds to import, and only a mixture of experts' routing law needs it: a
    dense model's cost model, and the command line's parser, leave it out."""
    loaded = fresh_python("import sys, llmq; from llmq.cli import build_parser; build_parser(); "
                          "llmq.cost_model(llmq.CostSpec('a100')); "
                          "print(' '.join(sorted(sys.modules)))").split()
    assert "theory.cost" in loaded and "scipy.stats" not in loaded


def test_a_name_loads_its_home_on_first_use():
    loaded = fresh_python("import sys, llmq; llmq.CostSpec; print(' '.join(sorted(sys.modules)))").split()
    assert "theory.builder" in loaded and "stability.sim.simulate" not in loaded


@pytest.mark.parametrize("name", llmq.__all__)
def test_every_name_is_its_home_modules_object(name):
    home = llmq._HOME_OF[name]
    assert not home.startswith("llmq"), "the front door re-exports the job packages, not itself"
    assert getattr(llmq, name) is getattr(importlib.import_module(home), name)


def test_the_api_the_issue_names_is_there():
    """A scenario and simulate, the cost-model builder, the bounds and the certified capacity, a
    sweep, a plan, the scheduler registry and the errors."""
    wanted = {"Scenario", "simulate", "CostSpec", "cost_model", "compute_bounds", "capacity_bound",
              "SweepSpec", "run_sweep", "PlanSpec", "search", "get_scheduler", "scheduler_names",
              "LlmqError", "FieldError", "UnknownNameError"}
    assert wanted <= set(llmq.__all__)
    assert issubclass(llmq.FieldError, llmq.LlmqError) and issubclass(llmq.LlmqError, ValueError)


def test_the_docstring_documents_exactly_the_front_door():
    """Each name is listed under its package in the docstring, and the docstring lists nothing the
    front door lacks (every ``Name`` it quotes is in ``__all__``, Python's own ``ValueError`` aside)."""
    quoted = set(re.findall(r"``([A-Za-z_]\w*)``", llmq.__doc__)) - {"llmq", "ValueError"}
    assert quoted == set(llmq.__all__), (quoted ^ set(llmq.__all__))


def test_dir_lists_the_front_door_and_unknown_names_fail():
    assert set(llmq.__all__) <= set(dir(llmq)) and "__getattr__" in dir(llmq)
    with pytest.raises(AttributeError, match="no attribute 'Scenarioo'"):
        llmq.Scenarioo  # noqa: B018
    assert not hasattr(llmq, "register")  # the registry's own register stays in its package


def test_the_command_line_modules_are_still_reachable():
    from llmq import cli

    assert callable(cli.main)


def test_the_docstring_example_runs():
    import doctest

    result = doctest.testmod(llmq, verbose=False)
    assert result.attempted >= 3 and result.failed == 0


JOB_PACKAGES = ("theory", "theory.validation", "stability", "stability.sim", "stability.planner",
                "stability.slai", "paper_checks")


def resolve(dotted: str):
    """The object a docstring cross-reference names (a module, or an attribute chain inside one)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("package", JOB_PACKAGES)
def test_each_job_package_names_its_api_and_every_name_resolves(package):
    doc = importlib.import_module(package).__doc__
    assert "The API" in doc, f"{package}'s docstring names no API"
    refs = re.findall(r":(?:func|class|mod|meth|data):`~?([\w.]+)`", doc)
    assert len(refs) >= 2
    unresolved = []
    for ref in refs:
        try:
            resolve(ref)
        except (ImportError, AttributeError):
            unresolved.append(ref)
    assert not unresolved, unresolved
