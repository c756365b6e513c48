"""Mixed fleets: the capacity of a capacity-proportional random split is the members' sum, the
mixes' pruning agrees with brute force, and the planner says whether a mix beats the pure fleets."""

from __future__ import annotations

import sys
from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

from stability.planner.mixed_fleet import member_rates, mix_grid, mixed_capacity
from stability.planner.search import SearchOptions, replicate, search
from stability.planner.search_mixed import mixed_task, search_mixes
from stability.planner.slo import parse_slo
from stability.planner.spec import PlanSpec
from stability.runner import Cache, LocalExecutor, Runner
from stability.sim.simulate import Scenario, simulate
from theory.errors import FieldError
from theory.workload import get_workload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

W = "uniform:64-320,8-40"
SMALL = {"n_requests": 300, "seeds": 2}


def test_capacity_rule_and_proportional_rates():
    assert mixed_capacity([3.0, 5.0], [2, 1]) == 11.0
    assert member_rates(11.0, [3.0, 5.0], [2, 1]) == pytest.approx([6.0, 5.0])  # each replica at 1
    with pytest.raises(FieldError, match="counts"):
        mixed_capacity([3.0], [1, 2])


def _saturated(gpu: str, seed: int) -> float:
    """Completions per second of one GPU kept backlogged by arrivals at twice its certified bound
    (Sarathi, memory not modelled), after the first fifth of the run."""
    from theory.builder import CostSpec, cost_model
    from theory.capacity import capacity_bound

    bound = capacity_bound(cost_model(CostSpec(gpu, "mistral-7b", "real")), get_workload(W), 1).bound
    sc = Scenario(gpu=gpu, mode="real", workload=W, scheduler="sarathi", options=(("memory", False),),
                  rate=2 * bound, load=None, n_requests=3000, seed=seed)
    rq = simulate(sc).requests
    t0, t1 = rq["arrival"][600], rq["arrival"][-1]
    return float(np.sum((rq["t_finish"] > t0) & (rq["t_finish"] <= t1)) / (t1 - t0))


def _split_verdicts(tmp_path, caps: dict, weights: dict, lam: float, n: int = 10000) -> dict:
    """One Poisson stream of rate lam, each request sent to GPU g with probability weights[g] /
    sum(weights): every GPU's share replayed as a trace; the stability verdict of each."""
    rng = np.random.default_rng(11)
    t = np.cumsum(rng.exponential(1.0 / lam, n))
    lp, ld = get_workload(W).sample(n, rng)
    gpus = list(caps)
    p = np.array([weights[g] for g in gpus]) / sum(weights.values())
    kind = rng.choice(len(gpus), size=n, p=p)
    out = {}
    for k, g in enumerate(gpus):
        f = tmp_path / f"{g}-{lam:.3f}.csv"
        m = kind == k
        f.write_text("arrival_time,prompt_len,output_len\n" + "".join(
            f"{a:.9f},{x},{y}\n" for a, x, y in zip(t[m], lp[m], ld[m], strict=True)))
        sc = Scenario(gpu=g, mode="real", scheduler="sarathi", options=(("memory", False),), trace=str(f),
                      workload=str(f), n_requests=n, seed=0)
        out[g] = simulate(sc).verdict().verdict
    return out


def test_a_heterogeneous_fleet_carries_the_sum_of_its_members_capacities(tmp_path):
    caps = {g: float(np.mean([_saturated(g, s) for s in range(2)])) for g in ("a100", "l4")}
    total = sum(caps.values())
    below = _split_verdicts(tmp_path, caps, caps, 0.8 * total)
    above = _split_verdicts(tmp_path, caps, caps, 1.25 * total)
    assert "unstable" not in below.values(), below
    assert set(above.values()) == {"unstable"}, above
    even = _split_verdicts(tmp_path, caps, {g: 1.0 for g in caps}, 0.8 * total)
    assert even["l4"] == "unstable"  # an even split overloads the slower GPU below the sum


def _spec(rate: float) -> PlanSpec:
    return PlanSpec(rate=rate, workload=W, slo=parse_slo("ttft_p50=0.2,tbt_p99=0.1"),
                    gpus=("a100", "l4", "l40s"), schedulers=("sarathi",), r_max=4)


