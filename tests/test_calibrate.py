"""Calibration: known rates recovered from timings the model generates, round trips through the
profile TOML, identifiability, the shipped public A100 data, and the command line.

Synthetic GeMM timings come from ``theory.cost.T_GeMM`` with known per-tile rates; synthetic batch
timings from ``theory.cost.T_batch`` on a profile written as TOML and loaded by
``theory.hardware`` (so the truth passes through the same loader users have).
"""

import json

import numpy as np
import pytest
import tomli_w

from llmq.cli import main
from theory.cost import Batch, T_batch, T_GeMM, T_GeMM_terms, build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu, load_gpus
from theory.models import get_model
from theory.validation.batch_fit import fit_batch
from theory.validation.calibrate import staircase_jumps
from theory.validation.calibration import FitOptions, profile_toml, write_profile
from theory.validation.gemm_fit import fit_gemm
from theory.validation.timings import BatchTimings, GemmTimings, read_timings, timings_path

A100 = get_gpu("a100")
LLAMA = get_model("llama-2-7b")
MISTRAL = get_model("mistral-7b")


# --- GeMM timings ---------------------------------------------------------------------------


def gemm_truth(seed, n=400):
    """Random GeMM shapes (not multiples of any tile, so tiles are distinguishable), and true
    rates: the A100 preset's times a seeded factor in [0.7, 1.3] per tile."""
    rng = np.random.default_rng(seed)
    mu = np.array(A100.mu) * np.exp(rng.uniform(np.log(0.7), np.log(1.3), len(A100.tiles)))
    d_row, d_col, d_red = rng.integers(1, 16385, n), rng.integers(1, 4097, n), rng.integers(1, 16385, n)
    count = rng.integers(1, 4, n)
    per_tile = np.stack([T_GeMM(d_row, d_col, d_red, t.t_row, t.t_col, t.t_red, m, A100.s)
                         for t, m in zip(A100.tiles, mu, strict=True)], axis=1)
    return rng, mu, (d_row, d_col, d_red, count), per_tile


def fitted_mu(cal):
    return np.array([p.value for p in cal.parameters if p.name.startswith("mu[")])


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_gemm_fit_recovers_known_rates_from_noise_free_timings(seed):
    _, mu, (d_row, d_col, d_red, count), per_tile = gemm_truth(seed)
    c0 = 5e-6
    seconds = count * (per_tile.min(axis=1) + c0)
    cal = fit_gemm(GemmTimings(d_row, d_col, d_red, count, seconds), A100, LLAMA, "real")
    assert cal.error.max_rel_error < 1e-9
    ident = [k for k, p in enumerate(cal.parameters[:len(mu)]) if p.identified]
    # every tile that is strictly fastest at >= 10% of the points is identified...
    ordered = np.sort(per_tile, axis=1)
    strict = ordered[:, 1] > ordered[:, 0] * (1 + 1e-9)
    support = np.bincount(per_tile.argmin(axis=1)[strict], minlength=len(mu))
    assert set(np.flatnonzero(support >= 0.1 * len(seconds))) <= set(ident)
    # ...and every identified rate, and c_0, is the true one (the acceptance bound is 1%)
    assert np.max(np.abs(fitted_mu(cal)[ident] / mu[ident] - 1)) < 1e-6
    assert cal.parameters[-1].value == pytest.approx(c0, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 4, 7])
def test_gemm_fit_with_half_percent_noise_recovers_the_main_tiles_to_one_percent(seed):
    rng, mu, (d_row, d_col, d_red, count), per_tile = gemm_truth(seed)
    c0 = 5e-6
    seconds = count * (per_tile.min(axis=1) + c0) * (1 + 0.005 * rng.standard_normal(len(count)))
    cal = fit_gemm(GemmTimings(d_row, d_col, d_red, count, seconds), A100, LLAMA, "real")
    main = np.flatnonzero(np.bincount(per_tile.argmin(axis=1), minlength=len(mu)) >= 0.1 * len(count))
    ident = [k for k, p in enumerate(cal.parameters[:len(mu)]) if p.identified]
    assert main.size and set(main) <= set(ident)
    # every rate reported as identified is within 1%: noise recruits no tile that is not there
    assert np.max(np.abs(fitted_mu(cal)[ident] / mu[ident] - 1)) < 0.01
    assert cal.parameters[-1].value == pytest.approx(c0, rel=0.01)
    assert 0.004 < cal.error.rel_rmse < 0.006  # the fit explains everything but the noise


