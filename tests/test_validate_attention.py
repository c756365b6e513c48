"""Self-attention against measured batches (theory.validation.attention) and the RTX 4090 profile in
``llmq validate``: Eq. 5-6 per layer checked against the exact symbolic twin, the paper's positions
of a batch's chunk and decodes, the scoring per batch kind and the outputs."""

import json
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from theory import symbolic as sym
from theory.cost import build_cost_model
from theory.hardware import get_gpu
from theory.models import get_model
from theory.profiles import ABSENT, Profile, load_profile
from theory.validation.attention import (
    attention_split,
    call_fit,
    fit_attention_call,
    kind_of,
    predict_attention,
    score_attention,
)
from theory.validation.errors import abs_rel_error
from theory.validation.profiles_llmservingsim import convert_llmservingsim_attention
from theory.validation.profiles_rows import write_profile
from theory.validation.report import write_outputs
from theory.validation.results import Settings
from theory.validation.validate import NO_KERNEL_LAW, validate

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def roofline():
    return build_cost_model(get_gpu("rtx4090"), get_model("llama-3.1-8b"), "real")


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory):
    """The attention rows of tests/data/llmservingsim_attention_excerpt.csv, converted and loaded."""
    path = tmp_path_factory.mktemp("att") / "att.csv"
    write_profile(convert_llmservingsim_attention(DATA / "llmservingsim_attention_excerpt.csv", "rtx4090",
                                                  "llama-3.1-8b", 1, "RTX4090"), path)
    return load_profile(path)


def _oracle(scm, chunk, cached_before_chunk, decodes, cached_per_decode):
    """One layer by the symbolic twin: Definition 1 puts a chunk after ``i - 1`` cached tokens, so
    PI(R, i, c) has i = cached + 1; Definition 2's DI(R, i) has its KV up to i - 1 cached, so a
    decode after ``cached`` tokens is at i = cached + 1. T_P_SA sums Eq. 6 over N layers."""
    out = sp.Integer(0)
    if chunk:
        out += scm.T_P_SA(sp.Integer(cached_before_chunk + 1), sp.Integer(chunk)) / scm.N
    if decodes:
        out += decodes * scm.T_D_SA(sp.Integer(cached_per_decode + 1))
    return float(out)


@pytest.mark.parametrize("chunk, kv_p, n_dec, kv_d", [
    (0, 0, 1, 16), (0, 0, 256, 16384), (16, 0, 0, 0), (512, 2048, 4, 128), (2048, 16384, 0, 0),
    (100, 7, 3, 1),
])
def test_prediction_is_eq5_and_eq6_of_one_layer(roofline, chunk, kv_p, n_dec, kv_d):
    scm = sym.SymbolicCostModel.from_cost_model(roofline)
    got = predict_attention(roofline, chunk + n_dec, n_dec, kv_d, kv_p)
    assert float(got) == pytest.approx(_oracle(scm, chunk, kv_p, n_dec, kv_d), rel=1e-12)


def test_decode_attention_reads_the_kv_heads_only_in_real_mode():
    # Llama-3.1-8B has 32 query heads and 8 KV heads of width 128: a decode's two GeMVs over the
    # cache are 4 times narrower served (GQA) than in the paper's one head of width d = 4096. With
    # i = 1024 every GeMV tile divides both widths, so the ratio is exactly 4.
    real = build_cost_model(get_gpu("rtx4090"), get_model("llama-3.1-8b"), "real")
    paper = build_cost_model(get_gpu("rtx4090"), get_model("llama-3.1-8b"), "paper")
    assert float(predict_attention(paper, 1, 1, 1023, 0)) == pytest.approx(
        4 * float(predict_attention(real, 1, 1, 1023, 0)), rel=1e-12)


def test_kinds():
    assert kind_of([1, 16, 516, 256], [1, 0, 4, 256]).tolist() == ["decode", "prefill", "mixed", "decode"]


def test_scores_per_kind_pool_into_all(excerpt, roofline):
    rows = score_attention("excerpt", excerpt.rows)
    assert [(r["kind"], r["n"]) for r in rows] == [("prefill", 2), ("decode", 2), ("mixed", 1), ("all", 5)]
    scm = sym.SymbolicCostModel.from_cost_model(roofline)
    r = excerpt.rows
    cells = zip(r["tokens"], r["decodes"], r["context"], r["prefill_context"], strict=True)
    oracle = [_oracle(scm, int(t - d), int(p), int(d), int(c)) for t, d, c, p in cells]
    err = abs_rel_error(r["seconds"], oracle)
    every = rows[-1]
    assert every["roofline_median"] == pytest.approx(float(np.median(err)), rel=1e-9)
    assert every["roofline_p90"] == pytest.approx(float(np.percentile(err, 90)), rel=1e-9)
    assert every["roofline_ratio_median"] == pytest.approx(float(np.median(np.array(oracle) / r["seconds"])),
                                                           rel=1e-9)


@pytest.fixture(scope="module")
def small_report(excerpt):
    """validate() on the qkv_proj and layernorm rows of the packaged RTX 4090 profile plus the
    attention excerpt, and the same GeMM rows renamed to vidur's attn_pre_proj."""
    packaged = load_profile("llmservingsim_rtx4090").rows
    keep = packaged[np.isin(packaged["operation"], ["qkv_proj", "layernorm"])]
    both = np.concatenate([keep, excerpt.rows.astype(keep.dtype)])
    renamed = keep[keep["operation"] == "qkv_proj"].copy()
    renamed["operation"] = "attn_pre_proj"
    s = Settings(gpus=("rtx4090",))
    return (validate({"lss": Profile("lss", both)}, s),
            validate({"renamed": Profile("renamed", renamed)}, s))


