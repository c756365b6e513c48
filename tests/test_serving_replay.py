"""Serving runs replayed (stability.serving): the engine arguments as scheduler options, the replay
against the naive reference simulator, the scores against numpy, and the report files."""

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from stability.serving.replay import ReplaySpec, engine_options, replay, unsupported
from stability.serving.report import CSV_COLUMNS, console_lines, to_json, write_outputs
from stability.serving.score import RunScore, score_run, statistic
from tests import reference_sim as ref
from theory.errors import FieldError
from theory.validation.serving_runs import load_run, shipped_runs

RTX4090 = "llmservingsim_rtx4090_llama-3.1-8b"


def small_run(tmp_path: Path, name: str = RTX4090, keep: int = 60) -> Path:
    """A copy of a shipped run holding only its first ``keep`` requests (trace and measurements), without
    the figures published for the whole run."""
    src, dst = shipped_runs()[name], tmp_path / f"{name}-{keep}"
    shutil.copytree(src, dst)
    (dst / "summary.txt").unlink()  # its published figures describe the whole run
    for file in ("trace.csv", "requests.csv"):
        with open(dst / file, newline="") as fh:
            rows = list(csv.DictReader(fh))
        with open(dst / file, "w", newline="") as fh:
            w = csv.DictWriter(fh, list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(r for r in rows if int(r["request_id"]) < keep)
    return dst


def test_engine_arguments_become_the_scheduler_options():
    meta = json.loads((shipped_runs()[RTX4090] / "meta.json").read_text())
    kw, kv = meta["engine_kwargs"], meta["kv_cache"]
    common = {"max_num_seqs": kw["max_num_seqs"], "gpu_memory_utilization": kv["gpu_memory_utilization"],
              "block_size": kv["block_size"], "max_model_len": kw["max_model_len"]}
    assert dict(engine_options(load_run(RTX4090))) == {
        "max_num_batched_tokens": kw["max_num_batched_tokens"], **common}
    assert dict(engine_options(load_run(RTX4090), "sarathi")) == {
        "chunk_size": kw["max_num_batched_tokens"], **common}


def test_vllm_defaults_stand_in_for_arguments_a_run_leaves_out():
    run = load_run("llmservingsim_rtxpro6000_llama-3.1-8b")  # records no kv_cache, max_model_len None
    opts = dict(engine_options(run))
    assert opts["gpu_memory_utilization"] == 0.9 and opts["block_size"] == 16
    assert opts["max_model_len"] > 0


def test_unreplayable_runs_say_why():
    why = {name: unsupported(load_run(name)) for name in shipped_runs()}
    assert why[RTX4090] is None
    assert why["llmservingsim_h100_llama-3.1-70b"] is None  # TP 4, means only (tests/test_serving_h100.py)
    assert why["llmservingsim_rtxpro6000_qwen3-30b-a3b"] is None  # DP 2 + EP (tests/test_expert_parallel.py)
    assert "all-reduce" in why["llmservingsim_rtxpro6000_qwen3-32b"]
    with pytest.raises(FieldError, match="replayable run"):
        replay(ReplaySpec("llmservingsim_rtxpro6000_qwen3-32b"))
    assert score_run(ReplaySpec("llmservingsim_rtxpro6000_qwen3-32b")).skipped == why[
        "llmservingsim_rtxpro6000_qwen3-32b"]


def test_an_unknown_scheduler_is_refused():
    with pytest.raises(FieldError, match="scheduler"):
        engine_options(load_run(RTX4090), "rad")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = small_run(tmp_path_factory.mktemp("runs"))
    return folder, replay(ReplaySpec(str(folder)))


def test_the_replay_is_the_naive_reference_on_the_measured_requests(small):
    folder, rep = small
    run = load_run(folder)
    prm, rq = rep.result.params, rep.result.requests
    # the replay's input is the measured queue times and lengths, nothing of the measured output
    assert np.allclose(rq["arrival"], run.requests.arrival - run.requests.arrival[0])
    assert np.array_equal(rq["L_D"], run.requests.output_tokens - 1)
    # prefix caching on (vLLM v1's default, the runs' setting), the trace's relation in queue order
    assert prm.enable_prefix_caching
    rows = run.requests.request_id.tolist()
    parent, shared = [], []
    for k, t in enumerate(rows):
        p = int(run.trace.prefix_parent[t])
        kept = p >= 0 and rows.index(p) < k
        parent.append(rows.index(p) if kept else -1)
        shared.append(int(run.trace.shared_prefix_tokens[t]) if kept else 0)
    assert any(s >= prm.kv.block_size for s in shared)  # some request shares a full block
    mem = ref.PrefixPool(prm.kv.blocks, prm.kv.block_size, parent, shared)
    sim = ref.vllm_v1(rep.result.cost_model, rq["arrival"], rq["L_P"].astype(int), rq["L_D"].astype(int),
                      prm.max_num_batched_tokens, prm.max_num_seqs, prm.long_prefill_token_threshold,
                      prm.max_model_len, mem)
    first = np.array([r.first for r in sim.reqs])
    finish = np.array([r.finish for r in sim.reqs])
    assert np.allclose(rep.predicted["ttft"], first - rq["arrival"], rtol=0, atol=1e-9)
    assert np.allclose(rep.predicted["latency"], finish - rq["arrival"], rtol=0, atol=1e-9)
    assert np.allclose(rep.predicted["tpot"], (finish - first) / rq["L_D"], rtol=0, atol=1e-12)


def test_the_measured_metrics_are_the_runs_own(small):
    folder, rep = small
    rq = load_run(folder).requests
    assert np.array_equal(rep.measured["ttft"], rq.first_token - rq.arrival)
    assert np.allclose(rep.measured["tpot"], (rq.last_token - rq.first_token) / (rq.output_tokens - 1))


def test_statistics_are_numpys():
    v = np.array([3.0, 1.0, np.nan, 2.0, 10.0])
    assert statistic(v, "mean") == 4.0
    assert statistic(v, "p50") == 2.5
    assert statistic(v, "p90") == pytest.approx(np.percentile([1, 2, 3, 10], 90))


def test_scores_and_report_files(small, tmp_path):
    folder, _ = small
    s = score_run(ReplaySpec(str(folder)))
    assert len(s.rows) == 12 and s.kv_blocks > 0 and s.wall_s > 0
    for r in s.rows:
        assert r.error == pytest.approx(r.predicted / r.measured - 1)
        assert r.published is None  # the published figures are of the whole run, not of this copy
    skipped = RunScore("x", "rtx4090", None, skipped="no preset")
    text = "\n".join(console_lines([s, skipped], "sarathi"))
    assert "not replayed (no preset)" in text and "ttft" in text
    doc = json.loads(json.dumps(to_json([s, skipped], "sarathi"), allow_nan=False))
    assert doc["runs"][1]["skipped"] == "no preset"
    paths = write_outputs([s, skipped], "sarathi", tmp_path)
    with open(tmp_path / "serving.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 12
    assert set(json.loads((tmp_path / "serving.columns.json").read_text())["columns"]) == set(CSV_COLUMNS)
    assert any(p.suffix == ".png" for p in paths)


def run_cli(argv, capsys):
    from llmq.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr()


def test_validate_serving_writes_strict_json(tmp_path, capsys):
    code, out = run_cli(["validate", "--serving", "--runs", "llmservingsim_rtxpro6000_llama-3.1-8b", "--json",
                         "--out", str(tmp_path / "o")], capsys)
    assert code == 0
    doc = json.loads(out.out)
    assert doc["scheduler"] == "vllm_v1" and [r["run"] for r in doc["runs"]] == [
        "llmservingsim_rtxpro6000_llama-3.1-8b"]
    assert (tmp_path / "o" / "serving.csv").is_file()


@pytest.mark.parametrize("argv, field", [
    (["validate", "--serving", "--runs", "bogus"], "--runs"),
    (["validate", "--runs", RTX4090], "--runs"),
    (["validate", "--scheduler", "sarathi"], "--scheduler"),
    (["validate", "--serving", "--quick"], "--quick"),
    (["validate", "--serving", "--scheduler", "rad"], "--scheduler"),
])
def test_validate_serving_refuses_bad_options(argv, field, capsys, tmp_path):
    code, out = run_cli([*argv, "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and field in out.err and "Traceback" not in out.err
