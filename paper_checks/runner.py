"""Run the paper checks, index their verdicts by paper item, compare with recorded verdicts.

A check that raises is a *crash* (a bug in the check or in the code it exercises), recorded with its
traceback; a FAIL verdict is a finding, not a crash. Each outcome says whether its verdict rests on
the claim's whole domain or on part of it (:attr:`Outcome.scope`); the checks beyond the paper are
indexed by the items they extend, apart from the checks of those items.

With a ``cache`` directory (``llmq check`` keeps one in :func:`default_cache_dir`) or several
``workers``, the checks run through the sweeps' runner (:class:`stability.runner.Runner`). Each
check's outcome is cached under its id, its mode (``quick`` or ``full``) and the source digest of
``theory``, ``stability`` and ``paper_checks`` (:func:`check_key`), serialized exactly
(:func:`outcome_record`): a rerun of unchanged code reads every finished check back, on any number
of workers. The checks left run as tasks of one module each (:class:`CheckTask`), in paper order
within the task, so that they share what their module computes once for several of them, as in a run
in one process (but for the long checks that share nothing, :data:`ALONE`, each a task); a task
writes each check's entry as soon as it finishes, so an interrupted run keeps every finished check.
A crash is recorded in the outcome and run again the next time (it may come from the environment,
not from the code). The tasks start longest first, by the seconds their checks took the last time
they ran with that cache (:data:`TIMINGS`), or in a fresh cache by the order of :data:`LONGEST`, so
that the workers finish together. No check starts a pool of its own: the sweeps a check runs
(:func:`stability.slai.study.run_tasks`, :func:`stability.sim.simulate.simulate`) run in its
process, on their default of one worker.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path

import numpy as np

from paper_checks.evidence import covers_whole_domain
from paper_checks.items import PAPER_ITEMS
from paper_checks.registry import Check, Result, Verdict, all_checks, get_check
from theory.errors import ConfigFileError
from theory.version import source_digest

CRASH = "CRASH"
MODES = ("full", "quick")  # a CheckTask's mode, by its ``fast`` flag
# Long checks that share nothing their module computes (long simulations of the cycle chain and of
# every scheduler): each runs as a task of its own, so that the workers share them out instead of one
# worker running them one after another in their module's task.
ALONE = frozenset({"lemma2.markov", "thm1.instability"})
# The tasks that run longest, each named by a check it holds, longest first: where the cache holds
# no timings of a previous run (a fresh cache), they start first, before the tasks in paper order,
# so that no long task starts last while the other workers have finished. An order, not a timing.
LONGEST = ("sec7.ttft_cut_53", "appD.tbt_ttft", "lemma2.markov", "thm1.instability")
TIMINGS = "timings"  # <cache>/timings/<mode>.json: {check id: seconds} of the checks last run there
RECORD_FIELDS = ("result", "error", "seconds")  # of an outcome's record (outcome_record)


@dataclass(frozen=True)
class Outcome:
    """One check's run: its result, or the traceback it crashed with, and how long it took."""

    check: Check
    result: Result | None
    error: str | None
    seconds: float
    cached: bool = False  # read back from a cache (``seconds`` are those of the run that computed it)

    @property
    def verdict(self) -> str:
        """The verdict's name, or ``CRASH``."""
        return self.result.verdict.value if self.result is not None else CRASH

    @property
    def scope(self) -> str:
        """``"whole"`` when the verdict rests on the claim's whole domain, ``"part"`` when on part
        of it (a PASS, or an ERRATUM's correction, checked on part: samples, statistical tests, an
        enumeration ``--quick`` shrank), ``""`` when it rests on no domain (a FAIL's counterexample
        refutes the claim wherever it was found; NOT_CHECKABLE; a crash)."""
        if self.result is None or self.verdict in ("FAIL", "NOT_CHECKABLE"):
            return ""
        return "whole" if covers_whole_domain(str(self.check.level), self.result.shrunk) else "part"

    @property
    def verdict_text(self) -> str:
        """The verdict, followed by "on part of its domain" when :attr:`scope` is ``"part"``."""
        return self.verdict + (" on part of its domain" if self.scope == "part" else "")


