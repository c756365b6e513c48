"""The shipped calibrated presets (theory/data/calibrated_gpus.toml): refitting from the packaged
profiles reproduces them, their provenance states the split and residuals, and only GPUs with
public data are calibrated."""

import numpy as np
import pytest

from theory.config import read_packaged
from theory.hardware import CALIBRATED_FILE, calibrated_keys, get_gpu, gpu_names
from theory.profiles import load_profile
from theory.validation.gemm import gemm_rows
from theory.validation.presets_fit import GEMM_PROFILES, fit_allreduce, fit_preset

SHIPPED = read_packaged(CALIBRATED_FILE)


def test_refitting_a40_reproduces_the_shipped_preset():
    fields, prov = fit_preset("a40", load_profile("vidur_gemm").rows)
    shipped = SHIPPED["gpus"]["a40"]
    assert set(fields) == set(shipped)
    for k, v in fields.items():
        if k == "mu":
            assert v == pytest.approx(shipped["mu"], rel=1e-9)
        else:
            assert v == pytest.approx(shipped[k], rel=1e-9)
    assert prov["held_out_error"] == pytest.approx(SHIPPED["provenance"]["a40"]["held_out_error"], rel=1e-9)


def test_refitting_rtx4090_reproduces_the_shipped_preset():
    fields, prov = fit_preset("rtx4090", load_profile("llmservingsim_rtx4090").rows,
                              profile="llmservingsim_rtx4090")
    shipped = SHIPPED["gpus"]["rtx4090"]
    assert set(fields) == set(shipped)
    assert fields["mu"] == pytest.approx(shipped["mu"], rel=1e-9)
    assert fields["eta_mem"] == pytest.approx(shipped["eta_mem"], rel=1e-9)
    assert prov["held_out_error"] == pytest.approx(SHIPPED["provenance"]["rtx4090"]["held_out_error"],
                                                   rel=1e-9)
    assert "allreduce_latency_s" not in fields  # one GPU: no collective measured


def test_refitting_rtxpro6000_reproduces_the_shipped_preset_and_its_call_time():
    fields, prov = fit_preset("rtxpro6000", load_profile("llmservingsim_rtxpro6000").rows,
                              profile="llmservingsim_rtxpro6000")
    shipped = SHIPPED["gpus"]["rtxpro6000"]
    assert set(fields) == set(shipped) and "attention_call_s" in fields
    assert fields["mu"] == pytest.approx(shipped["mu"], rel=1e-9)
    assert fields["attention_call_s"] == pytest.approx(shipped["attention_call_s"], rel=1e-9)
    # written because it lowers every kind's held-out median and p90 (both models, TP 1)
    for kind in prov["attention_held_out_error"].values():
        assert all(kind["after"][q] < kind["before"][q] for q in ("median", "p90"))


def test_the_all_reduce_law_is_refitted_from_the_dgx_profile():
    fields, prov = fit_allreduce("h100")
    assert fields == pytest.approx({k: SHIPPED["gpus"]["h100"][k] for k in fields}, rel=1e-9)
    assert prov["allreduce_setup"] == "h100_dgx" and prov["allreduce_error"]["median"] < 0.1
    assert fit_allreduce("a40") is None  # vidur has no A40 network profile


def test_shipped_rates_stay_below_the_dense_peak_and_keep_the_roofline_t_star():
    """With the L2 term the fit bounds every tile's FLOP rate by the dense FP16 peak and by t*'s
    (theory.validation.presets_fit.L2_NOTE): recomputed here from the file and gpus.toml's peak."""
    for key in calibrated_keys():
        roofline, gpu = get_gpu(key), get_gpu(key, calibrated=True)
        assert gpu.terms.l2_bandwidth > 0
        flops = {t: 2 * gpu.s * SHIPPED["gpus"][key]["mu"][str(t)] * t.t_row * t.t_col * t.t_red
                 for t in gpu.tiles}
        assert max(flops.values()) <= roofline.peak_flops * (1 + 1e-9)
        star = roofline.optimal_tile()
        assert gpu.optimal_tile() == star and max(flops.values()) <= flops[star] * (1 + 1e-9)


