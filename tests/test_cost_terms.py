"""Cost terms beyond Eq. 2 (theory.terms): each against a recomputation by hand, and the TOML
checks. The acceptance test of a cost law stated only in TOML is in test_cost_terms_toml_law.py,
the fixed time per attention call in test_attention_call.py, the table of terms in
test_cost_term_table.py."""

import math

import numpy as np
import pytest
from numba import njit

from llmq.cli import main
from stability.sim.kernels import build_tables, t_lin, t_psa
from theory.builder import CostSpec, cost_model
from theory.cost import T_D_SA, T_P_SA, Batch, T_batch, T_GeMM_terms, T_Lin, linear_per_token
from theory.errors import FieldError, LlmqError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.terms import GpuTerms, allreduce_time
from theory.workload import get_workload

# A tiny GPU (4 SMs, one tile) and a tiny model, so waves and tiles can be counted by hand.
TINY_GPUS = """
[gpus.tiny]
base = "a100"
sm_count = 4
tiles = ["128x128x32"]
{extra}
"""
TINY_MODELS = """
[models.tiny]
name = "tiny"
n_layers = 2
d_model = 256
n_heads = 2
n_kv_heads = 2
head_dim = 128
d_ff = 512
vocab = 256
ffn = "mlp"
params = 1.0e6
{extra}
"""


@njit
def s_step(ct, p):
    """The engine's decode table step S(p) - S(p - 1)."""
    return ct.S[p] - ct.S[p - 1]


@njit
def s_any(ct):
    return np.any(ct.S != 0.0)


def tiny(tmp_path, gpu_extra="", model_extra="", mode="paper", name="t"):
    g, m = tmp_path / f"{name}_gpus.toml", tmp_path / f"{name}_models.toml"
    g.write_text(TINY_GPUS.format(extra=gpu_extra))
    m.write_text(TINY_MODELS.format(extra=model_extra))
    return cost_model(CostSpec("tiny", "tiny", mode, gpu_file=str(g), model_file=str(m)))


def gpu_file(tmp_path, text, name="g.toml"):
    f = tmp_path / name
    f.write_text(text)
    return str(f)


# --- defaults: every term off is Eq. 2-7 -----------------------------------------------------


def test_presets_have_every_term_off():
    """The roofline presets (and so paper mode) have every term off; in real mode the presets with
    a shipped calibration have the fitted terms on, the others the unfitted terms of their tile set
    (gpus.toml [real_mode]: the floor on sm80, where every uncalibrated preset is) and no fitted
    overhead."""
    for key in ("a100", "h100", "rtx6000ada", "h200"):
        assert get_gpu(key).terms == GpuTerms()
        assert cost_model(CostSpec(key)).plain
    for key in ("rtx6000ada", "l4", "l40s", "a10g"):
        gpu = cost_model(CostSpec(key, mode="real")).gpu
        assert gpu.terms == GpuTerms(memory_floor=True, waves=False) and not gpu.calibrated
    for key in ("a100", "h100", "h200"):
        terms = cost_model(CostSpec(key, mode="real")).gpu.terms
        assert terms.memory_floor and terms.waves and terms.gemm_overhead_s > 0 and terms.tp == 1


def test_terms_stated_off_change_nothing(tmp_path):
    """A GPU and model file that state every switch off give bit-identical times and bounds."""
    g = gpu_file(tmp_path, '[gpus.off]\nbase = "rtx6000ada"\nmemory_floor = false\nwaves = false\ntp = 1\n'
                 '[gpus.plain]\nbase = "rtx6000ada"\n')
    m = gpu_file(tmp_path, '[models.off]\nbase = "mistral-7b"\nattention = true\nlm_head = false\n',
                 "m.toml")
    from theory.bounds import compute_bounds

    w = get_workload("table1")
    for mode in ("paper", "real"):
        ref = cost_model(CostSpec("plain", mode=mode, gpu_file=g))  # a user key: the roofline as written
        off = cost_model(CostSpec("off", "off", mode, gpu_file=g, model_file=m))
        tau = np.arange(1, 3000, 7)
        assert np.array_equal(T_Lin(ref, tau), T_Lin(off, tau))
        b = Batch.of(prefill=[(1, 300), (257, 100)], decode=[5, 900, 4000])
        assert T_batch(ref, b) == T_batch(off, b)
        names = {"gpu": "", "model": ""}
        assert compute_bounds(ref, w).as_dict() | names == compute_bounds(off, w).as_dict() | names


