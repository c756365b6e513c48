"""The engine's cost tables are kept per cost model (stability.sim.gpu.tables_for): a kept table
that covers more positions serves a run that needs fewer, which is sound only because no entry of
a table depends on how many positions it covers. These tests check that premise on cost models
with each kind of term, and that a run on a kept, larger table is the run on its own tables."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from numba import njit

from stability.schedulers import sarathi
from stability.sim import gpu
from stability.sim.kernels import build_tables
from stability.sim.structs import COST_FIELDS
from theory.builder import CostSpec, cost_model

EXAMPLE = str(resources.files("theory").joinpath("data", "cost_terms_example.toml"))
SPECS = [
    CostSpec("a100", "mistral-7b"),  # paper mode, Eq. 2-7
    CostSpec("a100", "mistral-7b", "real"),  # a measured-profile law
    CostSpec("h100", "llama-2-7b", "real"),  # calibrated, with terms
    CostSpec("rtxpro6000", "qwen3-30b-a3b", "real"),  # a mixture of experts
    CostSpec("a100-roofline", "mistral-lm-head", "real", gpu_file=EXAMPLE, model_file=EXAMPLE),
    CostSpec("a100-vllm-engine", "mistral-7b", "real", gpu_file=EXAMPLE),
    CostSpec("lidaipeng", "mistral-no-attention", gpu_file=EXAMPLE, model_file=EXAMPLE),
]
PER_POSITION = ("S", "pre_time", "pre_waste", "pre_not_opt")  # entries 0..max_pos


_SOURCE = f"def _all_fields(ct):\n    return ({', '.join(f'ct.{name}' for name in COST_FIELDS)},)\n"
_namespace: dict = {}
exec(_SOURCE, _namespace)  # a compiled reader of every field (the record has no Python accessors)
_all_fields = njit(_namespace["_all_fields"])


def fields(ct) -> dict:
    return dict(zip(COST_FIELDS, _all_fields(ct), strict=True))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.gpu}-{s.model}-{s.mode}")
def test_no_table_entry_depends_on_the_positions_covered(spec):
    cm = cost_model(spec)
    small, large = build_tables(cm, 700), build_tables(cm, 2300)
    a, b = fields(small), fields(large)
    for name in COST_FIELDS:
        if name in PER_POSITION:
            assert a[name].size == 701 and b[name].size == 2301
            np.testing.assert_array_equal(a[name], b[name][:701], err_msg=name)
        elif name == "S2":  # S, then the mixed-decode sums from m_off
            for x, y in zip(np.split(a[name], [a["m_off"]]), np.split(b[name], [b["m_off"]]), strict=True):
                np.testing.assert_array_equal(x, y[: x.size], err_msg=name)
        elif name != "m_off":
            np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]), err_msg=name)


def test_a_kept_larger_table_runs_what_the_requests_own_tables_run():
    """Two-sided in effect: the kept table is reused (same object) and the run on it equals, to
    the bit, the run on tables built for exactly these requests."""
    cm = cost_model(CostSpec("a100", "mistral-7b", "real"))
    rng = np.random.default_rng(5)
    n = 300
    arrival = np.cumsum(rng.exponential(0.05, n))
    L_P, L_D = rng.integers(1, 900, n), rng.integers(1, 200, n)
    params = sarathi.make_params(cm, chunk_size=512)
    big = gpu.tables_for(cm, [4000], [4000], getattr(params, "chunk", None))
    assert gpu.tables_for(cm, L_P, L_D, getattr(params, "chunk", None)) is big
    own = build_tables(cm, int(np.max(L_P + L_D)) + 1, getattr(params, "chunk", None))
    kept = gpu.run_gpu(cm, sarathi, params, arrival, L_P, L_D)
    fresh = gpu.run_gpu(cm, sarathi, params, arrival, L_P, L_D, options=gpu.RunOptions(tables=own))
    for name in ("t_start", "t_first", "t_finish"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(fresh, name), err_msg=name)
    assert kept.busy == fresh.busy and kept.clock == fresh.clock


def test_a_table_too_small_for_the_requests_is_rebuilt():
    cm = cost_model(CostSpec("a100", "mistral-7b"))
    first = gpu.tables_for(cm, [10], [10], 64)
    second = gpu.tables_for(cm, [5000], [10], 64)
    assert second is not first and fields(second)["S"].size == 5012
    assert gpu.tables_for(cm, [10], [10], 64) is second
