"""Expert parallelism in ``llmq plan``: the EP families of a mixture of experts, their fleets and
prices counted by brute force, their GPU profile in the bound and the simulation, and the errors
of ``--ep``."""

from __future__ import annotations

import sys
from importlib import resources

import pytest

from stability.planner.grid import build_grid, families_of, group_file
from stability.planner.mixed_fleet import mix_grid
from stability.planner.search import scenario_of
from stability.planner.spec import PlanSpec
from theory.builder import CostSpec, cost_model
from theory.errors import FieldError
from theory.hardware import gpu_table
from theory.tensor_parallel import allreduce_law, variant_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MOE = "qwen3-30b-a3b"  # 30.5e9 bf16 parameters: fits one 80 GB H100 in real mode


def _raw(name: str) -> dict:
    return tomllib.loads(resources.files("theory").joinpath("data", name).read_text())


def _spec(rate: float = 1.0, **kw) -> PlanSpec:
    fields = {
        "rate": rate,
        "gpus": ("h100",),
        "models": (MOE,),
        "schedulers": ("vllm",),
        "r_max": 4,
        "ep": (1, 2),
    } | kw
    return PlanSpec(**fields)


def test_ep_fleets_and_prices_agree_with_a_brute_force_count(tmp_path):
    raw = _raw("prices.toml")["prices"]["h100"]
    per_gpu = raw["instance_usd_per_hour"] / raw["gpus_per_instance"]
    probe = build_grid(_spec(1e-3), tp_dir=tmp_path)
    one = {f.ep: o.bound for f, o in probe.one_gpu.items()}
    assert set(one) == {1, 2} and all(b > 0 for b in one.values())
    rate = 2.5 * max(one.values())  # three replicas at least: some fleets are pruned
    grid = build_grid(_spec(rate), tp_dir=tmp_path)
    got = {
        (c.family.ep, c.r, c.gpus, round(c.usd_per_hour, 9), c.certified >= rate)
        for c in (*grid.kept, *grid.pruned)
    }
    # brute force: EP 1 fleets of 1..4 one-GPU replicas, EP 2 fleets of whole groups of 2 one-GPU
    # replicas; each GPU at the instance's price over its GPUs; kept when r one-replica bounds reach
    want = {
        (ep, r, r, round(r * per_gpu, 9), r * one[ep] >= rate)
        for ep in (1, 2)
        for r in range(1, 5)
        if r % ep == 0
    }
    assert got == want
    assert {c.family.ep for c in grid.pruned} == {1, 2} and {c.family.ep for c in grid.kept} == {1, 2}
    assert [c.usd_per_hour for c in grid.kept] == sorted(c.usd_per_hour for c in grid.kept)
    labels = {f.ep: f.label for f in grid.families}
    assert labels == {1: f"h100/{MOE}/real/vllm", 2: f"h100-ep2/{MOE}/real/vllm"}


def test_the_ep_profile_is_the_gpu_with_its_group_and_the_servers_law(tmp_path):
    grid = build_grid(_spec(1e-3), tp_dir=tmp_path)
    table = tomllib.loads(open(grid.gpu_file, encoding="utf-8").read())["gpus"]["h100-ep2"]
    lat, bw = allreduce_law("h100", 2)
    assert table["ep"] == 2 and table["all2all_backend"] == "allgather_reducescatter"
    assert table["allreduce_latency_s"] == lat and table["allreduce_bandwidth_gbs"] == pytest.approx(bw / 1e9)
    set_here = (
        "base",
        "name",
        "aliases",
        "ep",
        "all2all_backend",
        "allreduce_latency_s",
        "allreduce_bandwidth_gbs",
    )  # every other field is the GPU's real-mode one
    base = gpu_table("h100", calibrated=True)
    assert {k: v for k, v in table.items() if k not in set_here} == {
        k: v for k, v in base.items() if k not in set_here
    }
    # the simulation of an EP family runs on that profile
    fam = next(f for f in grid.families if f.ep == 2)
    sc = scenario_of(_spec(1e-3), fam, 2, 100, grid.gpu_file)
    assert sc.gpu == "h100-ep2" and sc.gpu_file == grid.gpu_file
    cm = cost_model(CostSpec(sc.gpu, sc.model, sc.mode, None, sc.gpu_file, None))
    assert cm.gpu.terms.ep == 2


def test_each_gpu_of_an_ep_group_holds_half_the_experts(tmp_path):
    """The bound's KV cache grows by the routed experts' bytes the other GPU holds, counted here from
    the model's shapes: every layer's E experts of three d_model x d_ff_expert SwiGLU matrices."""
    grid = build_grid(_spec(1e-3), tp_dir=tmp_path)
    kv = {f.ep: o.kv_tokens for f, o in grid.one_gpu.items()}
    m = _raw("models.toml")["models"][MOE]
    experts = m["n_layers"] * m["n_experts"] * 3 * m["d_model"] * m["d_ff_expert"] * 2  # bf16 bytes
    kv_per_token = 2 * m["n_layers"] * m["n_kv_heads"] * m["head_dim"] * 2
    assert kv[2] - kv[1] == pytest.approx(experts / 2 / kv_per_token, rel=1e-9)


