"""Finite-chain tools: GTH against exact (sympy) and closed-form laws; classes and periods."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.errors import FieldError
from theory.markov import gth_solve, stationary_laws, structure


def exact_stationary(P_rational: sympy.Matrix) -> np.ndarray:
    """pi P = pi, sum pi = 1, solved in exact rationals."""
    m = P_rational.shape[0]
    A = (P_rational.T - sympy.eye(m)).col_join(sympy.ones(1, m))
    b = sympy.zeros(m, 1).col_join(sympy.Matrix([1]))
    sol = A.gauss_jordan_solve(b)[0]
    return np.array([float(v) for v in sol])


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 7), st.integers(0, 10**6))
def test_gth_matches_the_exact_rational_solution(m, seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, size=(m, m))
    counts[np.arange(m), (np.arange(m) + 1) % m] += 1  # a cycle through all states: irreducible
    P = sympy.Matrix(m, m, lambda i, j: sympy.Rational(int(counts[i, j]), int(counts[i].sum())))
    pi = gth_solve(np.array(P.tolist(), dtype=float))
    assert np.allclose(pi, exact_stationary(P), rtol=1e-12, atol=1e-15)


def test_gth_on_a_nearly_decomposable_birth_death_chain():
    """Birth-death chain: pi_k proportional to prod (p_i / q_{i+1}); tiny coupling 1e-13."""
    m = 40
    p = np.full(m, 0.3)
    q = np.full(m, 0.5)
    p[19] = 1e-13  # the two halves barely communicate
    P = np.zeros((m, m))
    for k in range(m):
        up = p[k] if k < m - 1 else 0.0
        down = q[k] if k > 0 else 0.0
        if k < m - 1:
            P[k, k + 1] = up
        if k > 0:
            P[k, k - 1] = down
        P[k, k] = 1 - up - down
    ratios = np.concatenate([[1.0], np.cumprod(p[:-1] / q[1:])])
    expected = ratios / ratios.sum()
    assert np.allclose(gth_solve(P), expected, rtol=1e-10, atol=0)


def test_classes_transient_states_and_periods():
    # 0 -> {1, 2}; {1, 2} closed with period 2; {3, 4, 5} closed cycle of period 3; 6 -> 0
    P = np.zeros((7, 7))
    P[0, 1] = P[0, 2] = 0.5
    P[1, 2] = P[2, 1] = 1.0
    P[3, 4] = P[4, 5] = P[5, 3] = 1.0
    P[6, 0] = 0.5
    P[6, 6] = 0.5
    s = structure(P)
    assert [c.tolist() for c in s.recurrent] == [[1, 2], [3, 4, 5]]
    assert s.periods == [2, 3] and not s.aperiodic and not s.irreducible
    assert s.transient.tolist() == [0, 6]
    laws, _ = stationary_laws(P)
    assert np.allclose(laws[0], [0, 0.5, 0.5, 0, 0, 0, 0])
    assert np.allclose(laws[1], [0, 0, 0, 1 / 3, 1 / 3, 1 / 3, 0])


def test_a_self_loop_makes_a_class_aperiodic():
    P = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.0, 0.5]])
    s = structure(P)
    assert s.irreducible and s.aperiodic
    pi = gth_solve(P)
    assert np.allclose(pi @ P, pi) and pi.sum() == pytest.approx(1)


@pytest.mark.parametrize("P", [np.eye(2), np.array([[1.0, -0.1], [0.5, 0.5]]), np.zeros((0, 0)),
                               np.ones(3)])
def test_gth_rejects_reducible_or_malformed_matrices(P):
    with pytest.raises(FieldError):
        gth_solve(P)
