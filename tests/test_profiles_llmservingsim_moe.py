"""LLMServingSim's Qwen3-30B-A3B (mixture of experts) profile of the RTX PRO 6000: the MoE and skew
converters against hand-read source rows (excerpts in tests/data), the schema's new columns and
their checks, and the packaged file, which stays out of shipped_profiles() until the model has an
llmq preset (theory/data/profiles/README.md)."""

from pathlib import Path

import numpy as np
import pytest

import theory.profiles as profiles
from theory.errors import FieldError
from theory.models import Model
from theory.profiles import ABSENT, load_profile, shipped_profiles
from theory.validation.profiles_llmservingsim import (
    MOE_PROFILE_DIR,
    check_llmservingsim_moe_meta,
    convert_llmservingsim_moe,
    convert_llmservingsim_skew,
)

DATA = Path(__file__).parent / "data"
SETUP = "RTXPRO6000/bf16/vllm-0.19.0"
ARGS = ("rtxpro6000", "qwen3-30b-a3b", 1, SETUP)
PACKAGED = Path(profiles.__file__).parent / "data" / "profiles" / MOE_PROFILE_DIR / \
    "llmservingsim_rtxpro6000_qwen3-30b-a3b.csv.gz"


def _pick(rows, **equal):
    found = [r for r in rows if all(str(r[k]) == str(v) for k, v in equal.items())]
    assert len(found) == 1, (equal, found)
    return found[0]


def _us(row) -> float:
    return float(row["seconds"]) * 1e6


def test_moe_rows():
    rows = convert_llmservingsim_moe(DATA / "llmservingsim_rtxpro6000_qwen3moe_moe_excerpt.csv", *ARGS,
                                     top_k=8)
    # lines 2, 4, 51: 1,8,50.2297 / 2,16,134.976 / 2048,128,1066.6 (microseconds)
    assert _us(_pick(rows, tokens=1, experts=8)) == pytest.approx(50.2297, rel=1e-12)
    assert _us(_pick(rows, tokens=2, experts=16)) == pytest.approx(134.976, rel=1e-12)
    assert _us(_pick(rows, tokens=2048, experts=128)) == pytest.approx(1066.6, rel=1e-12)
    assert len(rows) == 3 and {r["operation"] for r in rows} == {"moe"}


def test_moe_rows_refuse_more_experts_than_token_slots(tmp_path):
    f = tmp_path / "moe.csv"
    f.write_text("tokens,activated_experts,time_us\n2,32,50.0\n")  # 2 tokens x top-8 reach 16 at most
    with pytest.raises(FieldError, match="activated_experts"):
        convert_llmservingsim_moe(f, *ARGS, top_k=8)


def test_skew_rows():
    rows = convert_llmservingsim_skew(DATA / "llmservingsim_rtxpro6000_qwen3moe_skew_excerpt.csv", *ARGS)
    assert {r["setup"] for r in rows} == {SETUP + "/skew"} and {r["operation"] for r in rows} == {"attention"}
    # line 207: mixed,2,1,0.5,4.0,512,2048,256,1024,640,338.721,339.809,335.391: one decode at 256
    # cached tokens, one at 1,024, beside a 512-token chunk with 2,048 cached
    bimodal = _pick(rows, tokens=514, decodes_long=1)
    assert (bimodal["decodes"], bimodal["context"], bimodal["context_long"], bimodal["prefill_context"]) == \
        (2, 256, 1024, 2048)
    assert _us(bimodal) == pytest.approx(335.391, rel=1e-12)
    assert _us(_pick(rows, tokens=514, context=640, decodes_long="")) == pytest.approx(338.721, rel=1e-12)
    # lines 296, 590, 884: four decodes, all at 512 cached tokens, timed in three shots: the median
    at_max = _pick(rows, tokens=4, context=512, decodes_long="")
    assert _us(at_max) == pytest.approx(50.207, rel=1e-12) and at_max["src_rows"] == 3
    assert _us(_pick(rows, tokens=4, context=224, decodes_long="")) == pytest.approx(44.961, rel=1e-12)
    assert _pick(rows, tokens=4, decodes_long=2)["prefill_context"] == ""  # pure decode
    assert len(rows) == 4 + 4 + 2  # a shot each; the uniform batches at kv_mean (4) and kv_big (2)


