"""The executed RAD cycle DTMC: closed forms, Theorem 1/2 at a computable threshold, and the
simulator's own cycles."""

import math

import numpy as np
import pytest
from scipy import stats

from paper_checks.chain_statements import compare_with_paper
from stability.dtmc import ChainOptions, CycleSampler, build_chain, empirical_n_min
from stability.schedulers import rad
from stability.sim.gpu import run_gpu
from tests.toys import solo_cost_model
from theory.bounds import T_bar_R, T_max, n_threshold
from theory.cost import Batch, T_batch
from theory.errors import FieldError
from theory.workload import get_workload

CM = solo_cost_model("solo2")  # one tile 8x2x8: t* optimal (Assumption 1), t*_col = 2, t*_lcm = 8
W = get_workload("uniform:1-64,1-40").padded(CM.t_lcm)  # Assumption 3
EPS = 0.1
N_THR = n_threshold(CM.t_star.t_col, T_max(CM, W.l_P_max, W.l_D_max), T_bar_R(CM, W), EPS)
LAM_STAR = 1 / T_bar_R(CM, W)


def prefill(L_P):
    """RAD's prefill of one prompt alone in chunks of t*_lcm (Algorithm 1, lines 12-16), Eq. 7."""
    c = CM.t_lcm
    return sum(T_batch(CM, Batch.of([(i, min(c, L_P - i + 1))], [])) for i in range(1, L_P + 1, c))


@pytest.mark.parametrize("n, K", [(5, 2), (1, 1)])
def test_deterministic_lengths_end_every_cycle_after_the_first_full_batch(n, K):
    """L^P = 16, L^D = 8: the first min(n, t*_col) requests decode together from the same
    position, all finish in the same batch, and line 9 ends the cycle: K = min(n, t*_col), not n.
    T = K prefills + 8 decode batches of K requests at positions 17..24 (Eq. 7)."""
    w = get_workload("deterministic:16,8")
    T = K * prefill(16) + sum(T_batch(CM, Batch.of([], [i] * K)) for i in range(17, 25))
    lam = 3.0
    chain = build_chain(CM, w, n=n, lam=lam, options=ChainOptions(samples=20, x_max=n + 30))
    assert np.all(chain.sat.K == K) and np.allclose(chain.sat.T, T, rtol=1e-12)
    m, lo, hi = chain.saturated_drift()
    assert m == pytest.approx(lam * T - K, rel=1e-12) and hi - lo < 1e-9
    if n == 1:  # from x = 0: wait Exp(lambda) for the first arrival, then serve it; drift = lam T
        d = chain.rows[0].drift_samples(lam)
        assert np.allclose(d, lam * T, rtol=1e-9)
        assert chain.table["ET_lo"][0] <= 1 / lam + T <= chain.table["ET_hi"][0]


def test_kernel_rows_are_laws_with_the_sampled_drift():
    chain = build_chain(CM, W, n=6, lam=0.9 * LAM_STAR, options=ChainOptions(samples=100, x_max=60))
    P = chain.P
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1, atol=1e-12)
    x = np.arange(P.shape[0])
    far = x < 30  # rows whose mass does not reach the truncation
    assert np.allclose((P @ x - x)[far], chain.table["drift"][far], atol=1e-9)
    s = chain.stationary()
    assert s.structure.irreducible and s.structure.aperiodic
    assert np.allclose(s.pi @ P, s.pi, atol=1e-12)


def test_theorem2_threshold_gives_negative_drift_and_lambda_above_lambda_star_positive():
    """Assumptions 1-4 hold (one tile, padded prompts, bounded lengths, t*_col = 2), so Theorem 2's
    n is computable: with n = n_threshold(0.1) the drift for x >= n is negative at 0.9 lambda*,
    and positive at 1.1 lambda* (Theorem 1)."""
    sampler = CycleSampler(CM, W, N_THR)
    sat = sampler.saturated(1500, seed=1)
    below = build_chain(CM, W, N_THR, 0.9 * LAM_STAR, sampler=sampler, sat=sat,
                        options=ChainOptions(samples=30))
    above = build_chain(CM, W, N_THR, 1.1 * LAM_STAR, sampler=sampler, sat=sat,
                        options=ChainOptions(samples=30, x_max=N_THR + 50))
    assert below.saturated_drift()[2] < 0
    assert above.saturated_drift()[1] > 0
    info, checks = compare_with_paper(below, CM, W)
    by_name = {c.name: c for c in checks}
    assert info["n_threshold"] == N_THR and by_name["Theorem 2"].holds
    assert by_name["Eq. 25"].holds and by_name["Lemma 3 corrected"].holds and by_name["Lemma 4"].holds
    # with t*_col = 2 many cycles end early (line 9), so Lemma 3's premise K = n fails ...
    assert not by_name["Lemma 3 premise"].holds and info["early_end_fraction"] > 0.2
    # ... and the repaired bound, which only charges (t*_col - 1) T^max to cycles with K = n, holds
    assert by_name["Eq. 25 repaired"].holds
    _, checks = compare_with_paper(above, CM, W)
    assert {c.name: c for c in checks}["Theorem 1"].holds
    # the cycle throughput E[K] / E[T] is RAD's boundary; it cannot exceed lambda* (Theorem 1)
    _, lo, _ = below.cycle_throughput()
    assert lo <= LAM_STAR


