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

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.sim.engine import (
    BIG,
    DONE,
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
        na = st.nd if cap == 0 else min(cap, st.nd)
        # lines 18-19: one DI per active request, batch after batch; a hand-off joins the next
        # batch only if there is room for it
        if decode_run(st, ct, na, cap == 0 or na < cap, t_stop, BIG) < 0:
            break
    return stop_code(st)
