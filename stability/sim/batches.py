"""The batches every scheduler runs through the engine: a whole prefill alone (one event), a batch
of whole prompts, and runs of decode batches over an unchanged decode set, each timed by Eq. 7
(:mod:`stability.sim.engine` describes the event skipping).

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1, Eq. 7, Algorithm 1.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from stability.sim.kernels import ceil_udiv, chunk_batch_cost, lin_waste, psa_waste, t_fixed, t_lin, t_psa
from stability.sim.prefix_cache import pc_release
from stability.sim.recording import count_batch, log_batch, log_has_room, log_item, move_decode, record_gap

# --- prefill -----------------------------------------------------------------------------------


@njit(cache=True)
def prefill_whole(st, ct, j):
    """Run request j's whole prefill alone, in chunks of ``ct.chunk`` back to back (Algorithm 1,
    lines 12-16): one event. Its last chunk emits the first output token."""
    now = st.clock
    L = st.lp[j]
    chunk = ct.chunk
    n_chunks = (L + chunk - 1) // chunk
    if st.log_on and not log_has_room(st, n_chunks, n_chunks):
        return False
    st.t_start[j] = now
    st.n_event += 1
    st.last_done = 0
    if st.detail:
        t = 0.0
        for k in range(n_chunks):
            i = 1 + k * chunk
            c = min(chunk, L - i + 1)
            dur, wasted = chunk_batch_cost(ct, i, c)
            if st.log_on:
                log_item(st, j, i, c)
                log_batch(st, now + t, dur, c, 0, 1, wasted)
            count_batch(st, c, 0, c, dur, wasted)
            t += dur
        st.clock = now + t
    else:
        dur = ct.pre_time[L]
        st.clock = now + dur
        st.n_batch += n_chunks
        st.n_tokens += L
        st.n_pre_tok += L
        st.busy += dur
        st.wasted += ct.pre_waste[L]
        st.n_not_opt += ct.pre_not_opt[L]
    st.t_first[j] = st.clock
    st.last_emit[j] = st.clock
    return True


@njit(cache=True)
def push_decode(st, j):
    """Request j enters the decode phase: its next iteration is DI(R, L^P + 1) (Definition 2)."""
    q = st.nd
    st.d_id[q] = j
    st.d_pos[q] = st.lp[j] + 1
    st.d_rem[q] = st.ld[j]
    st.nd += 1


@njit(cache=True)
def prefill_batch(st, ct, ids, n):
    """One batch of the full prompts PI(R, 1, L^P) of requests ids[:n] (Algorithm 3, line 16)."""
    now = st.clock
    if st.log_on and not log_has_room(st, 1, n):
        return False
    tau = 0
    att = 0.0
    wasted = 0.0
    for q in range(n):
        j = ids[q]
        L = st.lp[j]
        tau += L
        a = t_psa(ct, 1, L)
        att += a
        wasted += psa_waste(ct, 1, L, a)
        st.t_start[j] = now
        if st.log_on:
            log_item(st, j, 1, L)
    dur = t_fixed(ct, tau) + att
    wasted += lin_waste(ct, tau)
    st.n_event += 1
    st.last_done = 0
    if st.log_on:
        log_batch(st, now, dur, tau, 0, n, wasted)
    count_batch(st, tau, 0, tau, dur, wasted)
    st.clock = now + dur
    for q in range(n):
        st.t_first[ids[q]] = st.clock
        st.last_emit[ids[q]] = st.clock
    return True


# --- decode runs -------------------------------------------------------------------------------


@njit(cache=True)
def decode_cum(st, ct, na, k, fixed):
    """Time of k consecutive decode batches over the first ``na`` decode entries (Eq. 7 with
    prefix sums of T^{D,SA}); ``fixed`` is their T_fixed(na), priced once by the caller (no call
    here, so no reference count on the records either)."""
    att = 0.0
    for q in range(na):
        p = st.d_pos[q]
        att += ct.S[p + k - 1] - ct.S[p - 1]
    return k * fixed + ct.N * att


@njit(cache=True)
def _decode_cum3(st, ct, na, k, fixed):
    """:func:`decode_cum` of k - 1, k and k + 1 batches in one pass (each sum taken in the same
    order as there, so each equals it exactly)."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    S = ct.S
    d_pos = st.d_pos
    for q in range(na):
        p = d_pos[q]
        s0 = S[p - 1]
        a0 += S[p + k - 2] - s0
        a1 += S[p + k - 1] - s0
        a2 += S[p + k] - s0
    n = ct.N
    return (k - 1) * fixed + n * a0, k * fixed + n * a1, (k + 1) * fixed + n * a2