def test_vllm_gemm_names_are_scored_as_vidur_gemms(small_report):
    report, renamed = small_report
    (qkv,) = [g for g in report.groups if g["operation"] == "qkv_proj"]
    (same,) = renamed.groups
    assert qkv["n"] == same["n"] == 152 and qkv["roofline_n"] == 152
    for k in ("roofline_median", "roofline_p90", "shipped_median", "tokens_median", "paper_median"):
        assert qkv[k] == pytest.approx(same[k], rel=1e-12)
    assert next(r for r in report.not_predicted if r["operation"] == "layernorm")["reason"] == NO_KERNEL_LAW
    assert [(r["kind"], r["n"]) for r in report.attention][-1] == ("all", 5)


def test_outputs_carry_the_attention_section(small_report, tmp_path):
    report, _ = small_report
    files = write_outputs(report, tmp_path)
    assert str(tmp_path / "validate_attention.csv") in files
    doc = json.loads((tmp_path / "validate.json").read_text(),
                     parse_constant=lambda name: pytest.fail(f"non-standard JSON {name}"))
    assert len(doc["attention"]) == 4 and set(doc["attention"][0]) == set(doc["attention_columns"])
    columns = json.loads((tmp_path / "validate_attention.columns.json").read_text())
    header = (tmp_path / "validate_attention.csv").read_text().splitlines()[0].split(",")
    assert header == list(doc["attention_columns"]) == list(columns["columns"])
    assert "## Self-attention (Eq. 5-6)" in (tmp_path / "validate.md").read_text()


def test_attention_call_is_recovered_from_synthetic_batches(roofline):
    """Batches timed as Eq. 5-6 plus a known c_A per call, with 3% multiplicative noise (seeded):
    the fit on the training shapes of single-kind batches finds c_A, and the held-out error falls."""
    from dataclasses import replace

    rng = np.random.default_rng(0)
    n = 400
    chunk = np.where(rng.random(n) < 0.5, rng.integers(1, 512, n), 0)
    alone = rng.random(n) < 0.5
    decodes = np.where(chunk == 0, rng.integers(1, 64, n), np.where(alone, 0, rng.integers(1, 16, n)))
    context = np.where(decodes > 0, rng.integers(16, 4096, n), -1)
    prefill_context = np.where(chunk > 0, rng.integers(0, 2048, n), -1)
    tokens = chunk + decodes
    c_true = 9e-6
    truth = predict_attention(replace(roofline, attention_call_s=c_true), tokens, decodes, context,
                              prefill_context)
    assert np.allclose(truth - predict_attention(roofline, tokens, decodes, context, prefill_context), c_true)
    measured = truth * np.exp(rng.normal(0.0, 0.03, n))
    rows = np.zeros(n, dtype=[("tokens", "i8"), ("decodes", "i8"), ("context", "i8"),
                              ("prefill_context", "i8"), ("seconds", "f8")])
    rows["tokens"], rows["decodes"], rows["context"] = tokens, decodes, context
    rows["prefill_context"], rows["seconds"] = prefill_context, measured
    held, before, c_fit, after = call_fit(roofline, rows)
    assert held.sum() == pytest.approx(n / 4, abs=2)
    assert c_fit == pytest.approx(c_true, rel=0.05)
    err = lambda p: np.median(np.abs(p[held] / measured[held] - 1))  # noqa: E731
    assert err(after) < 0.03 < err(before)
    assert fit_attention_call(truth - c_true, truth) == pytest.approx(c_true, rel=1e-6)  # no noise


def test_attention_split_holds_out_every_fourth_shape():
    held = attention_split([1, 1, 2, 3, 4, 5, 6, 7, 8], [1, 1, 0, 0, 0, 0, 0, 0, 0],
                           [16, 16, -1, -1, -1, -1, -1, -1, -1], [-1, -1, 0, 0, 0, 0, 0, 0, 0])
    assert held.tolist() == [False, False, False, False, True, False, False, False, True]


def test_tp2_rows_are_predicted_at_one_rank_s_heads(tmp_path):
    """A TP 2 row of LLMServingSim is one rank's shard timed on one GPU: predicted at TP 1 by a
    model with half the query and KV heads (the shard written out by hand), and paper mode has none."""
    from theory.validation.attention import _cost_models

    half = tmp_path / "half.toml"
    half.write_text('[models.half]\nbase = "qwen3-32b"\nn_heads = 32\nn_kv_heads = 4\nd_ff = 12800\n')
    by_hand = build_cost_model(get_gpu("rtxpro6000"), get_model("half", str(half)), "real")
    models = _cost_models("rtxpro6000", "qwen3-32b", 2, None, None)
    tokens, decodes = np.array([1, 16, 516, 2048]), np.array([1, 0, 4, 0])
    context, prefill_context = np.array([16, ABSENT, 128, ABSENT]), np.array([ABSENT, 0, 2048, 16384])
    want = predict_attention(by_hand, tokens, decodes, context, prefill_context)
    got = predict_attention(models["roofline"](), tokens, decodes, context, prefill_context)
    assert np.all(want > 0) and got == pytest.approx(want, rel=1e-12)
    full = predict_attention(_cost_models("rtxpro6000", "qwen3-32b", 1, None, None)["roofline"](),
                             tokens, decodes, context, prefill_context)
    assert np.all(got < full)  # half the heads: less work than the whole layer
    assert models["paper"] is None
