"""Invariants of every scheduler, from its batch log and counters (hypothesis scenarios).

* every request either finishes exactly once, after emitting L^D + 1 tokens (its first from a
  prefill, every later one from a DI or a recompute prefill at the right position), or is
  rejected with a known reason;
* tokens: without preemption, decode iterations = sum L^D and prefill tokens = sum L^P; with it,
  prefill + decode tokens = sum over finished requests of L^P + L^D plus the tokens whose KV a
  preemption discarded, and decodes + recompute prefills = sum L^D;
* KV memory never exceeds its capacity and every block is free at the end;
* caps: batch token budgets, running-sequence caps, decode caps, long-prefill thresholds are
  never exceeded;
* tiling: a batch is flagged optimally tiled exactly when every GeMM of it is a whole number of
  tiles of a fastest tile (t*, or a tile as fast: real profiles have ties); on a GPU where t*'s
  only tie does not divide smaller chunks (L4), a batch with a first chunk PI(R, 1, c), c not a
  multiple of t*_lcm (Sarathi-Serve's budget-filling chunks), is flagged not optimally tiled.
"""

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stability.sim.cluster import run_cluster
from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.memory import REJECT_REASONS
from stability.sim.registry import get_scheduler
from stability.sim.routing import Cluster, Requests
from tests.test_schedulers_vs_reference import drawn, picker
from theory.cost import build_cost_model
from theory.hardware import get_gpu
from theory.models import get_model

SCENARIOS = 60


def vllm_v1_options(pick, kv):
    """vLLM v1: the budget covers max_num_seqs and, with memory, max_model_len fits the KV cache
    (vLLM refuses both otherwise); no watermark."""
    memory = pick([False, True])
    budget = pick([3, 8, 16, 512])
    cap = kv["kv_blocks"] * kv["block_size"]
    return {"max_num_batched_tokens": budget, "max_num_seqs": min(budget, pick([1, 3, 128])),
            "long_prefill_token_threshold": pick([0, 4]),
            "max_model_len": pick([min(60, cap), cap]) if memory else pick([60, 10**6]),
            "memory": memory, "block_size": kv["block_size"], "kv_blocks": kv["kv_blocks"]}


def options(name, pick, kv):
    """Random options for scheduler ``name`` (memory on or off for those that model it)."""
    memory = {"memory": pick([False, True]), **kv}
    return {
        "rad": lambda: {"n": pick([1, 3, 12])},
        "alg2": lambda: {"n": pick([1, 3, 12])},
        "request_level": lambda: {"b": pick([1, 3, 12])},
        "sarathi_paper": lambda: {"chunk_size": pick([3, 8, 16, 512])},
        "sarathi": lambda: {"chunk_size": pick([3, 8, 16, 512]), "max_num_seqs": pick([1, 3, 128]),
                            "order": pick(["fcfs", "spf"]), "max_model_len": pick([60, 10**6]),
                            **memory},
        "slai": lambda: {"token_budget": pick([3, 8, 16, 512]), "max_num_seqs": pick([1, 3, 128]),
                         "limit_total_decodes": pick([1, 2, 128]),
                         "order": pick(["fcfs", "spf", "spf_priority"]), "dynamic": pick([False, True]),
                         "tbt_slo": pick([1e-3, 1e-2, 1.0]), "delta": pick([0.0, 3.0]),
                         "max_model_len": pick([60, 10**6]), **memory},
        "vllm": lambda: {"max_num_batched_tokens": pick([40, 8192]), "max_num_seqs": pick([1, 3, 256]),
                         "max_model_len": pick([60, 10**6]), **memory},
        "vllm_v1": lambda: vllm_v1_options(pick, kv),
        "wait": lambda: {},  # one type per (L^P, L^D), threshold 1, memory off (typed: vs_reference)
        "nested_wait": lambda: pick([{}, {"boundaries": (2, 6), "thresholds": (2, 1), "memory": False},
                                     {"boundaries": (1, 3, 4), "thresholds": (3, 2, 2), "memory": False}]),
        "distserve": lambda: {"prefill_nodes": 1, "prefill_mode": pick(["whole", "chunked", "batched"]),
                              "prefill_max_tokens": pick([30, 4096]), "prefill_max_batch": pick([2, 256]),
                              "decode_cap": pick([0, 2])},
    }[name]()


