"""Mixed batches: prefill chunks of several requests and decodes together (Section 3.1, Eq. 7).

Schedulers that chunk prompts and mix them with decodes (Sarathi-Serve, Algorithm 4; vLLM's
prefill-only batches of whole prompts too) keep, besides the engine's decode set ``D``
(``d_id, d_pos, d_rem``), the list ``P`` of *admitted* requests still in their prefill phase
(``p_id``, sorted by arrival index) with each request's prefill target ``pl``, progress ``pg`` and
the decodes ``dr`` it has left once the prefill completes. A batch is built by choosing how many
decode entries run (the first ``na``, one DI each) and adding chunks ``PI(R, pg + 1, c)`` with
:func:`add_chunk`; :func:`run_mixed` runs it: its duration is Eq. 7 of exactly its contents,

    T_B = T_Lin(tau) + tau / mu_nLin + N sum_D T^{D,SA}(p) + sum_P T^{P,SA}(i, c)  (+ overhead),

computed in O(batch size); with ``mixed_decode_eta`` (:mod:`theory.terms`) the decodes of a batch
with a chunk take ``T^{D,SA}_mix`` from the second prefix table ``Sm``. While one admitted prompt
is long enough to fill the budget left by the decodes batch after batch, those batches differ only
in positions: :func:`chunk_run` runs them as one event (their decode attention from the prefix
sums ``Sm``, as a decode run takes it from ``S``). A request whose last prompt chunk runs emits a
token: its first, or, after a preemption, the token its interrupted decode would have produced.

Preemption is by recompute (Sarathi-Serve ``base_scheduler._preempt``, vLLM v0
``_preempt_by_recompute``): the victim's blocks are freed, it goes to the front of the waiting
queue, and its new prefill target is its prompt plus every token generated so far (``d_pos``, the
position of its next decode), so the recompute prefill emits the next token. The victim is the
newest request (largest arrival index) among those the current pass has not reached yet, or the
request itself if there is none (``sarathi_scheduler._schedule`` phase 1, vLLM
``_schedule_running``).

Waiting order (``spf``): FCFS (0; the engine's ring buffer, preempted requests pushed to its
front), shortest prefill first (1), a heap keyed by (prefill target, arrival index) over the
arrived requests, or shortest prefill first within classes taken in their index order (2; SLAI's
paying-users-first order, Appendix F.2), keyed by (class, prefill target, arrival index).

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1, Eq. 7; microsoft/sarathi-serve @ 96f9911
``sarathi/core/scheduler/sarathi_scheduler.py``; vllm-project/vllm v0 ``vllm/core/scheduler.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from stability.sim.engine import (
    advance_decodes,
    count_batch,
    log_batch,
    log_item,
    move_decode,
    pop_waiting,
    push_waiting_front,
    record_gap,
    see_arrivals,
)
from stability.sim.kernels import ceil_udiv, lin_waste, psa_waste, t_fixed, t_psa
from stability.sim.memory import (
    REJ_KV_NEVER,
    REJ_PROMPT_LIMIT,
    VLLM,
    allocate,
    append,
    can_allocate,
    can_append,
    clean_decode_batches,
    free_blocks,
    never_fits,
    reject,
)

KEY_SHIFT = 32  # SPF heap key: cls << 58 | pl << 32 | j (the class only under priority)
CLS_SHIFT = 58  # room for prefill targets below 2**26 tokens and 32 classes
PRIORITY = 2  # the ``spf`` value of shortest-prefill-first within classes by priority


# --- waiting queue: FCFS ring or shortest-prefill-first heap -------------------------------------


@njit(cache=True)
def mixed_arrays(st):
    """Size the mixed-batch arrays of a state (empty until a mixed-batch loop first runs; every
    such loop calls this on entry): prefill targets L^P and decodes left L^D of the requests
    loaded so far, prefill progress, the prefill set, the batch being built and the waiting heap."""
    m = st.arr.size
    if st.pl.size < m:
        st.pl = st.lp.copy()
        st.dr = st.ld.copy()
        st.pg = np.zeros(m, dtype=np.int64)
        st.p_id = np.zeros(m, dtype=np.int64)
        st.bp_j = np.zeros(m, dtype=np.int64)
        st.bp_c = np.zeros(m, dtype=np.int64)
        st.hq = np.zeros(m + 1, dtype=np.int64)


@njit(cache=True)
def _heap_push(st, key):
    h = st.hq
    q = st.hq_len
    st.hq_len += 1
    while q > 0:
        parent = (q - 1) >> 1  # (q - 1) // 2 for q >= 1, without a division
        if h[parent] <= key:
            break
        h[q] = h[parent]
        q = parent
    h[q] = key


@njit(cache=True, inline="always")
def _heap_pop(st):
    h = st.hq
    top = h[0]
    st.hq_len -= 1
    n = st.hq_len
    key = h[n]
    q = 0
    while True:
        child = 2 * q + 1
        if child >= n:
            break
        if child + 1 < n and h[child + 1] < h[child]:
            child += 1
        if h[child] >= key:
            break
        h[q] = h[child]
        q = child
    if n > 0:
        h[q] = key
    return top


@njit(cache=True)
def _key(st, j, spf):
    """Heap key of request j: (prefill target, arrival index), after its class under priority
    (branch-free: a branch reading the state keeps a reference-count pair on it per call)."""
    return (st.pl[j] << KEY_SHIFT) | j | ((st.cls[j] << CLS_SHIFT) * (spf == PRIORITY))


@njit(cache=True)
def w_refresh(st, spf):
    """Arrivals join the waiting queue (and, under SPF, its heap)."""
    see_arrivals(st)
    if spf:
        while st.wq_len > 0:
            j = pop_waiting(st)
            _heap_push(st, _key(st, j, spf))


@njit(cache=True)
def w_len(st, spf):
    return st.hq_len if spf else st.wq_len


@njit(cache=True)
def w_head(st, spf):
    """The request admission looks at next: FCFS head, or the shortest prefill (ties: arrival)."""
    if spf:
        return st.hq[0] & ((1 << KEY_SHIFT) - 1)
    return st.wq[st.wq_head]


@njit(cache=True)
def w_pop(st, spf):
    if spf:
        return _heap_pop(st) & ((1 << KEY_SHIFT) - 1)
    return pop_waiting(st)


@njit(cache=True)
def w_push_front(st, j, spf):
    """A preempted request rejoins the waiting queue at its front (SPF: by its new target)."""
    if spf:
        _heap_push(st, _key(st, j, spf))
    else:
        push_waiting_front(st, j)


# --- admitted requests: the prefill list P and the decode set D, both sorted by arrival -----------


@njit(cache=True, inline="always")
def admit(st, j):
    """Admit request j: take its whole prompt's blocks and put it in P (sorted by arrival)."""
    allocate(st, j, st.pl[j])
    q = st.np
    while q > 0 and st.p_id[q - 1] > j:
        st.p_id[q] = st.p_id[q - 1]
        q -= 1
    st.p_id[q] = j
    st.np += 1


