"""The package layering and the job rules the design states.

Layers: ``theory`` <- ``stability`` <- ``paper_checks`` <- ``llmq``, and no import cycle. Jobs:
the simulator (``stability.sim``) imports no policy module (``stability.schedulers``: the
registry resolves names); the runner (``stability/runner.py``) names no client, neither by an
import nor by a string; the model (``theory`` outside ``theory.validation``) imports neither the
validation package nor the planner. Every rule is a function of an import graph (and, for the
runner, of its source), so that each is shown to fail on a made-up violation as well as to hold on
the project.
"""

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("theory", "stability", "paper_checks", "llmq")
RUNNER = "stability.runner"
# what the runner may name: itself, the engine it preloads into its workers, and the model's helpers
RUNNER_MAY_NAME = ("stability.runner", "stability.sim", "theory")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in LAYERS:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(source: str, top_level_only: bool = False) -> set[str]:
    """Project modules ``source`` imports (anywhere in it, or only at module level)."""
    tree = ast.parse(source)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n.split(".")[0] in LAYERS}


def named_modules(source: str) -> set[str]:
    """Project modules a string constant of ``source`` (docstrings included) names: a dotted path
    (``"pkg.mod"``, ``"pkg.mod:function"``, the form of a lazy reference, or a reST reference such as
    ``:mod:`pkg.mod```) whose first part is a project package."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in node.value.replace(",", " ").split():
                path = re.sub(r"^[(\[]*:\w+:", "", word).partition(":")[0].strip("'\"()[]`.;")
                parts = path.split(".")
                if len(parts) > 1 and parts[0] in LAYERS and all(p.isidentifier() for p in parts):
                    out.add(path)
    return out


def graph() -> dict[str, set[str]]:
    """Every project module and the project modules it imports (anywhere in it)."""
    return {m: imports_of(p.read_text()) for m, p in modules().items()}


def resolve(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


# --- the rules: each returns its violations as (module, what it imports or names) ---------------


def layer_violations(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """An import of a layer above the importer's own."""
    return [(m, i) for m, names in g.items() for i in names
            if LAYERS.index(i.split(".")[0]) > LAYERS.index(m.split(".")[0])]


def simulator_violations(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """An import of a policy module (``stability.schedulers``) by the simulator (``stability.sim``)."""
    return [(m, i) for m, names in g.items() if within(m, "stability.sim") for i in names
            if within(i, "stability.schedulers")]


def runner_violations(runner_imports: set[str], runner_strings: set[str]) -> list[tuple[str, str]]:
    """A project module outside :data:`RUNNER_MAY_NAME` that the runner imports or names in a string
    (its clients: ``stability.region``, ``stability.points``, ``stability.slai``, the planner, ...)."""
    return [(RUNNER, n) for n in sorted(runner_imports | runner_strings)
            if not any(within(n, ok) for ok in RUNNER_MAY_NAME)]


def model_violations(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """An import of ``theory.validation`` or ``stability.planner`` by the model (``theory`` outside
    ``theory.validation``)."""
    return [(m, i) for m, names in g.items()
            if within(m, "theory") and not within(m, "theory.validation") for i in names
            if within(i, "theory.validation") or within(i, "stability.planner")]


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles between modules (a package and its own modules excepted)."""
    d = nx.DiGraph()
    for m, names in g.items():
        for i in names:
            target = resolve(i, g)
            if target and target != m and not within(m, target) and not within(target, m):
                d.add_edge(m, target)
    return list(nx.simple_cycles(d))


# --- the project keeps them -----------------------------------------------------------------------


def test_the_walk_sees_the_packages():
    known = modules()
    assert {"theory.builder", "stability.sim.engine", "stability.runner", "paper_checks.registry",
            "llmq.cli", "theory.validation.validate", "stability.planner.grid"} <= set(known)
    assert "theory.builder" in graph()["stability.runner"]  # its edges are seen


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_points_up_the_layers(layer):
    bad = [(m, i) for m, i in layer_violations(graph()) if m.split(".")[0] == layer]
    assert not bad, bad


def test_the_simulator_imports_no_policy_module():
    assert not simulator_violations(graph())


def test_the_runner_names_no_client():
    source = (ROOT / "stability" / "runner.py").read_text()
    assert not runner_violations(imports_of(source), named_modules(source))


def test_the_model_imports_neither_validation_nor_the_planner():
    assert not model_violations(graph())


def test_no_import_cycle():
    """Not even through imports inside functions (a package and its own modules excepted)."""
    found = cycles(graph())
    assert not found, found[:5]


# --- each rule fails on a violation ---------------------------------------------------------------


def test_a_layer_violation_is_caught():
    g = {"theory.cost": {"stability.sim.simulate"}, "stability.region": {"theory.cost"}}
    assert layer_violations(g) == [("theory.cost", "stability.sim.simulate")]


def test_a_simulator_importing_a_policy_is_caught():
    g = {"stability.sim.fleet": {"stability.schedulers.rad", "stability.sim.registry"},
         "stability.sim.registry": set(), "stability.region": {"stability.schedulers.vllm"}}
    assert simulator_violations(g) == [("stability.sim.fleet", "stability.schedulers.rad")]


def test_a_runner_naming_a_client_is_caught_by_import_and_by_string(tmp_path):
    """A made-up runner module that imports one client and names another in a lazy reference
    (as ``TASK_KINDS = {"sim": "stability.points:run_sim"}`` did) fails the rule on both."""
    fake = tmp_path / "runner.py"
    fake.write_text('from stability.planner.search import run_plan_task\n'
                    'from theory.io import json_text\n'
                    'KINDS = {"sim": "stability.points:run_sim"}\n'
                    'PRELOAD = ["stability.runner", "stability.sim.simulate"]\n'
                    '"""Runs tasks (:mod:`stability.slai.study`)."""\n'
                    'NOTE = "a plain sentence. with dots, not a module"\n')
    source = fake.read_text()
    bad = runner_violations(imports_of(source), named_modules(source))
    assert bad == [(RUNNER, "stability.planner.search"), (RUNNER, "stability.planner.search.run_plan_task"),
                   (RUNNER, "stability.points"), (RUNNER, "stability.slai.study")]


def test_a_model_module_importing_validation_or_the_planner_is_caught():
    g = {"theory.capacity": {"theory.validation.validate", "theory.cost"},
         "theory.bounds": {"stability.planner.grid"},
         "theory.validation.gemm": {"theory.validation.calibrate", "theory.cost"}}
    assert sorted(model_violations(g)) == [("theory.bounds", "stability.planner.grid"),
                                           ("theory.capacity", "theory.validation.validate")]


def test_a_cycle_is_caught():
    g = {"stability.a": {"stability.b"}, "stability.b": {"stability.a.f"}, "stability": {"stability.a"}}
    assert sorted(map(sorted, cycles(g))) == [["stability.a", "stability.b"]]
