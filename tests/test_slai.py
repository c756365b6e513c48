"""SLAI (Section 6) against the naive reference, and its rules checked from the batch log.

* equivalence: random small scenarios (two classes with random mixes and SLOs, every order,
  fixed and dynamic offset, caps, budgets, a KV memory of a few blocks so that preemption and
  rejection happen, or none); the reference (tests/reference_sim.py) transcribes the authors'
  ``SLAIScheduler`` with a heap, lists and its own block manager, and times batches with
  ``theory.cost.T_batch``. Finish, first-token and start times, TBT maxima and SLO violations
  must agree to 1e-9, rejections, preemptions, batch and token counts and KV peaks exactly;
* Eq. 8 from the batch log: a decode that waits behind prefills runs in the first batch that
  starts at or after C = e + TBT - delta * t_bar, with e and t_bar read from the log;
* the dynamic offset switches at the memory threshold; SPF admits by prompt length (classes
  first under priority); paying requests meet their SLO at low load on the Section 7 setup.
"""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stability.schedulers.slai import last_schedulable_time, offset
from stability.sim import engine
from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.memory import SARATHI, KvConfig, allocate, kv_setup
from stability.sim.registry import get_scheduler
from stability.sim.simulate import Scenario, simulate
from tests import reference_sim as ref
from tests.test_schedulers_vs_reference import BIG, assert_close, assert_same, blocks_of, drawn

SCENARIOS = 100


def run_slai(sc, memory, detail):
    """Engine and reference on one drawn scenario with two classes."""
    cm, arrival, L_P, L_D, kv, pick = sc
    paying = pick([0.0, 0.3, 0.7, 1.0])
    cls = (np.random.default_rng(len(arrival)).random(len(arrival)) >= paying).astype(np.int64)
    slo = (pick([1e-4, 2e-3, 8e-3]), pick([5e-3, 3e-2, 1.0]))
    opts = {"token_budget": pick([1, 3, 8, 16, 32, 512]), "max_num_seqs": pick([1, 2, 5, 128]),
            "limit_total_decodes": pick([1, 2, 5, 128]),
            "order": pick(["fcfs", "spf", "spf_priority"]), "dynamic": pick([False, True]),
            "delta": pick([0.0, 1.0, 10.0]), "delta_low": pick([0.0, 5.0]),
            "delta_high": pick([2.0, 10.0]), "memory_limit": pick([0.0, 0.3, 0.96]),
            "max_model_len": pick([60, BIG])}
    sch = get_scheduler("slai")
    p = sch.make_params(cm, memory=memory, tbt_slo=slo, **opts, **kv)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, cls, RunOptions(n_class=2, detail=detail, tbt_slo=slo))
    mem = blocks_of(kv, "sarathi") if memory else None
    sim = ref.slai(cm, arrival, L_P, L_D, cls, slo, opts["token_budget"], opts["max_num_seqs"],
                   opts["limit_total_decodes"], opts["order"], opts["dynamic"], opts["delta"],
                   opts["delta_low"], opts["delta_high"], opts["memory_limit"],
                   opts["max_model_len"], mem)
    return run, sim, mem