@njit(cache=True)
def first_batch_reaching(st, ct, na, k_hi, horizon, cum_hi, fixed):
    """Smallest k in [1, k_hi] whose batches end at or after ``horizon`` (k_hi if none does),
    and their time; ``cum_hi`` is the time of all k_hi batches, ``fixed`` their T_fixed(na).

    The cumulative time is nearly linear in k (batch times grow only with the positions), so the
    search interpolates first: it keeps a < k <= b with cum(a) < horizon <= cum(b), probes the
    interpolated k and both its neighbours in one O(|D|) pass (:func:`_decode_cum3`; the guess and
    one neighbour decide when the guess is right, as it nearly always is), and bisects what is
    left after three rounds. The answer is the bisection's.
    """
    a, ca = 0, 0.0  # the times of a and b batches
    b, cb = k_hi, cum_hi
    if cb < horizon:
        return b, cb
    rounds = 0
    while b - a > 1:
        if rounds < 3 and cb > ca:
            g = a + math.ceil((b - a) * ((horizon - ca) / (cb - ca)))
            g = min(max(g, a + 1), b - 1)
            c0, cg, c2 = _decode_cum3(st, ct, na, g, fixed)  # the guess and its neighbours
            if cg >= horizon:
                b, cb = g, cg
                if b - 1 > a:  # its left neighbour decides at once when the guess was right
                    if c0 < horizon:
                        a, ca = b - 1, c0
                    else:
                        b, cb = b - 1, c0
            else:
                a, ca = g, cg
                if a + 1 < b:
                    if c2 >= horizon:
                        b, cb = a + 1, c2
                    else:
                        a, ca = a + 1, c2
            rounds += 1
        else:
            mid = (a + b) // 2
            cm = decode_cum(st, ct, na, mid, fixed)
            if cm >= horizon:
                b, cb = mid, cm
            else:
                a, ca = mid, cm
    return b, cb


@njit(cache=True)
def decode_run(st, ct, na, interruptible, t_stop, k_cap):
    """Batches of one DI for each of the first ``na`` decode entries, back to back, until the
    first of them completes, at most ``k_cap`` batches, cut at the first batch boundary at or after
    ``t_stop`` and, if ``interruptible``, after the next arrival. Completed requests leave the
    decode set (order kept). Returns how many completed, or -1 if the log needs room."""
    now = st.clock
    fixed = t_fixed(ct, na)  # every batch's T_fixed(na)
    horizon = t_stop - now
    if interruptible and st.seen < st.n_loaded:
        horizon = min(horizon, st.arr[st.seen] - now)
    total = -1.0  # the run's time, once known
    if fixed >= horizon and k_cap >= 1:
        # the first batch already reaches the horizon (its time is at least T_fixed): the run is
        # that batch, whatever the completions, as the search below would find (one batch, its
        # time taken the same way), without the passes for k and the run's time (a DistServe
        # decode node, whose batches of thousands of decodes outlast the gaps between hand-offs)
        if (st.nd >= LONG_SET) & (st.detail == 0) & (st.kv_on == 0) & (st.pc_on == 0):
            return _one_long_batch(st, ct, na, fixed)
        k = 1
        total = decode_cum(st, ct, na, 1, fixed)
    elif horizon < math.inf and st.nd >= LONG_SET and k_cap >= 1:
        # a long set: the first batch's time comes with k's pass, and settles a one-batch run
        k, total = _first_batch_long(st, ct, na, k_cap, fixed)
        if total < horizon:
            total = decode_cum(st, ct, na, k, fixed)
            if total >= horizon:
                k, total = first_batch_reaching(st, ct, na, k, horizon, total, fixed)
        else:
            k = 1
    else:
        k = k_cap
        for q in range(na):
            if st.d_rem[q] < k:
                k = st.d_rem[q]
        if horizon < math.inf:
            total = decode_cum(st, ct, na, k, fixed)
            if total >= horizon:
                k, total = first_batch_reaching(st, ct, na, k, horizon, total, fixed)
    if st.log_on and not log_has_room(st, k, k * na):
        return -1
    st.n_event += 1
    if st.detail:
        wasted = lin_waste(ct, na)
        n_layers = ct.N
        t = now
        for m in range(k):
            att = 0.0
            for q in range(na):
                p = st.d_pos[q] + m
                att += ct.S[p] - ct.S[p - 1]
            dur = fixed + n_layers * att
            t_end = t + dur
            for q in range(na):
                record_gap(st, st.d_id[q], t_end)
                if st.log_on:
                    log_item(st, st.d_id[q], st.d_pos[q] + m, 0)
            if st.log_on:
                log_batch(st, t, dur, na, na, 0, wasted)
            count_batch(st, na, na, 0, dur, wasted)
            t = t_end
        st.clock = t
    else:
        if total < 0.0:
            total = decode_cum(st, ct, na, k, fixed)
        st.clock = now + total
        count_decode_batches(st, ct, na, k, total)
    return advance_decodes(st, na, k)


