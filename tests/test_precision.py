"""The precision of a model (theory.precision): FP8 weights and KV cache, FP8 tile rates, the
refusal on Ampere, and the measured H200 FP8 GeMMs scored."""

import json
import math

import numpy as np
import pytest

from llmq.cli import build_parser, main
from llmq.options import resolve
from stability.sim.memory import capacity_blocks
from theory.bounds import T_bar_R_terms
from theory.builder import CostSpec, cost_model
from theory.capacity import kv_capacity_tokens
from theory.cost import T_GeMM_terms, build_cost_model
from theory.errors import FieldError
from theory.hardware import gemm_tile_rate, get_gpu
from theory.models import get_model, load_models
from theory.precision import with_precision
from theory.validation.fp8_gemm import load_fp8_table, score_fp8
from theory.workload import get_workload


def test_fp8_halves_the_weight_and_kv_bytes():
    bf16, fp8 = get_model("mistral-7b"), get_model("mistral-7b:fp8")
    assert (bf16.precision, fp8.precision) == ("bf16", "fp8")
    # Mistral-7B's config: 32 layers x 8 KV heads x 128 x (K and V) x 1 byte
    assert fp8.kv_bytes_per_token() == 32 * 8 * 128 * 2 * 1
    assert fp8.weight_bytes() == fp8.params * 1
    assert bf16.kv_bytes_per_token() == 2 * fp8.kv_bytes_per_token()