def simulate_one(name, data):
    """Run scheduler ``name`` on a drawn scenario with the batch log on.

    Returns (L_P, L_D, options, node runs, global request index of each run's requests, the run
    holding every request's record)."""
    cm, arrival, L_P, L_D, kv, pick = drawn(data)
    sch = get_scheduler(name)
    opts = options(name, pick, kv)
    p = sch.make_params(cm, **opts)
    if name == "distserve":
        cls = np.zeros(len(arrival), dtype=np.int64)
        node, runs = run_cluster(cm, sch, p, Requests(arrival, L_P, L_D, cls),
                                 Cluster(2, "round_robin", np.random.default_rng(0)),
                                 RunOptions(detail=True, log=True))
        rows = [np.flatnonzero(node == g) if run.rows is None else run.rows for g, run in enumerate(runs)]
        return L_P, L_D, opts, runs, rows, runs[1]
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=True, log=True))
    return L_P, L_D, opts, [run], [np.arange(len(arrival))], run


def emissions(runs, rows, L_P, cached: bool = False):
    """Walk every request's iterations in time order: check each DI's position and each
    prefill's chunks, count emitted tokens and note the time of the last emission."""
    per_req = defaultdict(list)
    for run, ids in zip(runs, rows, strict=True):
        b, it = run.batches, run.items
        end = b["start"] + b["duration"]
        for k, j, i, c in zip(it["batch"], it["request"], it["i"], it["c"], strict=True):
            per_req[int(ids[j])].append((b["start"][k], end[k], int(i), int(c)))
    emitted = np.zeros(len(L_P), dtype=np.int64)
    last = np.full(len(L_P), np.nan)
    for j, its in per_req.items():
        nxt = None  # next prompt token of the current prefill, None between prefills
        for _, t_end, i, c in sorted(its):
            target = L_P[j] + emitted[j]  # a (re)prefill covers the prompt and every token so far
            if c == 0:  # DI(R, i) processes the latest token, at position L^P + emitted
                assert i == target, (j, i, target)
                nxt = None
            else:
                # chunks in order, or a restart: from the first token, or (vLLM v1's prefix cache)
                # from the first token its cached blocks do not hold
                assert i == 1 or i == nxt or (cached and 1 < i <= target), (j, i, nxt)
                assert i + c - 1 <= target
                nxt = i + c
                if i + c - 1 < target:
                    continue
            emitted[j] += 1
            last[j] = t_end
    return emitted, last


