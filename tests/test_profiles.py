"""Measured GPU profiles: the converters against hand-read source rows, the loader's checks, and
the packaged files (theory/data/profiles/README.md gives their sources and transformations)."""

import csv
import statistics
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from theory.errors import FieldError, LlmqError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.profiles import ABSENT, VIDUR_GEMMS, gemm_shape, load_profile, shipped_profiles
from theory.validation.profiles_convert import convert_splitwise, convert_vidur_all_reduce, convert_vidur_mlp
from theory.validation.profiles_rows import write_profile

DATA = Path(__file__).parent / "data"
HEADER = "source,gpu,setup,model,tp,operation,tokens,decodes,context,generated,bytes,src_rows,seconds"
GOOD = "vidur,a100,,llama-2-7b,2,mlp_up_proj,128,,,,,1,0.00012"


def _pick(rows, **equal):
    found = [r for r in rows if all(str(r[k]) == str(v) for k, v in equal.items())]
    assert len(found) == 1, (equal, found)
    return found[0]


# --- converters against hand-read rows of the source files (excerpts in tests/data) -------------

def test_vidur_mlp_rows():
    # vidur data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv @ 7d47513 (tests/data/README)
    rows = convert_vidur_mlp(DATA / "vidur_mlp_excerpt.csv", "a100", "llama-2-7b")
    one = _pick(rows, tp=1, tokens=1, operation="mlp_up_proj")  # line 262: median 0.116 ms
    assert float(one["seconds"]) == pytest.approx(0.116e-3, rel=1e-12) and one["src_rows"] == 1
    assert float(_pick(rows, tp=1, tokens=1, operation="attn_pre_proj")["seconds"]) == \
        pytest.approx(0.065e-3, rel=1e-12)
    assert float(_pick(rows, tp=1, tokens=1, operation="add")["seconds"]) == pytest.approx(0.002e-3)
    # lines 67 and 68 profile 2048 tokens at TP 1 twice: 1.694 and 1.693 ms -> their median
    twice = _pick(rows, tp=1, tokens=2048, operation="mlp_up_proj")
    assert twice["src_rows"] == 2
    assert float(twice["seconds"]) == pytest.approx(statistics.median([1.694, 1.693]) / 1e3, rel=1e-12)
    # lines 328 and 329: TP 2, 2048 tokens, 0.803 and 0.831 ms
    tp2 = _pick(rows, tp=2, tokens=2048, operation="mlp_up_proj")
    assert float(tp2["seconds"]) == pytest.approx(statistics.median([0.803, 0.831]) / 1e3, rel=1e-12)
    # 4 distinct (tp, tokens) x 10 operators, all on the A100 preset
    assert len(rows) == 4 * 10 and {r["gpu"] for r in rows} == {"a100"}


def test_vidur_mlp_refuses_a_model_whose_dimensions_differ():
    with pytest.raises(FieldError, match=r"vidur_mlp_excerpt.csv: row 2, column 'n_kv_head'"):
        convert_vidur_mlp(DATA / "vidur_mlp_excerpt.csv", "a100", "llama-3-8b")


def test_vidur_all_reduce_rows():
    # vidur data/profiling/network/a100_dgx/all_reduce.csv @ 7d47513
    rows = convert_vidur_all_reduce(DATA / "vidur_all_reduce_excerpt.csv", "a100", "a100_dgx")
    # lines 2 (2 workers, 1 per node) and 4970 (8 workers, 4 per node) span nodes: dropped
    assert {(r["tp"], r["bytes"]) for r in rows} == {(2, 2048), (2, 16777216), (8, 2048)}
    assert float(_pick(rows, tp=2, bytes=2048)["seconds"]) == pytest.approx(0.01e-3)  # line 996
    big = _pick(rows, tp=2, bytes=16777216)  # lines 1604, 1605: 0.139 ms both
    assert big["src_rows"] == 2 and float(big["seconds"]) == pytest.approx(0.139e-3)
    assert float(_pick(rows, tp=8, bytes=2048)["seconds"]) == pytest.approx(0.062e-3)  # line 4972
    assert all(r["model"] == "" and r["setup"] == "a100_dgx" for r in rows)