@pytest.mark.parametrize("detail", [False, True])
@pytest.mark.parametrize("memory", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_slai_equals_reference(memory, detail, data):
    run, sim, mem = run_slai(drawn(data), memory, detail)
    assert_same(run, sim, detail, mem)
    if detail:
        done = np.isfinite(run.t_finish)
        assert run.tbt_viol[done].tolist() == [r.viol for r in sim.reqs if r.finished]


def test_branches_are_exercised():
    """Over 100 scenarios drawn as above: preemption, rejection, deferred decodes (a request's
    decode missing from a batch while it waits) and both dynamic offsets all occur."""
    rng = np.random.default_rng(11)

    def pick(options):
        options = list(options)
        return options[rng.integers(len(options))]

    from tests.test_schedulers_vs_reference import choose_scenario

    seen = {"preempt": 0, "reject": 0, "deferred": 0, "both_deltas": 0}
    for _ in range(100):
        run, sim, _ = run_slai(choose_scenario(pick), True, False)
        seen["preempt"] += run.counters["n_preempt"] > 0
        seen["reject"] += run.counters["n_rej"] > 0
        seen["both_deltas"] += len(set(sim.deltas)) > 1
        seen["deferred"] += sim.deferred > 0
    assert all(v >= 10 for v in seen.values()), seen


# --- Eq. 8 and the offset, as rules --------------------------------------------------------------


def test_last_schedulable_time_is_eq8():
    assert last_schedulable_time(2.0, 0.5, 10.0, 0.03) == pytest.approx(2.0 + 0.5 - 0.3)
    assert last_schedulable_time(1.0, 0.1, 0.0, 5.0) == pytest.approx(1.1)


@pytest.mark.parametrize(("used", "expected"), [(95, 5.0), (96, 10.0), (100, 10.0), (0, 5.0)])
def test_dynamic_offset_switches_at_the_memory_threshold(used, expected):
    """delta = 5 below 96% of the KV blocks in use, 10 at or above (Section 7)."""
    st_ = engine.new_state(np.zeros(1), np.array([200]), np.array([1]))
    kv_setup(st_, KvConfig(True, 100, 1, 0), SARATHI)
    if used:
        allocate(st_, 0, used)
    assert offset(st_, True, 7.0, 5.0, 10.0, 0.96) == expected
    assert offset(st_, False, 7.0, 5.0, 10.0, 0.96) == 7.0  # fixed: the memory does not matter


def build_real_cm():
    from theory.cost import build_cost_model
    from theory.hardware import get_gpu
    from theory.models import get_model

    return build_cost_model(get_gpu("rtx6000ada"), get_model("mistral-7b"), "real")


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.floats(0.0, 30.0), st.sampled_from([0.02, 0.1, 0.5]), st.integers(0, 1000))
def test_decode_waits_until_its_last_schedulable_time(delta, slo, seed):
    """One request decodes while long prompts keep the budget full of prefill chunks. Between
    two consecutive batches m1 < m2 holding its tokens, with e = end of m1 and t_bar the mean
    duration of batches up to m1 (both from the batch log), C = e + TBT - delta * t_bar (Eq. 8):
    every batch in between starts before C (a critical decode is never left out), and when at
    least a budget of prefill tokens is still to come after m2 (so a non-critical decode finds no
    room), m2 starts at or after C (the decode was not taken before it was critical)."""
    cm = build_real_cm()
    rng = np.random.default_rng(seed)
    L_P = np.concatenate([[int(rng.integers(100, 500))], rng.integers(3000, 6000, size=6)])  # 1 chunk
    L_D = np.concatenate([[40], np.ones(6, dtype=np.int64)])
    arrival = np.concatenate([[0.0], np.full(6, 1e-9)])
    sch = get_scheduler("slai")
    p = sch.make_params(cm, token_budget=512, order="fcfs", dynamic=False, delta=delta,
                        tbt_slo=(slo,), memory=False)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=True, log=True))
    b, it = run.batches, run.items
    start, dur = b["start"], b["duration"]
    pre_after = np.cumsum((b["tokens"] - b["decodes"])[::-1])[::-1] - (b["tokens"] - b["decodes"])
    mine = np.unique(it["batch"][it["request"] == 0])
    deferred = 0
    for m1, m2 in itertools.pairwise(mine):
        C = last_schedulable_time(start[m1] + dur[m1], slo, delta, np.mean(dur[: m1 + 1]))
        assert np.all(start[m1 + 1: m2] < C + 1e-9), "a critical decode was left out"
        if pre_after[m2] >= 512:
            assert start[m2] >= C - 1e-9, "a decode ran before its last schedulable time"
            deferred += m2 > m1 + 1
    assert deferred > 0 or delta * np.mean(dur) >= slo  # deferral happens unless C <= e


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.floats(0.0, 1.0), st.sampled_from([0.2, 0.5]), st.integers(0, 1000))
def test_deferred_chunk_runs_equal_the_reference(delta, slo, seed):
    """Batches of a long prompt's budget-sized chunks while every decode is deferred (C is a few
    batches past e here) run as one event in fast mode (``slai._deferred_chunks``): fewer events
    than detail mode, which runs them one by one, and the finish, first-token and start times
    still equal the naive reference's (one batch at a time) to 1e-9, with the same batch and
    token counts, with and without the KV memory."""
    cm = build_real_cm()
    rng = np.random.default_rng(seed)
    L_P = np.concatenate([rng.integers(100, 500, size=3), rng.integers(3000, 6000, size=6)])
    L_D = np.concatenate([rng.integers(30, 60, size=3), np.ones(6, dtype=np.int64)])
    arrival = np.sort(np.concatenate([[0.0, 1e-3, 2e-3], rng.uniform(0.0, 0.3, size=6)]))
    sch = get_scheduler("slai")
    for memory in (False, True):
        kv = {"kv_blocks": 4000, "block_size": 16, "watermark": 0.01}
        p = sch.make_params(cm, token_budget=512, order="fcfs", dynamic=False, delta=delta,
                            tbt_slo=(slo,), memory=memory, **kv)
        run = run_gpu(cm, sch, p, arrival, L_P, L_D)
        slow = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=True))
        mem = blocks_of(kv, "sarathi") if memory else None
        sim = ref.slai(cm, arrival, L_P, L_D, np.zeros(len(arrival), dtype=np.int64), (slo,), 512,
                       128, 128, "fcfs", False, delta, 5.0, 10.0, 0.96, BIG, mem)
        assert_same(run, sim, False, mem)
        assert run.counters["n_event"] < slow.counters["n_event"]


