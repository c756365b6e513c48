"""A numba cache built once from the unmutated tree, reused by every mutant it cannot mislead.

numba keeps a compiled function on disk and reloads it while the content of the function's own
file is unchanged (its source stamp is a sha256 of the file, ``numba.core.caching``, numba 0.68). It
does not notice a change elsewhere that the compiled code depends on: a compiled callee in another
file (linked into the caller's cached code) or a global constant imported from another module
(frozen into it). So a mutant may reuse a cache built from the unmutated tree only where the file
it edits reaches no compiled code, and otherwise only after the cached entries that depend on
that file are deleted.

:func:`graph` lists, in the unmutated tree, every compiled function of the packages with the files
its code depends on: its own file, the file of every compiled function it names, the project
module of every module it names (``mod.X``), and for any other global it names, the file the name
is imported from or, for a name assigned in its own module, the files of the project names on the
right-hand side (found in the module's syntax tree, followed to a fixed point). Dependencies are
closed transitively through callees. :func:`plan` then says, for a mutated file, whether the warm
cache is reused whole (no compiled function depends on the file), reused less the dependent
entries (the file holds only compiled functions and plain modules' constants), or not at all (the
file imports numba for another purpose, e.g. a structref type, which no name lookup can follow).

The cache is found by the function's place in the tree, not the copy's absolute path
(:class:`stability.numba_cache.SourceTreeLocator` through numba's ``NUMBA_CACHE_LOCATOR_CLASSES``),
so one built in one copy serves another. Each mutant gets a hard-linked copy (numba replaces a cache
file by ``os.replace`` of a new one, so a recompile never writes through a link).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = ("stability", "theory", "paper_checks")
WHOLE, PARTIAL, FRESH = "warm", "warm less dependents", "fresh"


def _module_name(file: str) -> str:
    parts = Path(file).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_of(module) -> str | None:
    """The module's file, relative to the folder holding its package, when it is one of the packages."""
    name = getattr(module, "__name__", "")
    if name.split(".")[0] not in PACKAGES or not getattr(module, "__file__", None):
        return None
    top = Path(sys.modules[name.split(".")[0]].__file__).resolve().parents[1]
    return Path(module.__file__).resolve().relative_to(top).as_posix()


def _origins(tree: ast.Module, module, name: str, seen: set[str]) -> set[str]:
    """Project files a top-level name of ``module`` takes its value from (see the docstring)."""
    if name in seen:
        return set()
    seen.add(name)
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), module.__package__)
            mod = sys.modules.get(base) or importlib.import_module(base)
            out |= {f for f in [_file_of(mod)] if f}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                out.add(_file_of(module))
                for sub in ast.walk(node.value):
                    if isinstance(sub, ast.Name):
                        out |= _value_files(tree, module, sub.id, seen)
    return out


def _value_files(tree: ast.Module, module, name: str, seen: set[str]) -> set[str]:
    """The files a global ``name`` of ``module`` brings into compiled code."""
    from numba.core.dispatcher import Dispatcher

    value = vars(module).get(name)
    if isinstance(value, Dispatcher):
        return {f"dispatcher:{value.py_func.__module__}.{value.py_func.__qualname__}"}
    if inspect.ismodule(value):
        return {f for f in [_file_of(value)] if f}
    return _origins(tree, module, name, seen) if name in vars(module) else set()


def graph(root: Path) -> dict:
    """Every cached compiled function of :data:`PACKAGES` under ``root`` (the working directory),
    with its cache entry's name and its direct dependencies (files and ``dispatcher:`` keys), and
    the files that import numba without defining a compiled function by name lookup."""
    from numba.core.dispatcher import Dispatcher

    functions, numba_files = {}, []
    for path in sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "numba" not in text:
            continue
        file = path.relative_to(root).as_posix()
        numba_files.append(file)
        module = importlib.import_module(_module_name(file))
        tree = ast.parse(text)
        for node in tree.body:
            value = vars(module).get(getattr(node, "name", ""))
            if not isinstance(node, ast.FunctionDef) or not isinstance(value, Dispatcher):
                continue
            if value.py_func.__module__ != module.__name__:
                continue
            deps = {file}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id != node.name:
                    deps |= _value_files(tree, module, sub.id, set())
            key = f"{module.__name__}.{node.name}"
            functions[key] = {
                "file": file,
                "entry": f"{'_'.join(Path(file).parent.parts)}/{path.stem}.{node.name}-",
                "deps": sorted(d for d in deps if d),
            }
    return {"functions": functions, "numba_files": numba_files}


def closure(g: dict) -> dict[str, set[str]]:
    """Each compiled function's files, closed through the compiled functions it names."""
    out: dict[str, set[str]] = {}

    def files(key: str, stack: tuple[str, ...]) -> set[str]:
        if key in out:
            return out[key]
        mine: set[str] = set()
        for d in g["functions"][key]["deps"]:
            if not d.startswith("dispatcher:"):
                mine.add(d)
            elif d[11:] in g["functions"] and d[11:] not in stack:
                mine |= files(d[11:], (*stack, key))
        out[key] = mine
        return mine

    for key in g["functions"]:
        files(key, ())
    return out


def plan(g: dict, file: str) -> tuple[str, list[str]]:
    """How a mutant of ``file`` uses the warm cache, and the cache entries to delete."""
    reach = closure(g)
    dependents = sorted(g["functions"][k]["entry"] for k, fs in reach.items() if file in fs)
    defines = any(f["file"] == file for f in g["functions"].values())
    if file in g["numba_files"] and not defines:
        return FRESH, []
    return (PARTIAL, dependents) if dependents else (WHOLE, [])