def test_splitwise_rows():
    # splitwise-sim data/perf_model.csv @ 8f99e7d (tests/data/README): prompt_time, token_time in ms
    rows = convert_splitwise(DATA / "splitwise_perf_model_excerpt.csv")
    prompt_128 = [59.55572199309245, 59.71699999645352, 59.61944203590974, 59.7486529732123,
                  59.2526649706997]  # lines 217-221 (line 307 repeats line 217 exactly)
    prompt_256 = [59.36281202593818, 59.73166698822752, 59.45910303853452, 59.13425999460742,
                  60.14856899855658]  # lines 367-371
    token_128 = [29.762305037895818, 29.26659482709081, 29.738654877062828, 29.54404005335321,
                 29.7180637341418]
    pre = _pick(rows, model="llama-2-70b", operation="prefill_batch", tokens=512)
    assert (pre["gpu"], pre["setup"], pre["tp"], pre["context"], pre["decodes"]) == \
        ("h100", "h100-80gb", 4, 512, 0)
    assert pre["src_rows"] == 10
    assert float(pre["seconds"]) == pytest.approx(statistics.median(prompt_128 + prompt_256) / 1e3, rel=1e-7)
    dec = _pick(rows, model="llama-2-70b", operation="decode_batch", generated=128)
    assert (dec["tokens"], dec["decodes"], dec["context"], dec["src_rows"]) == (1, 1, 512, 5)
    assert float(dec["seconds"]) == pytest.approx(statistics.median(token_128) / 1e3, rel=1e-7)
    # lines 692-696: BLOOM-176B on A100, TP 8, 64 prompts of 512 tokens
    bloom = _pick(rows, model="bloom-176b", operation="prefill_batch")
    assert (bloom["gpu"], bloom["tp"], bloom["tokens"], bloom["context"]) == ("a100", 8, 64 * 512, 512)
    assert float(bloom["seconds"]) == pytest.approx(11251.82795501314 / 1e3, rel=1e-7)
    # line 947 (h100-80gb-pcap, derived from the H100 rows, not measured) is dropped
    assert "h100-80gb-pcap" not in {r["setup"] for r in rows}
    # prefill (prompt, batch): (512, 1), (512, 64); decode: (512, 1, 128), (512, 1, 256), (512, 64, 128)
    assert len(rows) == 2 + 3


@pytest.mark.parametrize("name", ["out.csv", "out.csv.gz"])
def test_converted_rows_load_back(tmp_path, name):
    rows = convert_splitwise(DATA / "splitwise_perf_model_excerpt.csv")
    write_profile(rows, tmp_path / name)
    prof = load_profile(tmp_path / name)
    assert len(prof) == len(rows)
    assert np.allclose(prof.rows["seconds"], [float(r["seconds"]) for r in rows], rtol=0, atol=0)
    pre = prof.where(operation="prefill_batch")
    assert (pre["generated"] == ABSENT).all() and (pre["decodes"] == 0).all()


# --- the loader's checks ------------------------------------------------------------------------

def _write(tmp_path, text, name="bad.csv", encoding="utf-8"):
    f = tmp_path / name
    f.write_text(text, encoding=encoding)
    return f


def test_a_good_file_loads_and_converts_units(tmp_path):
    prof = load_profile(_write(tmp_path, HEADER.replace("seconds", "time_ms") + "\n" + GOOD + "\n"))
    row = prof.rows[0]
    assert row["seconds"] == pytest.approx(0.00012e-3) and row["tokens"] == 128
    assert row["decodes"] == ABSENT and row["model"] == "llama-2-7b"


def test_validated_rows_are_kept_across_processes_and_read_back_exactly(tmp_path, monkeypatch):
    """A second process (here: the loader's in-process memo cleared) reads the kept rows instead of
    validating the file again: the same array; a kept file that cannot be read is validated anew,
    and an edited file gets an entry of its own."""
    from theory import profiles

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    f = _write(tmp_path, f"{HEADER}\n{GOOD}\n", name="p.csv")
    first = load_profile(f).rows
    (entry,) = (tmp_path / "home" / "llmq" / "profiles").glob("*.npy")
    profiles._load.cache_clear()
    monkeypatch.setattr(profiles, "_check_row", None)  # validating again would fail: it is not done
    again = load_profile(f).rows
    assert again.dtype == first.dtype and np.array_equal(again, first) and not again.flags.writeable
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    entry.write_bytes(b"not an array")
    profiles._load.cache_clear()
    assert np.array_equal(load_profile(f).rows, first)
    f.write_text(f"{HEADER}\n{GOOD}\n{GOOD.replace(',128,', ',256,')}\n", encoding="utf-8")
    assert len(load_profile(f)) == 2 and len(list(entry.parent.glob("*.npy"))) == 2


def test_utf8_bom_is_accepted(tmp_path):
    prof = load_profile(_write(tmp_path, f"{HEADER}\n{GOOD}\n", encoding="utf-8-sig"))
    assert prof.rows["source"][0] == "vidur"


