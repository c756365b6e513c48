"""Request classes: validation, the class draw, the exact P99 rule, and the per-class metrics of a
simulation checked against the batch log (every gap recomputed from the emission times)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stability.sim.classes import draw_classes, p99_met, parse_classes, paying_free
from stability.sim.simulate import Scenario, simulate
from theory.errors import FieldError


def test_parse_classes_forms_and_errors():
    a = parse_classes(paying_free(0.05))
    b = parse_classes("paying:0.05:0.1,free:0.95:0.5")
    assert a == b and [c.name for c in a] == ["paying", "free"] and a[0].tbt_slo == 0.1
    assert parse_classes(())[0].tbt_slo == float("inf")
    for bad in ([("a", 0.5, 0.1), ("b", 0.4, 0.5)], [("a", 1.0, 0.0)], [("a", 1.2, 0.1)],
                [("a", 0.5, 0.1), ("a", 0.5, 0.2)], [("a", 1.0)], "a:x:0.1"):
        with pytest.raises(FieldError):
            parse_classes(bad)


def test_draw_classes_frequencies():
    """100,000 draws: each class's count within 5 binomial standard deviations of n p."""
    classes = parse_classes([("a", 0.05, 0.1), ("b", 0.5, 0.2), ("c", 0.45, 0.5)])
    n = 100_000
    counts = np.bincount(draw_classes(classes, n, np.random.default_rng(1)), minlength=3)
    for c, k in zip(classes, counts, strict=True):
        assert abs(k - n * c.prob) < 5 * np.sqrt(n * c.prob * (1 - c.prob))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=400), st.floats(0.0, 1.0))
def test_p99_rule_is_the_nearest_rank_percentile(gaps, slo):
    """P99 met iff the nearest-rank 99th percentile (the ceil(0.99 n)-th smallest) is <= SLO."""
    gaps = np.asarray(gaps)
    nearest_rank = np.sort(gaps)[int(np.ceil(0.99 * gaps.size)) - 1]
    assert bool(p99_met(gaps.size, int(np.sum(gaps > slo)))) == (nearest_rank <= slo)


def emission_gaps(res):
    """Per request, its TBT gaps from the batch log: tokens are emitted at the end of the batch
    holding a DI, or the last chunk of a prefill."""
    b = res.batch_log()
    emits = {}
    for end, pre, dec in zip(b["start"] + b["duration"], b["prefill_chunks"], b["decode_positions"],
                             strict=True):
        for item in dec.split():
            emits.setdefault(int(item.split(":")[0]), []).append(end)
        for item in pre.split():
            j, i, c = (int(x) for x in item.split(":"))
            if i + c - 1 == res.requests["L_P"][j]:  # no preemption in this run: target = L^P
                emits.setdefault(j, []).append(end)
    return {j: np.diff(np.sort(t)) for j, t in emits.items()}


@pytest.mark.parametrize("scheduler", ["sarathi", "slai", "vllm"])
def test_class_metrics_match_the_batch_log(scheduler):
    base = Scenario(gpu="rtx6000ada", mode="real", scheduler=scheduler, rate=1.5, n_requests=150,
                    seed=4, detail=True, log=True, total_cap=8192, options=(("memory", False),))
    res = simulate(Scenario(**{**base.__dict__, "classes": paying_free(0.4, 0.06, 0.12)}))
    plain = simulate(base)
    rq = res.requests
    for key in ("arrival", "L_P", "L_D"):  # classes have their own random stream
        assert np.array_equal(plain.requests[key], rq[key])
    gaps = emission_gaps(res)
    summary = res.class_summary()
    for k, slo in enumerate((0.06, 0.12)):
        mine = np.flatnonzero(rq["cls"] == k)
        all_gaps = np.concatenate([gaps.get(j, np.zeros(0)) for j in mine])
        s = summary[k]
        assert s["requests"] == mine.size and s["tbt"]["count"] == all_gaps.size
        assert s["slo"]["gaps_within"] == pytest.approx(np.mean(all_gaps <= slo), abs=1e-12)
        viol = np.array([np.sum(gaps.get(j, np.zeros(0)) > slo) for j in mine])
        assert rq["tbt_viol"][mine].tolist() == viol.tolist()
        per_req = [np.sort(gaps[j])[int(np.ceil(0.99 * gaps[j].size)) - 1] <= slo for j in mine]
        assert s["slo"]["requests_p99_within"] == pytest.approx(np.mean(per_req))
        assert s["slo"]["requests_max_within"] == pytest.approx(np.mean(viol == 0))
        assert s["ttft"]["p50"] == pytest.approx(np.median((rq["t_first"] - rq["arrival"])[mine]))


def test_slo_option_and_classes_conflict():
    sc = Scenario(gpu="rtx6000ada", scheduler="slai", rate=0.5, n_requests=20, classes=paying_free(0.5),
                  options=(("tbt_slo", (0.1, 0.5)),))
    with pytest.raises(FieldError):
        simulate(sc)
    with pytest.raises(FieldError):  # two SLOs for a scenario with one class
        simulate(Scenario(gpu="rtx6000ada", scheduler="slai", rate=0.5, n_requests=20,
                          options=(("tbt_slo", (0.1, 0.5)),)))


def test_total_cap_conditions_the_lengths():
    res = simulate(Scenario(scheduler="sarathi", workload="uniform:1-3000,1-1500", total_cap=3000,
                            rate=0.5, n_requests=300))
    total = res.requests["L_P"] + res.requests["L_D"]
    assert total.max() <= 3000 and total.max() > 2500


def test_simulate_command_takes_classes(capsys):
    from llmq.cli import main

    argv = ["simulate", "--scheduler", "slai", "--gpu", "rtx6000ada", "--mode", "real", "--rate", "1",
            "--requests", "200", "--classes", "paying:0.3:0.1,free:0.7:0.5", "--total-cap", "8192"]
    assert main([*argv, "--json"]) == 0
    import json

    classes = json.loads(capsys.readouterr().out)["classes"]
    assert [c["name"] for c in classes] == ["paying", "free"] and sum(c["requests"] for c in classes) == 200
    assert main(argv) == 0
    assert "class paying:" in capsys.readouterr().out
    assert main([*argv[:-4], "--classes", "paying:0.3:0.1"]) == 2  # probabilities must sum to 1
    assert "probabilities" in capsys.readouterr().err
