"""Eq. 2-7 in theory.cost against their sympy twins, and the staircase structure.

The oracle is theory.symbolic: the formulas written once more with sympy's ``ceiling`` and
evaluated in exact rational arithmetic.
"""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import symbolic as sym
from theory.cost import (
    T_D_SA,
    T_P_SA,
    Batch,
    T_batch,
    T_GeMM,
    T_GeMV,
    T_Lin,
    build_cost_model,
    chosen_tiles,
    chunked_prefill_time,
    decode_prefix,
    linear_table,
    tiling_efficiency,
)
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model

CM = {(g, mode): build_cost_model(get_gpu(g), get_model("mistral-7b"), mode)
      for g in ("a100", "rtx6000ada", "h100") for mode in ("paper", "real")}
SCM = {key: sym.SymbolicCostModel.from_cost_model(cm) for key, cm in CM.items()}
KEYS = st.sampled_from(sorted(CM))
N_EXAMPLES = 1000

dims = st.integers(1, 20000)
tile_dims = st.sampled_from([16, 32, 64, 128, 256])
rates = st.floats(1e3, 1e9, allow_nan=False)


def close(a, b):
    return float(a) == pytest.approx(float(b), rel=1e-12)


@settings(max_examples=N_EXAMPLES)
@given(dims, dims, dims, tile_dims, tile_dims, tile_dims, rates, st.integers(1, 200))
def test_eq2_gemm(d_row, d_col, d_red, t_row, t_col, t_red, mu, s):
    expected = sym.gemm_time(sp.Integer(d_row), sp.Integer(d_col), sp.Integer(d_red),
                             t_row, t_col, t_red, sym.exact(mu), s)
    assert close(T_GeMM(d_row, d_col, d_red, t_row, t_col, t_red, mu, s), expected)


@settings(max_examples=N_EXAMPLES)
@given(dims, dims, tile_dims, tile_dims, rates, st.integers(1, 200))
def test_eq3_gemv(d_row, d_col, t_row, t_col, mu, s):
    expected = sym.gemv_time(sp.Integer(d_row), sp.Integer(d_col), t_row, t_col, sym.exact(mu), s)
    assert close(T_GeMV(d_row, d_col, t_row, t_col, mu, s), expected)


@settings(max_examples=N_EXAMPLES)
@given(KEYS, st.integers(1, 20000))
def test_eq4_linear_time(key, tau):
    assert close(T_Lin(CM[key], tau), SCM[key].T_Lin(sp.Integer(tau)))


@settings(max_examples=N_EXAMPLES)
@given(KEYS, st.integers(1, 32768))
def test_eq5_decode_attention(key, i):
    assert close(T_D_SA(CM[key], i), SCM[key].T_D_SA(sp.Integer(i)))


@settings(max_examples=N_EXAMPLES)
@given(KEYS, st.integers(1, 16384), st.integers(1, 4096))
def test_eq6_prefill_attention(key, i, c):
    assert close(T_P_SA(CM[key], i, c), SCM[key].T_P_SA(sp.Integer(i), sp.Integer(c)))


@settings(max_examples=N_EXAMPLES)
@given(KEYS,
       st.lists(st.tuples(st.integers(1, 8192), st.integers(1, 1024)), max_size=3),
       st.lists(st.integers(1, 8192), max_size=6))
def test_eq7_batch_time(key, prefill, decode):
    if not prefill and not decode:
        decode = [1]
    assert close(T_batch(CM[key], Batch.of(prefill, decode)), SCM[key].T_batch(prefill, decode))


def test_eq4_is_the_sum_of_the_per_layer_gemms():
    # For every tile, ceil(tau/t_col)/mu_Lin(t) equals the sum of Eq. 2 over the linear GeMMs.
    scm = SCM[("a100", "paper")]
    tau = sp.Symbol("tau", positive=True, integer=True)
    for k in range(len(scm.tiles)):
        t_col = scm.tiles[k][1]
        diff = sym.linear_time(tau, scm.mu_Lin(k), t_col) - scm.T_Lin_as_sum(tau, k)
        assert sp.simplify(diff) == 0