def test_only_full_cycles_lose_time_to_tiling():
    """A cycle that line 9 ends before n started ran only full decode batches and whole-chunk
    prefills: it takes exactly the optimal work of its requests (Eq. 12); the others lose at most
    (t*_col - 1) T^max (Eq. 25's slack)."""
    sat = CycleSampler(CM, W, 12).saturated(400)
    waste = sat.T - sat.W
    early = sat.K < 12
    assert early.any() and (~early).any()
    assert np.allclose(waste[early], 0, atol=1e-12)
    assert np.all(waste[~early] > -1e-12)
    assert np.all(waste[~early] <= (CM.t_star.t_col - 1) * T_max(CM, W.l_P_max, W.l_D_max))


def batch_means(x, batches=30, confidence=0.99):
    m = np.asarray(x)[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    half = stats.t.ppf(0.5 + confidence / 2, batches - 1) * m.std(ddof=1) / math.sqrt(batches)
    return m.mean(), half


def test_stationary_mean_and_drift_match_the_simulator():
    """The simulator's RAD, on one long Poisson stream, records X[c] at every cycle start: its
    average over cycles must match the DTMC's stationary mean, and its per-state increments the
    executed drift, within the two confidence intervals."""
    n, lam = 8, 0.9 * LAM_STAR
    rng = np.random.default_rng(5)
    m = 150_000
    arrival = np.cumsum(rng.exponential(1 / lam, m))
    L_P, L_D = W.sample(m, rng)
    cyc = run_gpu(CM, rad, rad.make_params(CM, n=n), arrival, L_P, L_D).cycles
    keep = cyc["end"] < arrival[-1]
    x_path = cyc["x"][keep]
    sim_mean, sim_half = batch_means(x_path[x_path.size // 20:])
    means = []
    for seed in range(8):  # independent kernel estimates: the DTMC's own uncertainty
        chain = build_chain(CM, W, n=n, lam=lam,
                            options=ChainOptions(samples=300, samples_sat=3000, seed=seed))
        s = chain.stationary()
        assert s.boundary_mass < 1e-6 and s.truncation_error < 1e-3
        means.append(s.mean)
    dtmc_half = stats.t.ppf(0.995, len(means) - 1) * np.std(means, ddof=1) / math.sqrt(len(means))
    assert abs(np.mean(means) - sim_mean) <= math.hypot(sim_half, dtmc_half), (
        np.mean(means), dtmc_half, sim_mean, sim_half)
    # per-state drift: increments of the simulated path, grouped by state
    inc = np.diff(cyc["x"])[keep[:-1] & keep[1:]]
    state = cyc["x"][:-1][keep[:-1] & keep[1:]]
    tb = chain.table
    for x in range(0, n + 3):
        d = inc[state == x]
        if d.size < 2000:
            continue
        lo, hi = stats.t.interval(0.99, d.size - 1, d.mean(), d.std(ddof=1) / math.sqrt(d.size))
        assert lo <= tb["drift_hi"][x] and tb["drift_lo"][x] <= hi, (x, lo, hi, tb["drift"][x])


def test_empirical_n_min_is_far_below_theorem2_and_is_the_first_negative_drift():
    res = empirical_n_min(CM, W, EPS, samples=300)
    assert res.n_threshold == N_THR
    assert res.n_min is not None and res.n_min < N_THR
    assert res.drift[2] < 0
    if res.n_min > 1:
        assert res.evaluated[res.n_min - 1][2] >= 0


@pytest.mark.parametrize("kwargs, field", [
    ({"x_max": 3}, "truncate"), ({"lam": 0.0}, "lambda"), ({"samples": 0}, "samples"),
    ({"r": 0}, "r"), ({"confidence": 1.5}, "confidence"),
])
def test_bad_input(kwargs, field):
    args = {"n": 5, "lam": 1.0, "samples": 5, **kwargs}
    chain = {k: args.pop(k) for k in ("x_max", "samples", "confidence") if k in args}
    with pytest.raises(FieldError, match=field):
        build_chain(CM, W, **args, options=ChainOptions(**chain))


def test_llmq_dtmc_json_and_plot(tmp_path, capsys):
    import json

    from llmq.cli import main
    from tests.toys import SOLO_TOML

    gpus = tmp_path / "solo.toml"
    gpus.write_text(SOLO_TOML)
    argv = ["dtmc", "--gpu", "solo2", "--gpu-file", str(gpus), "--workload", "uniform:1-64,1-40",
            "--n", str(N_THR), "--load", "0.9", "--samples", "20", "--out", str(tmp_path), "--json",
            "--n-min", "--epsilon", "0.1"]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == N_THR and res["n_threshold"] == N_THR
    assert res["drift_saturated"][2] < 0
    assert res["n_min"][0]["n_min"] < N_THR
    assert len(res["states"]["x"]) == res["x_max"] + 1
    assert (tmp_path / "dtmc_drift.png").stat().st_size > 10_000
    assert main(argv[:-4]) == 0  # the table
    out = capsys.readouterr().out
    assert "Lemma 3 premise" in out and "FAILS" in out and "Theorem 2" in out


@pytest.mark.parametrize("extra, message", [
    (["--n", "0"], "n: expected an integer >= 1"),
    (["--n", "10", "--truncate", "5"], "truncate"),
    (["--load", "-1"], "--load"),
    (["--n-min", "--epsilon", "0.1,x"], "epsilon"),
])
def test_llmq_dtmc_bad_input(tmp_path, capsys, extra, message):
    from llmq.cli import main

    code = main(["dtmc", "--gpu", "l4", "--samples", "2", "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
