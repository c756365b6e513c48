"""llmq plan: prices, SLOs, the fleet rule, pruning against brute force, re-simulated plans, errors."""

from __future__ import annotations

import math
import sys
from dataclasses import replace

import numpy as np
import pytest

from stability.planner.caps import scheduler_caps
from stability.planner.grid import InfeasibleTargetError, build_grid, families_of, one_gpu_capacity
from stability.planner.prices import load_prices
from stability.planner.runs import PlanRun
from stability.planner.search import SearchOptions, judge, search
from stability.planner.slo import parse_slo
from stability.planner.spec import PlanSpec, fleet_capacity
from stability.runner import Cache, LocalExecutor, Runner
from stability.sim.simulate import Scenario, simulate
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound, kv_capacity_tokens
from theory.errors import FieldError, UnknownNameError
from theory.stats import t_interval
from theory.workload import get_workload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

W = "uniform:64-320,8-40"  # short requests: tiny simulations


# --- prices and SLOs ----------------------------------------------------------------------------


def test_prices_are_instance_price_over_gpus_and_cover_every_preset():
    from importlib import resources

    from theory.hardware import gpu_names

    raw = tomllib.loads(resources.files("theory").joinpath("data", "prices.toml").read_text())["prices"]
    prices = load_prices()
    assert set(gpu_names()) <= set(prices)
    for key, t in raw.items():
        assert prices[key].usd_per_gpu_hour == t["instance_usd_per_hour"] / t["gpus_per_instance"]
        assert t["source"].startswith("https://") and t["as_of"]


def test_price_file_inherits_and_overrides(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[prices.h100]\ninstance_usd_per_hour = 16.0\n[prices.mine]\nbase = "a100"\n'
                 '[prices.flat]\nusd_per_gpu_hour = 2.5\n')
    p, base = load_prices(f), load_prices()
    assert p["h100"].usd_per_gpu_hour == 16.0 / 8
    assert p["mine"].usd_per_gpu_hour == base["a100"].usd_per_gpu_hour
    assert p["flat"].usd_per_gpu_hour == 2.5


def test_slo_parsing():
    s = parse_slo("ttft_p50=0.5, tbt_p99=0.1,tbt_p99@paying=0.05")
    assert [(x.key, x.limit) for x in s.limits] == [("ttft_p50", 0.5), ("tbt_p99", 0.1),
                                                     ("tbt_p99@paying", 0.05)]
    assert s.tail_metric == "tbt_p99"
    assert parse_slo("stable").limits == ()
    res = _result({"ttft_p50": [0.4, 0.3, 0.5], "tbt_p99": [0.2, 0.1, 0.3]})
    assert judge(res, parse_slo("ttft_p50=0.5,tbt_p99=0.1")) == (False, ("tbt_p99",), False)
    assert judge({**res, "unstable": 3}, parse_slo("ttft_p50=0.5")) == (False, ("stable",), True)


def test_scheduler_caps_match_the_schedulers_defaults():
    from stability.sim.registry import get_scheduler
    from stability.sim.simulate import make_params

    cm = cost_model(CostSpec("a100", "mistral-7b", "real"))
    for name, budget, seqs in (("sarathi", "chunk_size", "max_num_seqs"),
                               ("vllm", "max_num_batched_tokens", "max_num_seqs"),
                               ("slai", "token_budget", "max_num_seqs")):
        prm = make_params(get_scheduler(name), cm, {})
        caps = scheduler_caps(name, {})
        assert caps.b_max == max(getattr(prm, budget), getattr(prm, seqs))
        assert caps.max_decodes == getattr(prm, seqs)
        kv = prm.kv.blocks * prm.kv.block_size  # the simulated cache fits in the bound's M
        assert kv <= kv_capacity_tokens(cm, caps.kv_utilization) < kv + prm.kv.block_size
    assert scheduler_caps("sarathi", {"chunk_size": 256}).b_max == 256


# --- (a) the fleet rule -------------------------------------------------------------------------


def test_fleet_bound_is_r_times_one_gpu_and_random_routing_only():
    cm, w = cost_model(CostSpec("a100", "mistral-7b", "real")), get_workload(W)
    one = capacity_bound(cm, w, 1, b_max=512, max_decodes=128).bound
    for r in (2, 3, 5):  # the theorem evaluated with r GPUs, independently
        assert fleet_capacity(one, r) == pytest.approx(capacity_bound(cm, w, r, b_max=512,
                                                                      max_decodes=128).bound, rel=1e-12)
    with pytest.raises(FieldError, match="random"):
        fleet_capacity(one, 2, "jsq")
    with pytest.raises(FieldError, match="random"):
        PlanSpec(rate=1.0, planner="jsq").validate()


def _saturated(r: int, seed: int, rate: float) -> float:
    """Completions per second of r GPUs under random routing while every node is backlogged."""
    sc = Scenario(gpu="a100", mode="real", workload=W, scheduler="sarathi", options=(("memory", False),),
                  r=r, planner="random", rate=rate, load=None, n_requests=500 * r, seed=seed)
    rq = simulate(sc).requests
    t0, t1 = rq["arrival"][int(0.2 * (rq["arrival"].size - 1))], rq["arrival"][-1]
    return float(np.sum((rq["t_finish"] > t0) & (rq["t_finish"] <= t1)) / (t1 - t0))


def test_simulated_fleet_saturates_at_r_times_one_gpu():
    cap = capacity_bound(cost_model(CostSpec("a100", "mistral-7b", "real")), get_workload(W), 1).bound
    one = [_saturated(1, s, 3 * cap) for s in range(3)]
    two = [_saturated(2, s, 6 * cap) for s in range(3)]
    ratio, lo, hi = t_interval([b / (2 * a) for a, b in zip(one, two, strict=True)], 0.99)
    assert lo <= 1.0 <= hi or abs(ratio - 1) < 0.03, (ratio, lo, hi)
    assert max(one) <= cap and max(two) <= 2 * cap  # and the certified bound holds


