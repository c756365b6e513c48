"""Capacity-region sweeps: boundaries against closed forms and the DTMC, worker independence,
resumption after an interruption, Dask, and bad input."""

import csv
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmq.cli import main
from stability.region import SweepSpec, boundary_rows, run_sweep, write_outputs
from theory.cost import Batch, T_batch, build_cost_model
from theory.hardware import load_gpus
from theory.models import get_model

ROOT = Path(__file__).resolve().parents[1]


def tiny(gpu_file, **kw) -> SweepSpec:
    """A sweep on a one-tile toy GPU (t*_col = 2) that runs in a few seconds."""
    base = dict(tilesets=("solo2",), gpu_file=gpu_file, workload="uniform:1-64,1-40",
                schedulers=("rad", "request_level"), variants=("pad",), loads=(0.6, 0.9, 1.1),
                bisect=1, n_requests=4000, replicates=3, sat_requests=20000, epsilon=0.1,
                dtmc_samples=100)
    return SweepSpec(**{**base, **kw})


def test_request_level_b1_boundary_is_one_over_the_service_time(gpu_file, tmp_path):
    """With b = 1 and fixed lengths, request-level batching is a single server with a fixed service
    time: one prefill batch then L^D single decodes per request (Eq. 7), so its capacity is 1 / S,
    and completions under backlog are evenly spaced: the estimate is exact up to rounding."""
    spec = tiny(gpu_file, workload="deterministic:24,10", schedulers=("request_level",),
                options=(("request_level", (("b", 1),)),), loads=(0.5, 0.8))
    res = run_sweep(spec, tmp_path / "cache")
    cm = build_cost_model(load_gpus(gpu_file)["solo2"], get_model("mistral-7b"))
    S = T_batch(cm, Batch.of([(1, 24)], [])) + sum(T_batch(cm, Batch.of([], [i])) for i in range(25, 35))
    (b,) = boundary_rows(res)
    assert b["boundary"] == pytest.approx(1 / S, rel=1e-9)
    assert b["ci_low"] * (1 - 1e-9) <= 1 / S <= b["ci_high"] * (1 + 1e-9)
    # and it lies below lambda* = 1 / T_bar^R (Theorem 1): single decodes waste the tile
    assert b["ci_high"] < b["lambda_star"]


def test_rad_boundary_matches_its_cycle_dtmc_and_lambda_star(gpu_file, tmp_path):
    res = run_sweep(tiny(gpu_file, schedulers=("rad",)), tmp_path / "cache")
    (b,) = boundary_rows(res)
    assert res.rad_n["solo2"] >= 1
    assert not b["exceeds_lambda_star"]
    # the two estimates of RAD's capacity -- overloaded simulation and executed cycles -- agree
    assert b["ci_low"] <= b["dtmc_high"] and b["dtmc_low"] <= b["ci_high"], b
    assert b["theorem2"] == pytest.approx(0.9 * b["lambda_star"])


def read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_same_csv_with_one_and_two_workers_and_plot_only_redraws(gpu_file, tmp_path):
    spec = tiny(gpu_file)
    one = run_sweep(spec, tmp_path / "a" / "cache", workers=1)
    two = run_sweep(spec, tmp_path / "b" / "cache", workers=2)
    fa = write_outputs(one, tmp_path / "a")
    fb = write_outputs(two, tmp_path / "b")
    assert fa["csv"].read_bytes() == fb["csv"].read_bytes()
    assert len(read(fa["csv"])) == sum(len(p) for p in [one.points])
    (tmp_path / "a" / "region.png").unlink()
    assert main(["region", "--plot-only", str(fa["csv"]), "--out", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "region.png").stat().st_size > 10_000


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(gpu_file, tmp_path):
    spec = tiny(gpu_file)
    full = run_sweep(spec, tmp_path / "ref")
    total = full.computed

    finished = []

    def stop_after_five(task, result):
        finished.append(task)
        if len(finished) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "cache", on_result=stop_after_five)
    again = run_sweep(spec, tmp_path / "cache")
    assert again.cached == 5 and again.computed == total - 5
    a = write_outputs(again, tmp_path / "again")["csv"].read_bytes()
    assert a == write_outputs(full, tmp_path / "full")["csv"].read_bytes()