def _link(src: str, dst: str) -> None:
    """A hard link, or a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def mutant_cache(warm: Path, target: Path, g: dict, file: str) -> str:
    """The numba cache of a mutant of ``file`` at ``target`` (see :func:`plan`); the mode used."""
    mode, entries = plan(g, file)
    if mode == FRESH:
        target.mkdir(parents=True)
        return mode
    shutil.copytree(warm, target, copy_function=_link)
    for entry in entries:
        folder, prefix = entry.split("/")
        for p in (target / folder).glob(prefix + "*"):
            p.unlink()
    return mode


def locator_env(numba_dir: Path) -> dict[str, str]:
    """The environment that puts numba's cache at ``numba_dir``, found by the tree path."""
    from stability.numba_cache import locator_classes

    return {"NUMBA_CACHE_DIR": str(numba_dir), "NUMBA_CACHE_LOCATOR_CLASSES": locator_classes()}


def graph_of(repo: Path, env: dict) -> dict:
    """:func:`graph` run in ``repo`` (a copy of the tree) by a child interpreter."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "graph"],
        cwd=repo,
        env=env,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    return json.loads(out)


def _copy(files: list[str], src: Path, repo: Path) -> None:
    for f in files:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, repo / f)


def _must_pass(stage, what: str):
    import mutation as runner

    if stage.status != runner.SURVIVED:
        raise SystemExit(f"the unmutated tree fails {what}: {stage.status} {stage.detail}")
    return stage.seconds


def _file_seconds(junit: Path, test_file: str) -> float:
    """Seconds of a test file in a pytest junit report: the sum of its test cases' times."""
    import xml.etree.ElementTree as ET

    mod = Path(test_file).with_suffix("").as_posix().replace("/", ".")
    return sum(
        float(case.get("time") or 0.0)
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.get("classname", "") == mod or case.get("classname", "").startswith(mod + ".")
    )


def prepare(files: list[str], strata: dict, args, expected: dict) -> tuple[Path, dict]:
    """The warm numba cache of the unmutated tree (under ``out/mutation-warm/<digest>``, named by
    the source of :data:`PACKAGES` and numba's and Python's versions) and its baseline (named by
    every file of the tree outside ``benchmarks/``): the graph, the seconds of each stratum's
    tests (the sum of its files' times in one run of every stratum's tests) and of the check run
    again on the warm cache.
    Refuses a tree whose own tests or check fail, where no mutant's failure would mean anything.
    An interrupted build keeps what numba compiled (every entry is checked against its file's
    content) and starts again from the tests."""
    import hashlib
    import tempfile
    from importlib.metadata import version

    import mutation as runner

    def digest(names: list[str]) -> str:
        key = hashlib.sha256(f"{version('numba')} {sys.version}".encode())
        for f in sorted(names):
            key.update(f.encode() + b"\0" + (runner.ROOT / f).read_bytes())
        return key.hexdigest()[:16]

    home = runner.ROOT / "out" / "mutation-warm" / digest([f for f in files if f.split("/")[0] in PACKAGES])
    tree = [f for f in files if not f.startswith("benchmarks/")]  # the tests and data count, not this tool
    done = home / f"baseline-{digest(tree)}.json"
    if done.is_file():
        return home, json.loads(done.read_text(encoding="utf-8"))
    earlier = sorted(home.glob("baseline-*.json"), key=lambda p: p.stat().st_mtime)
    if getattr(args, "reuse_baseline", False) and earlier:  # the packages are the same: the cache is
        print(f"reusing {earlier[-1].name}: the tests changed since it was measured", flush=True)
        return home, json.loads(earlier[-1].read_text(encoding="utf-8"))
    home.mkdir(parents=True, exist_ok=True)
    long = argparse_namespace(args, check_timeout=7200.0)
    tests = tuple(dict.fromkeys(t for _globs, ts in strata.values() for t in ts))
    with tempfile.TemporaryDirectory(prefix="llmq-warm-") as tmp:
        base = Path(tmp)
        repo = base / "repo"
        _copy(files, runner.ROOT, repo)

        def env(tag: str) -> dict:
            return {
                **runner.mutant_env(repo, base),
                **locator_env(home / "numba"),
                "XDG_CACHE_HOME": str(base / tag),
            }

        g = graph_of(repo, env("xdg-graph"))
        first = {"tests": _must_pass(runner.run_tests(tests, repo, env("xdg-0"), base, 7200.0), "its tests")}
        per_file = {t: _file_seconds(base / "junit-all.xml", t) for t in tests}
        first["check"] = _must_pass(
            runner.run_check(repo, env("xdg-1"), base, long, expected), "llmq check --quick"
        )
        shutil.rmtree(base / "check-cache")
        warm = {
            "check": _must_pass(runner.run_check(repo, env("xdg-2"), base, long, expected), "the check, warm")
        }
    for stratum, (_globs, ts) in strata.items():
        warm[stratum] = sum(per_file[t] for t in ts)
    baseline = {"graph": g, "first": first, "warm": warm}
    done.write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return home, baseline


def argparse_namespace(args, **changes):
    """A copy of ``args`` with ``changes``."""
    import argparse

    return argparse.Namespace(**{**vars(args), **changes})


if __name__ == "__main__" and sys.argv[1:] == ["graph"]:
    sys.path.insert(0, str(Path.cwd()))
    print(json.dumps(graph(Path.cwd()), sort_keys=True))
