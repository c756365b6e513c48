"""The decode attention of a batch that also holds a prefill chunk (``mixed_decode_eta``).

Off by default: the old numbers exactly. On: Eq. 5 at the query heads' width times ``eta`` for the
decodes beside a chunk, in :func:`theory.cost.T_batch`, in ``llmq validate``'s prediction and in
the simulator's second prefix table; the fit recovers a known factor; Theorem 1's least work takes
the smaller of the two laws, and T^max (a request alone never shares a batch) keeps Eq. 5.
"""

from dataclasses import replace

import numpy as np
import pytest
from numba import njit

from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.kernels import build_tables
from stability.sim.metrics import optimal_work
from stability.sim.registry import get_scheduler
from tests import reference_sim as ref
from tests.toys import solo_cost_model, toy_cost_model
from theory.bounds import T_bar_R, T_max
from theory.builder import CostSpec, cost_model
from theory.cost import T_D_SA, Batch, T_batch, T_D_SA_least, T_D_SA_mixed, decode_prefix
from theory.errors import FieldError
from theory.symbolic import SymbolicCostModel
from theory.terms import GpuTerms
from theory.validation.attention import fit_mixed_eta, mixed_fit, predict_attention
from theory.workload import get_workload


@njit
def _tables(ct):
    return ct.S, ct.S2, ct.m_off


