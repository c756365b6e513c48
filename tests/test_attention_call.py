"""The fixed time per attention call (``attention_call_s``, theory.terms): read and checked, off by
default, N c_A per non-empty batch with attention, the same in the compiled engine as in the
reference simulator, and in T^max and T_bar^R as Theorem 1's inputs take it."""

import numpy as np
import pytest

from tests.test_cost_terms import tiny
from theory.cost import Batch, T_batch
from theory.errors import FieldError
from theory.terms import GpuTerms
from theory.workload import get_workload


def test_attention_call_is_read_checked_and_off_by_default(tmp_path):
    assert GpuTerms().attention_call_s == 0.0
    cm = tiny(tmp_path, gpu_extra="attention_call_s = 2.5e-6", name="call")
    assert cm.gpu.terms.attention_call_s == 2.5e-6 and not cm.plain
    assert cm.fixed_s == cm.overhead_s + cm.N * 2.5e-6
    with pytest.raises(FieldError, match="attention_call_s"):
        tiny(tmp_path, gpu_extra="attention_call_s = -1e-6", name="bad")
    off = tiny(tmp_path, gpu_extra="attention_call_s = 0.0", name="zero")
    ref = tiny(tmp_path, name="ref")
    b = Batch.of(prefill=[(1, 300), (257, 100)], decode=[5, 900])
    assert off.plain and T_batch(off, b) == T_batch(ref, b)  # the term off: the old numbers exactly


def test_attention_call_adds_n_c_to_every_batch_with_attention(tmp_path):
    """Eq. 7 gains N c_A per non-empty batch, whatever its contents; nothing without attention."""
    c = 3e-6
    on = tiny(tmp_path, gpu_extra=f"attention_call_s = {c}", name="on")
    ref = tiny(tmp_path, name="ref")
    rng = np.random.default_rng(7)
    for _ in range(50):
        pre = [(int(i), int(n)) for i, n in rng.integers(1, 400, size=(rng.integers(0, 3), 2))]
        dec = rng.integers(1, 900, size=rng.integers(0 if pre else 1, 6)).tolist()
        b = Batch.of(prefill=pre, decode=dec)
        assert T_batch(on, b) - T_batch(ref, b) == pytest.approx(ref.N * c, rel=1e-9)
    assert T_batch(on, Batch.of()) == 0.0
    noattn = tiny(tmp_path, gpu_extra=f"attention_call_s = {c}", model_extra="attention = false", name="na")
    noattn_ref = tiny(tmp_path, model_extra="attention = false", name="naref")
    b = Batch.of(prefill=[(1, 100)], decode=[7])
    assert noattn.fixed_s == noattn.overhead_s and T_batch(noattn, b) == T_batch(noattn_ref, b)


@pytest.mark.parametrize("scheduler", ["rad", "request_level"])
def test_engine_prices_the_attention_call_as_t_batch(scheduler):
    """The compiled engine against the reference simulator (theory.cost.T_batch per batch) with
    the term on: identical finish times, and different from those without it."""
    from dataclasses import replace

    from stability.sim.gpu import run_gpu
    from stability.sim.registry import get_scheduler
    from tests import reference_sim as ref
    from tests.toys import toy_cost_model

    base = toy_cost_model("toy4", "real")
    cm = replace(base, attention_call_s=2e-4)
    sch = get_scheduler(scheduler)
    knob = {"n": 4} if scheduler == "rad" else {"b": 4}
    for seed in range(4):
        rng = np.random.default_rng(seed)
        m = 25
        L_P, L_D = rng.integers(1, 80, size=m), rng.integers(1, 20, size=m)
        arrival = np.cumsum(rng.exponential(2e-3, size=m))
        p = sch.make_params(cm, **knob)
        run = run_gpu(cm, sch, p, arrival, L_P, L_D)
        if scheduler == "rad":
            sim, _ = ref.rad(cm, arrival, L_P, L_D, p.n, p.t_col, p.chunk)
        else:
            sim = ref.request_level(cm, arrival, L_P, L_D, 4)
        assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0)
        without = run_gpu(base, sch, sch.make_params(base, **knob), arrival, L_P, L_D)
        assert not np.allclose(without.t_finish, run.t_finish, rtol=1e-6)


def test_t_max_and_t_bar_r_with_the_attention_call(tmp_path):
    """T^max pays N c_A per token and still bounds a request whose every token is a batch of its own;
    the same bound without the term does not (the term cannot be dropped from T^max). T_bar^R
    amortizes it (unchanged) and stays below a saturated run's busy time per request."""
    from stability.sim.gpu import run_gpu
    from stability.sim.registry import get_scheduler
    from theory.bounds import T_bar_R, T_max

    c = 5e-6
    on = tiny(tmp_path, gpu_extra=f"attention_call_s = {c}", name="on")
    off = tiny(tmp_path, name="off")
    l_P, l_D = 40, 10
    ell = l_P + l_D
    assert T_max(on, l_P, l_D) - T_max(off, l_P, l_D) == pytest.approx(ell * on.N * c, rel=1e-9)
    alone = sum(T_batch(on, Batch.of(decode=[i])) for i in range(1, ell + 1))
    assert alone <= T_max(on, l_P, l_D) * (1 + 1e-12)
    assert alone > T_max(off, l_P, l_D)
    w = get_workload(f"deterministic:{l_P},{l_D}")
    assert T_bar_R(on, w) == T_bar_R(off, w)
    sch = get_scheduler("request_level")
    m = 400
    run = run_gpu(on, sch, sch.make_params(on), np.zeros(m), np.full(m, l_P), np.full(m, l_D))
    assert T_bar_R(on, w) <= run.busy / m
