"""Sarathi-Serve as the paper writes it (Algorithm 4, Appendix E.2).

Each batch holds one DI for every decode-phase request (lines 5-9), then prefill chunks of the
prefill-phase requests in arrival order until the token budget is spent (lines 10-17).

Evident corrections of the printed pseudo-code:

* line 12's chunk is ``min{tau_budget - tau, L^P - i + 1}`` (as printed, with ``L^P - i``, the
  last prompt token is never prefilled), and the inner while loop (line 11) also stops when the
  request's prefill is complete (as printed it would add empty chunks forever), so each request
  gets at most one chunk per batch;
* all of D is scheduled even when ``|D| >= tau_budget`` (the text says this cannot happen; it can,
  and then no prefill runs until decodes finish).

There is no admission limit and no memory model: P is every arrived request not yet prefilled
(the paper's Assumption 4 setting). Where nothing can join the decode set (no prefill-phase
request, or the budget spent by decodes) the decode batches run as one event until the next
completion, cut after an arrival when one could join. In fast mode, the batches in which the
decodes and a chunk of the oldest prefill-phase request spend the whole budget run as one event
too (:func:`stability.sim.mixed.chunk_run`).

Option: ``chunk_size`` (tau_budget, default 512; the paper's Section 5 takes it as a multiple of
t*_col).

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 4, Appendix E.2, Section 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import BIG, DONE, decode_run, idle, log_has_room, running, stop_code
from stability.sim.mixed import (
    add_chunk,
    admit,
    chunk_run,
    mixed_arrays,
    run_mixed,
    w_len,
    w_pop,
    w_refresh,
)
from theory.cost import CostModel
from theory.errors import require_positive_int

NAME = "sarathi_paper"


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    budget: int  # tau_budget, tokens per batch (decodes count one each)


@dataclass(frozen=True)
class Params:
    """Token budget tau_budget (Algorithm 4's "Require: Token budget")."""

    chunk_size: int

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.chunk_size))


def make_params(cm: CostModel, chunk_size: int = 512) -> Params:
    """Default tau_budget = 512, Sarathi-Serve's default chunk size."""
    return Params(require_positive_int("chunk_size", chunk_size))


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm 4 (lines 11-12 corrected), one batch per decision.

    Implements Algorithm 4.
    """
    budget = prm.budget
    mixed_arrays(st)
    while running(st, t_stop):
        w_refresh(st, False)                                                  # line 3
        if st.nd == 0 and st.np == 0 and w_len(st, False) == 0:
            if not idle(st, t_stop):
                return DONE
            continue
        if st.nd >= budget or (st.np == 0 and w_len(st, False) == 0):
            # lines 5-9 with no room or no request for a prefill chunk: decode-only batches
            if decode_run(st, ct, st.nd, st.nd < budget, t_stop, BIG) < 0:
                break
            continue
        if st.np > 0 and st.detail == 0 and st.pl[st.p_id[0]] - st.pg[st.p_id[0]] >= 2 * (budget - st.nd):
            # the oldest prefill fills the budget batch after batch (a run is two batches or more)
            if chunk_run(st, ct, st.p_id[0], budget - st.nd, t_stop) >= 0:
                continue
        if not log_has_room(st, 1, st.nd + st.np + min(w_len(st, False), budget)):
            break
        tau = st.nd                                                           # lines 5-9
        for q in range(st.np):                                                # line 10: P in
            j = st.p_id[q]                                                    # arrival order,
            if tau < budget:                                                  # started ones
                c = min(budget - tau, st.pl[j] - st.pg[j])                    # first
                add_chunk(st, j, c)                                           # lines 11-16
                tau += c
        while tau < budget and w_len(st, False) > 0:
            j = w_pop(st, False)
            admit(st, j)
            c = min(budget - tau, st.pl[j])                                   # line 12
            add_chunk(st, j, c)                                               # line 13
            tau += c                                                          # lines 14-15
        run_mixed(st, ct, st.nd)                                              # lines 18-28
    return stop_code(st)