def test_auto_plans_ep_where_a_server_offers_it_and_the_experts_divide():
    servers = _raw("tensor_parallel.toml")["tensor_parallel"]
    n_experts = _raw("models.toml")["models"][MOE]["n_experts"]
    for gpu, r_max in (("h100", 16), ("h100", 3), ("a100", 4), ("l40s", 16)):
        spec = PlanSpec(rate=1.0, gpus=(gpu,), models=(MOE, "mistral-7b"), schedulers=("vllm",), r_max=r_max)
        got = {(f.model, f.tp, f.ep) for f in families_of(spec)}
        eps = [e for e in servers.get(gpu, {}).get("degrees", []) if n_experts % e == 0 and e <= r_max]
        assert got == {(MOE, 1, 1), ("mistral-7b", 1, 1)} | {(MOE, 1, e) for e in eps}, gpu
    # EP groups run at TP 1: none where --tp leaves 1 out
    assert {f.ep for f in families_of(_spec(tp=(2,), ep=()))} == {1}


def test_dense_grids_write_the_same_gpu_file_as_before(tmp_path):
    spec = PlanSpec(rate=1.0, gpus=("a100",), models=("llama-2-70b",), schedulers=("vllm",), tp=(2, 4))
    fams = families_of(spec)
    assert {f.ep for f in fams} == {1}
    assert group_file(fams, None, tmp_path) == variant_file({(f.gpu, f.tp) for f in fams}, None, tmp_path)
    assert [f.label for f in fams] == ["a100-tp2/llama-2-70b/real/vllm", "a100-tp4/llama-2-70b/real/vllm"]


def test_mixed_fleets_hold_whole_ep_groups(tmp_path):
    spec = _spec(1e-3, gpus=("h100", "h200"), ep=(2,), r_max=6)
    grid = build_grid(spec, tp_dir=tmp_path)
    mixes = mix_grid(grid, spec).kept
    assert mixes
    assert all(n % f.ep == 0 for m in mixes for f, n in m.members)
    assert all(m.gpus <= 6 for m in mixes)


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        (_spec(ep=(0,)), "ep", "integers >= 1"),
        (_spec(models=("mistral-7b",), ep=(2,)), "ep", "dense model mistral-7b"),
        (_spec(ep=(8,), r_max=4), "ep", "at most the 4 GPUs"),
    ],
)
def test_bad_ep_in_the_spec_names_the_field(spec, field, says):
    with pytest.raises(FieldError, match=says) as err:
        spec.validate()
    assert err.value.field == field


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--ep", "0"], "--ep"),
        (["--ep", "two"], "--ep"),
        (["--ep", "2", "--model", "mistral-7b"], "dense model mistral-7b"),
        (["--ep", "8", "--max-gpus", "4"], "at most the 4 GPUs"),
        (["--ep", "3"], "divides the experts"),
        (["--ep", "2", "--tp", "2"], "with 1 among --tp"),
        (["--ep", "2", "--gpu", "l40s"], "servers of a planned GPU offer"),
    ],
)
def test_llmq_plan_refuses_bad_ep_naming_the_option(args, says, tmp_path, capsys):
    from llmq.cli import main

    base = [
        "plan",
        "--gpu",
        "h100",
        "--model",
        MOE,
        "--scheduler",
        "vllm",
        "--max-gpus",
        "4",
        "--out",
        str(tmp_path),
    ]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert "--ep" in err and says in err
    assert not (tmp_path / "plan").exists()  # refused before any bound


def test_pruning_agrees_with_brute_force_on_ep_groups(tmp_path):
    """Every EP 1 and EP 2 fleet of the grid simulated, pruned or not (the search's own rule): the
    bound prunes nothing brute force accepts, and the search returns brute force's cheapest. The
    workload is Table 1's (long decodes): on short requests the MoE's certified bound, a limit of
    large batches whose expert reads amortize, lies far above what the simulated fleets carry, and
    no fleet of 4 GPUs is feasible at a rate that prunes anything."""
    from stability.planner.search import SearchOptions, search
    from stability.planner.slo import parse_slo
    from tests.test_plan import MAX_SEEDS, SMALL, _agrees_with_brute_force, _runner

    def spec(rate):
        return _spec(rate, workload="table1", slo=parse_slo("ttft_p50=0.5,tbt_p99=0.1"))

    one = [o.bound for o in build_grid(spec(1e-3), tp_dir=tmp_path).one_gpu.values()]
    s = spec(1.3 * max(one))  # two replicas at least: the one-GPU fleet is pruned
    runner = _runner(tmp_path)
    res = search(s, runner, SearchOptions(max_seeds=MAX_SEEDS, **SMALL))
    assert res.counts["considered"] == 4 + 2 and res.counts["pruned"] >= 1 and res.best is not None
    _agrees_with_brute_force(s, runner, res)


def test_an_unreachable_target_names_the_best_fleet_of_whole_groups(tmp_path):
    from stability.planner.grid import InfeasibleTargetError

    one = {f.ep: o.bound for f, o in build_grid(_spec(1e-3, r_max=5), tp_dir=tmp_path).one_gpu.items()}
    with pytest.raises(InfeasibleTargetError) as err:
        build_grid(_spec(1e4, r_max=5), tp_dir=tmp_path)
    # five GPUs: five EP 1 replicas, or two EP 2 groups (four replicas)
    assert err.value.best_rate == pytest.approx(max(5 * one[1], 4 * one[2]), rel=1e-12)
