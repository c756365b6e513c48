"""The shipped serving runs (:mod:`theory.validation.serving_runs`): every run loads; the metrics,
computed from the measured requests, reproduce the figures the source published for the measured
side; the files agree with each other; every bad input gets an error naming file, row and field."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from theory.errors import FieldError
from theory.validation.runs_convert import config_fields
from theory.validation.serving_metrics import STATISTICS, itl, latency, statistics, tpot, ttft
from theory.validation.serving_published import MEASURED, SIMULATOR
from theory.validation.serving_runs import load_run, shipped_runs

BENCH = ("llmservingsim_rtx4090_llama-3.1-8b", "llmservingsim_rtxpro6000_llama-3.1-8b",
         "llmservingsim_rtxpro6000_qwen3-32b", "llmservingsim_rtxpro6000_qwen3-30b-a3b")
ARTIFACT = "llmservingsim_h100_llama-3.1-70b"
# summary.txt prints milliseconds with one decimal: a computed value rounds to the printed one
PRINTED_MS = 0.05 + 1e-6


def test_the_shipped_runs_are_the_bench_and_the_artifact_point():
    assert set(shipped_runs()) == {*BENCH, ARTIFACT}


@pytest.mark.parametrize("name", [*BENCH, ARTIFACT])
def test_every_shipped_run_loads(name):
    run = load_run(name)
    assert run.name == name and run.trace.request_id.size == 300
    assert run.source["repository"] == "casys-kaist/LLMServingSim" and run.source["license"] == "MIT"
    assert (Path(run.path) / run.source["license_file"]).is_file()
    assert not run.trace.arrival.flags.writeable


@pytest.mark.parametrize("name", BENCH)
def test_measured_statistics_reproduce_the_published_vllm_column(name):
    """TTFT, TPOT and latency of the measured requests (mean, median, P90, P95, P99), computed here,
    equal the vLLM column of the source's summary.txt to its printed precision: 15 figures a run."""
    run = load_run(name)
    q = run.requests
    computed = {"ttft": statistics(ttft(q.arrival, q.first_token)),
                "tpot": statistics(tpot(q.first_token, q.last_token, q.output_tokens)),
                "latency": statistics(latency(q.arrival, q.last_token))}
    for metric, stats in computed.items():
        for stat in STATISTICS:
            published = run.figure(MEASURED, metric, stat)
            assert abs(stats[stat] - published) * 1e3 <= PRINTED_MS, (metric, stat, stats[stat], published)


@pytest.mark.parametrize("name", BENCH)
def test_the_published_simulator_column_is_loaded_beside_it(name):
    run = load_run(name)
    sim = {(f.metric, f.statistic) for f in run.published if f.framework == SIMULATOR}
    assert sim == {(m, s) for m in ("ttft", "tpot", "latency") for s in STATISTICS}


@pytest.mark.parametrize("name", BENCH)
def test_the_timeseries_counts_every_output_token_of_the_trace(name):
    """vLLM's per-iteration token counts, summed over the run's one-second ticks, give the trace's
    output and prompt tokens exactly: the timeseries, the requests and the trace are one run."""
    run = load_run(name)
    assert run.timeseries["gen_throughput"].sum() == run.trace.output_tokens.sum()
    assert run.timeseries["prompt_throughput"].sum() == run.trace.prompt_tokens.sum()
    assert run.requests.output_tokens.sum() == run.trace.output_tokens.sum()


@pytest.mark.parametrize("name", BENCH)
def test_requests_are_queued_as_the_trace_arrives(name):
    """The engine queued each request within half a second of its trace arrival (both from their
    first request): the replay followed the shipped trace."""
    run = load_run(name)
    q = run.requests
    lag = q.arrival - run.trace.arrival[q.request_id]
    assert np.all(np.abs(lag - lag[q.request_id == 0]) < 0.5)


def test_the_artifact_point_publishes_measured_means_and_a_throughput_series_of_its_trace():
    run = load_run(ARTIFACT)
    assert run.requests is None and run.engine_kwargs["tensor_parallel_size"] == 4
    assert run.figure(MEASURED, "ttft", "mean") > 0 and run.figure(MEASURED, "tpot", "mean") > 0
    for framework in ("Vidur", "APEX", SIMULATOR):
        assert run.figure(framework, "ttft", "mean") > 0
    # the measured generation throughput per second adds up to the trace's output tokens
    assert run.timeseries["gen_throughput"].sum() == pytest.approx(run.trace.output_tokens.sum(), rel=0.01)
    assert run.simulated_timeseries["gen_throughput"].sum() == pytest.approx(run.trace.output_tokens.sum(),
                                                                             rel=0.01)


