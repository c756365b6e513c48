"""The event-skipping batch-execution core of one GPU, shared by every scheduler.

One GPU runs batches back to back (Section 3.1). A batch holds prefill iterations
``PI(R, i, c)`` and decode iterations ``DI(R, i)``; it lasts exactly Eq. 7 of its contents (the
compiled twins in :mod:`stability.sim.kernels`). Requests arrive at given times (a Poisson process or a
trace), wait in FCFS order, are scheduled, and finish with the batch holding their last decode.

Cost grows with events, not tokens:

* a whole prefill that runs back to back (Algorithm 1, lines 12-16) is one event whose time is a
  table lookup by L^P;
* a run of decode batches over an unchanged decode set is one event lasting until the next
  completion: ``k`` batches over requests at next positions ``p_q`` take
  ``k T_fixed(|D|) + N sum_q (S(p_q + k - 1) - S(p_q - 1))`` with ``S`` the prefix sums of
  T^{D,SA}. When the policy would react to an arrival, the run is cut at the first batch boundary
  at or after that arrival, found by binary search over the run's cumulative time.

In *detail* mode the same runs are expanded batch by batch to record every TBT gap (in per-class
log histograms of the tokens emitted at or after a time ``tbt_from``, 0 by default: every token;
a later one leaves a warm-up out) and, optionally, a batch log with every batch's contents;
decisions and finish times are the same as in fast mode.

A scheduler is a compiled loop over the primitives below, written to read like its algorithm (see
:mod:`stability.schedulers`). Loops are resumable at decision points: they stop when the clock
reaches ``t_stop`` or when the batch log needs more room, and continue where they stopped.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1 (the scheduler framework), Eq. 7, Algorithm 1.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.experimental import structref

from stability.sim.kernels import ceil_udiv, lin_waste, psa_waste, t_fixed, t_lin, t_psa
from stability.sim.structs import STATE, State, init_state, resize_log
from theory.errors import FieldError

# --- loop return codes -------------------------------------------------------------------------
DONE = 0  # nothing left to do and no arrival left
STOPPED = 1  # reached t_stop
GROW = 2  # the batch log is full

# --- TBT histogram: log-spaced bins from 1e-6 s to 1e4 s, 100 per decade -------------------------
TBT_LO = -6.0
TBT_PER_DECADE = 100
TBT_BINS = 10 * TBT_PER_DECADE + 2  # plus an underflow and an overflow bin
BIG = 1 << 62
COUNTERS = ("n_batch", "n_event", "n_tokens", "n_dec_tok", "n_pre_tok", "n_not_opt", "n_done")


@njit(cache=True)
def _new_state(arr, lp, ld, cls, t_start, t_first, n_loaded, tbt_slo, detail, tbt_from, log_on, rows):
    st = structref.new(STATE)
    init_state(st, arr, lp, ld, cls, t_start, t_first, n_loaded, tbt_slo, detail, tbt_from, log_on, rows,
               4 * rows, TBT_BINS)
    return st


@njit(cache=True)
def grow_log(st):
    """Double the batch log (keeping its rows); clears the need-grow flag."""
    resize_log(st, max(1024, 2 * st.b_start.size), max(4096, 2 * st.it_req.size))
    st.need_grow = 0


def new_state(arrival, L_P, L_D, cls=None, n_class: int = 1, detail: bool = False,
              log: bool = False, log_rows: int = 1024, capacity: int | None = None,
              t_start=None, t_first=None, tbt_slo=None, tbt_from: float = 0.0) -> State:
    """A fresh state for requests arriving at ``arrival`` (sorted) with lengths ``L_P, L_D``.

    ``cls`` gives each request's class (0 .. n_class - 1); ``tbt_slo`` (optional, one value per
    class, seconds) is each class's TBT SLO: every gap above it is counted for its request
    (:func:`export_violations`). Without it no gap counts as a violation. The per-class TBT record
    (:func:`export_tbt`) and the violation counts take only the tokens emitted at or after
    ``tbt_from`` (seconds; default 0: every token), so a warm-up can be left out of them; each
    request's longest gap takes every token.

    With ``capacity`` > len(arrival), room is left for requests routed to the GPU later with
    :func:`append_request` (join-shortest-queue routing). ``t_start`` and ``t_first`` (optional)
    are times already recorded elsewhere: a disaggregated decode node receives requests whose
    prefill and first token happened on a prefill node, and its first TBT gap counts from there.
    """
    m = len(arrival)
    cap = m if capacity is None else max(int(capacity), m)

    def padded(values, dtype, fill=0):
        out = np.full(cap, fill, dtype=dtype)
        if values is not None:
            out[:m] = values
        return out

    cls = np.zeros(m, dtype=np.int64) if cls is None else cls
    slo = np.full(int(n_class), np.inf) if tbt_slo is None else np.asarray(tbt_slo, dtype=np.float64)
    if slo.shape != (int(n_class),):
        raise FieldError("tbt_slo", slo.tolist(), f"one TBT SLO per class ({n_class} classes)")
    return _new_state(padded(arrival, np.float64), padded(L_P, np.int64), padded(L_D, np.int64),
                      padded(cls, np.int64), padded(t_start, np.float64, np.nan),
                      padded(t_first, np.float64, np.nan), m, slo.copy(), int(detail), float(tbt_from),
                      int(log and detail), int(log_rows if log and detail else 0))


@njit(cache=True)
def append_request(st, arrival, L_P, L_D, cls):
    """Route one more request to this GPU (its arrival must not precede the loaded ones); returns
    its index on the GPU."""
    j = st.n_loaded
    st.arr[j] = arrival
    st.lp[j] = L_P
    st.ld[j] = L_D
    st.cls[j] = cls
    if st.pl.size > j:  # a mixed-batch loop has sized its arrays
        st.pl[j] = L_P
        st.dr[j] = L_D
    st.n_loaded += 1
    return j


@njit(cache=True)
def preset_times(st, j, t_start, t_first):
    """Request j started and emitted its first token elsewhere (a disaggregated prefill node)."""
    st.t_start[j] = t_start
    st.t_first[j] = t_first
    st.last_emit[j] = t_first


@njit(cache=True)
def pending_at(st, t):
    """Requests loaded and not finished by time t (the GPU advanced to its first decision point
    at or after t: only the latest event's completions can lie after t)."""
    done = st.n_done - (st.last_done if st.clock > t else 0)
    return st.n_loaded - done - st.n_rej


def run_loop(loop, st: State, ct, prm: tuple, t_stop: float = math.inf) -> int:
    """Call a scheduler's compiled ``loop`` until it is done or reaches ``t_stop``, growing the
    batch log whenever it fills. ``prm`` is the scheduler's compiled record (``Params.record()``).
    Returns the final code."""
    while True:
        code = loop(st, ct, prm, t_stop)
        if code != GROW:
            return code
        grow_log(st)


@njit(cache=True)
def export_requests(st):
    """Per-request results: (t_start, t_first, t_finish, tbt_max)."""
    return st.t_start, st.t_first, st.t_finish, st.tbt_max


@njit(cache=True)
def export_counters(st):
    """(clock, busy, wasted) and the integer counters in the order of ``COUNTERS``."""
    ints = np.array([st.n_batch, st.n_event, st.n_tokens, st.n_dec_tok, st.n_pre_tok,
                     st.n_not_opt, st.n_done])
    return np.array([st.clock, st.busy, st.wasted]), ints


KV_COUNTERS = ("n_preempt", "n_rej", "n_lost", "n_recomp")


@njit(cache=True)
def export_kv(st):
    """Per request (rejection reason, preemptions); the counters of ``KV_COUNTERS``; and the KV
    memory (on, total blocks, free blocks now, peak blocks used, block size)."""
    return (st.rej, st.npre, np.array([st.n_preempt, st.n_rej, st.n_lost, st.n_recomp]),
            np.array([st.kv_on, st.kv_total, st.kv_free, st.kv_peak, st.kv_bs]))


@njit(cache=True)
def export_violations(st):
    """Per request, the TBT gaps longer than its class's SLO, and whether gaps were recorded
    (detail mode; otherwise the counts and ``tbt_max`` stay 0 and mean nothing)."""
    return st.n_viol, st.detail


@njit(cache=True)
def export_cycles(st):
    c = st.n_cyc
    return (st.cyc_start[:c].copy(), st.cyc_end[:c].copy(), st.cyc_x[:c].copy(),
            st.cyc_started[:c].copy(), st.cyc_done[:c].copy())


@njit(cache=True)
def export_tbt(st):
    return st.tbt_hist, st.tbt_stat


@njit(cache=True)
def export_log(st):
    b, q = st.n_log, st.n_item
    return ((st.b_start[:b].copy(), st.b_dur[:b].copy(), st.b_tau[:b].copy(), st.b_nd[:b].copy(),
             st.b_np[:b].copy(), st.b_waste[:b].copy()),
            (st.it_batch[:q].copy(), st.it_req[:q].copy(), st.it_i[:q].copy(), st.it_c[:q].copy()))


# --- waiting queue -----------------------------------------------------------------------------


@njit(cache=True)
def see_arrivals(st):
    """Requests whose arrival time has passed join the tail of the waiting queue (line 4 of the
    algorithms: "update P based on new arrivals")."""
    cap = st.wq.size
    now = st.clock
    while st.seen < st.n_loaded and st.arr[st.seen] <= now:
        q = st.wq_head + st.wq_len  # < 2 cap: wrapped by one subtraction
        st.wq[q - cap * (q >= cap)] = st.seen
        st.wq_len += 1
        st.seen += 1


@njit(cache=True)
def n_waiting(st):
    return st.wq_len


@njit(cache=True)
def pop_waiting(st):
    """Remove and return the request at the head of the waiting queue (FCFS)."""
    j = st.wq[st.wq_head]
    h = st.wq_head + 1
    st.wq_head = h - st.wq.size * (h == st.wq.size)
    st.wq_len -= 1
    return j


@njit(cache=True)
def push_waiting_front(st, j):
    """Put request j back at the head of the waiting queue (preemption, or a postponed start)."""
    h = st.wq_head - 1
    st.wq_head = h + st.wq.size * (h < 0)
    st.wq[st.wq_head] = j
    st.wq_len += 1


@njit(cache=True)
def idle(st, t_stop):
    """Nothing to schedule: jump to the next arrival (or to t_stop). False if none is left."""
    if st.seen >= st.n_loaded:
        return False
    st.clock = max(st.clock, min(st.arr[st.seen], t_stop))
    return True


@njit(cache=True)
def running(st, t_stop):
    """Whether a loop may take its next decision: before t_stop and with room in the log.

    Branch-free (``&``, not ``and``): a short-circuit branch would keep the reference-count pair
    on ``st`` that every loop iteration then pays (see :mod:`stability.sim.structs`).
    """
    return (st.clock < t_stop) & (st.need_grow == 0)


@njit(cache=True)
def stop_code(st):
    return GROW if st.need_grow else STOPPED


# --- cycles (Algorithms 1-2, Appendix C.1) -------------------------------------------------------


@njit(cache=True)
def _size_cycles(st):
    m = st.arr.size + 2
    st.cyc_start = np.zeros(m)
    st.cyc_end = np.zeros(m)
    st.cyc_x = np.zeros(m, dtype=np.int64)
    st.cyc_started = np.zeros(m, dtype=np.int64)
    st.cyc_done = np.zeros(m, dtype=np.int64)


@njit(cache=True)
def begin_cycle(st):
    """Open cycle c at the current time with X[c] = pending requests (arrived, not finished);
    the first cycle sizes the cycle arrays (at most one cycle per request, plus one)."""
    c = st.n_cyc
    if c == 0 and st.cyc_start.size == 0:
        _size_cycles(st)
    st.cyc_start[c] = st.clock
    st.cyc_x[c] = st.seen - st.n_done
    st.cyc_done[c] = st.n_done  # completions before the cycle; turned into a count at its end
    st.cyc_open = 1


@njit(cache=True)
def end_cycle(st):
    """Close the open cycle (D emptied: Algorithm 1, line 9) and reset requests_in_cycle."""
    c = st.n_cyc
    st.cyc_end[c] = st.clock
    st.cyc_started[c] = st.rc
    st.cyc_done[c] = st.n_done - st.cyc_done[c]
    st.n_cyc += 1
    st.cyc_open = 0
    st.rc = 0


# --- recording ---------------------------------------------------------------------------------


@njit(cache=True)
def move_decode(st, dst, src):
    """Copy decode entry ``src`` (request, position, tokens left) into slot ``dst``."""
    st.d_id[dst] = st.d_id[src]
    st.d_pos[dst] = st.d_pos[src]
    st.d_rem[dst] = st.d_rem[src]


@njit(cache=True)
def record_gap(st, j, t_emit):
    """A token of request j at t_emit: the gap since its previous token updates the request's
    longest gap and, when t_emit >= tbt_from, its count of gaps above its class's TBT SLO and the
    class's TBT record (histogram; count, sum, max)."""
    gap = t_emit - st.last_emit[j]
    st.last_emit[j] = t_emit
    if gap > st.tbt_max[j]:
        st.tbt_max[j] = gap
    if t_emit < st.tbt_from:  # a warm-up token: the request's longest gap only
        return
    k = st.cls[j]
    if gap > st.tbt_slo[k]:
        st.n_viol[j] += 1
    if gap <= 0.0:
        b = 0
    else:
        b = math.floor((math.log10(gap) - TBT_LO) * TBT_PER_DECADE) + 1
        b = min(max(b, 0), TBT_BINS - 1)
    st.tbt_hist[k, b] += 1.0
    st.tbt_stat[k, 0] += 1.0
    st.tbt_stat[k, 1] += gap
    if gap > st.tbt_stat[k, 2]:
        st.tbt_stat[k, 2] = gap


@njit(cache=True)
def log_has_room(st, rows, items):
    """Whether the batch log can take ``rows`` batches and ``items`` iterations (sets NEED_GROW)."""
    if st.log_on == 0:
        return True
    if st.n_log + rows <= st.b_start.size and st.n_item + items <= st.it_req.size:
        return True
    st.need_grow = 1
    return False


@njit(cache=True)
def log_batch(st, start, dur, tau, nd, npre, wasted):
    """One batch-log row: start, duration, tokens, decodes, prefill chunks, time lost to tiling."""
    r = st.n_log
    st.b_start[r] = start
    st.b_dur[r] = dur
    st.b_tau[r] = tau
    st.b_nd[r] = nd
    st.b_np[r] = npre
    st.b_waste[r] = wasted
    st.n_log += 1


@njit(cache=True)
def log_item(st, j, i, c):
    q = st.n_item
    st.it_batch[q] = st.n_log  # the batch being logged next
    st.it_req[q] = j
    st.it_i[q] = i
    st.it_c[q] = c
    st.n_item += 1


@njit(cache=True)
def count_batch(st, tau, n_dec, n_pre, dur, wasted):
    st.n_batch += 1
    st.n_tokens += tau
    st.n_dec_tok += n_dec
    st.n_pre_tok += n_pre
    st.busy += dur
    st.wasted += wasted
    if wasted > 1e-12 * dur:
        st.n_not_opt += 1


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
            att = t_psa(ct, i, c)
            dur = t_fixed(ct, c) + att
            wasted = lin_waste(ct, c) + psa_waste(ct, i, c, att)
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
def first_batch_reaching(st, ct, na, k_hi, horizon, cum_hi, fixed):
    """Smallest k in [1, k_hi] whose batches end at or after ``horizon`` (k_hi if none does),
    and their time; ``cum_hi`` is the time of all k_hi batches, ``fixed`` their T_fixed(na).

    The cumulative time is nearly linear in k (batch times grow only with the positions), so the
    search interpolates first: it keeps a < k <= b with cum(a) < horizon <= cum(b), probes the
    interpolated k and its neighbour (two O(|D|) probes when the guess is right, as it nearly
    always is), and bisects what is left after three rounds. The answer is the bisection's.
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
            cg = decode_cum(st, ct, na, g, fixed)
            if cg >= horizon:
                b, cb = g, cg
                if b - 1 > a:  # its left neighbour decides at once when the guess was right
                    c1 = decode_cum(st, ct, na, b - 1, fixed)
                    if c1 < horizon:
                        a, ca = b - 1, c1
                    else:
                        b, cb = b - 1, c1
            else:
                a, ca = g, cg
                if a + 1 < b:
                    c1 = decode_cum(st, ct, na, a + 1, fixed)
                    if c1 >= horizon:
                        b, cb = a + 1, c1
                    else:
                        a, ca = a + 1, c1
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
    k = k_cap
    for q in range(na):
        if st.d_rem[q] < k:
            k = st.d_rem[q]
    horizon = t_stop - now
    if interruptible and st.seen < st.n_loaded:
        horizon = min(horizon, st.arr[st.seen] - now)
    total = -1.0  # the run's time, once known
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
        st.n_batch += k
        st.n_tokens += k * na
        st.n_dec_tok += k * na
        st.busy += total
        w = lin_waste(ct, na)
        st.wasted += k * w
        if w > 1e-12 * t_lin(ct, na):
            st.n_not_opt += k
    return advance_decodes(st, na, k)


# A decode set at least this long is advanced through local references to its arrays: the loop
# keeps their addresses in registers instead of reading them from the state at every access
# (twice as fast per entry on a DistServe decode node of ~9,000 entries), for five
# reference-count pairs a call that a short set does not repay (RAD, Sarathi-Serve and SLAI run
# sets of tens of requests).
LONG_SET = 256


@njit(cache=True)
def advance_decodes(st, na, k):
    """The first ``na`` decode entries ran k decode iterations ending at the clock: advance their
    positions and remove the completed ones, keeping the order of the rest; with KV memory on,
    each request's blocks grow to cover its last position (the peak is taken there) and
    completions free them. Returns how many completed."""
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