# A decode set at least this long is advanced through local references to its arrays: the loop
# keeps their addresses in registers instead of reading them from the state at every access
# (twice as fast per entry on a DistServe decode node of ~9,000 entries), for five
# reference-count pairs a call that a short set does not repay (RAD, Sarathi-Serve and SLAI run
# sets of tens of requests).
LONG_SET = 256


@njit(cache=True)
def _first_batch_long(st, ct, na, k_cap, fixed):
    """min(k_cap, decodes left of the first ``na`` entries) and the time of one batch over them
    (:func:`decode_cum` at k = 1, summed in its order), in one pass through local references."""
    S = ct.S
    d_pos, d_rem = st.d_pos, st.d_rem
    k = k_cap
    att = 0.0
    for q in range(na):
        p = d_pos[q]
        att += S[p] - S[p - 1]
        if d_rem[q] < k:
            k = d_rem[q]
    return k, fixed + ct.N * att


@njit(cache=True)
def _one_long_batch(st, ct, na, fixed):
    """:func:`decode_run`'s run of one batch over the first ``na`` entries of a long decode set
    (:data:`LONG_SET`) in fast mode without KV memory: the batch's decode attention (summed in
    :func:`decode_cum`'s order) and :func:`advance_decodes` in one pass over the set, the
    completed requests set aside until the batch's end is known; ``fixed`` is T_fixed(na).
    Returns how many completed."""
    now = st.clock
    S = ct.S
    d_id, d_pos, d_rem = st.d_id, st.d_pos, st.d_rem
    finished = np.empty(na, dtype=np.int64)
    att = 0.0
    done = 0
    w_pos = 0
    for q in range(st.nd):
        j = d_id[q]
        pos = d_pos[q]
        rem = d_rem[q]
        if q < na:
            att += S[pos] - S[pos - 1]
            pos += 1
            rem -= 1
            if rem == 0:
                finished[done] = j
                done += 1
                continue
        d_id[w_pos] = j
        d_pos[w_pos] = pos
        d_rem[w_pos] = rem
        w_pos += 1
    st.nd = w_pos
    total = fixed + ct.N * att  # decode_cum's k fixed + N att at k = 1 (1 * x is x)
    st.n_event += 1
    st.clock = now + total
    st.n_batch += 1
    st.n_tokens += na
    st.n_dec_tok += na
    st.busy += total
    w = lin_waste(ct, na)
    st.wasted += w
    if w > 1e-12 * t_lin(ct, na):
        st.n_not_opt += 1
    t_finish = st.t_finish
    clock = st.clock
    for m in range(done):
        t_finish[finished[m]] = clock
    st.n_done += done
    st.last_done = done
    return done