# --- orders and caps -------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["spf", "spf_priority"])
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_spf_admits_the_shortest_arrived_prompt(order, data):
    """Without memory pressure, each admission (a first chunk, i = 1) takes, among the requests
    arrived by the batch's start and not admitted yet, the one with the smallest (class under
    priority, L^P, arrival index)."""
    cm, arrival, L_P, L_D, _, pick = drawn(data)
    cls = np.random.default_rng(len(arrival)).integers(0, 2, size=len(arrival))
    sch = get_scheduler("slai")
    p = sch.make_params(cm, token_budget=pick([3, 16, 64]), max_num_seqs=pick([2, 128]),
                        order=order, tbt_slo=(1e-3, 5e-3), memory=False)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, cls, RunOptions(n_class=2, detail=True, log=True))
    b, it = run.batches, run.items
    admitted = np.zeros(len(arrival), dtype=bool)
    key = [(cls[j] if order == "spf_priority" else 0, L_P[j], j) for j in range(len(arrival))]
    for k in range(b["start"].size):
        rows = np.flatnonzero((it["batch"] == k) & (it["c"] > 0) & (it["i"] == 1))
        for j in it["request"][rows]:
            pool = [q for q in range(len(arrival)) if arrival[q] <= b["start"][k] and not admitted[q]]
            assert key[j] == min(key[q] for q in pool)
            admitted[j] = True


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_alpha_caps_requests_holding_memory(data):
    """Without preemption (no memory model), a request holds KV from its first chunk to its
    finish: at every batch at most alpha requests are in that span."""
    cm, arrival, L_P, L_D, _, pick = drawn(data)
    alpha = pick([1, 2, 3, 5])
    sch = get_scheduler("slai")
    p = sch.make_params(cm, token_budget=pick([3, 16, 512]), max_num_seqs=alpha,
                        limit_total_decodes=pick([1, 2, 128]), order=pick(["fcfs", "spf"]),
                        tbt_slo=(pick([1e-4, 1e-2]),), memory=False)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=True, log=True))
    starts = run.batches["start"]
    holding = (run.t_start[None, :] <= starts[:, None]) & (run.t_finish[None, :] > starts[:, None])
    assert holding.sum(axis=1).max() <= alpha


# --- the Section 7 setup -----------------------------------------------------------------------------


def low_load(order, dynamic, **extra):
    from stability.sim.classes import paying_free

    sc = Scenario(**{"gpu": "rtx6000ada", "mode": "real", "scheduler": "slai", "rate": 0.2,
                     "n_requests": 300, "seed": 3, "detail": True, "classes": paying_free(0.3),
                     "total_cap": 8192, "options": (("dynamic", dynamic), ("order", order)), **extra})
    res = simulate(sc)
    paying = (res.requests["cls"] == 0) & np.isfinite(res.requests["t_finish"])
    assert paying.sum() > 50
    return res, paying


@pytest.mark.parametrize("order", ["fcfs", "spf"])
def test_paying_requests_meet_their_slo_at_low_load_fixed_offset(order):
    """Mistral-7B on an RTX 6000 Ada (real layers, KV memory), 0.2 req/s, 30% paying, delta = 10:
    every gap of every paying request is within 0.1 s (delta * t_bar >= 0.1 s, so a paying
    decode is critical as soon as it has emitted)."""
    res, paying = low_load(order, False)
    rq = res.requests
    assert np.all(rq["tbt_max"][paying] <= 0.1), np.max(rq["tbt_max"][paying])
    assert np.all(rq["tbt_viol"][paying] == 0)
    assert res.class_summary()[0]["slo"]["requests_max_within"] == 1.0


