"""The compiled engine against the naive reference simulator: identical finish times.

Random small scenarios (hypothesis): lengths, arrival rates, n, t_col, seeds. The reference
(tests/reference_sim.py) steps one batch at a time with plain Python and theory.cost.T_batch.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.registry import get_scheduler
from tests import reference_sim as ref
from tests.toys import toy_cost_model

SCENARIOS = 100


@st.composite
def scenarios(draw):
    key = draw(st.sampled_from(["toy2", "toy4", "toy8"]))
    cm = toy_cost_model(key, draw(st.sampled_from(["paper", "real"])))
    m = draw(st.integers(1, 30))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    L_P = rng.integers(1, draw(st.integers(1, 90)) + 1, size=m)
    if draw(st.booleans()):  # Assumption 3 on half of the scenarios
        L_P = -(-L_P // cm.t_lcm) * cm.t_lcm
    L_D = rng.integers(1, draw(st.integers(1, 25)) + 1, size=m)
    if draw(st.booleans()):  # equal output lengths: decodes finish together
        L_D = np.full(m, int(L_D[0]))
    # batches take ~1-20 ms here; mean gaps from 0.1 ms (heavy load) to 50 ms (light)
    gap = draw(st.sampled_from([1e-4, 1e-3, 5e-3, 2e-2, 5e-2]))
    arrival = np.cumsum(rng.exponential(gap, size=m))
    if draw(st.booleans()):
        arrival[: m // 2] = 0.0  # a burst at time 0
    return cm, arrival, L_P, L_D, draw(st.integers(1, 12))


def assert_same(engine_times, ref_times):
    a = np.asarray(engine_times)
    b = np.asarray(ref_times)
    assert np.allclose(a, b, rtol=1e-9, atol=0), np.max(np.abs(a - b) / np.abs(b))


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_rad(detail, sc):
    cm, arrival, L_P, L_D, n = sc
    sch = get_scheduler("rad")
    p = sch.make_params(cm, n=n)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=detail))
    sim, cycles = ref.rad(cm, arrival, L_P, L_D, p.n, p.t_col, p.chunk)
    assert_same(run.t_finish, [r.finish for r in sim.reqs])
    assert_same(run.t_first, [r.first for r in sim.reqs])
    closed = cycles[:-1]
    assert np.allclose(run.cycles["start"], [c[0] for c in closed], rtol=1e-9)
    assert run.cycles["x"].tolist() == [c[1] for c in closed]
    assert run.counters["n_batch"] == len(sim.batches)


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_alg2(detail, sc):
    cm, arrival, L_P, L_D, n = sc
    sch = get_scheduler("alg2")
    p = sch.make_params(cm, n=n)
    run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=detail))
    sim = ref.alg2(cm, arrival, L_P, L_D, p.n, p.t_col, p.chunk)
    assert_same(run.t_finish, [r.finish for r in sim.reqs])
    assert run.counters["n_batch"] == len(sim.batches)


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_request_level(detail, sc):
    cm, arrival, L_P, L_D, b = sc
    sch = get_scheduler("request_level")
    run = run_gpu(cm, sch, sch.make_params(cm, b=b), arrival, L_P, L_D, options=RunOptions(detail=detail))
    sim = ref.request_level(cm, arrival, L_P, L_D, b)
    assert_same(run.t_finish, [r.finish for r in sim.reqs])
    assert run.counters["n_batch"] == len(sim.batches)
