"""LLMServingSim's RTX 4090 profiles: the converters against hand-read source rows (excerpts in
tests/data, README there), their input checks, the attention rows' loader checks and the packaged
file (theory/data/profiles/README.md gives the source and the transformation)."""

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from theory.errors import FieldError
from theory.models import get_model
from theory.profiles import ABSENT, LLMSERVINGSIM_GEMMS, gemm_shape, load_profile, shipped_profiles
from theory.validation.profiles_llmservingsim import (
    check_llmservingsim_meta,
    convert_llmservingsim_attention,
    convert_llmservingsim_dense,
    convert_llmservingsim_per_sequence,
)
from theory.validation.profiles_rows import write_profile

DATA = Path(__file__).parent / "data"
SETUP = "RTX4090/bf16/vllm-0.19.0"
ARGS = ("rtx4090", "llama-3.1-8b", 1, SETUP)


def _pick(rows, **equal):
    found = [r for r in rows if all(str(r[k]) == str(v) for k, v in equal.items())]
    assert len(found) == 1, (equal, found)
    return found[0]


def _us(row) -> float:
    return float(row["seconds"]) * 1e6


def test_dense_rows():
    rows = convert_llmservingsim_dense(DATA / "llmservingsim_dense_excerpt.csv", *ARGS)
    # line 1066: qkv_proj,1,54.898 and line 1217: qkv_proj,2048,631.069 (microseconds)
    assert _us(_pick(rows, operation="qkv_proj", tokens=1)) == pytest.approx(54.898, rel=1e-12)
    assert _us(_pick(rows, operation="qkv_proj", tokens=2048)) == pytest.approx(631.069, rel=1e-12)
    assert _us(_pick(rows, operation="down_proj", tokens=64)) == pytest.approx(144.363, rel=1e-12)  # 181
    assert _us(_pick(rows, operation="act_fn", tokens=1)) == pytest.approx(2.592, rel=1e-12)  # line 2
    assert len(rows) == 4
    assert all((r["gpu"], r["model"], r["tp"], r["setup"], r["src_rows"]) == (*ARGS, 1) for r in rows)
    assert all(r["decodes"] == r["context"] == r["prefill_context"] == "" for r in rows)


def test_per_sequence_rows_count_sequences_as_tokens():
    rows = convert_llmservingsim_per_sequence(DATA / "llmservingsim_per_sequence_excerpt.csv", *ARGS)
    assert _us(_pick(rows, operation="lm_head", tokens=1)) == pytest.approx(1096.93, rel=1e-12)  # line 2
    assert _us(_pick(rows, operation="lm_head", tokens=256)) == pytest.approx(1671.15, rel=1e-12)  # 41
    assert _us(_pick(rows, operation="sampler", tokens=1)) == pytest.approx(25.001, rel=1e-12)  # 42
    assert len(rows) == 3


def test_attention_rows():
    rows = convert_llmservingsim_attention(DATA / "llmservingsim_attention_excerpt.csv", *ARGS)
    assert {r["operation"] for r in rows} == {"attention"} and len(rows) == 5
    # line 2: 0,0,1,16 -> one decode with 16 cached tokens, no prefill chunk
    dec = _pick(rows, tokens=1, decodes=1)
    assert (dec["context"], dec["prefill_context"]) == (16, "") and _us(dec) == pytest.approx(9.31067)
    # line 100: 0,0,256,16384 -> 256 decodes of 16,384 cached tokens
    big = _pick(rows, tokens=256, decodes=256)
    assert big["context"] == 16384 and _us(big) == pytest.approx(18003.5)
    # line 101: 16,0,0,0 -> a 16-token chunk, nothing cached, no decodes
    pre = _pick(rows, tokens=16, decodes=0)
    assert (pre["context"], pre["prefill_context"]) == ("", 0) and _us(pre) == pytest.approx(9.546)
    # line 6179: 512,2048,4,128 -> a 512-token chunk after 2,048 cached tokens and 4 decodes at 128
    mixed = _pick(rows, tokens=512 + 4, decodes=4)
    assert (mixed["context"], mixed["prefill_context"]) == (128, 2048) and _us(mixed) == pytest.approx(204.49)
    # line 8556: 2048,16384,0,0
    assert _pick(rows, tokens=2048, decodes=0)["prefill_context"] == 16384


