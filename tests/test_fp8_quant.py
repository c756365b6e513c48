"""The dynamic activation quantization of an FP8 GeMM (theory.precision.activation_quant_s) and the
FP8 tables scored with and without it (theory.validation.fp8_gemm, fp8_report)."""

import numpy as np
import pytest

from theory.builder import CostSpec, cost_model
from theory.errors import FieldError
from theory.precision import activation_quant_s
from theory.validation import fp8_report
from theory.validation.fp8_gemm import (
    DYNAMIC_QUANT,
    FP8_TABLES,
    load_fp8_table,
    residual_by_tokens,
    score_fp8,
)
from theory.validation.fp8_quantize import (
    QUANT_TABLE,
    convert_rows,
    gemm_less_quantize,
    load_quantize,
    score_quantize,
)
from theory.validation.results import Report, Settings

AIC = FP8_TABLES[1]


def test_quantization_is_five_bytes_per_input_element_at_the_achievable_bandwidth():
    cm = cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "real"))
    bw = cm.gpu.eta_mem * cm.gpu.bandwidth
    # amax pass: read 2 bytes; quantize pass: read 2, write 1 (bf16 in, e4m3 out)
    assert float(activation_quant_s(cm, 1000, 4096)) == pytest.approx(5 * 1000 * 4096 / bw, rel=1e-15)
    got = activation_quant_s(cm, np.array([1, 64]), np.array([[4096], [7168]]))
    assert got.shape == (2, 2) and got[1, 1] == pytest.approx(5 * 64 * 7168 / bw, rel=1e-15)


def test_quantization_refuses_paper_mode_and_bf16():
    with pytest.raises(FieldError, match="mode"):
        activation_quant_s(cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "paper")), 8, 4096)
    with pytest.raises(FieldError, match="precision"):
        activation_quant_s(cost_model(CostSpec("h200", "llama-3.1-8b", "real")), 8, 4096)


def test_score_with_quantization_is_the_plain_score_plus_the_bytes_recounted():
    points = load_fp8_table(AIC)
    plain, quant = score_fp8("h200", AIC), score_fp8("h200", AIC, quant=True)
    cm = cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "real"))
    bw = cm.gpu.eta_mem * cm.gpu.bandwidth
    added = np.array([5.0 * p["tokens"] * p["d_red"] / bw for p in points])
    np.testing.assert_allclose(quant.columns["pred_fp8"], plain.columns["pred_fp8"] + added, rtol=1e-12)
    np.testing.assert_array_equal(quant.columns["pred_bf16"], plain.columns["pred_bf16"])
    measured = np.array([p["fp8"] for p in points])
    err = np.abs((plain.columns["pred_fp8"] + added) / measured - 1)
    n, median, p90 = quant.stats("fp8")
    assert n == len(points)
    assert median == pytest.approx(float(np.median(err)), rel=1e-12)
    assert p90 == pytest.approx(float(np.quantile(err, 0.9)), rel=1e-12)


def test_residual_by_tokens_recounted():
    score = score_fp8("h200", AIC)
    tokens = np.array([p["tokens"] for p in score.points])
    measured = np.array([p["fp8"] for p in score.points])
    pred = score.columns["pred_fp8"]
    rows = residual_by_tokens(score, (1, 17, 32769))
    assert [r["tokens"] for r in rows] == ["1-16", "17-32768"]
    small = tokens < 17
    assert rows[0]["n"] == int(small.sum()) and rows[1]["n"] == int((~small).sum())
    assert rows[0]["residual_s"] == pytest.approx(float(np.median(measured[small] - pred[small])), rel=1e-12)
    assert rows[1]["signed"] == pytest.approx(
        float(np.median(pred[~small] / measured[~small] - 1)), rel=1e-12
    )
    assert residual_by_tokens(score, (40000, 50000)) == []


