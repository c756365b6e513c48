"""Nested WAIT (stability.schedulers.nested_wait) against its naive reference
(tests/reference_nested_wait.py): identical per-request times, batch and token counts and peak KV
use on random small scenarios; one case worked by hand; bad options refused by name."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.registry import get_scheduler
from tests import reference_nested_wait as ref
from tests.test_schedulers_vs_reference import assert_close, assert_same, picker
from tests.toys import flat_cost_model, toy_cost_model
from theory.errors import FieldError

SCENARIOS = 100


def scenario(pick):
    """1-3 segments with thresholds 1-4; output lengths on the boundaries, between them and past the
    last one (the open segment); a cache from a few blocks (overflow) to plenty."""
    cm = toy_cost_model(pick(["toy2", "toy4", "toy8"]), pick(["paper", "real"]))
    rng = np.random.default_rng(pick(range(2**16)))
    m = pick([1, 2, 3])
    boundaries = tuple(int(x) for x in np.cumsum(rng.integers(1, 5, size=m)))
    thresholds = tuple(int(x) for x in rng.integers(1, 5, size=m))
    k = pick(range(1, 41))
    L_P = rng.integers(1, 30, size=k)
    on_boundary = rng.random(k) < pick([0.0, 0.5, 1.0])
    L_D = np.where(on_boundary, rng.choice(boundaries, size=k), rng.integers(1, boundaries[-1] + 4, size=k))
    arrival = np.cumsum(rng.exponential(pick([1e-4, 1e-3, 2e-2]), size=k))
    if pick([False, True]):
        arrival[: k // 2] = 0.0
    block = pick([1, 2, 4])
    kv = {"block_size": block, "kv_blocks": pick([4, 40, 10**6]) // block}
    return cm, arrival, L_P, L_D, boundaries, thresholds, kv


@pytest.mark.parametrize("detail", [False, True])
@settings(max_examples=SCENARIOS, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_nested_wait_matches_the_reference(detail, data):
    cm, arrival, L_P, L_D, boundaries, thresholds, kv = scenario(picker(data))
    sch = get_scheduler("nested_wait")
    prm = sch.make_params(cm, boundaries=boundaries, thresholds=thresholds, **kv)
    run = run_gpu(cm, sch, prm, arrival, L_P, L_D, options=RunOptions(detail=detail))
    mem = ref.CountedBlocks(kv["kv_blocks"], kv["block_size"], 0, "vllm")
    sim = ref.nested_wait(cm, arrival, L_P, L_D, boundaries, thresholds, mem)
    assert_same(run, sim, detail, mem)
    assert np.all(np.isfinite(run.t_finish))  # a finite run drains
    run = run_gpu(cm, sch, sch.make_params(cm), arrival, L_P, L_D, options=RunOptions(detail=detail))
    assert_same(run, ref.nested_wait(cm, arrival, L_P, L_D), detail)  # one open segment, n = 1




def test_nested_wait_by_hand():
    """Boundaries (1, 2), thresholds (2, 1), prompts of 2 tokens, outputs 1, 2, 2, 1 arriving at 0,
    0, 0, 0 and one more at 5 (output 2): the scheduler cannot tell them apart until the first
    boundary."""
    cm = flat_cost_model()
    sch = get_scheduler("nested_wait")
    arrival = np.array([0.0, 0.0, 0.0, 0.0, 5.0])
    L_D = np.array([1, 2, 2, 1, 2])
    prm = sch.make_params(cm, boundaries=(1, 2), thresholds=(2, 1), kv_blocks=100)
    run = run_gpu(cm, sch, prm, arrival, np.full(5, 2), L_D, options=RunOptions(detail=False))
    # batch 1 [0, .5): prefill 0, 1 (segment 1's threshold 2 met; 2, 3 wait)
    # batch 2 [.5, 1): prefill 2, 3; decode 0 (done), 1 (-> boundary of segment 2: one, n_2 = 1)
    # at 1 segment 1 has none waiting: nothing runs until the last arrival at 5, and then the run
    #   drains: batch 3 [5, 5.5): prefill 4; decode 2 (-> boundary), 3 (done), 1 (done)
    # batch 4 [5.5, 6): decode 2 (done), 4 (-> boundary); batch 5 [6, 6.5): decode 4 (done)
    assert_close(run.t_first, [0.5, 0.5, 1.0, 1.0, 5.5])
    assert_close(run.t_finish, [1.0, 5.5, 6.0, 5.5, 6.5])
    assert run.counters["n_batch"] == 5
    # batch 3 holds the most: prompt 4 (2 tokens), 2 and 3 at their first decode (3 each), 1 at its
    # second (4)
    assert run.kv["peak"] == 2 + 3 + 3 + 4
    sim = ref.nested_wait(cm, arrival, np.full(5, 2), L_D, (1, 2), (2, 1))
    assert_close(run.t_finish, [r.finish for r in sim.reqs])


def test_nested_wait_overflow_shows_in_the_peak():
    """A cache smaller than the no-overflow dynamics need: the run is the same, its peak above it."""
    cm = flat_cost_model()
    sch = get_scheduler("nested_wait")
    arrival, L_P, L_D = np.zeros(6), np.full(6, 4), np.array([1, 3, 1, 3, 1, 3])
    runs = [
        run_gpu(
            cm,
            sch,
            sch.make_params(cm, boundaries=(1, 3), thresholds=(3, 2), kv_blocks=kv),
            arrival,
            L_P,
            L_D,
            options=RunOptions(detail=False),
        )
        for kv in (10, 10**6)
    ]
    assert_close(runs[0].t_finish, runs[1].t_finish)
    assert runs[0].kv["peak"] == runs[1].kv["peak"] > runs[0].kv["blocks"] == 10


def test_nested_wait_bad_options():
    from stability.schedulers.nested_wait import make_params, threshold_memory

    cm = toy_cost_model("toy4", "paper")
    prm = make_params(cm, boundaries="16,64", thresholds="10,6", kv_blocks=10**6)
    assert (prm.boundaries, prm.thresholds, prm.kv.on) == ((16, 64), (10, 6), True)
    assert not make_params(cm).kv.on
    for bad in [(), (0,), (3, 3), (4, 2), (True,), 5, "4,x", (1.5,)]:
        with pytest.raises(FieldError, match="boundaries"):
            make_params(cm, boundaries=bad, thresholds=(1,) * 2)
    for bad in [(1,), (1, 0), (1, 2, 3), "1,y", None]:
        with pytest.raises(FieldError, match=r"thresholds|boundaries"):
            make_params(cm, boundaries=(2, 5), thresholds=bad)
    with pytest.raises(FieldError, match="memory"):
        make_params(cm, memory=True)
    with pytest.raises(FieldError, match="nested_wait"):
        make_params(cm, threshold=(1,))
    # M^pi = n_1 sum_{s=0}^{l'_1} (l + s) + n_2 sum_{s=l'_1+1}^{l'_2} (l + s): 2 (2+3) + 1 (4+5)
    assert threshold_memory((1, 3), (2, 1), 2) == 2 * (2 + 3) + (4 + 5)
    assert threshold_memory((1, 3), (2, 1), 2, block_size=4) == 2 * (1 + 1) + (1 + 2)


def test_theta_solves_its_equation_and_meets_hoeffdings_bound():
    """theta_k is the positive root of e^{-theta n_k} (1 - p + p e^theta)^{n_{k-1}} = 1; Hoeffding's
    lemma (ln E e^{theta X} <= p theta + theta^2 / 8 for a Bernoulli X) puts it at or above
    8 (n_k - n_{k-1} p) / n_{k-1}, the bound their theorem states."""
    from paper_checks.other_papers_wait import theta

    for n_prev, n, p in [(20, 12, 0.5), (20, 16, 0.75), (16, 11, 2 / 3), (2, 1, 0.01), (149, 75, 0.5)]:
        t = theta(n_prev, n, p)
        assert t > 0
        assert abs(-t * n + n_prev * np.log(1 - p + p * np.exp(t))) < 1e-9 * n_prev * t
        assert -0.5 * t * n + n_prev * np.log(1 - p + p * np.exp(0.5 * t)) < 0  # the root, not a point below
        assert t >= 8 * (n - n_prev * p) / n_prev
    for bad in [(10, 10, 0.5), (10, 5, 0.5), (10, 4, 0.5), (10, 6, 1.0), (10, 6, 0.0)]:
        with pytest.raises(FieldError, match="nested_wait_thresholds"):
            theta(*bad)


def test_survival_and_buffer_by_hand():
    from paper_checks.other_papers_wait import DELTA, boundary_buffer, survival, theta

    assert survival((0.25, 0.25, 0.5), (16, 32, 64), (16, 32, 64)) == pytest.approx((0.75, 2 / 3), rel=1e-12)
    assert survival((0.5, 0.5), (64, 16), (16, 64)) == pytest.approx((0.5,), rel=1e-12)
    log = np.log(2 * (1 + 3.0 / 0.005) / DELTA)
    expected = (16 + 16) * (12 + log / theta(20, 12, 0.5))
    assert boundary_buffer(16, (16, 64), (20, 12), (0.5,), 3.0, 0.005) == pytest.approx(expected, rel=1e-12)
