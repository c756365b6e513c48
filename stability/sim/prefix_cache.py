"""Prefix caching of KV blocks, as vLLM v1's block pool does it (compiled, over the engine state).

A full block of ``B`` tokens (the KV block size) has an identity, vLLM's block hash: the hash of
its tokens chained to the previous block's hash (``hash_block_tokens`` of
``vllm/v1/core/kv_cache_utils.py``). Token ids are not simulated, so the identity comes from the
workload's prefix relation: a request j whose first ``s_j`` prompt tokens are those of an earlier
request ``parent_j`` shares that request's first ``floor(s_j / B)`` full blocks, and every other
full block of j (its prompt past the shared part, and its outputs) is its own. The identity of
block b of request j is ``(r, b)``, where r is reached from j by following the parent while
``b < floor(s / B)``; it is stored as ``r << 32 | b``.

The cache follows ``BlockPool`` of vllm-project/vllm ``vllm/v1/core/block_pool.py`` (read at
c59cb7941357443da7c5eef75cfa8697d683d228) and ``KVCacheManager`` of
``vllm/v1/core/kv_cache_manager.py`` (read at ace980e6de0540f49b0c63248437a1a7807590c1):

* the free-block queue holds every free block, least recently freed first; a block taken for new
  tokens is taken from its head, and if it is cached its identity leaves the cache
  (``get_new_blocks``, ``_maybe_evict_cached_block``); the free count is the queue's length;
* a request's full blocks are cached as they fill: when their tokens are scheduled
  (``allocate_slots`` then ``cache_blocks`` up to the request's known tokens);
* at admission (``get_computed_blocks``, ``find_longest_cache_hit``) a request whose computed tokens
  are 0 takes the longest run of cached blocks from its first, at most ``(tokens - 1) // B`` of
  them (the last token is always computed, for its logits); its computed tokens start there, the
  hit blocks are referenced (``touch``: a free one leaves the queue, so it counts as a block to
  allocate), and only the rest is allocated;
* freeing a request (completion or preemption, ``KVCacheManager.free``) drops its reference to
  each block, last block first, and appends every block no longer referenced to the queue's tail,
  so its last blocks are evicted first.

Where llmq simplifies (the simulator's choices):

* an identity is cached once: vLLM keeps a second copy under the same hash when a request fills
  a block whose identity is cached already (computed twice, or after a break in the chain), and a
  later hit takes the first copy; here such a block is a plain block (its memory counts the same,
  and it caches nothing when freed);
* a block filled by a decode is registered when its request frees it (only that request's own
  later recompute can hit it; vLLM registers it when the step is scheduled);
* requests finishing in the same step free their blocks decodes first, then those finishing with
  their prefill, each in arrival order (vLLM: in the step's scheduled order).

Lazy eviction: taking blocks only lowers ``kv_free``; the queue's head is popped (evicting cached
identities) by :func:`sync` before anything reads or changes the cache. That is the eager order:
every taking of blocks was legal (at most the free blocks), so popping its blocks later takes the
same items from the head, and every hit syncs first.

Lazy registration: a *simple* request (no prefix parent, parent of none, never preempted) has
identities nobody else shares and no earlier copy of them, so only its own recompute after a
preemption could hit them. Its blocks are registered only when a preemption frees them (none of
its identities can be cached then, so the outcome is the eager one), and when it finishes they
are freed as blocks with no identity: nothing can look its identities up any more, and a cached
free block is taken from the queue exactly as one with no identity. A simple request thus costs
O(1) at admission and completion, and runs of blocks with no identity are one queue item.

References
----------
vllm-project/vllm ``vllm/v1/core/block_pool.py`` @ c59cb79, ``vllm/v1/core/kv_cache_manager.py``
@ ace980e; Kwon et al. (2023), vLLM / PagedAttention.
"""

from __future__ import annotations

import numpy as np
from numba import njit

SHIFT = 32  # identity = root request << SHIFT | block index