def test_the_kv_cache_percentage_is_empty_where_the_bench_did_not_record_it():
    assert np.all(np.isnan(load_run("llmservingsim_rtxpro6000_llama-3.1-8b").timeseries["kv_cache_pct"]))
    recorded = load_run("llmservingsim_rtx4090_llama-3.1-8b")
    assert np.all(np.isfinite(recorded.timeseries["kv_cache_pct"]))
    assert recorded.kv_cache["num_gpu_blocks"] * recorded.kv_cache["block_size"] == \
        recorded.kv_cache["num_kv_tokens"]


def test_the_known_config_fields_are_those_of_the_recorded_resolved_config():
    run = load_run("llmservingsim_rtx4090_llama-3.1-8b")
    shipped = json.loads((Path(run.path).parent / "vllm_config_fields.json").read_text())
    rebuilt = config_fields(run.meta)
    assert shipped["resolved_config"] == rebuilt["resolved_config"] and rebuilt["vllm_version"] == "0.19.0"


def test_the_shipped_prefix_counts_name_an_earlier_request():
    trace = load_run("llmservingsim_rtx4090_llama-3.1-8b").trace
    shared = trace.shared_prefix_tokens > 0
    assert shared.any() and np.all(trace.prefix_parent[shared] < trace.request_id[shared])
    assert np.all(trace.prefix_parent[~shared] == -1)


# --- the metrics against hand-made requests ----------------------------------------------------


def test_metrics_against_hand_computed_requests():
    arrival = np.array([0.0, 1.0, 2.0])
    first = np.array([0.5, 1.25, 2.0])
    last = np.array([2.5, 1.25, 5.0])
    out = np.array([5, 1, 4])
    assert ttft(arrival, first).tolist() == [0.5, 0.25, 0.0]
    assert latency(arrival, last).tolist() == [2.5, 0.25, 3.0]
    got = tpot(first, last, out)
    assert got[0] == 0.5 and np.isnan(got[1]) and got[2] == 1.0  # one token: no TPOT, as vLLM
    # ITL: the gaps after the first token, every request's, in order
    times = [np.array([0.5, 0.75, 1.5]), np.array([2.0]), np.array([3.0, 3.5])]
    assert itl(times).tolist() == [0.25, 0.75, 0.5]


def test_statistics_leave_nan_out_and_interpolate_percentiles_linearly():
    stats = statistics(np.array([5.0, np.nan, 1.0, 2.0, 3.0, 4.0]))
    # sorted 1..5: the q-th percentile sits at rank q/100 * 4
    assert stats == {"mean": 3.0, "p50": 3.0, "p90": 4.6, "p95": 4.8, "p99": pytest.approx(4.96)}
    assert all(np.isnan(v) for v in statistics(np.array([np.nan])).values())


# --- bad input: an error naming the file, the row and the field --------------------------------