def test_missing_column(tmp_path):
    header = HEADER.replace("tp,", "")
    line = GOOD.replace("llama-2-7b,2,", "llama-2-7b,")
    with pytest.raises(FieldError, match=r"bad.csv: header \(row 1\), column 'tp'.*missing"):
        load_profile(_write(tmp_path, f"{header}\n{line}\n"))


@pytest.mark.parametrize("column", ["time", "latency", "duration"])
def test_time_column_with_unknown_unit(tmp_path, column):
    with pytest.raises(FieldError, match=rf"bad.csv: header \(row 1\), column '{column}'.*unit"):
        load_profile(_write(tmp_path, HEADER.replace("seconds", column) + f"\n{GOOD}\n"))


def test_two_time_columns(tmp_path):
    with pytest.raises(FieldError, match="exactly one time column"):
        load_profile(_write(tmp_path, f"{HEADER},time_ms\n{GOOD},0.12\n"))


def test_unknown_column(tmp_path):
    with pytest.raises(FieldError, match=r"column 'gpus'"):
        load_profile(_write(tmp_path, f"{HEADER},gpus\n{GOOD},a100\n"))


@pytest.mark.parametrize("value", ["-0.001", "0", "nan", "inf", "fast"])
def test_bad_time(tmp_path, value):
    line = GOOD.rsplit(",", 1)[0] + "," + value
    with pytest.raises(FieldError, match=r"bad.csv: row 3, column 'seconds'.*finite time > 0"):
        load_profile(_write(tmp_path, f"{HEADER}\n{GOOD}\n{line}\n"))


@pytest.mark.parametrize("value", ["12.5", "many", "0"])
def test_bad_token_count(tmp_path, value):
    line = GOOD.replace(",128,", f",{value},")
    with pytest.raises(FieldError, match=r"bad.csv: row 2, column 'tokens'.*integer >= 1"):
        load_profile(_write(tmp_path, f"{HEADER}\n{line}\n"))


@pytest.mark.parametrize("model, tp, why", [
    ("internlm-20b", 3, "n_heads = 40"),  # 40 heads
    ("internlm-20b", 5, "d_ff = 13824"),  # 5 divides the 40 heads but not the FFN width
])
def test_tp_must_split_the_model(tmp_path, model, tp, why):
    line = GOOD.replace("llama-2-7b,2,", f"{model},{tp},")
    with pytest.raises(FieldError, match=rf"bad.csv: row 2, column 'tp'.*{why}.*got {tp}"):
        load_profile(_write(tmp_path, f"{HEADER}\n{line}\n"))


def test_unknown_model(tmp_path):
    with pytest.raises(FieldError, match=r"bad.csv: row 2, column 'model'.*gpt-9"):
        load_profile(_write(tmp_path, f"{HEADER}\n{GOOD.replace('llama-2-7b', 'gpt-9')}\n"))


def test_unknown_gpu(tmp_path):
    with pytest.raises(FieldError, match=r"bad.csv: row 2, column 'gpu'.*b200"):
        load_profile(_write(tmp_path, f"{HEADER}\n{GOOD.replace('a100', 'b200')}\n"))


def test_an_operation_needs_its_columns(tmp_path):
    line = "vidur,a100,a100_dgx,,2,all_reduce,,,,,,1,0.00004"
    with pytest.raises(FieldError, match=r"row 2, column 'bytes'.*all_reduce"):
        load_profile(_write(tmp_path, f"{HEADER}\n{line}\n"))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(LlmqError, match="file not found"):
        load_profile(tmp_path / "nope.csv")
    with pytest.raises(LlmqError, match="no data rows"):
        load_profile(_write(tmp_path, HEADER + "\n"))


# --- GeMM shapes of vidur's operators -------------------------------------------------------------

def test_gemm_shapes_at_tp1_are_the_real_mode_gemms():
    for key in ("llama-2-7b", "llama-3-70b", "qwen-72b", "phi-2", "codellama-34b"):
        m = get_model(key)
        real = [(g.d_row, g.d_red) for g in m.linear_gemms("real")[:4]]
        assert [gemm_shape(m, op, 1) for op in VIDUR_GEMMS] == real


def test_gemm_shapes_match_the_calibration_file():
    # theory/data/calibration/vidur_a100_llama2_7b_linear.csv was converted separately, by hand
    path = resources.files("theory").joinpath("data", "calibration", "vidur_a100_llama2_7b_linear.csv")
    with open(str(path), newline="") as fh:
        shapes = {(r["op"], int(r["d_row"]), int(r["d_red"])) for r in csv.DictReader(fh)}
    m = get_model("llama-2-7b")
    assert shapes == {(op, *gemm_shape(m, op, 1)) for op in VIDUR_GEMMS}


