"""Mutation testing on mutants nobody chose: cosmic-ray's standard operators over the core modules.

Where ``benchmarks/mutants.toml`` is a reviewed table, this module takes every mutant that the
standard (argument-free) operators of cosmic-ray (https://github.com/sixty-north/cosmic-ray,
``cosmic_ray.operators``) produce over the core modules of :data:`STRATA`, each as one source edit
with a stable id ``file:line:col:operator:occurrence`` (the position cosmic-ray reports and its
occurrence index of that operator in that file), and writes that population to
``benchmarks/generated/population.jsonl.gz`` with the digest of every file it came from. A seeded
uniform random sample, stratified by module, is then run by :mod:`mutation`'s runner, each mutant
in its own copy of the repository:

(a) the stratum's test files under pytest, stopping at the first failure (``-x``), then
(b) when every test passed, ``llmq check --quick --workers 1`` against the recorded verdicts.

Each copy starts from a numba cache built once from the unmutated tree (:mod:`warm_cache`): whole
where the mutated file reaches no compiled code, less the entries that depend on the mutated file
otherwise (``--fresh-cache``: every kernel compiled anew, as before). Building it also runs every
stage on the unmutated tree (a run refuses a tree whose own tests or check fail) and records each
stage's seconds; a mutant's stage may take ``--timeout-factor`` times that (at least
``--min-timeout``), plus ``--compile-allowance`` where its compiled code is rebuilt.

Definitions (the report prints each class in its own column):

* **killed**, the standard sense of the mutation tools (mutmut, cosmic-ray): the tests or the check
  fail. A test fails by an assertion (or ``pytest.fail``, "DID NOT RAISE") or by an exception raised
  in the code under test; the check fails when a verdict moves, a check raises, or the process exits
  without a report. Its two parts are reported apart: **killed by assertion** (a test's assertion
  failed or a verdict moved: the stricter count this project used first) and **killed by exception**.
* **died or timed out**: a stage's process was killed by a signal (a segfault in compiled code, an
  abort) or ran past its timeout, with no test failing first. CI would go red, so it is
  **detected**, but it is not counted as killed.
* **equivalent**: a survivor that ``benchmarks/generated/why.toml`` marks ``equivalent = true`` with
  a reviewed reason showing that the program's behaviour is identical; left out of every
  denominator and listed. Every other survivor is **survived** and counts against the rates.

The headline is the standard kill rate over the non-equivalent mutants run, with its 95% Wilson
interval and the sample size; the report also gives the kill rate by assertion and the detection
rate.

Results are appended to ``benchmarks/generated/results.jsonl`` as each mutant finishes (an
interrupted run resumes where it stopped). Two frame exclusions, both counted in the report: a
mutant inside a type annotation (every core module has ``from __future__ import annotations``, so
annotations are never evaluated and such a mutant is equivalent by construction), and
``ExceptionReplacer`` (its mutant names ``CosmicRayTestingException``, which exists only inside
cosmic-ray's own test runner). Needs the ``mutation`` extra::

    python benchmarks/generated_mutants.py generate
    nice -n 10 python benchmarks/generated_mutants.py run [--per-stratum 8] [--seed 20261129]
    python benchmarks/generated_mutants.py report --markdown out/generated.md
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import json
import math
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation as runner
import warm_cache

ROOT = runner.ROOT
HERE = ROOT / "benchmarks" / "generated"
POPULATION = HERE / "population.jsonl.gz"
RESULTS = HERE / "results.jsonl"
WHY = HERE / "why.toml"  # id = "why nothing killed it", reviewed by hand
SEED = 20261129
PER_STRATUM = 8
_ENGINE_TESTS = (
    "tests/test_engine_vs_reference.py",
    "tests/test_schedulers_vs_reference.py",
    "tests/test_scheduler_invariants.py",
)
# stratum: (files as globs under the root, the test files that cover them)
STRATA: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cost": (
        ("theory/cost.py", "theory/terms.py"),
        (
            "tests/test_cost.py",
            "tests/test_mutant_killers_cost.py",
            "tests/test_cost_terms.py",
            "tests/test_moe.py",
        ),
    ),
    "bounds": (
        ("theory/bounds.py",),
        ("tests/test_bounds.py", "tests/test_mutant_killers_bounds.py", "tests/test_cost_term_table.py"),
    ),
    "capacity": (
        ("theory/capacity/*.py",),
        ("tests/test_capacity.py", "tests/test_moe_capacity.py", "tests/test_mutant_killers_capacity.py"),
    ),
    "engine": (
        ("stability/sim/engine.py", "stability/sim/batches.py"),
        ("tests/test_mutant_killers_generated.py", *_ENGINE_TESTS),
    ),
    "memory": (("stability/sim/memory.py",), ("tests/test_memory.py", *_ENGINE_TESTS)),
    "schedulers": (
        ("stability/schedulers/*.py",),
        (
            "tests/test_mutant_killers_generated.py",
            *_ENGINE_TESTS,
            "tests/test_slai.py",
            "tests/test_vllm_v1.py",
        ),
    ),
    "dtmc": (("stability/dtmc.py",), ("tests/test_dtmc.py", "tests/test_mutant_killers_dtmc.py")),
    "planner": (
        ("stability/planner/*.py",),
        ("tests/test_mutant_killers_generated.py", "tests/test_plan.py", "tests/test_mixed_fleet.py"),
    ),
    "stats": (
        ("theory/stats.py", "theory/validation/errors.py"),
        (
            "tests/test_mutant_killers_dtmc.py",
            "tests/test_mutant_killers_stats.py",
            "tests/test_validation_steps.py",
            "tests/test_validate.py",
            "tests/test_plan.py",
        ),
    ),
}
EXCLUDED_OPERATORS = {
    "core/ExceptionReplacer": "names CosmicRayTestingException, defined only by cosmic-ray's own test runner"
}


@dataclass(frozen=True)
class Edit:
    """One generated mutant as a source edit.

    Attributes
    ----------
    id : str
        ``file:line:col:operator:occurrence`` (cosmic-ray's reported position and occurrence).
    stratum, file, operator : str
    occurrence : int
        The index of this position among the operator's positions in the file (cosmic-ray's).
    line, col : int
        Where ``original`` starts (1-based line, 0-based column).
    original, replacement : str
        The edit, trimmed to the characters that differ.
    frame : str
        ``""`` when the mutant is in the sampling frame, else why not.
    """

    id: str
    stratum: str
    file: str
    operator: str
    occurrence: int
    line: int
    col: int
    original: str
    replacement: str
    frame: str = ""

    def mutant(self) -> runner.Mutant:
        """The runner's mutant: this edit at its position, with the stratum's tests."""
        return runner.Mutant(
            id=self.id,
            file=self.file,
            original=self.original,
            replacement=self.replacement,
            models=self.operator,
            tests=STRATA[self.stratum][1],
            line=self.line,
            col=self.col,
        )


def core_files() -> list[tuple[str, str]]:
    """(stratum, file) for every core module, sorted; refuses a glob that matches nothing."""
    out = []
    for stratum, (globs, tests) in STRATA.items():
        for g in globs:
            hits = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob(g))
            if not hits:
                raise SystemExit(f"STRATA[{stratum!r}]: no file matches {g!r}")
            out += [(stratum, h) for h in hits]
        missing = [t for t in tests if not (ROOT / t).is_file()]
        if missing:
            raise SystemExit(f"STRATA[{stratum!r}]: no test file {', '.join(missing)}")
    return out


def operators() -> list[tuple[str, object]]:
    """cosmic-ray's standard operators: every registered operator that takes no arguments."""
    import cosmic_ray.plugins as plugins

    ops = []
    for name in plugins.operator_names():
        cls = plugins.get_operator(name)
        if not cls.arguments():
            ops.append((name, cls()))
    return ops


