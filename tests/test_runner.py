"""The sweep runner under faults: corrupt, truncated or wrongly shaped cache entries, a full disk,
Ctrl-C, ``kill -9`` at random times (hypothesis over the kill time), and worker processes that
must not outlive a killed parent. Every case ends with the complete, byte-identical result of an
undisturbed run, or a clear error, and never a partial file."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmq.cli import main
from stability.region import SweepSpec, run_sweep, write_outputs
from tests.toys import SOLO_TOML

ROOT = Path(__file__).resolve().parents[1]


def tiny(gpu_file) -> SweepSpec:
    return SweepSpec(tilesets=("solo2",), gpu_file=gpu_file, workload="uniform:1-64,1-40",
                     schedulers=("request_level",), variants=("pad",), loads=(0.6, 1.1), bisect=1,
                     n_requests=2000, replicates=2, sat_requests=4000, epsilon=0.1)


def argv(gpu_file, out, workers=1, requests=2000) -> list[str]:
    """The command line of the same tiny sweep (:func:`tiny` with ``requests``)."""
    return ["region", "--gpu", "solo2", "--gpu-file", gpu_file, "--workload", "uniform:1-64,1-40",
            "--scheduler", "request_level", "--loads", "0.6,1.1", "--bisect", "1", "--pad",
            "--requests-per-node", str(requests), "--replicates", "2", "--sat-requests", str(2 * requests),
            "--epsilon", "0.1", "--workers", str(workers), "--no-progress", "--out", str(out)]


@pytest.fixture(scope="module")
def reference(gpu_file, tmp_path_factory):
    """The undisturbed sweep's region.csv bytes, and its cache directory."""
    tmp = tmp_path_factory.mktemp("reference")
    res = run_sweep(tiny(gpu_file), tmp / "cache")
    return write_outputs(res, tmp)["csv"].read_bytes(), tmp / "cache"


def no_partial_files(directory: Path) -> None:
    assert not list(directory.rglob(".*.tmp")), "a half-written file was left behind"

    def reject(constant):
        pytest.fail(f"non-strict constant {constant}")

    for path in directory.rglob("*.json"):
        json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def test_corrupt_truncated_and_misshapen_cache_entries_are_recomputed(gpu_file, reference, tmp_path):
    import shutil

    csv_bytes, cache = reference
    shutil.copytree(cache, tmp_path / "cache")
    entries = sorted((tmp_path / "cache").glob("*.json"))
    bad = {entries[0]: entries[0].read_text()[:40],   # truncated
           entries[1]: "[1, 2, 3]",                    # valid JSON, wrong shape
           entries[2]: '{"task": {}, "result": 7}',    # result not a dict
           entries[3]: '{"task": {}, "result": {"x": NaN}}',  # not strict JSON
           entries[4]: "\x00\x01garbage"}
    for path, text in bad.items():
        path.write_text(text)
    with pytest.warns(RuntimeWarning, match="recomputing it") as caught:
        res = run_sweep(tiny(gpu_file), tmp_path / "cache")
    assert len([w for w in caught if "cache entry" in str(w.message)]) == len(bad)
    assert res.computed == len(bad) and res.cached == len(entries) - len(bad)
    assert write_outputs(res, tmp_path)["csv"].read_bytes() == csv_bytes
    no_partial_files(tmp_path)


