"""The checks' shortcuts compute what they replace, float for float: a check's verdict and evidence
do not depend on them (sec5.sarathi_tiling's batch-at-once efficiencies, the cycle checks'
remembered toy batch times)."""

from __future__ import annotations

import pytest

from paper_checks.appendix_c import toy_batch_time, toy_cost_model, toy_max_times
from paper_checks.common import PAPER_MODEL, gpus
from paper_checks.section5_claims import budget_efficiencies, sarathi_batches
from theory import cost
from theory.bounds import T_max
from theory.builder import CostSpec, cost_model


@pytest.mark.parametrize("gpu", gpus()[:3])
@pytest.mark.parametrize("budget", [256, 1024])
def test_budget_efficiencies_are_tiling_efficiency_batch_by_batch(gpu, budget):
    cm = cost_model(CostSpec(gpu, PAPER_MODEL))
    batches = sarathi_batches(cm.t_star.t_lcm, budget, 37, (0, 128, 1000, 2048))
    got = budget_efficiencies(cm, budget, batches).tolist()
    want = [
        cost.tiling_efficiency(cm, cost.Batch.of(prefill=[(i, c)], decode=[i + c] * nd))
        for nd, i, c in batches
    ]
    assert got == want  # exactly: the same floats
    assert min(want) < 1.0  # the comparison sees sub-optimal batches, not only the clamp at 1


def test_remembered_toy_times_are_the_cost_model_s():
    tile = (4, 2, 2)
    cm = toy_cost_model(*tile)
    for prefill, decode in [((), (3,)), (((1, 4),), ()), (((5, 4),), (9, 10, 12))]:
        want = cost.T_batch(cm, cost.Batch.of(prefill=list(prefill), decode=list(decode)))
        assert toy_batch_time(tile, prefill, decode) == want
    t_max, prefix = toy_max_times(tile, 8, 4)
    assert t_max == T_max(cm, 8, 4)
    assert prefix.tolist() == cost.decode_prefix(cm, 12).tolist()