# --- (b) pruning never drops a plan brute force accepts; (c) plans hold on re-simulation -------


def _runner(tmp_path) -> Runner:
    return Runner(Cache(tmp_path / "cache"), LocalExecutor(1))


SMALL = {"n_requests": 300, "seeds": 2}
MAX_SEEDS = 4  # replicates per candidate at most in these searches (small: quick tests)


def _tiny_spec(rate: float) -> PlanSpec:
    return PlanSpec(rate=rate, workload=W, slo=parse_slo("ttft_p50=0.1,tbt_p99=0.1"), gpus=("a100", "l40s"),
                    schedulers=("sarathi", "rad"), r_min=1, r_max=3)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan")
    probe = _tiny_spec(1.0)
    one = {f: one_gpu_capacity(probe, f).bound for f in families_of(probe)}
    rate = 1.3 * max(one.values())  # every family needs >= 2 GPUs: some candidates are pruned
    spec = _tiny_spec(rate)
    runner = _runner(tmp)
    return spec, runner, search(spec, runner, SearchOptions(max_seeds=MAX_SEEDS, **SMALL))


def _agrees_with_brute_force(spec, runner, res) -> None:
    """Simulate every candidate of the grid, pruned or not: nothing brute force accepts was pruned,
    feasibility is monotone in r, and the search's best is brute force's cheapest."""
    from stability.planner.search import plan_task, replicate

    grid = res.grid
    kept = {(c.family, c.r) for c in grid.kept}
    feasible = {}
    for c in (*grid.kept, *grid.pruned):
        task = plan_task(spec, c.family, c.r, base_seed=0, gpu_file=grid.gpu_file, **SMALL)
        if grid.one_gpu[c.family].kv_tokens <= 0:  # the simulator refuses a model that does not fit
            with pytest.raises(FieldError, match="room for KV blocks"):
                runner.run([task])
            feasible[(c.family, c.r)] = (False, c.usd_per_hour)
            continue
        (_, verdict), = replicate(runner, [task], spec.slo, MAX_SEEDS)  # the search's adaptive rule
        feasible[(c.family, c.r)] = (verdict.feasible, c.usd_per_hour)
    accepted = {k for k, (ok, _) in feasible.items() if ok}
    assert accepted <= kept  # no plan brute force accepts was pruned by the bound
    for fam in grid.families:  # feasibility is monotone in r (the search's assumption)
        oks = [ok for (f, _), (ok, _) in sorted(feasible.items(), key=lambda kv: kv[0][1]) if f == fam]
        assert oks == sorted(oks), (fam.label, oks)
    cheapest = min((usd for ok, usd in feasible.values() if ok), default=None)
    got = res.best.candidate.usd_per_hour if res.best else None
    assert got == cheapest
    assert res.counts["simulated"] + res.counts["saved"] == len(grid.kept)


def test_pruning_agrees_with_brute_force(tiny):
    spec, runner, res = tiny
    assert res.counts["pruned"] > 0 and res.counts["considered"] == len(families_of(spec)) * 3
    _agrees_with_brute_force(spec, runner, res)


def test_pruning_agrees_with_brute_force_on_tensor_parallel_groups(tmp_path):
    def tp_spec(rate):
        return PlanSpec(rate=rate, workload=W, slo=parse_slo("ttft_p50=0.5,tbt_p99=0.2"), gpus=("a100",),
                        models=("llama-2-70b",), schedulers=("vllm", "sarathi"), tp=(2, 4), r_max=8)

    fams = families_of(tp_spec(1.0))
    assert sorted((f.scheduler, f.tp) for f in fams) == [("sarathi", 2), ("sarathi", 4), ("vllm", 2),
                                                          ("vllm", 4)]
    one = [o.bound for o in build_grid(tp_spec(1e-3), tp_dir=tmp_path).one_gpu.values()]
    spec = tp_spec(1.3 * max(one))  # two replicas at least
    runner = _runner(tmp_path)
    res = search(spec, runner, SearchOptions(max_seeds=MAX_SEEDS, **SMALL))
    assert res.counts["considered"] == 2 * (4 + 2) and res.counts["pruned"] >= 4
    _agrees_with_brute_force(spec, runner, res)


def test_full_front_finds_the_same_best_and_a_non_dominated_front(tiny):
    spec, runner, res = tiny
    full = search(spec, runner, SearchOptions(stop_early=False, max_seeds=MAX_SEEDS, **SMALL), res.grid)
    assert full.best.candidate.usd_per_hour == res.best.candidate.usd_per_hour
    assert full.counts["simulated"] >= res.counts["simulated"]
    assert full.counts["families_visited"] == len({c.family for c in res.grid.kept})
    key = spec.slo.tail_metric
    pts = [(e.candidate.usd_per_hour, e.result["metrics"][key][0]) for e in full.front()]
    feas = [(e.candidate.usd_per_hour, e.result["metrics"][key][0]) for e in full.evaluated if e.feasible]
    for p in pts:  # nothing feasible is at least as cheap and strictly better, or cheaper and as good
        assert not any((q[0] <= p[0] and q[1] < p[1]) or (q[0] < p[0] and q[1] <= p[1]) for q in feas)
    assert all(any(q[0] >= p[0] and q[1] >= p[1] for p in pts) for q in feas)  # the front covers them