# --- booleans and field errors ---------------------------------------------------------------


@pytest.mark.parametrize("text, field", [
    ('[gpus.x]\nbase = "a100"\nmemory_floor = "false"\n', "gpus.x.memory_floor"),
    ('[gpus.x]\nbase = "a100"\nwaves = 1\n', "gpus.x.waves"),
    ('[gpus.x]\nbase = "a100"\nattention_waves = "true"\n', "gpus.x.attention_waves"),
])
def test_gpu_switch_must_be_a_toml_boolean(tmp_path, text, field):
    with pytest.raises(FieldError, match=field.replace(".", r"\.")) as err:
        get_gpu("x", gpu_file(tmp_path, text))
    assert "boolean" in str(err.value)


@pytest.mark.parametrize("key", ["attention", "lm_head"])
def test_model_switch_must_be_a_toml_boolean(tmp_path, key):
    f = gpu_file(tmp_path, f'[models.y]\nbase = "mistral-7b"\n{key} = "true"\n', "m.toml")
    with pytest.raises(FieldError, match=rf"models\.y\.{key}") as err:
        get_model("y", f)
    assert "boolean" in str(err.value)


def test_scenario_switch_must_be_a_toml_boolean(tmp_path, capsys):
    f = gpu_file(tmp_path, 'pad = "false"\n', "s.toml")
    assert main(["bounds", "--config", f]) == 2
    err = capsys.readouterr().err
    assert "pad" in err and "boolean" in err


@pytest.mark.parametrize("extra, field", [
    ('memory_floor = true\n[gpus.x.linear_law]\nkind = "staircase"\na = 0.001\nb0 = 64\n',
     "gpus.x.memory_floor"),
    ('[gpus.x.linear_law]\nkind = "linear"\na = 0.001\nb0 = 64\n', "gpus.x.linear_law.kind"),
    ('[gpus.x.linear_law]\nkind = "staircase"\na = 0.001\nb0 = "64"\n', "gpus.x.linear_law.b0"),
    ('[gpus.x.linear_law]\nkind = "staircase"\nb0 = 64\n', "gpus.x.linear_law.a"),
    ("tp = 2\n", "gpus.x.allreduce_bandwidth_gbs"),
    ("tp = 0\n", "gpus.x.tp"),
])
def test_bad_term_fields_name_the_field(tmp_path, extra, field):
    with pytest.raises(FieldError, match=field.replace(".", r"\.")):
        get_gpu("x", gpu_file(tmp_path, f'[gpus.x]\nbase = "a100"\n{extra}'))


def test_lm_head_with_a_law_is_refused(tmp_path):
    g = gpu_file(tmp_path, '[gpus.x]\nbase = "a100"\n'
                 '[gpus.x.linear_law]\nkind = "staircase"\na = 1e-3\nb0 = 8\n')
    m = gpu_file(tmp_path, '[models.y]\nbase = "mistral-7b"\nlm_head = true\n', "m.toml")
    with pytest.raises(FieldError, match=r"models\.y\.lm_head"):
        cost_model(CostSpec("x", "y", gpu_file=g, model_file=m))


TP = '[gpus.x]\nbase = "a100"\ntp = {tp}\nallreduce_latency_s = 1e-5\nallreduce_bandwidth_gbs = 200\n'


@pytest.mark.parametrize("model, tp, mode, expected", [
    ("mistral-7b", 3, "real", "n_heads = 32"),
    ("mistral-7b", 64, "real", "n_heads = 32"),
    ("qwen2-7b", 7, "real", "n_kv_heads = 4"),
    ("mistral-7b", 2, "paper", "mode 'real'"),
])
def test_tp_that_cannot_split_the_model_is_refused(tmp_path, model, tp, mode, expected):
    g = gpu_file(tmp_path, TP.format(tp=tp))
    with pytest.raises(FieldError, match=r"gpus\.x\.tp") as err:
        cost_model(CostSpec("x", model, mode, gpu_file=g))
    assert expected in str(err.value)


# --- the literature law and attention off ------------------------------------------------------


def test_staircase_law_replaces_the_token_terms(tmp_path):
    c, a, b0 = 0.004, 0.0015, 96
    cm = tiny(tmp_path, f'[gpus.tiny.linear_law]\nkind = "staircase"\nc = {c}\na = {a}\nb0 = {b0}\n')
    tau = np.array([1, 95, 96, 97, 1000, 20000])
    expected = [c + a * math.ceil(t / b0) for t in tau]
    assert T_Lin(cm, tau).tolist() == expected
    assert T_Lin(cm, 0) == 0.0
    assert cm.mu_nLin == math.inf  # the law includes the non-linear term
    assert linear_per_token(cm) == a / b0
    ct = build_tables(cm, 64)
    for t in (1, 97, 16383, 16384, 50001):  # inside and past the simulator's table
        assert t_lin(ct, t) == c + a * math.ceil(t / b0)


