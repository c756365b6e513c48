"""DistServe (Algorithm 5, Appendix E.3): separate prefill and decode nodes with a KV hand-off.

Prefill node (lines 1-11): waiting requests are taken FCFS and their prompts prefilled; the last
prompt token's iteration emits the first token, and the request's KV is handed to a decode node.
``prefill_mode`` chooses how:

* ``"whole"`` (default, line 8 as printed): one request at a time, ``PI(R, 1, L^P)`` in one batch;
* ``"chunked"`` (line 8's comment): one request at a time in chunks of ``chunk`` (t*_lcm, so
  prefills are optimally tiled as Section 5 notes), back to back;
* ``"batched"`` (the real system, ``distserve/context_stage_scheduler.py``): FCFS whole prompts
  batched while their total stays within ``prefill_max_tokens`` (4096) and the batch within
  ``prefill_max_batch`` (256) requests; a prompt longer than the token limit runs alone (the real
  scheduler would never schedule it).

Decode node (lines 12-20): every batch holds one DI for each decode-phase request (continuous
batching: a hand-off joins the next batch), or, with ``decode_cap`` = k > 0, for the first k in
hand-off order (``decode_cap="t_col"``: t*_col, the paper's suggestion for optimal tiling),
refilled FCFS as requests finish.

KV hand-off: it takes ``L^P * kv_bytes_per_token / link_bandwidth`` seconds; the default
``link_bandwidth=0`` means instantaneous, as in the paper's model (Section 4.1 counts transfers
at cost 0) and DistServe's own simulator (``simdistserve``), which does not model the transfer.
Give a bandwidth in bytes/s (e.g. 300e9 for one direction of A100 NVLink 3) to charge it. The
decode node's first TBT gap runs from the first token on the prefill node, so it includes the
transfer and the wait for a decode slot.

Not modelled: KV memory (Algorithm 5 has none; the real decode node swaps to CPU under memory
pressure), pipeline parallelism. The cluster composition (r = prefill_nodes + decode nodes,
routing by the planner at each stage) is :mod:`stability.sim.disaggregated`.

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 5, Appendix E.3, Section 5; Zhong et al. (2024),
DistServe (OSDI); LLMServe/DistServe @ 82831f1, ``distserve/context_stage_scheduler.py``,
``distserve/decoding_stage_scheduler.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.sim.batches import count_decode_batches
from stability.sim.engine import (
    BIG,
    DONE,
    LONG_SET,
    decode_run,
    idle,
    n_waiting,
    pop_waiting,
    prefill_batch,
    prefill_whole,
    push_decode,
    push_waiting_front,
    running,
    see_arrivals,
    stop_code,
)
from stability.sim.kernels import t_fixed
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int

NAME = "distserve"
DISAGGREGATED = True  # runs as prefill nodes then decode nodes (stability.sim.disaggregated)
PREFILL_MODES = ("whole", "chunked", "batched")
WHOLE, CHUNKED, BATCHED = range(3)


class Record(NamedTuple):
    """What the compiled loops read, by name."""

    prefill_mode: int  # WHOLE, CHUNKED or BATCHED
    max_tokens: int  # prefill_max_tokens of a batched prefill
    max_batch: int  # prefill_max_batch: requests of a batched prefill
    decode_cap: int  # decodes per batch on a decode node (0: all)


@dataclass(frozen=True)
class Params:
    """Node split, prefill batching, decode cap and the KV hand-off."""

    prefill_nodes: int | None  # None: half of the r GPUs (at least 1)
    prefill_mode: str
    chunk: int
    prefill_max_tokens: int
    prefill_max_batch: int
    decode_cap: int  # 0: every decode-phase request in each batch
    link_bandwidth: float  # bytes/s; 0: instantaneous hand-off
    kv_bytes_per_token: int

    def record(self) -> Record:
        """The compiled loops' options."""
        return Record(PREFILL_MODES.index(self.prefill_mode), int(self.prefill_max_tokens),
                      int(self.prefill_max_batch), int(self.decode_cap))

    def transfer_time(self, L_P) -> np.ndarray:
        """Seconds to move the KV of prompts of length ``L_P`` to a decode node."""
        L_P = np.asarray(L_P, dtype=np.float64)
        if self.link_bandwidth == 0:
            return np.zeros_like(L_P)
        return L_P * self.kv_bytes_per_token / self.link_bandwidth


