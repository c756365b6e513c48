"""Tensor parallelism of a mixture of experts: every expert split over the GPUs like a dense MLP
(vLLM's default without ``enable_expert_parallel``; :meth:`theory.models.Model.expert_gemms`)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from theory.builder import CostSpec, cost_model
from theory.cost import Batch, T_batch, T_Lin
from theory.errors import FieldError
from theory.models import get_model
from theory.tp_split import shard_memory

LAT, BW_GBS = 1e-5, 300.0  # an all-reduce law of the test's own (seconds, GB/s of bus bandwidth)
GPUS = f"""
[gpus.h1]
base = "h100"
[gpus.h2]
base = "h100"
tp = 2
allreduce_latency_s = {LAT}
allreduce_bandwidth_gbs = {BW_GBS}
"""


@pytest.fixture(scope="module")
def gpus(tmp_path_factory):
    f = tmp_path_factory.mktemp("moetp") / "gpus.toml"
    f.write_text(GPUS, encoding="utf-8")
    return str(f)


def _cm(gpu, model, gpus, mode="real", model_file=None):
    return cost_model(CostSpec(gpu, model, mode, gpu_file=gpus, model_file=model_file))


def _expected_blocks(E, k, tau, t_col):
    """E E[ceil(n / t_col)], n ~ Binomial(tau, k/E), summed over the whole support."""
    n = np.arange(tau + 1)
    return E * float(np.sum(binom.pmf(n, tau, k / E) * -(-n // t_col)))


# --- (a) the shards by hand ---------------------------------------------------------------------------


def test_mixtral_at_tp2_is_the_hand_arithmetic_of_its_shards(gpus):
    """Linear time of Mixtral on one GPU of a TP 2 group (every term beyond Eq. 2 off): attention
    sharded by heads, router replicated, vocab split, each expert's gate/up rows and down reduction
    halved, the experts' expected column blocks of uniform routing unchanged, and two all-reduces
    of tau d_x activations per layer; every number recomputed here from the model's config."""
    cm = _cm("h2", "mixtral-8x7b", gpus)
    tp, N, d_x, hd, E, k, ffe = 2, 32, 4096, 128, 8, 2, 14336
    q, kv = 32 // tp, 8 // tp
    dense = [  # (count, d_row, d_red) per GPU
        (N, (q + 2 * kv) * hd, d_x),  # fused QKV, column-parallel
        (N, d_x, q * hd),  # O, row-parallel
        (N, E, d_x),  # router, replicated
        (1, math.ceil(32000 / tp), d_x),  # vocab projection
    ]
    experts = [(2 * ffe // tp, d_x), (d_x, ffe // tp)]  # gate/up column-, down row-parallel
    tiles = list(zip(cm.t_row, cm.t_col, cm.t_red, cm.mu, strict=True))
    s = cm.s
    n_ar = 2 * N  # after attention and after the MoE block, every layer (no lm_head term)
    tok_s = n_ar * 2 * (tp - 1) / tp * 2 * d_x / (BW_GBS * 1e9)  # bf16 activations
    for tau in (1, 3, 64, 300, 2049):
        lin = min(
            sum(
                c * math.ceil(r / tr) * math.ceil(tau / tc) * math.ceil(d / tk) / (s * mu)
                for c, r, d in dense
            )
            for tr, tc, tk, mu in tiles
        )
        moe = N * sum(
            min(
                math.ceil(r / tr) * math.ceil(d / tk) / (s * mu) * _expected_blocks(E, k, tau, tc)
                for tr, tc, tk, mu in tiles
            )
            for r, d in experts
        )
        want = lin + moe + tok_s * tau + n_ar * LAT
        assert float(T_Lin(cm, tau)) == pytest.approx(want, rel=1e-12), tau
    per = 3  # SwiGLU: read 2 widths, write 1
    elements = (
        N * 10 * d_x + N * (per * k * ffe // tp + 2 * E + (k + 1) * d_x) + 2 * d_x + 2 * math.ceil(32000 / tp)
    )
    assert cm.mu_nLin == pytest.approx(cm.gpu.eta_mem * cm.gpu.bandwidth / (2 * elements), rel=1e-15)


def test_every_expert_is_halved_and_every_gpu_holds_all_of_them():
    m = get_model("qwen3-30b-a3b")
    one, two = m.expert_gemms("real"), m.expert_gemms("real", 2)
    assert [(g.d_row, g.d_red) for g in one] == [(2 * 768, 2048), (2048, 768)]
    assert [(g.d_row, g.d_red) for g in two] == [(768, 2048), (2048, 384)]
    assert [g.count for g in two] == [48, 48]
    # weights per GPU: the whole replica's bytes over tp (experts included), the KV heads split
    w1, kv1 = shard_memory(m, 1)
    w2, kv2 = shard_memory(m, 2)
    assert w2 == pytest.approx(w1 / 2, rel=1e-15)
    assert kv2 == pytest.approx(kv1 / 2, rel=1e-15)


def test_the_kv_blocks_of_a_tp2_moe_replica_count_half_the_weights(gpus):
    """The simulator's KV blocks beside one GPU's half of Mixtral's weights (every expert split)
    and its half of the KV heads, recomputed from the model's config."""
    from stability.sim.memory import BLOCK_SIZE, capacity_blocks

    cm = _cm("h2", "mixtral-8x7b", gpus)
    weights = 46.7e9 * 2 / 2  # bf16, halved
    kv_per_token = 2 * 32 * (8 // 2) * 128 * 2  # K and V, layers, KV heads per GPU, head_dim, bf16
    want = math.floor((0.9 * cm.gpu.memory_bytes - weights) / (kv_per_token * BLOCK_SIZE))
    assert capacity_blocks(cm) == want > 0
    assert capacity_blocks(_cm("h1", "mixtral-8x7b", gpus)) == 0  # 93.4 GB do not fit one H100


# --- (b) TP 1 unchanged -------------------------------------------------------------------------------

# T_batch of the MoE presets at TP 1, computed at commit 2241a0b (before tensor parallelism of the
# experts) by this file's _BATCHES on the packaged real-mode GPU tables; they must not move.
SNAPSHOT = {
    ("qwen3-30b-a3b", "h100", 2): "0x1.b918a14ae1e50p-6",
    ("qwen3-30b-a3b", "a100", 256): "0x1.0ff5342694d92p-3",
    ("mixtral-8x7b", "h100", 1): "0x1.3e44bb47d0103p-7",
    ("mixtral-8x7b", "a100", 256): "0x1.4365f888a288fp-2",
    ("gpt-oss-120b", "h100", 256): "0x1.be3a281f58a82p-4",
    ("gpt-oss-20b", "a100", 2): "0x1.2d0efd93ec8fcp-5",
    ("qwen3-30b-a3b:fp8", "h100", 256): "0x1.eecf8b035dd9ep-6",
}
_BATCHES = {1: ((), (100,)), 2: (((1, 512),), (300, 2000)), 256: (((4097, 2048),), tuple(range(1, 257)))}


@pytest.mark.parametrize(("model", "gpu", "decodes"), list(SNAPSHOT))
def test_tp1_moe_batches_are_bit_identical_to_before(model, gpu, decodes):
    cm = cost_model(CostSpec(gpu, model, "real"))
    assert T_batch(cm, Batch.of(*_BATCHES[decodes])).hex() == SNAPSHOT[(model, gpu, decodes)]


# --- (c) the symbolic twin ----------------------------------------------------------------------------


def test_symbolic_twin_of_the_experts_at_tp2(gpus):
    """T_MoE of the twin with the TP 2 shards (the twin refuses the tp term as a whole: its
    all-reduces are checked by hand above) against the numeric experts' time."""
    from theory.symbolic import SymbolicCostModel, _moe_of

    cm1, cm2 = _cm("h1", "qwen3-30b-a3b", gpus), _cm("h2", "qwen3-30b-a3b", gpus)
    with pytest.raises(FieldError, match="tp"):
        SymbolicCostModel.from_cost_model(cm2)
    twin = replace(SymbolicCostModel.from_cost_model(cm1), moe=_moe_of(cm2))
    assert twin.moe[3] == ((768, 2048), (2048, 384))
    for tau in (1, 2, 7, 33):
        assert float(twin.T_MoE(tau)) == pytest.approx(float(cm2.lin.moe.time(tau)[0]), rel=1e-12), tau


# --- (d) bad input ------------------------------------------------------------------------------------


def _models(tmp_path, body):
    f = tmp_path / "models.toml"
    f.write_text(body, encoding="utf-8")
    return str(f)


def test_an_expert_width_tp_does_not_divide_is_named(tmp_path, gpus):
    from theory.tensor_parallel import splits

    models = _models(tmp_path, '[models.odd]\nbase = "mixtral-8x7b"\nd_ff_expert = 14335\n')
    with pytest.raises(FieldError, match=r"models\.odd\.d_ff_expert") as err:
        _cm("h2", "odd", gpus, model_file=models)
    assert "tp = 2" in str(err.value)
    assert not splits(get_model("odd", models), 2, "real")
    assert splits(get_model("mixtral-8x7b"), 2, "real")


def test_a_shared_expert_width_tp_does_not_divide_is_named(tmp_path, gpus):
    base = '[models.sh]\nbase = "qwen3-30b-a3b"\nd_ff_shared = 1001\n'
    models = _models(tmp_path, base + "n_shared_experts = 1\n")
    with pytest.raises(FieldError, match=r"models\.sh\.d_ff_shared"):
        _cm("h2", "sh", gpus, model_file=models)
    cm = _cm("h2", "sh", gpus, model_file=_models(tmp_path, base + "n_shared_experts = 2\n"))
    shared = [(g.d_row, g.d_red) for g in cm.gemms if g.name.startswith("shared")]
    assert shared == [(2 * 2002 // 2, 2048), (2048, 2002 // 2)]  # SwiGLU gate/up and down, halved


def test_tp_and_ep_together_are_refused(tmp_path):
    f = tmp_path / "gpus.toml"
    f.write_text(
        f'[gpus.x]\nbase = "h100"\ntp = 2\nep = 2\nallreduce_latency_s = {LAT}\n'
        f"allreduce_bandwidth_gbs = {BW_GBS}\n",
        encoding="utf-8",
    )
    with pytest.raises(FieldError, match="not modelled") as err:
        _cm("x", "qwen3-30b-a3b", str(f))
    assert err.value.field == "gpus.x.tp"


# --- (e) the command line and the planner -------------------------------------------------------------


def test_llmq_bounds_prices_mixtral_on_a_tp2_group(tmp_path, capsys):
    from llmq.cli import main
    from theory.tensor_parallel import variant_file, variant_key

    gpu_file = variant_file({("h100", 2)}, None, tmp_path)
    rc = main(
        [
            "bounds",
            "--model",
            "mixtral-8x7b",
            "--gpu",
            variant_key("h100", 2),
            "--gpu-file",
            gpu_file,
            "--mode",
            "real",
        ]
    )
    out = capsys.readouterr().out
    assert rc in (0, None)
    assert "h100-tp2" in out and "lambda*" in out


def test_the_planner_offers_tp_degrees_to_a_mixture_of_experts():
    from stability.planner.grid import families_of
    from stability.planner.spec import PlanSpec
    from theory.hardware import get_gpu
    from theory.tensor_parallel import auto_degree, fits

    spec = PlanSpec(
        rate=1.0, gpus=("h100",), models=("mixtral-8x7b",), schedulers=("vllm",), tp=(1, 2, 4), ep=(1,)
    )
    assert sorted((f.tp, f.ep) for f in families_of(spec)) == [(1, 1), (2, 1), (4, 1)]
    # auto: Mixtral's weights do not fit one H100 and do fit half of them on each of two
    h100, m = get_gpu("h100"), get_model("mixtral-8x7b")
    assert not fits(h100, m, 1) and fits(h100, m, 2)
    assert auto_degree(h100, m, "real") == 2