@pytest.fixture
def bench_copy(tmp_path):
    src = shipped_runs()["llmservingsim_rtx4090_llama-3.1-8b"]
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def _edit_csv(path: Path, row: int, column: str, value: str) -> None:
    """Set ``column`` of file row ``row`` (the header is row 1) to ``value``."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row - 1].split(",")
    cells[header.index(column)] = value
    lines[row - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def _refused(folder: Path, *parts: str) -> FieldError:
    with pytest.raises(FieldError) as exc:
        load_run(folder)
    for part in parts:
        assert part in str(exc.value), (part, str(exc.value))
    return exc.value


def test_an_unknown_run_is_refused():
    _refused(Path("no-such-run"), "run", "llmservingsim_rtx4090_llama-3.1-8b")


def test_arrivals_out_of_order_are_refused(bench_copy):
    _edit_csv(bench_copy / "trace.csv", 5, "arrival_ns", "1")
    _refused(bench_copy, "trace.csv: row 5, column 'arrival_ns'", "previous row")


def test_a_negative_arrival_is_refused(bench_copy):
    _edit_csv(bench_copy / "trace.csv", 2, "arrival_ns", "-5")
    _refused(bench_copy, "trace.csv: row 2, column 'arrival_ns'", ">= 0")


def test_measured_arrivals_out_of_order_are_refused(bench_copy):
    _edit_csv(bench_copy / "requests.csv", 7, "queued_s", "0.000000001")
    _refused(bench_copy, "requests.csv: row 7, column 'queued_s'", "previous row")


def test_a_negative_measured_time_is_refused(bench_copy):
    _edit_csv(bench_copy / "requests.csv", 3, "first_token_s", "-0.5")
    _refused(bench_copy, "requests.csv: row 3, column 'first_token_s'", ">= 0")


def test_a_first_token_before_scheduling_is_refused(bench_copy):
    _edit_csv(bench_copy / "requests.csv", 3, "first_token_s", "0.0")
    _refused(bench_copy, "requests.csv: row 3, column 'first_token_s'", "scheduled_s")


@pytest.mark.parametrize(("column", "value"), [("prompt_tokens", "0"), ("output_tokens", "-3"),
                                               ("output_tokens", "2.5")])
def test_zero_negative_or_fractional_lengths_are_refused(bench_copy, column, value):
    _edit_csv(bench_copy / "trace.csv", 4, column, value)
    _refused(bench_copy, f"trace.csv: row 4, column '{column}'", "an integer >= 1")


def test_a_request_past_the_context_window_is_refused(bench_copy):
    _edit_csv(bench_copy / "trace.csv", 9, "output_tokens", "40000")
    _refused(bench_copy, "trace.csv: row 9, column 'output_tokens'", "<= 32768",
             "resolved_config.model_config.max_model_len")


def test_measured_lengths_must_be_the_trace_rows(bench_copy):
    _edit_csv(bench_copy / "requests.csv", 2, "output_tokens", "7")
    _refused(bench_copy, "requests.csv: row 2, column 'output_tokens'", "trace.csv, request 0")


def test_a_missing_column_is_refused(bench_copy):
    path = bench_copy / "trace.csv"
    lines = [",".join(line.split(",")[:-1]) for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")
    _refused(bench_copy, "trace.csv: header (row 1), column 'prefix_parent'", "missing")


def test_a_duplicated_column_is_refused(bench_copy):
    path = bench_copy / "requests.csv"
    lines = [line + "," + line.split(",")[3] for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")
    _refused(bench_copy, "requests.csv: header (row 1), column 'queued_s'", "each column once")


def test_an_unknown_column_is_refused(bench_copy):
    path = bench_copy / "timeseries.csv"
    lines = path.read_text().splitlines()
    lines = [lines[0] + ",kv_pct"] + [line + ",1" for line in lines[1:]]
    path.write_text("\n".join(lines) + "\n")
    _refused(bench_copy, "timeseries.csv: header (row 1), column 'kv_pct'")


def _edit_meta(folder: Path, edit) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    edit(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def test_an_engine_argument_vllm_does_not_have_is_refused(bench_copy):
    _edit_meta(bench_copy, lambda m: m["engine_kwargs"].update(max_num_seqz=64))
    _refused(bench_copy, "meta.json: field 'engine_kwargs.max_num_seqz'", "vLLM 0.19.0")


def test_a_resolved_field_vllm_does_not_have_is_refused(bench_copy):
    _edit_meta(bench_copy, lambda m: m["resolved_config"]["scheduler_config"].update(chunk_size=512))
    _refused(bench_copy, "meta.json: field 'resolved_config.scheduler_config.chunk_size'", "max_num_seqs")


def test_a_resolved_sub_config_vllm_does_not_have_is_refused(bench_copy):
    _edit_meta(bench_copy, lambda m: m["resolved_config"].update(sarathi_config={}))
    _refused(bench_copy, "meta.json: field 'resolved_config.sarathi_config'")


def test_the_known_engine_arguments_pass(bench_copy):
    _edit_meta(bench_copy, lambda m: m["engine_kwargs"].update(gpu_memory_utilization=0.8, block_size=16))
    assert load_run(bench_copy).engine_kwargs["gpu_memory_utilization"] == 0.8


def test_an_unknown_manifest_field_and_two_engine_configurations_are_refused(bench_copy):
    manifest = json.loads((bench_copy / "run.json").read_text())
    (bench_copy / "run.json").write_text(json.dumps(manifest | {"engine_kwargs": {"max_num_seqs": 8}}))
    _refused(bench_copy, "run.json: field 'engine_kwargs'", "meta.json")
    (bench_copy / "run.json").write_text(json.dumps(manifest | {"tp": 1}))
    _refused(bench_copy, "run.json: field 'tp'")


def test_an_unknown_gpu_preset_is_refused(bench_copy):
    manifest = json.loads((bench_copy / "run.json").read_text())
    (bench_copy / "run.json").write_text(json.dumps(manifest | {"gpu": "rtx9090"}))
    _refused(bench_copy, "run.json: field 'gpu'", "rtx9090")


def test_a_summary_missing_a_row_is_refused(bench_copy):
    path = bench_copy / "summary.txt"
    kept = [line for line in path.read_text().splitlines() if not line.startswith("TPOT P95")]
    path.write_text("\n".join(kept))
    _refused(bench_copy, "summary.txt", "TPOT P95")