def test_skew_rows_are_checked_against_their_derived_columns(tmp_path):
    lines = (DATA / "llmservingsim_rtxpro6000_qwen3moe_skew_excerpt.csv").read_text().splitlines()
    f = tmp_path / "skew.csv"
    (line,) = [x for x in lines if ",224," in x]  # source line 296: kv_mean 224 = (512 + 3 x 128) // 4
    f.write_text("\n".join([lines[0], line.replace(",224,", ",225,")]) + "\n")
    with pytest.raises(FieldError, match=r"skew.csv: row 2, column 'kv_mean'"):
        convert_llmservingsim_skew(f, *ARGS)


def test_meta_is_checked_against_the_config():
    meta_file = DATA / "llmservingsim_rtxpro6000_qwen3moe_meta.yaml"
    config_file = DATA / "llmservingsim_qwen3moe_config.json"
    meta, config = check_llmservingsim_moe_meta(meta_file, "RTXPRO6000", config_file)
    assert meta["tp_degrees"] == [1, 2] and config["num_experts_per_tok"] == 8
    with pytest.raises(FieldError, match="hardware"):
        check_llmservingsim_moe_meta(meta_file, "RTX4090", config_file)


# --- the loader's checks of the new columns ----------------------------------------------------

HEADER = ("source,gpu,setup,model,tp,operation,tokens,decodes,context,experts,decodes_long,context_long,"
          "time_us")


@pytest.mark.parametrize(("cells", "column"), [
    ("moe,16,,,,,,50.0", "experts"),              # a MoE block without its experts
    ("attention,4,4,128,,1,,46.0", "context_long"),  # long decodes without their KV length
    ("attention,4,4,128,,,512,46.0", "decodes_long"),  # a KV length without its decodes
    ("attention,4,4,128,,4,512,46.0", "decodes_long"),  # every decode long: not two lengths
])
def test_the_new_columns_are_checked(tmp_path, cells, column):
    f = tmp_path / "bad.csv"
    f.write_text(f"{HEADER}\nllmservingsim,rtxpro6000,,qwen3-32b,1,{cells}\n", encoding="utf-8")
    with pytest.raises(FieldError, match=rf"bad.csv: row 2, column '{column}'"):
        load_profile(f)


# --- the packaged file --------------------------------------------------------------------------


def test_the_packaged_file_is_not_a_shipped_profile():
    assert PACKAGED.is_file()
    assert not any("qwen3-30b-a3b" in name for name in shipped_profiles())


@pytest.fixture(scope="module")
def packaged():
    """The packaged file, read by the profile loader with a stand-in for the model preset llmq does not
    have yet: Qwen3-30B-A3B's attention shapes and expert width from its public config.json (as
    LLMServingSim copies it; the loader checks only that TP splits the heads and the width)."""
    real = profiles.get_model
    stand_in = Model(key="qwen3-30b-a3b", name="Qwen3-30B-A3B", N=48, d_x=2048, n_heads=32, n_kv_heads=4,
                     head_dim=128, d_ff=768, d_out=151936, ffn="swiglu", params=30.5e9)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(profiles, "get_model",
                   lambda name, *a: stand_in if name == "qwen3-30b-a3b" else real(name, *a))
        return load_profile(PACKAGED)


def test_the_packaged_file_holds_every_source_file(packaged):
    rows = packaged.rows
    plain = rows[rows["setup"] == SETUP]
    for tp in (1, 2):
        mine = plain[plain["tp"] == tp]
        assert (mine["operation"] == "attention").sum() == 19364  # attention.csv data rows
        assert np.isin(mine["operation"], ["lm_head", "sampler"]).sum() == 80  # per_sequence.csv
        assert np.isin(mine["operation"], ["embedding", "layernorm", "qkv_proj", "qk_norm", "rotary_emb",
                                           "o_proj", "final_layernorm"]).sum() == 7 * 152  # dense.csv
        skew = rows[(rows["setup"] == SETUP + "/skew") & (rows["tp"] == tp)]
        assert (skew["decodes_long"] != ABSENT).sum() == 13009  # skew.csv data rows, one bimodal row each
    moe = rows[rows["operation"] == "moe"]
    assert moe.size == 50 and set(moe["tp"].tolist()) == {1}  # moe.csv: profiled at TP 1 only


def test_the_packaged_moe_block_costs_more_as_it_touches_more_experts(packaged):
    moe = packaged.where(operation="moe")
    for tokens in np.unique(moe["tokens"]):
        at = moe[moe["tokens"] == tokens]
        assert np.all(at["experts"] >= 8) and np.all(at["experts"] <= 8 * tokens)
        order = np.argsort(at["experts"])
        assert np.all(np.diff(at["seconds"][order]) > 0), tokens