def test_gemm_shape_splits_over_tp():
    m = get_model("llama-2-70b")
    for op in VIDUR_GEMMS:
        (r1, k1), (r8, k8) = gemm_shape(m, op, 1), gemm_shape(m, op, 8)
        assert r1 * k1 == 8 * r8 * k8
    with pytest.raises(FieldError, match="tp"):
        gemm_shape(m, "mlp_up_proj", 3)


# --- the packaged files -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def vidur_gemm():
    return load_profile("vidur_gemm")


def test_shipped_profiles_are_listed():
    assert set(shipped_profiles()) == {"vidur_gemm", "vidur_kernels", "vidur_all_reduce",
                                       "splitwise_perf_model", "llmservingsim_rtx4090",
                                       "llmservingsim_rtxpro6000", "llmservingsim_h100", "llmq_h100",
                                       "llmq_h200"}
    folder = resources.files("theory").joinpath("data", "profiles")
    readme = folder.joinpath("README.md").read_text(encoding="utf-8")
    for name, path in shipped_profiles().items():
        assert f"`{path.name}`" in readme, name
    for source in ("vidur", "splitwise-sim", "llmservingsim"):
        assert "MIT License" in folder.joinpath(f"LICENSE-{source}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["vidur_gemm", "vidur_kernels", "vidur_all_reduce", "splitwise_perf_model"])
def test_shipped_profile_loads(name, vidur_gemm):
    prof = vidur_gemm if name == "vidur_gemm" else load_profile(name)
    rows = prof.rows
    assert len(prof) > 0 and (rows["seconds"] > 0).all()
    for gpu in np.unique(rows["gpu"]):
        assert get_gpu(str(gpu)).key == gpu
    for model in np.unique(rows["model"]):
        if model:
            get_model(str(model))


def test_shipped_vidur_gemms_agree_with_the_calibration_file(vidur_gemm):
    # the same source rows, converted independently (6 significant digits, duplicates kept)
    path = resources.files("theory").joinpath("data", "calibration", "vidur_a100_llama2_7b_linear.csv")
    with open(str(path), newline="") as fh:
        calib = {}
        for r in csv.DictReader(fh):
            calib.setdefault((r["op"], int(r["d_col"])), []).append(float(r["seconds"]))
    rows = vidur_gemm.where(gpu="a100", model="llama-2-7b", tp=1)
    assert len(rows) == len(calib)
    for r in rows:
        assert r["seconds"] == pytest.approx(statistics.median(calib[(r["operation"], r["tokens"])]),
                                             rel=1e-5)


def test_shipped_times_grow_with_the_work(vidur_gemm):
    # a sanity property of measured data: 4096 tokens take longer than 8 in every GeMM series
    rows = vidur_gemm.rows
    series = lambda r: (str(r["gpu"]), str(r["model"]), int(r["tp"]), str(r["operation"]))  # noqa: E731
    small = {series(r): r["seconds"] for r in rows[rows["tokens"] == 8]}
    large = {series(r): r["seconds"] for r in rows[rows["tokens"] == 4096]}
    assert len(small) == len(large) == 4 * (17 * 4 + 3)  # 20 (GPU, model) pairs, Phi-2 at TP 1 only
    assert all(large[k] > small[k] for k in small)


def test_shipped_gemms_stay_under_their_gpu_preset_roofline(vidur_gemm):
    # Measured times cannot beat the preset's dense FP16 peak, nor read the weights faster than its
    # DRAM bandwidth; this checks the A40 preset's 149.7 TFLOP/s (the fastest A40 GeMM runs at
    # 0.9 of it, so FP32 accumulation runs at full rate) and the units of the conversion.
    rows = vidur_gemm.rows
    for gpu in np.unique(rows["gpu"]):
        preset, sel = get_gpu(str(gpu)), rows[rows["gpu"] == gpu]
        for model, op, tp in {(str(r["model"]), str(r["operation"]), int(r["tp"])) for r in sel}:
            s = sel[(sel["model"] == model) & (sel["operation"] == op) & (sel["tp"] == tp)]
            d_row, d_red = gemm_shape(get_model(model), op, tp)
            assert (2.0 * d_row * d_red * s["tokens"] / s["seconds"] < preset.peak_flops).all()
            assert (2.0 * d_row * d_red / s["seconds"] < preset.bandwidth).all()
