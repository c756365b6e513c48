"""KV-cache memory: capacity from GPU memory, block-granular accounting, admission, preemption.

The model is the paged block manager that vLLM v0 and Sarathi-Serve share
(microsoft/sarathi-serve @ 96f9911 ``sarathi/core/block_space_manager/base_block_space_manager.py``;
vllm-project/vllm v0 ``vllm/core/block_manager.py``):

* capacity: ``blocks = floor((u M - W) / (b_kv B))`` with ``M`` the GPU memory
  (``gpu.memory_bytes``), ``u`` = ``gpu_memory_utilization`` (vLLM 0.9, Sarathi-Serve 0.8), ``W``
  the model weights (``model.weight_bytes()``), ``b_kv`` the KV bytes of one token
  (``model.kv_bytes_per_token()``; both at the model's precision, one byte per element at fp8:
  :mod:`theory.precision`) and ``B`` the block size (16 tokens). Activations and the CUDA
  graph pool, which the real systems profile and subtract, are not modelled;
* a request whose KV covers ``x`` tokens holds ``blocks(x) = ceil(x / B)`` blocks. A decode
  iteration ``DI(R, p)`` needs ``blocks(p)`` (it stores token p's KV);
* admission (``can_allocate``): the *whole* prompt's blocks are taken at once, even when the
  prompt is prefilled in chunks, and only if ``free - blocks(len) >= watermark`` with
  ``watermark = int(0.01 total)``;
* decode growth (``can_append_slot``): Sarathi-Serve asks for ``free > 0`` before every decode
  whether or not it needs a new block (rule ``SARATHI``); vLLM v0 asks only that the blocks the new
  token needs be free (rule ``VLLM``). A block is taken when a position crosses a block boundary;
* preemption is by recompute (done by :mod:`stability.sim.mixed`): the victim's blocks are freed and
  it later re-prefills its prompt plus the tokens it had generated;
* a request whose blocks can never be allocated, even on an empty GPU (``blocks(len) > total -
  watermark``, vLLM's ``AllocStatus.NEVER``), is rejected with reason ``REJ_KV_NEVER``; one
  longer than the scheduler's prompt limit with ``REJ_PROMPT_LIMIT`` (vLLM and Sarathi-Serve
  ignore such requests). Rejected requests never finish and are counted, never lost silently.

The compiled functions below keep the counts in the engine state (``kv_*`` fields and the
per-request ``blk``); :class:`KvConfig` is what a scheduler's parameters carry, and, as the
sub-record ``prm.kv`` of its compiled record, what its loop hands to :func:`kv_setup`.

Which schedulers model memory: ``sarathi`` and ``vllm`` (on by default, ``memory=False`` turns
it off). RAD, Algorithm 2, request-level batching, Algorithm 4 (``sarathi_paper``) and DistServe
do not: the paper's Assumption 4 grants room for t*_col requests of maximal length
(``theory.assumptions.assumption4`` checks it for a GPU, model and workload).

References
----------
Kwon et al. (2023), PagedAttention; Agrawal et al. (2024), Sarathi-Serve; Bari, Hegde,
de Veciana (2025), Assumption 4.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.sim.prefix_cache import pc_release
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int
from theory.terms import shard_memory

BLOCK_SIZE = 16  # tokens per KV block (vLLM and Sarathi-Serve default)
WATERMARK = 0.01  # fraction of blocks kept free at admission (both systems)
SARATHI, VLLM = 0, 1  # can_append_slot rules: free > 0 per decode, or free >= blocks needed

REJ_PROMPT_LIMIT, REJ_KV_NEVER, REJ_NO_TYPE = 1, 2, 3  # reasons recorded per request (0: not rejected)
REJECT_REASONS = {
    REJ_PROMPT_LIMIT: "prompt (with recomputed tokens) longer than the scheduler's prompt limit",
    REJ_KV_NEVER: "its KV blocks exceed the GPU's capacity even with nothing else running",
    REJ_NO_TYPE: "its (L^P, L^D) is none of the prompt types the scheduler was given (WAIT)",
}


class KvConfig(NamedTuple):
    """KV memory of one GPU as a scheduler sees it (``on=False``: unlimited memory).

    A ``typing.NamedTuple``, so that a compiled loop reads it by name (``prm.kv.blocks``) as a
    field of its scheduler's record; :func:`kv_config` builds it with exact types (a bool and
    Python ints), so every scheduler compiles once for it.
    """

    on: bool
    blocks: int
    block_size: int
    watermark_blocks: int


def capacity_blocks(cm: CostModel, gpu_memory_utilization: float = 0.9,
                    block_size: int = BLOCK_SIZE) -> int:
    """KV blocks that fit beside the weights in ``gpu_memory_utilization`` of the GPU's memory
    (one GPU's shares of both for a tensor-parallel replica: :func:`theory.terms.shard_memory`)."""
    weights, kv_per_token = shard_memory(cm.model, cm.gpu.terms.tp, ep=cm.gpu.terms.ep)
    usable = gpu_memory_utilization * cm.gpu.memory_bytes - weights
    per_block = kv_per_token * block_size
    return max(0, math.floor(usable / per_block))


def kv_config(cm: CostModel, memory: bool, gpu_memory_utilization: float = 0.9,
              block_size: int = BLOCK_SIZE, watermark: float = WATERMARK,
              kv_blocks: int | None = None) -> KvConfig:
    """Validate the memory options of a scheduler and build its :class:`KvConfig`.

    Parameters
    ----------
    memory
        Model KV memory at all (``False``: unlimited, as the paper's Assumption 4 grants).
    gpu_memory_utilization
        Fraction of the GPU memory for weights and KV cache, in (0, 1].
    block_size
        Tokens per block.
    watermark
        Fraction of the blocks that admission keeps free, in [0, 1).
    kv_blocks
        Total blocks, overriding the capacity computed from the GPU and model (tests use a few).
    """
    if not isinstance(memory, bool):
        raise FieldError("memory", memory, "True or False")
    if not (isinstance(gpu_memory_utilization, (int, float)) and 0 < gpu_memory_utilization <= 1):
        raise FieldError("gpu_memory_utilization", gpu_memory_utilization, "a number in (0, 1]")
    if not (isinstance(watermark, (int, float)) and 0 <= watermark < 1):
        raise FieldError("watermark", watermark, "a number in [0, 1)")
    block_size = require_positive_int("block_size", block_size)
    if kv_blocks is None:
        blocks = capacity_blocks(cm, gpu_memory_utilization, block_size)
        if memory and blocks < 1:
            raise FieldError("gpu_memory_utilization", gpu_memory_utilization,
                             f"room for KV blocks beside {cm.model.key}'s weights on {cm.gpu.key}")
    else:
        blocks = require_positive_int("kv_blocks", kv_blocks)
    return KvConfig(bool(memory), int(blocks), int(block_size), int(watermark * blocks))


# --- compiled accounting over the engine state ---------------------------------------------------


@njit(cache=True)
def kv_setup(st, kv, rule):
    """Configure the state's KV memory from ``kv`` (a :class:`KvConfig`) and the append ``rule``
    (``SARATHI`` or ``VLLM``) once: a loop calls this on entry; later calls do nothing."""
    if st.kv_ready:
        return
    st.kv_ready = 1
    st.kv_on = 1 if kv.on else 0
    st.kv_total = kv.blocks
    st.kv_free = kv.blocks
    st.kv_wm = kv.watermark_blocks
    st.kv_bs = kv.block_size
    st.kv_rule = rule
    st.kv_below = np.zeros(kv.block_size + 1, dtype=np.int64)


@njit(cache=True, error_model="numpy")
def blocks(st, x):
    """Blocks covering the KV of x >= 0 tokens: ceil(x / block_size), as ``ceil_udiv``. The numpy
    error model leaves out the division's zero-divisor exception (the block size is at least 1),
    whose exit path would keep a reference-count pair on the state in every caller."""
    return np.int64((np.uint64(x) + np.uint64(st.kv_bs - 1)) // np.uint64(st.kv_bs))


@njit(cache=True)
def never_fits(st, x):
    """vLLM's AllocStatus.NEVER: x tokens' blocks exceed what an empty GPU could admit.

    This and the other per-request helpers below are written without a branch on the state
    (``&``, ``|``, unconditional updates that change nothing with the memory off): a branch
    keeps the atomic reference-count pair on ``st`` that numba otherwise prunes, paid on every
    call, inlined or not (see :mod:`stability.sim.structs`).
    """
    return (st.kv_on == 1) & (st.kv_total - blocks(st, x) < st.kv_wm)


@njit(cache=True)
def can_allocate(st, x):
    """Admission check for a prompt of x tokens: free - blocks(x) >= watermark."""
    return (st.kv_on == 0) | (st.kv_free - blocks(st, x) >= st.kv_wm)


@njit(cache=True)
def allocate(st, j, x):
    """Take the blocks of request j's x tokens at admission (the whole prompt at once); none with
    the memory off (``kv_on`` 0)."""
    b = blocks(st, x) * st.kv_on
    st.blk[j] = b
    st.kv_free -= b
    st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)


@njit(cache=True)
def release(st, j):
    """Free every block of request j (completion or preemption); it holds none with the memory
    off."""
    st.kv_free += st.blk[j]
    st.blk[j] = 0


@njit(cache=True)
def free_blocks(st, j, computed, final):
    """Free every block of request j, whose KV covers ``computed`` tokens, as it finishes
    (``final``) or is preempted: into the prefix cache when it is on
    (:func:`stability.sim.prefix_cache.pc_release`), else as :func:`release`."""
    if st.pc_on:
        pc_release(st, j, computed, final)
    else:
        release(st, j)


@njit(cache=True)
def can_append(st, j, p):
    """Whether request j may run DI(R, p): Sarathi-Serve asks free > 0 for every decode, vLLM v0
    only that a block be free when position p needs a new one."""
    if st.kv_on == 0:
        return True
    if st.kv_rule == SARATHI:
        return st.kv_free > 0
    return blocks(st, p) <= st.blk[j] or st.kv_free > 0


@njit(cache=True)
def append(st, j, p):
    """Give request j the block position p needs, if it crosses a block boundary."""
    if st.kv_on:
        b = blocks(st, p)
        if b > st.blk[j]:
            st.kv_free -= b - st.blk[j]
            st.blk[j] = b
            st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)


