"""DistServe (disaggregated) clusters: the saturation flag reads the decode nodes, and capped decode
nodes under a backlog far beyond their cap give the naive reference's results.

Only decode nodes complete requests (:mod:`stability.sim.disaggregated`); a saturation test over
all r nodes would count the prefill nodes as idle and never flag a disaggregated run saturated.
The fewest pending requests is checked against a direct count (every completion against every
request of its node), and the flag two-sided: an overloaded run is saturated, a light one is not.
"""

from dataclasses import replace

import numpy as np
import pytest

from stability.attain import saturated_runs, window_throughput
from stability.points import SimPoint, saturated_throughput
from stability.sim.cluster import run_cluster
from stability.sim.disaggregated import completing_nodes
from stability.sim.gpu import RunOptions
from stability.sim.registry import get_scheduler
from stability.sim.routing import Cluster, Requests
from stability.sim.simulate import Scenario, simulate
from tests import reference_sim as ref
from tests.toys import toy_cost_model

R, PREFILL = 3, 1  # one prefill node, decode nodes 1 and 2
OPTIONS = (("decode_cap", 4), ("prefill_nodes", PREFILL))


def scenario(load: float) -> Scenario:
    return Scenario(pad=True, scheduler="distserve", r=R, load=load, n_requests=3000, seed=2, options=OPTIONS)


def fewest_pending(arrival, finish, node, nodes, warmup=0.2) -> int:
    """The fewest requests pending (arrival <= t < finish) at any of ``nodes`` right after one of
    its completions t in the window, counted request by request."""
    t0, t1 = arrival[int(warmup * (arrival.size - 1))], arrival[-1]
    fewest = None
    for g in nodes:
        a, f = arrival[node == g], finish[node == g]
        times = f[(f > t0) & (f <= t1)]
        if times.size == 0:
            return 0
        pending = (a[None, :] <= times[:, None]) & ~(f[None, :] <= times[:, None])
        count = int(pending.sum(axis=1).min())
        fewest = count if fewest is None else min(fewest, count)
    return fewest


def test_completing_nodes_are_the_decode_nodes():
    res = simulate(scenario(0.5))
    assert completing_nodes(res.runs) == list(range(PREFILL, R))
    assert set(np.unique(res.requests["node"])) == set(range(PREFILL, R))
    mixed = simulate(Scenario(pad=True, r=2, load=0.5, n_requests=200, options=(("n", 50),)))
    assert completing_nodes(mixed.runs) == [0, 1]


@pytest.mark.parametrize(("load", "saturated"), [(1.5, True), (0.3, False)])
def test_the_saturation_flag_of_a_disaggregated_run(load, saturated):
    """What ``llmq region`` reads (a sim point's ``min_pending``) and what the capacity table reads
    (:func:`saturated_runs`): saturated under overload, not at a light load."""
    sc = scenario(load)
    res = simulate(sc)
    rq = res.requests
    arrival, finish, node = rq["arrival"], rq["t_finish"], rq["node"]
    expected = fewest_pending(arrival, finish, node, range(PREFILL, R))
    assert (expected > 0) == saturated
    nodes = completing_nodes(res.runs)
    assert saturated_throughput(arrival, finish, node, nodes)["min_pending"] == expected
    assert window_throughput(arrival, finish, node, nodes)["min_pending"] == expected
    point = SimPoint(replace(sc, rate=res.lam, load=None)).run()
    assert (point["min_pending"] > 0) == saturated
    assert saturated_runs(sc, 1)["saturated"] == saturated


@pytest.mark.parametrize("cap", [1, 8, 64])
def test_a_capped_decode_node_far_behind(cap):
    """A burst of 400 requests at time 0 on one prefill and one decode node: the decode node's
    backlog runs to hundreds of requests beyond its cap, and the finish times, first tokens and
    batch count are the reference's."""
    cm = toy_cost_model("toy4", "paper")
    rng = np.random.default_rng(5)
    m = 400
    arrival = np.zeros(m)
    L_P, L_D = rng.integers(1, 17, size=m), rng.integers(1, 30, size=m)
    sch = get_scheduler("distserve")
    p = sch.make_params(cm, prefill_nodes=1, prefill_mode="batched", decode_cap=cap)
    _, runs = run_cluster(
        cm,
        sch,
        p,
        Requests(arrival, L_P, L_D, np.zeros(m, dtype=np.int64)),
        Cluster(2, "round_robin", np.random.default_rng(0)),
        RunOptions(),
    )
    reqs, _, dec = ref.distserve(cm, arrival, L_P, L_D, 1, 1, "round_robin", "batched", p.chunk, cap=cap)
    run = runs[1]
    np.testing.assert_allclose(run.t_finish, [r.finish for r in reqs], rtol=1e-9, atol=0)
    np.testing.assert_allclose(run.t_first, [r.first for r in reqs], rtol=1e-9, atol=0)
    assert run.counters["n_batch"] == dec[0].batches