@njit(cache=True)
def count_decode_batches(st, ct, na, k, total):
    """The counters of ``k`` decode-only batches of ``na`` decodes lasting ``total`` seconds in
    all: batches, tokens, busy time and the tiling waste of Eq. 4's linear GeMMs."""
    st.n_batch += k
    st.n_tokens += k * na
    st.n_dec_tok += k * na
    st.busy += total
    w = lin_waste(ct, na)
    st.wasted += k * w
    if w > 1e-12 * t_lin(ct, na):
        st.n_not_opt += k


@njit(cache=True)
def advance_decodes(st, na, k):
    """The first ``na`` decode entries ran k decode iterations ending at the clock: advance their
    positions and remove the completed ones, keeping the order of the rest; with KV memory on,
    each request's blocks grow to cover its last position (the peak is taken there) and
    completions free them (into the prefix cache when it is on: :func:`_advance_cached`). Returns
    how many completed."""
    if st.pc_on:
        done = _advance_cached(st, na, k)
        st.n_done += done
        st.last_done = done
        return done
    if st.nd >= LONG_SET:
        done, grown, freed = _advance_long(st, na, k)
    else:
        done = 0
        w_pos = 0
        nd = st.nd
        grown = 0
        freed = 0
        for q in range(nd):
            if q < na:
                st.d_pos[q] += k
                st.d_rem[q] -= k
                if st.kv_on:
                    j = st.d_id[q]
                    need = ceil_udiv(st.d_pos[q] - 1, st.kv_bs)
                    grown += need - st.blk[j]
                    st.blk[j] = need
                    if st.d_rem[q] == 0:
                        freed += need
                        st.blk[j] = 0
                if st.d_rem[q] == 0:
                    st.t_finish[st.d_id[q]] = st.clock
                    done += 1
                    continue
            if w_pos < q:  # behind a completion
                move_decode(st, w_pos, q)
            w_pos += 1
        st.nd = w_pos
    st.n_done += done
    st.last_done = done
    if st.kv_on:
        st.kv_free -= grown
        st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)
        st.kv_free += freed
    return done


@njit(cache=True)
def _advance_cached(st, na, k):
    """:func:`advance_decodes` with prefix caching on: every block the k iterations take is taken
    first (the peak is there), then each completed request frees its blocks into the cache
    (:func:`stability.sim.prefix_cache.pc_release`), in decode-set order."""
    grown = 0
    for q in range(na):
        st.d_pos[q] += k
        st.d_rem[q] -= k
        j = st.d_id[q]
        need = ceil_udiv(st.d_pos[q] - 1, st.kv_bs)
        grown += need - st.blk[j]
        st.blk[j] = need
    st.kv_free -= grown
    st.kv_peak = max(st.kv_peak, st.kv_total - st.kv_free)
    done = 0
    w_pos = 0
    for q in range(st.nd):
        if q < na and st.d_rem[q] == 0:
            j = st.d_id[q]
            st.t_finish[j] = st.clock
            pc_release(st, j, st.d_pos[q] - 1, True)
            done += 1
            continue
        if w_pos < q:
            move_decode(st, w_pos, q)
        w_pos += 1
    st.nd = w_pos
    return done


@njit(cache=True)
def _advance_long(st, na, k):
    """:func:`advance_decodes` through local references to the arrays (a long decode set)."""
    done = 0
    w_pos = 0
    grown = 0
    freed = 0
    kv_on, kv_bs, clock = st.kv_on, st.kv_bs, st.clock
    d_id, d_pos, d_rem, blk, t_finish = st.d_id, st.d_pos, st.d_rem, st.blk, st.t_finish
    for q in range(st.nd):
        j = d_id[q]
        pos = d_pos[q]
        rem = d_rem[q]
        if q < na:
            pos += k
            rem -= k
            if kv_on:
                need = ceil_udiv(pos - 1, kv_bs)
                grown += need - blk[j]
                blk[j] = need
                if rem == 0:
                    freed += need
                    blk[j] = 0
            if rem == 0:
                t_finish[j] = clock
                done += 1
                continue
        d_id[w_pos] = j
        d_pos[w_pos] = pos
        d_rem[w_pos] = rem
        w_pos += 1
    st.nd = w_pos
    return done, grown, freed