@njit(cache=True)
def add_chunk(st, j, c):
    """Put PI(R_j, pg_j + 1, c) in the batch being built."""
    b = st.nbp
    st.bp_j[b] = j
    st.bp_c[b] = c
    st.nbp = b + 1


@njit(cache=True)
def admission_would_act(st, spf, limit, max_seqs):
    """Whether :func:`admit_waiting` would act on the waiting head now, budget permitting: admit
    it (its blocks can be allocated and fewer than ``max_seqs`` requests hold memory) or reject
    it. While it would not, only a completion can change that (memory is only taken meanwhile),
    so decode-only batches may run as one event."""
    if w_len(st, spf) == 0:
        return False
    j = w_head(st, spf)
    if st.pl[j] > limit or never_fits(st, st.pl[j]):
        return True
    return can_allocate(st, st.pl[j]) and st.nd + st.np < max_seqs


@njit(cache=True)
def admit_waiting(st, spf, limit, max_seqs, budget, tokens, partial, budget_first):
    """Admit new prefills from the waiting queue into the batch being built; returns the batch's
    tokens after them (``tokens`` before).

    Looking at the waiting head (FCFS, or the shortest prefill under ``spf``), in order:

    * a prompt (with recomputed tokens) longer than ``limit`` is rejected (``REJ_PROMPT_LIMIT``),
      one whose blocks exceed an empty GPU's (vLLM's ``AllocStatus.NEVER``) too
      (``REJ_KV_NEVER``), and the next head is looked at;
    * admission stops, head-of-line blocking, when the whole prompt's blocks cannot be allocated
      (``can_allocate``: free - blocks >= watermark) or ``max_seqs`` requests hold memory
      (decoding or admitted);
    * its chunk is ``min(prompt, budget - tokens)`` if ``partial`` (Sarathi-Serve, SLAI: the
      last admission of a batch may be cut), admission stopping when that is 0; else the whole
      prompt, admission stopping when it does not fit in ``budget - tokens`` (vLLM);
    * the head is admitted (its whole prompt's blocks taken, :func:`admit`) and its chunk added.

    ``tokens`` is the budget already spent: Sarathi-Serve and SLAI count the batch's decodes and
    chunks, vLLM's prefill-only batch starts at 0. ``budget_first`` (SLAI) stops before looking
    at the head once the budget is spent; otherwise (Sarathi-Serve, vLLM) over-long and never
    fitting heads are still rejected then.

    References
    ----------
    microsoft/sarathi-serve @ 96f9911 ``sarathi/core/scheduler/sarathi_scheduler.py``
    (``_schedule``, phase 2); vllm-project/vllm v0 ``vllm/core/scheduler.py``
    (``_schedule_prefills``); agrimUT/SLAI @ 5098a7a ``sarathi/core/scheduler/slai_scheduler.py``;
    Bari, Hegde, de Veciana (2025), Section 6 (step 3 of SLAI's batch).
    """
    while w_len(st, spf) > 0:
        if budget_first and tokens >= budget:
            break
        j = w_head(st, spf)
        if st.pl[j] > limit:
            reject(st, w_pop(st, spf), REJ_PROMPT_LIMIT)
            continue
        if never_fits(st, st.pl[j]):
            reject(st, w_pop(st, spf), REJ_KV_NEVER)
            continue
        if not can_allocate(st, st.pl[j]) or st.nd + st.np >= max_seqs:
            break
        if partial:
            c = min(st.pl[j], budget - tokens)
            if c <= 0:
                break
        else:
            c = st.pl[j]
            if tokens + c > budget:
                break
        admit(st, w_pop(st, spf))
        add_chunk(st, j, c)
        tokens += c
    return tokens


