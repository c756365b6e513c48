"""Mixture-of-experts layers (theory.moe): the model fields and their checks, the uniform routing law
against a simulated top-k router, the grouped-GeMM time against recomputations by hand, the three
twins (numeric, symbolic, compiled) against each other, Theorem 1's least work per token, and the
MoE block of the measured profile."""

import math

import numpy as np
import pytest

from theory.builder import CostSpec, cost_model
from theory.cost import T_GeMM_terms, T_Lin, linear_per_token
from theory.errors import FieldError
from theory.models import get_model, load_models, model_names
from theory.moe import (
    active_experts,
    active_experts_with_replacement,
    expected_blocks,
    forced_loads,
)

MOE_PRESETS = ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b", "gpt-oss-120b")


# --- the fields -----------------------------------------------------------------------------------


def _user_model(tmp_path, body: str, base: str = "qwen3-30b-a3b"):
    f = tmp_path / "models.toml"
    f.write_text(f'[models.mine]\nbase = "{base}"\n{body}\n', encoding="utf-8")
    return load_models(f)["mine"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("experts_per_token = 129", "experts_per_token"),  # k > E
        ("experts_per_token = 0", "experts_per_token"),  # k < 1
        ("n_experts = 0", "n_experts"),  # E < 1
        ("n_shared_experts = 1", "d_ff_shared"),  # a shared expert without its width
        ("d_ff_shared = 512", "n_shared_experts"),  # a width without shared experts
        ('routing = "zipf"', "routing"),
        ("first_dense_layers = 48", "first_dense_layers"),
        ("d_ff_expert = 0", "d_ff_expert"),
    ],
)
def test_bad_moe_fields_name_the_field(tmp_path, body, field):
    with pytest.raises(FieldError, match=rf"models\.mine\.{field}"):
        _user_model(tmp_path, body)


def test_a_moe_field_on_a_dense_model_asks_for_n_experts(tmp_path):
    with pytest.raises(FieldError, match=r"models\.mine\.n_experts"):
        _user_model(tmp_path, "experts_per_token = 2", base="mistral-7b")


def test_the_presets():
    qwen = get_model("qwen3-30b-a3b")
    assert (qwen.moe.n_experts, qwen.moe.experts_per_token, qwen.moe.d_ff_expert) == (128, 8, 768)
    assert qwen.n_moe_layers == 48 and qwen.kv_bytes_per_token() == 2 * 48 * 4 * 128 * 2
    assert get_model("mixtral-8x7b").moe.experts_per_token == 2
    assert get_model("gpt-oss-20b").moe.n_experts == 32 and get_model("gpt-oss-120b").moe.n_experts == 128
    for key in model_names():
        m = get_model(key)
        if key not in MOE_PRESETS:  # dense models: no experts, nothing added
            assert m.moe is None and m.expert_gemms("real") == () and m.moe_elements_per_token("real") == 0


def test_active_parameters_per_token_match_the_model_cards():
    """The weights a token's linear GeMMs touch (with its k experts) against the active parameter counts
    the model cards state, within 5% (norms, biases and sinks are not counted): Qwen3-30B-A3B 3.3B and
    Mixtral 12.9B count the input embedding table too, the gpt-oss card's 3.6B and 5.1B do not."""
    stated = {
        "qwen3-30b-a3b": (3.3e9, True),
        "mixtral-8x7b": (12.9e9, True),
        "gpt-oss-20b": (3.6e9, False),
        "gpt-oss-120b": (5.1e9, False),
    }
    for key, (active, with_embedding) in stated.items():
        m = get_model(key)
        touched = m.linear_flops_per_token("real") / 2 + (m.d_out * m.d_x if with_embedding else 0)
        assert touched == pytest.approx(active, rel=0.05), key


def test_moe_layers_pattern(tmp_path):
    m = _user_model(tmp_path, "first_dense_layers = 3\nmoe_every = 2\nd_ff = 6144")
    assert m.n_moe_layers == len([i for i in range(3, 48) if (i + 1) % 2 == 0])
    dense = [g for g in m.linear_gemms("real") if g.name.startswith("dense")]
    assert {g.count for g in dense} == {48 - m.n_moe_layers}


# --- the routing law against a simulated router ---------------------------------------------------


