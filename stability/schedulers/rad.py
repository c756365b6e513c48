"""RAD, the Resource-Aware Dynamic scheduler (Algorithm 1), exactly as written.

Parameters: ``n`` (requests started per cycle), the optimal tile's ``t_col`` (decode batch size for
optimal tiling) and the prefill chunk ``t_lcm`` = LCM(t*_row, t*_col, t*_red). One deliberate
correction: line 13 reads ``c = min{t_lcm, L^P(R) - i}``, which with i starting at 1 never prefills
the last prompt token; the chunk here is ``min{t_lcm, L^P(R) - i + 1}`` (see ``paper_checks``).

A cycle starts when the decode set empties (line 9) and the engine records each cycle's start,
X[c] (pending requests at its start), requests started and completed (Appendix C.1).

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 1, Section 4.2, Appendix C.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import (
    BIG,
    DONE,
    begin_cycle,
    decode_run,
    end_cycle,
    idle,
    n_waiting,
    pop_waiting,
    prefill_whole,
    push_decode,
    push_waiting_front,
    running,
    see_arrivals,
    stop_code,
)
from theory.cost import CostModel
from theory.errors import require_positive_int

NAME = "rad"


class Record(NamedTuple):
    """What the compiled loop reads, by name (the chunk is the cost tables' ``ct.chunk``)."""

    n: int  # requests started per cycle (line 6: requests_in_cycle = n)
    t_col: int  # decode-set size that stops admitting prefills (line 6: |D| = t*_col)


@dataclass(frozen=True)
class Params:
    """RAD's parameters: n (Theorem 2), t_col (decodes per batch), chunk (t*_lcm)."""

    n: int
    t_col: int
    chunk: int

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.n), int(self.t_col))


def make_params(cm: CostModel, n: int = 1000, t_col: int | None = None, chunk: int | None = None
                ) -> Params:
    """RAD's parameters with t_col and chunk defaulting to the optimal tile's t*_col and t*_lcm."""
    return Params(require_positive_int("n", n),
                  require_positive_int("t_col", t_col if t_col is not None else cm.t_star.t_col),
                  require_positive_int("chunk", chunk if chunk is not None else cm.t_lcm))


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm 1, one decision per iteration, until t_stop.

    Implements Algorithm 1.
    """
    n, t_col = prm.n, prm.t_col
    while running(st, t_stop):
        see_arrivals(st)                                                      # line 4
        if st.cyc_open == 0:
            begin_cycle(st)
        nd = st.nd
        if n_waiting(st) == 0 and nd == 0:                                    # line 5
            if not idle(st, t_stop):
                return DONE
        elif nd == t_col or n_waiting(st) == 0 or st.rc == n:                 # line 6
            # lines 7-8: one DI per request in D, batch after batch; an arrival matters only
            # when it would start a prefill (|D| < t_col and fewer than n started)
            if decode_run(st, ct, nd, nd < t_col and st.rc < n, t_stop, BIG) < 0:
                break
            if st.nd == 0:                                                    # line 9
                end_cycle(st)
        else:
            j = pop_waiting(st)                                               # line 11
            if not prefill_whole(st, ct, j):                                  # lines 12-16
                push_waiting_front(st, j)  # the batch log is full: retry after it grows
                break
            push_decode(st, j)                                                # line 17
            st.rc += 1                                                        # line 18
    return stop_code(st)