@njit(cache=True)
def reject(st, j, code):
    """Request j will never be served: record why (it never finishes and is not lost)."""
    st.rej[j] = code
    st.n_rej += 1


@njit(cache=True)
def _growth(st, na, k, first, last):
    """Blocks the decode entries first..last-1 (of the first ``na``) take over k batches."""
    g = 0
    for q in range(first, min(last, na)):
        g += blocks(st, st.d_pos[q] + k - 1) - st.blk[st.d_id[q]]
    return g


@njit(cache=True)
def slack_below(st, m):
    """Fill ``st.kv_below[b] = #{q < m : o_q < b}`` (b = 0..B) with the slack ``o_q = B blk_q -
    (p_q - 1)`` of the first m decode entries: the positions left in their blocks. Returns False
    when some slack lies outside [0, B) (never after the engine's own allocations; then
    :func:`growth` counts entry by entry)."""
    bs = st.kv_bs
    below = st.kv_below
    below[:] = 0
    for q in range(m):
        o = st.blk[st.d_id[q]] * bs - (st.d_pos[q] - 1)
        if o < 0 or o >= bs:
            return False
        below[o + 1] += 1
    for b in range(1, bs + 1):
        below[b] += below[b - 1]
    return True


@njit(cache=True)
def growth(st, counted, m, k):
    """Blocks the first m decode entries take over k >= 0 batches, in O(1) from their slack counts
    when ``counted`` (:func:`slack_below`): an entry with slack o takes ceil((k - o) / B) >= 0
    blocks, i.e. with k = a B + b, a blocks plus one when o < b."""
    if not counted:
        return _growth(st, m, k, 0, m)
    return m * (k // st.kv_bs) + st.kv_below[k % st.kv_bs]


@njit(cache=True)
def min_remaining(st, na, k_hi):
    """min(k_hi, decodes left of each of the first ``na`` entries): a run ends at a completion."""
    for q in range(na):
        k_hi = min(k_hi, st.d_rem[q])
    return k_hi


@njit(cache=True)
def ample_blocks(st, na, k):
    """Whether the free blocks exceed what the first ``na`` decode entries can take in k batches:
    when every entry's blocks cover its stored tokens (``B blk >= p - 1``), k batches take at
    most ``ceil(k / B) <= k // B + 1`` blocks each."""
    for q in range(na):
        if st.blk[st.d_id[q]] * st.kv_bs < st.d_pos[q] - 1:
            return False
    return na * (k // st.kv_bs + 1) < st.kv_free


@njit(cache=True)
def clean_decode_batches(st, na, k_hi):
    """Largest k <= k_hi such that k decode-only batches over the first ``na`` decode entries
    trigger no preemption, so they can run as one event.

    With F free blocks and G(k) the blocks the entries take in batches 0..k-1, batch m preempts
    under vLLM's rule iff G(m + 1) > F (some decode needs a block and none is left), and under
    Sarathi-Serve's iff F <= G'(m + 1) + g_last(m), where G' counts all entries but the last and
    g_last the last one (some decode finds free = 0 before its turn). Both sides grow with m, so
    the first preempting batch is found by binary search, unless the free blocks exceed any
    growth of the run (the usual case), which two passes settle.
    """
    if st.kv_on == 0:
        return k_hi
    k_hi = min_remaining(st, na, k_hi)  # the run ends at the first completion anyway
    if ample_blocks(st, na, k_hi):
        return k_hi
    free = st.kv_free
    m = na if st.kv_rule == VLLM else na - 1  # Sarathi-Serve: the last entry counts one batch less
    counted = slack_below(st, m)
    lo, hi = 0, k_hi  # invariant: k = lo is clean
    while lo < hi:
        k = (lo + hi + 1) // 2
        if st.kv_rule == VLLM:
            ok = growth(st, counted, m, k) <= free
        else:
            ok = growth(st, counted, m, k) + _growth(st, na, k - 1, na - 1, na) < free
        if ok:
            lo = k
        else:
            hi = k - 1
    return lo