def test_report_scores_the_dynamic_table_both_ways_and_only_it():
    report = Report(settings=Settings())
    fp8_report.score_into(report)
    quant_tables = {r["table"] for r in report.fp8 if r["quantity"].endswith("+quant")}
    assert quant_tables == DYNAMIC_QUANT == {AIC.name}
    row = next(r for r in report.fp8 if r["table"] == AIC.name and r["quantity"] == "fp8+quant")
    assert (row["n"], row["median"], row["p90"]) == score_fp8("h200", AIC, quant=True).stats("fp8")
    assert [r["quantity"] for r in report.fp8 if r["table"] == AIC.name] == [
        "fp8",
        "bf16",
        "ratio",
        "fp8+quant",
        "ratio+quant",
        "quant",
        "fp8+measured quant",
        "ratio+measured quant",
    ]
    measured = next(r for r in report.fp8 if r["quantity"] == "fp8+measured quant")
    assert (measured["n"], measured["median"], measured["p90"]) == gemm_less_quantize("h200").stats("fp8")
    assert [res["table"] for res in report.fp8_residuals] == [AIC.name]
    assert report.fp8_residuals[0]["fp8+quant"] == residual_by_tokens(score_fp8("h200", AIC, quant=True))
    assert any("residual = measured - predicted" in line for line in fp8_report.markdown_lines(report))


def test_quantize_table_shipped_with_every_point_of_the_gemm_table():
    table = load_quantize()
    assert len(table) == 444 and {k[0] for k in table} == {"h200"}
    points = load_fp8_table(AIC)
    assert {(p["gpu"], p["tokens"], p["d_red"]) for p in points} <= set(table)
    readme = QUANT_TABLE.parent.parent.joinpath("README.md").read_text(encoding="utf-8")
    assert f"`fp8/{QUANT_TABLE.name}`" in readme and "collect_computescale.py" in readme


def test_convert_pairs_the_two_tables_at_the_kept_widths():
    cs = {
        "device": ["NVIDIA H200"] * 3,
        "m": [1, 1, 8],
        "k": [4096, 100, 4096],
        "quant_dtype": ["fp8"] * 3,
        "latency": [0.007, 0.5, 0.0075],
    }
    sm = {**cs, "latency": [0.0014, 0.5, 0.0015]}
    rows = convert_rows(cs, sm, {4096})
    assert [
        (r["tokens"], r["d_red"], float(r["compute_scale_s"]), float(r["scale_matrix_s"])) for r in rows
    ] == [(1, 4096, 7e-6, 1.4e-6), (8, 4096, 7.5e-6, 1.5e-6)]
    with pytest.raises(FieldError, match="scale_matrix_perf rows"):
        convert_rows(cs, {k: v[:1] for k, v in sm.items()}, {4096})
    with pytest.raises(FieldError, match="device"):
        convert_rows({**cs, "device": ["a GPU"] * 3}, sm, {4096})
    with pytest.raises(FieldError, match="latency"):
        convert_rows({k: v for k, v in cs.items() if k != "latency"}, sm, {4096})


def test_term_and_measured_decomposition_recounted():
    table = load_quantize()
    plain = score_fp8("h200", AIC)
    measured_q = np.array([table[("h200", p["tokens"], p["d_red"])] for p in plain.points])
    cm = cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "real"))
    bw = cm.gpu.eta_mem * cm.gpu.bandwidth
    term = np.array([5.0 * p["tokens"] * p["d_red"] / bw for p in plain.points])
    err = np.abs(term / measured_q - 1)
    assert score_quantize("h200").stats("quant") == (
        len(err),
        pytest.approx(float(np.median(err)), rel=1e-12),
        pytest.approx(float(np.quantile(err, 0.9)), rel=1e-12),
    )
    fp8 = np.array([p["fp8"] for p in plain.points])
    err = np.abs((plain.columns["pred_fp8"] + measured_q) / fp8 - 1)
    n, median, p90 = gemm_less_quantize("h200").stats("fp8")
    assert n == len(err) and median == pytest.approx(float(np.median(err)), rel=1e-12)
    assert p90 == pytest.approx(float(np.quantile(err, 0.9)), rel=1e-12)