def _gemv_by_hand(cm, i: int, d: int) -> float:
    """Eq. 5's two GeMVs at width ``d`` counted tile by tile, each on its fastest GeMV tile."""
    def best(rows, cols):
        tiles = zip(cm.g_row.tolist(), cm.g_col.tolist(), cm.mu_gemv.tolist(), strict=True)
        return min(-(-rows // tr) * -(-cols // tc) / (cm.s * mu) for tr, tc, mu in tiles)
    return best(i, d) + best(d, i)


def test_term_is_read_checked_and_off_by_default(tmp_path):
    assert GpuTerms().mixed_decode_eta == 0.0
    assert cost_model(CostSpec("rtx4090", "llama-3.1-8b", "paper")).mixed_decode_eta == 0.0
    f = tmp_path / "g.toml"
    f.write_text('[gpus.m]\nbase = "a100"\nmixed_decode_eta = 0.7\n')
    cm = cost_model(CostSpec("m", "llama-3-8b", "real", gpu_file=str(f)))
    assert cm.mixed_decode_eta == 0.7 and not cm.plain and not cm.gpu.terms.plain
    f.write_text('[gpus.m]\nbase = "a100"\nmixed_decode_eta = -0.5\n')
    with pytest.raises(FieldError, match="mixed_decode_eta"):
        cost_model(CostSpec("m", "llama-3-8b", "real", gpu_file=str(f)))


def test_term_off_gives_the_old_numbers_exactly():
    """eta = 0: every law is Eq. 5 and the engine's mixed table is the decode table itself."""
    cm = toy_cost_model("toy4", "real")
    assert cm.mixed_decode_eta == 0.0
    i = np.arange(1, 3000)
    for law in (T_D_SA_mixed, T_D_SA_least):
        assert np.array_equal(law(cm, i), T_D_SA(cm, i))
    for law in ("mixed", "least"):
        assert np.array_equal(decode_prefix(cm, 500, law=law), decode_prefix(cm, 500))
    S, S2, off = _tables(build_tables(cm, 500))
    assert off == S.size and np.array_equal(S2[:off], S) and np.array_equal(S2[off:], S)
    on = replace(cm, mixed_decode_eta=0.7)
    S, S2, off = _tables(build_tables(on, 500))
    assert np.array_equal(S2[:off], S) and np.array_equal(S2[off:], decode_prefix(on, 500, law="mixed"))
    b = Batch.of(prefill=[(1, 40), (300, 17)], decode=[5, 900, 64])
    with_zero = replace(cm, mixed_decode_eta=0.0)
    assert T_batch(with_zero, b) == T_batch(cm, b)
    with pytest.raises(FieldError, match="law"):
        decode_prefix(cm, 10, law="both")
    with pytest.raises(FieldError, match="mixed_decode_eta"):  # numeric only, like the other terms
        SymbolicCostModel.from_cost_model(replace(cm, mixed_decode_eta=0.5))
    SymbolicCostModel.from_cost_model(cm)


def test_t_batch_prices_the_decodes_beside_a_chunk_at_query_width():
    """Eq. 7 of a mixed batch: decodes at eta x Eq. 5 of width d_pre (counted by hand); the same
    decodes alone and a chunk alone keep Eq. 5-6."""
    base = toy_cost_model("toy4", "real")
    assert base.d_pre == 4 * base.d_dec  # Mistral-7B: 32 query heads, 8 KV heads
    eta = 0.6
    cm = replace(base, mixed_decode_eta=eta)
    dec, pre = [5, 900, 64], [(1, 40)]
    mixed_extra = cm.N * sum(eta * _gemv_by_hand(cm, i, cm.d_pre) - _gemv_by_hand(cm, i, cm.d_dec)
                             for i in dec)
    got = T_batch(cm, Batch.of(prefill=pre, decode=dec)) - T_batch(base, Batch.of(prefill=pre, decode=dec))
    assert got == pytest.approx(mixed_extra, rel=1e-12)
    assert T_batch(cm, Batch.of(decode=dec)) == T_batch(base, Batch.of(decode=dec))
    assert T_batch(cm, Batch.of(prefill=pre)) == T_batch(base, Batch.of(prefill=pre))


def test_fit_recovers_a_known_factor_from_synthetic_rows():
    """Rows measured as the law with eta = 0.63 (times a seeded noise of +-2% on the mixed rows'
    decode part): mixed_fit recovers eta from the training shapes."""
    cm0 = cost_model(CostSpec("rtx4090", "llama-3.1-8b", "real"))
    rng = np.random.default_rng(11)
    n = 600
    decodes = rng.integers(1, 64, size=n)
    chunk = rng.integers(1, 512, size=n)
    chunk[: n // 4] = 0  # decodes alone
    tokens = decodes + chunk
    context = rng.integers(16, 8192, size=n)
    prefill_context = rng.integers(0, 4096, size=n)
    true = replace(cm0, mixed_decode_eta=0.63)
    seconds = predict_attention(true, tokens, decodes, context, prefill_context)
    rows = np.zeros(n, dtype=[("tokens", "i8"), ("decodes", "i8"), ("context", "i8"),
                              ("prefill_context", "i8"), ("seconds", "f8")])
    for k, v in (("tokens", tokens), ("decodes", decodes), ("context", context),
                 ("prefill_context", prefill_context), ("seconds", seconds)):
        rows[k] = v
    held = np.arange(n) % 4 == 3
    eta, pred = mixed_fit(cm0, rows, held)
    assert eta == pytest.approx(0.63, rel=1e-6)
    assert np.allclose(pred, seconds, rtol=1e-9)
    # with noise the fit still lands near the truth, and a factor 1.0 (no fit) is worse
    base = predict_attention(replace(cm0, mixed_decode_eta=0.0), np.where(chunk > 0, chunk, tokens),
                             np.where(chunk > 0, 0, decodes), context, prefill_context)
    q = seconds - base
    on = q > 0
    noisy = base[on] + q[on] * rng.uniform(0.98, 1.02, size=on.sum())
    assert fit_mixed_eta(base[on], q[on] / 0.63, noisy) == pytest.approx(0.63, rel=0.01)


def _scenario(seed):
    rng = np.random.default_rng(seed)
    m = 30
    L_P, L_D = rng.integers(1, 60, size=m), rng.integers(1, 25, size=m)
    arrival = np.cumsum(rng.exponential(1e-3, size=m))
    arrival[: m // 3] = 0.0
    return arrival, L_P, L_D


@pytest.mark.parametrize("mode", ["paper", "real"])
@pytest.mark.parametrize("scheduler", ["sarathi", "sarathi_paper", "vllm"])
def test_engine_prices_mixed_batches_as_t_batch(scheduler, mode):
    """The compiled engine against the reference simulator (theory.cost.T_batch per batch) with the
    term on, in fast mode (chunk runs as one event) and detail mode: identical finish times; and
    different from the run without the term wherever a batch mixed a chunk with decodes."""
    base = toy_cost_model("toy4", mode)
    cm = replace(base, mixed_decode_eta=2.5 if mode == "paper" else 0.4)
    sch = get_scheduler(scheduler)
    mixed_seen = False
    for seed in range(4):
        arrival, L_P, L_D = _scenario(seed)
        if scheduler == "sarathi":
            knob = {"chunk_size": 16, "max_num_seqs": 8}
            sim = ref.sarathi(cm, arrival, L_P, L_D, 16, 8)
        elif scheduler == "sarathi_paper":
            knob = {"chunk_size": 16}
            sim = ref.sarathi_paper(cm, arrival, L_P, L_D, 16)
        else:
            knob = {"max_num_batched_tokens": 50, "max_num_seqs": 8}
            sim = ref.vllm(cm, arrival, L_P, L_D, 50, 8)
        for detail in (False, True):
            run = run_gpu(cm, sch, sch.make_params(cm, **knob), arrival, L_P, L_D,
                          options=RunOptions(detail=detail))
            assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0, equal_nan=True)
        without = run_gpu(base, sch, sch.make_params(base, **knob), arrival, L_P, L_D)
        mixed_seen |= not np.allclose(without.t_finish, run.t_finish, rtol=1e-9, equal_nan=True)
    assert mixed_seen == (scheduler != "vllm")  # vLLM v0 runs prefills and decodes apart


def test_slai_prices_mixed_batches_as_t_batch():
    """SLAI's batches (deferred decodes beside chunks) with the term on, against the reference."""
    cm = replace(toy_cost_model("toy4", "real"), mixed_decode_eta=0.4)
    base = toy_cost_model("toy4", "real")
    sch = get_scheduler("slai")
    arrival, L_P, L_D = _scenario(5)
    cls = np.arange(L_P.size) % 2
    slo = (2e-3, 3e-2)
    knob = {"token_budget": 16, "max_num_seqs": 8, "limit_total_decodes": 8, "memory": False}
    run = run_gpu(cm, sch, sch.make_params(cm, tbt_slo=slo, **knob), arrival, L_P, L_D, cls,
                  RunOptions(n_class=2, tbt_slo=slo))
    sim = ref.slai(cm, arrival, L_P, L_D, cls, slo, 16, 8, 8)
    assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0, equal_nan=True)
    without = run_gpu(base, sch, sch.make_params(base, tbt_slo=slo, **knob), arrival, L_P, L_D, cls,
                      RunOptions(n_class=2, tbt_slo=slo))
    assert not np.allclose(without.t_finish, run.t_finish, rtol=1e-9, equal_nan=True)


def test_t_bar_r_takes_the_least_law_and_t_max_keeps_eq5():
    """Paper mode has one head (d_pre = d_dec), so eta < 1 makes a decode beside a chunk cheaper
    than alone. A saturated run of Algorithm 4 (decodes beside chunks) then does less work per
    request than T_bar^R (corrected, a valid bound on Eq. 2-7) with Eq. 5 alone: that bound fails,
    the least-law T_bar^R (the shipped one) holds. One tile, so t* is optimal (Assumption 1).
    T^max is the time of a request alone (no batch mixes) and bounds a lone request's run with the
    term on."""
    base = solo_cost_model("solo4", "paper")
    cm = replace(base, mixed_decode_eta=0.05)
    l_P, l_D = 64, 512
    w = get_workload(f"deterministic:{l_P},{l_D}")
    sch = get_scheduler("sarathi_paper")
    m = 64
    run = run_gpu(cm, sch, sch.make_params(cm, chunk_size=64), np.zeros(m), np.full(m, l_P), np.full(m, l_D))
    busy = run.busy / m
    assert T_bar_R(cm, w, corrected=True) <= busy
    assert optimal_work(cm, [l_P], [l_D])[0] == pytest.approx(T_bar_R(cm, w), rel=1e-12)
    assert T_bar_R(base, w, corrected=True) > busy  # Eq. 5 alone in T_bar^R: no longer a lower bound
    assert T_bar_R(cm, w) < T_bar_R(base, w)
    # real mode on a GQA model with a shipped-size eta: eta d_pre > d_dec, T_bar^R unchanged
    real = toy_cost_model("toy4", "real")
    assert T_bar_R(replace(real, mixed_decode_eta=0.76), w) == T_bar_R(real, w)
    # T^max: one request alone, Eq. 5 (the term cannot change a batch without a chunk)
    big = replace(base, mixed_decode_eta=5.0)
    assert T_max(big, 40, 10) == T_max(base, 40, 10)
    lone = run_gpu(big, sch, sch.make_params(big, chunk_size=1), np.zeros(1), np.array([40]), np.array([10]))
    assert lone.t_finish[0] <= T_max(big, 40, 10)
