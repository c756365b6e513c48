"""vLLM v1's scheduler (``vllm_v1``) against the naive reference, hand-worked traces, and its options.

* Random scenarios (hypothesis, and a seeded loop built for KV pressure): the compiled policy and
  ``tests.reference_sim.vllm_v1`` (vLLM's ``Scheduler.schedule`` transcribed step by step, with its
  own running list, waiting deque and block counts) give the same batches (contents, start and
  duration), finish and first-token times to 1e-9, rejections, preemptions, token counts and peak
  KV use; and no step leaves a running request out (the FCFS property the module docstring
  states). The seeded loop checks that preemption and rejection really happen.
* Hand-made traces whose batches are worked out by hand in the comments below (the token budget
  split between running and waiting requests, the long-prefill threshold, the running cap,
  preemption of the newest running request with the waiting phase skipped, head-of-line blocking
  on KV blocks, recompute of prompt plus outputs); their times are Eq. 7 of the hand-written
  batches, summed with :func:`theory.cost.T_batch`.
* Stopping the loop at arbitrary times changes nothing; vLLM's defaults and refusals.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmq.cli import main
from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.memory import REJ_PROMPT_LIMIT
from stability.sim.registry import get_scheduler
from tests import reference_sim as ref
from tests.test_scheduler_resume import simulate as sliced_simulate
from tests.test_schedulers_vs_reference import BIG, assert_close, assert_same, blocks_of, drawn
from tests.toys import toy_cost_model
from theory.cost import Batch, T_batch
from theory.errors import FieldError

SCENARIOS = 100
V1 = get_scheduler("vllm_v1")


def engine_batches(run):
    """Each logged batch's (prefill chunks [(j, i, c)], decodes [(j, position)]), sorted."""
    it = run.items
    out = [([], []) for _ in run.batches["start"]]
    for k, j, i, c in zip(it["batch"], it["request"], it["i"], it["c"], strict=True):
        if c:
            out[k][0].append((int(j), int(i), int(c)))
        else:
            out[k][1].append((int(j), int(i)))
    return [(sorted(p), sorted(d)) for p, d in out]


def assert_same_batches(run, sim):
    assert engine_batches(run) == [(sorted(p), sorted(d)) for _, _, p, d in sim.batches]
    assert_close(run.batches["start"], [b[0] for b in sim.batches])
    assert_close(run.batches["duration"], [b[1] for b in sim.batches])


def random_prefixes(rng, L_P, share):
    """Each request after the first shares, with probability ``share``, a prompt prefix of 1 to
    min(its prompt, the other's) tokens with a random earlier request: (parent, shared tokens)."""
    m = len(L_P)
    parent, shared = np.full(m, -1), np.zeros(m, dtype=np.int64)
    for j in range(1, m):
        if rng.random() < share:
            parent[j] = rng.integers(j)
            shared[j] = rng.integers(1, min(L_P[j], L_P[parent[j]]) + 1)
    return parent, shared


def run_both(cm, trace, opts, kv, memory, detail):
    """The compiled policy and the reference on one scenario: ``trace`` is (arrival, L_P, L_D,
    prefix relation or None); prefix caching as ``opts`` says (on by default, as in vLLM)."""
    arrival, L_P, L_D, prefix = trace
    p = V1.make_params(cm, memory=memory, block_size=kv["block_size"], kv_blocks=kv["kv_blocks"],
                       **opts)
    run = run_gpu(cm, V1, p, arrival, L_P, L_D,
                  options=RunOptions(detail=detail, log=detail, prefix=prefix))
    if memory and opts.get("enable_prefix_caching", True):
        parent, shared = (None, None) if prefix is None else (list(prefix[0]), list(prefix[1]))
        mem = ref.PrefixPool(kv["kv_blocks"], kv["block_size"], parent, shared)
    else:
        mem = blocks_of({**kv, "watermark": 0.0}, "vllm") if memory else None
    sim = ref.vllm_v1(cm, arrival, L_P, L_D, opts["max_num_batched_tokens"], opts["max_num_seqs"],
                      opts["long_prefill_token_threshold"], opts["max_model_len"], mem)
    sim.pool = mem
    assert_same(run, sim, detail, mem)
    if detail:
        assert_same_batches(run, sim)
    assert sim.left_out == 0  # FCFS: every running request gets tokens in every step
    return run, sim