NAMES = ["rad", "alg2", "request_level", "sarathi_paper", "sarathi", "vllm", "vllm_v1", "distserve",
         "slai", "wait", "nested_wait"]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_finish_once_or_rejected(name, data):
    L_P, L_D, _, runs, rows, main = simulate_one(name, data)
    finished = np.isfinite(main.t_finish)
    reason = main.reject if main.reject is not None else np.zeros(len(L_P), dtype=np.int64)
    assert np.all(finished != (reason > 0)), "each request finishes or is rejected, not both"
    assert set(reason[reason > 0].tolist()) <= set(REJECT_REASONS)
    emitted, last = emissions(runs, rows, L_P, cached=name == "vllm_v1")
    assert np.all(emitted[finished] == L_D[finished] + 1)
    assert np.all(emitted[~finished] <= L_D[~finished])
    assert np.allclose(main.t_finish[finished], last[finished], rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tokens_and_memory(name, data):
    L_P, L_D, _, runs, _, main = simulate_one(name, data)
    c = {k: sum(run.counters.get(k, 0) for run in runs) for k in runs[0].counters}
    fin = np.isfinite(main.t_finish)
    if c["n_preempt"] == 0:
        assert c["n_dec_tok"] == L_D[fin].sum()
        assert c["n_pre_tok"] == L_P[fin].sum()
    done, computed = (L_P + L_D)[fin].sum(), c["n_pre_tok"] + c["n_dec_tok"]
    if name == "vllm_v1":  # prefix caching (on by default): a preempted request recomputes only the
        # tokens its cached blocks do not hold, so between none and all of the lost tokens
        assert done <= computed <= done + c["n_lost"]
    else:
        assert computed == done + c["n_lost"]
    if c["n_rej"] == 0:
        assert c["n_dec_tok"] + c["n_recomp"] == L_D.sum()
    for run in runs:
        if run.kv["on"]:
            assert run.kv["peak"] <= run.kv["blocks"]
            assert run.kv["free_end"] == run.kv["blocks"]


@pytest.mark.parametrize("name", ["sarathi_paper", "sarathi", "vllm", "vllm_v1", "distserve", "slai"])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_caps(name, data):
    _, _, opts, runs, _, _ = simulate_one(name, data)
    for k, run in enumerate(runs):
        b, it = run.batches, run.items
        pre = np.bincount(it["batch"], weights=it["c"], minlength=b["start"].size)
        width = np.bincount(it["batch"], minlength=b["start"].size)
        assert np.all(pre + b["decodes"] == b["tokens"])
        if name in ("sarathi_paper", "sarathi"):  # decodes are never capped, chunks fill the rest
            assert np.all(b["tokens"] <= np.maximum(opts["chunk_size"], b["decodes"]))
        if name == "sarathi":
            assert np.all(width <= opts["max_num_seqs"])
        if name == "slai":  # decodes count against the budget and are capped at beta
            assert np.all(b["tokens"] <= opts["token_budget"])
            assert np.all(b["decodes"] <= opts["limit_total_decodes"])
            assert np.all(width <= opts["max_num_seqs"])
        if name == "vllm":
            assert np.all((b["decodes"] == 0) | (b["prefills"] == 0)), "batches never mix"
            assert np.all(pre <= opts["max_num_batched_tokens"])
            assert np.all(width <= opts["max_num_seqs"])
        if name == "vllm_v1":  # one budget for decodes and chunks; chunks capped by the threshold
            assert np.all(b["tokens"] <= opts["max_num_batched_tokens"])
            assert np.all(width <= opts["max_num_seqs"])
            if opts["long_prefill_token_threshold"]:
                assert np.all(it["c"] <= opts["long_prefill_token_threshold"])
        if name == "distserve" and k == 0:  # the prefill node
            assert np.all(b["decodes"] == 0)
            if opts["prefill_mode"] == "batched":
                assert np.all((pre <= opts["prefill_max_tokens"]) | (b["prefills"] == 1))
                assert np.all(b["prefills"] <= opts["prefill_max_batch"])
            else:
                assert np.all(b["prefills"] == 1)
        if name == "distserve" and k == 1:  # the decode node
            assert np.all(b["prefills"] == 0)
            if opts["decode_cap"]:
                assert np.all(b["decodes"] <= opts["decode_cap"])


def unpadded(cm, rate):
    """Per GeMM shape (rows, cols, red): whether a tile of maximal ``rate`` covers it exactly."""
    top = np.flatnonzero(rate >= rate.max() * (1 - 1e-12))

    def fits(rows, cols, red):
        return np.any([(rows % cm.t_row[k] == 0) & (cols % cm.t_col[k] == 0) & (red % cm.t_red[k] == 0)
                       for k in top], axis=0)
    return fits


@pytest.mark.parametrize("gpu", ["a100", "l4"])
@pytest.mark.parametrize("name", ["rad", "sarathi_paper", "sarathi", "vllm"])
@settings(max_examples=SCENARIOS // 2, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tiling_flag(gpu, name, data):
    """On real GPU profiles (t* of maximal rate, Assumption 1; others may tie with it) a batch is
    flagged optimal iff its linear GeMMs (tau columns) and each chunk's two attention GeMMs
    (QK^T: e x c x d, PV: d x c x e, e = i + c - 1) are whole tiles of some fastest tile."""
    cm = build_cost_model(get_gpu(gpu), get_model("mistral-7b"))
    pick = picker(data)
    m = pick([1, 5, 20])
    rng = np.random.default_rng(pick(range(1000)))
    L_P = rng.integers(1, pick([300, 1500]) + 1, size=m)
    L_D = rng.integers(1, 20, size=m)
    arrival = np.cumsum(rng.exponential(pick([1e-3, 1e-1]), size=m))
    sch = get_scheduler(name)
    opts = {"sarathi_paper": {"chunk_size": pick([100, 128, 256, 384, 512])},
            "sarathi": {"chunk_size": pick([100, 128, 256, 384, 512])}}.get(name, {})
    run = run_gpu(cm, sch, sch.make_params(cm, **opts), arrival, L_P, L_D,
                  options=RunOptions(detail=True, log=True))
    b, it = run.batches, run.items
    lin = unpadded(cm, cm.mu_Lin * cm.t_col)  # per-token rate of the shared linear tile (Eq. 4)
    att = unpadded(cm, cm.mu * cm.t_row * cm.t_col * cm.t_red)  # per-FLOP rate (Eq. 6)
    d = cm.d_pre
    e, c = it["i"] + it["c"] - 1, it["c"]
    bad = (c > 0) & ~(att(e, c, d) & att(d, c, e))
    n_bad = np.bincount(it["batch"], weights=bad, minlength=b["tokens"].size)
    weights = 0 * b["tokens"]  # rows and reduction of the weight GeMMs divide every tile
    expected = lin(weights, b["tokens"], weights) & (n_bad == 0)
    assert np.array_equal(b["optimal"], expected)
    if gpu == "l4":  # its only tie is 128x256x32: a first chunk must be a multiple of t*_lcm = 256
        first = (it["i"] == 1) & (c > 0) & (c % cm.t_lcm != 0)
        assert not np.any(b["optimal"][it["batch"][first]])
