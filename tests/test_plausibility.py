"""The roofline screen of measured rows (theory.validation.plausibility):
two-sided on hand-computed bounds."""

import numpy as np
import pytest

from theory.config import read_packaged
from theory.profiles import load_profile
from theory.validation.plausibility import REASON, implausible, lower_bound
from theory.validation.validate import validate

HEADER = "source,gpu,model,tp,operation,tokens,decodes,context,bytes,seconds"
HEADROOM = read_packaged("plausibility.toml")["clock_headroom"]
A100_PEAK, A100_BW, A100_L2 = 312e12, 2039e9, 40 * 2**20  # A100 datasheet; L2 from the whitepaper


def _rows(tmp_path, lines: list[str]) -> np.ndarray:
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n" + "\n".join(lines) + "\n")
    return load_profile(path).rows


def _gemm_bound() -> float:
    """Llama-2-7B's gate + up projection (2 x 11008 rows, 4096 wide) over 4096 tokens on one A100:
    compute bound, 2 d_row d_red tokens FLOPs at the peak with the clock headroom."""
    return 2 * 22016 * 4096 * 4096 / (HEADROOM * A100_PEAK)


def _decode_bound() -> float:
    """One decode of Llama-2-70B at TP 2 with 512 cached tokens on A100s: memory bound, one GPU's
    weight shard and the decode's K/V cache beyond the L2, over the DRAM bandwidth."""
    layer = (10240 // 2) * 8192 + 8192 * (8192 // 2) + (2 * 28672 // 2) * 8192 + 8192 * (28672 // 2)
    weights = 2 * (80 * layer + 16000 * 8192)  # 80 layers and half the 32,000-row vocab projection
    kv = 2 * 2 * 80 * (8 // 2 * 128) * 512  # K and V, 80 layers, 4 KV heads of 128 per GPU, fp16
    return (weights + kv - A100_L2) / A100_BW


@pytest.mark.parametrize(("line", "bound"), [
    ("x,a100,llama-2-7b,1,mlp_up_proj,4096,,,,{t}", _gemm_bound),
    ("x,a100,llama-2-70b,2,decode_batch,1,1,512,,{t}", _decode_bound),
])
def test_a_row_below_its_bound_is_screened_and_one_at_it_is_not(tmp_path, line, bound):
    b = bound()
    rows = _rows(tmp_path, [line.format(t=f"{b:.12g}"), line.format(t=f"{b * 1.0001:.12g}"),
                            line.format(t=f"{b * 0.999:.12g}"), line.format(t=f"{b * 0.5:.12g}")])
    assert lower_bound(rows) == pytest.approx(b, rel=1e-9)
    bad, _ = implausible(rows)
    assert bad.tolist() == [False, False, True, True]


def test_no_bound_for_element_wise_kernels_and_none_below_the_l2_for_collectives(tmp_path):
    rows = _rows(tmp_path, ["x,a100,llama-2-7b,1,mlp_act,4096,,,,1e-9",
                            "x,a100,,2,all_reduce,,,,1048576,1e-9",
                            f"x,a100,,2,all_reduce,,,,{2 * A100_L2},1e-9"])
    bound = lower_bound(rows)
    assert np.isnan(bound[0]) and bound[1] == 0.0
    assert bound[2] == pytest.approx(A100_L2 / A100_BW, rel=1e-12)  # the message less the L2
    assert implausible(rows)[0].tolist() == [False, False, True]


def test_the_splitwise_rows_that_beat_their_bound_are_left_out_of_every_score():
    """The 64 x 512-token prefill of Llama-2-70B at TP 2 is measured at 0.79 s (A100) and 0.36 s
    (H100), where its linear-layer FLOPs alone (2 x 68.98e9 parameters' worth per token, an upper
    estimate of the linear weights) need more than 5 s and 1.8 s at the peak with the headroom."""
    prof = load_profile("splitwise_perf_model")
    bad, bound = implausible(prof.rows)
    got = {(str(r["gpu"]), int(r["tp"]), str(r["operation"]), int(r["tokens"])) for r in prof.rows[bad]}
    assert got == {("a100", 2, "prefill_batch", 32768), ("h100", 2, "prefill_batch", 32768)}
    linear = 2 * 32768 * (68.98e9 - 2 * 32000 * 8192)  # less the two embedding tables
    assert bound[bad][0] >= linear / (2 * HEADROOM * A100_PEAK) > 5.0
    report = validate({"splitwise_perf_model": prof})
    listed = [r for r in report.not_predicted if r["reason"] == REASON]
    assert sorted((r["gpu"], r["n"]) for r in listed) == [("a100", 1), ("h100", 1)]
    assert len(report.screened) == 2 and all(r["seconds"] < r["bound_s"] for r in report.screened)
    group = next(g for g in report.groups if (g["gpu"], g["model"], g["tp"], g["operation"])
                 == ("a100", "llama-2-70b", 2, "prefill_batch"))
    assert group["n"] == group["shipped_n"] == int(((prof.rows["gpu"] == "a100") & (prof.rows["tp"] == 2)
                                                    & (prof.rows["operation"] == "prefill_batch")).sum()) - 1