@pytest.mark.parametrize("key", sorted(CM))
def test_gemm_is_a_staircase(key):
    """T_GeMM in d_col is constant between multiples of t_col and jumps right after each."""
    cm = CM[key]
    t_col = int(cm.t_col[0])
    d_col = np.arange(1, 8 * t_col + 1)
    t = T_GeMM(4096, d_col, 4096, cm.t_row[0], t_col, cm.t_red[0], cm.mu[0], cm.s)
    steps = np.flatnonzero(np.diff(t) != 0) + 1  # indices (0-based) where the value changes
    assert np.array_equal(d_col[steps], np.arange(t_col + 1, 8 * t_col + 1, t_col))
    assert np.all(np.diff(t) >= 0)


@pytest.mark.parametrize("key", sorted(CM))
def test_linear_time_steps_only_at_tile_multiples(key):
    cm = CM[key]
    tau = np.arange(1, 4097)
    t = T_Lin(cm, tau)
    assert np.all(np.diff(t) >= 0)  # a minimum of staircases is a staircase
    jumps = tau[1:][np.diff(t) > 0]
    widths = np.unique(cm.t_col)
    assert all(any((j - 1) % w == 0 for w in widths) for j in jumps)


def test_prefix_sums_equal_direct_sums():
    cm = CM[("a100", "real")]
    S = decode_prefix(cm, 5000)
    rng = np.random.default_rng(1)
    for a, b in rng.integers(0, 5000, size=(50, 2)):
        a, b = sorted((int(a), int(b)))
        direct = float(T_D_SA(cm, np.arange(a + 1, b + 1)).sum()) if b > a else 0.0
        assert S[b] - S[a] == pytest.approx(direct, rel=1e-9, abs=1e-15)


def test_linear_table_is_T_Lin():
    cm = CM[("rtx6000ada", "paper")]
    table = linear_table(cm, 1000)
    assert table[0] == 0
    assert np.allclose(table[1:], T_Lin(cm, np.arange(1, 1001)), rtol=0, atol=0)


@pytest.mark.parametrize("chunk", [1, 100, 256, 512])
def test_chunked_prefill_is_a_sum_of_single_chunk_batches(chunk):
    """Algorithm 1's prefill: chunks min(chunk, L^P - i + 1) from i = 1, each alone in a batch."""
    key = ("a100", "paper")
    cm, scm = CM[key], SCM[key]
    for L in (1, 255, 256, 257) + ((700, 1024) if chunk > 1 else ()):
        expected, i = sp.Integer(0), 1
        while i <= L:
            c = min(chunk, L - i + 1)
            expected += scm.T_batch([(i, c)], [])
            i += c
        assert float(chunked_prefill_time(cm, [L], chunk)[0]) == pytest.approx(float(expected),
                                                                                rel=1e-11)


def test_rad_batches_are_optimally_tiled_and_others_are_not():
    cm = CM[("a100", "paper")]
    t = cm.t_star
    assert tiling_efficiency(cm, Batch.of([(1, t.t_lcm)], [])) == pytest.approx(1.0)
    assert tiling_efficiency(cm, Batch.of([(t.t_lcm + 1, t.t_lcm)], [])) == pytest.approx(1.0)
    assert tiling_efficiency(cm, Batch.of([], [5000] * t.t_col)) == pytest.approx(1.0)
    assert tiling_efficiency(cm, Batch.of([(1, 300)], [])) < 0.9
    assert tiling_efficiency(cm, Batch.of([], [5000] * (t.t_col + 1))) < 0.6


def test_chosen_tiles_are_the_fastest_and_prefer_t_star():
    cm = CM[("a100", "paper")]
    t = cm.t_star
    full = chosen_tiles(cm, Batch.of([(1, t.t_lcm)], []))
    assert full["linear"] == t and full["prefill"] == [(t, t)]
    # a 64-token batch: a 64-wide tile is strictly faster than any 128-wide one
    small = chosen_tiles(cm, Batch.of([], [100] * 64))
    assert small["linear"].t_col == 64
    k = cm.tiles.index(small["linear"])
    assert float(T_Lin(cm, 64, tile=k)) == float(T_Lin(cm, 64))
    assert all(float(T_Lin(cm, 64, tile=j)) >= float(T_Lin(cm, 64)) for j in range(len(cm.tiles)))


@pytest.mark.parametrize("bad", [[-1], [0.5], ["x"]])
def test_bad_lengths(bad):
    with pytest.raises(FieldError):
        T_D_SA(CM[("a100", "paper")], bad)
    with pytest.raises(FieldError):
        Batch.of([(1, 10)], bad)