@njit(cache=True)
def _insert_decode(st, j, pos, rem):
    q = st.nd
    while q > 0 and st.d_id[q - 1] > j:
        move_decode(st, q, q - 1)
        q -= 1
    st.d_id[q] = j
    st.d_pos[q] = pos
    st.d_rem[q] = rem
    st.nd += 1


@njit(cache=True)
def _remove_decode(st, q):
    for k in range(q, st.nd - 1):
        move_decode(st, k, k + 1)
    st.nd -= 1


@njit(cache=True)
def preempt_decode(st, q, spf):
    """Preempt decode entry q by recompute: its next prefill covers all tokens up to d_pos."""
    j = st.d_id[q]
    free_blocks(st, j, st.d_pos[q] - 1, False)
    st.n_lost += st.d_pos[q] - 1
    st.pl[j] = st.d_pos[q]
    st.pg[j] = 0
    st.dr[j] = st.d_rem[q] - 1
    st.npre[j] += 1
    st.n_preempt += 1
    _remove_decode(st, q)
    w_push_front(st, j, spf)


@njit(cache=True)
def preempt_prefill(st, q, spf):
    """Preempt P's entry q by recompute: the chunks it had prefilled are lost."""
    j = st.p_id[q]
    free_blocks(st, j, st.pg[j], False)
    st.n_lost += st.pg[j]
    st.pg[j] = 0
    st.npre[j] += 1
    st.n_preempt += 1
    for k in range(q, st.np - 1):
        st.p_id[k] = st.p_id[k + 1]
    st.np -= 1
    w_push_front(st, j, spf)


@njit(cache=True)
def reserve_decodes(st, spf):
    """Give every decode entry, oldest first, the KV slot of its next DI, preempting the newest
    requests not reached yet (decodes after it, prefills that arrived after it) while the slot
    cannot be had, or the entry itself when none is left (Sarathi-Serve phase 1, vLLM v0
    ``_schedule_running``). Afterwards every remaining decode entry runs in the batch."""
    if st.kv_on == 0:
        return
    q = 0
    while q < st.nd:
        j = st.d_id[q]
        p = st.d_pos[q]
        b = ceil_udiv(p, st.kv_bs)
        if st.kv_free > 0 or (st.kv_rule == VLLM and b <= st.blk[j]):
            # can_append holds (the usual case), tested here: a compiled helper reading the
            # state's arrays across a branch pays an atomic reference count per call, which
            # dominated the per-decode cost; append only at a block boundary
            if b > st.blk[j]:
                append(st, j, p)
            q += 1
            continue
        kept = True
        while not can_append(st, j, p):
            jd = st.d_id[st.nd - 1] if st.nd - 1 > q else -1
            jp = st.p_id[st.np - 1] if st.np > 0 and st.p_id[st.np - 1] > j else -1
            if jd < 0 and jp < 0:
                preempt_decode(st, q, spf)
                kept = False
                break
            if jd > jp:
                preempt_decode(st, st.nd - 1, spf)
            else:
                preempt_prefill(st, st.np - 1, spf)
        if kept:
            append(st, j, p)
            q += 1


