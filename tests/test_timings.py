"""Timings CSV files: the two kinds, the packaged example, and bad input named by field."""

import numpy as np
import pytest

from theory.errors import ConfigFileError, FieldError, LlmqError
from theory.validation.timings import EXAMPLES, BatchTimings, GemmTimings, read_timings, timings_path


def write(tmp_path, text, name="t.csv"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_gemm_timings_with_default_count_and_extra_columns(tmp_path):
    t = read_timings(write(tmp_path, "op,d_row,d_col,d_red,seconds\nqkv,12288,8,4096,6.3e-05\n"
                                     "o,4096,16,4096,2.6e-05\n"))
    assert isinstance(t, GemmTimings) and len(t) == 2
    assert t.d_row.tolist() == [12288, 4096] and t.count.tolist() == [1, 1]
    assert t.seconds.tolist() == [6.3e-05, 2.6e-05]


def test_batch_timings_positions_sums_and_tokens(tmp_path):
    t = read_timings(write(tmp_path, "prefill_tokens,prefill_start,decode_count,decode_positions,seconds\n"
                                     "256,1,2,100 300,0.02\n0,1,1,7,0.01\n"))
    assert isinstance(t, BatchTimings)
    assert t.decode_context_sum.tolist() == [400, 7] and t.tau.tolist() == [258, 1]
    assert [p.tolist() for p in t.decode_positions] == [[100, 300], [7]]
    # 'tokens' is the batch token count tau, so the chunk is tau - decode_count; start defaults to 1
    t = read_timings(write(tmp_path, "tokens,decode_count,decode_context_sum,seconds\n130,2,50,0.03\n"))
    assert t.prefill_tokens.tolist() == [128] and t.prefill_start.tolist() == [1]
    assert t.decode_positions is None and t.decode_context_sum.tolist() == [50]
    t = read_timings(write(tmp_path, "prefill_tokens,seconds\n512,0.04\n"))
    assert t.decode_count.tolist() == [0] and t.tau.tolist() == [512]


def test_the_packaged_example_is_readable_by_name():
    assert timings_path("vidur-a100-llama2-7b").is_file()
    t = read_timings(next(iter(EXAMPLES)))
    assert isinstance(t, GemmTimings) and len(t) == 4 * 261
    assert set(zip(t.d_row.tolist(), t.d_red.tolist(), strict=True)) == {
        (12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)}
    assert np.all(t.seconds > 0) and t.d_col.min() == 1 and t.d_col.max() == 4096


@pytest.mark.parametrize("text, field", [
    ("d_row,d_col,d_red,seconds\n64,64,64,fast\n", "column 'seconds', row 2"),
    ("d_row,d_col,d_red,seconds\n64,64,64,1e-3\n64,64,64,0\n", "column 'seconds', row 3"),
    ("d_row,d_col,d_red,seconds\n64,64,64,-1e-3\n", "column 'seconds', row 2"),
    ("d_row,d_col,d_red,seconds\n64,64,64,nan\n", "column 'seconds', row 2"),
    ("d_row,d_col,d_red,seconds\n64.5,64,64,1e-3\n", "column 'd_row', row 2"),
    ("d_row,d_col,d_red,seconds,count\n64,64,64,1e-3,0\n", "column 'count', row 2"),
    ("prefill_tokens,decode_count,decode_positions,seconds\n0,2,5 x,0.01\n", "column 'decode_positions'"),
    ("prefill_tokens,decode_count,decode_positions,seconds\n0,2,5,0.01\n", "column 'decode_positions'"),
    ("prefill_tokens,decode_count,decode_context_sum,seconds\n0,4,3,0.01\n", "column 'decode_context_sum'"),
    ("tokens,decode_count,decode_context_sum,seconds\n2,4,30,0.01\n", "column 'tokens'"),
    ("prefill_tokens,seconds\n0,0.01\n", "row 2"),
])
def test_bad_cells_name_the_field(tmp_path, text, field):
    f = write(tmp_path, text)
    with pytest.raises(FieldError) as exc:
        read_timings(f)
    assert field in exc.value.field and str(f) in exc.value.field


@pytest.mark.parametrize("text, message", [
    ("", "empty file; expected a header with GeMM columns d_row,d_col,d_red,seconds"),
    ("d_row,d_col,d_red,seconds\n", "no data rows"),
    ("d_row,d_col,seconds\n64,64,1e-3\n", "GeMM timings need the column(s) d_red"),
    ("prefill_tokens,decode_count\n64,0\n", "batch timings need the column(s) seconds"),
    ("size,seconds\n64,1e-3\n", "expected GeMM columns d_row,d_col,d_red,seconds or batch columns"),
    ("prefill_tokens,decode_count,seconds\n64,2,1e-3\n", "need the column decode_positions or "
                                                         "decode_context_sum"),
    ("prefill_tokens,tokens,seconds\n64,64,1e-3\n", "either 'prefill_tokens'"),
])
def test_bad_files_say_what_is_expected(tmp_path, text, message):
    with pytest.raises(ConfigFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_timings(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(LlmqError, match="file not found"):
        read_timings(tmp_path / "nope.csv")
