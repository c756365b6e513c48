"""GPU presets, the tile roofline, shared-memory feasibility and user TOML overrides."""

import math

import pytest

from theory.errors import ConfigFileError, FieldError, LlmqError, UnknownNameError
from theory.hardware import (
    GPU,
    Tile,
    gemm_tile_rate,
    get_gpu,
    gpu_names,
    load_gpus,
    parse_tile,
    real_mode_terms,
    tile_fits,
)

REQUIRED = {"a100", "h100", "h200", "l40s", "rtx6000ada", "l4"}


def test_required_presets_exist_with_datasheet_sm_counts():
    assert REQUIRED <= set(gpu_names())
    sm = {"a100": 108, "h100": 132, "h200": 132, "l40s": 142, "rtx6000ada": 142, "l4": 58}
    for key, s in sm.items():
        assert get_gpu(key).s == s


def test_a100_tiles_are_the_papers_T_out_times_T_red():
    # Section 2.3 lists T_out^{A100} and T_red = {32, 64}; all fit in 163 KiB of shared memory.
    out = {(256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64)}
    tiles = {(t.t_row, t.t_col, t.t_red) for t in get_gpu("a100").tiles}
    assert tiles == {(r, c, k) for r, c in out for k in (32, 64)}


def test_ada_drops_the_large_k64_tiles_that_do_not_fit_99_kib():
    # CUTLASS sm80 multistage tiles (NVIDIA/cutlass generator.py): 256x128, 128x256, 256x64, 64x256
    # with K=64 need 120-160 KiB of shared memory.
    tiles = {str(t) for t in get_gpu("rtx6000ada").tiles}
    for big in ("256x128x64", "128x256x64", "256x64x64", "64x256x64"):
        assert big not in tiles
    for ok in ("256x128x32", "128x128x64", "64x64x64"):
        assert ok in tiles
    # the arithmetic behind it: 2 bytes x (256 + 128) x 64 x 3 stages = 144 KiB > 99 KiB
    assert not tile_fits(Tile(256, 128, 64), 99 * 1024, 3)
    assert tile_fits(Tile(128, 128, 64), 99 * 1024, 3)


def test_optimal_tile_matches_the_paper_on_a100():
    # Assumption 1's remark: on A100 t* is 128x256 or 256x128 and t*_red = 32.
    t = get_gpu("a100").optimal_tile()
    assert {t.t_row, t.t_col} == {128, 256} and t.t_red == 32
    assert t.t_lcm == math.lcm(t.t_row, t.t_col, t.t_red) == 256


@pytest.mark.parametrize("key", sorted(REQUIRED))
def test_optimal_tile_has_maximal_flop_rate(key):
    gpu = get_gpu(key)
    best = max(gpu.flop_rate(t) for t in gpu.tiles)
    assert gpu.flop_rate(gpu.optimal_tile()) == pytest.approx(best, rel=1e-12)
    assert best <= gpu.peak_flops  # a roofline never exceeds the datasheet peak


def test_roofline_rate_by_hand():
    # 256x128x32 on A100 with eta=0.75, rho=2: compute 2*256*128*32/(0.75*312e12/108)
    # = 0.9679 us; memory 2*(384)*32/(2*2039e9/108) = 0.6509 us -> compute bound.
    rate = gemm_tile_rate(Tile(256, 128, 32), 312e12, 2039e9, 108, 0.75, 2.0)
    assert 1 / rate == pytest.approx(2 * 256 * 128 * 32 / (0.75 * 312e12 / 108), rel=1e-12)
    # 64x64x32: memory bound, 2*128*32/(2*2039e9/108)
    rate = gemm_tile_rate(Tile(64, 64, 32), 312e12, 2039e9, 108, 0.75, 2.0)
    assert 1 / rate == pytest.approx(2 * 128 * 32 / (2 * 2039e9 / 108), rel=1e-12)


def test_restrict_to_a_tile_subset():
    gpu = get_gpu("a100").restrict("128x128")
    assert {str(t) for t in gpu.tiles} == {"128x128x32", "128x128x64"}
    assert gpu.optimal_tile().t_lcm == 128
    assert get_gpu("a100").restrict("256x128x32").tiles == (Tile(256, 128, 32),)
    with pytest.raises(FieldError, match="tiles"):
        get_gpu("a100").restrict("96x96")


def test_aliases_and_case():
    assert get_gpu("RTX-6000-Ada").key == "rtx6000ada"
    assert get_gpu("A100-SXM4-80GB").key == "a100"


def test_unknown_gpu_names_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown GPU 'b200'.*a100"):
        get_gpu("b200")
    assert issubclass(UnknownNameError, ValueError)