def terms_truth(seed, folder, n=500, l2_gbs=None):
    """GeMM timings from the cost model itself (theory.cost.T_GeMM_terms) on an A100 with the
    memory floor and waves on (and the L2 traffic term at ``l2_gbs``), seeded per-tile rates in
    [0.7, 1.3] x the preset's, lowered where needed so that no tile's FLOP rate exceeds t*'s
    (Assumption 1, which the fit keeps with the L2 term), an achievable bandwidth of 0.7 x 2039 GB/s
    and c_0 = 4 us; a third of the GeMMs have 1-64 tokens (the floor binds there)."""
    rng = np.random.default_rng(seed)
    mu = np.array(A100.mu) * np.exp(rng.uniform(np.log(0.7), np.log(1.3), len(A100.tiles)))
    volume = np.array([t.t_row * t.t_col * t.t_red for t in A100.tiles], dtype=float)
    star = A100.tiles.index(A100.optimal_tile())
    mu = np.minimum(mu, mu[star] * volume[star] / volume)
    mu_table = {str(t): float(m) for t, m in zip(A100.tiles, mu, strict=True)}
    table = {"gpus": {"truth": {"base": "a100", "mu": mu_table, "memory_floor": True, "waves": True,
                                "eta_mem": 0.7, **({"l2_bandwidth_gbs": l2_gbs} if l2_gbs else {})}}}
    path = folder / "truth.toml"
    path.write_text(tomli_w.dumps(table))
    truth = load_gpus(path)["truth"]
    d_row, d_red = rng.integers(1, 16385, n), rng.integers(1, 16385, n)
    d_col = np.where(rng.random(n) < 1 / 3, rng.integers(1, 65, n), rng.integers(1, 4097, n))
    c0 = 4e-6
    seconds = T_GeMM_terms(build_cost_model(truth, LLAMA, "real"), d_row, d_col, d_red) + c0
    return rng, truth, (d_row, d_col, d_red, np.ones(n, dtype=np.int64)), seconds, c0


@pytest.mark.parametrize("seed", [2, 6])
def test_gemm_fit_with_every_term_on_recovers_rates_bandwidth_and_c0(seed, tmp_path):
    rng, truth, shape, seconds, c0 = terms_truth(seed, tmp_path)
    base = get_gpu("a100")  # the roofline preset: start and fallback; the fit switches the terms on
    cal = fit_gemm(GemmTimings(*shape, seconds), base, LLAMA, "real", FitOptions(floor=True, waves=True))
    assert cal.error.max_rel_error < 1e-6
    by_name = {p.name: p for p in cal.parameters}
    floor = by_name["eta_mem B (memory floor)"]
    assert floor.identified and floor.value == pytest.approx(0.7 * 2039, rel=1e-6)
    assert by_name["c_0 (per GeMM)"].value == pytest.approx(c0, rel=1e-6)
    ident = [k for k, p in enumerate(cal.parameters[:len(truth.mu)]) if p.identified]
    assert ident
    np.testing.assert_allclose(fitted_mu(cal)[ident], np.array(truth.mu)[ident], rtol=1e-6)
    # with 1% noise the bandwidth and c_0 come back to 1%
    noisy = seconds * (1 + 0.01 * rng.standard_normal(seconds.size))
    cal = fit_gemm(GemmTimings(*shape, noisy), base, LLAMA, "real", FitOptions(floor=True, waves=True))
    by_name = {p.name: p for p in cal.parameters}
    assert by_name["eta_mem B (memory floor)"].value == pytest.approx(0.7 * 2039, rel=0.01)
    assert by_name["c_0 (per GeMM)"].value == pytest.approx(c0, rel=0.05)
    # the written profile switches both terms on and reproduces the fit through the loader
    gpu = load_gpus(write_profile(cal, tmp_path / "terms.toml"))[cal.key]
    assert gpu.terms.memory_floor and gpu.terms.waves
    again = T_GeMM_terms(build_cost_model(gpu, LLAMA, "real"), *shape[:3]) + by_name["c_0 (per GeMM)"].value
    np.testing.assert_allclose(again, cal.predicted, rtol=1e-9)