def test_attention_off_prices_attention_at_zero(tmp_path):
    on = tiny(tmp_path, name="on")
    off = tiny(tmp_path, model_extra="attention = false", name="off")
    assert T_D_SA(on, [5, 300]).min() > 0 and T_P_SA(on, 1, 128) > 0
    assert T_D_SA(off, [5, 300]).tolist() == [0.0, 0.0]
    assert T_P_SA(off, [1, 129], [128, 7]).tolist() == [0.0, 0.0]
    b = Batch.of(prefill=[(1, 100)], decode=[7, 40])
    assert T_batch(off, b) == float(T_Lin(on, 102)) + 102 / on.mu_nLin
    ct = build_tables(off, 600)
    assert t_psa(ct, 1, 200) == 0.0 and not s_any(ct)


# --- memory floor, waves, LM head, TP, all-reduce ----------------------------------------------


def test_memory_floor_of_one_gemm_is_its_bytes_over_the_bandwidth(tmp_path):
    """One decode token on an A100 is memory bound: each of Mistral's paper-mode GeMMs takes its
    weight + activation bytes over eta_mem B, and the linear time is their sum."""
    g = gpu_file(tmp_path, '[gpus.f]\nbase = "a100"\nmemory_floor = true\n')
    cm = cost_model(CostSpec("f", gpu_file=g))
    plain = cost_model(CostSpec("a100"))
    m, gpu = get_model("mistral-7b"), get_gpu("a100")
    bw = gpu.eta_mem * gpu.bandwidth
    d, dx, dff, dout, N = m.d, m.d_x, m.d_ff, m.d_out, m.N
    # by hand: (count, rows, red) of W_Q/W_K/W_V, W_F1, W_F2, W_out; bytes = 2 (rows red + tau (rows + red))
    shapes = [(3 * N, d, dx), (N, dff, d), (N, dx, dff), (1, dout, dx)]
    assert cm.lin.wbytes.tolist() == [2.0 * r * k for _, r, k in shapes]
    floor_1 = sum(n * 2 * (r * k + 1 * (r + k)) / bw for n, r, k in shapes)
    # each GeMM is the max of Eq. 2 and its floor, on the linear GeMMs' shared best tile
    per_tile = []
    for t, mu in zip(gpu.tiles, gpu.mu, strict=True):
        comp = [math.ceil(r / t.t_row) * 1 * math.ceil(k / t.t_red) / (gpu.s * mu) for _, r, k in shapes]
        per_tile.append(sum(n * max(cp, 2 * (r * k + r + k) / bw)
                            for (n, r, k), cp in zip(shapes, comp, strict=True)))
    assert float(T_Lin(cm, 1)) == pytest.approx(min(per_tile), rel=1e-12)
    assert float(T_Lin(cm, 1)) == pytest.approx(floor_1, rel=1e-12)  # every GeMM is memory bound
    assert float(T_Lin(cm, 1)) > float(T_Lin(plain, 1))
    # a large batch is compute bound: the floor no longer binds
    assert float(T_Lin(cm, 8192)) == pytest.approx(float(T_Lin(plain, 8192)), rel=1e-12)
    # Theorem 1's per-token rate: the compute limit (activation bytes per column are far smaller)
    assert linear_per_token(cm) == pytest.approx(1 / (plain.mu_Lin[0] * plain.t_col[0]), rel=1e-12)