def make_params(cm: CostModel, prefill_nodes: int | None = None, prefill_mode: str = "whole",
                chunk: int | None = None, prefill_max_tokens: int = 4096, prefill_max_batch: int = 256,
                decode_cap: int | str = 0, link_bandwidth: float = 0.0) -> Params:
    """DistServe's parameters; ``chunk`` defaults to t*_lcm, the real system's batching limits to
    its CLI defaults (4096 tokens, 256 requests)."""
    if prefill_mode not in PREFILL_MODES:
        raise FieldError("prefill_mode", prefill_mode, "one of " + ", ".join(PREFILL_MODES))
    if decode_cap == "t_col":
        decode_cap = cm.t_star.t_col
    if isinstance(decode_cap, bool) or not isinstance(decode_cap, (int, np.integer)) or decode_cap < 0:
        raise FieldError("decode_cap", decode_cap, "an integer >= 0 (0: no cap) or 't_col'")
    if not isinstance(link_bandwidth, (int, float)) or not link_bandwidth >= 0 or link_bandwidth == np.inf:
        raise FieldError("link_bandwidth", link_bandwidth, "bytes per second >= 0 (0: instantaneous)")
    if prefill_nodes is not None:
        prefill_nodes = require_positive_int("prefill_nodes", prefill_nodes)
    return Params(prefill_nodes, prefill_mode,
                  require_positive_int("chunk", chunk if chunk is not None else cm.t_lcm),
                  require_positive_int("prefill_max_tokens", prefill_max_tokens),
                  require_positive_int("prefill_max_batch", prefill_max_batch), int(decode_cap),
                  float(link_bandwidth), cm.model.kv_bytes_per_token())


@njit(cache=True)
def _hand_off(st, ids, n):
    """The prefilled requests leave this node: their part here is done at the batch's end."""
    for q in range(n):
        st.t_finish[ids[q]] = st.clock
    st.n_done += n
    st.last_done = n


@njit(cache=True)
def prefill_loop(st, ct, prm, t_stop):
    """Algorithm 5, prefill node (lines 1-11).

    Implements Algorithm 5 (its prefill nodes).
    """
    mode, max_tokens, max_batch = prm.prefill_mode, prm.max_tokens, prm.max_batch
    ids = np.empty(max(max_batch, 1), dtype=np.int64)
    while running(st, t_stop):
        see_arrivals(st)                                                      # line 3
        if n_waiting(st) == 0:                                                # lines 4-6
            if not idle(st, t_stop):
                return DONE
            continue
        ids[0] = pop_waiting(st)                                              # line 7
        n = 1
        if mode == CHUNKED:
            if not prefill_whole(st, ct, ids[0]):                             # line 8 (chunked)
                push_waiting_front(st, ids[0])
                break
        else:
            if mode == BATCHED:
                tokens = st.lp[ids[0]]
                while (n < max_batch and n_waiting(st) > 0
                       and tokens + st.lp[st.wq[st.wq_head]] <= max_tokens):
                    ids[n] = pop_waiting(st)
                    tokens += st.lp[ids[n]]
                    n += 1
            if not prefill_batch(st, ct, ids, n):                             # line 8
                for q in range(n - 1, -1, -1):
                    push_waiting_front(st, ids[q])
                break
        _hand_off(st, ids, n)                                                 # lines 9-10
    return stop_code(st)


