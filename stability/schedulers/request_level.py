"""Request-level batching (Algorithm 3, Appendix E.1; FasterTransformer's static batching).

DECODE mode runs one DI for every decode-phase request per batch until all have finished; then
PREFILL mode takes up to ``b`` waiting requests FCFS and prefills their full prompts together in
one batch (``PI(R, 1, L^P)`` each), and switches back to DECODE.

Correction: line 5 tests ``mode = Prefill`` where it must test ``mode = Decode`` (as printed the
loop never schedules anything: mode starts as Decode and both branches test Prefill). When both
queues are empty the scheduler waits for an arrival instead of spinning between modes.

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 3, Appendix E.1.
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
    push_decode,
    push_waiting_front,
    running,
    see_arrivals,
    stop_code,
)
from theory.cost import CostModel
from theory.errors import require_positive_int

NAME = "request_level"
DECODE, PREFILL = 0, 1  # mode starts as Decode (line 2)


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    b: int  # requests prefilled together (line 14)


@dataclass(frozen=True)
class Params:
    """Batch size b: requests admitted together (Algorithm 3's "Require: Batch size b")."""

    b: int

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.b))


def make_params(cm: CostModel, b: int | None = None) -> Params:
    """Default b = t*_col, the batch that fills the optimal tile."""
    return Params(require_positive_int("b", b if b is not None else cm.t_star.t_col))


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm 3 (line 5 corrected), one decision per iteration, until t_stop.

    Implements Algorithm 3.
    """
    b = prm.b
    ids = np.empty(b, dtype=np.int64)
    while running(st, t_stop):
        see_arrivals(st)                                                      # line 4
        if st.mode == DECODE:                                                 # line 5 (corrected)
            if st.nd > 0:                                                     # lines 6-8
                if decode_run(st, ct, st.nd, False, t_stop, BIG) < 0:
                    break
            else:
                st.mode = PREFILL                                             # line 10
        elif n_waiting(st) > 0:                                               # lines 12-13
            k = min(b, n_waiting(st))                                         # line 14
            for q in range(k):
                ids[q] = pop_waiting(st)
            if not prefill_batch(st, ct, ids, k):                             # lines 15-18
                for q in range(k - 1, -1, -1):
                    push_waiting_front(st, ids[q])
                break
            for q in range(k):
                push_decode(st, ids[q])
            st.mode = DECODE                                                  # line 20
        elif not idle(st, t_stop):
            return DONE
    return stop_code(st)