def test_mix_pruning_agrees_with_brute_force_and_the_search_finds_the_cheapest(tmp_path):
    runner = Runner(Cache(tmp_path / "c"), LocalExecutor(1))
    res = search(_spec(60.0), runner, SearchOptions(**SMALL))
    one = {f.gpu: res.grid.one_gpu[f].bound for f in res.grid.families}
    everything = mix_grid(res.grid, res.spec)  # no price limit: every mix of the grid
    n_mixes = sum(sum(1 for a in range(1, 4) for b in range(1, 5 - a)) for _ in range(3))
    assert everything.considered == n_mixes
    for m in everything.kept:
        assert m.certified == pytest.approx(sum(n * one[f.gpu] for f, n in m.members), rel=1e-12)
    # every mix's price recounted from its members and the price list read independently (the
    # instance's price over its GPUs, straight from the TOML)
    raw = tomllib.loads(resources.files("theory").joinpath("data", "prices.toml").read_text())["prices"]
    per_gpu = {g: raw[g]["instance_usd_per_hour"] / raw[g]["gpus_per_instance"]
               for g in ("a100", "l4", "l40s")}
    assert everything.kept
    for m in everything.kept:
        count = {g: sum(n * f.tp for f, n in m.members if f.gpu_key == g) for g in per_gpu}
        assert sorted(n > 0 for n in count.values()) == [False, True, True]  # two kinds in a mix
        assert m.usd_per_hour == pytest.approx(sum(n * per_gpu[g] for g, n in count.items()), rel=1e-12)
    brute = {}
    pruned_too = mix_grid(res.grid, replace(res.spec, rate=1e-9))  # nothing pruned
    for m in pruned_too.kept:  # simulate every mix, pruned or not
        (_, verdict), = replicate(runner, [mixed_task(res, m, seeds=2, n_requests=300, base_seed=0)],
                                  res.spec.slo)  # the search's adaptive rule
        brute[m.label] = (verdict.feasible, m.usd_per_hour)
    kept = {m.label for m in everything.kept}
    assert {lab for lab, (ok, _) in brute.items() if ok} <= kept  # no mix brute force accepts was pruned
    mixes = search_mixes(res, runner, base_seed=0, budget=50, **SMALL)
    cheaper = [usd for ok, usd in brute.values() if ok and usd < res.best.candidate.usd_per_hour]
    assert (mixes.best.mix.usd_per_hour if mixes.best else None) == (min(cheaper) if cheaper else None)
    assert mixes.beats_pure == bool(cheaper) and not mixes.counts["exhausted"]


@pytest.mark.parametrize("router", ["jsq", "sed"])
def test_state_dependent_mixes_pruning_agrees_with_brute_force_and_the_search_finds_the_cheapest(
        tmp_path, router):
    """Behind JSQ or SED the certified sum still prunes only mixes that brute-force simulation
    (same router) rejects, and the search returns the cheapest mix brute force accepts below the
    best pure plan. At 75 req/s no single A100 carries the load and four L4s certify less, so
    pure fleets need two A100s; with a TBT P99 limit of 150 ms, behind SED one A100 and two L4s
    meet the SLOs for less (an L4 is sent a request only when the A100 holds proportionally more),
    which the planner must find, while behind JSQ, which sends a request to an L4 whenever it holds
    no more pending requests than the A100, no cheaper mix does."""
    runner = Runner(Cache(tmp_path / "c"), LocalExecutor(1))
    spec = replace(_spec(75.0), gpus=("a100", "l4"), slo=parse_slo("ttft_p50=0.2,tbt_p99=0.15"))
    res = search(spec, runner, SearchOptions(**SMALL))
    kept = {m.label for m in mix_grid(res.grid, res.spec).kept}
    brute = {}
    for m in mix_grid(res.grid, replace(res.spec, rate=1e-9)).kept:  # every mix, pruned or not
        task = mixed_task(res, m, seeds=2, n_requests=300, base_seed=0, router=router)
        assert task.router == router and [s.r for s in task.members] == [n for _, n in m.members]
        (_, verdict), = replicate(runner, [task], res.spec.slo)  # the search's adaptive rule
        brute[m.label] = (verdict.feasible, m.usd_per_hour)
    assert {lab for lab, (ok, _) in brute.items() if ok} <= kept
    mixes = search_mixes(res, runner, base_seed=0, budget=50, router=router, **SMALL)
    cheaper = [usd for ok, usd in brute.values() if ok and usd < res.best.candidate.usd_per_hour]
    assert mixes.router == router and not mixes.counts["exhausted"]
    assert (mixes.best.mix.usd_per_hour if mixes.best else None) == (min(cheaper) if cheaper else None)
    assert mixes.beats_pure == bool(cheaper) == (router == "sed")


def test_a_family_that_certifies_nothing_joins_no_mix():
    from types import SimpleNamespace

    from stability.planner.grid import Family, OneGpu

    fams = [Family(g, "m", "real", "sarathi", ()) for g in ("a", "b", "c")]
    bounds = {"a": 10.0, "b": 0.0, "c": 4.0}
    one = {f: OneGpu(bounds[f.gpu], "compute", 0, 0, 0) for f in fams}
    grid = SimpleNamespace(families=fams, one_gpu=one,
                           prices={g: SimpleNamespace(usd_per_gpu_hour=1.0) for g in bounds})
    spec = SimpleNamespace(rate=5.0, r_min=1, r_max=3)
    kinds = {tuple(f.gpu for f, _ in m.members) for m in mix_grid(grid, spec).kept}
    assert kinds == {("a", "c")}


def test_mixes_refuse_a_trace():
    from stability.planner.search import PlanResult

    spec = PlanSpec(rate=1.0, workload="t.csv", trace="t.csv")
    with pytest.raises(FieldError, match="--mixed"):
        search_mixes(PlanResult(spec, None), None, 10, 1)
