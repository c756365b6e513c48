"""Tensor-parallel replicas: sharded memory, the groups a GPU offers, their profiles and prices."""

from __future__ import annotations

import pytest

from stability.planner.grid import build_grid, families_of
from stability.planner.prices import load_prices
from stability.planner.spec import PlanSpec
from stability.sim.memory import capacity_blocks
from theory.builder import CostSpec, cost_model
from theory.capacity import kv_capacity_tokens
from theory.config import read_toml
from theory.cost import Batch, T_batch
from theory.errors import FieldError
from theory.hardware import get_gpu, gpu_table
from theory.models import get_model
from theory.tensor_parallel import allreduce_law, auto_degree, degrees, variant_file, variant_text
from theory.terms import shard_memory

W = "uniform:64-320,8-40"


def test_shard_memory_counts_one_gpus_heads_and_weights():
    m = get_model("llama-2-70b")  # 8 KV heads of 128, 80 layers
    per_head_token = 2 * 80 * 128 * 2  # K and V, every layer, fp16
    assert shard_memory(m, 1) == (m.weight_bytes(), m.kv_bytes_per_token())
    for tp in (2, 4, 8):
        w, kv = shard_memory(m, tp)
        assert w == pytest.approx(m.weight_bytes() / tp) and kv == per_head_token * (8 // tp)
    w16, kv16 = shard_memory(m, 16)  # 16 GPUs, 8 heads: each GPU keeps one whole head
    kv_proj = 2 * 80 * 8192 * 128 * 2  # one head's W_K and W_V, every layer
    assert kv16 == per_head_token
    assert w16 == pytest.approx((m.weight_bytes() - 8 * kv_proj) / 16 + kv_proj)


def test_bound_and_simulator_count_the_same_sharded_cache(tmp_path):
    f = variant_file({("a100", 2), ("a100", 4)}, None, tmp_path)
    for tp in (2, 4):
        cm = cost_model(CostSpec(f"a100-tp{tp}", "llama-2-70b", "real", None, f))
        usable = 0.9 * 80e9 - get_model("llama-2-70b").weight_bytes() / tp
        tokens = usable / (2 * 80 * 128 * 2 * (8 // tp))
        assert kv_capacity_tokens(cm, 0.9) == pytest.approx(tokens, rel=1e-12)
        assert capacity_blocks(cm, 0.9, 16) == int(tokens // 16)


def test_groups_are_the_listed_degrees_with_the_fitted_law(tmp_path):
    assert degrees("a100") == (1, 2, 4, 8) and degrees("l40s") == (1,)
    with pytest.raises(FieldError, match=r"tensor_parallel\.l4"):
        allreduce_law("l4", 2)
    f = variant_file({("a100", 4), ("l4", 1)}, None, tmp_path)
    table = read_toml(f)["gpus"]
    assert set(table) == {"a100-tp4"}
    lat, bw = allreduce_law("a100", 4)
    assert table["a100-tp4"]["allreduce_latency_s"] == lat and table["a100-tp4"]["tp"] == 4
    assert table["a100-tp4"]["allreduce_bandwidth_gbs"] == pytest.approx(bw / 1e9, rel=1e-15)
    # the example file's hand-written A100 TP=4 group (the same vidur fit, rounded) prices batches
    # alike; a group runs in real mode, so it carries the A100's real-mode calibration, which the
    # example's group (a user key, built on the roofline) gets here by hand
    from importlib import resources

    import tomli_w

    example = str(resources.files("theory").joinpath("data", "cost_terms_example.toml"))
    law = read_toml(example)["gpus"]["a100-nvlink-tp4"]
    calibrated = {k: v for k, v in gpu_table("a100", calibrated=True).items() if k != "aliases"}
    assert table["a100-tp4"]["mu"] == calibrated["mu"] and "vidur_gemm" in calibrated["calibration"]
    ref_file = tmp_path / "ref.toml"
    ref_file.write_text(tomli_w.dumps({"gpus": {"ref": {**calibrated, **{k: law[k] for k in (
        "tp", "allreduce_latency_s", "allreduce_bandwidth_gbs")}}}}))
    mine = cost_model(CostSpec("a100-tp4", "llama-2-70b", "real", None, f))
    ref = cost_model(CostSpec("ref", "llama-2-70b", "real", None, str(ref_file)))
    for batch in (Batch.of(prefill=[(1, 512)]), Batch.of(decode=[700] * 64),
                  Batch.of(prefill=[(1, 256)], decode=[900] * 32)):
        assert T_batch(mine, batch) == pytest.approx(T_batch(ref, batch), rel=0.01)


def test_a_user_override_carries_into_the_group(tmp_path):
    user = tmp_path / "g.toml"
    user.write_text('[gpus.a100]\nmemory_gb = 40\n')
    text = variant_text({("a100", 2)}, str(user))
    f = tmp_path / "v.toml"
    f.write_text(text)
    assert get_gpu("a100-tp2", str(f)).memory_bytes == get_gpu("a100", str(user)).memory_bytes == 40e9


def test_auto_degree_is_the_smallest_that_leaves_room_for_kv():
    m = get_model("llama-2-70b")  # 138 GB of fp16 weights
    for gpu, want in (("a100", 2), ("h100", 2), ("h200", 2), ("l40s", 1)):
        g = get_gpu(gpu)
        assert auto_degree(g, m, "real") == want
        assert auto_degree(g, get_model("mistral-7b"), "real") == 1
    assert auto_degree(get_gpu("a100"), m, "real", 0.8) == 4  # 69 GB shards leave nothing in 64 GB
    assert auto_degree(get_gpu("a100"), m, "paper") == 1  # the paper's layer is never split


def test_grid_prices_groups_as_tp_gpus_and_prunes_what_cannot_hold_the_model(tmp_path):
    spec = PlanSpec(rate=1.0, workload=W, models=("llama-2-70b",), gpus=("a100", "l40s"),
                    schedulers=("sarathi",), r_max=8)
    grid = build_grid(spec, tp_dir=tmp_path)
    fams = {f.gpu: f for f in families_of(spec)}
    assert fams["a100"].tp == 4 and fams["l40s"].tp == 1  # Sarathi keeps 80 % of memory
    assert grid.one_gpu[fams["l40s"]].bound == 0  # 138 GB of weights on a 48 GB card
    price = load_prices()["a100"].usd_per_gpu_hour
    a100 = [c for c in (*grid.kept, *grid.pruned) if c.family.gpu == "a100"]
    assert sorted(c.r for c in a100) == [1, 2]  # at most 8 GPUs
    for c in a100:
        assert c.gpus == 4 * c.r and c.usd_per_hour == pytest.approx(4 * c.r * price)
    assert all(c.family.gpu == "a100" for c in grid.kept)
    explicit = PlanSpec(rate=1.0, workload=W, models=("llama-2-70b",), gpus=("a100", "l40s"),
                        schedulers=("sarathi",), tp=(2, 4, 3), r_max=8)
    assert sorted((f.gpu, f.tp) for f in families_of(explicit)) == [("a100", 2), ("a100", 4)]


def test_a_model_no_planned_gpu_holds_is_a_clear_error(tmp_path):
    from stability.planner.grid import InfeasibleTargetError

    spec = PlanSpec(rate=1.0, workload=W, models=("llama-2-70b",), gpus=("l4", "l40s"), schedulers=("vllm",))
    with pytest.raises(InfeasibleTargetError, match=r"0 req/s.*no room for KV cache.*--tp"):
        build_grid(spec, tp_dir=tmp_path)
