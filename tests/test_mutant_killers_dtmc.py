"""The executed cycle DTMC with r > 1 nodes, and identities its rows must satisfy.

Written to kill mutants of :mod:`stability.dtmc` that every r = 1 test lets through (see
``benchmarks/mutation.py``): a node behind the uniformly random planner sees Poisson arrivals
of rate lambda / r, so every r > 1 quantity here is set against a closed form in lambda / r, and
the x < n rows against Wald's identity for the Poisson arrivals of a cycle.
"""

import numpy as np
import pytest
from scipy import stats

from paper_checks.chain_statements import compare_with_paper
from stability.dtmc import ChainOptions, CycleSampler, build_chain
from tests.toys import solo_cost_model
from theory.bounds import T_bar_R, T_max, n_threshold
from theory.cost import Batch, T_batch
from theory.workload import get_workload

CM = solo_cost_model("solo2")  # one tile 8x2x8: t* optimal, t*_col = 2, t*_lcm = 8
W = get_workload("uniform:1-64,1-40").padded(CM.t_lcm)  # Assumption 3
EPS = 0.1


def prefill_alone(L_P):
    """One prompt prefilled alone in chunks of 8 = LCM(8, 2, 8) tokens, each chunk a batch (Eq. 7)."""
    c = 8
    return sum(T_batch(CM, Batch.of([(i, min(c, L_P - i + 1))], [])) for i in range(1, L_P + 1, c))


@pytest.mark.parametrize("r", [2, 3])
def test_deterministic_cycle_drift_uses_the_per_node_rate(r):
    """L^P = 16, L^D = 8, n = 1: every cycle serves one request alone, T = prefill + 8 single
    decodes; from x >= 1 the drift is (lambda / r) T - 1, and from x = 0 the cycle first waits
    Exp(lambda / r), so E[T | x = 0] = r / lambda + T and the drift there is (lambda / r) T."""
    w = get_workload("deterministic:16,8")
    T = prefill_alone(16) + sum(T_batch(CM, Batch.of([], [i])) for i in range(17, 25))
    lam = 3.0
    chain = build_chain(CM, w, n=1, lam=lam, r=r, options=ChainOptions(samples=400, x_max=40))
    assert chain.lam_node == pytest.approx(lam / r, rel=1e-15)
    m, lo, hi = chain.saturated_drift()
    assert m == pytest.approx(lam / r * T - 1, rel=1e-12) and hi - lo < 1e-9
    assert np.allclose(chain.rows[0].drift_samples(lam / r), lam / r * T, rtol=1e-9)
    assert chain.table["drift"][0] == pytest.approx(lam / r * T, rel=1e-9)
    # the wait for the first arrival: mean r / lambda, not 1 / lambda
    assert chain.table["ET_lo"][0] <= r / lam + T <= chain.table["ET_hi"][0]
    # the kernel's mean jump equals that drift in every row below the truncation
    x = np.arange(chain.x_max + 1)
    assert np.allclose((chain.P @ x - x)[:20], chain.table["drift"][:20], atol=1e-9)


def test_theorems_1_and_2_executed_with_two_nodes():
    """r = 2: lambda* = 2 / T_bar^R, and a node at lambda = (1 - eps) lambda* sees (1 - eps) /
    T_bar^R, the same load as one node at (1 - eps) / T_bar^R. Theorem 2's n gives negative drift
    there; at 1.1 lambda* the drift is positive (Theorem 1), and compare_with_paper applies the
    theorems at this r."""
    r = 2
    tbar = T_bar_R(CM, W)
    n = n_threshold(CM.t_star.t_col, T_max(CM, W.l_P_max, W.l_D_max), tbar, EPS)
    lam_star = r / tbar  # Theorem 1 with r nodes
    sampler = CycleSampler(CM, W, n)
    sat = sampler.saturated(600, seed=3)
    below = build_chain(CM, W, n, (1 - EPS) * lam_star, r=r, sampler=sampler, sat=sat,
                        options=ChainOptions(samples=10))
    above = build_chain(CM, W, n, 1.1 * lam_star, r=r, sampler=sampler, sat=sat,
                        options=ChainOptions(samples=10, x_max=n + 50))
    # the saturated drift, computed from the executed cycles at the per-node rate
    for chain, lam in ((below, (1 - EPS) * lam_star), (above, 1.1 * lam_star)):
        expected = lam / r * sat.T - sat.K
        assert chain.saturated_drift()[0] == pytest.approx(expected.mean(), rel=1e-12)
    assert below.saturated_drift()[2] < 0 < above.saturated_drift()[1]
    info, checks = compare_with_paper(below, CM, W)
    by_name = {c.name: c for c in checks}
    assert info["lambda_star"] == pytest.approx(r / tbar, rel=1e-12)
    assert info["epsilon_of_lambda"] == pytest.approx(EPS, rel=1e-9)
    assert info["n_threshold"] == n and "Theorem 1" not in by_name
    assert by_name["Theorem 2"].holds and by_name["Lemma 3 corrected"].holds
    assert by_name["Lemma 4"].holds
    _, checks = compare_with_paper(above, CM, W)
    by_name = {c.name: c for c in checks}
    assert "Theorem 2" not in by_name and by_name["Theorem 1"].holds


