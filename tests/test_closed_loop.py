"""Closed-loop load (stability.sim.closed_loop): N users, each sending its next request a think time
after its previous one ends. Checked against independent computations: a lone user's requests
back to back from Eq. 7 batch by batch; the naive reference simulator driven by the same users
(tests/reference_sim.py); the users' count in flight; the interactive response time law."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmq.cli import main
from stability.sim.closed_loop import Closed, UserRequests, parse_closed, run_closed
from stability.sim.registry import get_scheduler
from stability.sim.simulate import Scenario, simulate, validate_scenario
from tests import reference_sim as ref
from tests.toys import toy_cost_model
from theory.cost import Batch, T_batch
from theory.errors import FieldError


def _users(L_P, L_D, think):
    n = len(L_P)
    return UserRequests(np.asarray(L_P), np.asarray(L_D), np.zeros(n, dtype=np.int64), np.asarray(think))


def _alone(cm, L_P, L_D, chunk):
    """(first token, last token) of a request alone on the GPU from time 0 under RAD: chunks
    min(chunk, L^P - i + 1) each alone in a batch, then L^D decode batches of it alone (Eq. 7 by
    theory.cost.T_batch)."""
    t, i = 0.0, 1
    while i <= L_P:
        c = min(chunk, L_P - i + 1)
        t += T_batch(cm, Batch.of([(i, c)], []))
        i += c
    first = t
    for m in range(L_D):
        t += T_batch(cm, Batch.of([], [L_P + 1 + m]))
    return first, t


@pytest.mark.parametrize("think", [0.0, 0.02])
def test_one_user_sends_back_to_back_as_eq7_times_them(think):
    cm = toy_cost_model("toy4")
    rng = np.random.default_rng(5)
    L_P, L_D = rng.integers(1, 60, size=12), rng.integers(1, 20, size=12)
    sch = get_scheduler("rad")
    p = sch.make_params(cm, n=4)
    run = run_closed(cm, sch, p, 1, _users(L_P, L_D, np.full(12, think)))
    send = 0.0
    for k in range(12):
        first, last = _alone(cm, int(L_P[k]), int(L_D[k]), p.chunk)
        assert run.arrival[k] == pytest.approx(send, rel=1e-9, abs=1e-12)
        assert run.t_first[k] == pytest.approx(send + first, rel=1e-9)
        assert run.t_finish[k] == pytest.approx(send + last, rel=1e-9)
        send = run.t_finish[k] + think


@st.composite
def loops(draw):
    cm = toy_cost_model(
        draw(st.sampled_from(["toy2", "toy4", "toy8"])), draw(st.sampled_from(["paper", "real"]))
    )
    m = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    L_P = rng.integers(1, draw(st.integers(1, 90)) + 1, size=m)
    L_D = rng.integers(1, draw(st.integers(1, 25)) + 1, size=m)
    if draw(st.booleans()):  # equal output lengths: requests end together
        L_D = np.full(m, int(L_D[0]))
    # batches take ~1-20 ms here: no think time, a constant, or exponential think times
    loop = Closed(
        draw(st.integers(1, 12)),
        draw(st.sampled_from([0.0, 1e-3, 2e-2])),
        draw(st.sampled_from(["constant", "exponential"])),
    )
    return cm, L_P, L_D, loop, loop.think_times(m, rng)


def _same(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12), np.max(np.abs(a - b))


def _agrees(run, sim):
    """The engine's arrival, first-token and finish times equal the reference's (to 1e-9).

    A closed loop can send a request at exactly the end of a batch in real arithmetic: the previous
    request's finish plus a constant think time is a sum of the same batch times as the batch's end,
    in another order. Which comes first is then decided by the last bit of two float sums, and the
    engine and the reference (which prices batches with :mod:`theory.cost`, not the engine's tables)
    may round them differently, so the request joins that batch in one and the next in the other. Such
    an example is discarded (``assume``) when the two disagree; any other disagreement fails.
    """
    engine = [np.asarray(x, dtype=float) for x in (run.arrival, run.t_first, run.t_finish)]
    naive = [np.asarray([getattr(r, k) for r in sim.reqs], dtype=float)
             for k in ("arrival", "first", "finish")]
    if all(np.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(engine, naive, strict=True)):
        return
    ends = np.array([start + dur for start, dur, *_ in sim.batches])
    sends = np.concatenate([engine[0], naive[0]])
    tie = np.abs(sends[:, None] - ends[None, :]) <= 1e-9 * np.maximum(1.0, np.abs(sends[:, None]))
    assume(not tie.any())
    for a, b in zip(engine, naive, strict=True):
        _same(a, b)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(loops())
def test_rad_closed_loop_matches_the_naive_reference(sc):
    cm, L_P, L_D, loop, think = sc
    sch = get_scheduler("rad")
    p = sch.make_params(cm, n=3)
    run = run_closed(cm, sch, p, loop.users, _users(L_P, L_D, think))
    sim, _ = ref.rad(cm, ref.Users(loop.users, think), L_P, L_D, p.n, p.t_col, p.chunk)
    _agrees(run, sim)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(loops(), st.sampled_from([16, 64]))
def test_sarathi_closed_loop_matches_the_naive_reference(sc, budget):
    cm, L_P, L_D, loop, think = sc
    sch = get_scheduler("sarathi")
    p = sch.make_params(cm, chunk_size=budget, max_num_seqs=8, memory=False)
    run = run_closed(cm, sch, p, loop.users, _users(L_P, L_D, think))
    sim = ref.sarathi(cm, ref.Users(loop.users, think), L_P, L_D, budget, 8)
    _agrees(run, sim)


def _in_flight_after(arrival, finish, t):
    return int(np.sum((arrival <= t) & (finish > t)))


def test_without_think_time_n_requests_are_in_flight_until_the_last_send():
    sc = Scenario(gpu="a100", scheduler="sarathi", concurrency=6, n_requests=300, load=None, seed=2)
    rq = simulate(sc).requests
    arrival, finish = rq["arrival"], rq["t_finish"]
    assert np.all(np.isfinite(finish)) and np.all(np.diff(arrival) >= 0)
    assert np.sum(arrival == 0.0) == 6  # every user sends its first request at 0
    last = arrival[-1]
    events = np.unique(np.concatenate([arrival, finish]))
    for t in events[events < last]:
        assert _in_flight_after(arrival, finish, t) == 6, t
    # each send after the first six is the end of an earlier request (no think time)
    assert np.all(np.isin(arrival[6:], finish))


@pytest.mark.parametrize("think, kind", [(0.0, "constant"), (2.0, "constant"), (2.0, "exponential")])
def test_throughput_obeys_the_interactive_response_time_law(think, kind):
    """Each user alternates a response time R and a think time Z, so over a window [a, b] in which
    every user cycles throughout, the C requests sent satisfy sum (R_k + Z_k) = N (b - a) to within
    one cycle per user at each edge: |X (R + Z) / N - 1| <= max cycle / (b - a) with X = C / (b - a)
    and R, Z the means over those requests (Lazowska et al. 1984, Section 3.3)."""
    users, n = 12, 2400
    sc = Scenario(
        gpu="a100",
        scheduler="sarathi",
        concurrency=users,
        think_time=think,
        think=kind,
        n_requests=n,
        load=None,
        seed=7,
    )
    res = simulate(sc)
    rq = res.requests
    arrival, finish = rq["arrival"], rq["t_finish"]
    # the think time that followed each end, in the order of the ends (as the driver drew them)
    stream = np.random.default_rng(np.random.SeedSequence(7).spawn(4)[0])  # the arrival stream
    z = Closed(users, think, kind).think_times(n, stream)
    z_of = np.empty(n)
    z_of[np.argsort(finish, kind="stable")] = z
    cycle = (finish - arrival) + z_of
    a, b = arrival[-1] / 4, arrival[-1] / 2
    assert b + cycle.max() <= arrival[-1]  # every user still cycling after the window
    sent = (arrival >= a) & (arrival < b)
    x = sent.sum() / (b - a)
    lhs = x * ((finish - arrival)[sent].mean() + z_of[sent].mean()) / users
    assert abs(lhs - 1) <= cycle.max() / (b - a)


def test_a_closed_loop_is_reproducible_and_keeps_the_dict_of_other_scenarios():
    sc = Scenario(
        gpu="a100",
        scheduler="vllm_v1",
        concurrency=4,
        think_time=0.5,
        think="exponential",
        n_requests=80,
        load=None,
        seed=3,
    )
    one, two = simulate(sc), simulate(sc, workers=2)
    for key in ("arrival", "t_first", "t_finish"):
        np.testing.assert_array_equal(one.requests[key], two.requests[key])
    assert Scenario.from_dict(sc.to_dict()) == sc
    assert {"concurrency", "think_time", "think"} <= set(sc.to_dict())
    plain = Scenario(gpu="a100", scheduler="sarathi")
    assert not {"concurrency", "think_time", "think"} & set(plain.to_dict())
    # the lengths are the open-loop run's of the same seed, in the order sent
    open_loop = simulate(Scenario(gpu="a100", scheduler="vllm_v1", n_requests=80, seed=3))
    np.testing.assert_array_equal(one.requests["L_P"], open_loop.requests["L_P"])
    summary = one.summary()
    assert summary["closed_loop"] == {"users": 4, "think_time": 0.5, "think": "exponential"}
    tpot = summary["tpot"]
    done = np.isfinite(one.requests["t_finish"])
    per = ((one.requests["t_finish"] - one.requests["t_first"]) / one.requests["L_D"])[done]
    assert tpot["mean"] == pytest.approx(per.mean(), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": -3}, "concurrency"),
        ({"concurrency": 2.5}, "concurrency"),
        ({"concurrency": 2, "think_time": -1.0}, "think_time"),
        ({"concurrency": 2, "think_time": float("inf")}, "think_time"),
        ({"concurrency": 2, "think": "gamma"}, "think_time: law"),
        ({"concurrency": 2, "rate": 3.0}, "rate"),
        ({"concurrency": 2, "load": 0.5}, "load"),
        ({"concurrency": 2, "stages": ((10, 1),)}, "stages"),
        ({"concurrency": 2, "r": 2}, "r \\(gpus\\)"),
        ({"concurrency": 2, "warmup": 0.1}, "warmup"),
        ({"concurrency": 2, "scheduler": "wait"}, "scheduler"),
        ({"think_time": 1.0}, "think_time"),
    ],
)
def test_bad_closed_loops_name_the_field(kwargs, field):
    with pytest.raises(FieldError, match=rf"^{field}"):
        validate_scenario(Scenario(**{"load": None, **kwargs}))


def test_parse_closed_names_the_fields_it_is_given():
    with pytest.raises(FieldError, match=r"^--think-exp"):
        parse_closed(3, -0.5, "exponential", "--concurrency", "--think-exp")
    assert parse_closed(3, 1, "exponential") == Closed(3, 1.0, "exponential")


def test_llmq_simulate_takes_a_concurrency_and_refuses_bad_ones(capsys):
    args = [
        "simulate",
        "--gpu",
        "a100",
        "--scheduler",
        "sarathi",
        "--requests",
        "60",
        "--concurrency",
        "3",
        "--json",
    ]
    assert main([*args, "--think-exp", "0.2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["closed_loop"] == {"users": 3, "think_time": 0.2, "think": "exponential"}
    assert out["requests"] == out["completed"] == 60
    for extra, flag in [
        (["--rate", "2"], "--rate"),
        (["--load", "0.5"], "--load"),
        (["--stages", "20:1"], "--stages"),
        (["--think-time", "-1"], "--think-time"),
        (["--gpus-r", "2"], "r \\(gpus\\)"),
    ]:
        assert main([*args, *extra]) == 2
        assert flag.replace("\\", "") in capsys.readouterr().err
    bad = ["simulate", "--gpu", "a100", "--requests", "60", "--json"]
    assert main([*bad, "--concurrency", "0"]) == 2
    assert "--concurrency" in capsys.readouterr().err
    assert main([*bad, "--think-time", "1"]) == 2
    assert "--think-time" in capsys.readouterr().err
