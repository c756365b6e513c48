"""Baseline schedulers against the naive reference: identical per-request results.

Random small scenarios (hypothesis) on toy GPUs: lengths, arrival rates, bursts, budgets, caps,
admission order, and a KV memory of a few blocks so that preemption and rejection happen. The
reference (tests/reference_sim.py) transcribes the real schedulers (Sarathi-Serve, vLLM v0) and
Algorithms 4-5 batch by batch, with its own block manager, and times batches with
theory.cost.T_batch; the engine must give the same finish and first-token times (to 1e-9), the same
rejections and preemptions, the same batch and token counts and the same peak KV use.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.registry import get_scheduler
from tests import reference_sim as ref
from tests.toys import flat_cost_model, toy_cost_model

SCENARIOS = 100
BIG = 10**6


def choose_scenario(pick):
    """A random small scenario; ``pick(options)`` returns one of ``options``."""
    cm = toy_cost_model(pick(["toy2", "toy4", "toy8"]), pick(["paper", "real"]))
    m = pick(range(1, 31))
    rng = np.random.default_rng(pick(range(2**16)))
    L_P = rng.integers(1, pick([4, 16, 40, 90]) + 1, size=m)
    L_D = rng.integers(1, pick([1, 5, 25]) + 1, size=m)
    gap = pick([1e-4, 1e-3, 5e-3, 2e-2])
    arrival = np.cumsum(rng.exponential(gap, size=m))
    if pick([False, True]):
        arrival[: m // 2] = 0.0  # a burst at time 0
    block = pick([1, 2, 4, 16])
    kv = {"block_size": block, "kv_blocks": max(1, pick([8, 24, 64, 160, 1000]) // block),
          "watermark": pick([0.0, 0.01, 0.1])}
    return cm, arrival, L_P, L_D, kv, pick


def pressure(run):
    return run.counters["n_preempt"] > 0, run.counters["n_rej"] > 0


def picker(data):
    """``pick(options)`` drawn by hypothesis (and shrunk); a ``range`` is passed as it is, which
    hypothesis samples without listing its elements."""
    return lambda options: data.draw(st.sampled_from(options if isinstance(options, range)
                                                     else list(options)))


def drawn(data):
    """A scenario whose choices hypothesis draws (and shrinks)."""
    return choose_scenario(picker(data))


def assert_close(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.array_equal(np.isnan(a), np.isnan(b)), (a, b)
    ok = ~np.isnan(a)
    assert np.allclose(a[ok], b[ok], rtol=1e-9, atol=0), np.max(np.abs(a[ok] - b[ok]) / np.abs(b[ok]))


def assert_same(run, sim, detail, mem=None):
    reqs = sim.reqs
    assert_close(run.t_finish, [r.finish for r in reqs])
    assert_close(run.t_first, [r.first for r in reqs])
    assert_close(run.t_start, [r.start for r in reqs])
    assert run.reject.tolist() == [r.rejected for r in reqs]
    assert run.preemptions.tolist() == [r.preemptions for r in reqs]
    assert run.counters["n_batch"] == len(sim.batches)
    assert run.counters["n_dec_tok"] == sim.decode_tokens
    assert run.counters["n_pre_tok"] == sim.prefill_tokens
    assert run.counters["n_lost"] == sim.lost_tokens
    if detail:
        done = np.isfinite(run.t_finish)
        assert_close(run.tbt_max[done], [r.tbt_max for r in reqs if r.finished])
    if mem is not None:
        assert run.kv["peak"] == mem.peak
        assert run.kv["free_end"] == run.kv["blocks"] == mem.total == mem.free


def blocks_of(kv, rule):
    return ref.Blocks(kv["kv_blocks"], kv["block_size"], int(kv["watermark"] * kv["kv_blocks"]), rule)


def run_sarathi(sc, memory, detail):
    cm, arrival, L_P, L_D, kv, pick = sc
    opts = {"chunk_size": pick([1, 3, 8, 16, 32, 512]), "max_num_seqs": pick([1, 2, 5, 128]),
            "order": pick(["fcfs", "spf"]), "max_model_len": pick([60, BIG])}
    sch = get_scheduler("sarathi")
    run = run_gpu(cm, sch, sch.make_params(cm, memory=memory, **opts, **kv), arrival, L_P, L_D,
                  options=RunOptions(detail=detail))
    mem = blocks_of(kv, "sarathi") if memory else None
    sim = ref.sarathi(cm, arrival, L_P, L_D, opts["chunk_size"], opts["max_num_seqs"], opts["order"],
                      opts["max_model_len"], mem)
    return run, sim, mem


def run_vllm(sc, memory, detail):
    cm, arrival, L_P, L_D, kv, pick = sc
    opts = {"max_num_batched_tokens": pick([8, 50, 128, 8192]), "max_num_seqs": pick([1, 2, 5, 256]),
            "max_model_len": pick([60, BIG])}
    sch = get_scheduler("vllm")
    run = run_gpu(cm, sch, sch.make_params(cm, memory=memory, **opts, **kv), arrival, L_P, L_D,
                  options=RunOptions(detail=detail))
    mem = blocks_of(kv, "vllm") if memory else None
    sim = ref.vllm(cm, arrival, L_P, L_D, opts["max_num_batched_tokens"], opts["max_num_seqs"],
                   opts["max_model_len"], mem)
    return run, sim, mem


@pytest.mark.parametrize("detail", [False, True])
@pytest.mark.parametrize("memory", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sarathi(memory, detail, data):
    run, sim, mem = run_sarathi(drawn(data), memory, detail)
    assert_same(run, sim, detail, mem)


@pytest.mark.parametrize("detail", [False, True])
@pytest.mark.parametrize("memory", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_vllm(memory, detail, data):
    run, sim, mem = run_vllm(drawn(data), memory, detail)
    assert_same(run, sim, detail, mem)


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sarathi_paper(detail, data):
    cm, arrival, L_P, L_D, _, pick = drawn(data)
    budget = pick([1, 3, 8, 16, 32, 512])
    sch = get_scheduler("sarathi_paper")
    run = run_gpu(cm, sch, sch.make_params(cm, chunk_size=budget), arrival, L_P, L_D,
                  options=RunOptions(detail=detail))
    assert_same(run, ref.sarathi_paper(cm, arrival, L_P, L_D, budget), detail)


def test_memory_pressure_is_exercised():
    """The scenarios above really preempt and reject: count over 100 drawn the same way."""
    rng = np.random.default_rng(7)

    def pick(options):
        options = list(options)
        return options[rng.integers(len(options))]

    seen = np.zeros((2, 2))
    for _ in range(100):
        sc = choose_scenario(pick)
        for k, fn in enumerate((run_sarathi, run_vllm)):
            seen[k] += pressure(fn(sc, True, False)[0])
    assert (seen[:, 0] >= 25).all(), seen  # preemption in at least a quarter of the scenarios
    assert (seen[:, 1] >= 10).all(), seen  # rejection in at least a tenth


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_distserve(detail, data):
    """Prefill nodes then decode nodes, routed round robin or to the shortest queue, against the
    reference's nodes advanced batch by batch (with its own JSQ)."""
    from stability.sim.cluster import run_cluster
    from stability.sim.routing import Cluster, Requests

    cm, arrival, L_P, L_D, _, pick = drawn(data)
    r_p, r_d = pick([1, 2]), pick([1, 2])
    planner = pick(["round_robin", "jsq"])
    opts = {"prefill_nodes": r_p, "prefill_mode": pick(["whole", "chunked", "batched"]),
            "chunk": pick([4, 16, 64]), "prefill_max_tokens": pick([30, 4096]),
            "prefill_max_batch": pick([2, 256]), "decode_cap": pick([0, 1, 3]),
            "link_bandwidth": pick([0.0, 1e9])}
    sch = get_scheduler("distserve")
    p = sch.make_params(cm, **opts)
    cls = np.zeros(len(arrival), dtype=np.int64)
    node, runs = run_cluster(cm, sch, p, Requests(arrival, L_P, L_D, cls),
                             Cluster(r_p + r_d, planner, np.random.default_rng(0)), RunOptions(detail=detail))
    reqs, pre, dec = ref.distserve(cm, arrival, L_P, L_D, r_p, r_d, planner, opts["prefill_mode"],
                                   opts["chunk"], opts["prefill_max_tokens"], opts["prefill_max_batch"],
                                   opts["decode_cap"], lambda L: float(p.transfer_time(L)))
    assert node.tolist() == [r_p + r.node for r in reqs]
    for g, run in enumerate(runs[:r_p]):
        assert run.rows.tolist() == sorted(j for j, r in enumerate(reqs) if r.prefill_node == g)
        assert run.counters["n_batch"] == pre[g].batches
    for g, run in enumerate(runs[r_p:]):
        mine = [r for r in reqs if r.node == g]
        assert_close(run.t_finish, [r.finish for r in mine])
        assert_close(run.t_first, [r.first for r in mine])
        assert_close(run.t_start, [r.start for r in mine])
        assert run.counters["n_batch"] == dec[g].batches
        if detail:
            assert_close(run.tbt_max, [r.tbt_max for r in mine])