def _router_loads(rng, E: int, k: int, tau: int, runs: int) -> np.ndarray:
    """Per-expert token counts of ``runs`` batches of ``tau`` tokens, each token picking ``k`` distinct
    experts uniformly (the ``k`` smallest of ``E`` uniform scores: a top-k router on random logits)."""
    out = np.zeros((runs, E), dtype=np.int64)
    for r in range(runs):
        picks = np.argpartition(rng.random((tau, E)), k - 1, axis=1)[:, :k]
        out[r] = np.bincount(picks.ravel(), minlength=E)
    return out


@pytest.mark.parametrize(("E", "k", "tau"), [(8, 2, 2), (8, 2, 5), (32, 4, 3), (128, 8, 4), (128, 8, 40)])
def test_active_experts_against_a_simulated_router(E, k, tau):
    rng = np.random.default_rng(1234 + 7 * E + tau)
    loads = _router_loads(rng, E, k, tau, 6000)
    assert np.all(loads.sum(axis=1) == tau * k) and np.all(loads <= tau)  # k distinct experts per token
    active = (loads > 0).sum(axis=1)
    mean, se = active.mean(), active.std(ddof=1) / math.sqrt(active.size)
    assert abs(float(active_experts(E, k, tau)) - mean) <= 4 * se + 1e-12
    for t_col in (16, 64):  # the exact expectation of the column blocks over the binomial law
        blocks = (-(-loads // t_col)).sum(axis=1)
        b_mean, b_se = blocks.mean(), blocks.std(ddof=1) / math.sqrt(blocks.size)
        assert abs(float(expected_blocks(E, k, tau, t_col)[0]) - b_mean) <= 4 * b_se + 1e-9


def test_balls_into_bins_undercounts_distinct_top_k():
    """With replacement a token may pick an expert twice: the simulated router rejects that form where
    the two differ (few experts), by many standard errors."""
    E, k, tau = 8, 2, 2
    loads = _router_loads(np.random.default_rng(5), E, k, tau, 20000)
    active = (loads > 0).sum(axis=1)
    se = active.std(ddof=1) / math.sqrt(active.size)
    assert float(active_experts_with_replacement(E, k, tau)) < active.mean() - 20 * se
    assert float(active_experts(E, k, tau)) == pytest.approx(E * (1 - (1 - k / E) ** tau), rel=1e-15)


def test_expected_blocks_is_the_full_binomial_sum():
    from scipy.stats import binom

    for tau in (1, 3, 17, 300, 5000):
        n = np.arange(tau + 1)
        full = 128 * np.sum(binom.pmf(n, tau, 8 / 128) * -(-n // 64))
        assert expected_blocks(128, 8, tau, 64)[0] == pytest.approx(full, rel=1e-12)
    assert expected_blocks(8, 8, 100, 64)[0] == 8 * 2  # k = E: every expert gets every token


@pytest.mark.parametrize(("E", "k"), [(128, 8), (8, 2), (8, 8)])  # k = E: every expert gets every token
def test_expected_blocks_of_a_2d_array_row_by_row(E, k):
    tau = np.array([[0, 1, 7, 64], [65, 300, 1000, 5000], [3, 3, 4096, 2]])
    for t_col in (16, 64, 128):
        got = expected_blocks(E, k, tau, t_col)
        assert got.shape == tau.shape
        for row, t in zip(got, tau, strict=True):
            np.testing.assert_array_equal(row, expected_blocks(E, k, t, t_col))


@pytest.mark.parametrize(
    ("gpu", "model", "mode"),
    [("h100", "qwen3-30b-a3b", "real"), ("a100", "mixtral-8x7b", "paper")],
)
def test_moe_time_and_linear_time_of_a_2d_array_row_by_row(gpu, model, mode):
    """``MoETerms.time`` and ``T_Lin`` broadcast over a 2-D token array as the dense terms do: each row
    equals the 1-D result of that row (also with an expert-parallel group and its dispatch times)."""
    from dataclasses import replace

    cm = cost_model(CostSpec(gpu, model, mode=mode))
    tau = np.array([[0, 1, 2, 17], [64, 65, 1000, 8192], [4096, 3, 300, 31]])
    grouped = replace(cm.lin.moe, ep=2, comm_tok_s=1e-7, comm_batch_s=2e-5)
    for m in (cm.lin.moe, grouped):
        got = m.time(tau)
        assert got.shape == tau.shape
        for row, t in zip(got, tau, strict=True):
            np.testing.assert_array_equal(row, m.time(t))
    lin = T_Lin(cm, tau)
    assert lin.shape == tau.shape
    for row, t in zip(lin, tau, strict=True):
        np.testing.assert_array_equal(row, T_Lin(cm, t))
    assert np.array_equal(lin > 0, tau > 0)  # an empty batch costs nothing


@pytest.mark.parametrize(
    ("gpu", "model", "mode"),
    [
        ("rtxpro6000", "qwen3-30b-a3b", "real"),  # memory floor, waves and L2 on
        ("a100", "mixtral-8x7b", "real"),
        ("a100", "mixtral-8x7b", "paper"),  # no terms: only the fastest tile is taken at the expectation
    ],
)
def test_the_expected_time_against_a_simulated_router(gpu, model, mode):
    """The expected grouped-GeMM time (the waves' ceiling, the floors' maxima and the fastest tile taken
    at the expected counts) against the mean over simulated routers of the time at each simulated load:
    within 4 standard errors plus 3% (the approximation's tolerance; the gap is largest where the waves'
    ceiling binds on few experts with many tokens each, Mixtral on the A100 at 1,000 tokens)."""
    cm = cost_model(CostSpec(gpu, model, mode=mode))
    m = cm.lin.moe
    rng = np.random.default_rng(99)
    for tau in (1, 3, 16, 64, 300, 1000):
        sim = np.array([m.layer_time_of_loads(x) for x in _router_loads(rng, m.E, m.k, tau, 300)])
        se = sim.std(ddof=1) / math.sqrt(sim.size)
        assert abs(float(m.time(tau)[0]) / m.count - sim.mean()) <= 4 * se + 0.03 * sim.mean(), tau


# --- the grouped GeMM by hand, and Theorem 1's least work -------------------------------------------


def test_one_layer_of_forced_loads_by_hand():
    """One token on 8 experts (the profile's first row): each expert's GeMM has one column block, so per
    weight and tile the grouped GeMM has 8 ceil(d_row/t_row) output tiles; recomputed from the GPU's
    fields with the terms real mode switches on (waves, L2, memory floor, two launches)."""
    cm = cost_model(CostSpec("rtxpro6000", "qwen3-30b-a3b", mode="real"))
    gpu, gt = cm.gpu, cm.gpu.terms
    assert gt.waves and gt.memory_floor and gt.l2_bandwidth
    b, bw = gt.bytes_per_element, gpu.eta_mem * gpu.bandwidth
    total = 0.0
    for d_row, d_red in ((1536, 2048), (2048, 768)):
        best = math.inf
        for tile, mu in zip(gpu.tiles, gpu.mu, strict=True):
            tiles = 8 * math.ceil(d_row / tile.t_row)
            t = math.ceil(tiles / gpu.s) * math.ceil(d_red / tile.t_red) / mu
            t = max(t, tiles * b * (tile.t_row + tile.t_col) * d_red / gt.l2_bandwidth)
            t = max(t, 8 * b * (d_row * d_red + d_row + d_red) / bw)
            best = min(best, t)
        total += best
    total += 2 * gt.gemm_overhead_s
    assert cm.lin.moe.layer_time_of_loads(forced_loads(1, 8, 8)) == pytest.approx(total, rel=1e-12)
    assert list(forced_loads(3, 5, 8)) == [5, 5, 5, 5, 4]  # 24 slots over 5 experts, within one


def test_least_work_per_token_is_the_infimum():
    cm = cost_model(CostSpec("rtxpro6000", "qwen3-30b-a3b", mode="real"))
    ell = linear_per_token(cm)
    tau = np.arange(1, 4097)
    assert np.all(T_Lin(cm, tau) / tau >= ell * (1 - 1e-12))
    big = 1 << 22
    assert float(T_Lin(cm, big)) / big == pytest.approx(ell, rel=0.01)


def test_the_dense_part_is_unchanged_by_the_experts(tmp_path):
    """A MoE model's linear time is its attention, router and vocab GeMMs (the dense LinearTerms) plus the
    experts' expected time: with the experts taken out, T_Lin is the GeMMs of linear_gemms alone."""
    cm = cost_model(CostSpec("rtxpro6000", "qwen3-30b-a3b", mode="real"))
    tau = np.array([1, 7, 100, 1000])
    dense = sum(g.count * T_GeMM_terms(cm, g.d_row, tau, g.d_red) for g in cm.gemms)
    # the GeMMs of T_GeMM_terms take their own tiles and each its gemm_overhead_s; the linear time shares
    # one tile among them, so it is at least their sum, and T_Lin adds the experts on top
    assert np.all(T_Lin(cm, tau) >= dense + cm.lin.moe.time(tau) - 1e-12)


# --- the three twins ----------------------------------------------------------------------------------


def test_symbolic_twin_agrees():
    from theory.cost import Batch, T_batch
    from theory.symbolic import SymbolicCostModel

    cm = cost_model(CostSpec("a100", "mixtral-8x7b", mode="paper"))
    twin = SymbolicCostModel.from_cost_model(cm)
    for tau in (1, 2, 7, 33):
        assert float(twin.T_Lin(tau)) == pytest.approx(float(T_Lin(cm, tau)), rel=1e-12)
    batch = Batch.of(prefill=[(1, 5)], decode=[40, 300])
    assert float(twin.T_batch([(1, 5)], [40, 300])) == pytest.approx(T_batch(cm, batch), rel=1e-12)
    with pytest.raises(FieldError, match=r"Eq\. 13"):
        twin.T_max(64, 64)


@pytest.mark.parametrize("gpu", ["rtxpro6000", "h100"])
def test_compiled_tables_agree(gpu):
    from stability.sim.kernels import LIN_TABLE, MOE_LIN_TABLE, build_tables, t_lin

    cm = cost_model(CostSpec(gpu, "qwen3-30b-a3b", mode="real"))
    ct = build_tables(cm, 64)
    for tau in (1, 2, 100, LIN_TABLE - 1, LIN_TABLE, 40000, MOE_LIN_TABLE - 1):
        assert t_lin(ct, tau) == pytest.approx(float(T_Lin(cm, tau)), rel=1e-12), tau
    for tau in (MOE_LIN_TABLE, 70000, 100000, 1 << 20):  # past the table: a linear extrapolation
        assert t_lin(ct, tau) == pytest.approx(float(T_Lin(cm, tau)), rel=0.005), tau


def test_moe_with_tensor_and_expert_parallelism_is_refused(tmp_path):
    """TP of the experts is priced (tests/test_moe_tp.py); TP inside an EP group is not."""
    f = tmp_path / "gpus.toml"
    f.write_text(
        '[gpus.pro2]\nbase = "rtxpro6000"\ntp = 2\nep = 2\nallreduce_latency_s = 1e-5\n'
        "allreduce_bandwidth_gbs = 50.0\n",
        encoding="utf-8",
    )
    with pytest.raises(FieldError, match=r"gpus\.pro2\.tp"):
        cost_model(CostSpec("pro2", "qwen3-30b-a3b", mode="real", gpu_file=str(f)))


# --- the measured MoE block ---------------------------------------------------------------------------


def test_the_measured_moe_block_is_scored():
    from theory.validation.moe_profile import score_moe_profile
    from theory.validation.moe_report import moe_rows

    score = score_moe_profile()
    assert score.tokens.size == 50 and score.held_out.sum() > 0
    assert np.all(score.gemms > 0) and np.all(score.block > score.gemms)
    rows = moe_rows(score)
    assert {(r["prediction"], r["rows"]) for r in rows} == {
        (p, s) for p in ("gemms", "block") for s in ("all", "held_out")
    }
    for r in rows:
        assert r["met"] == (r["median"] <= 0.10 and r["p90"] <= 0.20)


def test_a_large_expected_blocks_table_is_kept_and_read_back_equal(tmp_path, monkeypatch):
    from theory import moe

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tau = np.arange(moe.KEEP_FROM + 7)
    computed = moe._expected_blocks(128, 8, tau, 64)
    first = moe.expected_blocks(128, 8, tau, 64)
    path = moe.kept_blocks_path(128, 8, tau, 64)
    assert path.is_file() and np.array_equal(first, computed)

    def refuse(*_a):
        raise AssertionError("computed although kept")

    monkeypatch.setattr(moe, "_expected_blocks", refuse)
    assert np.array_equal(moe.expected_blocks(128, 8, tau, 64), computed)
    assert moe.kept_blocks_path(128, 8, tau, 128) != path and moe.kept_blocks_path(128, 4, tau, 64) != path
    path.write_bytes(b"not an array")  # unreadable: computed again
    monkeypatch.setattr(moe, "_expected_blocks", lambda *a: computed)
    assert np.array_equal(moe.expected_blocks(128, 8, tau, 64), computed)