def test_converted_attention_rows_load_back(tmp_path):
    rows = convert_llmservingsim_attention(DATA / "llmservingsim_attention_excerpt.csv", *ARGS)
    write_profile(rows, tmp_path / "att.csv.gz")
    prof = load_profile(tmp_path / "att.csv.gz")
    got = prof.rows[np.argsort(prof.rows["tokens"] * 1000 + prof.rows["decodes"])]
    assert got["tokens"].tolist() == [1, 16, 256, 516, 2048]
    assert got["prefill_context"].tolist() == [ABSENT, 0, ABSENT, 2048, 16384]
    assert got["context"].tolist() == [16, ABSENT, 16384, 128, ABSENT]


def test_meta_is_checked_against_the_preset():
    pytest.importorskip("yaml")
    meta = check_llmservingsim_meta(DATA / "llmservingsim_meta.yaml", "RTX4090", "llama-3.1-8b")
    assert meta["vllm_version"] == "0.19.0"
    # Llama-2-7B has 32 KV heads where the bundle's model has 8
    with pytest.raises(FieldError, match=r"llmservingsim_meta.yaml: num_key_value_heads.*got 8"):
        check_llmservingsim_meta(DATA / "llmservingsim_meta.yaml", "RTX4090", "llama-2-7b")
    with pytest.raises(FieldError, match=r"hardware.*got 'RTX4090'"):
        check_llmservingsim_meta(DATA / "llmservingsim_meta.yaml", "RTXPRO6000", "llama-3.1-8b")


# --- bad source files: errors name the file, the row and the column ------------------------------

def _src(tmp_path, text):
    f = tmp_path / "dense.csv"
    f.write_text(text, encoding="utf-8")
    return f


@pytest.mark.parametrize("header, column", [
    ("layer,time_us", "tokens"),
    ("layer,tokens,time", "time_us"),      # a time column whose unit is not stated
    ("layer,tokens,time_ms", "time_us"),   # another unit than the source's
])
def test_dense_header_errors(tmp_path, header, column):
    body = "qkv_proj,1,54.898" if header.count(",") == 2 else "qkv_proj,54.898"
    with pytest.raises(FieldError, match=rf"dense.csv: header \(row 1\), column '{column}'.*missing"):
        convert_llmservingsim_dense(_src(tmp_path, f"{header}\n{body}\n"), *ARGS)


@pytest.mark.parametrize("line, column, expected", [
    ("qkv_proj,2,-3.5", "time_us", "finite time > 0"),
    ("qkv_proj,2,0", "time_us", "finite time > 0"),
    ("qkv_proj,2,nan", "time_us", "finite time > 0"),
    ("qkv_proj,2,", "time_us", "finite time > 0"),
    ("qkv_proj,0,3.5", "tokens", "integer >= 1"),
    ("qkv_proj,2.5,3.5", "tokens", "integer >= 1"),
    ("qkv,2,3.5", "layer", "one of qkv_proj"),
])
def test_dense_cell_errors(tmp_path, line, column, expected):
    f = _src(tmp_path, f"layer,tokens,time_us\nqkv_proj,1,54.898\n{line}\n")
    with pytest.raises(FieldError, match=rf"dense.csv: row 3, column '{column}'.*{expected}"):
        convert_llmservingsim_dense(f, *ARGS)


@pytest.mark.parametrize("line, expected", [("0,0,-1,16,9.3", "integer >= 0"),
                                            ("0,0,0,0,9.3", "empty batch")])
def test_attention_cell_errors(tmp_path, line, expected):
    f = tmp_path / "attention.csv"
    f.write_text(f"prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n{line}\n", encoding="utf-8")
    with pytest.raises(FieldError, match=rf"attention.csv: row 2, column 'n_decode'.*{expected}"):
        convert_llmservingsim_attention(f, *ARGS)


# --- the loader's checks of attention rows --------------------------------------------------------

HEADER = "source,gpu,setup,model,tp,operation,tokens,decodes,context,prefill_context,src_rows,time_us"