def test_killing_the_command_half_way_keeps_finished_runs(gpu_file, tmp_path):
    """A real kill (SIGKILL) of ``llmq region`` in a subprocess: the rerun reuses every run the
    killed process had finished, and redoes only the others."""
    out = tmp_path / "out"
    argv = ["region", "--gpu", "solo2", "--gpu-file", gpu_file, "--workload", "uniform:1-64,1-40",
            "--scheduler", "rad,request_level", "--both", "--loads", "0.5,0.6,0.7,0.8,0.9,1,1.1",
            "--requests-per-node", "30000", "--sat-requests", "60000", "--replicates", "3", "--epsilon",
            "0.1", "--workers", "1", "--no-progress", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "llmq", *argv], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cache = out / "cache"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and len(list(cache.glob("*.json"))) < 6:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    done_before = len(list(cache.glob("*.json")))
    assert done_before >= 6
    from llmq.cli import build_parser
    from llmq.commands.region import spec_from
    from llmq.options import resolve

    spec = spec_from(resolve(build_parser().parse_args(argv)), [])
    res = run_sweep(spec, cache)
    assert res.cached == done_before and res.computed > 0
    assert not list(cache.glob(".*.tmp"))  # no half-written result was left behind


def test_unreachable_dask_address_is_a_clear_error(capsys, tmp_path):
    t0 = time.time()
    code = main(["region", "--dask", "tcp://127.0.0.1:9", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the scheduler" in err and "tcp://127.0.0.1:9" in err
    assert time.time() - t0 < 30


def test_dask_without_the_dist_extra_names_the_extra(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    code = main(["region", "--dask", "tcp://127.0.0.1:9", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'llmq[dist]'" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["--loads", ""], "lambda grid"),
    (["--loads", "0.5,-1"], "lambda grid"),
    (["--gpus-r", "0"], "r (gpus): expected an integer >= 1"),
    (["--gpus-r", "1,x"], "--gpus-r"),
    (["--gpu", "a100:96x96"], "tiles"),
    (["--gpu", "b200"], "unknown GPU"),
    (["--scheduler", "fifo"], "unknown scheduler 'fifo'"),
    (["--option", "n=5"], "SCHEDULER.NAME=VALUE"),
    (["--requests-per-node", "10"], "requests"),
    (["--plot-only", "missing.csv"], "region.csv"),
])
def test_bad_input_exits_2_with_a_message(capsys, tmp_path, argv, message):
    code = main(["region", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_two_class_rays_lie_under_theorem1_line(gpu_file, tmp_path):
    """Each ray of class-1 share s has lambda* = r / (s T_bar_1 + (1 - s) T_bar_2): the point
    where it meets Theorem 1's line; every boundary lies on or inside it."""
    c1, c2 = "uniform:8-32,20-40", "uniform:48-64,1-4"
    spec = tiny(gpu_file, schedulers=("request_level",), two_class=(c1, c2, (0.0, 0.5, 1.0)))
    res = run_sweep(spec, tmp_path / "cache")
    files = write_outputs(res, tmp_path)
    assert files["two_class_png"].stat().st_size > 10_000
    rows = boundary_rows(res)
    assert [b["share_1"] for b in rows] == [0.0, 0.5, 1.0]
    for b in rows:
        s = b["share_1"]
        assert b["lambda_star"] == pytest.approx(1 / (s * b["T_bar_1"] + (1 - s) * b["T_bar_2"]))
        assert not b["exceeds_lambda_star"]
        lam1, lam2 = s * b["ci_low"], (1 - s) * b["ci_low"]
        assert lam1 * b["T_bar_1"] + lam2 * b["T_bar_2"] <= 1 + 1e-9
    assert all(math.isfinite(b["boundary"]) and b["ci_high"] > b["ci_low"] for b in rows)


def test_the_first_run_of_each_scheduler_is_handed_out_before_the_others():
    from stability.points import SimPoint
    from stability.region import FIRST, OPENING, _Sweep

    sweep = _Sweep(SweepSpec(schedulers=("rad", "sarathi", "request_level")))
    costs = [(task, sweep.cost(task)) for _, task in sweep.start()]
    opening = [t.scenario.scheduler if isinstance(t, SimPoint) else type(t).__name__
               for t, c in costs if c == OPENING]
    assert opening == ["NMinPoint", "sarathi", "request_level"]  # RAD's n is RAD's first run
    assert [c for t, c in costs if not isinstance(t, SimPoint)][1:] == [FIRST]  # the other tile set's n
    assert sum(c == OPENING for _, c in costs) == 3
    assert all(c < FIRST for _, c in costs if c not in (OPENING, FIRST))  # the others by their length