@njit(cache=True)
def decode_loop(st, ct, prm, t_stop):
    """Algorithm 5, decode node (lines 12-20).

    Implements Algorithm 5 (its decode nodes).
    """
    cap = prm.decode_cap
    while running(st, t_stop):
        see_arrivals(st)                                                      # line 14
        # with a cap, hand-offs wait FCFS until a slot frees: the decode set holds the batch
        # only, so removing a completion moves at most cap entries, not the whole backlog
        while n_waiting(st) > 0 and (cap == 0 or st.nd < cap):
            push_decode(st, pop_waiting(st))
        if st.nd == 0:                                                        # lines 15-17
            if not idle(st, t_stop):
                return DONE
            continue
        # a long set (no cap, fast mode, no KV memory): its events without rewriting the set at
        # each (the times and counters decode_run computes)
        if (cap == 0) & (st.nd >= LONG_SET) & (st.detail == 0) & (st.kv_on == 0) & (st.pc_on == 0):
            if not _offset_batches(st, ct, t_stop):
                continue
        na = st.nd if cap == 0 else min(cap, st.nd)
        # lines 18-19: one DI per active request, batch after batch; a hand-off joins the next
        # batch only if there is room for it
        if decode_run(st, ct, na, cap == 0 or na < cap, t_stop, BIG) < 0:
            break
    return stop_code(st)


@njit(cache=True)
def _offset_batches(st, ct, t_stop):
    """The decode node's events (no cap, fast mode, no KV memory) over a long decode set
    (:data:`stability.sim.engine.LONG_SET`), as :func:`stability.sim.engine.decode_run` runs them,
    without rewriting the set at every event, and with two batches' sums from each pass over it.

    After ``g`` batches, entry q's next position is ``d_pos[q] + g`` and its decodes left
    ``d_rem[q] - g``: an event advances ``g`` alone, a hand-off joins with its values less and
    plus ``g``, and a completed entry stays in place (skipped by the sums) until a quarter of the
    set is completed entries, when the set is compacted.

    * With a hand-off or ``t_stop`` ahead, a batch lasts ``T_fixed(|D|) + N sum_q T^{D,SA}(p_q)``
      (Eq. 7, the sum over the set in its order, as ``decode_run`` takes it). One pass over the
      set (:func:`_two_sums`) gives the sum of this batch and, in a second accumulator, the sum
      over the entries that outlive it, in the same order: the next batch's sum up to the
      hand-offs that join it, whose terms are added as they join. When the batch reaches the
      horizon the event is that batch, as ``decode_run`` runs it.
    * With nothing ahead, the event is ``decode_run``'s run of ``k`` batches to the next
      completion, ``k`` the fewest decodes left, lasting ``k T_fixed(|D|) + N sum_q (S(p_q + k - 1)
      - S(p_q - 1))``; its pass (:func:`_run_sum`) also finds the next event's ``k``.

    The additions are those ``decode_run`` makes, in its order. Stops, with the set written back
    in plain form, where ``decode_run`` would run more than one batch before the horizon (returns
    True: the caller runs that event through ``decode_run``), and where the set falls under
    ``LONG_SET`` or ``running`` stops (returns False); every time and counter is the one
    :func:`decode_loop` computes through ``decode_run``.
    """
    S = ct.S
    n_layers = ct.N
    d_id, d_pos, d_rem = st.d_id, st.d_pos, st.d_rem
    lp, ld, t_finish = st.lp, st.ld, st.t_finish
    n = st.nd  # entries in the arrays, completed ones included
    dead = 0
    g = 0
    fin = np.empty(d_id.size, dtype=np.int64)  # the batch's completions
    fin_next = np.empty(d_id.size, dtype=np.int64)  # the next batch's, known so far
    att_next = 0.0  # the next batch's sum so far
    n_next = 0
    have_next = False  # att_next and fin_next hold the next batch's
    k_next = -1  # with nothing ahead: the fewest decodes left (-1: not known)
    plain = False  # return value: the caller runs the next event through decode_run
    while running(st, t_stop):
        see_arrivals(st)
        while n_waiting(st) > 0:  # push_decode, in offset form
            j = pop_waiting(st)
            d_id[n] = j
            d_pos[n] = lp[j] + 1 - g
            d_rem[n] = ld[j] + g
            n += 1
            if have_next:
                p = lp[j] + 1
                att_next += S[p] - S[p - 1]
                if ld[j] == 1:
                    fin_next[n_next] = j
                    n_next += 1
        na = n - dead
        if na < LONG_SET:
            break
        now = st.clock
        horizon = t_stop - now
        if st.seen < st.n_loaded:
            horizon = min(horizon, st.arr[st.seen] - now)
        fixed = t_fixed(ct, na)
        if horizon == math.inf:  # decode_run's run to the next completion, k batches
            have_next = False
            if k_next < 0:
                k_next = _fewest_left(d_rem, n, g)
            k = k_next
            att, done, k_next = _run_sum(S, d_id, d_pos, d_rem, n, g, k, fin)
            total = k * fixed + n_layers * att
        else:
            k = 1
            if have_next:
                att = att_next
                done = n_next
                fin, fin_next = fin_next, fin
            else:
                att, done, att_next, n_next = _two_sums(S, d_id, d_pos, d_rem, n, g, fin, fin_next)
            total = fixed + n_layers * att
            if total < horizon:  # decode_run would run more batches before the horizon
                plain = True
                break
            have_next = not have_next
        st.n_event += 1
        clock = now + total
        st.clock = clock
        count_decode_batches(st, ct, na, k, total)
        for m in range(done):
            t_finish[fin[m]] = clock
        st.n_done += done
        st.last_done = done
        g += k
        dead += done
        if 4 * dead > n:
            n = _compact(d_id, d_pos, d_rem, n, g, 0)
            dead = 0
    st.nd = _compact(d_id, d_pos, d_rem, n, g, g)
    return plain


