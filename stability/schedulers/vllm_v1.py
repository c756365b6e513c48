"""vLLM v1's scheduler: one token budget per step, running requests first, chunked prefill always.

Follows ``Scheduler.schedule`` of vllm-project/vllm ``vllm/v1/core/sched/scheduler.py`` (read at
commit 00024d3) with ``KVCacheManager.allocate_slots`` of ``vllm/v1/core/kv_cache_manager.py``
(read at 003df29), the defaults of ``SchedulerConfig`` in ``vllm/config/scheduler.py`` (read at
01230b4) and of ``EngineArgs`` in ``vllm/engine/arg_utils.py``, and ``check_stop`` of
``vllm/v1/core/sched/utils.py`` (read at 018d5dc). There is no prefill or decode phase: each
request has tokens computed and tokens known (prompt plus outputs), and every step tries to close
the gap. Each step, with a budget of ``max_num_batched_tokens`` tokens:

1. the *running* requests, in the order they were admitted, each get
   ``n = min(tokens left to compute, long_prefill_token_threshold if > 0, budget left)`` tokens:
   1 for a decode, a chunk for a partial prefill, until the budget is spent (under FCFS that
   never leaves a running request out: the tokens of the requests before it never grow from step
   to step, and it fitted behind them when it was admitted). Before each, ``allocate_slots`` needs
   the blocks of its computed tokens plus ``n`` that it does not hold yet to be free; while they
   are not, the newest running request (``self.running.pop()``) is preempted by recompute (its
   blocks freed, its computed tokens reset to 0, put at the front of the waiting queue), or the
   request itself when it is the newest, which ends the pass;
2. only if nothing was preempted in this step, *waiting* requests from the head of the queue
   (FCFS, head-of-line blocking): stop when ``max_num_seqs`` requests are running (holding KV) or
   when the head's first chunk ``min(tokens past its cache hit, threshold if > 0, budget left)``
   cannot get its blocks; otherwise it joins the running requests with that chunk.

Prefix caching (``enable_prefix_caching``, on by default as in vLLM v1 for decoder models;
``get_computed_blocks`` of ``vllm/v1/core/kv_cache_manager.py``, read at ace980e, and
``BlockPool`` of ``vllm/v1/core/block_pool.py``, read at c59cb79): a waiting request's computed
tokens start after the longest run of cached full blocks from its first (at most ``(tokens - 1)
// 16`` blocks), which it references instead of allocating; a cached block in the free queue
counts as a block to allocate, and new blocks evict the least recently freed cached ones. Blocks
are identified by the workload's prefix relation (a request's prefix parent and shared prompt
tokens) and, for its own blocks, by the request; a preempted request's freed blocks stay cached,
so its recompute mostly starts after them. :mod:`stability.sim.prefix_cache` gives the model,
its sources and its simplifications. With it off, or with no shared prefix and no preemption,
the steps are those without it.

KV blocks (16 tokens) are taken incrementally, chunk by chunk and token by token, never the whole
prompt at admission; there is no watermark and no swapping. A recompute prefill covers the prompt
and every output token so far and emits the next token, as :mod:`stability.sim.mixed` describes.

Options: ``max_num_batched_tokens`` and ``max_num_seqs`` (default: vLLM's OpenAI-server defaults,
``EngineArgs.get_batch_defaults``: 8192 and 1024 on a GPU with at least 70 GiB that is not an
A100, else 2048 and 256; then, as ``_set_default_max_num_seqs_and_batched_tokens_args`` does, the
budget is capped at ``max_num_seqs * max_model_len`` and the sequences at the budget);
``long_prefill_token_threshold`` (0: off); ``max_model_len`` (default: the model's context window,
else 8192); ``enable_prefix_caching`` (default True); ``max_num_partial_prefills`` and
``max_long_partial_prefills``, which vLLM v1 accepts only at 1
(``EngineArgs._check_feature_supported`` raises "Concurrent Partial Prefill is not supported"
otherwise, vllm-project/vllm#39737 on v0.19.0); and the memory options of
:func:`stability.sim.memory.kv_config` (``memory=True``, ``gpu_memory_utilization=0.9``,
``block_size=16``, ``kv_blocks``). As ``SchedulerConfig.verify_max_model_len`` does, a budget
below ``max_num_seqs`` is refused; as vLLM does at start-up, so is a ``max_model_len`` whose
blocks exceed the KV cache.

Choices where the simulator differs from the real system or the system is silent:

* a request whose prompt plus ``L^D + 1`` output tokens exceed ``max_model_len`` is rejected
  (``REJ_PROMPT_LIMIT``) when it reaches the head of the waiting queue: vLLM would stop it at
  ``max_model_len`` tokens (``check_stop``), i.e. not run the trace's request as given. So every
  admitted request fits an empty KV cache, and the oldest running request always progresses;
* prefix caching identifies blocks by the trace's prefix relation, not by token ids (a trace
  without it shares nothing), and simplifies vLLM's pool where
  :mod:`stability.sim.prefix_cache` says (one cached copy per block identity, decode blocks
  registered when freed, the order of frees within a step);
* the priority policy, speculative decoding, async scheduling, pipeline parallelism, encoders,
  LoRA and KV connectors are not modelled (FCFS, one step at a time).

Under FCFS the running list is sorted by arrival: admissions come from the waiting head, whose
requests all arrived after the running ones, and a preempted request is the newest running one
and goes back to the front of the waiting queue. The loop therefore keeps the engine's decode set
``D`` and prefill list ``P`` (both sorted by arrival index) and walks their merge as the running
list; the newest running request is the larger of their last entries.

A run of decode-only steps is one event (``decode_run``) while no partial prefill exists and the
waiting head would be neither admitted nor rejected (its blocks can only get scarcer until a
completion ends the run), cut before the first step that would preempt
(:func:`stability.sim.memory.clean_decode_batches`, vLLM's rule: a decode needs a block only at a
block boundary) and, when the waiting queue is empty and a request could join, at the first step
boundary after an arrival. Other steps are built and run one at a time.

References
----------
vllm-project/vllm ``vllm/v1/core/sched/scheduler.py``, ``vllm/v1/core/kv_cache_manager.py``,
``vllm/config/scheduler.py``, ``vllm/engine/arg_utils.py``; Kwon et al. (2023), vLLM /
PagedAttention; Agrawal et al. (2024), Sarathi-Serve (chunked prefill within a token budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import (
    BIG,
    DONE,
    decode_run,
    idle,
    log_has_room,
    pop_waiting,
    running,
    see_arrivals,
    stop_code,
)
from stability.sim.memory import (
    REJ_PROMPT_LIMIT,
    VLLM,
    KvConfig,
    blocks,
    clean_decode_batches,
    kv_config,
    kv_setup,
    reject,
)
from stability.sim.mixed import (
    add_chunk,
    chunk_run,
    mixed_arrays,
    preempt_decode,
    preempt_prefill,
    run_mixed,
)
from stability.sim.prefix_cache import any_cached, lookup, pc_setup, register, simple, take_hit
from stability.sim.registry import options_record
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int

NAME = "vllm_v1"
GIB = 2**30
LARGE_GPU_BYTES = 70 * GIB  # EngineArgs.get_batch_defaults: larger defaults from 70 GiB (not A100)
DEFAULT_MAX_MODEL_LEN = 8192  # for a model whose context window is not recorded


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    budget: int  # max_num_batched_tokens: tokens of one step (decodes count one each)
    max_seqs: int  # max_num_seqs: running requests (holding KV memory)
    threshold: int  # long_prefill_token_threshold: largest chunk of one request (0: none)
    max_model_len: int  # prompt + output tokens of a request
    kv: KvConfig  # KV memory (stability.sim.memory)
    caching: bool  # enable_prefix_caching (stability.sim.prefix_cache)


@dataclass(frozen=True)
class Params:
    """Token budget, running-request cap, long-prefill threshold, model length, memory, prefix
    caching."""

    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int
    max_model_len: int
    kv: KvConfig
    enable_prefix_caching: bool = True

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.max_num_batched_tokens), int(self.max_num_seqs),
                      int(self.long_prefill_token_threshold), int(self.max_model_len), self.kv,
                      bool(self.enable_prefix_caching))


def batch_defaults(cm: CostModel) -> tuple[int, int]:
    """vLLM's ``max_num_batched_tokens`` and ``max_num_seqs`` for its OpenAI server on the cost
    model's GPU (``EngineArgs.get_batch_defaults``): (8192, 1024) on a GPU with at least 70 GiB of
    memory whose name does not contain "a100", else (2048, 256)."""
    gpu = cm.gpu
    large = gpu.memory_bytes >= LARGE_GPU_BYTES and "a100" not in f"{gpu.key} {gpu.name}".lower()
    return (8192, 1024) if large else (2048, 256)


def _only_one(field: str, value: object) -> None:
    if isinstance(value, bool) or value != 1:
        raise FieldError(field, value, "1: vLLM v1 refuses concurrent partial prefills (EngineArgs"
                                       "._check_feature_supported: 'Concurrent Partial Prefill')")


@dataclass(frozen=True)
class Options:
    """vLLM v1's options (``--option vllm_v1.NAME=VALUE``, vLLM's ``EngineArgs`` names), with their
    defaults (None: derived as the module docstring says).

    Attributes
    ----------
    max_num_batched_tokens, max_num_seqs : int or None
        The token budget of a step and the most running requests.
    long_prefill_token_threshold : int
        The cap on one request's tokens in a step (0: off).
    max_num_partial_prefills, max_long_partial_prefills : int
        Accepted only at 1, as vLLM v1 does.
    max_model_len : int or None
        The longest request admitted (default: the model's context window).
    memory, gpu_memory_utilization, block_size, kv_blocks
        The KV memory (:func:`stability.sim.memory.kv_config`, no watermark).
    enable_prefix_caching : bool
        Prefix caching (:mod:`stability.sim.prefix_cache`), on by default as in vLLM v1.
    """

    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    long_prefill_token_threshold: int = 0
    max_num_partial_prefills: int = 1
    max_long_partial_prefills: int = 1
    max_model_len: int | None = None
    memory: bool = True
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    kv_blocks: int | None = None
    enable_prefix_caching: bool = True


def make_params(cm: CostModel, **options) -> Params:
    """vLLM v1's defaults for its OpenAI server (see the module docstring), validated as vLLM
    validates them. The options are the fields of :class:`Options`."""
    o = options_record(Options, options, NAME)
    max_num_batched_tokens, max_num_seqs = o.max_num_batched_tokens, o.max_num_seqs
    max_model_len, enable_prefix_caching = o.max_model_len, o.enable_prefix_caching
    _only_one("max_num_partial_prefills", o.max_num_partial_prefills)
    _only_one("max_long_partial_prefills", o.max_long_partial_prefills)
    if not isinstance(enable_prefix_caching, bool):
        raise FieldError("enable_prefix_caching", enable_prefix_caching, "True or False")
    threshold = o.long_prefill_token_threshold
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise FieldError("long_prefill_token_threshold", threshold, "an integer >= 0 (0: off)")
    if max_model_len is None:
        max_model_len = cm.model.context_length or DEFAULT_MAX_MODEL_LEN
    max_model_len = require_positive_int("max_model_len", max_model_len)
    default_budget, default_seqs = batch_defaults(cm)
    seqs = default_seqs if max_num_seqs is None else require_positive_int("max_num_seqs", max_num_seqs)
    if max_num_batched_tokens is None:
        budget = min(seqs * max_model_len, default_budget)
    else:
        budget = require_positive_int("max_num_batched_tokens", max_num_batched_tokens)
    if max_num_seqs is None:
        seqs = min(seqs, budget)
    if budget < seqs:
        raise FieldError("max_num_batched_tokens", budget,
                         f"at least max_num_seqs ({seqs}), as vLLM's SchedulerConfig requires")
    kv = kv_config(cm, o.memory, o.gpu_memory_utilization, o.block_size, 0.0, o.kv_blocks)
    if kv.on and math.ceil(max_model_len / kv.block_size) > kv.blocks:
        raise FieldError("max_model_len", max_model_len,
                         f"at most {kv.blocks * kv.block_size} tokens: vLLM does not start when one "
                         f"request of max_model_len tokens does not fit its {kv.blocks} KV blocks "
                         f"of {kv.block_size} tokens (lower max_model_len, or raise "
                         "gpu_memory_utilization)")
    return Params(budget, seqs, threshold, max_model_len, kv, enable_prefix_caching)


# --- one step of Scheduler.schedule ---------------------------------------------------------------


@njit(cache=True)
def _chunk(remaining, threshold, left):
    """Tokens scheduled for a request with ``remaining`` tokens to compute: capped at the long
    prefill threshold (when > 0) and at the budget left."""
    n = remaining
    if 0 < threshold < n:
        n = threshold
    return min(n, left)


@njit(cache=True)
def _hit(st, j):
    """Waiting request j's prefix-cache hit (:func:`stability.sim.prefix_cache.lookup`): (cached
    blocks from its first, how many of them are free); (0, 0) with prefix caching off."""
    if st.pc_on:
        return lookup(st, j)
    return 0, 0


@njit(cache=True)
def _fits_hit(st, x, hit, free):
    """``allocate_slots`` would succeed for a waiting request (holding no blocks) whose KV is to
    cover x tokens with ``hit`` cached blocks, ``free`` of them in the free queue: the blocks to
    allocate, ``blocks(x) - hit + free``, are free (always, with the memory off)."""
    return (st.kv_on == 0) | (blocks(st, x) - hit + free <= st.kv_free)


@njit(cache=True)
def _allocate_slots(st, j, x):
    """``allocate_slots``: if the blocks covering x tokens that request j does not hold yet are
    free, take them and return True; else change nothing and return False. Branch-free (see
    :mod:`stability.sim.structs`): it runs once per scheduled request."""
    need = (blocks(st, x) - st.blk[j]) * st.kv_on
    ok = need <= st.kv_free
    took = max(need, 0) * ok
    st.blk[j] += took
    st.kv_free -= took
    st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)
    return ok


@njit(cache=True)
def _preempt_newest(st):
    """Preempt the newest running request by recompute (``self.running.pop()``): the later of the
    last decode entry and the last admitted prefill. Returns its index."""
    jd = st.d_id[st.nd - 1] if st.nd > 0 else -1
    jp = st.p_id[st.np - 1] if st.np > 0 else -1
    if jd > jp:
        preempt_decode(st, st.nd - 1, False)
        return jd
    preempt_prefill(st, st.np - 1, False)
    return jp


@njit(cache=True)
def _admit(st, j):
    """Request j joins the running requests as a prefill (P, sorted by arrival index)."""
    q = st.np
    while q > 0 and st.p_id[q - 1] > j:
        st.p_id[q] = st.p_id[q - 1]
        q -= 1
    st.p_id[q] = j
    st.np += 1


@njit(cache=True)
def _schedule(st, budget, max_seqs, threshold, limit):
    """Build one step's batch (``Scheduler.schedule``): the first ``na`` decode entries get one
    token each (their blocks allocated) and the chunks are added with
    :func:`stability.sim.mixed.add_chunk`. Returns (tokens scheduled, na)."""
    left = budget
    qd = 0  # decode entries scheduled (a prefix of D: the budget is spent in running order)
    qp = 0  # prefill entries scheduled (a prefix of P)
    preempted = False
    while left > 0 and (qd < st.nd or qp < st.np):  # 1. the running requests, oldest first
        decode = qd < st.nd and (qp >= st.np or st.d_id[qd] < st.p_id[qp])
        if decode:
            j = st.d_id[qd]
            n = 1
            x = st.d_pos[qd]  # DI(R, x) stores token x's KV
        else:
            j = st.p_id[qp]
            n = _chunk(st.pl[j] - st.pg[j], threshold, left)
            x = st.pg[j] + n
        gone = False
        while not _allocate_slots(st, j, x):
            preempted = True
            if _preempt_newest(st) == j:
                gone = True
                break
        if gone:
            break
        if decode:
            qd += 1
        else:
            if st.pc_on:
                register(st, j, x)
            add_chunk(st, j, n)
            qp += 1
        left -= n
    if not preempted:  # 2. the waiting requests, FCFS from the head
        while st.wq_len > 0 and left > 0:
            j = st.wq[st.wq_head]
            if st.lp[j] + st.ld[j] >= limit:  # prompt + L^D + 1 outputs > max_model_len
                reject(st, pop_waiting(st), REJ_PROMPT_LIMIT)
                continue
            if st.nd + st.np >= max_seqs:
                break
            hit, free = _hit(st, j)
            x0 = hit * st.kv_bs
            n = _chunk(st.pl[j] - x0, threshold, left)
            if not _fits_hit(st, x0 + n, hit, free):
                break
            pop_waiting(st)
            if hit > 0:
                take_hit(st, j, hit)
                st.pg[j] = x0
            _allocate_slots(st, j, x0 + n)
            if st.pc_on:
                register(st, j, x0 + n)
            _admit(st, j)
            add_chunk(st, j, n)
            left -= n
    return budget - left, qd


@njit(cache=True)
def _admission_would_act(st, budget, max_seqs, threshold, limit):
    """With no partial prefill, whether the waiting phase would act on the head now: reject it,
    or admit it (fewer than ``max_seqs`` running, its first chunk's blocks free). While it would
    not, only a completion can change that, so decode-only steps may run as one event."""
    if st.wq_len == 0:
        return False
    j = st.wq[st.wq_head]
    if st.lp[j] + st.ld[j] >= limit:
        return True
    left = budget - st.nd
    if st.nd >= max_seqs or left <= 0:
        return False
    hit, free = _hit(st, j)
    x0 = hit * st.kv_bs
    return _fits_hit(st, x0 + _chunk(st.pl[j] - x0, threshold, left), hit, free)


@njit(cache=True)
def _chunk_run(st, ct, budget, threshold, t_stop):
    """Run, as one event, the steps that each give every decode one token and the only prefill
    (the newest running request) the rest of the budget, ``c = budget - |D|`` tokens: nothing
    else runs in them (the budget is spent, so the waiting phase does not act) while the prompt
    has ``c`` tokens left for each and nothing is preempted (:func:`stability.sim.mixed.chunk_run`,
    fast mode only). Returns how many requests finished, or -1 when no such run of two steps or
    more applies (nothing changed).

    :func:`stability.sim.mixed.chunk_run` grows the decodes' blocks but not the chunks': the
    blocks of every whole chunk the prompt has left are taken first (if free), so that its check
    for preemption counts them, and the blocks the run did not reach are given back after it,
    with the peak use lowered by as many (the run's peak is at its last step, where the prefill
    holds exactly the blocks of its computed tokens)."""
    j = st.p_id[0]
    c = budget - st.nd
    rem = st.pl[j] - st.pg[j]
    if c <= 0 or rem < 2 * c or 0 < threshold < c or (st.nd > 0 and st.d_id[st.nd - 1] > j):
        return -1
    if st.pc_on and not _cache_still(st, j, st.pg[j] + (rem // c) * c, rem // c):
        return -1
    held = st.blk[j]
    extra = max(blocks(st, st.pg[j] + (rem // c) * c) * st.kv_on - held, 0)
    if extra > st.kv_free:
        return -1
    peak = st.kv_peak
    st.kv_free -= extra
    st.blk[j] = held + extra
    done = chunk_run(st, ct, j, c, t_stop)
    if done < 0:
        st.kv_free += extra
        st.blk[j] = held
        return -1
    if st.pg[j] < st.pl[j]:  # still prefilling: give back the blocks of the chunks not run
        back = st.blk[j] - blocks(st, st.pg[j]) * st.kv_on
        st.blk[j] -= back
        st.kv_free += back
        st.kv_peak = max(peak, st.kv_peak - back)
    if st.pc_on and st.blk[j] > 0:
        register(st, j, st.pg[j])
    return done


@njit(cache=True)
def _cache_still(st, j, x, k):
    """With prefix caching on, whether a run of at most k chunk steps of request j (up to x tokens)
    leaves the cache as registering j's blocks after it does: no decode but a simple one (freed
    without touching the cache, :func:`stability.sim.prefix_cache.pc_release`) completes in it,
    and none of the blocks j fills is cached already (taking blocks cannot then evict one of them
    before j registers it)."""
    for q in range(st.nd):
        if st.d_rem[q] <= k and not simple(st, st.d_id[q]):
            return False
    return not any_cached(st, j, x)


@njit(cache=True)
def prepare(st, prm):
    """Size the state's mixed-batch arrays, KV memory and prefix cache for the options ``prm``
    (each call after the first changes nothing)."""
    mixed_arrays(st)
    kv_setup(st, prm.kv, VLLM)
    pc_setup(st, prm.caching)


@njit(cache=True)
def plan_step(st, prm):
    """Build one step at the state's clock (the arrivals up to it seen, :func:`prepare` called):
    ``Scheduler.schedule`` as the loop builds it, for a caller that runs it
    (:func:`stability.sim.mixed.apply_mixed`). Returns (tokens scheduled, decode entries run)."""
    see_arrivals(st)
    tokens, na = _schedule(st, prm.budget, prm.max_seqs, prm.threshold, prm.max_model_len)
    if tokens == 0 and st.nd + st.np + st.wq_len > 0:  # every admitted request fits an empty KV cache
        raise RuntimeError("vllm_v1: a step scheduled nothing while requests wait")
    return tokens, na


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """vLLM v1's steps, one batch per decision (decode-only runs as one event)."""
    budget, max_seqs, threshold, limit = prm.budget, prm.max_seqs, prm.threshold, prm.max_model_len
    prepare(st, prm)
    while running(st, t_stop):
        see_arrivals(st)
        if st.nd == 0 and st.np == 0 and st.wq_len == 0:
            if not idle(st, t_stop):
                return DONE
            continue
        if st.np == 0 and st.nd > 0 and not _admission_would_act(st, budget, max_seqs, threshold, limit):
            k = clean_decode_batches(st, st.nd, BIG)
            if k > 0:
                wake = st.wq_len == 0 and st.nd < max_seqs
                if decode_run(st, ct, st.nd, wake, t_stop, k) < 0:
                    break
                continue
        if st.np == 1 and st.detail == 0 and _chunk_run(st, ct, budget, threshold, t_stop) >= 0:
            continue
        if not log_has_room(st, 1, st.nd + st.np + min(st.wq_len, budget)):
            break
        tokens, na = _schedule(st, budget, max_seqs, threshold, limit)
        if tokens > 0:
            run_mixed(st, ct, na)
        elif st.nd + st.np + st.wq_len > 0:  # every admitted request fits an empty KV cache
            raise RuntimeError("vllm_v1: a step scheduled nothing while requests wait")
    return stop_code(st)