def _in_annotation(node) -> bool:
    """Whether ``node`` lies in a parameter, return or variable annotation."""
    child, parent = node, node.parent
    while parent is not None:
        kids = parent.children
        k = next(i for i, c in enumerate(kids) if c is child)
        before = kids[k - 1] if k else None
        if parent.type in ("param", "tfpdef") and getattr(before, "value", None) == ":":
            return True
        if parent.type == "funcdef" and getattr(before, "value", None) == "->":
            return True
        if parent.type == "annassign" and k == 1:
            return True
        child, parent = parent, parent.parent
    return False


def _offsets(text: str) -> list[int]:
    starts, total = [], 0
    for line in text.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return [*starts, total]


def _edit_of(node, op, index: int, starts: list[int]) -> tuple[int, str, str]:
    """(offset, original, replacement) of ``op.mutate(node, index)``, the tree left as it was."""
    line, col = node.get_start_pos_of_prefix()
    at = starts[line - 1] + col
    old = node.get_code(include_prefix=True)
    saved = node.value if hasattr(node, "value") else list(node.children)
    new_node = op.mutate(node, index)
    new = "" if new_node is None else new_node.get_code(include_prefix=True)
    if hasattr(node, "value"):
        node.value = saved
    else:
        node.children[:] = saved
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return at + head, old[head : len(old) - tail], new[head : len(new) - tail]