def test_user_toml_overrides_and_pins(tmp_path):
    f = tmp_path / "gpus.toml"
    f.write_text("""
[gpus.myA100]
base = "a100"
bandwidth_gbs = 1935
t_star = [128, 128, 32]
mu_nLin = 3.0e5
overhead_s = 0.002
[gpus.myA100.mu]
"128x128x32" = 1.0e6
""")
    gpu = get_gpu("myA100", f)
    assert gpu.bandwidth == 1935e9 and gpu.mu_nLin == 3.0e5 and gpu.overhead_s == 0.002
    assert gpu.rate(Tile(128, 128, 32)) == 1.0e6
    assert gpu.optimal_tile() == Tile(128, 128, 32)
    assert get_gpu("a100", f).bandwidth == 2039e9  # presets stay as they were


@pytest.mark.parametrize("key, terms", [
    ("rtx6000ada", "memory_floor = true"), ("l4", "memory_floor = true"),
])
def test_real_mode_uncalibrated_preset_is_its_roofline_with_the_unfitted_terms(tmp_path, key, terms):
    """Real mode on a preset without a calibration is the roofline preset with the terms of its
    tile set switched on: the same profile as a user file restating them, still marked roofline;
    paper mode is the roofline preset field for field."""
    import numpy as np

    from theory.builder import CostSpec, cost_model
    from theory.cost import Batch, T_batch, T_Lin

    f = tmp_path / "g.toml"
    f.write_text(f'[gpus.mine]\nbase = "{key}"\n{terms}\n[gpus.plain]\nbase = "{key}"\n')
    real, mine = cost_model(CostSpec(key, mode="real")), cost_model(CostSpec("mine", mode="real", gpu_file=f))
    assert real.gpu.terms == mine.gpu.terms and real.gpu.calibration == "roofline, uncalibrated"
    tau = np.arange(1, 2100, 13)
    assert np.array_equal(T_Lin(real, tau), T_Lin(mine, tau))
    b = Batch.of(prefill=[(1, 300), (257, 100)], decode=[5, 900, 4000])
    assert T_batch(real, b) == T_batch(mine, b)
    assert T_Lin(real, 1) > T_Lin(cost_model(CostSpec("plain", mode="real", gpu_file=f)), 1)  # the floor
    assert cost_model(CostSpec(key, mode="paper")).gpu == get_gpu(key)


def test_real_mode_terms_must_need_no_fit():
    """A tile set's real-mode terms may name only the terms with no fitted number."""
    assert real_mode_terms("sm80") == {"memory_floor": True, "waves": False}
    with pytest.raises(FieldError) as exc:
        real_mode_terms("sm80", {"real_mode": {"sm80": {"memory_floor": True, "gemm_overhead_s": 4e-6}}})
    assert exc.value.field == "real_mode.sm80" and "gemm_overhead_s" in str(exc.value)


@pytest.mark.parametrize("body, field", [
    ('[gpus.x]\nbase = "a100"\nsm_count = 0', "gpus.x.sm_count"),
    ('[gpus.x]\nbase = "a100"\npeak_fp16_tflops = -1.0', "gpus.x.peak_fp16_tflops"),
    ('[gpus.x]\nbase = "a100"\n[gpus.x.mu]\n"256x128x32" = 0.0', "gpus.x.mu.256x128x32"),
    ('[gpus.x]\nbase = "a100"\n[gpus.x.mu]\n"96x96x32" = 1.0', "gpus.x.mu"),
    ('[gpus.x]\nbase = "a100"\nt_star = [96, 96, 32]', "gpus.x.t_star"),
    ('[gpus.x]\nbase = "a100"\nbogus = 1', "gpus.x"),
    ('[gpus.x]\nbase = "a100"\noverhead_s = -1', "gpus.x.overhead_s"),
])
def test_bad_profile_fields_are_named(tmp_path, body, field):
    f = tmp_path / "g.toml"
    f.write_text(body)
    with pytest.raises(FieldError) as exc:
        load_gpus(f)
    assert exc.value.field == field


def test_unknown_base_and_tileset(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[gpus.x]\nbase = "b200"')
    with pytest.raises(UnknownNameError, match="base GPU"):
        load_gpus(f)
    f.write_text('[gpus.x]\nname="x"\nsm_count=1\npeak_fp16_tflops=1.0\nbandwidth_gbs=1.0\n'
                 'memory_gb=1.0\nsmem_per_block_kib=99\ntileset="sm99"')
    with pytest.raises(UnknownNameError, match="tile set"):
        load_gpus(f)


def test_malformed_toml(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text("[gpus.x\nbase=")
    with pytest.raises(ConfigFileError, match="malformed TOML"):
        load_gpus(f)
    with pytest.raises(ConfigFileError, match="not found"):
        load_gpus(tmp_path / "missing.toml")


@pytest.mark.parametrize("text", ["256x128x", "0x128x32", "axb", "1", ""])
def test_parse_tile_rejects_garbage(text):
    with pytest.raises(LlmqError):
        parse_tile(text)


def test_gpu_is_immutable():
    with pytest.raises(AttributeError):
        get_gpu("a100").s = 1  # type: ignore[misc]
    assert isinstance(get_gpu("a100"), GPU)