@pytest.mark.parametrize("seed", [2, 6])
def test_gemm_fit_with_l2_traffic_recovers_its_bandwidth_and_reproduces_the_fit(seed, tmp_path):
    """Every term on (memory floor, waves, L2 traffic at 2,500 GB/s, c_0), noise-free timings: the
    search recovers the L2 and DRAM bandwidths to 1% and c_0 to 5% (it is not exact here: which
    tile is fastest where the traffic binds is a combinatorial choice the alternation settles
    only approximately), fits far better than without the term, and the written profile
    reproduces the fit through the loader."""
    _, _, shape, seconds, c0 = terms_truth(seed, tmp_path, l2_gbs=2500.0)
    base = get_gpu("a100")
    cal = fit_gemm(GemmTimings(*shape, seconds), base, LLAMA, "real",
                   FitOptions(floor=True, waves=True, l2=True))
    by_name = {p.name: p for p in cal.parameters}
    l2 = by_name["B_L2 (L2 traffic)"]
    assert l2.note.startswith("binds at")
    assert l2.value == pytest.approx(2500.0, rel=0.01)
    assert by_name["eta_mem B (memory floor)"].value == pytest.approx(0.7 * 2039, rel=0.01)
    assert by_name["c_0 (per GeMM)"].value == pytest.approx(c0, rel=0.05)
    assert cal.error.rel_rmse < 0.02
    without = fit_gemm(GemmTimings(*shape, seconds), base, LLAMA, "real",
                       FitOptions(floor=True, waves=True, l2=False))
    assert without.error.rel_rmse > 3 * cal.error.rel_rmse
    gpu = load_gpus(write_profile(cal, tmp_path / "l2.toml"))[cal.key]
    assert gpu.terms.l2_bandwidth == pytest.approx(l2.value * 1e9, rel=1e-12)
    again = T_GeMM_terms(build_cost_model(gpu, LLAMA, "real"), *shape[:3]) + by_name["c_0 (per GeMM)"].value
    np.testing.assert_allclose(again, cal.predicted, rtol=1e-9)


@pytest.mark.parametrize("l2", [False, True])
def test_gemm_fit_keeps_tile_rates_below_the_dense_peak_and_t_star(l2, tmp_path):
    """Timings three times faster than the roofline preset put every tile above the A100's dense
    FP16 peak (t* at 0.75 of it): the fitted rates stop at the peak, 2 t_row t_col t_red s mu <= F,
    and with the L2 term (Assumption 1 kept) no tile's FLOP rate exceeds t*'s, which stays the
    roofline's 256x128x32."""
    fast = load_gpus(_write(tmp_path / "fast.toml", {"gpus": {"fast": {
        "base": "a100", "mu": {str(t): 3.0 * m for t, m in zip(A100.tiles, A100.mu, strict=True)}}}}))["fast"]
    rng = np.random.default_rng(3)
    n = 300
    d_row, d_red, d_col = rng.integers(64, 16385, n), rng.integers(64, 16385, n), rng.integers(1, 4097, n)
    seconds = T_GeMM_terms(build_cost_model(fast, LLAMA, "real"), d_row, d_col, d_red)
    cal = fit_gemm(GemmTimings(d_row, d_col, d_red, np.ones(n, dtype=np.int64), seconds), A100, LLAMA,
                   "real", FitOptions(overhead=False, l2=l2))
    flops = np.array([2 * A100.s * cal.profile["mu"][str(t)] * t.t_row * t.t_col * t.t_red
                      for t in A100.tiles])
    assert flops.max() <= A100.peak_flops * (1 + 1e-9)
    assert flops.max() >= 0.99 * A100.peak_flops  # the bound binds: the data ask for more
    if l2:
        star = A100.tiles.index(A100.optimal_tile())
        assert str(A100.tiles[star]) == "256x128x32" and flops.max() <= flops[star] * (1 + 1e-9)


def _write(path, table):
    path.write_text(tomli_w.dumps(table))
    return path