def _position(offset: int, starts: list[int]) -> tuple[int, int]:
    line = max(i for i, s in enumerate(starts[:-1]) if s <= offset) if offset else 0
    return line + 1, offset - starts[line]


def generate_file(stratum: str, file: str, ops=None, text: str | None = None) -> list[Edit]:
    """Every mutant of ``file`` (or of ``text``, named ``file``) by the standard operators, in
    cosmic-ray's occurrence order."""
    from cosmic_ray.ast import ast_nodes, get_ast

    text = (ROOT / file).read_text(encoding="utf-8") if text is None else text
    future = "from __future__ import annotations" in text
    starts = _offsets(text)
    nodes = list(ast_nodes(get_ast(text)))
    edits = []
    for name, op in ops or operators():
        short = name.split("/", 1)[1]
        positions = [
            (node, k, start) for node in nodes for k, (start, _end) in enumerate(op.mutation_positions(node))
        ]
        for occurrence, (node, k, start) in enumerate(positions):
            offset, original, replacement = _edit_of(node, op, k, starts)
            frame = EXCLUDED_OPERATORS.get(name, "")
            if not frame and future and _in_annotation(node):
                frame = "in an annotation (never evaluated under from __future__ import annotations)"
            line, col = _position(offset, starts)
            edits.append(
                Edit(
                    id=f"{file}:{start[0]}:{start[1]}:{short}:{occurrence}",
                    stratum=stratum,
                    file=file,
                    operator=short,
                    occurrence=occurrence,
                    line=line,
                    col=col,
                    original=original,
                    replacement=replacement,
                    frame=frame,
                )
            )
    return edits


def digest(file: str) -> str:
    """sha256 of a file of the working tree."""
    return hashlib.sha256((ROOT / file).read_bytes()).hexdigest()


def generate() -> tuple[dict, list[Edit]]:
    """The header (tool version, file digests) and every mutant of the core modules."""
    from importlib.metadata import version

    files = core_files()
    ops = operators()
    edits = [e for stratum, f in files for e in generate_file(stratum, f, ops)]
    header = {
        "tool": f"cosmic-ray {version('cosmic-ray')}",
        "operators": len(ops),
        "files": {f: digest(f) for _, f in files},
    }
    return header, edits


def write_population(header: dict, edits: list[Edit], path: Path = POPULATION) -> None:
    """The population as gzipped JSON lines: the header, then one edit a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(header, sort_keys=True)] + [json.dumps(vars(e), sort_keys=True) for e in edits]
    with gzip.GzipFile(path, "wb", mtime=0) as fh:  # mtime 0: the same population, the same bytes
        fh.write(("\n".join(lines) + "\n").encode())


def load_population(path: Path = POPULATION) -> tuple[dict, list[Edit]]:
    """The population of ``path``; refuses one whose files changed since it was generated."""
    if not path.is_file():
        raise SystemExit(f"no population at {path}: run `generate` first")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        header, *rows = [json.loads(x) for x in fh]
    stale = [f for f, d in header["files"].items() if not (ROOT / f).is_file() or digest(f) != d]
    if stale:
        raise SystemExit(
            f"population is stale (changed since generation): {', '.join(stale)}; run `generate` again"
        )
    return header, [Edit(**r) for r in rows]


def sample(edits: list[Edit], per_stratum: int, seed: int) -> list[Edit]:
    """A uniform random sample of ``per_stratum`` mutants of each stratum's frame, interleaved by
    stratum (round k holds each stratum's k-th draw), so that a partial run stays balanced."""
    rng = random.Random(seed)
    draws = {}
    for stratum in STRATA:
        frame = sorted((e for e in edits if e.stratum == stratum and not e.frame), key=lambda e: e.id)
        draws[stratum] = rng.sample(frame, min(per_stratum, len(frame)))
    return [d[k] for k in range(per_stratum) for d in draws.values() if k < len(d)]


def cosmic_ray_code(e: Edit) -> str:
    """The mutated file as cosmic-ray itself writes it (``mutate_code``), to check the edit."""
    import cosmic_ray.plugins as plugins
    from cosmic_ray.mutating import mutate_code

    op = plugins.get_operator("core/" + e.operator)()
    return mutate_code((ROOT / e.file).read_text(encoding="utf-8"), op, e.occurrence)


def diff(e: Edit) -> str:
    """The mutant as a unified diff of the lines it touches."""
    text = (ROOT / e.file).read_text(encoding="utf-8")
    return "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            e.mutant().apply(text).splitlines(keepends=True),
            f"a/{e.file}",
            f"b/{e.file}",
            n=0,
        )
    )


