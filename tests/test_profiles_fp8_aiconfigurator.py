"""AIConfigurator's H200 TensorRT-LLM GeMMs (bf16 and FP8) shipped, read strictly and scored."""

import csv
import gzip

import numpy as np
import pytest

from theory.builder import CostSpec, cost_model
from theory.cost import T_GeMM_terms
from theory.errors import FieldError
from theory.models import get_model
from theory.profiles import gemm_shape
from theory.validation import fp8_report
from theory.validation.fp8_gemm import FP8_TABLES, load_fp8_table, score_fp8
from theory.validation.profiles_aiconfigurator import convert_rows
from theory.validation.results import Report, Settings

AIC = FP8_TABLES[1]


def _raw_rows():
    with gzip.open(AIC, "rt", newline="") as f:
        return list(csv.DictReader(f))


def test_shipped_rows_are_the_shards_of_llama_3_1_8b():
    rows = _raw_rows()
    model = get_model("llama-3.1-8b")
    assert AIC.name == "aiconfigurator_h200_fp8_gemm.csv.gz" and rows
    for r in rows:
        assert gemm_shape(model, r["operation"], int(r["tp"])) == (int(r["d_row"]), int(r["d_red"]))
        assert r["gpu"] == "h200" and r["precision"] in ("bf16", "fp8") and float(r["seconds"]) > 0
    # every shape and token count is there at both precisions, and the reader pairs them all
    assert len(load_fp8_table(AIC)) * 2 == len(rows)


def test_convert_keeps_model_shapes_of_bf16_and_fp8_in_seconds():
    source = {
        "device": ["NVIDIA H200"] * 4,
        "gemm_dtype": ["bfloat16", "fp8", "fp8_block", "fp8"],
        "m": [8, 8, 8, 8],
        "n": [6144, 6144, 6144, 1000],
        "k": [4096, 4096, 4096, 4096],
        "latency": [0.02, 0.01, 0.011, 0.5],
    }
    rows = convert_rows(source, "llama-3.1-8b")
    assert [(r["precision"], r["operation"], r["tp"], float(r["seconds"])) for r in rows] == [
        ("bf16", "attn_pre_proj", 1, 2e-5),
        ("fp8", "attn_pre_proj", 1, 1e-5),
    ]
    h100 = convert_rows({**source, "device": ["NVIDIA H100 80GB HBM3"] * 4}, "llama-3.1-8b")
    assert {r["gpu"] for r in h100} == {"h100"}
    with pytest.raises(FieldError, match="device"):
        convert_rows({**source, "device": ["a GPU"] * 4}, "llama-3.1-8b")
    with pytest.raises(FieldError, match="latency"):
        convert_rows({k: v for k, v in source.items() if k != "latency"}, "llama-3.1-8b")


def test_aiconfigurator_gemms_scored_against_an_independent_recount():
    points = load_fp8_table(AIC)
    score = score_fp8("h200", AIC)
    c = score.columns
    cm = cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "real"))
    for i, p in enumerate(points):
        assert c["fp8"][i] == p["fp8"] and c["bf16"][i] == p["bf16"]
        pred = float(T_GeMM_terms(cm, p["d_row"], p["tokens"], p["d_red"]))
        assert c["pred_fp8"][i] == pytest.approx(pred, rel=1e-12)
    measured = np.array([p["fp8"] for p in points])
    expected = np.abs(c["pred_fp8"] / measured - 1)
    assert score.stats("fp8") == (len(points), float(np.median(expected)), float(np.quantile(expected, 0.9)))


def test_validate_report_scores_both_fp8_tables():
    report = Report(settings=Settings())
    fp8_report.score_into(report)
    assert {r["table"] for r in report.fp8} == {t.name for t in FP8_TABLES}
    n = {r["n"] for r in report.fp8 if r["table"] == AIC.name}
    assert n == {len(load_fp8_table(AIC))}
    assert any(AIC.name in line for line in fp8_report.markdown_lines(report))


def test_license_and_provenance_are_shipped():
    folder = AIC.parent.parent
    assert "Apache License" in folder.joinpath("LICENSE-aiconfigurator.txt").read_text(encoding="utf-8")
    readme = folder.joinpath("README.md").read_text(encoding="utf-8")
    assert f"`fp8/{AIC.name}`" in readme and "095f58a51c4ca8e61b66ec108d86f223f8d559ce" in readme