def test_returned_plans_hold_on_new_seeds_and_longer_runs(tiny, tmp_path):
    from stability.planner.search import plan_task

    spec, _, res = tiny
    assert res.best is not None
    runner = _runner(tmp_path)
    for e in {id(e): e for e in (res.best, *res.front())}.values():
        c = e.candidate
        out = runner.run([plan_task(spec, c.family, c.r, n_requests=600, seeds=3, base_seed=1)])[0]
        assert out["unstable"] == 0 and out["rejected"] == 0
        for s in spec.slo.limits:
            mean, lo, _ = out["metrics"][s.key]
            assert (lo if lo is not None else mean) <= s.limit, (c.family.label, c.r, s.key, out["metrics"])


def test_results_do_not_depend_on_the_worker_count(tiny, tmp_path):
    from stability.planner.search import plan_task, replicate

    spec, _, res = tiny
    c = res.best.candidate
    task = plan_task(spec, c.family, c.r, base_seed=0, **SMALL)
    runner = Runner(Cache(tmp_path / "c2"), LocalExecutor(2))
    try:  # a batch of two tasks per round: the pool runs them
        (fresh, _), _ = replicate(runner, [task, replace(task, seeds=1)], spec.slo, MAX_SEEDS)
    finally:
        runner.executor.close()
    assert fresh["replicates"] == res.best.result["replicates"]
    assert fresh["metrics"] == res.best.result["metrics"]


# --- (d) bad input ------------------------------------------------------------------------------


def test_infeasible_target_names_the_best_reachable_rate():
    spec = PlanSpec(rate=1e6, workload=W, gpus=("a100", "l4"), schedulers=("rad",), r_max=2)
    best = max(2 * capacity_bound(cost_model(CostSpec(g, "mistral-7b", "real")), get_workload(W), 1,
                                  kv_tokens=kv_capacity_tokens(cost_model(CostSpec(g, "mistral-7b", "real")),
                                                               0.9)).bound
               for g in ("a100", "l4"))
    with pytest.raises(InfeasibleTargetError) as err:
        build_grid(spec)
    assert err.value.best_rate == pytest.approx(best, rel=1e-12)
    assert f"{best:.4g} req/s" in str(err.value) and "a100" in str(err.value) and "compute" in str(err.value)


def test_missing_price_names_the_gpu_and_the_file(tmp_path):
    gpus = tmp_path / "g.toml"
    gpus.write_text('[gpus.mygpu]\nbase = "a100"\nname = "My GPU"\naliases = []\n')
    prices = tmp_path / "p.toml"
    prices.write_text('[prices.h100]\nusd_per_gpu_hour = 3.0\n')
    spec = PlanSpec(rate=1.0, workload=W, gpus=("mygpu",), schedulers=("rad",), gpu_file=str(gpus),
                    price_file=str(prices))
    with pytest.raises(FieldError, match=r"mygpu.*prices\.toml.*p\.toml"):
        build_grid(spec)


def test_unknown_slo_and_contradictory_limits():
    with pytest.raises(UnknownNameError, match="ttft_p90"):
        parse_slo("ttft_p90=1")
    with pytest.raises(FieldError, match="slo tbt_p99"):
        parse_slo("tbt_p99=-1")
    with pytest.raises(UnknownNameError, match="slo tbt_p99@paying"):
        PlanSpec(rate=1.0, slo=parse_slo("tbt_p99@paying=0.1")).validate()
    with pytest.raises(FieldError, match="r_min"):
        PlanSpec(rate=1.0, r_min=5, r_max=4).validate()
    with pytest.raises(FieldError, match="rate"):
        PlanSpec(rate=math.nan).validate()


def test_one_gpu_bound_equals_the_theorem_at_the_schedulers_memory_fraction():
    spec = PlanSpec(rate=1.0, workload=W, gpus=("l4",), schedulers=("sarathi", "slai"))
    cm, w = cost_model(CostSpec("l4", "mistral-7b", "real")), get_workload(W)
    for fam in families_of(spec):
        caps = scheduler_caps(fam.scheduler, dict(fam.options))
        direct = capacity_bound(cm, w, 1, b_max=caps.b_max, max_decodes=caps.max_decodes,
                                kv_tokens=kv_capacity_tokens(cm, caps.kv_utilization))
        got = one_gpu_capacity(spec, fam)
        assert got.bound == pytest.approx(direct.bound, rel=1e-9) and got.binds == direct.binds


# --- the command --------------------------------------------------------------------------------