def test_a_full_disk_is_one_clear_error_and_leaves_no_partial_file(gpu_file, reference, tmp_path,
                                                                     monkeypatch, capsys):
    """Writes fail with ENOSPC after a few results: one line, exit 1, no half-written file; the rerun
    completes byte-identically."""
    import theory.io

    real = theory.io.os.replace
    calls = {"n": 0}

    def replace_until_full(src, dst):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real(src, dst)

    monkeypatch.setattr(theory.io.os, "replace", replace_until_full)
    out = tmp_path / "out"
    assert main(argv(gpu_file, out)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err
    # three files written: the run's manifest (first, region.run.json) and two results
    assert (out / "region.run.json").is_file() and len(list((out / "cache").glob("*.json"))) == 2
    no_partial_files(out)
    monkeypatch.setattr(theory.io.os, "replace", real)
    assert main(argv(gpu_file, out)) == 0
    assert (out / "region.csv").read_bytes() == reference[0]


def test_an_unusable_out_is_rejected_before_any_work(gpu_file, tmp_path, capsys):
    afile = tmp_path / "file"
    afile.write_text("x")
    cases = ((afile, "this is an existing file"), (tmp_path / "no" / "such" / "dir", "does not exist"),
             (afile / "sub", "is a file"))
    for out, says in cases:
        t0 = time.perf_counter()
        assert main(argv(gpu_file, out)) == 2
        err = capsys.readouterr().err
        assert "--out" in err and says in err and time.perf_counter() - t0 < 5
    assert list(tmp_path.iterdir()) == [afile]


def test_a_directory_with_another_sweeps_outputs_is_not_overwritten(gpu_file, reference, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(argv(gpu_file, out)) == 0
    before = (out / "region.csv").read_bytes()
    assert main([*argv(gpu_file, out)[:-2], "--loads", "0.5,1.1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "differs in loads ([0.6,1.1] there, [0.5,1.1] here)" in err
    assert (out / "region.csv").read_bytes() == before
    assert main([*argv(gpu_file, out), "--json"]) == 0  # the same sweep resumes: every run cached
    assert json.loads(capsys.readouterr().out)["tasks"]["computed"] == 0
    assert (out / "region.csv").read_bytes() == before


def _tiny_slai(monkeypatch):
    """``llmq slai --quick`` shrunk to one panel at one rate (the outputs' shape, in seconds)."""
    import stability.slai.study as study

    monkeypatch.setattr(study, "QUICK", study.Study(study.QUICK.panels[:1], seeds=2, n_requests=200,
                                                    rel_rates=(0.8,), paper_rates=(1.6,), smoke=True))
    return ["slai", "--quick", "--no-figures", "--no-progress", "--requests", "200"]


def test_slai_resumes_its_own_study_and_refuses_another(tmp_path, monkeypatch, capsys):
    args = [*_tiny_slai(monkeypatch), "--out", str(tmp_path)]
    cache = tmp_path / "slai" / "cache"
    assert main(args) == 0
    kept = {p.name: p.stat().st_mtime_ns for p in cache.glob("*.json")}
    table = (tmp_path / "slai" / "points.csv").read_bytes()
    assert main(args) == 0  # the same study: every point read back, none recomputed
    assert {p.name: p.stat().st_mtime_ns for p in cache.glob("*.json")} == kept
    assert (tmp_path / "slai" / "points.csv").read_bytes() == table
    capsys.readouterr()
    assert main([*args, "--seeds", "3"]) == 2
    err = capsys.readouterr().err
    assert "differs in seeds (2 there, 3 here)" in err and "slai.run.json" in err
    assert (tmp_path / "slai" / "points.csv").read_bytes() == table


PLAN = ["plan", "--rate", "60", "--workload", "uniform:64-320,8-40", "--gpu", "a100", "--scheduler",
        "sarathi", "--max-gpus", "2", "--requests", "300"]


def test_plan_resumes_its_own_search_and_refuses_another(tmp_path, capsys):
    assert main([*PLAN, "--out", str(tmp_path)]) == 0
    first = capsys.readouterr().out
    plan = (tmp_path / "plan.csv").read_bytes()
    assert main([*PLAN, "--out", str(tmp_path)]) == 0
    again = capsys.readouterr().out
    assert "0 run," in again and "0 run," not in first and (tmp_path / "plan.csv").read_bytes() == plan
    assert main([*PLAN, "--seed", "4", "--out", str(tmp_path)]) == 2
    assert "differs in seed (0 there, 4 here)" in capsys.readouterr().err


def test_a_trace_edited_in_place_is_recomputed_and_a_moved_one_is_reused(gpu_file, tmp_path):
    """Input files key the cache by their content: the same CSV at another path reuses every
    run, the CSV edited in place (same path) recomputes every run."""
    import dataclasses
    import shutil

    csv = tmp_path / "lengths.csv"
    csv.write_text("prompt_len,output_len\n" + "".join(f"{8 * k % 61 + 1},{k % 37 + 1}\n"
                                                         for k in range(50)))
    spec = dataclasses.replace(tiny(gpu_file), workload=str(csv))
    first = run_sweep(spec, tmp_path / "cache")
    assert first.computed > 0 and first.cached == 0
    moved = tmp_path / "elsewhere.csv"
    shutil.copy(csv, moved)
    again = run_sweep(dataclasses.replace(spec, workload=str(moved)), tmp_path / "cache")
    assert again.computed == 0 and again.cached == first.computed
    csv.write_text(csv.read_text().replace("\n1,", "\n60,"))  # longer prompts, same path
    edited = run_sweep(spec, tmp_path / "cache")
    assert edited.cached == 0 and edited.computed > 0
    assert [b["boundary"] for b in edited.boundaries] != [b["boundary"] for b in first.boundaries]


def test_nested_input_files_key_the_task_by_content(tmp_path):
    from stability.runner import derive_seed, task_key

    gpus, trace = tmp_path / "g.toml", tmp_path / "t.csv"
    gpus.write_text(SOLO_TOML)
    trace.write_text("arrival_time,prompt_len,output_len\n0.1,10,5\n")
    task = {"kind": "plan", "scenario": {"gpu_file": str(gpus), "trace": str(trace),
                                         "workload": f"mix:0.5*{trace}+0.5*table1"}}
    key, seed = task_key(task), derive_seed(task, 0)
    for path in (gpus, trace):
        copy = tmp_path / f"copy_{path.name}"
        copy.write_bytes(path.read_bytes())
        moved = json.loads(json.dumps(task).replace(str(path), str(copy)))
        assert task_key(moved) == key and derive_seed(moved, 0) == seed  # where it lies: no matter
        original = path.read_bytes()
        path.write_bytes(original + b"\n# edited\n" if path.suffix == ".toml" else original + b"0.2,11,5\n")
        assert task_key(task) != key  # edited in place: a new task
        path.write_bytes(original)
    assert task_key(task) == key


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _popen(args, code: str | None = None, **kw):
    """``python -m llmq ARGS`` (or ``python -c CODE ARGS``) from the source tree, stderr piped,
    started as from a terminal: with SIGINT's default disposition. A test run started in the
    background of a non-interactive shell (``pytest &``) ignores SIGINT, every child inherits
    that, and Python then installs no KeyboardInterrupt handler: Ctrl-C could not be tested."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    head = ["-c", code] if code else ["-m", "llmq"]
    return subprocess.Popen([sys.executable, *head, *args], env=env, cwd=ROOT, preexec_fn=_default_sigint,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def _wait_for(cond, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline and not cond():
        time.sleep(0.05)
    return cond()


def _interrupt(start, cache: Path, finished: Path, attempts: int = 3) -> tuple[int, str]:
    """Start a run (``start()``), press Ctrl-C once its first result is cached, and return its exit
    status and stderr. A run can end between the first cached result and the signal; it must then
    have finished (``finished`` written) with status 0, and the run is tried again from scratch
    (its output directory removed): the interrupt itself is what these tests judge."""
    for _ in range(attempts):
        proc = start()
        assert _wait_for(lambda p=proc: len(list(cache.glob("*.json"))) >= 1 or p.poll() is not None)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            return proc.returncode, err.decode()
        assert finished.exists() and err == b"", err  # it ended before the signal: complete, quiet
        shutil.rmtree(finished.parent)
    pytest.fail(f"every one of {attempts} runs ended before its interrupt")


def test_ctrl_c_prints_one_line_and_exits_130(gpu_file, tmp_path):
    out = tmp_path / "out"
    # many runs (seven loads, each with its bisection and saturation replicates) of ~0.3 s each,
    # so that the sweep is still going for seconds after the first one is cached
    args = argv(gpu_file, out, workers=2, requests=300000)
    args[args.index("--loads") + 1] = "0.5,0.6,0.7,0.8,0.9,1.0,1.1"
    code, err = _interrupt(lambda: _popen(args), out / "cache", out / "region.csv")
    n = len(list((out / "cache").glob("*.json")))
    assert code == 130, err
    assert err == (f"llmq region: interrupted; {n} runs cached in {out / 'cache'}; rerun the same "
                   "command to resume\n")


# a Section 7 study small enough to finish, with runs long enough (tens of ms each, 40 of them)
# that it is still going when the first is cached (one panel)
SLAI_SMALL = ("import stability.slai.study as s, sys; from llmq.cli import main; "
              "s.QUICK = s.Study(s.QUICK.panels[:1], seeds=2, n_requests=4000, rel_rates=(0.8, 0.9), "
              "paper_rates=(1.0, 1.6), smoke=True); sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("command", ["slai", "plan"])
def test_ctrl_c_in_slai_and_plan_is_one_line_exit_130_and_the_rerun_keeps_the_cached_runs(tmp_path, command):
    out = tmp_path / "out"
    if command == "slai":
        args, cache = ["slai", "--quick", "--workers", "2", "--no-figures", "--no-progress",
                       "--out", str(out)], out / "slai" / "cache"
        start = lambda: _popen(args, code=SLAI_SMALL)  # noqa: E731
        finished = out / "slai" / "paper_vs_llmq.csv"
    else:
        args, cache = ["plan", "--rate", "60", "--workload", "uniform:64-320,8-40", "--gpu", "a100,l40s",
                       "--scheduler", "sarathi,vllm", "--max-gpus", "4", "--requests", "40000",
                       "--full-front", "--out", str(out)], out / "plan" / "cache"
        start = lambda: _popen(args)  # noqa: E731
        finished = out / "plan.csv"
    code, err = _interrupt(start, cache, finished)
    n = len(list(cache.glob("*.json")))
    assert code == 130, err
    assert err == (f"llmq {command}: interrupted; {n} runs cached in {cache}; rerun the same "
                   "command to resume\n")
    no_partial_files(out)
    kept = {p.name: p.stat().st_mtime_ns for p in cache.glob("*.json")}
    proc = start()  # the same command resumes, reading the cached runs back instead of redoing them
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert all((cache / name).stat().st_mtime_ns == t for name, t in kept.items())
    assert len(list(cache.glob("*.json"))) > n


@pytest.mark.parametrize("command", ["region", "slai"])
def test_kill_9_leaves_no_worker_behind(gpu_file, tmp_path, command):
    psutil = pytest.importorskip("psutil")
    args = argv(gpu_file, tmp_path, workers=2, requests=20000) if command == "region" else \
        ["slai", "--quick", "--workers", "2", "--no-figures", "--out", str(tmp_path)]
    proc = _popen(args)
    parent = psutil.Process(proc.pid)

    def descendants():
        return [c for c in parent.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]

    # the forkserver, its two workers (and multiprocessing's resource tracker)
    assert _wait_for(lambda: len(descendants()) >= 3), proc.stderr.read1().decode()
    time.sleep(1.0)  # the workers are busy with their first task
    workers = descendants()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, [(p.pid, p.cmdline()) for p in alive]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kill_after=st.floats(min_value=0.0, max_value=6.0))
def test_kill_9_at_any_time_then_resume_is_byte_identical(gpu_file, reference, tmp_path_factory, kill_after):
    out = tmp_path_factory.mktemp("killed")
    proc = _popen(argv(gpu_file, out))
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    no_partial_files(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cache entry may be corrupt after a kill
        assert main(argv(gpu_file, out)) == 0
    assert (out / "region.csv").read_bytes() == reference[0]
    no_partial_files(out)


def test_one_progress_bar_over_the_whole_job_with_its_phases_named(gpu_file, tmp_path, capsys):
    """The bar's total bounds the job from the start (it never reaches 100% and drops back), its
    description names each phase, and it ends at 100%."""
    import re

    from stability.region import max_runs

    spec = SweepSpec(tilesets=("solo2",), gpu_file=gpu_file, workload="uniform:1-64,1-40",
                     schedulers=("rad", "request_level"), variants=("pad",), loads=(0.6, 1.1), bisect=2,
                     n_requests=1000, replicates=2, sat_requests=2000, epsilon=0.1)
    res = run_sweep(spec, tmp_path / "cache", progress=True)
    err = capsys.readouterr().err
    frames = [f for f in re.split(r"[\r\n]+", err) if "%|" in f]
    percents = [int(re.search(r"(\d+)%\|", f).group(1)) for f in frames]
    totals = {int(re.search(r"/(\d+) runs", f).group(1)) for f in frames[:-1]}
    assert percents == sorted(percents) and percents[-1] == 100  # never drops back
    assert totals == {max_runs(spec)} and res.computed <= max_runs(spec)
    for phase in ("RAD's n", "DTMC predictions", "grid and saturation runs", "bisection 1/2", "done"):
        assert any(phase in f for f in frames), phase