@pytest.mark.parametrize("r", [1, 2])
def test_rows_below_n_satisfy_walds_identity(r):
    """From x < n, the arrivals during a cycle are a Poisson process stopped at the cycle's end, so
    E[arrivals in the cycle] = (lambda / r) E[T] (Wald). The chain's estimate of that count,
    B + (lambda / r) exposure, must be unbiased: the per-cycle difference has mean 0."""
    n, lam = 4, 0.8 * r / T_bar_R(CM, W)
    chain = build_chain(CM, W, n=n, lam=lam, r=r,
                        options=ChainOptions(samples=1500, samples_sat=20, x_max=n + 20))
    lam_node = lam / r
    for x in range(n):
        s = chain.rows[x]
        diff = s.B + lam_node * s.exposure - lam_node * s.T
        half = stats.t.ppf(0.9995, diff.size - 1) * diff.std(ddof=1) / np.sqrt(diff.size)
        assert abs(diff.mean()) <= half + 1e-12, (x, diff.mean(), half)
        # and never more generated arrivals inside the cycle than can start in it
        assert np.all(s.B <= n - x)


def test_a_cycle_from_zero_can_start_n_arrivals():
    """From x = 0 at a high arrival rate, n = t*_col = 2 arrivals come before the first prefill
    ends, both start, and the cycle completes them together: started = K = B = 2 in every cycle."""
    w = get_workload("deterministic:16,8")
    assert prefill_alone(16) > 1e-5  # the two arrivals (mean gap 1e-7 s) come well before
    s = CycleSampler(CM, w, 2).from_state(0, lam_node=1e7, samples=50)
    assert np.all(s.started == 2) and np.all(s.K == 2)
    assert np.all(s.B == 2)


@pytest.mark.parametrize("size", [2, 3, 5, 40])
def test_t_interval_is_the_student_t_interval(size):
    """Every interval of the chain is the Student-t interval of i.i.d. values with size - 1 degrees
    of freedom, as scipy.stats.t.interval computes it."""
    from theory.stats import t_interval

    v = np.random.default_rng(size).exponential(2.0, size)
    m, lo, hi = t_interval(v, 0.99)
    want = stats.t.interval(0.99, size - 1, loc=v.mean(), scale=stats.sem(v))
    assert m == pytest.approx(v.mean(), rel=1e-12)
    assert (lo, hi) == pytest.approx(want, rel=1e-9)


def test_t_interval_of_fewer_than_two_values_is_nan_without_a_warning():
    """``t_interval`` states its answer for no value (NaN mean and bounds) and for one (the value,
    NaN bounds: no spread to estimate) itself, before numpy is asked for the mean of nothing.

    Kills ``theory/stats.py:29:17:NumberReplacer:7`` (``v.size == 0`` -> ``v.size == -1``), which
    returned the same NaNs through ``np.mean`` of an empty array and its RuntimeWarning."""
    import math
    import warnings

    from theory.stats import t_interval

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        none, one = t_interval([]), t_interval([2.5])
    assert [str(w.message) for w in seen] == []
    assert all(math.isnan(x) for x in none)
    assert one[0] == 2.5 and math.isnan(one[1]) and math.isnan(one[2])


@pytest.mark.parametrize("x_max", [16384, 40000])
def test_a_truncation_too_large_to_hold_is_refused_before_any_cycle_runs(x_max):
    """An explicit truncation whose transition matrix, (x_max + 1)^2 floats of 8 bytes, exceeds
    MAX_MATRIX_BYTES (2^31: x_max <= 16383) is refused by name before the sampler is touched; the
    stand-in sampler fails the test if any work starts.

    Kills ``stability/dtmc.py:401:28:ReplaceBinaryOperator_Pow_BitOr:1``
    (``(x_max + 1) ** 2 * 8`` -> ``(x_max + 1) | 2 * 8``), which let every x_max below 2^31
    through to a matrix of gigabytes; no test asked for one past the limit."""
    from stability.dtmc import MAX_MATRIX_BYTES
    from theory.errors import FieldError

    assert (x_max + 1) ** 2 * 8 > MAX_MATRIX_BYTES >= 16384**2 * 8  # the limit, restated

    class Untouchable:
        def __bool__(self):
            return True

        def __getattr__(self, name):
            raise AssertionError(f"the chain started work (sampler.{name}) before refusing x_max")

    with pytest.raises(FieldError, match=r"x_max"):
        build_chain(CM, W, n=4, lam=1.0, sampler=Untouchable(), options=ChainOptions(x_max=x_max))


def test_refold_moves_the_mass_above_the_top_onto_the_top():
    """``_refold(P, x_top)`` keeps rows and columns 0..x_top of a stochastic matrix and adds each
    row's mass beyond x_top to its column x_top, so every row is still a law; restated entry by
    entry on a random 6-state chain.

    Kills ``stability/dtmc.py:321:42:NumberReplacer:87`` (``P[:, x_top + 1:]`` ->
    ``P[:, x_top:]``: column x_top counted twice), which no test checked: the refolded chain only
    gives the lower truncation's mean, compared with no number."""
    from stability.dtmc import _refold

    rng = np.random.default_rng(11)
    P = rng.random((6, 6))
    P /= P.sum(axis=1, keepdims=True)
    for top in (0, 2, 4, 5):
        Q = _refold(P, top)
        assert Q.shape == (top + 1, top + 1)
        for i in range(top + 1):
            for j in range(top):
                assert Q[i, j] == P[i, j]
            assert Q[i, top] == pytest.approx(sum(P[i, k] for k in range(top, 6)), rel=1e-12)
        assert np.allclose(Q.sum(axis=1), 1.0, rtol=0, atol=1e-12)