def test_llmq_plan_writes_strict_outputs_with_a_data_dictionary(tmp_path, capsys):
    import csv
    import json
    from importlib import resources

    from llmq.cli import main
    from stability.planner.report import COLUMNS

    args = ["plan", "--rate", "60", "--workload", W, "--gpu", "a100,l40s", "--scheduler", "sarathi",
            "--option", "sarathi.chunk_size=256|512", "--max-gpus", "3", "--requests", "300", "--out",
            str(tmp_path)]
    assert main([*args, "--verify", "--verify-requests", "600", "--mixed"]) == 0
    text = capsys.readouterr().out
    assert "pruned by the certified bound" in text and "Student-t" in text
    assert "cheapest feasible plan" in text and "re-simulated with new seeds" in text
    assert "mixed fleets" in text
    data = json.loads((tmp_path / "plan.json").read_text(),
                      parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert data["counts"]["considered"] == 2 * 2 * 3 and data["best"]["feasible"]
    # every price the plan states, recounted from its rows and the price list read independently
    # (the instance's price over its GPUs, straight from the TOML)
    raw = tomllib.loads(resources.files("theory").joinpath("data", "prices.toml").read_text())["prices"]
    per_gpu = {g: raw[g]["instance_usd_per_hour"] / raw[g]["gpus_per_instance"] for g in ("a100", "l40s")}
    assert {k: v["usd_per_gpu_hour"] for k, v in data["prices"].items()} == pytest.approx(per_gpu, rel=1e-12)
    assert data["evaluated"]
    for row in data["evaluated"]:
        assert row["gpus"] == row["r"] * row["tp"]
        assert row["usd_per_hour"] == pytest.approx(row["gpus"] * per_gpu[row["gpu"]], rel=1e-12)
    assert set(data) - {"fields"} == set(data["fields"])  # every top-level field is described
    assert data["verification"] and all(v["requests_per_run"] == 600 for v in data["verification"])
    assert data["mixed"]["counts"]["considered"] >= data["mixed"]["counts"]["pruned"]
    with open(tmp_path / "plan.csv") as fh:
        header = next(csv.reader(fh))
    assert {"undecided", "seeds"} <= set(header) and data["spec"]["max_seeds"] == 8
    for row in data["evaluated"]:  # latencies: intervals cut at zero, and seeds doubled from 2 to 8
        assert row["seeds"] in (2, 4, 8) and (row["seeds"] == 8 or not row["undecided"])
        assert all(row[k] >= 0 for k in row if k.endswith("_lo") and row[k] is not None)
    metrics = [h for h in header if h not in COLUMNS]
    assert metrics and all(h.split("_lo")[0].split("_hi")[0].split("@")[0] in ("ttft_p50", "ttft_p99",
                                                                                  "tbt_p99") for h in metrics)
    assert (tmp_path / "plan.png").stat().st_size > 0 and (tmp_path / "plan.md").exists()
    assert main([*args, "--mixed"]) == 0  # the same plan without its verification: not another run
    assert "re-simulated with new seeds" not in capsys.readouterr().out
    assert json.loads((tmp_path / "plan.json").read_text())["verification"] is None
    assert json.loads((tmp_path / "plan.run.json").read_text())["adds"] == {"verify": False,
                                                                           "verify_requests": 6000}
    assert main([*args, "--mixed", "--router", "jsq"]) == 2  # another run: its outputs are not overwritten
    assert "differs in router" in capsys.readouterr().err
    (tmp_path / "plan.run.json").unlink()  # the documented override: this run may overwrite them
    assert main([*args, "--mixed", "--router", "jsq"]) == 0  # pure fleets come from the cache
    assert "JSQ router" in capsys.readouterr().out
    assert json.loads((tmp_path / "plan.json").read_text())["mixed"]["router"] == "jsq"
    assert main([*args, "--router", "jsq"]) == 2
    assert "--router" in capsys.readouterr().err
    assert main([*args, "--min-gpus", "4"]) == 2
    assert "r_min" in capsys.readouterr().err


# --- the search's steps, workers, verification --------------------------------------------------


def test_feasibility_steps_find_the_first_feasible_of_every_monotone_pattern():
    from stability.planner.search import Evaluated, feasibility_steps

    for n in range(1, 10):
        for first in range(n + 1):  # feasible from index `first` on (n: none)
            cands = [f"c{k}" for k in range(n)]
            steps, probes = feasibility_steps(cands), 0
            try:
                probe = next(steps)
                while True:
                    probes += 1
                    k = cands.index(probe)
                    probe = steps.send(Evaluated(probe, {}, k >= first, ()))
            except StopIteration as done:
                got = done.value
            assert (got.candidate if got else None) == (cands[first] if first < n else None)
            assert probes <= 2 * math.ceil(math.log2(n)) + 1


def test_search_gives_the_same_plan_for_one_or_two_workers(tiny, tmp_path):
    spec, _, res = tiny
    runner = Runner(Cache(tmp_path / "c2"), LocalExecutor(2))
    try:
        two = search(spec, runner, SearchOptions(parallel=2, max_seeds=MAX_SEEDS, **SMALL), res.grid)
    finally:
        runner.executor.close()
    one, other = res.best.candidate, two.best.candidate
    assert (other.family, other.r) == (one.family, one.r)
    assert any(len(e.result["replicates"]) > SMALL["seeds"] for e in two.evaluated)  # extra replicates ran
    assert two.best.result["metrics"] == res.best.result["metrics"]
    assert runner.cached == 0 and runner.computed >= two.counts["simulated"]  # none from the first search


def test_search_on_a_dask_cluster_gives_the_same_plan(tiny, tmp_path):
    distributed = pytest.importorskip("distributed")
    from stability.runner import DaskExecutor

    spec, _, res = tiny
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        runner = Runner(Cache(tmp_path / "dask"), DaskExecutor(cluster.scheduler_address))
        try:
            remote = search(spec, runner, SearchOptions(parallel=2, max_seeds=MAX_SEEDS, **SMALL), res.grid)
        finally:
            runner.executor.close()
    assert (remote.best.candidate.family, remote.best.candidate.r) == (res.best.candidate.family,
                                                                       res.best.candidate.r)
    assert remote.best.result["metrics"] == res.best.result["metrics"] and runner.computed > 0


def test_verify_resimulates_with_new_seeds(tiny, tmp_path):
    from stability.planner.search import verify

    res = tiny[2]
    checked = verify(res, _runner(tmp_path), n_requests=600, seeds=3)
    assert checked[0].plan is res.best and all(v.holds for v in checked)
    v = checked[0]
    assert len(v.result["replicates"]) == 3 and v.result["replicates"][0]["requests"] == 600
    ttft = [r["ttft_p50"] for r in v.result["replicates"]]
    assert ttft != [r["ttft_p50"] for r in res.best.result["replicates"]][:3]


# --- request classes and traces -----------------------------------------------------------------


def test_class_slos_join_the_spec_and_unknown_classes_are_named():
    from stability.planner.slo import with_class_slos

    classes = (("paying", 0.2, 0.05), ("free", 0.8, 0.5))
    slo = with_class_slos(parse_slo("ttft_p50=0.2,ttft_p99@free=2"), classes)
    assert {s.key: s.limit for s in slo.limits} == {"ttft_p50": 0.2, "ttft_p99@free": 2.0,
                                                    "tbt_p99@paying": 0.05, "tbt_p99@free": 0.5}
    PlanSpec(rate=1.0, slo=slo, classes=classes).validate()
    with pytest.raises(FieldError, match=r"slo tbt_p99@paying.*0\.05"):
        with_class_slos(parse_slo("tbt_p99@paying=0.2"), classes)
    with pytest.raises(UnknownNameError, match="gold"):
        PlanSpec(rate=1.0, slo=parse_slo("ttft_p50@gold=1"), classes=classes).validate()
    with pytest.raises(UnknownNameError, match="--classes"):
        PlanSpec(rate=1.0, slo=parse_slo("ttft_p50@gold=1")).validate()


def test_per_class_metrics_are_each_class_s_own():
    from stability.planner.runs import measure

    sc = Scenario(gpu="a100", mode="real", workload=W, scheduler="slai", rate=40.0, load=None,
                  n_requests=800, seed=3, detail=True, classes=(("paying", 0.3, 0.05), ("free", 0.7, 0.5)))
    res = simulate(sc)
    m = measure(res)
    rq = res.requests
    ttft = rq["t_first"] - rq["arrival"]
    for k, name in enumerate(("paying", "free")):
        mine = (rq["cls"] == k) & np.isfinite(ttft)
        assert m[f"ttft_p50@{name}"] == pytest.approx(np.percentile(ttft[mine], 50), rel=1e-12)
        assert m[f"tbt_p99@{name}"] == res.class_summary()[k]["tbt"]["p99"]
    assert m["ttft_p99"] == pytest.approx(np.percentile(ttft[np.isfinite(ttft)], 99), rel=1e-12)
    lo, hi = sorted((m["tbt_p99@paying"], m["tbt_p99@free"]))
    assert lo <= m["tbt_p99"] <= hi  # the P99 of the union lies between the classes' P99s


def test_llmq_plan_replays_a_trace_at_its_own_rate(tmp_path, capsys):
    import json

    from llmq.cli import main

    rng = np.random.default_rng(5)
    n = 400
    t = np.cumsum(rng.exponential(1 / 30.0, n))
    lp, ld = rng.integers(64, 321, n), rng.integers(8, 41, n)
    f = tmp_path / "trace.csv"
    f.write_text("arrival_time,prompt_len,output_len\n" + "".join(
        f"{a:.9f},{p},{d}\n" for a, p, d in zip(t, lp, ld, strict=True)))
    args = ["plan", "--trace", str(f), "--gpu", "a100,l4", "--scheduler", "sarathi", "--max-gpus", "3",
            "--slo", "ttft_p50=0.5", "--out", str(tmp_path / "o")]
    assert main(args) == 0
    data = json.loads((tmp_path / "o" / "plan.json").read_text())
    rate = (n - 1) / (round(t[-1], 9) - round(t[0], 9))
    assert data["spec"]["rate"] == pytest.approx(rate, rel=1e-9) and data["spec"]["workload"] == str(f)
    assert data["best"] is not None
    runs = [json.loads(p.read_text())["result"] for p in (tmp_path / "o" / "plan" / "cache").glob("*.json")]
    reps = [r for x in runs for r in x.get("replicates", [])]
    assert reps and all(r["requests"] == n for r in reps)  # every simulation replays the whole trace
    assert main([*args, "--rate", "3"]) == 2
    assert "--rate" in capsys.readouterr().err


def test_rad_is_pruned_by_the_kv_bound_its_simulation_cannot_see(tmp_path):
    """RAD's simulation grants unlimited KV memory (Assumption 4), so only the bound's KV part
    keeps the planner from RAD fleets whose cache cannot hold the load."""
    spec = PlanSpec(rate=1e-3, workload="table1", gpus=("a100",), models=("llama-2-70b",),
                    schedulers=("rad",), r_max=2)
    grid = build_grid(spec, tp_dir=tmp_path)
    from dataclasses import replace

    (fam, one), = grid.one_gpu.items()
    assert fam.tp == 2 and one.binds == "kv-memory" and one.lam_kv < one.lam_compute
    rate = 0.5 * (one.lam_kv + one.lam_compute)  # within compute, beyond the KV cache
    with pytest.raises(InfeasibleTargetError, match="KV memory") as err:
        build_grid(replace(spec, rate=rate), tp_dir=tmp_path)
    assert err.value.best_rate == pytest.approx(one.lam_kv, rel=1e-12)
    sc = Scenario(gpu=fam.gpu_key, gpu_file=grid.gpu_file, model="llama-2-70b", mode="real",
                  workload="table1", scheduler="rad", rate=rate, load=None, n_requests=3000, seed=1)
    assert simulate(sc).verdict().verdict != "unstable"  # the memoryless simulation would accept it


# --- feasibility decided with its uncertainty (adaptive replication) ----------------------------


def _result(metrics: dict, unstable: int = 0, rejected: int = 0, seeds: int = 3) -> dict:
    return {"unstable": unstable, "rejected": rejected, "metrics": metrics, "replicates": [{}] * seeds}


def test_judge_decides_only_what_the_intervals_decide():
    slo = parse_slo("ttft_p50=0.5,tbt_p99=0.1")
    inside, above = [0.3, 0.2, 0.4], [0.15, 0.12, 0.18]
    straddle_below, straddle_above = [0.45, 0.35, 0.55], [0.11, 0.05, 0.17]
    cases = [  # (ttft_p50, tbt_p99, unstable, rejected) -> (feasible, missed, decided)
        ((inside, [0.05, 0.04, 0.06], 0, 0), (True, (), True)),
        ((inside, above, 0, 0), (False, ("tbt_p99",), True)),
        ((straddle_below, [0.05, 0.04, 0.06], 0, 0), (True, (), False)),
        ((straddle_below, straddle_above, 0, 0), (False, ("tbt_p99",), False)),
        ((straddle_below, above, 0, 0), (False, ("tbt_p99",), True)),  # one certain miss decides
        ((inside, [0.05, 0.04, 0.06], 1, 0), (True, (), False)),  # one unstable seed of 3: open
        ((inside, [0.05, 0.04, 0.06], 2, 0), (False, ("stable",), False)),  # a majority: missed, open
        ((inside, [0.05, 0.04, 0.06], 3, 0), (False, ("stable",), True)),  # every seed: certain
        ((inside, above, 1, 0), (False, ("tbt_p99",), True)),  # a certain SLO miss decides
        ((inside, [0.05, 0.04, 0.06], 0, 3), (False, ("rejections",), True)),
        ((inside, [None, None, None], 0, 0), (False, ("tbt_p99",), True)),  # undefined: a miss
        (([0.3, None, None], [0.05, None, None], 0, 0), (True, (), False)),  # one replicate: no interval
    ]
    for (ttft, tbt, unstable, rejected), want in cases:
        got = judge(_result({"ttft_p50": ttft, "tbt_p99": tbt}, unstable, rejected), slo)
        assert tuple(got) == want, (ttft, tbt, unstable, rejected, got)
    one = {"ttft_p50": [0.3, None, None], "tbt_p99": [0.05, None, None]}
    assert tuple(judge(_result(one, 1, seeds=1), slo)) == (False, ("stable",), False)  # one seed: open
    assert tuple(judge(_result(one, 1, seeds=2), slo)) == (False, ("stable",), False)  # a tie: missed


def _named(name: str, **fields) -> Scenario:
    """A scenario that names a row of a fake runner's table (by its GPU field; never simulated)."""
    return Scenario(gpu=name, **fields)


class _TableRunner:
    """A runner whose plan tasks return fixed replicate values: replicate k of the task whose
    scenario is named ``name`` (:func:`_named`) has ``ttft_p50 = TABLE[name][k]``; it records every
    task asked."""

    def __init__(self, table: dict):
        self.table, self.asked = table, []

    def run(self, tasks: list) -> list[dict]:
        self.asked += tasks
        return [{"replicates": [{"ttft_p50": self.table[t.scenario.gpu][k], "verdict": "stable",
                                 "rejected": 0, "requests": 10} for k in t.replicates()],
                 "r": 1, "rate": 1.0, "elapsed_s": 1.0} for t in tasks]


def _scipy_interval(x: list[float]) -> list[float]:
    """Mean and 95% Student-t interval by scipy, low end clipped at 0."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    lo, hi = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=stats.sem(x))
    return [x.mean(), max(lo, 0.0), hi]


def test_replicate_doubles_undecided_candidates_and_pools_every_replicate():
    from stability.planner.search import replicate

    table = {"decides_feasible_at_4": [0.5, 0.9, 0.6, 0.7],
             "decides_infeasible_at_4": [1.5, 1.1, 1.3, 1.4],
             "clear": [0.2, 0.21],
             "undecided_at_8": [0.0, 3.0, 0.0, 0.0] * 2}
    slo = parse_slo("ttft_p50=1")
    runner = _TableRunner(table)
    # replayed traces: their runs are never lengthened, so the doubling alone is seen
    tasks = [PlanRun(_named(name, trace="t.csv"), seeds=2, seed=11 + k) for k, name in enumerate(table)]
    out = replicate(runner, tasks, slo, max_seeds=8)
    want = {"decides_feasible_at_4": (True, 4, True), "decides_infeasible_at_4": (False, 4, True),
            "clear": (True, 2, True), "undecided_at_8": (True, 8, False)}  # mean 0.75: within, undecided
    for task, (res, verdict) in zip(tasks, out, strict=True):
        name = task.scenario.gpu
        assert (verdict.feasible, len(res["replicates"]), verdict.decided) == want[name], (name, verdict)
        assert res["metrics"]["ttft_p50"] == pytest.approx(_scipy_interval(table[name]), rel=1e-9)
        asked = [(t.first, t.seeds, t.seed) for t in runner.asked if t.scenario.gpu == name]
        n = want[name][1]
        doubling = [(0, 2), (2, 2), (4, 4)][:{2: 1, 4: 2, 8: 3}[n]]
        assert asked == [(f, k, task.seed) for f, k in doubling]  # every round under the first seed
        assert res["elapsed_s"] == len(asked)
    assert out[3][0]["metrics"]["ttft_p50"][1] == 0.0  # a latency's interval is cut at zero
    capped = replicate(_TableRunner(table), tasks[:1], slo, max_seeds=3)[0]
    assert len(capped[0]["replicates"]) == 3 and not capped[1].decided  # 2 -> 3: the cap, undecided


def test_replicates_have_the_same_seeds_whichever_task_ran_them():
    sc = Scenario(gpu="a100", mode="real", workload=W, scheduler="sarathi", rate=20.0, load=None,
                  n_requests=120, seed=0, detail=True)
    whole = PlanRun(sc, seeds=4, seed=7).run()
    parts = [PlanRun(sc, seeds=2, seed=7, first=first).run() for first in (0, 2)]
    assert whole["replicates"] == parts[0]["replicates"] + parts[1]["replicates"]
    assert parts[0]["replicates"] != parts[1]["replicates"]


def test_an_interrupted_search_resumes_to_the_same_plan(tiny, tmp_path):
    from stability.runner import SweepInterrupted

    spec, _, res = tiny
    done = []

    def stop_after_two(task, result):
        done.append(task)
        if len(done) == 2:
            raise KeyboardInterrupt

    cache = Cache(tmp_path / "c")
    with pytest.raises(SweepInterrupted):
        search(spec, Runner(cache, LocalExecutor(1), on_result=stop_after_two),
               SearchOptions(max_seeds=MAX_SEEDS, **SMALL), res.grid)
    again = Runner(cache, LocalExecutor(1))
    resumed = search(spec, again, SearchOptions(max_seeds=MAX_SEEDS, **SMALL), res.grid)
    assert again.cached == 2 and again.computed > 0
    assert any(len(e.result["replicates"]) > SMALL["seeds"] for e in resumed.evaluated)  # more seeds asked
    assert [(e.candidate, e.result["metrics"], e.decided) for e in resumed.evaluated] == \
        [(e.candidate, e.result["metrics"], e.decided) for e in res.evaluated]
    assert resumed.best.candidate == res.best.candidate


def test_max_seeds_must_cover_the_first_seeds(tiny, tmp_path, capsys):
    from llmq.cli import main

    spec, runner, res = tiny
    with pytest.raises(FieldError, match=r"max_seeds: expected an integer >= seeds \(4\).*got 3"):
        search(spec, runner, SearchOptions(n_requests=300, seeds=4, max_seeds=3), res.grid)
    assert main(["plan", "--seeds", "4", "--max-seeds", "2", "--out", str(tmp_path)]) == 2
    assert "--max-seeds: expected an integer >= --seeds (4)" in capsys.readouterr().err


def test_an_undecided_plan_says_so_and_what_to_do(tiny):
    from dataclasses import replace

    from stability.planner.report import describe, markdown, plan_row
    from stability.planner.search import Evaluated

    res = tiny[2]
    e = res.best
    keys = [x.key for x in res.spec.slo.limits]
    assert "undecided" not in describe(e, keys)
    open_ = Evaluated(e.candidate, e.result, True, (), False)
    n = len(e.result["replicates"])
    assert describe(open_, keys).endswith(f"; undecided at {n} seeds: use --verify or more --requests")
    row = plan_row(open_, keys, set(), open_)
    assert row["undecided"] and row["seeds"] == n
    assert "| yes, undecided |" in markdown(replace(res, evaluated=[open_]), [], [row])


class _VoteRunner:
    """A runner whose plan tasks return fixed replicates: replicate k of the task whose scenario
    is named ``name`` (:func:`_named`) with ``n`` requests has ``(ttft_p50, verdict) =
    TABLE[name][n][k]``; it records every task asked."""

    def __init__(self, table: dict):
        self.table, self.asked = table, []

    def run(self, tasks: list) -> list[dict]:
        self.asked += tasks
        out = []
        for t in tasks:
            sc = t.scenario
            reps = [self.table[sc.gpu][sc.n_requests][k] for k in t.replicates()]
            out.append({"replicates": [{"ttft_p50": x, "verdict": v, "rejected": 0,
                                        "requests": sc.n_requests} for x, v in reps],
                        "r": 1, "rate": 1.0, "elapsed_s": 1.0})
        return out


def test_an_unstable_seed_or_an_undecided_candidate_is_judged_again_on_longer_runs():
    from stability.planner.search import LONGER, replicate

    u, i, s = "unstable", "inconclusive", "stable"
    n1, n2, n3 = 100, 100 * LONGER, 100 * LONGER**2
    table = {  # name -> requests per run -> replicates (ttft_p50, verdict)
        "transient": {n1: [(0.3, u), (0.3, i)], n2: [(0.3, i), (0.31, s)]},
        "overloaded": {n1: [(0.3, u), (0.4, u)], n2: [(0.5, u), (0.6, u)]},  # unanimous on longer runs
        "slo_out": {n1: [(1.50, u), (1.51, i)]},  # the SLO rules it out: no longer runs
        "split": {n1: [(0.3, u), (0.3, u)], n2: [(0.3, u)] + [(0.3, s)] * 7, n3: [(0.3, s), (0.31, s)]},
        "tie": {n1: [(0.3, i), (0.3, u)], n2: [(0.3, u), (0.3, s)] * 4, n3: [(0.3, u), (0.3, s)] * 4},
        "open_slo": {n1: [(0.5, s), (1.4, s)] * 4, n2: [(1.2, s), (1.25, s)] * 2},  # open at the cap
        "trace": {n1: [(0.3, u), (0.3, i)] + [(0.3, s)] * 6},  # a trace is replayed whole
    }
    want = {  # feasible, missed, decided, times lengthened, replicates
        "transient": (True, (), True, 1, 2),
        "overloaded": (False, ("stable",), True, 1, 2),
        "slo_out": (False, ("stable", "ttft_p50"), True, 0, 2),
        "split": (True, (), True, 2, 2),  # 1 of 8 unstable, undecided at the cap: longer runs decide
        "tie": (False, ("stable",), False, 2, 8),  # half unstable at the cap on the longest runs
        "open_slo": (False, ("ttft_p50",), True, 1, 4),
        "trace": (True, (), False, 0, 8),  # 1 of 8 unstable at the cap: the majority says stable
    }
    runner = _VoteRunner(table)
    tasks = [PlanRun(_named(name, n_requests=n1, trace="t.csv" if name == "trace" else None), seeds=2,
                     seed=5 + k) for k, name in enumerate(table)]
    out = replicate(runner, tasks, parse_slo("ttft_p50=1"), max_seeds=8)
    for task, (res, j) in zip(tasks, out, strict=True):
        name = task.scenario.gpu
        got = (j.feasible, j.missed, j.decided, res["lengthened"], len(res["replicates"]))
        assert got == want[name], (name, got)
        asked = [(t.scenario.n_requests, t.first, t.seeds, t.seed) for t in runner.asked
                 if t.scenario.gpu == name]
        lengths = [a[0] for a in asked]
        assert lengths == sorted(lengths) and len(set(lengths)) == 1 + res["lengthened"]
        assert {a[3] for a in asked} == {task.seed}  # replicate k keeps replicate_seed(s, k)
        for n in set(lengths):  # each length starts again from the first replicates
            assert next(a for a in asked if a[0] == n)[1:3] == (0, 2)
        assert {r["requests"] for r in res["replicates"]} == {lengths[-1]}
        assert res["shorter_runs"] == sum(a[2] for a in asked if a[0] < lengths[-1])


def test_short_runs_unstable_near_capacity_are_judged_on_longer_runs_both_ways(tmp_path):
    """7 H100s running RAD at 40 req/s (Table 1): both 2,000-request seeds say unstable, both
    6,000-request ones do not; 5 H100s running vLLM: unstable at either length."""
    from stability.planner.runs import replicate_seed
    from stability.planner.search import LONGER, plan_task, replicate

    spec = PlanSpec(rate=40.0, workload="table1", slo=parse_slo("stable"), gpus=("h100",),
                    schedulers=("rad", "vllm"), r_max=16)
    grid = build_grid(spec)
    fam = {f.scheduler: f for f in grid.families}
    tasks = [plan_task(spec, fam["rad"], 7, 2000, 2, 0, grid.gpu_file),
             plan_task(spec, fam["vllm"], 5, 2000, 2, 0, grid.gpu_file)]

    def verdicts(task, n):  # each seed's verdict, simulated directly
        return [simulate(replace(task.scenario, n_requests=n,
                                 seed=replicate_seed(task.seed, k))).verdict().verdict
                for k in range(2)]

    got = replicate(_runner(tmp_path), tasks, spec.slo, max_seeds=8)
    for task, (res, j), want in zip(tasks, got, [(True, ()), (False, ("stable",))], strict=True):
        assert verdicts(task, 2000) == ["unstable", "unstable"]  # the old rule: ruled out for certain
        long_ = verdicts(task, LONGER * 2000)
        assert res["lengthened"] and [r["verdict"] for r in res["replicates"]] == long_
        assert (j.feasible, j.missed, j.decided) == (*want, True), (task.scenario.scheduler, long_)
    assert "unstable" not in verdicts(tasks[0], LONGER * 2000)


def test_plan_metrics_leave_out_the_warm_up_the_verdict_leaves_out():
    from dataclasses import replace

    from stability.planner.runs import measure
    from stability.planner.search import scenario_of
    from stability.sim.metrics import WARMUP
    from tests.test_metrics import _emission_times

    spec = _tiny_spec(20.0)
    fam = next(f for f in families_of(spec) if f.scheduler == "sarathi")
    sc = scenario_of(spec, fam, 1, 400)
    assert sc.warmup == WARMUP
    res = simulate(replace(sc, log=True))
    arrival = res.requests["arrival"]
    t0 = arrival.min() + 0.1 * (arrival.max() - arrival.min())  # the verdict's window starts here
    assert res.verdict().window[0] == pytest.approx(t0, rel=1e-12)
    assert res.tbt_from == pytest.approx(t0, rel=1e-12)
    got = measure(res)
    ttft = (res.requests["t_first"] - arrival)[arrival >= t0]
    assert 0 < ttft.size < arrival.size and got["requests"] == arrival.size
    assert got["ttft_p50"] == pytest.approx(np.percentile(ttft, 50), rel=1e-12)
    assert got["ttft_p99"] == pytest.approx(np.percentile(ttft, 99), rel=1e-12)
    times = list(_emission_times(res).values())
    gaps = np.concatenate([np.diff(t) for t in times])
    at = np.concatenate([t[1:] for t in times])
    assert got["tbt_p99"] == pytest.approx(np.quantile(gaps[at >= t0], 0.99), rel=0.025)


@pytest.mark.parametrize(("load", "moves"), [(0.97, True), (0.3, False)])
def test_the_warm_up_lowers_ttft_near_capacity_only(load, moves):
    """Paired seeds: the median TTFT after the warm-up minus the median over every request. From an
    empty system the first requests see short queues, which matters near capacity only."""
    from dataclasses import replace

    from stability.planner.runs import measure

    diff = []
    for seed in range(10):
        sc = Scenario(scheduler="sarathi", load=load, n_requests=3000, detail=True, warmup=0.1, workload=W,
                      seed=seed)
        whole = measure(simulate(replace(sc, warmup=0.0)))  # the same run, every request counted
        diff.append(measure(simulate(sc))["ttft_p50"] - whole["ttft_p50"])
    _, lo, hi = t_interval(diff, 0.95)
    assert (lo > 0) == moves and (lo <= 0 <= hi) == (not moves), (lo, hi)


def test_the_fleet_one_replica_smaller_is_reported_as_the_search_judged_it(tiny):
    """The search's evidence that the best r is the smallest: the simulated fleet at r - 1 of the
    best's family, decided infeasible or undecided (then the report says a smaller fleet may do),
    and nothing when that fleet was never simulated."""
    from dataclasses import replace

    from stability.planner.report import below_line, to_json
    from stability.planner.search import Evaluated

    res = tiny[2]
    best = res.best
    others = [e for e in res.evaluated if e.candidate.family != best.candidate.family
              or e.candidate.r != best.candidate.r - 1]
    alone = replace(res, evaluated=[*others])
    assert alone.below_best() is None and below_line(alone) is None
    smaller = replace(best.candidate, r=best.candidate.r - 1)
    for decided, says in ((True, "decided infeasible (missed ttft_p50)"),
                          (False, "a smaller fleet may also meet the SLOs")):
        below = Evaluated(smaller, best.result, False, ("ttft_p50",), decided)
        with_below = replace(res, evaluated=[*others, below])
        assert with_below.below_best() is below
        line = below_line(with_below)
        assert line.startswith(f"one replica fewer ({smaller.r} x {smaller.family.label})") and says in line
        assert to_json(with_below, 0.0, [])["below_best"] == {
            "label": smaller.family.label, "r": smaller.r, "feasible": False, "undecided": not decided,
            "missed": ["ttft_p50"]}
    assert replace(res, best=None).below_best() is None