def test_the_model_field_in_a_model_file(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text('[models.mistral-fp8]\nbase = "mistral-7b"\nprecision = "fp8"\n')
    assert load_models(path)["mistral-fp8"].precision == "fp8"
    path.write_text('[models.mistral-int4]\nbase = "mistral-7b"\nprecision = "int4"\n')
    with pytest.raises(FieldError, match=r"models\.mistral-int4\.precision"):
        load_models(path)


@pytest.mark.parametrize("spelling", ["mistral-7b:int4", "mistral-7b:"])
def test_an_unknown_precision_is_refused(spelling):
    with pytest.raises(FieldError, match="precision"):
        get_model(spelling)


@pytest.mark.parametrize("gpu", ["a100", "a10g", "a40"])
def test_fp8_on_ampere_is_refused_naming_the_field_and_the_gpu(gpu):
    with pytest.raises(FieldError, match=rf"precision.*GPU {gpu} \(sm8[06]\).*no FP8 tensor cores"):
        cost_model(CostSpec(gpu, "mistral-7b:fp8"))


def test_kv_block_count_and_certified_kv_bound_at_fp8():
    # L40S (48 GB) and Mistral-7B at 90 % of memory, blocks of 16 tokens, by hand:
    # bf16 (43.2e9 - 14.48e9) / (131072 x 16); fp8 (43.2e9 - 7.24e9) / (65536 x 16)
    params = get_model("mistral-7b").params
    for precision, b in (("bf16", 2), ("fp8", 1)):
        cm = cost_model(CostSpec("l40s", f"mistral-7b:{precision}"))
        per_token = 32 * 8 * 128 * 2 * b
        usable = 0.9 * 48e9 - params * b
        assert capacity_blocks(cm, 0.9, 16) == math.floor(usable / (per_token * 16))
        assert kv_capacity_tokens(cm, 0.9) == pytest.approx(usable / per_token, rel=1e-12)


@pytest.mark.parametrize("key", ["h100", "h200", "l40s", "l4", "rtx4090", "rtx6000ada", "rtxpro6000"])
def test_fp8_tile_rates_are_the_fp8_roofline(key):
    gpu = get_gpu(key)  # the roofline preset: no pinned rates
    from theory.config import read_packaged

    data = read_packaged("gpus.toml")
    eff = {**data["efficiency"], **{k: v for k, v in data["gpus"][key].items() if k in ("eta_mma", "rho_l2")}}
    fp8 = data["gpus"][key]["peak_fp8_tflops"] * 1e12
    for tile, mu in zip(gpu.tiles, gpu.mu_fp8, strict=True):
        expected = gemm_tile_rate(tile, fp8, gpu.bandwidth, gpu.s, eff["eta_mma"], eff["rho_l2"], 1)
        assert mu == pytest.approx(expected, rel=1e-12)


def test_paper_mode_theorem1_terms_at_fp8():
    w = get_workload("table1")
    bf16 = T_bar_R_terms(cost_model(CostSpec("h200", "mistral-7b")), w)
    fp8 = T_bar_R_terms(cost_model(CostSpec("h200", "mistral-7b:fp8")), w)
    peak = get_gpu("h200")
    ratio = peak.peak_fp8_flops / peak.peak_flops
    # decode attention streams the KV cache: one byte for two, exactly half
    assert fp8["decode_attention"] == pytest.approx(bf16["decode_attention"] / 2, rel=1e-12)
    # every linear and prefill-attention tile is compute-bound on the roofline: the peak ratio
    assert fp8["linear"] == pytest.approx(bf16["linear"] / ratio, rel=1e-9)
    assert fp8["prefill_attention"] == pytest.approx(bf16["prefill_attention"] / ratio, rel=1e-9)
    assert fp8["nonlinear"] == bf16["nonlinear"]  # bf16 activations


def test_memory_floor_counts_one_byte_weights_and_inputs(tmp_path):
    path = tmp_path / "gpus.toml"
    path.write_text('[gpus.h200-floor]\nbase = "h200"\nmemory_floor = true\n')
    gpu = get_gpu("h200-floor", path)
    cm = build_cost_model(gpu, get_model("mistral-7b:fp8"), "real")
    plain = build_cost_model(get_gpu("h200"), get_model("mistral-7b:fp8"), "real")
    d_row, d_col, d_red = 14336, 1, 4096
    floor = (d_row * d_red * 1 + d_col * (d_red * 1 + d_row * 2)) / (gpu.eta_mem * gpu.bandwidth)
    tiles = float(T_GeMM_terms(plain, d_row, d_col, d_red))
    assert floor > tiles  # a one-token GeMM is memory-bound
    assert float(T_GeMM_terms(cm, d_row, d_col, d_red)) == pytest.approx(floor, rel=1e-12)


def test_fp8_drops_the_measured_bf16_gemm_law():
    cm = cost_model(CostSpec("h200", "llama-3.1-8b:fp8", "real"))
    assert cm.lin is not None and cm.lin.measured is None
    assert "measured profile" not in cm.gpu.calibration
    assert cost_model(CostSpec("h200", "llama-3.1-8b", "real")).lin.measured is not None


@pytest.mark.parametrize("command", ["bounds", "simulate", "region", "plan"])
def test_precision_option_spells_the_model_field(command):
    parser = build_parser()
    values = resolve(parser.parse_args([command, "--model", "mistral-7b", "--precision", "fp8"]))
    assert values["model"] == "mistral-7b:fp8"
    with pytest.raises(FieldError, match="--precision"):
        resolve(parser.parse_args([command, "--precision", "fp16"]))
    with pytest.raises(FieldError, match="--model"):
        resolve(parser.parse_args([command, "--model", "mistral-7b:fp8", "--precision", "fp8"]))


def test_bounds_json_at_fp8(capsys):
    assert main(["bounds", "--json", "--gpu", "h200", "--precision", "fp8"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    assert main(["bounds", "--json", "--gpu", "h200"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert (fp8["model"], bf16["model"]) == ("mistral-7b:fp8", "mistral-7b")
    assert fp8["lambda_star"] > bf16["lambda_star"]
    assert main(["bounds", "--gpu", "a100", "--precision", "fp8"]) == 2
    assert "no FP8 tensor cores" in capsys.readouterr().err


def test_with_precision_none_keeps_the_model():
    m = get_model("mistral-7b")
    assert with_precision(m, None) is m


def test_measured_fp8_gemms_scored_against_an_independent_recount():
    points = load_fp8_table()
    assert len(points) == 66 and all(p["gpu"] == "h200" for p in points)
    score = score_fp8("h200")
    c = score.columns
    # the errors are recomputed here from the measured file and the cost model, row by row
    cms = {p: cost_model(CostSpec("h200", f"llama-3.1-8b:{p}", "real")) for p in ("fp8",)}
    for i, p in enumerate(points):
        assert c["fp8"][i] == p["fp8"] and c["bf16"][i] == p["bf16"]
        pred = float(T_GeMM_terms(cms["fp8"], p["d_row"], p["tokens"], p["d_red"]))
        assert c["pred_fp8"][i] == pytest.approx(pred, rel=1e-12)
    n, median, p90 = score.stats("ratio")
    expected = np.abs((c["pred_fp8"] / c["pred_bf16"]) / (c["fp8"] / c["bf16"]) - 1)
    assert (n, median, p90) == (66, float(np.median(expected)), float(np.quantile(expected, 0.9)))


def test_validate_report_has_the_fp8_section():
    from theory.validation import fp8_report
    from theory.validation.results import Report, Settings

    report = Report(settings=Settings())
    fp8_report.score_into(report)
    assert [r["quantity"] for r in report.fp8][:3] == ["fp8", "bf16", "ratio"]
    assert all(r["n"] == 66 for r in report.fp8 if r["table"] == "llmq_h200_fp8_gemm.csv")
    assert "## FP8 GeMMs on the H200" in fp8_report.markdown_lines(report)
    left_out = Report(settings=Settings(gpus=("a100",)))
    fp8_report.score_into(left_out)
    assert left_out.fp8 == [] and fp8_report.console_lines(left_out) == []
