"""The runner's task types: a task's identity holds every input its run reads (so two different
runs never share a cache key), its seed is a function of that identity and the base seed alone,
and the planner's tasks add replicates and lengthen runs under the seed they started with."""

from dataclasses import fields, replace

import pytest

from stability.planner.runs import PlanRun
from stability.planner.search_mixed import MixedRun
from stability.points import DtmcPoint, NMinPoint, SimPoint
from stability.runner import derive_seed, task_key
from stability.sim.simulate import Scenario
from theory.builder import CostSpec
from theory.errors import FieldError

SWEEP = Scenario(gpu="a100", workload="table1", pad=True, scheduler="sarathi", rate=3.0, load=None,
                 n_requests=500)
OTHER = {str: lambda v: v + "x", bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: 2 * v + 1}
UNSET = {"tiles": "128x128", "gpu_file": "g.toml", "model_file": "m.toml", "trace": "t.csv",
         "total_cap": 100, "options": (("chunk_size", 256),), "classes": (("paying", 0.5, 0.1),),
         "stages": ((10.0, 1.0, "poisson"),), "concurrency": 4}


def changed(sc: Scenario, name: str) -> Scenario:
    """``sc`` with the field ``name`` set to another value of its kind."""
    value = getattr(sc, name)
    new = UNSET[name] if name in UNSET and not value else OTHER[type(value)](value)
    return replace(sc, **{name: new})


def test_a_sweep_point_is_spelled_in_the_sweeps_terms_and_names_nothing_else():
    ident = SimPoint(SWEEP).identity()
    assert ident == {"kind": "sim", "tileset": "a100", "model": "mistral-7b", "mode": "paper",
                     "workload": "table1", "variant": "pad", "gpu_file": None, "scheduler": "sarathi",
                     "options": [], "r": 1, "rate": 3.0, "n_requests": 500, "seed": 0}
    assert SimPoint(SWEEP, replicate=2).identity() == {**ident, "replicate": 2}


@pytest.mark.parametrize("name", [f.name for f in fields(Scenario) if f.name != "load"])
def test_every_scenario_field_a_simulation_reads_changes_the_key(name):
    """``load`` alone is left out: a point has a rate, and the simulator reads the load only
    without one."""
    a, b = SimPoint(SWEEP), SimPoint(changed(SWEEP, name))
    assert task_key(a.identity()) != task_key(b.identity()), name
    assert task_key(SimPoint(replace(SWEEP, load=0.3)).identity()) == task_key(a.identity())


def test_a_sweep_point_without_a_rate_is_refused():
    with pytest.raises(FieldError, match=r"scenario\.rate"):
        SimPoint(replace(SWEEP, rate=None, load=0.9))


def test_seeds_are_a_function_of_the_identity_and_the_base_seed():
    one, again, other = SimPoint.seeded(SWEEP, 0), SimPoint.seeded(SWEEP, 0), SimPoint.seeded(SWEEP, 1)
    assert one == again and one.scenario.seed != other.scenario.seed
    assert one.scenario.seed == derive_seed(SimPoint(SWEEP).identity(), 0)
    assert SimPoint.seeded(SWEEP, 0, replicate=1).scenario.seed != one.scenario.seed
    cost = CostSpec("a100", "mistral-7b", "paper")
    n = NMinPoint.seeded(cost, "table1", 0.05, 100, 64, 0)
    assert n.seed == derive_seed(NMinPoint(cost, "table1", 0.05, 100, 64).identity(), 0)
    d = DtmcPoint.seeded(cost, "table1", False, 64, 100, 0)
    padded = DtmcPoint.seeded(cost, "table1", True, 64, 100, 0)
    assert d.identity()["variant"] == "raw" and d.seed != padded.seed


def test_a_plan_run_adds_replicates_and_lengthens_runs_under_its_seed():
    run = PlanRun.seeded(replace(SWEEP, detail=True), seeds=2, base_seed=0)
    assert "first" not in run.identity() and run.replicates() == range(0, 2)
    more = replace(run, first=2, seeds=4)
    assert more.identity()["first"] == 2 and more.replicates() == range(2, 6) and more.seed == run.seed
    longer = more.lengthened(3)
    assert (longer.scenario.n_requests, longer.first, longer.seed) == (1500, 0, run.seed)
    assert replace(run, scenario=replace(run.scenario, trace="t.csv")).lengthened(3) is None


def test_a_mixed_run_names_its_router_only_when_it_is_not_random():
    members = (SWEEP, replace(SWEEP, gpu="l4"))
    plain = MixedRun.seeded(members, 2, 0)
    assert "router" not in plain.identity()
    assert [m["gpu"] for m in plain.identity()["members"]] == ["a100", "l4"]
    jsq = MixedRun.seeded(members, 2, 0, "jsq", (2.0, 1.0))
    assert (jsq.identity()["router"], jsq.identity()["weights"]) == ("jsq", [2.0, 1.0])
    assert jsq.seed != plain.seed
    assert replace(plain, members=(members[0], replace(members[1], trace="t.csv"))).lengthened(3) is None
    assert [m.n_requests for m in plain.lengthened(3).members] == [1500, 1500]
