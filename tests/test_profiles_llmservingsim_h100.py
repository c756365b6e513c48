"""LLMServingSim's first-profiler H100 Llama-3.1-70B TP 4 layers (``llmservingsim_h100.csv.gz``):
the converter of ``layers.csv`` on small fixtures, its checks, and the packaged file."""

import csv
from pathlib import Path

import pytest

from theory.errors import FieldError
from theory.profiles import load_profile, shipped_profiles
from theory.validation.profiles_llmservingsim import (
    LLMSERVINGSIM_V0_COLUMNS,
    LLMSERVINGSIM_V0_KERNELS,
    convert_llmservingsim_layers,
)

SETUP = "H100/fp16/transformers-eager"
# the 15 rows of input = 64 in casys-kaist/LLMServingSim@e0f4911
# llm_profile/perf_models/H100/meta-llama/Llama-3.1-70B/tp4/layers.csv (lines 947-961), as published
SOURCE_64 = [
    ("embedding", 6219),
    ("input_layernorm", 23484),
    ("q_proj", 18314),
    ("k_proj", 8217),
    ("v_proj", 8050),
    ("rope", 34328),
    ("attn", 9395),
    ("o_proj", 14973),
    ("post_layernorm", 23592),
    ("gate_proj", 44496),
    ("up_proj", 42348),
    ("act_fn", 4695),
    ("down_proj", 42246),
    ("final_layernorm", 23741),
    ("lm_head", 182235),
]


def write_layers(path: Path, rows, header=LLMSERVINGSIM_V0_COLUMNS) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def convert(path: Path, tp: int = 4) -> list[dict]:
    return convert_llmservingsim_layers(path, "h100", "llama-3.1-70b", tp, SETUP)


def test_the_element_wise_layers_are_kept_under_the_schemas_names(tmp_path):
    path = write_layers(tmp_path / "layers.csv", [(name, 64, 0, 4, ns) for name, ns in SOURCE_64])
    rows = {r["operation"]: r for r in convert(path)}
    assert set(rows) == set(LLMSERVINGSIM_V0_KERNELS.values())  # the GeMMs and attention are dropped
    ns = dict(SOURCE_64)
    assert float(rows["rotary_emb"]["seconds"]) == pytest.approx(ns["rope"] * 1e-9, rel=1e-12)
    assert float(rows["act_fn"]["seconds"]) == pytest.approx(ns["act_fn"] * 1e-9, rel=1e-12)
    # the two norms of a layer are one operation, merged by their median (the mean of two)
    norms = (ns["input_layernorm"] + ns["post_layernorm"]) / 2
    assert float(rows["layernorm"]["seconds"]) == pytest.approx(norms * 1e-9, rel=1e-12)
    assert rows["layernorm"]["src_rows"] == 2 and rows["act_fn"]["src_rows"] == 1
    assert all(r["tokens"] == 64 and r["tp"] == 4 and r["setup"] == SETUP for r in rows.values())


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (("rope", 8, 16, 4, 100), r"row 2, column 'kv_cache'.*got 16"),
        (("rope", 8, 0, 2, 100), r"row 2, column 'tp_size'.*4 \(the bundle's TP degree\).*got 2"),
        (("rmsnorm", 8, 0, 4, 100), r"row 2, column 'layer_name'.*got 'rmsnorm'"),
        (("rope", 0, 0, 4, 100), r"row 2, column 'input'.*>= 1"),
        (("rope", 8, 0, 4, "1.5"), r"row 2, column 'latency\(ns\)'"),
    ],
)
def test_a_bad_source_row_is_refused_naming_row_and_column(tmp_path, row, match):
    path = write_layers(tmp_path / "layers.csv", [row])
    with pytest.raises(FieldError, match=match):
        convert(path)


def test_a_missing_column_is_refused(tmp_path):
    path = write_layers(tmp_path / "layers.csv", [("rope", 8, 0, 4)], header=LLMSERVINGSIM_V0_COLUMNS[:-1])
    with pytest.raises(FieldError, match=r"header \(row 1\), column 'latency\(ns\)'"):
        convert(path)


def test_the_packaged_file_loads_and_holds_the_converted_source_rows(tmp_path):
    prof = load_profile("llmservingsim_h100")  # the strict reader
    rows = prof.rows
    assert len(prof) == 5 * 2048  # five operations at every token count 1 to 2,048
    assert set(rows["operation"]) == set(LLMSERVINGSIM_V0_KERNELS.values())
    assert set(rows["gpu"]) == {"h100"} and set(rows["model"]) == {"llama-3.1-70b"} and set(rows["tp"]) == {4}
    source = write_layers(tmp_path / "layers.csv", [(name, 64, 0, 4, ns) for name, ns in SOURCE_64])
    expected = convert(source)
    for r in expected:
        got = prof.where(operation=r["operation"], tokens=64)
        assert got.size == 1 and got["seconds"][0] == pytest.approx(float(r["seconds"]), rel=1e-12)
    path = shipped_profiles()["llmservingsim_h100"]
    assert path.name.endswith(".csv.gz") and path.stat().st_size < 100_000
