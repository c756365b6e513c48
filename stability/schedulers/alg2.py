"""Algorithm 2 (Appendix D): cycles of up to n prefills first, then decodes in batches of t_col.

In PREFILL mode it completes the prefills of up to ``n`` waiting requests, FCFS, each alone in
chunks of t*_lcm (lines 3-13). In DECODE mode it activates the first ``t_col`` decode-phase
requests and runs one DI for each active request per batch, refilling the active set from the
decode queue as requests finish (lines 14-20), until all requests of the cycle are done.

Choices where the text is silent or wrong: line 7's chunk is ``min{t_lcm, L^P - i + 1}`` (as
printed it misses the last token, see ``paper_checks``); a cycle that finds nothing to do waits
for the next arrival instead of spinning through empty cycles, so its idle time belongs to the
cycle, as in RAD (Lemma 4's convention).

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 2, Appendix D.
"""

from __future__ import annotations

from numba import njit

from stability.schedulers.rad import Params, Record, make_params  # same parameters: n, t_col, chunk
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

NAME = "alg2"
PREFILL, DECODE = 0, 1
__all__ = ["NAME", "Params", "Record", "loop", "make_params"]


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm 2, one decision per iteration, until t_stop.

    Implements Algorithm 2.
    """
    n, t_col = prm.n, prm.t_col
    while running(st, t_stop):
        see_arrivals(st)
        if st.cyc_open == 0:
            begin_cycle(st)                                                   # line 3
        if st.mode == PREFILL:
            if n_waiting(st) > 0 and st.rc < n:                               # line 4
                j = pop_waiting(st)                                           # line 5
                if not prefill_whole(st, ct, j):                              # lines 6-10
                    push_waiting_front(st, j)
                    break
                push_decode(st, j)                                            # line 11
                st.rc += 1                                                    # line 12
            elif st.rc == 0 and st.nd == 0:
                if not idle(st, t_stop):
                    return DONE
            else:
                st.mode = DECODE                                              # line 14
                st.na = min(t_col, st.nd)                                     # line 15
        elif st.na > 0:                                                       # line 16
            # lines 17-18: one DI per active request, batch after batch, until one finishes;
            # arrivals do not change what DECODE mode does
            done = decode_run(st, ct, st.na, False, t_stop, BIG)
            if done < 0:
                break
            st.na = min(t_col, st.nd)                                         # line 19
        else:
            st.mode = PREFILL
            end_cycle(st)                                                   # back to line 3
    return stop_code(st)
