"""Section 7 with the serving engine's own costs (stability.slai.engine, ``llmq slai --engine``):
the options change a run as the terms say (requests served alone, their TTFT summed by hand from
Eq. 7), bad values are refused naming the field, and the host time read off Fig. 5a is the mean
floor-bound residual, recomputed here from theory.cost's chunked prefill time."""

from __future__ import annotations

import io
import math
from contextlib import redirect_stderr
from dataclasses import replace

import numpy as np
import pytest

from stability.sim.simulate import simulate
from stability.slai import engine as eng
from stability.slai import sensitivity
from stability.slai.study import POLICY, QUICK, Panel, measure, panel_gpu_file, scenario, with_engine
from theory.builder import CostSpec, cost_model
from theory.cost import T_P_SA, T_Lin, chunked_prefill_time
from theory.errors import ConfigFileError, FieldError

ENGINE = eng.EngineCosts(engine_step_s=0.004, pad_multiple=8)
BUDGET = 512  # Sarathi-serve's token budget in Section 7


def alone(panel: Panel, tmp_path, n: int = 6):
    """Sarathi-FCFS on ``panel`` at a rate so low that each request is served alone."""
    sc = scenario(panel, POLICY["sarathi_fcfs"], 1e-3, 3, n, panel_gpu_file(panel, tmp_path)[1])
    return simulate(sc)


def ttft_by_hand(L_P: int, step_s: float, pad: int) -> float:
    """A prompt prefilled alone in Sarathi's chunks of at most 512 tokens: per chunk, Eq. 4 at
    the padded token count, the non-linear time and Eq. 6 at the real tokens, plus the host time."""
    cm = cost_model(CostSpec("rtx6000ada", "mistral-7b", "real"))
    t, i = 0.0, 1
    while i <= L_P:
        c = min(BUDGET, L_P - i + 1)
        padded = -(-c // pad) * pad
        t += float(T_Lin(cm, padded)) + c / cm.mu_nLin + float(T_P_SA(cm, i, c)) + step_s
        i += c
    return t


def test_a_request_served_alone_pays_the_padding_and_the_host_time_per_chunk(tmp_path):
    engine_run = alone(Panel("real", "table1", 0.05, engine=ENGINE), tmp_path)
    plain_run = alone(Panel("real", "table1", 0.05), tmp_path)
    rq, rq0 = engine_run.requests, plain_run.requests
    np.testing.assert_array_equal(rq["L_P"], rq0["L_P"])  # the same requests
    assert any(p % 8 for p in rq["L_P"])  # a prompt whose last chunk the padding changes
    for k, L_P in enumerate(rq["L_P"]):
        assert rq["t_first"][k] - rq["arrival"][k] == pytest.approx(
            ttft_by_hand(int(L_P), 0.004, 8), rel=1e-9
        )
        assert rq0["t_first"][k] - rq0["arrival"][k] == pytest.approx(
            ttft_by_hand(int(L_P), 0.0, 1), rel=1e-9
        )


def test_the_front_end_adds_its_time_to_every_ttft_and_nothing_else(tmp_path):
    with_fe = replace(ENGINE, frontend_s=0.25)
    a = measure(alone(Panel("real", "table1", 0.05, engine=with_fe), tmp_path))
    b = measure(alone(Panel("real", "table1", 0.05, engine=ENGINE), tmp_path))
    assert a["ttft_p50"] == pytest.approx(b["ttft_p50"] + 0.25, rel=1e-12)
    assert a["ttft_mean"] == pytest.approx(b["ttft_mean"] + 0.25, rel=1e-12)
    assert a["t_bar_batch"] == b["t_bar_batch"]  # in no batch
    np.testing.assert_array_equal([c["tbt_p99"] for c in a["classes"]], [c["tbt_p99"] for c in b["classes"]])


def test_fig5a_host_time_is_the_mean_residual_of_the_floor_bound_chunks():
    cm = cost_model(CostSpec("rtx6000ada", "mistral-7b", "real"))
    one = float(T_Lin(cm, 1))
    measured = dict(eng.fig5a_rows())
    bound = [c for c in measured if float(T_Lin(cm, c)) <= 1.05 * one]
    assert bound and len(bound) < len(measured)  # the floor binds the small chunks only
    # the mean batch time: the prompt's chunked prefill time over its number of chunks
    resid = {
        c: measured[c] - float(chunked_prefill_time(cm, [2048], c)[0]) / math.ceil(2048 / c) for c in bound
    }
    value, held = eng.fit_engine_step()
    assert value == pytest.approx(np.mean(list(resid.values())), rel=1e-9)
    assert [h["chunk"] for h in held] == bound
    for h in held:  # each chunk predicted by the residuals of the others
        others = np.mean([r for c, r in resid.items() if c != h["chunk"]])
        assert h["predicted_s"] == pytest.approx(measured[h["chunk"]] - resid[h["chunk"]] + others, rel=1e-9)
    assert eng.paper_engine() == eng.EngineCosts(engine_step_s=value, pad_multiple=8, frontend_s=0.0)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"engine_step_s": -0.001}, "engine.engine_step_s"),
        ({"engine_step_s": math.inf}, "engine.engine_step_s"),
        ({"engine_step_s": "3ms"}, "engine.engine_step_s"),
        ({"frontend_s": -1.0}, "engine.frontend_s"),
        ({"pad_multiple": 0}, "engine.pad_multiple"),
        ({"pad_multiple": 8.0}, "engine.pad_multiple"),
        ({"pad_multiple": True}, "engine.pad_multiple"),
        ({"pad_multiple": 1024}, "engine.pad_multiple"),
    ],
)
def test_bad_engine_values_are_refused_naming_the_field(fields, field):
    with pytest.raises(FieldError) as err:
        eng.EngineCosts(**fields)
    assert err.value.field == field