def test_provenance_and_which_gpus_are_calibrated():
    with_data = {g: name for name in GEMM_PROFILES for g in gemm_rows(load_profile(name).rows).gpu.tolist()}
    assert calibrated_keys() == sorted(with_data) == ["a100", "a40", "h100", "h200", "rtx4090", "rtxpro6000"]
    commits = {"vidur_gemm": "7d47513363ec447a741ac5e47241580b47724fbf",
               "llmservingsim_rtx4090": "5daddb21a545658d5150b535712d0494584b5278",
               "llmservingsim_rtxpro6000": "5daddb21a545658d5150b535712d0494584b5278",
               "llmq_h200": "59996c9982c51cf8a0ccb3367e7edb54da5a3416"}
    for key in calibrated_keys():
        prov = SHIPPED["provenance"][key]
        assert prov["profile"] == with_data[key]
        assert commits[prov["profile"]] in prov["source"]
        assert "held out" in prov["split"] and prov["n_train"] > 0 and prov["n_held_out"] > 0
        assert 0 < prov["held_out_error"]["median"] < prov["held_out_error"]["p90"] < 1
        gpu = get_gpu(key, calibrated=True)  # real mode: the calibration, the measured law on top
        assert gpu.calibrated and gpu.calibration == (f"{prov['summary']}; linear GeMMs: measured "
                                                      f"profile {prov['profile']}")
        assert get_gpu(f"{key}-tile", calibrated=True).calibration == prov["summary"]
        assert np.allclose([gpu.mu[gpu.tiles.index(t)] for t in gpu.tiles],
                           [SHIPPED["gpus"][key]["mu"][str(t)] for t in gpu.tiles])
    for key in set(gpu_names()) - set(calibrated_keys()):
        assert get_gpu(key, calibrated=True).calibration == "roofline, uncalibrated"


def test_paper_mode_uses_the_roofline_presets_unchanged():
    """Paper mode never sees the calibration: its GPU is the roofline preset field for field, and
    so are its bounds."""
    from theory.bounds import compute_bounds
    from theory.builder import CostSpec, cost_model
    from theory.cost import build_cost_model
    from theory.models import get_model
    from theory.workload import get_workload

    w = get_workload("table1")
    for key in calibrated_keys():
        paper = cost_model(CostSpec(key, "mistral-7b", "paper"))
        roofline = get_gpu(key)
        assert paper.gpu == roofline and not paper.gpu.calibrated and paper.plain
        by_hand = build_cost_model(roofline, get_model("mistral-7b"), "paper")
        assert compute_bounds(paper, w).as_dict() == compute_bounds(by_hand, w).as_dict()
        assert cost_model(CostSpec(key, "mistral-7b", "real")).gpu != roofline  # real mode: calibrated


def test_one_all_reduce_law_over_several_group_sizes_is_recovered():
    """fit_allreduce_law with one tp per point: latency + 2 (tp-1)/tp bytes / busbw, computed here
    from known values over TP 2, 4, 8, comes back exactly; a bad tp is refused by name."""
    from theory.errors import FieldError
    from theory.terms import fit_allreduce_law

    b = np.tile(np.geomspace(2**20, 2**26, 7), 3)
    tp = np.repeat([2, 4, 8], 7)
    t = 3e-5 + 2 * (tp - 1) / tp * b / 240e9
    lat, bw = fit_allreduce_law(b, t, tp)
    assert lat == pytest.approx(3e-5, rel=1e-9) and bw == pytest.approx(240e9, rel=1e-9)
    with pytest.raises(FieldError, match="tp"):
        fit_allreduce_law(b, t, np.where(tp == 8, 1, tp))
