"""The simulation driver: verdicts, invariants, queueing laws, planners, determinism, bad input."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from stability.sim.simulate import Scenario, simulate
from theory.cost import T_P_SA, Batch, T_batch, T_Lin, build_cost_model, tiling_efficiency
from theory.errors import FieldError, LlmqError, UnknownNameError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.workload import Workload


@pytest.mark.parametrize("gpu", ["a100", "rtx6000ada"])
def test_rad_is_stable_below_and_unstable_above_lambda_star(gpu):
    base = Scenario(gpu=gpu, pad=True, n_requests=20000, options=(("n", 2000),))
    below = simulate(Scenario(**{**base.__dict__, "load": 0.9})).verdict()
    above = simulate(Scenario(**{**base.__dict__, "load": 1.1})).verdict()
    assert below.verdict == "stable", below.describe()
    assert above.verdict == "unstable", above.describe()
    # beyond lambda*, the work that accumulates is the excess load: 1 - lambda*/lambda
    assert above.ci_low <= 1 - 1 / 1.1 + 0.01 and above.ci_high >= 1 - 1 / 1.1 - 0.01


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(["rad", "alg2", "request_level"]), st.floats(0.3, 1.5),
       st.integers(0, 10**6), st.booleans(), st.sampled_from([1, 2, 3]))
def test_every_request_finishes_once_and_tokens_are_conserved(scheduler, load, seed, detail, r):
    res = simulate(Scenario(scheduler=scheduler, load=load, seed=seed, n_requests=300,
                            detail=detail, r=r, workload="uniform:1-700,1-60"))
    rq = res.requests
    assert np.all(np.isfinite(rq["t_finish"])) and res.counters()["n_done"] == 300
    assert np.all(rq["t_first"] >= rq["t_start"]) and np.all(rq["t_finish"] > rq["t_first"])
    assert np.all(rq["t_start"] >= rq["arrival"])
    c = res.counters()
    assert c["n_dec_tok"] == rq["L_D"].sum()
    assert c["n_pre_tok"] == rq["L_P"].sum()
    if detail:  # one TBT gap per decode iteration
        assert sum(run.tbt_stat[0, 0] for run in res.runs) == rq["L_D"].sum()


@pytest.mark.parametrize("scheduler", ["rad", "alg2", "request_level"])
def test_logged_batches_are_eq7_of_their_contents(scheduler):
    options = () if scheduler == "request_level" else (("n", 20),)
    res = simulate(Scenario(scheduler=scheduler, load=0.8, n_requests=60, detail=True, log=True,
                            workload="uniform:1-600,1-40", options=options))
    cm = res.cost_model
    log = res.batch_log()
    for k in range(log["start"].size):
        pre = [tuple(map(int, x.split(":")[1:])) for x in log["prefill_chunks"][k].split()]
        dec = [int(x.split(":")[1]) for x in log["decode_positions"][k].split()]
        batch = Batch.of(pre, dec)
        assert log["duration"][k] == pytest.approx(T_batch(cm, batch), rel=1e-12)
        assert log["tokens"][k] == batch.tau
        assert log["optimal"][k] == (tiling_efficiency(cm, batch) >= 1 - 1e-9)
        # time lost to tiling: the GeMMs' time (linear + prefill attention) minus the same FLOPs at
        # t*'s rate without padding, i.e. GeMM time x (1 - tiling efficiency)
        gemm_time = float(T_Lin(cm, batch.tau))
        if pre:
            gemm_time += float(T_P_SA(cm, [i for i, _ in pre], [c for _, c in pre]).sum())
        lost = gemm_time * (1 - tiling_efficiency(cm, batch))
        assert log["wasted_fraction"][k] * log["duration"][k] == pytest.approx(lost, rel=1e-9, abs=1e-15)
    # batches run back to back on each node, in time order
    for g in np.unique(log["node"]):
        s, d = log["start"][log["node"] == g], log["duration"][log["node"] == g]
        assert np.all(s[1:] >= s[:-1] + d[:-1] - 1e-9)


def test_rad_leaves_optimal_tiling_only_where_algorithm_1_allows():
    """A RAD batch is not optimally tiled only if it is a decode batch with |D| < t*_col that
    line 6 chose because no request was waiting or n requests had started in the cycle."""
    n = 8
    res = simulate(Scenario(load=0.95, n_requests=400, detail=True, log=True, pad=True,
                            options=(("n", n),)))
    rq, log = res.requests, res.batch_log()
    t_col = res.cost_model.t_star.t_col
    assert np.all(log["optimal"][log["prefills"] > 0])  # prompts padded to t*_lcm chunks
    bad = ~log["optimal"]
    assert np.all(log["decodes"][bad] < t_col)
    cycles = res.runs[0].cycles
    for s in log["start"][bad]:
        waiting = np.sum((rq["arrival"] <= s) & (rq["t_start"] > s))
        c0 = cycles["start"][np.searchsorted(cycles["start"], s, side="right") - 1]
        started_in_cycle = np.sum((rq["t_start"] >= c0) & (rq["t_start"] < s))
        assert waiting == 0 or started_in_cycle == n


def batch_means_ci(x, batches=40, confidence=0.99):
    m = np.asarray(x)[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    half = stats.t.ppf(0.5 + confidence / 2, batches - 1) * m.std(ddof=1) / np.sqrt(batches)
    return m.mean() - half, m.mean() + half


def test_little_law_on_a_long_stable_run():
    res = simulate(Scenario(load=0.85, n_requests=60000, pad=True, options=(("n", 2000),)))
    rq = res.requests
    t0, t1 = rq["arrival"][6000], rq["arrival"][-6000]
    window = (rq["arrival"] >= t0) & (rq["arrival"] < t1)
    # L: time average of the number in system on a grid, with its batch-means CI
    grid = np.linspace(t0, t1, 40000)
    q = (np.searchsorted(np.sort(rq["arrival"]), grid, side="right")
         - np.searchsorted(np.sort(rq["t_finish"]), grid, side="right"))
    lo, hi = batch_means_ci(q)
    # lambda W from the requests that arrived in the window
    lam_hat = window.sum() / (t1 - t0)
    w_lo, w_hi = batch_means_ci((rq["t_finish"] - rq["arrival"])[window])
    assert lo <= lam_hat * w_hi and lam_hat * w_lo <= hi, (lo, hi, lam_hat * w_lo, lam_hat * w_hi)


def test_request_level_with_b1_is_an_mg1_queue_pollaczek_khinchine():
    """Request-level batching with b = 1 serves one request at a time, FCFS: an M/G/1 queue whose
    service time is the request's prefill batch plus its L^D single-decode batches. The mean wait
    before service is E[W_q] = lambda E[S^2] / (2 (1 - rho)) (Pollaczek-Khinchine)."""
    cm = build_cost_model(get_gpu("a100"), get_model("mistral-7b"))
    w = Workload.from_pairs("three", [300, 1000, 2500], [20, 60, 5], [0.5, 0.3, 0.2])
    service = np.array([T_batch(cm, Batch.of([(1, lp)], []))
                        + sum(T_batch(cm, Batch.of([], [i])) for i in range(lp + 1, lp + ld + 1))
                        for lp, ld in zip(w.L_P, w.L_D, strict=True)])
    ES, ES2 = w.expect(service), w.expect(service**2)
    lam = 0.7 / ES
    expected = lam * ES2 / (2 * (1 - lam * ES))
    from stability.sim.cluster import run_cluster
    from stability.sim.registry import get_scheduler
    from stability.sim.routing import Cluster, Requests

    rng = np.random.default_rng(7)
    n = 200000
    arrival = np.cumsum(rng.exponential(1 / lam, n))
    L_P, L_D = w.sample(n, rng)
    sch = get_scheduler("request_level")
    _, runs = run_cluster(cm, sch, sch.make_params(cm, b=1), Requests(arrival, L_P, L_D),
                          Cluster(1, "random", rng))
    wait = runs[0].t_start - arrival
    lo, hi = batch_means_ci(wait[n // 10:])
    assert lo <= expected <= hi, (lo, expected, hi)


def test_jsq_matches_a_hand_written_join_shortest_queue():
    """JSQ over single-server FCFS nodes (request-level, b = 1): each arrival joins the node with
    the fewest requests not finished by its arrival time (lowest index on ties)."""
    from stability.sim.cluster import run_cluster
    from stability.sim.registry import get_scheduler
    from stability.sim.routing import Cluster, Requests

    cm = build_cost_model(get_gpu("h100"), get_model("mistral-7b"))
    rng = np.random.default_rng(3)
    n, r = 400, 3
    L_P = rng.integers(1, 2000, n)
    L_D = rng.integers(1, 50, n)
    service = np.array([T_batch(cm, Batch.of([(1, lp)], []))
                        + sum(T_batch(cm, Batch.of([], [i])) for i in range(lp + 1, lp + ld + 1))
                        for lp, ld in zip(L_P, L_D, strict=True)])
    arrival = np.cumsum(rng.exponential(service.mean() / (0.9 * r), n))
    finish = np.zeros(n)
    node = np.zeros(n, dtype=int)
    free_at = np.zeros(r)
    for k in range(n):
        pending = [np.sum((node[:k] == g) & (finish[:k] > arrival[k])) for g in range(r)]
        g = int(np.argmin(pending))
        node[k] = g
        finish[k] = max(arrival[k], free_at[g]) + service[k]
        free_at[g] = finish[k]
    sch = get_scheduler("request_level")
    got_node, runs = run_cluster(cm, sch, sch.make_params(cm, b=1), Requests(arrival, L_P, L_D),
                                 Cluster(r, "jsq", rng))
    assert np.array_equal(got_node, node)
    for g in range(r):
        assert np.allclose(runs[g].t_finish, finish[node == g], rtol=1e-9)


def test_round_robin_routes_cyclically():
    res = simulate(Scenario(r=3, planner="round_robin", n_requests=30, workload="uniform:1-100,1-5"))
    assert res.node.tolist() == [k % 3 for k in range(30)]


def test_same_seed_same_result_and_workers_do_not_matter():
    sc = Scenario(r=4, n_requests=4000, load=0.8, seed=11, workload="uniform:1-1000,1-100")
    a, b = simulate(sc), simulate(sc, workers=2)
    for key in ("t_start", "t_first", "t_finish"):
        assert np.array_equal(a.requests[key], b.requests[key])
    c = simulate(Scenario(**{**sc.__dict__, "seed": 12}))
    assert not np.array_equal(a.requests["t_finish"], c.requests["t_finish"])


def test_progress_reports_every_request():
    seen = []
    simulate(Scenario(n_requests=3000, load=1.2, workload="uniform:1-500,1-50"), progress=seen.append)
    assert sum(seen) == 3000 and len(seen) > 10


@pytest.mark.parametrize("kwargs, error, match", [
    ({"rate": -1.0}, FieldError, "rate"),
    ({"rate": 0.0}, FieldError, "rate"),
    ({"load": None, "rate": None}, FieldError, "rate/load"),
    ({"n_requests": 0}, FieldError, "n_requests"),
    ({"r": 0}, FieldError, "r"),
    ({"scheduler": "fifo"}, UnknownNameError, "unknown scheduler 'fifo'"),
    ({"planner": "best"}, UnknownNameError, "planner"),
    ({"log": True}, FieldError, "detail"),
    ({"options": (("n", 0),)}, FieldError, "n"),
    ({"options": (("budget", 512),)}, FieldError, "options of scheduler 'rad'"),
])
def test_bad_scenarios(kwargs, error, match):
    with pytest.raises(error, match=match):
        simulate(Scenario(**{"n_requests": 10, **kwargs}))


@pytest.mark.parametrize("body, match", [
    ("prompt_len,output_len\n10,2\n", "arrival_time"),
    ("prompt_len,arrival_time\n10,0.1\n", "output_len"),
    ("prompt_len,output_len,arrival_time\n10,2,0.5\n10,2,0.4\n", "strictly increasing"),
])
def test_bad_traces(tmp_path, body, match):
    f = tmp_path / "t.csv"
    f.write_text(body)
    with pytest.raises(LlmqError, match=match):
        simulate(Scenario(trace=str(f), n_requests=10))


def test_trace_replay(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_len,output_len,arrival_time\n100,5,1.0\n200,3,1.5\n50,2,9.0\n")
    res = simulate(Scenario(trace=str(f), scheduler="request_level", options=(("b", 1),)))
    assert res.requests["arrival"].tolist() == [0.0, 0.5, 8.0]
    assert np.all(np.isfinite(res.requests["t_finish"]))


@pytest.mark.parametrize("kv_blocks", [40, 100_000])
def test_the_summary_reports_a_kv_overflow_of_a_policy_that_never_evicts(kv_blocks):
    """Nested WAIT counts KV memory without evicting: one batch of 20 prompts of 16 tokens holds
    at least 20 x 16 = 320 tokens (blocks of one token), so a 40-block cache overflows and a
    100,000-block one (above every request's 16 + 64 tokens times the 2,000 requests) cannot."""
    sc = Scenario(scheduler="nested_wait", workload="deterministic:16,64", n_requests=2000, load=0.5,
                  options=(("boundaries", "16,64"), ("thresholds", "20,12"), ("kv_blocks", kv_blocks)))
    kv = simulate(sc).summary()["kv"]
    assert kv["blocks"] == kv_blocks and kv["block_size"] == 1
    assert kv["overflowed"] is (kv_blocks == 40)
    assert (kv["peak_blocks"] >= 320) if kv_blocks == 40 else (kv["peak_blocks"] <= 2000 * 80)


def test_a_run_without_kv_memory_has_no_kv_summary():
    assert "kv" not in simulate(Scenario(scheduler="rad", n_requests=200, load=0.5)).summary()


@pytest.mark.parametrize("scheduler", ["rad", "alg2"])
def test_the_default_mode_counts_a_whole_prefill_tiling_as_the_logged_mode(scheduler):
    """A whole prefill run as one event (stability.sim.batches.prefill_whole) adds its chunks'
    tiling loss and their count of batches not optimally tiled, as the logged mode does chunk by
    chunk: the partial last chunk of a prompt is one such batch."""
    sc = Scenario(scheduler=scheduler, gpu="a100", workload="table1", load=0.9, n_requests=300, seed=5)
    logged, default = simulate(replace(sc, detail=True)).summary(), simulate(sc).summary()
    assert default["not_optimally_tiled"] == logged["not_optimally_tiled"] > 0
    assert default["wasted_fraction"] == pytest.approx(logged["wasted_fraction"], rel=1e-9)
