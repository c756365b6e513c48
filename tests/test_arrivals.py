"""Load schedules (stability.sim.arrivals): stages of Poisson or evenly spaced arrivals, their use
in a scenario and on the command line, and bad input."""

import numpy as np
import pytest
from scipy import stats

from llmq.cli import main
from stability.sim.arrivals import Stage, parse_stages, stage_arrivals
from stability.sim.simulate import Scenario, simulate, staged_arrivals, validate_scenario
from theory.errors import FieldError


def test_deterministic_stages_are_evenly_spaced_from_each_stage_start():
    stages = parse_stages("10:2:deterministic,5:0,4:0.5:deterministic")
    t = stage_arrivals(stages, np.random.default_rng(0))
    expected = np.concatenate([0.5 * np.arange(20), 15.0 + 2.0 * np.arange(2)])  # idle from 10 to 15
    np.testing.assert_allclose(t, expected, rtol=0, atol=1e-12)


def test_poisson_stage_counts_have_the_stages_means_and_stay_in_their_windows():
    stages = parse_stages([(30, 2.0), (10, 0.0), (20, 5.0, "poisson")])
    windows = [(0, 30, 60.0), (30, 40, 0.0), (40, 60, 100.0)]
    counts = np.zeros((300, 3))
    for seed in range(300):
        t = stage_arrivals(stages, np.random.default_rng(seed))
        assert np.all(np.diff(t) > 0) and t[0] > 0 and t[-1] < 60
        counts[seed] = [np.sum((t >= a) & (t < b)) for a, b, _ in windows]
    for k, (_, _, mean) in enumerate(windows):
        if mean == 0:
            assert counts[:, k].max() == 0
            continue
        # each count is Poisson(mean): its sample mean within 4.5 standard errors, and a
        # chi-square dispersion test (variance = mean) not rejecting at 1e-3
        se = np.sqrt(mean / counts.shape[0])
        assert abs(counts[:, k].mean() - mean) < 4.5 * se, (k, counts[:, k].mean())
        dispersion = (counts.shape[0] - 1) * counts[:, k].var(ddof=1) / mean
        p = stats.chi2.sf(dispersion, counts.shape[0] - 1)
        assert 1e-3 < p < 1 - 1e-3, (k, p)


def test_a_long_poisson_stage_draws_past_its_first_batch_of_gaps():
    # a stage of many arrivals: its count within the Poisson law's 1e-6 quantiles, its last
    # arrival inside the window
    t = stage_arrivals((Stage(1000.0, 50.0),), np.random.default_rng(1))
    lo, hi = stats.poisson.ppf([1e-6, 1 - 1e-6], 50_000)
    assert lo <= t.size <= hi and t[-1] < 1000.0


def test_a_scenario_runs_the_schedules_arrivals_reproducibly():
    sc = Scenario(gpu="a100", scheduler="sarathi", stages=((20.0, 1.0), (20.0, 3.0, "poisson")),
                  n_requests=40, seed=3)
    res = simulate(sc)
    every = staged_arrivals(sc)
    assert every.size > 40
    np.testing.assert_array_equal(res.requests["arrival"], every[:40])
    np.testing.assert_array_equal(simulate(sc).requests["t_finish"], res.requests["t_finish"])
    assert res.lam == pytest.approx(39 / (every[39] - every[0]), rel=1e-12)
    again = Scenario.from_dict(sc.to_dict())
    assert again == sc
    # a scenario without stages keeps the dict (so the runner's keys and seeds) it had before them
    plain = Scenario(gpu="a100", scheduler="sarathi")
    assert "stages" not in plain.to_dict() and Scenario.from_dict(plain.to_dict()) == plain


@pytest.mark.parametrize("spec, message", [
    ("60:-1", "stage 1: rate"),
    ("60:2,0:2", "stage 2: duration"),
    ("60:2:bursty", "stage 1: kind"),
    ("60:0,30:0", "every stage is idle"),
    ("60", "DURATION:RATE"),
    ("60:x", "numeric duration"),
    ("", "at least one stage"),
    ("inf:2", "stage 1: duration"),
])
def test_bad_schedules_name_the_stage_and_field(spec, message):
    with pytest.raises(FieldError, match=message):
        parse_stages(spec)


def test_a_schedule_with_a_trace_or_a_rate_is_refused():
    with pytest.raises(FieldError, match="no trace"):
        validate_scenario(Scenario(stages=((10, 1),), trace="t.csv"))
    with pytest.raises(FieldError, match="no rate with stages"):
        validate_scenario(Scenario(stages=((10, 1),), rate=2.0))


def test_llmq_simulate_takes_stages_and_refuses_them_beside_a_rate(capsys):
    args = ["simulate", "--gpu", "a100", "--scheduler", "sarathi", "--stages", "20:1,20:2:deterministic",
            "--json"]
    assert main(args) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    made = staged_arrivals(Scenario(stages=((20.0, 1.0, "poisson"), (20.0, 2.0, "deterministic"))))
    assert out["requests"] == made.size  # by default every arrival of the schedule
    assert main([*args, "--rate", "2"]) == 2
    assert "--rate" in capsys.readouterr().err
    assert main([*args, "--requests", str(made.size + 1)]) == 2
    assert "at most the" in capsys.readouterr().err
