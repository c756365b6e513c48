"""Fleets of unequal GPUs behind JSQ, SED or a weighted random split: identical members are the
cluster's JSQ exactly, unequal members agree with a naive re-simulating JSQ over the reference
simulator, JSQ is stable where an even split is not, and no router beats the certified sum."""

from __future__ import annotations

import numpy as np
import pytest

from stability.sim.cluster import run_cluster
from stability.sim.fleet import Member, run_fleet, simulate_fleet
from stability.sim.registry import get_scheduler
from stability.sim.routing import Cluster, Requests
from stability.sim.simulate import Scenario
from tests import reference_sim as ref
from tests.toys import toy_cost_model
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound
from theory.errors import FieldError, UnknownNameError
from theory.workload import get_workload

W = "uniform:64-320,8-40"
SARATHI = {"chunk_size": 16, "max_num_seqs": 5, "max_model_len": 10**9, "memory": False}


def _requests(n: int, gap: float, seed: int):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(gap, n))
    return arrival, rng.integers(1, 60, n), rng.integers(1, 20, n)


def test_identical_members_are_the_clusters_jsq_exactly():
    cm = toy_cost_model("toy4", "real")
    sch = get_scheduler("sarathi")
    p = sch.make_params(cm, **SARATHI)
    arrival, L_P, L_D = _requests(300, 2e-3, 5)
    cls = np.zeros(arrival.size, dtype=np.int64)
    node, runs = run_cluster(cm, sch, p, Requests(arrival, L_P, L_D, cls),
                             Cluster(3, "jsq", np.random.default_rng(0)))
    assert len(set(node.tolist())) == 3  # every node is used
    for members, router in (([Member(cm, sch, p, 3)], "jsq"),
                            ([Member(cm, sch, p, 1), Member(cm, sch, p, 2)], "jsq"),
                            ([Member(cm, sch, p, 2, 7.0), Member(cm, sch, p, 1, 7.0)], "sed")):
        out = run_fleet(members, Requests(arrival, L_P, L_D), router=router)
        assert np.array_equal(out.node, node)
        for a, b in zip(out.runs, runs, strict=True):
            assert np.array_equal(a.t_finish, b.t_finish) and np.array_equal(a.t_first, b.t_first)


def _naive_jsq(cms, arrival, L_P, L_D, weights=None):
    """JSQ over reference Sarathi nodes, re-simulating from scratch at every arrival: the pending
    requests of node g at time t are those routed to it whose reference finish time is after t
    (later arrivals cannot change what finished by t)."""
    routed: list[list[int]] = [[] for _ in cms]

    def finish(g, ids):
        sim = ref.sarathi(cms[g], arrival[ids], L_P[ids], L_D[ids], SARATHI["chunk_size"],
                          SARATHI["max_num_seqs"])
        return [r.finish for r in sim.reqs]

    node = []
    for k, t in enumerate(arrival):
        pending = [sum(f > t for f in finish(g, ids)) if ids else 0 for g, ids in enumerate(routed)]
        score = pending if weights is None else [(q + 1) / w for q, w in zip(pending, weights, strict=True)]
        g = score.index(min(score))
        routed[g].append(k)
        node.append(g)
    return np.array(node), [finish(g, ids) if ids else [] for g, ids in enumerate(routed)]


@pytest.mark.parametrize("router, weights", [("jsq", None), ("sed", [1.0, 3.0]), ("sed", [3.0, 1.0])])
def test_unequal_nodes_match_a_naive_jsq_over_the_reference_simulator(router, weights):
    cms = [toy_cost_model("toy4", "real"), toy_cost_model("toy8", "real")]
    sch = get_scheduler("sarathi")
    arrival, L_P, L_D = _requests(40, 1.5e-3, 9)
    members = [Member(cm, sch, sch.make_params(cm, **SARATHI), 1, 1.0 if weights is None else w)
               for cm, w in zip(cms, weights or [1.0, 1.0], strict=True)]
    out = run_fleet(members, Requests(arrival, L_P, L_D), router=router)
    node, finish = _naive_jsq(cms, arrival, L_P, L_D, weights)
    assert np.array_equal(out.node, node)
    assert 0 < node.sum() < node.size  # both nodes serve
    for run, f in zip(out.runs, finish, strict=True):
        assert np.allclose(run.t_finish, f, rtol=1e-9, atol=0)


def _certified(gpu: str) -> float:
    return capacity_bound(cost_model(CostSpec(gpu, "mistral-7b", "real")), get_workload(W), 1).bound


def _fleet(rate: float, seed: int, router: str, weights=None):
    base = {"mode": "real", "workload": W, "scheduler": "sarathi", "options": (("memory", False),),
            "rate": rate, "load": None, "n_requests": 4000, "seed": seed}
    return simulate_fleet([Scenario(gpu="a100", **base), Scenario(gpu="l4", **base)], router, weights)


def test_jsq_is_stable_where_an_even_random_split_is_not():
    """At 2.5 times the L4's certified bound an even split sends the L4 more than its certified
    bound (certainly unstable); JSQ and SED, which use the A100 more, are stable on every seed."""
    c_a100, c_l4 = _certified("a100"), _certified("l4")
    rate = 2.5 * c_l4
    assert rate < 0.5 * (c_a100 + c_l4)  # well inside the fleet's certified sum
    for seed in (0, 1):
        even = _fleet(rate, seed, "random", [1.0, 1.0])
        assert [r.verdict().verdict for r in even][1] == "unstable"
        for router in ("jsq", "sed"):
            res = _fleet(rate, seed, router, [c_a100, c_l4])
            assert [r.verdict().verdict for r in res] == ["stable", "stable"], (router, seed)
            assert res[1].lam < c_l4  # the L4 is given less than its certified bound


def test_no_router_carries_more_than_the_certified_sum():
    """Above the sum of the members' certified bounds every router leaves a member unstable."""
    c = [_certified("a100"), _certified("l4")]
    for router in ("jsq", "sed", "random"):
        res = _fleet(1.15 * sum(c), 0, router, c)
        assert "unstable" in [r.verdict().verdict for r in res], router


def test_members_are_checked():
    cm = toy_cost_model("toy4", "real")
    sch = get_scheduler("sarathi")
    p = sch.make_params(cm, **SARATHI)
    a, lp, ld = _requests(5, 1e-3, 0)
    with pytest.raises(UnknownNameError, match="router"):
        run_fleet([Member(cm, sch, p)], Requests(a, lp, ld), router="best")
    with pytest.raises(FieldError, match="member count"):
        run_fleet([Member(cm, sch, p, 0)], Requests(a, lp, ld))
    with pytest.raises(FieldError, match="member weight"):
        run_fleet([Member(cm, sch, p, 1, -1.0)], Requests(a, lp, ld), router="sed")
    ds = get_scheduler("distserve")
    with pytest.raises(FieldError, match="member scheduler"):
        run_fleet([Member(cm, ds, ds.make_params(cm))], Requests(a, lp, ld))
    base = {"rate": 1.0, "load": None, "n_requests": 10}
    with pytest.raises(FieldError, match="members: seed"):
        simulate_fleet([Scenario(**base), Scenario(gpu="l4", seed=1, **base)])
    with pytest.raises(FieldError, match="weights"):
        simulate_fleet([Scenario(**base)], "sed", [1.0, 2.0])