def burst(m, seed):
    """m requests, half of them at time 0, with prompts of 1-16 and 20-40 decodes."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1e-3, size=m))
    arrival[: m // 2] = 0.0
    return arrival, rng.integers(1, 17, size=m), rng.integers(20, 41, size=m)


@pytest.mark.parametrize("detail", [False, True])
def test_long_decode_sets(detail):
    """Decode sets of ``LONG_SET`` entries and more, which the engine advances through local
    references to its arrays, give the reference's results: vLLM with KV memory under pressure
    (blocks grown, freed and preempted on that path) and a DistServe decode node."""
    from stability.sim.cluster import run_cluster
    from stability.sim.engine import LONG_SET
    from stability.sim.routing import Cluster, Requests

    cm = toy_cost_model("toy4", "paper")
    arrival, L_P, L_D = burst(700, 1)
    kv = {"block_size": 4, "kv_blocks": 4000, "watermark": 0.01}
    sch = get_scheduler("vllm")
    run = run_gpu(cm, sch, sch.make_params(cm, max_num_batched_tokens=8192, max_num_seqs=1024, **kv),
                  arrival, L_P, L_D, options=RunOptions(detail=detail))
    mem = blocks_of(kv, "vllm")
    sim = ref.vllm(cm, arrival, L_P, L_D, 8192, 1024, mem=mem)
    assert max(len(b[3]) for b in sim.batches) >= LONG_SET
    assert run.counters["n_preempt"] > 0
    assert_same(run, sim, detail, mem)

    sch = get_scheduler("distserve")
    p = sch.make_params(cm, prefill_nodes=1, prefill_mode="batched")
    cls = np.zeros(arrival.size, dtype=np.int64)
    _, runs = run_cluster(cm, sch, p, Requests(arrival, L_P, L_D, cls),
                          Cluster(2, "round_robin", np.random.default_rng(0)), RunOptions(detail=detail))
    reqs, _, dec = ref.distserve(cm, arrival, L_P, L_D, 1, 1, "round_robin", "batched", p.chunk)
    run = runs[1]
    assert run.counters["n_dec_tok"] >= LONG_SET * run.counters["n_batch"]  # some batch that long
    assert_close(run.t_finish, [r.finish for r in reqs])
    assert_close(run.t_first, [r.first for r in reqs])
    assert run.counters["n_batch"] == dec[0].batches
    if detail:
        assert_close(run.tbt_max, [r.tbt_max for r in reqs])



def test_distserve_long_set_with_hand_offs():
    """A DistServe decode node whose set is ``LONG_SET`` entries or more while hand-offs still
    arrive (the node's batches then run without rewriting the set, two batches' sums per pass,
    hand-offs joining between them) and then drains, gives the reference's results."""
    from stability.sim.cluster import run_cluster
    from stability.sim.engine import LONG_SET
    from stability.sim.routing import Cluster, Requests

    cm = toy_cost_model("toy4", "paper")
    rng = np.random.default_rng(1)
    m = 1200
    arrival = np.cumsum(rng.exponential(1e-3, size=m))
    arrival[: m // 3] = 0.0
    L_P, L_D = rng.integers(1, 17, size=m), rng.integers(20, 200, size=m)
    sch = get_scheduler("distserve")
    p = sch.make_params(cm, prefill_nodes=1, prefill_mode="whole")
    cls = np.zeros(m, dtype=np.int64)
    _, runs = run_cluster(cm, sch, p, Requests(arrival, L_P, L_D, cls),
                          Cluster(2, "round_robin", np.random.default_rng(0)), RunOptions())
    reqs, _, dec = ref.distserve(cm, arrival, L_P, L_D, 1, 1, "round_robin", "whole", p.chunk)
    last = max(r.first for r in reqs)  # the last hand-off (instantaneous transfers)
    assert sum(r.first < last < r.finish for r in reqs) >= LONG_SET  # a long set, hand-offs ahead
    run = runs[1]
    assert_close(run.t_finish, [r.finish for r in reqs])
    assert_close(run.t_first, [r.first for r in reqs])
    assert run.counters["n_batch"] == dec[0].batches

def wait_scenario(pick):
    """A small WAIT scenario: 1-3 types with thresholds, requests drawn among them and, now and
    then, of no type; a cache of exactly M^pi blocks or more."""
    from stability.schedulers.wait import threshold_memory

    cm = toy_cost_model(pick(["toy2", "toy4", "toy8"]), pick(["paper", "real"]))
    rng = np.random.default_rng(pick(range(2**16)))
    k = pick([1, 2, 3])
    keys = sorted({(int(rng.integers(1, 30)), int(rng.integers(1, 8))) for _ in range(k)})
    thresholds = tuple((lp, ld, int(rng.integers(1, 5))) for lp, ld in keys)
    m = pick(range(1, 41))
    which = rng.integers(0, len(keys), size=m)
    L_P = np.array([keys[t][0] for t in which])
    L_D = np.array([keys[t][1] for t in which])
    if pick([False, True]):
        L_D[rng.random(m) < 0.1] += 100  # of no type: rejected
    arrival = np.cumsum(rng.exponential(pick([1e-4, 1e-3, 2e-2]), size=m))
    if pick([False, True]):
        arrival[: m // 2] = 0.0
    block = pick([1, 2, 4])
    kv = {"block_size": block, "kv_blocks": threshold_memory(thresholds, block) + pick([0, 3, 1000])}
    return cm, arrival, L_P, L_D, thresholds, kv


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_wait(detail, data):
    """WAIT (Ao, Luo, Simchi-Levi, Wang) against the reference's stage inventories: same times,
    rejections, batch and token counts and peak KV use, never over M^pi."""
    cm, arrival, L_P, L_D, thresholds, kv = wait_scenario(picker(data))
    sch = get_scheduler("wait")
    run = run_gpu(cm, sch, sch.make_params(cm, thresholds=thresholds, **kv), arrival, L_P, L_D,
                  options=RunOptions(detail=detail))
    mem = ref.Blocks(kv["kv_blocks"], kv["block_size"], 0, "vllm")
    assert_same(run, ref.wait(cm, arrival, L_P, L_D, thresholds, mem), detail, mem)
    run = run_gpu(cm, sch, sch.make_params(cm), arrival, L_P, L_D, options=RunOptions(detail=detail))
    assert_same(run, ref.wait(cm, arrival, L_P, L_D, None), detail)  # no types: threshold 1 each


def test_wait_by_hand():
    """One type (l = 2, l' = 2, n = 2), batches of d_0 = c + a under a staircase law, arrivals at
    0, 0, 0, 1, 1: the third prompt waits for a fourth; the fifth is drained alone at the end."""
    cm = flat_cost_model()
    sch = get_scheduler("wait")
    arrival = np.array([0.0, 0.0, 0.0, 1.0, 1.0])
    run = run_gpu(cm, sch, sch.make_params(cm, thresholds=((2, 2, 2),), kv_blocks=2 * (2 + 3 + 4)),
                  arrival, np.full(5, 2), np.full(5, 2), options=RunOptions(detail=False))
    # batch 1 [0, 0.5): prefill 0, 1; request 2 waits (one of a threshold of two) and nothing is
    # eligible until t = 1, when the last requests arrive: batch 2 [1, 1.5): prefill 2, 3, decode
    # 0, 1; the run drains: batch 3 [1.5, 2): prefill 4 alone, decode 0, 1 (done), 2, 3; batch 4
    # [2, 2.5): decode 2, 3 (done), 4; batch 5 [2.5, 3): decode 4 (done)
    assert_close(run.t_finish, [2.0, 2.0, 2.5, 2.5, 3.0])
    assert_close(run.t_first, [0.5, 0.5, 1.5, 1.5, 2.0])
    assert run.counters["n_batch"] == 5
    assert run.kv["peak"] == 2 + 2 * 3 + 2 * 4  # batch 3: one prompt at stage 0, two at stages 1, 2


def test_wait_bad_options():
    from stability.schedulers.wait import make_params
    from theory.errors import FieldError

    cm = toy_cost_model("toy4", "paper")
    assert make_params(cm, thresholds="4:3:2,8:5:1", kv_blocks=10**6).thresholds == ((4, 3, 2), (8, 5, 1))
    for bad in [(), ((4, 3),), ((4, 3, 0),), ((4, 3, 2), (4, 3, 1)), ((4, 3, True),), 5, "4:3", "4:x:1"]:
        with pytest.raises(FieldError, match="thresholds"):
            make_params(cm, thresholds=bad, kv_blocks=10**6)
    with pytest.raises(FieldError, match="need 28 blocks"):  # n (l' + 1)(l + l'/2) = 2 * 14
        make_params(cm, thresholds=((2, 3, 2),), kv_blocks=27)
    with pytest.raises(FieldError, match="block_size"):
        make_params(cm, thresholds=((2, 3, 2),), block_size=0)
    with pytest.raises(FieldError, match="memory"):  # no M^pi without types
        make_params(cm, memory=True)
