"""The sweep runner under faults: corrupt, truncated or wrongly shaped cache entries, a full disk,
Ctrl-C, ``kill -9`` at random times (hypothesis over the kill time), and worker processes that
must not outlive a killed parent. Every case ends with the complete, byte-identical result of an
undisturbed run, or a clear error, and never a partial file."""

import errno
import json
import os
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


@pytest.fixture(scope="module")
def gpu_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpus") / "solo.toml"
    path.write_text(SOLO_TOML)
    return str(path)


def tiny(gpu_file) -> SweepSpec:
    return SweepSpec(tilesets=("solo2",), gpu_file=gpu_file, workload="uniform:1-64,1-40",
                     schedulers=("request_level",), variants=("pad",), loads=(0.6, 1.1), bisect=1,
                     n_requests=2000, replicates=2, sat_requests=4000, epsilon=0.1)


def argv(gpu_file, out, workers=1, requests=2000) -> list[str]:
    """The command line of the same tiny sweep (:func:`tiny` with ``requests``)."""
    return ["region", "--gpu", "solo2", "--gpu-file", gpu_file, "--workload", "uniform:1-64,1-40",
            "--scheduler", "request_level", "--loads", "0.6,1.1", "--bisect", "1", "--pad",
            "--requests", str(requests), "--replicates", "2", "--sat-requests", str(2 * requests),
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
    assert len(list((out / "cache").glob("*.json"))) == 3
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
    assert "differs in loads" in err and (out / "region.csv").read_bytes() == before


def _popen(args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "llmq", *args], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def _wait_for(cond, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline and not cond():
        time.sleep(0.05)
    return cond()


def test_ctrl_c_prints_one_line_and_exits_130(gpu_file, tmp_path):
    out = tmp_path / "out"
    # runs long enough (~0.5 s each) that the sweep is still going when the first one is cached
    proc = _popen(argv(gpu_file, out, workers=2, requests=400000))
    assert _wait_for(lambda: len(list((out / "cache").glob("*.json"))) >= 1 or proc.poll() is not None)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    err = err.decode()
    n = len(list((out / "cache").glob("*.json")))
    assert proc.returncode == 130, err
    assert err == (f"llmq region: interrupted; {n} runs cached in {out / 'cache'}; rerun the same "
                   "command to resume\n")


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