def test_transformer_shapes_leave_tiles_of_one_t_col_interchangeable(tmp_path):
    # Every d_row a multiple of 256 and d_red of 64: tiles with the same t_col have proportional
    # tile-pair counts, so the data fix each GeMM's time but not which tile gives it.
    d_col = np.arange(1, 1025, 7)
    shapes = [(12288, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]
    d_row = np.repeat([r for r, _ in shapes], d_col.size)
    d_red = np.repeat([k for _, k in shapes], d_col.size)
    d_col = np.tile(d_col, len(shapes))
    per_tile = np.stack([T_GeMM(d_row, d_col, d_red, t.t_row, t.t_col, t.t_red, m, A100.s)
                         for t, m in zip(A100.tiles, A100.mu, strict=True)], axis=1)
    timings = GemmTimings(d_row, d_col, d_red, np.ones_like(d_row), per_tile.min(axis=1))
    cal = fit_gemm(timings, A100, MISTRAL, "real", FitOptions(overhead=False))
    assert cal.error.max_rel_error < 1e-9
    tiles = cal.parameters
    assert not any(p.identified for p in tiles)
    assert any("could be replaced there by" in p.note for p in tiles)
    # the written profile reproduces the timings: idle tiles were kept from undercutting the fit
    gpu = load_gpus(write_profile(cal, tmp_path / "p.toml"))[cal.key]
    again = np.stack([T_GeMM(d_row, d_col, d_red, t.t_row, t.t_col, t.t_red, m, gpu.s)
                      for t, m in zip(gpu.tiles, gpu.mu, strict=True)], axis=1).min(axis=1)
    np.testing.assert_allclose(again, timings.seconds, rtol=1e-9)


def test_one_gemm_shape_cannot_separate_the_rate_from_c0():
    seconds = np.array([1.00e-4, 1.01e-4, 0.99e-4, 1.00e-4])
    one = np.full(4, 4096)
    cal = fit_gemm(GemmTimings(one, np.full(4, 512), one, np.ones(4, int), seconds), A100, LLAMA)
    c0 = cal.parameters[-1]
    assert c0.name.startswith("c_0") and not c0.identified and c0.rel_se is None
    assert not any(p.identified for p in cal.parameters)
    assert cal.error.max_rel_error == pytest.approx(0.01, rel=0.01)  # only the mean is fitted


def test_gemm_profile_round_trip_and_tile_subset(tmp_path):
    _, _, (d_row, d_col, d_red, count), per_tile = gemm_truth(5, n=200)
    timings = GemmTimings(d_row, d_col, d_red, count, count * per_tile.min(axis=1))
    cal = fit_gemm(timings, A100, LLAMA, "paper", FitOptions(tiles="256x128x32,128x64,64x64x32", key="mine"))
    gpu = load_gpus(write_profile(cal, tmp_path / "sub.toml"))["mine"]
    assert [str(t) for t in gpu.tiles] == ["256x128x32", "128x64x32", "128x64x64", "64x64x32"]
    c0 = cal.parameters[-1].value
    again = count * (np.stack([T_GeMM(d_row, d_col, d_red, t.t_row, t.t_col, t.t_red, m, gpu.s)
                               for t, m in zip(gpu.tiles, gpu.mu, strict=True)], axis=1).min(axis=1) + c0)
    np.testing.assert_allclose(again, cal.predicted, rtol=1e-12)
    n_gemms = 5 * LLAMA.N + 1  # paper mode: 3N QKV + N + N FFN + the LM head
    assert gpu.overhead_s == pytest.approx(n_gemms * c0, rel=1e-12)
    assert list(tmp_path.iterdir()) == [tmp_path / "sub.toml"]  # no temporary file left behind


# --- Batch timings --------------------------------------------------------------------------

TRUE = {"theta_G": 1.3, "theta_D": 1.2, "mu_nLin": 2.0e5, "overhead_s": 2e-3}


@pytest.fixture(scope="module")
def true_cost_model(tmp_path_factory):
    """Mistral-7B (real mode) on an A100 whose GeMMs are 1.3x and GeMVs 1.2x slower than the preset,
    with mu_nLin = 2e5 tokens/s and 2 ms per batch: a profile written as TOML and loaded back."""
    table = {"base": "a100",
             "mu": {str(t): m / TRUE["theta_G"] for t, m in zip(A100.tiles, A100.mu, strict=True)},
             "mu_gemv": {str(g): m / TRUE["theta_D"]
                         for g, m in zip(A100.gemv_tiles, A100.mu_gemv, strict=True)},
             "mu_nLin": TRUE["mu_nLin"], "overhead_s": TRUE["overhead_s"]}
    path = tmp_path_factory.mktemp("truth") / "true.toml"
    path.write_text(tomli_w.dumps({"gpus": {"true": table}}))
    return build_cost_model(get_gpu("true", path), MISTRAL, "real")


def batches(seed, n=400, decode_only_size=None):
    """Seeded batches: half carry one prefill chunk (1..256 tokens, starting at 1..2047), each has
    0..128 decodes at positions 1..2047 (at least one when there is no chunk)."""
    rng = np.random.default_rng(seed)
    c = np.where(rng.random(n) < 0.5, rng.integers(1, 257, n), 0)
    start = rng.integers(1, 2048, n)
    b = rng.integers(0, 129, n)
    b[c == 0] = np.maximum(b[c == 0], 1)
    if decode_only_size is not None:
        c, b = np.zeros(n, dtype=int), np.full(n, decode_only_size)
    positions = tuple(rng.integers(1, 2048, k) for k in b)
    return rng, start, c, b, positions


def batch_timings(cm, seed, noise=0.0, sums_only=False, **kw):
    rng, start, c, b, positions = batches(seed, **kw)
    seconds = np.array([T_batch(cm, Batch.of([(int(i), int(k))] if k else [], p.tolist()))
                        for i, k, p in zip(start, c, positions, strict=True)])
    seconds *= 1 + noise * rng.standard_normal(seconds.size)
    sums = np.array([p.sum() for p in positions])
    return BatchTimings(start, c, b, sums, None if sums_only else positions, seconds)


def recovered(cal):
    """Relative errors of (mu(t*), GeMV scale, mu_nLin, overhead_s) against TRUE."""
    truth = (A100.rate(A100.optimal_tile()) / TRUE["theta_G"], 1 / TRUE["theta_D"], TRUE["mu_nLin"],
             TRUE["overhead_s"])
    return np.array([p.value / v - 1 for p, v in zip(cal.parameters, truth, strict=True)])


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_fit_recovers_known_parameters_from_noise_free_timings(true_cost_model, seed, tmp_path):
    timings = batch_timings(true_cost_model, seed)
    cal = fit_batch(timings, A100, MISTRAL, "real")
    assert all(p.identified for p in cal.parameters)
    assert np.max(np.abs(recovered(cal))) < 1e-9  # the acceptance bound is 1%
    # the written profile reproduces the timings through theory.cost
    cm = build_cost_model(load_gpus(write_profile(cal, tmp_path / "b.toml"))[cal.key], MISTRAL, "real")
    _, start, c, _, positions = batches(seed)
    again = [T_batch(cm, Batch.of([(int(i), int(k))] if k else [], p.tolist()))
             for i, k, p in zip(start, c, positions, strict=True)]
    np.testing.assert_allclose(again, timings.seconds, rtol=1e-9)


def test_batch_fit_with_noise(true_cost_model):
    # 0.2% multiplicative noise, 400 batches: the GeMM and GeMV rates and the overhead come back
    # to < 1%; mu_nLin (a small term, nearly collinear with the GeMMs) only to its standard error.
    for seed in (2, 3):
        cal = fit_batch(batch_timings(true_cost_model, seed, noise=0.002), A100, MISTRAL, "real")
        err = recovered(cal)
        assert np.all(np.abs(err[[0, 1, 3]]) < 0.01)
        nlin = cal.parameters[2]
        assert nlin.rel_se < 0.05 and abs(err[2]) < 4 * nlin.rel_se


def test_batch_fit_from_context_sums_is_close(true_cost_model):
    cal = fit_batch(batch_timings(true_cost_model, 0, sums_only=True), A100, MISTRAL, "real")
    assert np.all(np.abs(recovered(cal)[[0, 1]]) < 0.005)
    assert any("least-squares line" in n for n in cal.notes)


def test_unidentifiable_batch_terms_keep_their_base_values(true_cost_model):
    base_cm = build_cost_model(A100, MISTRAL, "real")
    # decodes only, always 32 of them: tau, hence the GeMM, non-linear and overhead columns are
    # constant; the GeMM scale absorbs them and the timings are still reproduced exactly
    cal = fit_batch(batch_timings(true_cost_model, 4, decode_only_size=32), A100, MISTRAL, "real")
    assert [p.identified for p in cal.parameters] == [True, True, False, False]
    assert cal.parameters[2].value == pytest.approx(base_cm.mu_nLin) and cal.parameters[3].value == 0
    assert cal.error.max_rel_error < 1e-9
    assert abs(recovered(cal)[1]) < 1e-9  # the GeMV scale is still the true one
    # prefill chunks only: no decode attention to fit
    _, start, c, _, _ = batches(5)
    c = np.maximum(c, 1)
    seconds = np.array([T_batch(true_cost_model, Batch.of([(int(i), int(k))]))
                        for i, k in zip(start, c, strict=True)])
    zeros = np.zeros_like(c)
    cal = fit_batch(BatchTimings(start, c, zeros, zeros, None, seconds), A100, MISTRAL, "real")
    assert [p.identified for p in cal.parameters] == [True, False, True, True]
    assert cal.parameters[1].value == 1.0 and np.max(np.abs(recovered(cal)[[0, 2, 3]])) < 1e-9


def test_batch_fit_without_overhead_keeps_eq7(true_cost_model):
    cal = fit_batch(batch_timings(true_cost_model, 7, n=100), A100, MISTRAL, "real", overhead=False)
    assert cal.parameters[3].value == 0 and not cal.parameters[3].identified
    assert any("not fitted" in n for n in cal.notes)
    assert cal.profile["overhead_s"] == 0
    # the 2 ms the model may not explain land in the other terms, and show as fit error
    assert cal.error.rel_rmse > 1e-3


# --- The shipped public data: vidur's A100 Llama-2-7B linear layers -------------------------


@pytest.fixture(scope="module")
def vidur():
    timings = read_timings("vidur-a100-llama2-7b")
    return timings, fit_gemm(timings, A100, LLAMA, "real")


def test_public_a100_fit_beats_the_uncalibrated_preset(vidur):
    _, cal = vidur
    err, base = cal.error, cal.base_error
    print(f"\nvidur A100 Llama-2-7B GeMMs ({len(cal.measured)} points): calibrated relative RMSE "
          f"{err.rel_rmse:.2%}, max {err.max_rel_error:.2%}; preset {base.rel_rmse:.2%}, "
          f"max {base.max_rel_error:.2%}")
    assert np.isfinite([err.rmse_s, err.rel_rmse, err.max_rel_error]).all()
    assert err.rel_rmse < base.rel_rmse and err.max_rel_error < base.max_rel_error
    assert err.rmse_s < base.rmse_s


def test_public_a100_steps_are_where_eq2_puts_them(vidur):
    # The large steps of the measured staircase (after 128, 256, 384 tokens) are steps of the
    # calibrated Eq. 2 too; inside the 136..256 plateau it predicts no step at all.
    timings, cal = vidur
    jumps = staircase_jumps(timings, {"model": cal.predicted}, (128, 256, 384, 200))
    big = [j for j in jumps if j["at"] in (128, 256, 384)]
    assert len(big) == 12 and all(j["measured"] > 0.04 and j["model"] > 0.2 for j in big)
    assert all(abs(j["model"]) < 1e-12 for j in jumps if j["at"] == 200)


def test_profile_toml_has_a_header_and_loads(vidur, tmp_path):
    _, cal = vidur
    text = profile_toml(cal, "vidur")
    assert text.startswith("# GPU profile fitted by `llmq calibrate` to gemm timings from vidur.")
    f = tmp_path / "g.toml"
    f.write_text(text)
    gpu = load_gpus(f)[cal.key]
    assert gpu.overhead_s > 0 and gpu.s == A100.s


# --- Command line ---------------------------------------------------------------------------


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_fits_the_shipped_example_and_writes_the_profile(capsys, tmp_path):
    out_dir = tmp_path / "prof"
    code, out, _ = run(capsys, "calibrate", "--out", str(out_dir), "--steps", "128,256")
    out_file = out_dir / "a100-calibrated.toml"
    assert code == 0 and out_file.is_file()
    assert "rel. RMSE" in out and "worst points" in out and "12288x4096" in out
    assert "a100-calibrated" in load_gpus(out_file)
    code, out, _ = run(capsys, "calibrate", "--out", str(out_dir), "--json", "--key", "k")
    row = json.loads(out)
    assert code == 0 and row["key"] == "k" and len(row["residuals"]) == 1044
    assert row["written"] == str(out_dir / "k.toml") and "k" in load_gpus(out_dir / "k.toml")
    assert row["error"]["rel_rmse"] < row["base_error"]["rel_rmse"]


def test_cli_fits_the_floor_and_waves_and_the_profile_reproduces_the_fit(capsys, tmp_path):
    code, out, _ = run(capsys, "calibrate", "--out", str(tmp_path), "--json", "--floor", "--waves")
    row = json.loads(out)
    assert code == 0
    names = {p["name"]: p for p in row["parameters"]}
    floor = names["eta_mem B (memory floor)"]
    assert 0 < floor["value"] < 2039  # GB/s, below the A100's datasheet bandwidth
    gpu = load_gpus(row["written"])[row["key"]]
    assert gpu.terms.memory_floor and gpu.terms.waves
    assert gpu.eta_mem * gpu.bandwidth == pytest.approx(floor["value"] * 1e9, rel=1e-12)
    plain = json.loads(run(capsys, "calibrate", "--out", str(tmp_path), "--json", "--key", "p")[1])
    assert row["error"]["rel_rmse"] < plain["error"]["rel_rmse"]  # the terms explain more
    # with --l2 as well: the profile carries the L2 bandwidth, no tile out-computes t*, and the
    # written profile reproduces the fitted times through the loader
    code, out, _ = run(capsys, "calibrate", "--out", str(tmp_path), "--json", "--floor", "--waves", "--l2",
                       "--key", "l2")
    l2 = json.loads(out)
    gpu = load_gpus(l2["written"])["l2"]
    assert code == 0 and gpu.terms.l2_bandwidth > 0 and gpu.optimal_tile() == A100.optimal_tile()
    t = read_timings(timings_path("vidur-a100-llama2-7b"))
    again = (T_GeMM_terms(build_cost_model(gpu, LLAMA, "real"), t.d_row, t.d_col, t.d_red)
             + gpu.overhead_s / sum(g.count for g in LLAMA.linear_gemms("real")))
    np.testing.assert_allclose(again / t.seconds - 1, l2["residuals"], atol=1e-9)


def test_cli_batch_timings(capsys, tmp_path, true_cost_model):
    t = batch_timings(true_cost_model, 6, n=60)
    rows = ["prefill_tokens,prefill_start,decode_count,decode_positions,seconds"]
    rows += [f"{c},{i},{b},{' '.join(map(str, p))},{float(s)!r}" for c, i, b, p, s in
             zip(t.prefill_tokens, t.prefill_start, t.decode_count, t.decode_positions, t.seconds,
                 strict=True)]
    f = tmp_path / "batches.csv"
    f.write_text("\n".join(rows) + "\n")
    code, out, err = run(capsys, "calibrate", "--timings", str(f), "--model", "mistral-7b", "--json",
                       "--out", str(tmp_path))
    assert code == 0, err
    assert json.loads(out)["error"]["max_rel_error"] < 1e-9


@pytest.mark.parametrize("argv, message", [
    (["--gpu", "b200"], "unknown GPU 'b200'"),
    (["--gpu", "a100:128x128"], "gpu: expected a GPU preset"),
    (["--timings", "missing.csv"], "file not found"),
    (["--steps", "128,x"], "steps"),
    (["--model", "gpt"], "unknown model"),
])
def test_cli_bad_input_exits_2(capsys, tmp_path, argv, message):
    code, _, err = run(capsys, "calibrate", "--out", str(tmp_path / "x"), *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_cli_bad_csv_and_tiles_with_batches(capsys, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("d_row,d_col,seconds\n64,64,1e-3\n")
    code, _, err = run(capsys, "calibrate", "--timings", str(f))
    assert code == 2 and "need the column(s) d_red" in err
    f.write_text("prefill_tokens,seconds\n64,1e-3\n128,2e-3\n")
    code, _, err = run(capsys, "calibrate", "--timings", str(f), "--tiles", "128x128")
    assert code == 2 and "tiles" in err
    with pytest.raises(FieldError, match="tiles"):
        from theory.validation.calibrate import calibrate
        calibrate(read_timings(f), A100, LLAMA, options=FitOptions(tiles="128x128"))