@njit(cache=True)
def _two_sums(S, d_id, d_pos, d_rem, n, g, fin, fin_next):
    """One pass over the first ``n`` entries of a decode set in :func:`_offset_batches`' form
    (``g`` batches on): the sum of ``T^{D,SA}(p)`` (differences of the prefix sums ``S``) of the
    next batch and of the batch after it over the entries that outlive the first, each in the
    set's order, and the entries each completes (in ``fin`` and ``fin_next``; their counts
    returned). A function of its own, on arrays: compiled inside the loop, the pass ran several
    times slower."""
    att = 0.0
    done = 0
    att_next = 0.0
    n_next = 0
    for q in range(n):
        left = d_rem[q] - g
        if left > 0:
            p = d_pos[q] + g
            att += S[p] - S[p - 1]
            if left > 1:
                att_next += S[p + 1] - S[p]
                if left == 2:
                    fin_next[n_next] = d_id[q]
                    n_next += 1
            else:
                fin[done] = d_id[q]
                done += 1
    return att, done, att_next, n_next


@njit(cache=True)
def _fewest_left(d_rem, n, g):
    """The fewest decodes left among the live entries of the first ``n`` (``g`` batches on)."""
    k = BIG
    for q in range(n):
        left = d_rem[q] - g
        if (left > 0) & (left < k):
            k = left
    return k


@njit(cache=True)
def _run_sum(S, d_id, d_pos, d_rem, n, g, k, fin):
    """One pass over the first ``n`` entries (``g`` batches on) for a run of ``k`` batches, ``k``
    the fewest decodes left: ``sum_q (S(p_q + k - 1) - S(p_q - 1))`` in the set's order (as
    :func:`stability.sim.engine.decode_cum`), the entries it completes (in ``fin``, their count
    returned) and the fewest decodes left after it among the others (``BIG`` if none)."""
    att = 0.0
    done = 0
    k_next = BIG
    for q in range(n):
        left = d_rem[q] - g
        if left > 0:
            p = d_pos[q] + g
            att += S[p + k - 1] - S[p - 1]
            if left == k:
                fin[done] = d_id[q]
                done += 1
            elif left - k < k_next:
                k_next = left - k
    return att, done, k_next


@njit(cache=True)
def _compact(d_id, d_pos, d_rem, n, g, shift):
    """Drop the completed entries (decodes left ``d_rem - g`` not positive) of the first ``n``,
    keeping the order, and move the rest ``shift`` batches on; returns how many are kept."""
    w = 0
    for q in range(n):
        if d_rem[q] - g > 0:
            d_id[w] = d_id[q]
            d_pos[w] = d_pos[q] + shift
            d_rem[w] = d_rem[q] - shift
            w += 1
    return w
