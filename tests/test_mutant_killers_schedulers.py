"""Schedulers run with their *default* parameters, checked batch by batch against the paper.

Written to kill mutants (see ``benchmarks/mutation.py``) that the engine-vs-reference tests let
through because they hand the reference the engine's own parameters: RAD's and Algorithm 2's
prefill chunk must be t*_lcm = LCM(t*_row, t*_col, t*_red) (Algorithm 1, line 13), their decode
batches hold at most t*_col requests, and request-level batching admits at most t*_col prompts.
The expected values come from the toy GPUs' tile triples (``tests/toys.py``) and ``math.lcm``,
and each batch log is replayed against them.
"""

import math

import numpy as np
import pytest

from stability.sim.registry import get_scheduler
from tests import reference_sim as ref
from tests.toys import toy_cost_model

try:  # the simulator modules are moving into stability.sim
    from stability.sim.gpu import RunOptions, run_gpu
except ImportError:
    from stability.sim.gpu import RunOptions, run_gpu

# t* of each toy GPU as its TOML pins it: (t_row, t_col, t_red)
T_STAR = {"toy2": (8, 2, 8), "toy4": (16, 4, 16), "toy8": (16, 8, 32)}


def burst(m, seed, max_prompt=70, max_output=12):
    """``m`` requests at time 0 followed by a few later ones; prompts not multiples of a tile."""
    rng = np.random.default_rng(seed)
    L_P = rng.integers(1, max_prompt + 1, size=m)
    L_D = rng.integers(1, max_output + 1, size=m)
    arrival = np.concatenate([np.zeros(m - m // 4), np.cumsum(rng.exponential(5e-3, m // 4))])
    return arrival, L_P, L_D


def logged_run(name, key, m=24, seed=0, **params):
    cm = toy_cost_model(key)
    sch = get_scheduler(name)
    arrival, L_P, L_D = burst(m, seed)
    run = run_gpu(cm, sch, sch.make_params(cm, **params), arrival, L_P, L_D,
                  options=RunOptions(detail=True, log=True))
    assert np.all(np.isfinite(run.t_finish))
    return cm, run, L_P


@pytest.mark.parametrize("name", ["rad", "alg2"])
@pytest.mark.parametrize("key", sorted(T_STAR))
def test_default_prefill_chunks_are_t_lcm(name, key):
    """Every prefill chunk of request j is PI(j, 1 + k t*_lcm, min(t*_lcm, L^P - k t*_lcm)), alone
    in its batch, and the chunks cover the prompt in order."""
    t_lcm = math.lcm(*T_STAR[key])
    _, run, L_P = logged_run(name, key, n=5)
    items, batches = run.items, run.batches
    assert items["request"].size > 0
    for j in range(L_P.size):
        mine = np.flatnonzero(items["request"] == j)
        prefills = mine[items["c"][mine] > 0]
        order = prefills[np.argsort(items["batch"][prefills], kind="stable")]
        starts = 1 + t_lcm * np.arange(-(-int(L_P[j]) // t_lcm))
        assert items["i"][order].tolist() == starts.tolist()
        assert items["c"][order].tolist() == np.minimum(t_lcm, L_P[j] - starts + 1).tolist()
        for b in items["batch"][order]:
            assert batches["prefills"][b] == 1 and batches["decodes"][b] == 0


@pytest.mark.parametrize("name", ["rad", "alg2"])
@pytest.mark.parametrize("key", sorted(T_STAR))
def test_default_decode_batches_fill_t_col(name, key):
    """With a burst of requests and n larger than t*_col, decode batches hold at most t*_col
    requests and some hold exactly t*_col; no batch mixes prefills and decodes."""
    t_col = T_STAR[key][1]
    _, run, _ = logged_run(name, key, n=3 * t_col)
    dec, pre = run.batches["decodes"], run.batches["prefills"]
    assert dec.max() == t_col
    assert np.all((dec == 0) | (pre == 0))


@pytest.mark.parametrize("key", sorted(T_STAR))
def test_request_level_default_batch_is_t_col(key):
    """Algorithm 3 with b = t*_col: each prefill batch holds whole prompts PI(R, 1, L^P) of at
    most t*_col requests, and a burst fills one with exactly t*_col."""
    t_col = T_STAR[key][1]
    _, run, L_P = logged_run("request_level", key)
    pre = run.batches["prefills"]
    assert pre.max() == t_col
    items = run.items
    prefill = items["c"] > 0
    assert np.all(items["i"][prefill] == 1)
    assert np.array_equal(items["c"][prefill], L_P[items["request"][prefill]])


@pytest.mark.parametrize("key", sorted(T_STAR))
@pytest.mark.parametrize("seed", range(3))
def test_default_rad_equals_the_reference_with_the_papers_parameters(key, seed):
    """RAD with its defaults against the naive reference given n, t*_col and t*_lcm from the tile
    triple: the same finish times."""
    cm = toy_cost_model(key)
    t_row, t_col, t_red = T_STAR[key]
    arrival, L_P, L_D = burst(20, seed)
    sch = get_scheduler("rad")
    run = run_gpu(cm, sch, sch.make_params(cm, n=4), arrival, L_P, L_D)
    sim, _ = ref.rad(cm, arrival, L_P, L_D, 4, t_col, math.lcm(t_row, t_col, t_red))
    assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0)
