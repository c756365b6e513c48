"""The package layering the design states: ``theory`` <- ``stability`` <- ``paper_checks`` <-
``llmq``, the engine core imports no policy, and no import cycle."""

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("theory", "stability", "paper_checks", "llmq")
ENGINE_CORE = ("stability.sim.engine", "stability.sim.kernels", "stability.sim.structs")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in LAYERS:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, top_level_only: bool) -> set[str]:
    """Project modules ``path`` imports (anywhere in it, or only at module level)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n.split(".")[0] in LAYERS}


def resolve(name: str, known: dict) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def test_the_walk_sees_the_packages():
    known = modules()
    assert {"theory.builder", "stability.sim.engine", "stability.runner", "paper_checks.registry",
            "llmq.cli"} <= set(known)


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_points_up_the_layers(layer):
    known = modules()
    above = LAYERS[LAYERS.index(layer) + 1:]
    bad = [(m, i) for m, p in known.items() if m.split(".")[0] == layer
           for i in imports(p, top_level_only=False) if i.split(".")[0] in above]
    assert not bad, bad


def test_the_engine_core_imports_no_policy():
    known = modules()
    bad = [(m, i) for m in ENGINE_CORE for i in imports(known[m], top_level_only=False)
           if i.startswith("stability.schedulers")]
    assert not bad, bad


def test_no_import_cycle():
    """Not even through imports inside functions (a package and its own modules excepted)."""
    known = modules()
    g = nx.DiGraph()
    for m, p in known.items():
        for i in imports(p, top_level_only=False):
            target = resolve(i, known)
            if target and target != m and not m.startswith(target + ".") and not target.startswith(m + "."):
                g.add_edge(m, target)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles[:5]