def stage_timeouts(e: Edit, mode: str, baseline: dict, args) -> tuple[float, float]:
    """Seconds allowed to the tests and the check of a mutant: ``--timeout-factor`` times the
    unmutated tree's run of the same stage (:func:`warm_cache.prepare`), at least
    ``--min-timeout``, plus ``--compile-allowance`` when the mutant's compiled code is rebuilt."""
    if baseline is None:
        return args.test_timeout, args.check_timeout
    extra = 0.0 if mode == warm_cache.WHOLE else args.compile_allowance
    warm, factor, floor = baseline["warm"], args.timeout_factor, args.min_timeout
    return max(floor, factor * warm[e.stratum]) + extra, max(floor, factor * warm["check"]) + extra


def run_one(e: Edit, files: list[str], args, expected: dict, warm: tuple[Path, dict] | None) -> dict:
    """Stage (a), the tests with ``-x``; stage (b), the check, only when every test passed (a test
    that failed, by an assertion or an exception, already kills the mutant in the standard sense).
    ``warm``: the warm cache and its baseline (:func:`warm_cache.prepare`), or None for a fresh
    numba cache (every kernel compiled again)."""
    import tempfile

    m = e.mutant()
    with tempfile.TemporaryDirectory(prefix="llmq-gen-") as tmp:
        base = Path(tmp)
        repo = runner.make_copy(m, files, base)
        env = runner.mutant_env(repo, base)
        mode, baseline = "fresh", None
        if warm is not None:
            home, baseline = warm
            mode = warm_cache.mutant_cache(home / "numba", base / "numba", baseline["graph"], e.file)
            env.update(warm_cache.locator_env(base / "numba"))
        t_tests, t_check = stage_timeouts(e, mode, baseline, args)
        tests = runner.run_tests(m.tests, repo, env, base, t_tests, first_failure=True)
        if tests.status != runner.SURVIVED:
            check = runner.Stage(runner.SKIPPED, "a test failed")
        else:
            check = runner.run_check(
                repo, env, base, warm_cache.argparse_namespace(args, check_timeout=t_check), expected
            )
    outcome = runner.Outcome(m, check, tests)
    return {
        "id": e.id,
        "stratum": e.stratum,
        "cache": mode,
        "timeouts": [round(t_tests), round(t_check)],
        "tests": vars(tests),
        "check": vars(check),
        "overall": outcome.overall,
    }


def failure(stage: dict) -> str:
    """How a stage failed: "assertion" (a test's assertion or a moved verdict), "exception" (a
    test or check raised, or the check exited without a report), "died" (a signal or a timeout),
    or "" (it passed or did not run)."""
    if stage["status"] == KILLED:
        return "assertion"
    if stage["status"] != CRASH:
        return ""
    detail = stage["detail"]
    if " raised" in detail or detail.startswith(("exit", "no report")):
        return "exception"
    return "died"


def verdict(row: dict) -> str:
    """A mutant's class: the first of assertion, exception, died that a stage shows, else
    "survived" (see the module docstring for the definitions)."""
    kinds = {failure(row["tests"]), failure(row["check"])}
    return next((k for k in ("assertion", "exception", "died") if k in kinds), "survived")


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion k/n (Wilson 1927, JASA 22(158))."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def read_results(path: Path = RESULTS) -> dict[str, dict]:
    """The rows appended so far (the last row of an id wins: a re-run replaces a result)."""
    if not path.is_file():
        return {}
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return {r["id"]: r for r in rows}


