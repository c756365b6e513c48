"""paper_checks.other_papers_lp: the fluid LP against closed forms, and the check's two verdicts.

The LP is set against routes that do not use linprog: the closed form of a fixed split, the
optimum of the free split by hand, and a grid over the fraction of mixed GPUs for the paper's
LP with decodes beside the prefills. The check PASSes as computed and FAILs where the LP or the
engine is misstated by 5-10%.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from paper_checks import other_papers_lp as lp
from paper_checks.registry import Verdict
from theory.errors import FieldError

TWO_CLASSES = lp.FluidModel(
    tau_mix=0.006,
    tau_solo=0.005,
    chunk=8192,
    batch=64,
    mixed_slots=0,
    prompts=(16384, 8192),
    outputs=(64, 512),
    shares=(0.5, 0.5),
)


def _closed_form(m: lp.FluidModel, gpus: int, prefill_gpus: int) -> float:
    """min(r_p / prefill seconds per request, B (r - r_p) / decode seconds per request)."""
    p, P, D = (np.asarray(v, dtype=float) for v in (m.shares, m.prompts, m.outputs))
    prefill = float(np.sum(p * P / m.chunk)) * m.tau_mix
    decode = float(np.sum(p * D)) * m.tau_solo / m.batch
    return min(prefill_gpus / prefill, (gpus - prefill_gpus) / decode)


@pytest.mark.parametrize("gpus", [2, 4, 7])
def test_fixed_split_is_the_closed_form(gpus):
    for rp in range(1, gpus):
        assert lp.fluid_lp(TWO_CLASSES, gpus, rp)["Lam"] == pytest.approx(_closed_form(TWO_CLASSES, gpus, rp))


def test_free_split_balances_prefill_and_decode():
    """Free split: prefill GPU-seconds plus decode GPU-seconds per request fill the n GPUs."""
    m = TWO_CLASSES
    prefill = (0.5 * 2 + 0.5 * 1) * m.tau_mix  # 16384 and 8192 tokens in chunks of 8192
    decode = (0.5 * 64 + 0.5 * 512) * m.tau_solo / m.batch
    out = lp.fluid_lp(m, 4)
    assert out["Lam"] == pytest.approx(4 / (prefill + decode))
    assert out["mixed_gpus"] == pytest.approx(4 * prefill / (prefill + decode))
    assert out["y_m"] == pytest.approx([0.0, 0.0], abs=1e-9)
    # flow balance per class: x_i mu_p,i = Lam p_i
    mu_p, _, mu_s = m.rates()
    assert np.asarray(out["x"]) * mu_p == pytest.approx(0.5 * out["Lam"] * np.ones(2))
    assert np.asarray(out["y_s"]) * mu_s == pytest.approx(0.5 * out["Lam"] * np.ones(2))


def test_mixed_lp_is_the_best_fraction_of_mixed_gpus():
    """One class, B - 1 decodes beside each prefill: with a fraction f of the n GPUs mixed, the
    throughput is min(f n mu_p, (B - 1) f n mu_m + B (1 - f) n mu_s); its maximum over a grid."""
    m = replace(TWO_CLASSES, mixed_slots=63, prompts=(8192,), outputs=(256,), shares=(1.0,), tau_mix=0.007)
    mu_p, mu_m, mu_s = (float(v[0]) for v in m.rates())
    f = np.linspace(0, 1, 200001)
    n = 4
    grid = np.minimum(f * n * mu_p, 63 * f * n * mu_m + 64 * (1 - f) * n * mu_s).max()
    out = lp.fluid_lp(m, n)
    assert out["Lam"] == pytest.approx(grid, rel=1e-5)
    assert out["Lam"] > lp.fluid_lp(replace(m, mixed_slots=0), n)["Lam"]  # decodes beside prefills help


def _law_instance(tmp_path, toml: str, workload: str):
    from stability.sim.simulate import cost_model_of, workload_of

    path = tmp_path / "law.toml"
    path.write_text(toml)
    sc = lp.law_scenario(path, workload)
    cm = cost_model_of(sc)
    return cm, workload_of(sc, cm)


def test_law_times_are_the_staircase_and_other_laws_are_refused(tmp_path):
    cm, w = _law_instance(tmp_path, lp.LAW_TOML, lp.WORKLOAD)
    c, a = lp.LAW_C, lp.LAW_A
    # a chunk of 2 b0 tokens: c + 2a; up to b0 decodes: c + a; a chunk beside 63 decodes: c + 3a
    assert lp.law_times(cm, w, lp.CHUNK, lp.BATCH) == pytest.approx((c + 2 * a, c + a, c + 3 * a))
    with pytest.raises(FieldError, match="multiples of the chunk"):
        lp.law_times(cm, w, 3000, lp.BATCH)
    narrow, w2 = _law_instance(tmp_path, lp.LAW_TOML.replace("b0 = 4096", "b0 = 32"), lp.WORKLOAD)
    with pytest.raises(FieldError, match="batch-time law"):  # 64 decodes take two steps of 32
        lp.law_times(narrow, w2, lp.CHUNK, lp.BATCH)


def test_judge_both_verdicts():
    model, answers = (
        TWO_CLASSES,
        {"splits": {1: 100.0, 2: 80.0, 3: 40.0}, "best": 1, "optimum": {}, "mixed": {}},
    )
    sim = {
        "measured": {1: (100.5, 99.5, 101.5), 2: (79.6, 79.0, 80.2), 3: (40.1, 39.8, 40.4)},
        "replicates": 4,
        "requests": 10,
    }
    ok = lp.judge_splits({**answers, "optimum": {"Lam": 120.0, "mixed_gpus": 1.2}}, sim, model)
    assert ok.verdict is Verdict.PASS
    # tolerances max(1%, half-width): 1.0, 0.8, 0.4; the nearest end is split 2's 79.6 + 0.8
    assert ok.margin == pytest.approx(80.4 / 80 - 1)
    far = {**sim, "measured": {**sim["measured"], 2: (85.0, 84.0, 86.0)}}  # 6% above the LP
    assert lp.judge_splits(answers, far, model).verdict is Verdict.FAIL
    swapped = {**sim, "measured": {**sim["measured"], 1: (79.0, 78.0, 80.0)}}  # best split differs too
    assert lp.judge_splits(answers, swapped, model).verdict is Verdict.FAIL


@pytest.fixture(scope="module")
def instance():
    model, answers = lp.lp_instance()
    return model, answers, lp.simulate_splits(answers["splits"], True)


def test_check_passes_on_the_engine(instance):
    model, answers, sim = instance
    assert answers["best"] == 1 and 1 < answers["optimum"]["mixed_gpus"] < 2
    result = lp.judge_splits(answers, sim, model)
    assert result.verdict is Verdict.PASS, result.summary
    for rp, lam in answers["splits"].items():
        assert lam == pytest.approx(_closed_form(model, lp.GPUS, rp))


@pytest.mark.parametrize(
    "field, factor",
    [("tau_solo", 1.05), ("tau_solo", 0.95), ("tau_mix", 1.05), ("tau_mix", 0.95)],
)
def test_a_misstated_iteration_time_fails(instance, field, factor):
    """The LP read with one iteration time 5% off: the splits it bounds move by ~5% (FAIL)."""
    _, _, sim = instance
    model, answers = lp.lp_instance(transform=lambda m: replace(m, **{field: factor * getattr(m, field)}))
    assert lp.judge_splits(answers, sim, model).verdict is Verdict.FAIL


def test_an_engine_on_another_law_fails(instance):
    """The engine run with c 10% above the LP's law (every batch 8% or 7% longer): FAIL."""
    model, answers, _ = instance
    slower = lp.simulate_splits(answers["splits"], True, law=lp.LAW_TOML.replace("c = 0.004", "c = 0.0044"))
    assert lp.judge_splits(answers, slower, model).verdict is Verdict.FAIL