def test_waves_on_a_tiny_gpu(tmp_path):
    """4 SMs, tile 128x128x32: each GeMM takes ceil(output tiles / 4) waves of d_red/32 steps;
    ``waves`` quantizes the linear GeMMs, ``attention_waves`` those of Eq. 6."""
    cm = tiny(tmp_path, "waves = true\nattention_waves = true")
    plain = tiny(tmp_path, name="plain")
    linear_only = tiny(tmp_path, "waves = true", name="lin")
    attention_only = tiny(tmp_path, "attention_waves = true", name="att")
    mu = cm.mu[0]
    for tau in (1, 128, 129, 300, 513, 20000):
        cols = math.ceil(tau / 128)
        # paper mode, N = 2: W_QKV 3N x (256 x 256), W_F1 512 x 256, W_F2 256 x 512, W_out 256 x 256
        waves = (3 * 2 * math.ceil(2 * cols / 4) * 8 + 2 * math.ceil(4 * cols / 4) * 8
                 + 2 * math.ceil(2 * cols / 4) * 16 + 1 * math.ceil(2 * cols / 4) * 8)
        flat = (3 * 2 * 2 * cols * 8 + 2 * 4 * cols * 8 + 2 * 2 * cols * 16 + 2 * cols * 8) / 4
        assert float(T_Lin(cm, tau)) == pytest.approx(waves / mu, rel=1e-12)
        assert float(T_Lin(plain, tau)) == pytest.approx(flat / mu, rel=1e-12)
    # prefill attention PI(R, 1, 128), d = 256: K^T Q has 1 output tile (1 wave) x 8 steps,
    # V P has 2 output tiles (1 wave) x 4 steps; without waves (8 + 2 x 4) / 4 tile-steps
    assert float(T_P_SA(cm, 1, 128)) == pytest.approx(2 * (8 + 4) / mu, rel=1e-12)
    assert float(T_P_SA(plain, 1, 128)) == pytest.approx(2 * (8 + 8) / 4 / mu, rel=1e-12)
    assert float(T_P_SA(attention_only, 1, 128)) == pytest.approx(2 * (8 + 4) / mu, rel=1e-12)
    assert float(T_P_SA(linear_only, 1, 128)) == pytest.approx(2 * (8 + 8) / 4 / mu, rel=1e-12)
    assert attention_only.lin is None and not attention_only.plain  # Eq. 4 untouched
    assert float(T_Lin(linear_only, 300)) == pytest.approx(float(T_Lin(cm, 300)), rel=1e-12)
    for model, psa in ((cm, 2 * (8 + 4)), (linear_only, 2 * (8 + 8) / 4), (attention_only, 2 * (8 + 4))):
        ct = build_tables(model, 300)
        assert t_psa(ct, 1, 128) == pytest.approx(psa / mu, rel=1e-12)
        assert t_lin(ct, 20000) == pytest.approx(float(T_Lin(model, 20000)), rel=1e-12)  # past the table


