"""Tests written for generated mutants of :mod:`theory.capacity` that its module tests left alive
(benchmarks/generated_mutants.py; the mutant's id is named in each test).

Each compares against an independent statement of what the code must do.
"""

import re

from theory.builder import CostSpec, cost_model
from theory.capacity import Schedules, check_bound_against
from theory.workload import get_workload


def test_a_refuted_claim_states_by_how_much_a_schedule_beats_it():
    """A claimed capacity that a feasible schedule beats is refuted with the excess, the
    schedule's throughput over the claim minus one, restated here from the returned numbers.
    Each claim is a fraction of the best schedule's throughput, so the excess is known in advance.

    Kills ``theory/capacity/check.py:114:68:ReplaceBinaryOperator_Sub_Pow:1``
    (``best / claimed - 1`` -> ``best / claimed ** 1``: the ratio printed as the excess), which no
    test read: they checked the verdict and "not an upper bound" only."""
    cm = cost_model(CostSpec("a100", "mistral-7b"))
    w = get_workload("deterministic:256,1")
    schedules = Schedules(groups=(1, 128), chunks=(128, 256))
    best = check_bound_against(1.0, cm, w, schedules=schedules).best_feasible
    for fraction in (0.5, 0.8):
        res = check_bound_against(fraction * best, cm, w, schedules=schedules)
        assert res.verdict == "FAIL" and "not an upper bound" in res.reason
        excess = float(re.search(r"\(\+([0-9.]+)%\)", res.reason).group(1)) / 100
        assert abs(excess - (1 / fraction - 1)) < 1e-5