# --- running a batch ---------------------------------------------------------------------------


@njit(cache=True)
def _prefill_complete(st, j, t):
    """Request j's last prompt chunk ended at t: it emits a token; it finishes if that was its
    last, else it enters D at position pl + 1. Returns 1 if it finished."""
    if math.isnan(st.t_first[j]):
        st.t_first[j] = t
        st.last_emit[j] = t
    else:  # a recompute prefill: the token its preempted decode would have produced
        st.n_recomp += 1
        if st.detail:
            record_gap(st, j, t)
    if st.dr[j] == 0:
        st.t_finish[j] = t
        free_blocks(st, j, st.pl[j], True)
        return 1
    _insert_decode(st, j, st.pl[j] + 1, st.dr[j])
    return 0


@njit(cache=True)
def run_mixed(st, ct, na):
    """Run the batch built so far: one DI for each of the first ``na`` decode entries (their KV
    slots already reserved) and the chunks added with :func:`add_chunk`. Its duration is Eq. 7 of
    exactly these iterations. The caller has checked the batch log has room (``log_has_room``).
    Returns how many requests finished."""
    tau, n_pre, att, psa, wasted = mixed_parts(st, ct, na)
    dur = t_fixed(ct, tau) + ct.N * att + psa
    return apply_mixed(st, na, tau, n_pre, dur, wasted + lin_waste(ct, tau))


@njit(cache=True)
def mixed_parts(st, ct, na):
    """The parts of Eq. 7 of the batch built so far (as :func:`run_mixed` runs it), without running
    it: ``(tau, prefill tokens, decode attention sum, prefill attention seconds, prefill attention
    lost to tiling)``; the decode attention sum is per layer (times ``N`` in Eq. 7)."""
    n_pre = 0
    psa = 0.0
    wasted = 0.0
    off = ct.m_off if st.nbp > 0 else 0  # beside a chunk: the mixed-batch sums Sm
    att = 0.0
    for q in range(na):
        p = st.d_pos[q] + off
        att += ct.S2[p] - ct.S2[p - 1]
    for b in range(st.nbp):
        j = st.bp_j[b]
        c = st.bp_c[b]
        i = st.pg[j] + 1
        a = t_psa(ct, i, c)
        psa += a
        wasted += psa_waste(ct, i, c, a)
        n_pre += c
    return na + n_pre, n_pre, att, psa, wasted


@njit(cache=True)
def apply_mixed(st, na, tau, n_pre, dur, wasted):
    """Run the batch built so far for ``dur`` seconds (its parts from :func:`mixed_parts`, its time
    lost to tiling ``wasted``): log and count it, advance the clock, the decodes and the chunks.
    Returns how many requests finished."""
    now = st.clock
    if st.log_on:
        for q in range(na):
            log_item(st, st.d_id[q], st.d_pos[q], 0)
        for b in range(st.nbp):
            log_item(st, st.bp_j[b], st.pg[st.bp_j[b]] + 1, st.bp_c[b])
        log_batch(st, now, dur, tau, na, st.nbp, wasted)
    count_batch(st, tau, na, n_pre, dur, wasted)
    st.n_event += 1
    t = now + dur
    st.clock = t
    # decodes: advance, finish, keep the order of the rest (moved only behind a completion)
    done = 0
    w = 0
    for q in range(na):
        j = st.d_id[q]
        st.d_pos[q] += 1
        st.d_rem[q] -= 1
        if st.detail:
            record_gap(st, j, t)
        if st.d_rem[q] == 0:
            st.t_finish[j] = t
            free_blocks(st, j, st.d_pos[q] - 1, True)
            done += 1
            continue
        if w < q:
            move_decode(st, w, q)
        w += 1
    if done:
        for q in range(na, st.nd):
            move_decode(st, w, q)
            w += 1
        st.nd = w
    # prefill chunks: progress; completed prompts leave P
    for b in range(st.nbp):
        j = st.bp_j[b]
        if math.isnan(st.t_start[j]):
            st.t_start[j] = now
        st.pg[j] += st.bp_c[b]
        if st.pg[j] == st.pl[j]:
            done += _prefill_complete(st, j, t)
    st.nbp = 0
    w = 0
    for q in range(st.np):
        j = st.p_id[q]
        if st.pg[j] < st.pl[j]:
            st.p_id[w] = j
            w += 1
    st.np = w
    st.n_done += done
    st.last_done = done
    return done


# --- runs of identical mixed batches -----------------------------------------------------------


