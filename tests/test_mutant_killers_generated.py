"""Tests written for generated mutants that the module tests left alive
(benchmarks/generated_mutants.py; the mutant's id is named in each test).

Each compares against an independent statement of what the code must do.
"""

import numpy as np
from numba import njit

from stability.sim import engine


@njit
def log_sizes(st):
    """(rows, iteration rows) of a state's batch log."""
    return st.b_start.size, st.it_req.size


def test_grow_log_doubles_both_logs_past_their_floors():
    """``grow_log`` doubles the batch log's rows and its iteration rows; the floors (1,024 rows,
    4,096 iterations) only lift a smaller log. A log already past a floor that did not double
    could not take the next batch, and ``run_loop`` would ask it to grow forever.

    Kills ``stability/sim/engine.py:87:63:ReplaceBinaryOperator_Mul_BitAnd:2``
    (``2 * st.it_req.size`` -> ``2 & st.it_req.size``), which no engine test reached: their logs
    never grew past 4,096 iterations."""
    rec = engine.Recording(detail=True, log=True, log_rows=2048)
    st = engine.new_state(np.array([0.0]), np.array([4]), np.array([2]), recording=rec)
    rows, items = log_sizes(st)
    assert rows >= 1024 and items >= 4096  # both past their floors
    engine.grow_log(st)
    assert log_sizes(st) == (2 * rows, 2 * items)