@njit(cache=True)
def pc_setup(st, on):
    """Size the cache for the state's KV blocks and requests and switch it on (once; only with the
    KV memory modelled)."""
    if st.pc_on or not on or not st.kv_on:
        return
    m = st.arr.size
    n = st.kv_total
    st.pc_on = 1
    if st.pfx_par.size < m:
        st.pfx_par = np.full(m, -1, dtype=np.int64)
        st.pfx_len = np.zeros(m, dtype=np.int64)
    st.pfx_kid = np.zeros(m, dtype=np.int64)
    for j in range(m):
        if st.pfx_par[j] >= 0:
            st.pfx_kid[st.pfx_par[j]] = 1
    st.pc_hit = np.zeros(m, dtype=np.int64)
    st.pc_done = np.zeros(m, dtype=np.int64)
    st.e_key = np.zeros(n, dtype=np.int64)
    st.e_ref = np.zeros(n, dtype=np.int64)
    st.e_seq = np.full(n, -1, dtype=np.int64)
    st.e_owner = np.full(n, -1, dtype=np.int64)
    st.e_life = np.zeros(n, dtype=np.int64)
    st.e_free = np.arange(n - 1, -1, -1).astype(np.int64)
    st.e_nfree = n
    st.fq = np.zeros(2 * n + 4, dtype=np.int64)
    st.fq[0] = -n  # every block free, none with an identity
    st.fq_head = 0
    st.fq_tail = 1
    st.fq_live = n


@njit(cache=True)
def set_prefixes(st, parent, shared):
    """Each request's prefix parent (its index in this state, -1: none) and shared prompt tokens."""
    m = st.arr.size
    st.pfx_par = np.full(m, -1, dtype=np.int64)
    st.pfx_len = np.zeros(m, dtype=np.int64)
    st.pfx_par[: parent.size] = parent
    st.pfx_len[: shared.size] = shared


@njit(cache=True)
def ident(st, j, b):
    """Identity of request j's full block b: the request its tokens come from, and b."""
    r = j
    while st.pfx_par[r] >= 0 and b < st.pfx_len[r] // st.kv_bs:
        r = st.pfx_par[r]
    return (r << SHIFT) | b


@njit(cache=True)
def simple(st, j):
    """Request j has no prefix parent, is the parent of none and was never preempted (the module
    docstring's lazy registration)."""
    return (st.pfx_par[j] < 0) & (st.pfx_kid[j] == 0) & (st.npre[j] == 0)


@njit(cache=True)
def _compact(st):
    """Rewrite the queue without its stale items (entries taken out by a hit), in order, merging
    neighbouring runs of blocks with no identity."""
    cap = st.fq.size
    out = np.empty(cap, dtype=np.int64)
    w = 0
    for pos in range(st.fq_head, st.fq_tail):
        s = st.fq[pos % cap]
        if s < 0:
            if w > 0 and out[w - 1] < 0:
                out[w - 1] += s
            else:
                out[w] = s
                w += 1
        elif st.e_seq[s] == pos:
            out[w] = s
            st.e_seq[s] = w
            w += 1
    st.fq[:w] = out[:w]
    st.fq_head = 0
    st.fq_tail = w


@njit(cache=True)
def _push(st, s):
    """Append entry slot s (a freed cached block) to the queue's tail."""
    if st.fq_tail - st.fq_head == st.fq.size:
        _compact(st)
    st.e_seq[s] = st.fq_tail
    st.fq[st.fq_tail % st.fq.size] = s
    st.fq_tail += 1
    st.fq_live += 1


@njit(cache=True)
def _push_plain(st, k):
    """Append k freed blocks with no identity to the queue's tail (one run with the tail's own)."""
    if k <= 0:
        return
    cap = st.fq.size
    last = (st.fq_tail - 1) % cap
    if st.fq_tail > st.fq_head and st.fq[last] < 0:
        st.fq[last] -= k
    else:
        if st.fq_tail - st.fq_head == cap:
            _compact(st)
        st.fq[st.fq_tail % cap] = -k
        st.fq_tail += 1
    st.fq_live += k


@njit(cache=True)
def sync(st):
    """Pop from the queue's head the blocks taken since the last sync, evicting their identities."""
    cap = st.fq.size
    need = st.fq_live - st.kv_free
    while need > 0:
        pos = st.fq_head
        s = st.fq[pos % cap]
        if s < 0:
            take = min(-s, need)
            need -= take
            st.fq_live -= take
            if take == -s:
                st.fq_head = pos + 1
            else:
                st.fq[pos % cap] = s + take
            continue
        st.fq_head = pos + 1
        if st.e_seq[s] == pos:
            del st.pc_map[st.e_key[s]]
            st.e_seq[s] = -1
            st.e_owner[s] = -1
            st.e_free[st.e_nfree] = s
            st.e_nfree += 1
            st.fq_live -= 1
            need -= 1