def v1_options(pick, kv, memory):
    """Random options; with memory, max_model_len fits the KV cache (vLLM refuses to start
    otherwise) and is often all of it, so that few requests are refused."""
    budget = pick([1, 3, 8, 16, 32, 512])
    cap = kv["kv_blocks"] * kv["block_size"]
    return {"max_num_batched_tokens": budget, "max_num_seqs": min(budget, pick([1, 2, 5, 128])),
            "long_prefill_token_threshold": pick([0, 0, 2, 7]),
            "max_model_len": pick([min(60, cap), cap, cap]) if memory else pick([60, BIG]),
            "enable_prefix_caching": pick([True, True, False])}


@pytest.mark.parametrize("detail", [False, True])
@pytest.mark.parametrize("memory", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_against_the_reference(memory, detail, data):
    cm, arrival, L_P, L_D, kv, pick = drawn(data)
    share = pick([0.0, 0.5, 0.9])
    prefix = random_prefixes(np.random.default_rng(pick(range(2**16))), L_P, share) if share else None
    run_both(cm, (arrival, L_P, L_D, prefix), v1_options(pick, kv, memory), kv, memory, detail)


def test_under_kv_pressure():
    """Scenarios built for KV pressure (bursts, caches of 48-160 tokens, blocks of 1-16, shared
    prefixes, prefix caching on or off): the same results as the reference in both modes;
    preemption, rejection, prefix hits and hits of preempted requests are really exercised."""
    rng = np.random.default_rng(31)

    def pick(options):
        options = list(options)
        return options[rng.integers(len(options))]

    n, preempted, rejected, hits, recompute_hits = 150, 0, 0, 0, 0
    for k in range(n):
        cm = toy_cost_model(pick(["toy2", "toy4", "toy8"]), pick(["paper", "real"]))
        m = pick(range(5, 31))
        L_P = rng.integers(1, pick([16, 40]) + 1, size=m)
        L_D = rng.integers(1, pick([5, 25]) + 1, size=m)
        arrival = np.cumsum(rng.exponential(pick([1e-4, 1e-3, 5e-3]), size=m))
        if pick([False, True]):
            arrival[: m // 2] = 0.0
        block = pick([1, 2, 4, 8, 16])
        kv = {"block_size": block, "kv_blocks": pick([48, 96, 160]) // block}
        budget = pick([4, 8, 16, 32, 512])
        opts = {"max_num_batched_tokens": budget, "max_num_seqs": min(budget, pick([2, 5, 128])),
                "long_prefill_token_threshold": pick([0, 0, 3, 8]),
                "max_model_len": pick([kv["kv_blocks"] * block, 40]),
                "enable_prefix_caching": pick([True, True, False])}
        prefix = random_prefixes(rng, L_P, pick([0.0, 0.5, 0.9]))
        run, sim = run_both(cm, (arrival, L_P, L_D, prefix), opts, kv, True, detail=k % 2 == 1)
        preempted += run.counters["n_preempt"] > 0
        rejected += run.counters["n_rej"] > 0
        hits += getattr(sim.pool, "hits", 0) > 0
        recompute_hits += getattr(sim.pool, "recompute_hits", 0) > 0
    assert preempted >= n // 3, preempted
    assert rejected >= n // 10, rejected
    assert hits >= n // 4, hits
    assert recompute_hits >= n // 10, recompute_hits


# --- hand-made traces ------------------------------------------------------------------------------


def hand_run(opts, L_P, L_D, memory=False, kv_blocks=None, block_size=16, prefix=None):
    """All requests arrive at 0 on the toy4 GPU; the batch log and results of the compiled policy."""
    cm = toy_cost_model("toy4", "paper")
    arrival = np.zeros(len(L_P))
    p = V1.make_params(cm, memory=memory, kv_blocks=kv_blocks, block_size=block_size, **opts)
    run = run_gpu(cm, V1, p, arrival, np.array(L_P), np.array(L_D),
                  options=RunOptions(detail=True, log=True, prefix=prefix))
    return cm, run


def check_trace(cm, run, expected, finish_batch):
    """The engine ran exactly the ``expected`` batches ([(prefill chunks (j, i, c)], decodes
    [(j, position)])), back to back from 0, each lasting Eq. 7 of its contents; request j finished
    at the end of batch ``finish_batch[j]`` (None: rejected)."""
    assert engine_batches(run) == [(sorted(p), sorted(d)) for p, d in expected]
    durations = [T_batch(cm, Batch.of([(i, c) for _, i, c in p], [pos for _, pos in d]))
                 for p, d in expected]
    ends = np.cumsum(durations)
    assert_close(run.batches["duration"], durations)
    assert_close(run.t_finish, [np.nan if k is None else ends[k] for k in finish_batch])


def test_budget_split_running_first_then_waiting():
    """Budget 8, requests A (5 prompt tokens, 2 decodes), B (6, 1), C (20, 1) at time 0.

    1. waiting A, B, C: A gets 5, B the 3 left; C waits.      A emits its first token.
    2. running A (decode at 6), B (3 to go): 1 + 3; C admitted with the 4 left.
    3. A (7), B (7; its prefill ended in step 2), C: 1 + 1 + min(16, 6) = 6.  A and B finish.
    4. C alone: 8 of its 10 left.   5. C's last 2 (its first token).   6. C's decode at 21.
    """
    opts = {"max_num_batched_tokens": 8, "max_num_seqs": 4}
    cm, run = hand_run(opts, [5, 6, 20], [2, 1, 1])
    expected = [([(0, 1, 5), (1, 1, 3)], []),
                ([(1, 4, 3), (2, 1, 4)], [(0, 6)]),
                ([(2, 5, 6)], [(0, 7), (1, 7)]),
                ([(2, 11, 8)], []),
                ([(2, 19, 2)], []),
                ([], [(2, 21)])]
    check_trace(cm, run, expected, [2, 2, 5])


def test_long_prefill_threshold_caps_running_and_waiting_chunks():
    """The same requests with ``long_prefill_token_threshold = 4``.

    1. A 4, B 4 (budget spent).
    2. A's last 1 (first token), B's last 2, then C admitted with 4 (1 token of budget unused:
       the waiting queue is empty).
    3. A (6), B (7), C 4.  B finishes.   4. A (7), C 4.  A finishes.
    5. C 4.   6. C's last 4 (first token).   7. C (21).
    """
    opts = {"max_num_batched_tokens": 8, "max_num_seqs": 4, "long_prefill_token_threshold": 4}
    cm, run = hand_run(opts, [5, 6, 20], [2, 1, 1])
    expected = [([(0, 1, 4), (1, 1, 4)], []),
                ([(0, 5, 1), (1, 5, 2), (2, 1, 4)], []),
                ([(2, 5, 4)], [(0, 6), (1, 7)]),
                ([(2, 9, 4)], [(0, 7)]),
                ([(2, 13, 4)], []),
                ([(2, 17, 4)], []),
                ([], [(2, 21)])]
    check_trace(cm, run, expected, [3, 2, 6])


def test_running_cap():
    """``max_num_seqs = 2``: C (like A and B: 2 prompt tokens, 2 decodes) waits until both finish."""
    opts = {"max_num_batched_tokens": 16, "max_num_seqs": 2}
    cm, run = hand_run(opts, [2, 2, 2], [2, 2, 2])
    expected = [([(0, 1, 2), (1, 1, 2)], []),
                ([], [(0, 3), (1, 3)]),
                ([], [(0, 4), (1, 4)]),
                ([(2, 1, 2)], []),
                ([], [(2, 3)]),
                ([], [(2, 4)])]
    check_trace(cm, run, expected, [2, 2, 5])


def test_preemption_of_the_newest_and_recompute():
    """Blocks of 2 tokens, 6 blocks, prefix caching off; A and B both 4 prompt tokens and 6
    decodes (11 tokens with the last output: max_model_len 12 fits the cache).

    1. A, B take 2 blocks each for their prompts (2 free).
    2. A (5), B (5): a new block each (0 free).     3. A (6), B (6): no new block.
    4. A (7) needs a block, none is free: the newest running request, B, is preempted (its 3
       blocks freed; it had emitted 3 tokens) and the waiting phase is skipped. A takes 1 (2 free).
    5-7. A (8), (9: a block, 1 free), (10): A finishes and frees its 5 blocks. B, at the head,
       needs the 4 blocks of its 7 tokens (prompt and outputs) and waits meanwhile.
    8. B's recompute prefill of 7 tokens emits its 4th token.   9-11. B (8), (9), (10).
    """
    opts = {"max_num_batched_tokens": 16, "max_num_seqs": 4, "max_model_len": 12,
            "enable_prefix_caching": False}
    cm, run = hand_run(opts, [4, 4], [6, 6], memory=True, kv_blocks=6, block_size=2)
    expected = [([(0, 1, 4), (1, 1, 4)], []),
                ([], [(0, 5), (1, 5)]),
                ([], [(0, 6), (1, 6)]),
                ([], [(0, 7)]),
                ([], [(0, 8)]),
                ([], [(0, 9)]),
                ([], [(0, 10)]),
                ([(1, 1, 7)], []),
                ([], [(1, 8)]),
                ([], [(1, 9)]),
                ([], [(1, 10)])]
    check_trace(cm, run, expected, [6, 10])
    assert run.preemptions.tolist() == [0, 1]
    assert run.counters["n_lost"] == 6  # B's KV of 6 tokens (its 7th was not computed yet)
    assert run.kv["peak"] == 6 and run.kv["free_end"] == 6


def test_self_preemption_ends_the_pass_and_the_head_blocks():
    """Blocks of 1 token, 10 blocks, prefix caching off; A (5 prompt tokens, 4 decodes), B (4, 1),
    C (1, 1).

    1. A 5, B 4, C 1: all 10 blocks taken; each emits its first token.
    2. A (6) needs a block: C, the newest, is preempted and A takes its block. B (5) needs one:
       B is now the newest, so B preempts itself and the pass ends; waiting = [B, C], no admission.
    3-5. A (7), (8), (9), each with a block freed by B. B, at the head, needs 5 blocks for its
       5 tokens and is refused each time; C behind it (2 blocks) would fit but is not admitted.
       A finishes after step 5 and frees 9 blocks.
    6. B's recompute prefill (5 tokens) and C's (2 tokens) emit their last tokens.
    """
    opts = {"max_num_batched_tokens": 16, "max_num_seqs": 4, "max_model_len": 10,
            "enable_prefix_caching": False}
    cm, run = hand_run(opts, [5, 4, 1], [4, 1, 1], memory=True, kv_blocks=10, block_size=1)
    expected = [([(0, 1, 5), (1, 1, 4), (2, 1, 1)], []),
                ([], [(0, 6)]),
                ([], [(0, 7)]),
                ([], [(0, 8)]),
                ([], [(0, 9)]),
                ([(1, 1, 5), (2, 1, 2)], [])]
    check_trace(cm, run, expected, [4, 5, 5])
    assert run.preemptions.tolist() == [0, 1, 1]


def test_preempted_request_recomputes_only_its_uncached_tail():
    """The trace of the preemption test above with prefix caching on (blocks of 2 tokens, 6
    blocks; A and B: 4 prompt tokens, 6 decodes). Steps 1-3 as there; B's prompt blocks B0, B1
    are cached when scheduled.

    4. A (7) needs a block: B is preempted. Its 6 computed tokens fill 3 blocks, cached as it
       frees them, last first: the free queue is [B2, B1, B0]. A takes its block from the head,
       evicting B2.
    5-7. A (8), (9: takes B1, evicting it), (10). B, at the head (7 tokens), would hit B0 only
       and need 4 - 1 + 1 = 4 blocks (B0 must leave the free queue too): refused with 2, then 1
       free. A finishes and frees its 5 blocks: the queue is [B0, A4, A3, A2, A1, A0].
    8. B hits B0 (2 tokens) and prefills only tokens 3-7, taking A4-A2 for its 3 new blocks.
    9-11. B (8), (9), (10)."""
    opts = {"max_num_batched_tokens": 16, "max_num_seqs": 4, "max_model_len": 12}
    cm, run = hand_run(opts, [4, 4], [6, 6], memory=True, kv_blocks=6, block_size=2)
    expected = [([(0, 1, 4), (1, 1, 4)], []),
                ([], [(0, 5), (1, 5)]),
                ([], [(0, 6), (1, 6)]),
                ([], [(0, 7)]),
                ([], [(0, 8)]),
                ([], [(0, 9)]),
                ([], [(0, 10)]),
                ([(1, 3, 5)], []),
                ([], [(1, 8)]),
                ([], [(1, 9)]),
                ([], [(1, 10)])]
    check_trace(cm, run, expected, [6, 10])
    assert run.preemptions.tolist() == [0, 1]
    assert run.kv["free_end"] == 6


@pytest.mark.parametrize(("shared", "start"), [(48, 49), (50, 49), (47, 33), (15, 1)])
def test_shared_prefix_is_not_prefilled_again(shared, start):
    """A (64 prompt tokens, 2 decodes) and B (70 tokens, 2 decodes) arrive at 0; B's first
    ``shared`` tokens are A's. A is admitted first and its 4 full prompt blocks are cached as
    they are scheduled; B, admitted in the same step, hits A's full blocks that lie in the shared
    part (floor(shared / 16)) and prefills only from token ``start`` on."""
    opts = {"max_num_batched_tokens": 512, "max_num_seqs": 4, "max_model_len": 640}
    prefix = (np.array([-1, 0]), np.array([0, shared]))
    cm, run = hand_run(opts, [64, 70], [2, 2], memory=True, kv_blocks=40, prefix=prefix)
    expected = [([(0, 1, 64), (1, start, 71 - start)], []),
                ([], [(0, 65), (1, 71)]),
                ([], [(0, 66), (1, 72)])]
    check_trace(cm, run, expected, [2, 2])
    off = dict(opts, enable_prefix_caching=False)
    cm, run = hand_run(off, [64, 70], [2, 2], memory=True, kv_blocks=40, prefix=prefix)
    check_trace(cm, run, [([(0, 1, 64), (1, 1, 70)], []), *expected[1:]], [2, 2])


def test_a_finished_parent_still_serves_its_prefix():
    """B (shares 48 tokens with A) arrives after A finished: A's blocks wait in the free queue,
    cached, and B hits 3 of them; a whole-prompt hit is capped so that the last token is computed
    (C repeats A's 64-token prompt: 63 // 16 = 3 blocks, so C prefills tokens 49-64)."""
    cm = toy_cost_model("toy4", "paper")
    p = V1.make_params(cm, kv_blocks=40, block_size=16, max_num_batched_tokens=512, max_num_seqs=4,
                       max_model_len=640)
    arrival = np.array([0.0, 10.0, 20.0])
    prefix = (np.array([-1, 0, 0]), np.array([0, 48, 64]))
    run = run_gpu(cm, V1, p, arrival, np.array([64, 70, 64]), np.array([1, 1, 1]),
                  options=RunOptions(detail=True, log=True, prefix=prefix))
    assert engine_batches(run) == [([(0, 1, 64)], []), ([], [(0, 65)]),
                                   ([(1, 49, 22)], []), ([], [(1, 71)]),
                                   ([(2, 49, 16)], []), ([], [(2, 65)])]


def test_requests_longer_than_max_model_len_are_rejected():
    """vLLM stops a request at max_model_len tokens (prompt plus outputs): one whose prompt plus
    L^D + 1 outputs exceed it is refused, one that fits exactly runs."""
    opts = {"max_num_batched_tokens": 16, "max_num_seqs": 4, "max_model_len": 10}
    cm, run = hand_run(opts, [6, 5], [4, 4])
    assert run.reject.tolist() == [REJ_PROMPT_LIMIT, 0]
    expected = [([(1, 1, 5)], [])] + [([], [(1, p)]) for p in range(6, 10)]
    check_trace(cm, run, expected, [None, 4])


# --- resumability, options -------------------------------------------------------------------------


@pytest.mark.parametrize("detail", [True, False])
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_sliced_equals_straight(detail, data):
    """Stopped at arbitrary times, with a batch log of one row, the loop gives the same results
    (and, in detail mode, the same batches) as run straight through."""
    cm, arrival, L_P, L_D, kv, pick = drawn(data)
    opts = v1_options(pick, kv, True)
    p = V1.make_params(cm, block_size=kv["block_size"], kv_blocks=kv["kv_blocks"], **opts)
    horizon = max(float(arrival[-1]), 1e-3) * 3
    slices = np.sort(np.random.default_rng(pick(range(100))).uniform(0, horizon, pick([1, 10, 60])))
    a = sliced_simulate(cm, V1, "loop", p, arrival, L_P, L_D, [], 1024, detail)
    b = sliced_simulate(cm, V1, "loop", p, arrival, L_P, L_D, slices, 1, detail)
    for key in ("t_start", "t_first", "t_finish", "tbt_max"):
        assert np.allclose(getattr(a, key), getattr(b, key), rtol=1e-9, equal_nan=True), key
    assert a.reject.tolist() == b.reject.tolist()
    assert a.preemptions.tolist() == b.preemptions.tolist()
    for key in ("n_batch", "n_dec_tok", "n_pre_tok", "n_preempt", "n_rej", "n_lost"):
        assert a.counters[key] == b.counters[key], key
    if detail:
        assert engine_batches(a) == engine_batches(b)


@pytest.mark.parametrize(("gpu", "budget", "seqs"), [("a100", 2048, 256), ("h100", 8192, 1024),
                                                      ("h200", 8192, 1024), ("l40s", 2048, 256)])
def test_defaults_are_vllms_openai_server_defaults(gpu, budget, seqs):
    """``EngineArgs.get_batch_defaults``: 8192 tokens and 1024 sequences from 70 GiB of GPU
    memory unless the GPU is an A100, else 2048 and 256; every other default is vLLM's too."""
    from theory.cost import build_cost_model
    from theory.hardware import get_gpu
    from theory.models import get_model

    cm = build_cost_model(get_gpu(gpu), get_model("llama-3.1-8b"))
    p = V1.make_params(cm)
    assert (p.max_num_batched_tokens, p.max_num_seqs) == (budget, seqs)
    assert p.long_prefill_token_threshold == 0
    assert p.max_model_len == cm.model.context_length
    assert (p.kv.block_size, p.kv.watermark_blocks) == (16, 0)
    # the defaults are capped as EngineArgs caps them: budget <= seqs * max_model_len, seqs <= budget
    short = V1.make_params(cm, max_model_len=4, max_num_seqs=100)
    assert (short.max_num_batched_tokens, short.max_num_seqs) == (min(400, budget), 100)
    tiny = V1.make_params(cm, max_num_batched_tokens=64)
    assert tiny.max_num_seqs == 64


@pytest.mark.parametrize(("options", "field"), [
    ({"max_num_partial_prefills": 2}, "max_num_partial_prefills"),
    ({"max_long_partial_prefills": 0}, "max_long_partial_prefills"),
    ({"long_prefill_token_threshold": -1}, "long_prefill_token_threshold"),
    ({"max_num_batched_tokens": 64, "max_num_seqs": 128}, "max_num_batched_tokens"),
    ({"max_model_len": 0}, "max_model_len"),
    ({"max_model_len": 10**9}, "max_model_len"),  # its KV does not fit the GPU
    ({"kv_blocks": 4, "block_size": 16, "max_model_len": 65}, "max_model_len"),
    ({"enable_prefix_caching": "yes"}, "enable_prefix_caching"),
])
def test_options_vllm_refuses_are_refused(options, field):
    cm = toy_cost_model("toy4", "paper")
    with pytest.raises(FieldError) as err:
        V1.make_params(cm, **options)
    assert err.value.field == field


def test_llmq_simulate_runs_it(capsys):
    code = main(["simulate", "--scheduler", "vllm_v1", "--gpu", "a100", "--load", "0.7",
                 "--requests", "300", "--option", "max_num_batched_tokens=512"])
    out = capsys.readouterr().out
    assert code == 0
    assert "vllm_v1" in out


def test_caching_changes_nothing_without_sharing_or_preemption():
    """With no shared prefix and no preemption there is nothing to hit: prefix caching on gives
    the batches of prefix caching off (seeded scenarios, a cache large enough for all)."""
    rng = np.random.default_rng(7)
    cm = toy_cost_model("toy4", "real")
    for _ in range(20):
        m = int(rng.integers(2, 25))
        L_P, L_D = rng.integers(1, 90, size=m), rng.integers(1, 25, size=m)
        arrival = np.cumsum(rng.exponential(2e-3, size=m))
        runs = []
        for caching in (True, False):
            p = V1.make_params(cm, kv_blocks=400, block_size=4, max_num_batched_tokens=32,
                               max_num_seqs=8, max_model_len=1600, enable_prefix_caching=caching)
            runs.append(run_gpu(cm, V1, p, arrival, L_P, L_D, options=RunOptions(detail=True, log=True)))
        assert runs[0].counters["n_preempt"] == 0
        assert engine_batches(runs[0]) == engine_batches(runs[1])
        assert np.array_equal(runs[0].t_finish, runs[1].t_finish)


def test_a_trace_carries_its_prefix_relation_to_the_engine(tmp_path):
    """``simulate`` on a CSV trace with prefix columns gives what the engine gives with that
    relation (A100, Llama-3.1-8B), and differs from the same trace without it; two nodes under
    round-robin routing keep only the relations within a node."""
    from stability.sim.cluster import _node_prefix
    from stability.sim.simulate import Scenario, simulate

    rng = np.random.default_rng(3)
    m = 60
    L_P, L_D = rng.integers(200, 1500, size=m), rng.integers(2, 40, size=m)
    arrival = np.cumsum(rng.exponential(0.05, size=m))
    parent, shared = random_prefixes(rng, L_P, 0.8)
    path = tmp_path / "t.csv"
    rows = zip(arrival, L_P, L_D, parent, shared, strict=True)
    path.write_text("arrival_time,prompt_len,output_len,prefix_parent,shared_prefix_tokens\n"
                    + "".join(f"{float(a)!r},{p},{d},{q if q >= 0 else ''},{s}\n" for a, p, d, q, s in rows))
    sc = Scenario(gpu="a100", model="llama-3.1-8b", mode="real", scheduler="vllm_v1", trace=str(path),
                  n_requests=m, load=None)
    res = simulate(sc)
    got = res.requests["t_finish"]
    t = arrival - arrival[0]
    related = RunOptions(prefix=(parent, shared))
    want = run_gpu(res.cost_model, V1, res.params, t, L_P, L_D, options=related).t_finish
    plain = run_gpu(res.cost_model, V1, res.params, t, L_P, L_D).t_finish
    assert_close(got, want)
    assert not np.allclose(got, plain)
    node = np.arange(m) % 2
    local_parent, local_shared = _node_prefix((parent, shared), node, 1)
    for k, j in enumerate(np.flatnonzero(node == 1)):
        same = parent[j] >= 0 and node[parent[j]] == 1
        assert local_parent[k] == (parent[j] // 2 if same else -1)
        assert local_shared[k] == (shared[j] if same else 0)
