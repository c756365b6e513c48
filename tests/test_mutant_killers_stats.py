"""Tests written for generated mutants of the statistics modules (``theory/stats.py``,
``theory/validation/errors.py``) that their module tests left alive (benchmarks/generated_mutants.py;
the mutant's id is named in each test).

Each compares against an independent statement of what the code must do.
"""

import math

import numpy as np
import pytest

from theory.validation.errors import ErrorStats, Summary


@pytest.mark.parametrize("values", [[], [math.nan], [math.inf, -math.inf, math.nan]])
def test_a_summary_of_no_finite_value_counts_none(values):
    """``Summary.of`` and ``ErrorStats.of`` summarise the finite entries only: with none, the count
    is 0 and every statistic is None.

    Kills ``theory/validation/errors.py:58:23:NumberReplacer:6`` (``cls(0, None, ...)`` ->
    ``cls(1, None, ...)``: one value counted where there is none), which no test summarised."""
    assert Summary.of(values) == Summary(0, None, None, None, None, None)
    assert ErrorStats.of(values).n == 0


def test_a_summary_counts_and_orders_the_finite_values():
    """The count, the least and the largest of the finite entries, restated by hand, and the
    median between them."""
    s = Summary.of([3.0, math.nan, 1.0, 2.0, math.inf, 10.0])
    assert (s.n, s.low, s.high, s.median) == (4, 1.0, 10.0, 2.5)
    assert s.p10 == pytest.approx(np.percentile([1.0, 2.0, 3.0, 10.0], 10), rel=1e-12)