@pytest.mark.parametrize("order", ["spf", "spf_priority"])
def test_paying_requests_meet_their_slo_at_low_load_dynamic_offset(order, tmp_path):
    """Same setup with the dynamic offset (delta = 5 below 96% KV use): the paying class's P99 TBT
    is within 0.1 s, but single gaps are not: low-load batches are mostly single decodes of about
    10 ms in the tile model, so 5 t_bar is about 50 ms, a paying decode is deferred that long
    behind a prefill batch of about 60 ms, and its gap reaches about 0.12 s. With a per-batch
    overhead of 15 ms (the time to stream the weights once, a floor on any real batch) t_bar
    exceeds 20 ms, 5 t_bar exceeds the SLO, and every gap is within it again."""
    res, paying = low_load(order, True)
    summary = res.class_summary()[0]
    assert summary["slo"]["p99_met"] and summary["tbt"]["p99"] <= 0.1
    assert np.max(res.requests["tbt_max"][paying]) > 0.1
    gpus = tmp_path / "gpus.toml"
    gpus.write_text('[gpus.ada_floor]\nbase = "rtx6000ada"\noverhead_s = 0.015\n')
    res, paying = low_load(order, True, gpu="ada_floor", gpu_file=str(gpus))
    assert np.all(res.requests["tbt_max"][paying] <= 0.1)


def test_reference_agrees_on_the_section7_setup():
    """A short run of the Section 7 model (real layers) with a KV memory of 300 blocks, so that
    decodes preempt: engine and reference agree on every finish time and TBT maximum."""
    cm = build_real_cm()
    rng = np.random.default_rng(5)
    n = 40
    L_P = rng.integers(200, 2000, size=n)
    L_D = rng.integers(50, 400, size=n)
    arrival = np.cumsum(rng.exponential(0.05, size=n))
    cls = (rng.random(n) >= 0.3).astype(np.int64)
    slo = (0.1, 0.5)
    sch = get_scheduler("slai")
    kv = {"kv_blocks": 300, "block_size": 16, "watermark": 0.01}
    p = sch.make_params(cm, tbt_slo=slo, **kv)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, cls, RunOptions(n_class=2, detail=True, tbt_slo=slo))
    sim = ref.slai(cm, arrival, L_P, L_D, cls, slo, 512, 128, 128, mem=blocks_of(kv, "sarathi"))
    assert_close(run.t_finish, [r.finish for r in sim.reqs])
    assert_close(run.tbt_max, [r.tbt_max for r in sim.reqs])
    assert run.counters["n_preempt"] > 0


def test_reference_agrees_on_a_long_run_with_many_decodes():
    """Hundreds of requests on the Section 7 model at a load that keeps tens of decodes in the
    set, two classes with different SLOs and 2,000 KV blocks: every batch re-orders a large
    decode set by (C, arrival), merging the decodes that just emitted into those deferred. The
    engine (fast and detail mode) and the reference agree on every finish time; detail mode's
    TBT maxima too."""
    cm = build_real_cm()
    rng = np.random.default_rng(11)
    n = 300
    L_P = rng.integers(20, 600, size=n)
    L_D = rng.integers(20, 300, size=n)
    arrival = np.cumsum(rng.exponential(0.04, size=n))
    cls = (rng.random(n) >= 0.4).astype(np.int64)
    slo = (0.05, 0.3)
    sch = get_scheduler("slai")
    kv = {"kv_blocks": 2000, "block_size": 16, "watermark": 0.01}
    p = sch.make_params(cm, tbt_slo=slo, **kv)
    sim = ref.slai(cm, arrival, L_P, L_D, cls, slo, 512, 128, 128, mem=blocks_of(kv, "sarathi"))
    assert max(len(b[3]) for b in sim.batches) >= 30  # decodes per batch
    for detail in (False, True):
        run = run_gpu(cm, sch, p, arrival, L_P, L_D, cls, RunOptions(n_class=2, detail=detail, tbt_slo=slo))
        assert_close(run.t_finish, [r.finish for r in sim.reqs])
        if detail:
            assert_close(run.tbt_max, [r.tbt_max for r in sim.reqs])
