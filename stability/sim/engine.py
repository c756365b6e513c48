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

A scheduler is a compiled loop over the primitives this module names, written to read like its
algorithm (see :mod:`stability.schedulers`): the state, its waiting queue and cycles are defined
here, the batches in :mod:`stability.sim.batches` and what is recorded of them in
:mod:`stability.sim.recording`. Loops are resumable at decision points: they stop when the clock
reaches ``t_stop`` or when the batch log needs more room, and continue where they stopped.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1 (the scheduler framework), Eq. 7, Algorithm 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from numba.experimental import structref

from stability.sim.batches import (
    LONG_SET,
    advance_decodes,
    decode_cum,
    decode_run,
    first_batch_reaching,
    prefill_batch,
    prefill_whole,
    push_decode,
)
from stability.sim.recording import (
    TBT_BINS,
    TBT_LO,
    TBT_PER_DECADE,
    count_batch,
    log_batch,
    log_has_room,
    log_item,
    move_decode,
    record_gap,
)
from stability.sim.structs import STATE, State, init_state, resize_log
from theory.errors import FieldError

# --- loop return codes -------------------------------------------------------------------------
DONE = 0  # nothing left to do and no arrival left
STOPPED = 1  # reached t_stop
GROW = 2  # the batch log is full

# "no cap", an int64 rather than a Python int: numba types a Python int constant passed to a
# compiled function as a literal and compiles that function once more for it (a call with a
# variable gets the int64 version); the same value in every version
BIG = np.int64(1 << 62)
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


@dataclass(frozen=True)
class Recording:
    """What a GPU's state records of its run (:func:`new_state`).

    Attributes
    ----------
    n_class : int
        Number of request classes (a request's class is 0 .. n_class - 1).
    detail : bool
        Detail mode: runs expanded batch by batch, every TBT gap recorded.
    log : bool
        Also keep the batch log (in detail mode only).
    log_rows : int
        Rows the batch log starts with (it grows).
    tbt_slo : sequence of float or None
        Each class's TBT SLO, seconds: every gap above it is counted for its request
        (:func:`export_violations`); None: no gap counts as a violation.
    tbt_from : float
        The per-class TBT record (:func:`export_tbt`) and the violation counts take only the
        tokens emitted at or after it (seconds; 0: every token), so a warm-up can be left out;
        each request's longest gap takes every token.
    """

    n_class: int = 1
    detail: bool = False
    log: bool = False
    log_rows: int = 1024
    tbt_slo: tuple | np.ndarray | None = None
    tbt_from: float = 0.0


def new_state(arrival, L_P, L_D, cls=None, recording: Recording = Recording(), capacity: int | None = None,
              t_start=None, t_first=None) -> State:
    """A fresh state for requests arriving at ``arrival`` (sorted) with lengths ``L_P, L_D`` and
    classes ``cls`` (default 0), recording what ``recording`` says.

    With ``capacity`` > len(arrival), room is left for requests routed to the GPU later with
    :func:`append_request` (join-shortest-queue routing). ``t_start`` and ``t_first`` (optional)
    are times already recorded elsewhere: a disaggregated decode node receives requests whose
    prefill and first token happened on a prefill node, and its first TBT gap counts from there.
    """
    m = len(arrival)
    cap = m if capacity is None else max(int(capacity), m)
    n_class, tbt_slo, detail, log = recording.n_class, recording.tbt_slo, recording.detail, recording.log

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
                      padded(t_first, np.float64, np.nan), m, slo.copy(), int(detail),
                      float(recording.tbt_from), int(log and detail),
                      int(recording.log_rows if log and detail else 0))


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
    """Whether a loop may take its next decision: before t_stop, with room in the log and before
    ``st.stop_at`` requests have ended (finished or been rejected; a closed loop's users send their
    next request then: :mod:`stability.sim.closed_loop`).

    Branch-free (``&``, not ``and``): a short-circuit branch would keep the reference-count pair
    on ``st`` that every loop iteration then pays (see :mod:`stability.sim.structs`).
    """
    return (st.clock < t_stop) & (st.need_grow == 0) & (st.n_done + st.n_rej < st.stop_at)


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


# the primitives a scheduler's loop calls, wherever they are defined (stability.schedulers)
__all__ = ["BIG", "COUNTERS", "DONE", "GROW", "KV_COUNTERS", "LONG_SET", "STOPPED", "TBT_BINS", "TBT_LO",
           "TBT_PER_DECADE", "Recording", "advance_decodes", "append_request", "begin_cycle", "count_batch",
           "decode_cum", "decode_run", "end_cycle", "export_counters", "export_cycles", "export_kv",
           "export_log", "export_requests", "export_tbt", "export_violations", "first_batch_reaching",
           "grow_log", "idle", "log_batch", "log_has_room", "log_item", "move_decode", "n_waiting",
           "new_state", "pending_at", "pop_waiting", "prefill_batch", "prefill_whole", "preset_times",
           "push_decode", "push_waiting_front", "record_gap", "run_loop", "running", "see_arrivals",
           "stop_code"]
