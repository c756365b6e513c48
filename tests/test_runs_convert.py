"""The converters of the shipped serving runs (:mod:`theory.validation.runs_convert`) on hand-made
source lines in the source's formats: what is kept, how the clocks are re-based, what is dropped."""

import json

import pytest

from theory.errors import FieldError
from theory.validation.runs_convert import (
    KV_PCT_FIXED_FROM,
    convert_requests,
    convert_timeseries,
    convert_trace,
    shared_prefixes,
)


def test_shared_prefixes_against_hand_made_prompts():
    prompts = [[1, 2, 3], [1, 2, 9], [7], [1, 2, 3, 4], [7, 7]]
    assert shared_prefixes(prompts) == ([0, 2, 0, 3, 1], [-1, 0, -1, 0, 2])


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_trace_keeps_lengths_and_arrivals_and_drops_the_token_ids(tmp_path):
    src = _jsonl(tmp_path / "w.jsonl", [
        {"input_toks": 3, "output_toks": 5, "arrival_time_ns": 10, "input_tok_ids": [4, 5, 6],
         "output_tok_ids": [1] * 5},
        {"input_toks": 2, "output_toks": 1, "arrival_time_ns": 70, "input_tok_ids": [4, 5],
         "output_tok_ids": [2]},
    ])
    rows = convert_trace(src)
    assert rows == [
        {"request_id": 0, "arrival_ns": 10, "prompt_tokens": 3, "output_tokens": 5, "shared_prefix_tokens": 0,
         "prefix_parent": ""},
        {"request_id": 1, "arrival_ns": 70, "prompt_tokens": 2, "output_tokens": 1, "shared_prefix_tokens": 2,
         "prefix_parent": 0},
    ]


def test_trace_ids_must_have_the_stated_length(tmp_path):
    src = _jsonl(tmp_path / "w.jsonl", [{"input_toks": 3, "output_toks": 5, "arrival_time_ns": 0,
                                         "input_tok_ids": [4, 5]}])
    with pytest.raises(FieldError, match=r"w.jsonl: line 1, field 'input_tok_ids'"):
        convert_trace(src)


def test_requests_are_rebased_per_clock_and_sorted_by_queueing(tmp_path):
    src = _jsonl(tmp_path / "requests.jsonl", [
        {"request_id": "bench-0", "input_toks": 9, "output_toks": 4, "arrival_time": 1777000000.25,
         "queued_ts": 5000.5, "scheduled_ts": 5000.5, "first_token_ts": 5000.75, "last_token_ts": 5001.0},
        {"request_id": "bench-1", "input_toks": 7, "output_toks": 2, "arrival_time": 1777000000.0,
         "queued_ts": 5000.25, "scheduled_ts": 5000.5, "first_token_ts": 5001.0, "last_token_ts": 5002.0},
    ])
    first, second = convert_requests(src)
    # the engine clock from the earliest queueing, the wall clock from the earliest arrival
    assert (first["request_id"], first["queued_s"], first["first_token_s"], first["arrival_wall_s"]) == \
        (1, "0.000000000", "0.750000000", "0.000000000")
    assert (second["request_id"], second["queued_s"], second["last_token_s"], second["arrival_wall_s"]) == \
        (0, "0.250000000", "0.750000000", "0.250000000")


def test_a_request_without_its_timestamps_is_refused(tmp_path):
    src = _jsonl(tmp_path / "requests.jsonl", [{"request_id": "bench-0", "input_toks": 9, "output_toks": 4,
                                                "arrival_time": None, "queued_ts": 1.0, "scheduled_ts": 1.0,
                                                "first_token_ts": 1.0, "last_token_ts": 1.0}])
    with pytest.raises(FieldError, match=r"line 1, field 'arrival_time'"):
        convert_requests(src)


HEADER = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\r\n"


def test_timeseries_kv_cells_are_emptied_only_before_the_fix(tmp_path):
    src = tmp_path / "timeseries.csv"
    src.write_text(HEADER + "1.0,90.0,2.0,5,2,0.0\r\n2.0,0.0,8.0,5,0,0.0\r\n", newline="")
    before = convert_timeseries(src, "2026-04-25T18:47:18Z")
    assert before == "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n" \
                     "1.0,90.0,2.0,5,2,\n2.0,0.0,8.0,5,0,\n"
    after = convert_timeseries(src, KV_PCT_FIXED_FROM + "T00:00:00Z")
    assert after.endswith("2.0,0.0,8.0,5,0,0.0\n") and "\r" not in after


def test_a_recorded_kv_cell_before_the_fix_is_refused(tmp_path):
    src = tmp_path / "timeseries.csv"
    src.write_text(HEADER + "1.0,90.0,2.0,5,2,13.2\r\n", newline="")
    with pytest.raises(FieldError, match="kv_cache_pct"):
        convert_timeseries(src, "2026-04-25T18:47:18Z")