def _rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]" if n else "-"


def read_why(path: Path = WHY) -> dict[str, dict]:
    """The reviewed reasons: ``[id]`` tables with ``why`` and, for an equivalent mutant,
    ``equivalent = true`` (the reason must show the program's behaviour is identical)."""
    raw = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    bad = [k for k, v in raw.items() if not isinstance(v, dict) or not isinstance(v.get("why"), str)]
    if bad:
        raise SystemExit(f"{path}: entries without a why string: {', '.join(bad)}")
    return raw


CLASSES = ("assertion", "exception", "died", "equivalent", "survived")


def classify(row: dict, why: dict) -> str:
    """:func:`verdict`, with a survivor that ``why`` marks equivalent as "equivalent"; refuses an
    equivalence claim for a mutant that some stage detected."""
    v = verdict(row)
    if why.get(row["id"], {}).get("equivalent"):
        if v != "survived":
            raise SystemExit(f"{WHY}: {row['id']} is marked equivalent but was {v}")
        return "equivalent"
    return v


def tally(rows: list[dict], why: dict) -> dict[str, int]:
    """Counts of each class of :data:`CLASSES` and ``n``, the non-equivalent mutants run."""
    out = {c: 0 for c in CLASSES}
    for r in rows:
        out[classify(r, why)] += 1
    out["n"] = len(rows) - out["equivalent"]
    return out


def _rates(t: dict) -> str:
    n = t["n"]
    return (
        f"{_rate(t['assertion'] + t['exception'], n)} | {_rate(t['assertion'], n)} | "
        f"{_rate(t['assertion'] + t['exception'] + t['died'], n)}"
    )


