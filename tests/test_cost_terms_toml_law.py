"""Acceptance of the cost terms (theory.terms): a cost law stated only in TOML runs through
``llmq bounds``, ``llmq simulate``, ``llmq region`` and the certified capacity, and the simulated
batches last exactly what the law says."""

import csv
import json
import math

import pytest

from llmq.cli import main
from tests.test_cost_terms import gpu_file
from theory.builder import CostSpec, cost_model
from theory.workload import get_workload

C, A, B0 = 0.003, 0.002, 64
LAW_GPUS = f"""
[gpus.law]
base = "a100"
overhead_s = {C}              # fixed per-batch time c
[gpus.law.linear_law]
kind = "staircase"            # + a ceil(tokens / b0)
a = {A}
b0 = {B0}
"""
LAW_MODELS = """
[models.noattn]
base = "mistral-7b"
attention = false
"""


@pytest.fixture()
def law_files(tmp_path):
    return (gpu_file(tmp_path, LAW_GPUS, "law_gpus.toml"),
            gpu_file(tmp_path, LAW_MODELS, "law_models.toml"))


def law_argv(files):
    return ["--gpu", "law", "--gpu-file", files[0], "--model", "noattn", "--model-file", files[1]]


def test_law_in_toml_through_bounds(law_files, capsys):
    assert main(["bounds", "--json", "--workload", "deterministic:100,20", *law_argv(law_files)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["T_bar_R_s"] == pytest.approx(120 * A / B0, rel=1e-12)  # c amortized; a/b0 per token
    assert out["T_max_s"] == pytest.approx(120 * (C + A), rel=1e-12)  # each token alone: c + a


@pytest.mark.parametrize("scheduler", ["rad", "sarathi"])
def test_law_in_toml_through_simulate_batches_equal_the_law(law_files, tmp_path, capsys, scheduler):
    log = tmp_path / f"{scheduler}.csv"
    argv = ["simulate", *law_argv(law_files), "--scheduler", scheduler, "--workload",
            "uniform:1-300,1-30", "--requests", "150", "--load", "0.7", "--log", str(log)]
    assert main(argv) == 0, capsys.readouterr().err
    with open(log) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) > 50
    kinds = set()
    for row in rows:
        tokens = int(row["tokens"])
        assert float(row["duration"]) == C + A * math.ceil(tokens / B0), row
        kinds.add((int(row["decodes"]) > 0, int(row["prefills"]) > 0))
    assert (True, False) in kinds or (True, True) in kinds  # decodes were priced, not only prefills


def test_law_in_toml_through_region(law_files, tmp_path, capsys):
    out = tmp_path / "region"
    argv = ["region", *law_argv(law_files), "--workload", "uniform:1-64,1-40", "--scheduler", "rad",
            "--loads", "0.5,1.2", "--bisect", "0", "--replicates", "2", "--requests-per-node", "200",
            "--sat-requests", "200", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    with open(out / "region.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["tileset"] for r in rows} == {"law"}
    w = get_workload("uniform:1-64,1-40")
    lam = float(w.expect(w.L_P + w.L_D)) * A / B0
    raw = [r for r in rows if r["workload_variant"] == "raw"]
    assert float(raw[0]["lambda_star"]) == pytest.approx(1 / lam, rel=1e-9)


def test_capacity_bound_of_the_toml_law_is_the_staircase_laws(law_files):
    """theory.capacity states the staircase law on its own (staircase_law); the cost model built
    from the TOML law gives the same certified bound, and every term combination passes the
    capacity module's check of its tail slope."""
    from theory.capacity import capacity_bound, staircase_law

    w = get_workload("uniform:1-300,1-30")
    cm = cost_model(CostSpec("law", "noattn", gpu_file=law_files[0], model_file=law_files[1]))
    ref = capacity_bound(staircase_law(C, A, B0), w)
    got = capacity_bound(cm, w)
    assert got.bound == pytest.approx(ref.bound, rel=1e-12)
    assert got.pieces_s == pytest.approx(ref.pieces_s, rel=1e-12)