@njit(cache=True)
def lookup(st, j):
    """``get_computed_blocks`` for request j (no computed tokens): (cached blocks from its first,
    at most ``(tokens - 1) // B``; of those, how many are free and so must be taken from the queue)."""
    if simple(st, j):
        return 0, 0
    sync(st)
    hit = 0
    free = 0
    for b in range((st.pl[j] - 1) // st.kv_bs):
        key = ident(st, j, b)
        if key not in st.pc_map:
            break
        s = st.pc_map[key]
        hit += 1
        free += st.e_ref[s] == 0
    return hit, free


@njit(cache=True)
def take_hit(st, j, hit):
    """Request j references its first ``hit`` blocks, cached (``touch``): a free one leaves the queue."""
    for b in range(hit):
        s = st.pc_map[ident(st, j, b)]
        if st.e_ref[s] == 0:
            st.e_seq[s] = -1  # its queue item is stale from now on
            st.fq_live -= 1
            st.kv_free -= 1
        st.e_ref[s] += 1
    st.pc_hit[j] = hit
    st.pc_done[j] = hit
    st.blk[j] = hit
    st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)


@njit(cache=True)
def _register(st, j, tokens):
    """Cache request j's full blocks of its first ``tokens`` tokens not handled yet: each whose
    identity is not cached becomes a cached block j holds; one whose identity is cached stays plain."""
    upto = tokens // st.kv_bs
    if st.pc_done[j] >= upto:
        return
    sync(st)
    for b in range(st.pc_done[j], upto):
        key = ident(st, j, b)
        if key in st.pc_map:
            continue
        st.e_nfree -= 1
        s = st.e_free[st.e_nfree]
        st.pc_map[key] = s
        st.e_key[s] = key
        st.e_ref[s] = 1
        st.e_seq[s] = -1
        st.e_owner[s] = j
        st.e_life[s] = st.npre[j]
    st.pc_done[j] = upto


@njit(cache=True)
def register(st, j, tokens):
    """Cache request j's scheduled full blocks of its first ``tokens`` tokens (a simple request's
    wait until a preemption frees them)."""
    if not simple(st, j):
        _register(st, j, tokens)


@njit(cache=True)
def any_cached(st, j, tokens):
    """Whether some full block of request j's first ``tokens`` tokens not handled yet is cached."""
    if simple(st, j):
        return False
    sync(st)
    for b in range(st.pc_done[j], tokens // st.kv_bs):
        if ident(st, j, b) in st.pc_map:
            return True
    return False


@njit(cache=True)
def pc_release(st, j, computed, final):
    """Free request j's blocks (``KVCacheManager.free``), its KV covering ``computed`` tokens, as
    it finishes (``final``) or is preempted: its full blocks are cached first, then each block,
    last first, loses j's reference and joins the queue's tail once nobody references it. A
    simple request that finishes frees its blocks as blocks with no identity (module docstring)."""
    if final and simple(st, j):
        _push_plain(st, st.blk[j])
        st.kv_free += st.blk[j]
        st.blk[j] = 0
        return
    _register(st, j, computed)
    sync(st)
    freed = 0
    hit = st.pc_hit[j]
    done = st.pc_done[j]
    life = st.npre[j]
    for b in range(st.blk[j] - 1, -1, -1):
        s = -1
        key = ident(st, j, b)
        if b < done and key in st.pc_map:
            t = st.pc_map[key]
            if b < hit or (st.e_owner[t] == j and st.e_life[t] == life):
                s = t
        if s < 0:
            _push_plain(st, 1)
            freed += 1
        else:
            st.e_ref[s] -= 1
            if st.e_ref[s] == 0:
                _push(st, s)
                freed += 1
    st.kv_free += freed
    st.blk[j] = 0
    st.pc_hit[j] = 0
    st.pc_done[j] = 0