@pytest.mark.parametrize("cells, column", [
    ("516,4,128,,1,204.49", "prefill_context"),  # a 512-token chunk without its cached length
    ("516,4,,2048,1,204.49", "context"),         # 4 decodes without their cached length
    ("4,5,128,2048,1,204.49", "decodes"),        # more decodes than tokens
])
def test_attention_rows_need_their_columns(tmp_path, cells, column):
    f = tmp_path / "bad.csv"
    f.write_text(f"{HEADER}\nllmservingsim,rtx4090,,llama-3.1-8b,1,attention,{cells}\n", encoding="utf-8")
    with pytest.raises(FieldError, match=rf"bad.csv: row 2, column '{column}'"):
        load_profile(f)


# --- the packaged file ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def packaged():
    return load_profile("llmservingsim_rtx4090")


def test_packaged_file_holds_the_three_source_files(packaged):
    assert "llmservingsim_rtx4090" in shipped_profiles()
    rows = packaged.rows
    assert len(packaged) == 1368 + 80 + 8643  # dense.csv, per_sequence.csv, attention.csv data rows
    assert set(rows["gpu"]) == {"rtx4090"} and set(rows["model"]) == {"llama-3.1-8b"}
    assert set(rows["tp"]) == {1}
    att = rows[rows["operation"] == "attention"]
    chunk = att["tokens"] - att["decodes"]
    assert ((chunk > 0) & (att["decodes"] == 0)).sum() == 96  # prefill only
    assert ((chunk == 0) & (att["decodes"] > 0)).sum() == 99  # decode only
    assert ((chunk > 0) & (att["decodes"] > 0)).sum() == 8448  # mixed


def test_packaged_rows_are_the_excerpt_rows(packaged):
    # the excerpts are verbatim source lines: each must be in the packaged file, time exact to 1e-12
    with open(DATA / "llmservingsim_dense_excerpt.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            got = packaged.where(operation=r["layer"], tokens=int(r["tokens"]))
            assert got.size == 1 and got["seconds"][0] * 1e6 == pytest.approx(float(r["time_us"]), rel=1e-12)
    with open(DATA / "llmservingsim_attention_excerpt.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            pc, kp, nd, kd = (int(r[k]) for k in ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode"))
            got = packaged.where(operation="attention", tokens=pc + nd, decodes=nd,
                                 context=kd if nd else ABSENT, prefill_context=kp if pc else ABSENT)
            assert got.size == 1 and got["seconds"][0] * 1e6 == pytest.approx(float(r["time_us"]), rel=1e-12)


def test_packaged_file_is_small_and_gzip():
    path = shipped_profiles()["llmservingsim_rtx4090"]
    assert path.name.endswith(".csv.gz") and path.stat().st_size < 100_000
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        assert fh.readline().strip().split(",")[-1] == "seconds"


def test_gemms_stay_under_the_rtx4090_weight_bandwidth(packaged):
    # Reading a GeMM's weights once cannot beat the card's 1008 GB/s (theory/data/gpus.toml); a
    # units error of the conversion (ms for us) would break this by three orders of magnitude.
    m = get_model("llama-3.1-8b")
    for op in LLMSERVINGSIM_GEMMS:
        s = packaged.where(operation=op)
        d_row, d_red = gemm_shape(m, op, 1)
        assert s.size and (2.0 * d_row * d_red / s["seconds"] < 1008e9).all()


# --- the presets the profile needs ------------------------------------------------------------------

def test_llama_31_8b_has_the_layer_shapes_of_llama_3_8b():
    # Llama 3.1 changed the RoPE scaling and the context window, not the layer shapes
    new, old = get_model("llama-3.1-8b"), get_model("llama-3-8b")
    for field in ("N", "d_x", "n_heads", "n_kv_heads", "head_dim", "d_ff", "d_out", "ffn"):
        assert getattr(new, field) == getattr(old, field), field
    assert new.context_length > old.context_length


def test_bounds_run_on_the_rtx4090_preset(capsys):
    from llmq.cli import main

    assert main(["bounds", "--gpu", "rtx4090", "--model", "llama-3.1-8b", "--mode", "real", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = json.dumps(doc)
    assert "rtx4090" in text and "calibrated on llmservingsim_rtx4090" in text