def report(edits: list[Edit], drawn: list[Edit], results: dict[str, dict], args) -> str:
    """The markdown section: population, frame, sample, the classes of the run mutants, the
    standard kill rate, the kill rate by assertion and the detection rate over the non-equivalent
    ones with Wilson intervals, the seconds a mutant took, and every mutant not killed with its
    diff and why."""
    why = read_why()
    lines = [
        "| module | population | frame | sampled | run | by assertion | by exception | died or timed out | "
        "equivalent | survived | killed [95% Wilson] | killed by assertion | detected |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = [results[e.id] for e in drawn if e.id in results]
    for stratum in [*STRATA, "all"]:
        pop = [e for e in edits if stratum in ("all", e.stratum)]
        mine = [e for e in drawn if stratum in ("all", e.stratum)]
        t = tally([results[e.id] for e in mine if e.id in results], why)
        lines.append(
            f"| {stratum} | {len(pop)} | {sum(not e.frame for e in pop)} | {len(mine)} | "
            f"{sum(e.id in results for e in mine)} | "
            + " | ".join(str(t[c]) for c in CLASSES)
            + f" | {_rates(t)} |"
        )
    total = tally(runs, why)
    killed = total["assertion"] + total["exception"]
    lo, hi = wilson(killed, total["n"])
    seconds = {}
    for r in runs:
        if "seconds" in r:
            seconds.setdefault(r["cache"], []).append(r["seconds"])
    timing = "; ".join(
        f"{mode}: {len(v)} mutants, median {sorted(v)[len(v) // 2]:.0f} s, mean {sum(v) / len(v):.0f} s"
        for mode, v in sorted(seconds.items())
    )
    lines += [
        "",
        f"**Killed (the standard sense) over the non-equivalent mutants: {killed}/{total['n']} = "
        f"{killed / max(1, total['n']):.1%}, 95% Wilson interval [{lo:.1%}, {hi:.1%}]** "
        f"({len(runs)} mutants run, {total['equivalent']} equivalent left out, seed {args.seed}, "
        f"{args.per_stratum} drawn a module). Killed by assertion: {_rate(total['assertion'], total['n'])}. "
        f"Detected (killed, died or timed out): "
        f"{_rate(killed + total['died'], total['n'])}.",
        "",
        f"Seconds a mutant took (tests and check, by numba cache): {timing or '-'}.",
        "",
        "Drawn in rounds (each module's k-th draw before any (k+1)-th), so the mutants run of a module are "
        "a uniform sample of its frame. The pooled row mixes modules sampled at different fractions of "
        "their population: it describes the sample, not the population.",
        "",
        "Not killed:",
        "",
    ]
    for e in drawn:
        r = results.get(e.id)
        if r is None or verdict(r) in ("assertion", "exception"):
            continue
        lines += [
            f"- `{e.id}` **{classify(r, why)}**: tests {r['tests']['status']} "
            f"({r['tests']['detail'][:160]}), check {r['check']['status']} "
            f"({r['check']['detail'][:100]}). {why.get(e.id, {}).get('why', '(not yet reviewed)')}",
            "",
            "  ```diff",
            *("  " + x for x in diff(e).splitlines()[2:]),
            "  ```",
            "",
        ]
    return "\n".join(lines) + "\n"


KILLED, CRASH, SURVIVED = runner.KILLED, runner.CRASH, runner.SURVIVED


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("generate", "list", "run", "report"))
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--per-stratum", type=int, default=PER_STRATUM, help="mutants sampled a module")
    p.add_argument("--only", action="append", metavar="ID", help="run only this sampled mutant")
    p.add_argument("--rerun", action="store_true", help="run --only mutants even if they have a result")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--jobs", type=int, default=1, help="mutants run at once (each in its own copy)")
    p.add_argument(
        "--reuse-baseline",
        action="store_true",
        help="when only files outside the packages changed (a new test), keep the last baseline's "
        "timings instead of running every stage on the unmutated tree again",
    )
    p.add_argument("--fresh-cache", action="store_true", help="compile every kernel anew for each mutant")
    p.add_argument("--timeout-factor", type=float, default=4.0, help="times the unmutated warm stage")
    p.add_argument("--min-timeout", type=float, default=120.0, help="seconds, the least a stage gets")
    p.add_argument(
        "--compile-allowance", type=float, default=900.0, help="seconds added to a stage that recompiles"
    )
    p.add_argument("--check-timeout", type=float, default=900.0, help="seconds, with --fresh-cache")
    p.add_argument("--test-timeout", type=float, default=900.0, help="seconds, with --fresh-cache")
    p.add_argument("--markdown", type=Path, help="report: write the section here")
    args = p.parse_args(argv)
    if args.command == "generate":
        header, edits = generate()
        write_population(header, edits)
        print(
            f"{len(edits)} mutants ({sum(not e.frame for e in edits)} in the frame) of "
            f"{len(header['files'])} files by {header['operators']} operators ({header['tool']})"
        )
        return 0
    _header, edits = load_population()
    drawn = sample(edits, args.per_stratum, args.seed)
    if args.command == "list":
        for e in drawn:
            print(f"{e.id}\n{diff(e)}")
        return 0
    if args.command == "report":
        text = report(edits, drawn, read_results(args.results), args)
        if args.markdown:
            args.markdown.write_text(text, encoding="utf-8")
        print(text)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kill PID stops the running stage too
    done = read_results(args.results)
    todo = [e for e in drawn if (args.only is None or e.id in args.only) and (e.id not in done or args.rerun)]
    mismatched = [
        e.id
        for e in todo
        if cosmic_ray_code(e) != e.mutant().apply((ROOT / e.file).read_text(encoding="utf-8"))
    ]
    if mismatched:
        raise SystemExit("edits differ from cosmic-ray's mutate_code: " + ", ".join(mismatched))
    expected = json.loads((ROOT / "paper_checks" / "verdicts.json").read_text(encoding="utf-8"))
    files = runner.repo_files()
    warm = None
    if not args.fresh_cache:
        start = time.perf_counter()
        warm = warm_cache.prepare(files, STRATA, args, expected)
        print(f"warm cache {warm[0]} ({time.perf_counter() - start:.0f} s)", flush=True)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    lock, count = threading.Lock(), iter(range(1, len(todo) + 1))

    def one(e: Edit) -> None:
        start = time.perf_counter()
        row = run_one(e, files, args, expected, warm)
        row["seconds"] = round(time.perf_counter() - start, 1)
        row["jobs"] = args.jobs
        with lock, args.results.open("a", encoding="utf-8") as fh:  # one line a mutant: Ctrl-C safe
            fh.write(json.dumps(row, allow_nan=False) + "\n")
            print(
                f"[{next(count)}/{len(todo)}] {verdict(row):<9} {row['seconds']:5.0f} s  {row['cache']:<20}  "
                f"{e.id}  tests {row['tests']['status']} check {row['check']['status']}",
                flush=True,
            )

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