def run_checks(ids: list[str] | None = None, fast: bool = False,
               progress: Callable[[Outcome], None] | None = None, *, workers: int = 1,
               cache: str | Path | None = None, bar=None) -> list[Outcome]:
    """Run the checks ``ids`` (all if None); their outcomes in paper order.

    Parameters
    ----------
    ids : list of str, optional
        The check ids (all registered checks, in paper order, if None or empty).
    fast : bool
        The CI subset (``llmq check --quick``): smaller ranges, same checks.
    progress : callable, optional
        Sees each outcome as it is known: read from the cache, or computed.
    workers : int
        Processes that run the checks (1: this one).
    cache : str or Path, optional
        The directory of the result cache (:func:`default_cache_dir` is the command line's). None
        with one worker and no ``bar``: run in this process, nothing kept; None with more workers:
        a temporary one.
    bar : optional
        A progress bar (``update(n)``, as :class:`tqdm.tqdm`) advanced once per check.

    Raises
    ------
    UnknownNameError
        If an id is not registered.
    FieldError
        If ``workers`` is not an integer >= 1.
    stability.runner.SweepInterrupted
        On Ctrl-C while running through the runner (the finished checks stay in the cache).
    """
    checks = all_checks() if not ids else [get_check(i) for i in ids]
    if cache is None and workers == 1 and bar is None:
        out = []
        for check in checks:
            out.append(run_one(check, fast))
            if progress is not None:
                progress(out[-1])
        return out
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="llmq-check-") as tmp:
            return _through_runner(checks, fast, progress, workers, tmp, bar)
    return _through_runner(checks, fast, progress, workers, cache, bar)


def run_one(check: Check, fast: bool) -> Outcome:
    """Run one check in this process: its result, or the traceback it crashed with, timed."""
    start = time.perf_counter()
    try:
        result, error = check.validate(check.run(fast)), None
    except Exception:  # a crash is reported, never hidden
        result, error = None, traceback.format_exc()
    return Outcome(check, result, error, time.perf_counter() - start)


def kept_outcome(check_id: str, fast: bool, cache: str | Path | None = None) -> Outcome:
    """One check's outcome as ``llmq check`` would have it, without a pool: read back from the
    result cache ``cache`` (:func:`default_cache_dir` if None) when it holds a reusable entry, else
    run in this process (:class:`CheckTask`) and kept there for the next reader."""
    from stability.runner import Cache

    kept = Cache(default_cache_dir() if cache is None else cache)
    check = get_check(check_id)
    outcome = _cached(kept, check, fast)
    if outcome is not None:
        return outcome
    (record,) = CheckTask((check_id,), fast, str(kept.dir)).run()["outcomes"]
    return from_record(check, record)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/llmq/check`` (default ``~/.cache/llmq/check``): the result cache that
    ``llmq check`` and the notebooks share unless told otherwise."""
    from theory.io import cache_home

    return cache_home() / "check"


@dataclass(frozen=True)
class CheckTask:
    """The checks of one module, run in one process in paper order, as a task of
    :mod:`stability.runner` (:class:`stability.runner.Task`): they share what their module
    computes once for several of them (Section 7's study, the corrected algorithms' runs).

    Attributes
    ----------
    check_ids : tuple of str
        The registered checks it runs (a worker finds them in its own registry).
    fast : bool
        The CI subset (mode ``quick``) or the full ranges (mode ``full``).
    cache_dir : str, optional
        Where each check's own entry is written as soon as it finishes (:func:`check_key`), so
        that an interrupted task keeps its finished checks; not part of the task's identity.
    """

    check_ids: tuple[str, ...]
    fast: bool
    cache_dir: str | None = field(default=None, compare=False)

    def identity(self) -> dict:
        """The checks, their mode and the digest of the checks' sources (the runner's key adds the
        digest of ``theory`` and ``stability``)."""
        return check_identity(list(self.check_ids), self.fast)

    def run(self) -> dict:
        """Run the checks: ``{"outcomes": [outcome_record, ...]}`` (a check this process does not
        know is a crash, recorded like any other)."""
        from stability.runner import Cache

        records = []
        for check_id in self.check_ids:
            start = time.perf_counter()
            try:
                check = get_check(check_id)
            except Exception:
                records.append({"result": None, "error": traceback.format_exc(),
                                "seconds": time.perf_counter() - start})
                continue
            records.append(outcome_record(run_one(check, self.fast)))
            if self.cache_dir is not None and records[-1]["result"] is not None:
                Cache(self.cache_dir).put(check_key(check_id, self.fast), check_identity(check_id, self.fast),
                                          {**records[-1], "elapsed_s": records[-1]["seconds"]})
        return {"outcomes": records}


def check_identity(checks: str | list[str], fast: bool) -> dict:
    """The identity of one check's cache entry (``checks`` an id) or of a task's (a list of ids)."""
    return {"paper_checks": checks, "mode": MODES[fast], "paper_checks_source": source_digest("paper_checks")}


def check_key(check_id: str, fast: bool) -> str:
    """The cache key of one check's outcome (:func:`stability.runner.task_key`)."""
    from stability.runner import task_key

    return task_key(check_identity(check_id, fast))


