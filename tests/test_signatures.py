"""The style limits the design states for library code: a module holds one job in at most
``MAX_LINES`` lines, and a function takes at most ``MAX_PARAMS`` parameters (positional and
keyword, ``self`` and ``cls`` left out; ``*args`` and ``**kwargs`` are not counted: a function that
reads keyword options validates them into a documented record, as the schedulers' ``make_params``
do). The exceptions are listed below, each with its reason. Every rule is a function of a source
text, so that each is shown to fail on a made-up violation as well as to hold on the project.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("theory", "stability", "paper_checks", "llmq")
MAX_LINES = 600
MAX_PARAMS = 8

# "module path::function": why it may take more than MAX_PARAMS parameters. Each entry is checked
# to still need its exception, so that the list only shrinks.
COMPILED = {
    "stability/sim/engine.py::_new_state": "a compiled (numba njit) constructor of the engine state "
    "structure: numba passes arrays and scalars, not a Python record, so the state's arrays and "
    "settings arrive one by one; its caller new_state takes the Recording record",
    "stability/sim/kernels.py::_lin_terms": "a compiled (numba njit) kernel on the hot path of every "
    "batch time: the cost tables' fields arrive one by one because a compiled function handing the "
    "tables' structref to a callee with loops pays an atomic reference count per call (t_lin's "
    "docstring); its caller t_lin takes the cost tables",
}


def library_files() -> list[Path]:
    return sorted(p for pkg in LIBRARY for p in (ROOT / pkg).rglob("*.py"))


def n_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional and keyword parameters of ``fn``, ``self``/``cls`` left out."""
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def long_signatures(source: str, limit: int = MAX_PARAMS) -> dict[str, int]:
    """``{function name: parameters}`` of every function of ``source`` with more than ``limit``."""
    return {
        node.name: n_params(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and n_params(node) > limit
    }


def too_long(source: str, limit: int = MAX_LINES) -> bool:
    return len(source.splitlines()) > limit


def violations() -> tuple[dict[str, int], dict[str, int]]:
    """(long signatures as ``"path::name": parameters``, long modules as ``path: lines``) of the library."""
    params, lines = {}, {}
    for path in library_files():
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        params |= {f"{rel}::{name}": n for name, n in long_signatures(source).items()}
        if too_long(source):
            lines[rel] = len(source.splitlines())
    return params, lines


def test_the_walk_sees_the_library():
    files = {p.relative_to(ROOT).as_posix() for p in library_files()}
    assert {"stability/sim/cluster.py", "theory/cost.py", "paper_checks/registry.py", "llmq/cli.py"} <= files


def test_no_library_function_takes_more_than_eight_parameters():
    params, _ = violations()
    assert set(params) - set(COMPILED) == set(), params


def test_every_compiled_exception_is_still_needed():
    params, _ = violations()
    assert set(COMPILED) <= set(params), sorted(set(COMPILED) - set(params))
    assert all(reason.strip() for reason in COMPILED.values())


def test_no_library_module_is_longer_than_600_lines():
    _, lines = violations()
    assert lines == {}, lines


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(a, b, c, d, e, f, g, h, i):\n    pass\n", {"f": 9}),
        ("class C:\n    def m(self, a, b, c, d, e, f, g, h, *, i=1):\n        pass\n", {"m": 9}),
        ("def f(a, b, c, d, e, f, g, h, *args, **kwargs):\n    pass\n", {}),
        ("class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n", {}),
    ],
)
def test_a_long_signature_is_caught(source, expected):
    assert long_signatures(source) == expected


def test_a_long_module_is_caught():
    assert too_long("x = 1\n" * (MAX_LINES + 1)) and not too_long("x = 1\n" * MAX_LINES)
