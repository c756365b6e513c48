"""LLMServingSim's RTX PRO 6000 Blackwell profiles (Llama-3.1-8B and Qwen3-32B, TP 1 and 2): the
converters against hand-read source rows (verbatim excerpts in tests/data, README there), the
bundle's meta.yaml checked at the per-rank shapes of its last TP degree, and the new presets."""


import pytest

from tests.test_profiles_llmservingsim import DATA, _pick, _us  # the RTX 4090 module's row helpers
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.profiles import gemm_shape
from theory.validation.profiles_llmservingsim import (
    check_llmservingsim_meta,
    convert_llmservingsim_attention,
    convert_llmservingsim_dense,
    convert_llmservingsim_per_sequence,
)

SETUP = "RTXPRO6000/bf16/vllm-0.19.0"
QWEN_TP2 = ("rtxpro6000", "qwen3-32b", 2, SETUP)


def test_qwen3_dense_rows():
    rows = convert_llmservingsim_dense(DATA / "llmservingsim_rtxpro6000_qwen3_dense_excerpt.csv",
                                       "rtxpro6000", "qwen3-32b", 1, SETUP)
    # line 1218: qkv_proj,1,70.7627; line 1369: qkv_proj,2048,559.19; line 1093: qk_norm,64,3.26933
    assert _us(_pick(rows, operation="qkv_proj", tokens=1)) == pytest.approx(70.7627, rel=1e-12)
    assert _us(_pick(rows, operation="qkv_proj", tokens=2048)) == pytest.approx(559.19, rel=1e-12)
    assert _us(_pick(rows, operation="qk_norm", tokens=64)) == pytest.approx(3.26933, rel=1e-12)
    assert len(rows) == 3 and {r["tp"] for r in rows} == {1}


def test_llama_tp2_dense_row():
    rows = convert_llmservingsim_dense(DATA / "llmservingsim_rtxpro6000_llama_tp2_dense_excerpt.csv",
                                       "rtxpro6000", "llama-3.1-8b", 2, SETUP)
    row = _pick(rows, operation="gate_up_proj", tokens=512)  # line 665: gate_up_proj,512,182.145
    assert _us(row) == pytest.approx(182.145, rel=1e-12) and row["tp"] == 2


def test_qwen3_tp2_per_sequence_and_attention_rows():
    per_seq = convert_llmservingsim_per_sequence(
        DATA / "llmservingsim_rtxpro6000_qwen3_tp2_per_sequence_excerpt.csv", *QWEN_TP2)
    assert _us(_pick(per_seq, operation="lm_head", tokens=1)) == pytest.approx(536.895, rel=1e-12)  # line 2
    assert _us(_pick(per_seq, operation="lm_head", tokens=256)) == pytest.approx(733.913, rel=1e-12)  # 41
    att = convert_llmservingsim_attention(
        DATA / "llmservingsim_rtxpro6000_qwen3_tp2_attention_excerpt.csv", *QWEN_TP2)
    dec = _pick(att, tokens=1, decodes=1)  # line 2: 0,0,1,16,7.914
    assert dec["context"] == 16 and _us(dec) == pytest.approx(7.914, rel=1e-12)
    mixed = _pick(att, tokens=516, decodes=4)  # line 14219: 512,2048,4,128,113.398
    assert (mixed["context"], mixed["prefill_context"]) == (128, 2048)
    assert _us(mixed) == pytest.approx(113.398, rel=1e-12)


def test_meta_holds_the_per_rank_shapes_of_the_last_tp_degree():
    pytest.importorskip("yaml")
    meta_file = DATA / "llmservingsim_rtxpro6000_qwen3_meta.yaml"
    meta = check_llmservingsim_meta(meta_file, "RTXPRO6000", "qwen3-32b")
    assert meta["tp_degrees"] == [1, 2]
    hf = meta["engine_effective"]["hf_overrides"]
    q = get_model("qwen3-32b")
    assert (hf["num_attention_heads"], hf["intermediate_size"], hf["vocab_size"]) == \
        (q.n_heads // 2, q.d_ff // 2, q.d_out // 2)
    # Llama-3.1-8B's halves (16 heads, 7168 FFN) are not Qwen3-32B's: refused, naming the field
    with pytest.raises(FieldError, match=r"qwen3_meta.yaml: num_attention_heads: expected 16.*TP 2.*got 32"):
        check_llmservingsim_meta(meta_file, "RTXPRO6000", "llama-3.1-8b")


def test_tp2_gemm_shapes_are_one_rank_shards():
    # qkv_proj at TP 2: (32 + 2 x 4) heads x 128 rows, reduction over the 5120-wide hidden state
    d_row, d_red = gemm_shape(get_model("qwen3-32b"), "qkv_proj", 2)
    assert (d_row, d_red) == ((32 + 2 * 4) * 128, 5120)
    d_row, d_red = gemm_shape(get_model("qwen3-32b"), "o_proj", 1)
    assert (d_row, d_red) == (5120, 64 * 128)  # the query width 8192, not the hidden size


def test_presets_load():
    g = get_gpu("rtxpro6000")
    assert (g.s, g.memory_bytes, g.bandwidth) == (188, 96e9, 1597e9)
    q = get_model("qwen3-32b")
    assert (q.N, q.d_x, q.n_heads * q.head_dim, q.n_kv_heads, q.context_length) == (64, 5120, 8192, 8, 40960)


def test_bounds_runs_on_the_new_presets(capsys):
    from llmq.cli import main
    assert main(["bounds", "--gpu", "rtxpro6000", "--model", "qwen3-32b", "--mode", "real"]) in (0, None)
    assert "rtxpro6000" in capsys.readouterr().out.lower().replace("-", "")


def test_packaged_file_holds_every_source_row_and_the_excerpts():
    from theory.profiles import load_profile, shipped_profiles

    prof = load_profile("llmservingsim_rtxpro6000")
    rows = prof.rows
    # dense + per_sequence + attention data rows of each tp folder (Llama-3.1-8B, Qwen3-32B)
    assert len(prof) == 2 * (1368 + 80 + 19364) + 2 * (1520 + 80 + 19364)
    assert set(rows["model"]) == {"llama-3.1-8b", "qwen3-32b"} and set(rows["tp"]) == {1, 2}
    qwen_tp1 = prof.where(model="qwen3-32b", tp=1, operation="qkv_proj", tokens=2048)
    assert qwen_tp1.size == 1 and qwen_tp1["seconds"][0] * 1e6 == pytest.approx(559.19, rel=1e-12)
    llama_tp2 = prof.where(model="llama-3.1-8b", tp=2, operation="gate_up_proj", tokens=512)
    assert llama_tp2.size == 1 and llama_tp2["seconds"][0] * 1e6 == pytest.approx(182.145, rel=1e-12)
    path = shipped_profiles()["llmservingsim_rtxpro6000"]
    assert path.name.endswith(".csv.gz") and path.stat().st_size < 700_000