def outcome_record(o: Outcome) -> dict:
    """An outcome as plain JSON values that :func:`from_record` turns back into it: every field of
    its :class:`~paper_checks.registry.Result` (the verdict by name; counterexample and evidence
    with numpy values, tuples, sets and fractions made what :func:`paper_checks.common.jsonable`
    makes them, non-finite floats kept, which the cache writes exactly), its error and seconds."""
    r = o.result
    result = None if r is None else {f.name: _plain(getattr(r, f.name)) for f in fields(Result)}
    if result is not None:
        result["verdict"] = r.verdict.value
    return {"result": result, "error": o.error, "seconds": o.seconds}


def _plain(obj):
    """``obj`` as :func:`paper_checks.common.jsonable` makes it, but for non-finite floats, kept
    (``jsonable(_plain(x)) == jsonable(x)``)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return _plain(obj.item())
    if isinstance(obj, Fraction):
        return str(obj) if obj.denominator != 1 else obj.numerator
    if isinstance(obj, float) and not math.isfinite(obj):
        return float(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def from_record(check: Check, record: dict, cached: bool = False) -> Outcome:
    """The outcome of ``check`` that :func:`outcome_record` serialized."""
    r = record["result"]
    result = None if r is None else Result(**{**r, "verdict": Verdict(r["verdict"])})
    return Outcome(check, result, record["error"], record["seconds"], cached)


def _reusable(record: dict) -> bool:
    """Whether a cached record holds a result to reuse: not a crash, and of the current shape."""
    r = record.get("result")
    return (all(k in record for k in RECORD_FIELDS) and isinstance(r, dict)
            and set(r) == {f.name for f in fields(Result)})


def _cached(cache, check: Check, fast: bool) -> Outcome | None:
    """``check``'s outcome read back from ``cache`` (a :class:`stability.runner.Cache`), or None;
    an entry that holds no reusable result (:func:`_reusable`) is removed, so that it runs again."""
    from stability.runner import RESULT_FIELDS

    hit = cache.get(check_key(check.id, fast), RESULT_FIELDS)
    if hit is not None and _reusable(hit):
        return from_record(check, hit, cached=True)
    if hit is not None:
        (cache.dir / f"{check_key(check.id, fast)}.json").unlink(missing_ok=True)
    return None


def _through_runner(checks: list[Check], fast: bool, progress, workers: int, cache_dir, bar) -> list[Outcome]:
    """:func:`run_checks` through :class:`stability.runner.Runner` (see the module docstring)."""
    from stability.runner import Cache, LocalExecutor, Runner, task_key

    cache, executor = Cache(cache_dir), LocalExecutor(workers)
    by_id = {c.id: c for c in checks}
    outcomes: dict[str, Outcome] = {}

    def known(o: Outcome) -> None:
        outcomes[o.check.id] = o
        if bar is not None:
            bar.update(1)
        if progress is not None:
            progress(o)

    ids = list(dict.fromkeys(c.id for c in checks))
    for check_id in ids:  # what is cached is known at once; a crash or an entry of another shape runs again
        outcome = _cached(cache, by_id[check_id], fast)
        if outcome is not None:
            known(outcome)
    seconds = _timings(cache.dir, fast)
    tasks = check_tasks([by_id[i] for i in ids if i not in outcomes], fast, str(cache.dir), seconds)
    for task in tasks:  # a task's own entry holds a crash its checks' entries left out: run it again
        (cache.dir / f"{task_key(task.identity())}.json").unlink(missing_ok=True)
    computed: dict[str, float] = {}

    def on_result(task: CheckTask, result: dict) -> None:
        for check_id, record in zip(task.check_ids, result["outcomes"], strict=True):
            known(from_record(by_id[check_id], record))
            computed[check_id] = record["seconds"]

    try:
        Runner(cache, executor, None, on_result).run(tasks)
    finally:
        executor.close()
        if computed:
            _record_timings(cache.dir, fast, {**seconds, **computed})
    return [outcomes[c.id] for c in checks]


def check_tasks(checks: list[Check], fast: bool, cache_dir: str | None = None,
                seconds: dict[str, float] | None = None) -> list[CheckTask]:
    """The tasks that run ``checks`` (in paper order): one per module, but one per check of
    :data:`ALONE`, each in paper order; longest first by ``seconds`` (``{check id: seconds}`` of a
    previous run), a task with a check of unknown time before the others, and among tasks of
    equal standing (every task, in a fresh cache) those of :data:`LONGEST` first, in its order."""
    seconds = seconds or {}
    groups: dict[str, list[str]] = {}
    for c in checks:
        groups.setdefault(c.id if c.id in ALONE else c.run.__module__, []).append(c.id)
    return [CheckTask(tuple(group), fast, cache_dir) for group in sorted(
        groups.values(),
        key=lambda group: (all(i in seconds for i in group), -sum(seconds.get(i, 0.0) for i in group),
                           _longest_rank(group)))]


def _longest_rank(group: list[str]) -> int:
    """A task's place in :data:`LONGEST` (by the first check of it named there), after them all if none."""
    return min((LONGEST.index(i) for i in group if i in LONGEST), default=len(LONGEST))