def test_l2_traffic_on_a_tiny_gpu(tmp_path):
    """4 SMs, tile 128x128x32, B_L2 = 1 GB/s (binding): each linear GeMM takes at least
    2 bytes x (output tiles) x (128 + 128) x d_red / B_L2; attention is untouched."""
    bw = 1e9
    cm = tiny(tmp_path, "waves = true\nl2_bandwidth_gbs = 1.0", name="l2")
    waves = tiny(tmp_path, "waves = true", name="w")
    mu = cm.mu[0]
    for tau in (1, 128, 129, 300):
        cols = math.ceil(tau / 128)
        # paper mode, N = 2: W_Q, W_K, W_V 3N x (256 x 256), W_F1 512 x 256, W_F2 256 x 512, W_out
        gemms = [(3 * 2, 2, 256), (2, 4, 256), (2, 2, 512), (1, 2, 256)]  # (count, row tiles, d_red)
        by_hand = sum(n * max(math.ceil(r * cols / 4) * (d // 32) / mu, 2 * r * cols * 256 * d / bw)
                      for n, r, d in gemms)
        assert float(T_Lin(cm, tau)) == pytest.approx(by_hand, rel=1e-12)
        assert float(T_Lin(cm, tau)) > float(T_Lin(waves, tau))
    assert float(T_GeMM_terms(cm, 512, 300, 256)) == pytest.approx(2 * 4 * 3 * 256 * 256 / bw, rel=1e-12)
    assert float(T_P_SA(cm, 1, 128)) == float(T_P_SA(waves, 1, 128))
    per_token = sum(n * max(r * (d // 32) / (4 * mu * 128), 2 * r * 256 * d / (128 * bw))
                    for n, r, d in gemms)
    assert linear_per_token(cm) == pytest.approx(per_token, rel=1e-12)
    ct = build_tables(cm, 300)
    assert t_lin(ct, 20000) == pytest.approx(float(T_Lin(cm, 20000)), rel=1e-12)  # past the table


def test_lm_head_on_output_rows(tmp_path):
    """lm_head: W_out leaves the per-token sum, each decode and prefill chunk pays one row of it,
    and every token pays the embedding gather."""
    cm = tiny(tmp_path, model_extra="lm_head = true", name="lm")
    plain = tiny(tmp_path, name="plain")
    gpu, mu = cm.gpu, cm.mu[0]
    h = math.ceil(256 / 128) * math.ceil(256 / 32) / (4 * mu * 128)  # one column of W_out at t*
    assert cm.lm_out_s == pytest.approx(h, rel=1e-12)
    gather = 2 * 2 * 256 / (gpu.eta_mem * gpu.bandwidth)
    for tau in (1, 130, 1000):
        cols = math.ceil(tau / 128)
        no_head = (3 * 2 * 2 * 8 + 2 * 4 * 8 + 2 * 2 * 16) * cols / (4 * mu)
        assert float(T_Lin(cm, tau)) == pytest.approx(no_head + tau * gather, rel=1e-12)
    b = Batch.of(prefill=[(1, 100), (129, 30)], decode=[7, 40, 41])
    expected = (float(T_Lin(cm, b.tau)) + b.tau / cm.mu_nLin + cm.N * float(T_D_SA(cm, [7, 40, 41]).sum())
                + float(T_P_SA(cm, [1, 129], [100, 30]).sum()) + 5 * h)
    assert T_batch(cm, b) == pytest.approx(expected, rel=1e-12)
    ct = build_tables(cm, 600)  # the engine's tables: a row per prefill chunk and per decode
    assert t_psa(ct, 129, 30) == pytest.approx(float(T_P_SA(cm, 129, 30)) + h, rel=1e-12)
    assert cm.N * s_step(ct, 41) == pytest.approx(cm.N * float(T_D_SA(cm, 41)) + h, rel=1e-12)
    from theory.bounds import T_bar_R_terms

    w = get_workload("deterministic:256,20")
    assert T_bar_R_terms(cm, w)["lm_head"] == pytest.approx(21 * h, rel=1e-12)
    assert "lm_head" not in T_bar_R_terms(plain, w)


def test_tp_split_as_megatron_by_hand(tmp_path):
    g = gpu_file(tmp_path, TP.format(tp=4))
    cm = cost_model(CostSpec("x", "mistral-7b", "real", gpu_file=g))
    # Mistral-7B: 32 heads, 8 KV heads, head_dim 128, d_x 4096, d_ff 14336, vocab 32000
    shapes = {s.name: (s.count, s.d_row, s.d_red) for s in cm.gemms}
    assert shapes == {
        "W_QKV (fused, GQA)": (32, (32 // 4 + 2 * 8 // 4) * 128, 4096),  # column-parallel
        "W_O": (32, 4096, 32 // 4 * 128),  # row-parallel
        "W_gate_up (fused)": (32, 2 * 14336 // 4, 4096),  # column-parallel
        "W_down": (32, 4096, 14336 // 4),  # row-parallel
        "W_out": (1, 32000 // 4, 4096),  # vocab-parallel
    }
    assert (cm.d_pre, cm.d_dec) == (32 // 4 * 128, 8 // 4 * 128)
    g16 = gpu_file(tmp_path, TP.format(tp=16), "g16.toml")
    cm16 = cost_model(CostSpec("x", "mistral-7b", "real", gpu_file=g16))
    qkv16 = next(s for s in cm16.gemms if s.name.startswith("W_QKV"))
    assert qkv16.d_row == (32 // 16 + 2 * 1) * 128  # tp > n_kv_heads: one replicated KV head each
    # linear time = Eq. 2 on the shards (shared best tile) + 2 N all-reduces of tau d_x b bytes
    gpu = get_gpu("a100")
    for tau in (1, 512, 3000):
        comp = min(sum(n * math.ceil(r / t.t_row) * math.ceil(tau / t.t_col) * math.ceil(k / t.t_red)
                       for n, r, k in shapes.values()) / (gpu.s * mu)
                   for t, mu in zip(gpu.tiles, gpu.mu, strict=True))
        ar = 2 * 32 * (1e-5 + 2 * 3 / 4 * tau * 4096 * 2 / 200e9)
        assert float(T_Lin(cm, tau)) == pytest.approx(comp + ar, rel=1e-12)


def test_allreduce_law():
    terms = GpuTerms(tp=8, allreduce_latency_s=7e-6, allreduce_bandwidth=150e9)
    n = np.array([0.0, 1e6, 3.5e7])
    by_hand = [7e-6 + 2 * 7 / 8 * x / 150e9 for x in n]
    assert allreduce_time(terms, n).tolist() == pytest.approx(by_hand, rel=1e-15)
    assert allreduce_time(GpuTerms(), n).tolist() == [0.0, 0.0, 0.0]


def test_symbolic_twin_covers_the_law_and_refuses_numeric_only_terms(tmp_path):
    import sympy as sp

    from theory.symbolic import SymbolicCostModel

    law = tiny(tmp_path, '[gpus.tiny.linear_law]\nkind = "staircase"\nc = 0.004\na = 0.0015\nb0 = 96\n',
               "attention = false", name="law")
    scm = SymbolicCostModel.from_cost_model(law)
    b = Batch.of(prefill=[(1, 100)], decode=[7, 40])
    assert float(scm.T_batch([(1, 100)], [7, 40])) == T_batch(law, b)
    assert scm.T_batch([(1, 100)], [7, 40]) == sp.Rational(0.004) + sp.Rational(0.0015) * 2
    from theory.bounds import T_max

    assert float(scm.T_max(50, 10)) == pytest.approx(T_max(law, 50, 10), rel=1e-15)
    with pytest.raises(LlmqError, match="waves"):
        SymbolicCostModel.from_cost_model(tiny(tmp_path, "waves = true", name="w"))
    with pytest.raises(LlmqError, match="attention_waves"):
        SymbolicCostModel.from_cost_model(tiny(tmp_path, "attention_waves = true", name="aw"))


def test_engine_tables_agree_with_the_cost_model_under_every_term(tmp_path):
    """The compiled kernels price what theory.cost prices, inside and past the linear table, and
    the verdict's per-request work is T_bar^R's, for floor + waves + lm_head + TP together."""
    from stability.sim.metrics import optimal_work
    from theory.bounds import T_bar_R

    g = gpu_file(tmp_path, TP.format(tp=2) + "memory_floor = true\nwaves = true\nattention_waves = true\n"
                 "l2_bandwidth_gbs = 900.0\n")
    m = gpu_file(tmp_path, '[models.y]\nbase = "mistral-7b"\nlm_head = true\n', "m.toml")
    cm = cost_model(CostSpec("x", "y", "real", gpu_file=g, model_file=m))
    assert cm.lin.floor_bw > 0 and cm.lin.waves and cm.attention_waves and cm.lin.l2_bw > 0
    assert cm.lm_out_s > 0 and cm.lin.tok_s > 0
    ct = build_tables(cm, 5000)
    for tau in (1, 7, 300, 4097, 16383, 16384, 16385, 40000):
        assert t_lin(ct, tau) == pytest.approx(float(T_Lin(cm, tau)), rel=1e-13)
    for i, c in ((1, 256), (513, 100), (2000, 3000)):
        assert t_psa(ct, i, c) == pytest.approx(float(T_P_SA(cm, i, c)) + cm.lm_out_s, rel=1e-13)
    w = get_workload("deterministic:512,100")
    assert optimal_work(cm, [512], [100])[0] == pytest.approx(T_bar_R(cm, w), rel=1e-13)


def test_the_packaged_example_file_builds_every_combination_it_names():
    from importlib import resources

    path = str(resources.files("theory").joinpath("data", "cost_terms_example.toml"))
    law = cost_model(CostSpec("lidaipeng", "mistral-no-attention", gpu_file=path, model_file=path))
    assert law.lin.law is not None and not law.attention
    assert float(T_Lin(law, 300)) == 0.004 + 0.002 * 2
    roof = cost_model(CostSpec("a100-roofline", "mistral-lm-head", "real", gpu_file=path, model_file=path))
    assert roof.lin.floor_bw > 0 and roof.lin.waves and roof.lm_out_s > 0
    tp = cost_model(CostSpec("a100-nvlink-tp4", "llama-2-70b", "real", gpu_file=path))
    assert tp.gpu.terms.tp == 4 and tp.d_pre == 64 // 4 * 128


def test_symbolic_closed_forms_refuse_a_law(tmp_path):
    from theory.symbolic import SymbolicCostModel

    law = tiny(tmp_path, '[gpus.tiny.linear_law]\nkind = "staircase"\na = 0.001\nb0 = 8\n', name="law")
    scm = SymbolicCostModel.from_cost_model(law)
    with pytest.raises(LlmqError, match=r"Eq\. 11"):
        scm.T_star_R(128, 4)
    with pytest.raises(LlmqError, match=r"Eq\. 12"):
        scm.T_star_R_closed(128, 4)


def test_allreduce_law_fit_recovers_a_law_and_fits_measured_nccl_times():
    """The fit recovers a law it was given exactly; on vidur's measured NCCL all-reduce times
    (A100 and H100 DGX, TP 2-8, messages >= 1 MiB) the law's median relative error is under 10%,
    and the example file's A100 TP=4 values are that fit."""
    from importlib import resources

    from theory.config import read_toml
    from theory.profiles import load_profile
    from theory.terms import fit_allreduce_law

    b = np.geomspace(2**20, 2**26, 13)
    lat, bw = fit_allreduce_law(b, 3e-5 + 2 * 3 / 4 * b / 180e9, 4)
    assert (lat, bw) == (pytest.approx(3e-5, rel=1e-9), pytest.approx(180e9, rel=1e-9))
    rows = load_profile("vidur_all_reduce").where(operation="all_reduce")
    for setup in ("a100_dgx", "h100_dgx"):
        for tp in (2, 4, 8):
            x = rows[(rows["setup"] == setup) & (rows["tp"] == tp) & (rows["bytes"] >= 2**20)]
            lat, bw = fit_allreduce_law(x["bytes"], x["seconds"], tp)
            law = allreduce_time(GpuTerms(tp=tp, allreduce_latency_s=lat, allreduce_bandwidth=bw),
                                 x["bytes"])
            assert np.median(np.abs(law / x["seconds"] - 1)) < 0.10, (setup, tp)
            if (setup, tp) == ("a100_dgx", 4):
                path = resources.files("theory").joinpath("data", "cost_terms_example.toml")
                example = read_toml(str(path))
                gpu = example["gpus"]["a100-nvlink-tp4"]
                assert gpu["allreduce_latency_s"] == pytest.approx(lat, rel=0.02)
                assert gpu["allreduce_bandwidth_gbs"] * 1e9 == pytest.approx(bw, rel=0.02)


@pytest.mark.parametrize("model", ["mistral-7b", "llama-2-70b", "llama-2-7b"])
def test_tp_split_agrees_with_the_profiles_statement_of_vidur(model):
    """theory.profiles states vidur's Megatron split on its own; the two agree wherever tp divides
    the KV heads."""
    from theory.profiles import gemm_shape

    m = get_model(model)
    ops = {"W_QKV (fused, GQA)": "attn_pre_proj", "W_O": "attn_post_proj",
           "W_gate_up (fused)": "mlp_up_proj", "W_down": "mlp_down_proj"}
    for tp in (1, 2, 4, 8):
        if m.n_kv_heads % tp:
            continue
        for g in m.linear_gemms("real", tp):
            if g.name in ops:
                assert (g.d_row, g.d_red) == gemm_shape(m, ops[g.name], tp), (g.name, tp)


def test_memory_floor_closes_the_small_batch_gap_on_measured_gemms():
    """vidur's A100 GeMMs (TP 1, every model, 1-64 tokens) are weight-streaming bound: Eq. 2 alone
    is about half the measured time, the per-GeMM floor is within 15% of it (median)."""
    from theory.linear_terms import LinearTerms
    from theory.profiles import gemm_shape, load_profile

    gpu = get_gpu("a100")
    rows = load_profile("vidur_gemm").where(gpu="a100", tp=1)
    rows = rows[rows["tokens"] <= 64]
    assert len(rows) > 100
    eq2, floor = [], []
    for r in rows:
        d_row, d_red = gemm_shape(get_model(str(r["model"])), str(r["operation"]), 1)
        one = {"count": np.array([1]), "waves": False, "tok_s": 0.0, "batch_s": 0.0, "law": None,
               "traffic": np.zeros((len(gpu.tiles), 1)), "l2_bw": 0.0,
               "rows": np.array([[math.ceil(d_row / t.t_row)] for t in gpu.tiles]),
               "red": np.array([[math.ceil(d_red / t.t_red)] for t in gpu.tiles]),
               "wbytes": np.array([2.0 * d_row * d_red]), "abytes": np.array([2.0 * (d_row + d_red)])}
        tau = np.array([int(r["tokens"])])
        for out, bw in ((eq2, 0.0), (floor, gpu.eta_mem * gpu.bandwidth)):
            lt = LinearTerms(**one, floor_bw=bw)
            best = min(float(lt.per_tile(tau, k, t.t_col, mu, gpu.s)[0])
                       for k, (t, mu) in enumerate(zip(gpu.tiles, gpu.mu, strict=True)))
            out.append(best / r["seconds"])
    assert np.median(eq2) < 0.6
    assert abs(np.median(floor) - 1) < 0.15


def test_one_gemm_with_terms_and_the_validation_plug_points(tmp_path):
    """T_GeMM_terms of one GeMM: its bytes over eta_mem B when memory bound, Eq. 2 when compute
    bound; validate's per-GeMM predictor, TP batch model and all-reduce law use the GPU's terms."""
    from theory.validation.allreduce import allreduce_law
    from theory.validation.batches import NEEDS_TP, batch_cost_model
    from theory.validation.gemm import predict_gemm

    g = gpu_file(tmp_path, '[gpus.a100]\nmemory_floor = true\nallreduce_latency_s = 4e-5\n'
                           'allreduce_bandwidth_gbs = 170\n')
    cm = cost_model(CostSpec("a100", gpu_file=g))
    plain = cost_model(CostSpec("a100"))
    gpu = get_gpu("a100")
    bw = gpu.eta_mem * gpu.bandwidth
    by_hand = 2 * (4096 * 4096 + 1 * (4096 + 4096)) / bw  # weights + one column in and out, FP16
    assert float(T_GeMM_terms(cm, 4096, 1, 4096)) == pytest.approx(by_hand, rel=1e-12)
    assert float(T_GeMM_terms(cm, 4096, 8192, 4096)) == float(T_GeMM_terms(plain, 4096, 8192, 4096))
    assert float(predict_gemm(cm, 4096, 1, 4096, 1e-6)) == float(T_GeMM_terms(cm, 4096, 1, 4096)) + 1e-6
    waves = tiny(tmp_path, "waves = true")  # 4 SMs, 128x128x32: 3 x 2 output tiles -> 2 waves of 8 steps
    assert float(T_GeMM_terms(waves, 384, 256, 256)) == pytest.approx(2 * 8 / waves.mu[0], rel=1e-12)
    law = allreduce_law(get_gpu("a100", g))
    assert float(law(np.array([1e6]), 4)[0]) == pytest.approx(4e-5 + 1.5 * 1e6 / 170e9, rel=1e-12)
    assert allreduce_law(get_gpu("a100")) is None
    tp4, reason = batch_cost_model("a100", "llama-2-70b", 4, gpu_file=g)
    assert reason == "" and tp4.gpu.terms.tp == 4 and tp4.d_pre == 64 // 4 * 128
    assert batch_cost_model("l40s", "llama-2-70b", 4) == (None, NEEDS_TP)  # uncalibrated: no law


def test_capacity_bound_accepts_every_term(tmp_path):
    from theory.capacity import capacity_bound

    g = gpu_file(tmp_path, TP.format(tp=2) + "memory_floor = true\nwaves = true\n")
    m = gpu_file(tmp_path, '[models.y]\nbase = "mistral-7b"\nlm_head = true\n', "m.toml")
    cm = cost_model(CostSpec("x", "y", "real", gpu_file=g, model_file=m))
    w = get_workload("uniform:1-300,1-30")
    bound = capacity_bound(cm, w, horizon=2048)
    assert 0 < bound.bound < math.inf
    assert bound.pieces_s["decode_attention"] > cm.lm_out_s * float(w.expect(w.L_D))  # rows included


@pytest.mark.parametrize(("tiles", "pow2"), [("[[128, 128, 32], [64, 256, 64], [256, 64, 32]]", 1),
                                             ("[[128, 96, 32], [64, 48, 64], [128, 128, 32]]", 0)])
def test_prefill_attention_kernel_takes_shifts_only_for_power_of_two_tiles(tmp_path, tiles, pow2):
    """t_psa computes Eq. 6's ceilings as shifts when every tile dimension is a power of two (the
    presets' CUTLASS and cuBLAS shapes) and by division otherwise; both price what
    theory.cost.T_P_SA prices, at positions and chunk sizes on and off the tile multiples."""
    t_star = tiles[1:tiles.index("]") + 1]
    g = gpu_file(tmp_path, f'[gpus.x]\nbase = "a100"\ntiles = {tiles}\nt_star = {t_star}\n')
    cm = cost_model(CostSpec("x", "mistral-7b", "paper", gpu_file=g))
    ct = build_tables(cm, 9000)
    assert njit(lambda t: t.pow2)(ct) == pow2
    rng = np.random.default_rng(4)
    pairs = [(1, 1), (1, 512), (129, 128), (257, 255), (4097, 4096)]
    pairs += [(int(i), int(c)) for i, c in rng.integers(1, 4000, size=(40, 2))]
    for i, c in pairs:
        assert t_psa(ct, i, c) == pytest.approx(float(T_P_SA(cm, i, c)), rel=1e-13)