def test_the_engine_file_is_read_and_its_mistakes_are_named(tmp_path):
    good = tmp_path / "engine.toml"
    good.write_text("[engine]\nengine_step_s = 0.002\npad_multiple = 16\n")
    assert eng.read_engine(str(good)) == eng.EngineCosts(engine_step_s=0.002, pad_multiple=16)
    assert eng.read_engine("sarathi") == eng.paper_engine()
    typo = tmp_path / "typo.toml"
    typo.write_text("[engine]\nengine_step = 0.002\n")
    with pytest.raises(FieldError, match=r"engine\.engine_step: .*engine_step_s, pad_multiple, frontend_s"):
        eng.read_engine(str(typo))
    bad = tmp_path / "bad.toml"
    bad.write_text("[engine]\npad_multiple = -8\n")
    with pytest.raises(FieldError, match=r"engine\.pad_multiple"):
        eng.read_engine(str(bad))
    empty = tmp_path / "empty.toml"
    empty.write_text("engine_step_s = 0.002\n")
    with pytest.raises(ConfigFileError, match=r"\[engine\] table"):
        eng.read_engine(str(empty))


def test_engine_panels_are_real_panels_only():
    with pytest.raises(FieldError, match="engine"):
        Panel("real", "table1", 0.05, floor=True, engine=ENGINE)
    with pytest.raises(FieldError, match="engine"):
        Panel("paper", "table1", 0.05, engine=ENGINE)
    study = with_engine(QUICK, ENGINE)
    assert [p.key for p in study.panels] == [
        "real+engine4000us_pad8_table1_5pct",
        "real+engine4000us_pad8_table1_95pct",
    ]
    assert {1.15, 1.45} <= set(study.paper_rates)


@pytest.mark.parametrize("text", ["", "abc", "-1", "1,nan", "inf"])
def test_bad_sweep_values_are_refused(text):
    with pytest.raises(FieldError, match="--engine-sweep"):
        sensitivity.step_values(text)
    assert sensitivity.step_values("5, 0,2.5") == (0.0, 0.0025, 0.005)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine-sweep", "fast"], "--engine-sweep: expected comma-separated host times"),
        (["--engine", "{d}/no_such.toml"], "no_such.toml"),
        (["--engine", "{d}/typo.toml"], "engine.step_s: expected no such field"),
    ],
)
def test_the_command_refuses_bad_engine_options_before_any_run(tmp_path, argv, message):
    from llmq.cli import main

    (tmp_path / "typo.toml").write_text("[engine]\nstep_s = 0.003\n")
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(
            [
                "slai",
                "--quick",
                "--out",
                str(tmp_path / "o"),
                *[a.replace("{d}", str(tmp_path)) for a in argv],
            ]
        )
    assert rc == 2 and message in err.getvalue() and "Traceback" not in err.getvalue()
    assert not (tmp_path / "o" / "slai-engine" / "cache").exists()


def test_the_sweep_at_the_engines_own_host_time_repeats_the_studys_capacities(tmp_path):
    from stability.slai.analysis import paper_table
    from stability.slai.report import run_study
    from stability.slai.study import Study

    base = Study((Panel("real", "table1", 0.05),), seeds=2, n_requests=40, rel_rates=(), paper_rates=(0.5,))
    study = with_engine(base, ENGINE)
    rows = run_study(study, tmp_path)
    table = sensitivity.run_sweep(study, ENGINE, (0.0, ENGINE.engine_step_s), tmp_path)
    assert [r["engine_step_ms"] for r in table] == [0.0, 4.0]
    assert table[1]["panel"] == study.panels[0].key  # the same panel, so the same cached points
    want = {r["quantity"]: r for r in paper_table(rows, study.panels)}
    for col, quantity in (
        ("cap_sarathi", "capacity, Sarathi-serve (FCFS) [req/s]"),
        ("cap_slai", "capacity, SLAI (SPF, dynamic) [req/s]"),
        ("gain_pct", "capacity gain [%]"),
    ):
        np.testing.assert_array_equal(
            [table[1][col], table[1][f"{col}_lo"], table[1][f"{col}_hi"]],
            [want[quantity]["llmq"], want[quantity]["llmq_lo"], want[quantity]["llmq_hi"]],
        )
    paths = sensitivity.write_sweep(table, tmp_path, study.panels[0].label)
    md = (tmp_path / "engine_sweep.md").read_text()
    assert "| 4 |" in md and "The paper: 1.15 and 1.45 req/s." in md
    assert paths["sweep_csv"].endswith("engine_sweep.csv")