def _timings_path(cache_dir: Path, fast: bool) -> Path:
    return Path(cache_dir) / TIMINGS / f"{MODES[fast]}.json"


def _timings(cache_dir: Path, fast: bool) -> dict[str, float]:
    """``{check id: seconds}`` of the checks last run with this cache (empty if none is readable)."""
    try:
        data = json.loads(_timings_path(cache_dir, fast).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and math.isfinite(v)}


def _record_timings(cache_dir: Path, fast: bool, seconds: dict[str, float]) -> None:
    from theory.io import atomic_write_json

    try:
        atomic_write_json(_timings_path(cache_dir, fast), seconds)
    except OSError:  # the order is a convenience: a cache that cannot take it loses nothing else
        pass


def item_index(outcomes: list[Outcome]) -> dict[str, list[tuple[str, str]]]:
    """Each numbered item of the paper -> [(check id, verdict), ...] of the checks that cover it
    (the beyond-the-paper checks extend items, they do not cover them: :func:`beyond_index`)."""
    index: dict[str, list[tuple[str, str]]] = {item: [] for item in PAPER_ITEMS}
    for o in outcomes:
        for item in o.check.items:
            index.setdefault(item, []).append((o.check.id, o.verdict))
    return index


def beyond_index(outcomes: list[Outcome]) -> dict[str, list[tuple[str, str]]]:
    """Each numbered item that a beyond-the-paper check extends -> [(check id, verdict), ...]."""
    index: dict[str, list[tuple[str, str]]] = {}
    for o in outcomes:
        for item in o.check.extends:
            index.setdefault(item, []).append((o.check.id, o.verdict))
    return index


def verdicts(outcomes: list[Outcome]) -> dict[str, str]:
    """``{check id: verdict}`` in run order."""
    return {o.check.id: o.verdict for o in outcomes}


def load_expected(path: str | Path) -> dict[str, str]:
    """Recorded verdicts (a JSON object ``{check id: verdict}``).

    Raises
    ------
    ConfigFileError
        If the file is missing or is not such an object.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigFileError(f"{path}: expected a JSON object {{check id: verdict}}")
    return data


def mismatches(outcomes: list[Outcome], expected: dict[str, str]) -> list[str]:
    """Lines describing every check whose verdict differs from ``expected`` (or is not recorded)."""
    out = []
    for o in outcomes:
        want = expected.get(o.check.id)
        if want is None:
            out.append(f"{o.check.id}: {o.verdict}, but no verdict is recorded for it")
        elif want != o.verdict:
            out.append(f"{o.check.id}: {o.verdict}, recorded {want}")
    return out