@njit(cache=True)
def _run_att(st, ct, k):
    """N sum_D (Sm(p + k - 1) - Sm(p - 1)): the decode attention of k batches over every entry, each
    beside a prefill chunk (``Sm``, :mod:`stability.sim.kernels`)."""
    att = 0.0
    off = ct.m_off
    for q in range(st.nd):
        p = st.d_pos[q] + off
        att += ct.S2[p + k - 1] - ct.S2[p - 1]
    return ct.N * att


@njit(cache=True)
def _run_psa(ct, i0, c, k):
    """Prefill attention of the chunks PI(R, i0 + m c, c), m < k."""
    psa = 0.0
    for m in range(k):
        psa += t_psa(ct, i0 + m * c, c)
    return psa


@njit(cache=True)
def _decode_att(st, ct, m):
    """N sum_D T^{D,SA}_mix of the m-th batch (from 0) of a run over every decode entry (``Sm``)."""
    att = 0.0
    off = ct.m_off + m
    for q in range(st.nd):
        p = st.d_pos[q] + off
        att += ct.S2[p] - ct.S2[p - 1]
    return ct.N * att


@njit(cache=True)
def chunk_run(st, ct, j, c, t_stop):
    """Run, as one event, the batches that each hold one DI for every decode entry and the next
    chunk ``PI(R_j, pg_j + 1, c)`` of request j, back to back: while j's prompt has ``c`` tokens
    left for every batch (its last chunk may end it), no decode completes before the last batch,
    and no batch would preempt (:func:`stability.sim.memory.clean_decode_batches`); cut at the
    first batch ending at or after ``t_stop``. A scheduler calls it when its next batches are
    exactly these and nothing could join them (the budget is spent by the decodes and the chunk,
    so the waiting queue only changes by arrivals, which are seen after the run). Fast mode only
    (no TBT gap or batch-log row is recorded). Returns how many requests finished, or -1 when
    fewer than two such batches would run (the caller then builds the batch itself).

    Batch m lasts ``T_fixed(|D| + c) + N sum_q T^{D,SA}_mix(p_q + m) + T^{P,SA}(pg + 1 + m c, c)``
    (Eq. 7), so the run costs O(|D| + k) instead of O(k |D|).
    """
    nd = st.nd
    k = (st.pl[j] - st.pg[j]) // c
    for q in range(nd):
        k = min(k, st.d_rem[q])
    if k >= 2 and nd > 0:
        k = clean_decode_batches(st, nd, k)
    if k < 2:
        return -1
    now = st.clock
    tau = nd + c
    fixed = t_fixed(ct, tau)
    i0 = st.pg[j] + 1
    lw = lin_waste(ct, tau)
    att = _run_att(st, ct, k)
    horizon = t_stop - now
    if horizon < math.inf and k * fixed + att + _run_psa(ct, i0, c, k) >= horizon:
        lo, hi = 1, k  # the first batch ending at or after t_stop
        while lo < hi:
            mid = (lo + hi) // 2
            if mid * fixed + _run_att(st, ct, mid) + _run_psa(ct, i0, c, mid) >= horizon:
                hi = mid
            else:
                lo = mid + 1
        k = lo
        att = _run_att(st, ct, k)
    # one pass over the chunks: their attention, the time lost to tiling, and how many batches
    # are not optimal (waste above 1e-12 of the batch's time, which needs the batch's own decode
    # attention only when the bounds 0 <= att_m <= att do not decide)
    psa = 0.0
    wasted = 0.0
    not_opt = 0
    for m in range(k):
        i = i0 + m * c
        a = t_psa(ct, i, c)
        psa += a
        w = lw + psa_waste(ct, i, c, a)
        wasted += w
        if w > 1e-12 * (fixed + a + att):
            not_opt += 1
        elif w > 1e-12 * (fixed + a) and w > 1e-12 * (fixed + _decode_att(st, ct, m) + a):
            not_opt += 1
    total = k * fixed + att + psa
    st.n_event += 1
    st.n_batch += k
    st.n_tokens += k * tau
    st.n_dec_tok += k * nd
    st.n_pre_tok += k * c
    st.busy += total
    st.wasted += wasted
    st.n_not_opt += not_opt
    t = now + total
    st.clock = t
    done = advance_decodes(st, nd, k)
    if math.isnan(st.t_start[j]):
        st.t_start[j] = now
    st.pg[j] += k * c
    if st.pg[j] == st.pl[j]:
        fin = _prefill_complete(st, j, t)
        w = 0
        for q in range(st.np):
            if st.p_id[q] != j:
                st.p_id[w] = st.p_id[q]
                w += 1
        st.np = w
        st.n_done += fin
        st.last_done += fin
        done += fin
    return done
