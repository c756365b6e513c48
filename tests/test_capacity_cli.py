"""A cost law stated only in TOML (Li, Dai, Peng's staircase, attention off) through the certified
bound, ``llmq bounds`` and ``llmq region``; the region outputs carry the certified bound while
``region.csv`` keeps its columns.

Expected values are closed forms of the staircase ``t(b) = c + a ceil(b / b0)``: with a token budget
``b`` (a multiple of ``b0``) the capacity is ``(b / t(b)) / E[L_P + L_D]`` (Li, Dai, Peng 2025);
without one, ``t(b) / b`` falls to ``a / b0`` as ``b`` grows, so the bound is ``b0 / (a E[L_P + L_D])``.
"""

from __future__ import annotations

import csv
import json

import pytest

from llmq.cli import main
from stability.region import BOUNDARY_COLUMNS, POINT_COLUMNS, SERIES_COLUMNS, read_csv
from theory.workload import get_workload

C, A, B0, BUDGET = 0.004, 0.002, 64, 512
WORKLOAD = "uniform:32-96,8-24"
LAW = f"""
[gpus.ldp]
base = "a100"
[gpus.ldp.linear_law]
kind = "staircase"
c = {C}
a = {A}
b0 = {B0}

[models.noattn]
base = "mistral-7b"
attention = false
"""


@pytest.fixture(scope="module")
def law_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("law") / "law.toml"
    path.write_text(LAW)
    return str(path)


def law_args(path: str) -> list[str]:
    return ["--gpu", "ldp", "--gpu-file", path, "--model", "noattn", "--model-file", path,
            "--workload", WORKLOAD]


def mean_tokens() -> float:
    w = get_workload(WORKLOAD)
    return w.expect(w.L_P + w.L_D)


def test_llmq_bounds_prints_the_toml_laws_capacity(law_file, capsys):
    assert main(["bounds", *law_args(law_file), "--token-budget", str(BUDGET), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    closed = BUDGET / (C + A * BUDGET / B0) / mean_tokens()
    assert row["certified"]["bound"] == pytest.approx(closed, rel=1e-9)
    assert row["certified"]["binds"] in ("compute", "kv-memory")
    assert main(["bounds", *law_args(law_file), "--json"]) == 0
    uncapped = json.loads(capsys.readouterr().out)["certified"]
    assert uncapped["bound"] == pytest.approx(B0 / (A * mean_tokens()), rel=1e-9)


def test_llmq_region_carries_the_certified_bound_of_the_toml_law(law_file, tmp_path):
    out = tmp_path / "out"
    argv = ["region", *law_args(law_file), "--scheduler", "request_level", "--raw",
            "--requests-per-node", "600", "--loads", "0.5,1.2",
            "--bisect", "0", "--replicates", "2", "--sat-requests", "1500", "--out", str(out)]
    assert main(argv) == 0
    bound = B0 / (A * mean_tokens())
    summary = json.loads((out / "region.json").read_text())
    assert len(summary["boundaries"]) == 1
    for b in summary["boundaries"]:
        assert b["certified_bound"] == pytest.approx(bound, rel=1e-9)
        assert b["certified_binds"] == "compute"  # request-level batching models no KV memory
        assert b["ci_low"] <= bound  # no scheduler above the certified bound
    with open(out / "region.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == SERIES_COLUMNS + BOUNDARY_COLUMNS + POINT_COLUMNS
    assert "certified_bound" not in header and "certified_binds" not in header
    rows = read_csv(out / "region.csv")  # --plot-only picks the bound up from region.json
    assert {r["certified_bound"] for r in rows} == {summary["boundaries"][0]["certified_bound"]}
    (out / "region.png").unlink()
    assert main(["region", "--plot-only", str(out / "region.csv"), "--out", str(out)]) == 0
    assert (out / "region.png").stat().st_size > 10_000


def test_region_certified_line_takes_the_kv_bound_of_a_memory_scheduler(law_file):
    """A scheduler that models KV memory gets min(compute, KV) with its own cache (blocks x block
    size), and says which binds; one without memory keeps the compute bound."""
    from stability.region import SweepSpec, build_series
    from theory.builder import CostSpec, cost_model
    from theory.capacity import capacity_bound

    blocks = 40  # 640 tokens: a handful of requests of this law, so KV memory binds
    spec = SweepSpec(tilesets=("ldp",), gpu_file=law_file, model="noattn", model_file=law_file,
                     workload=WORKLOAD, schedulers=("sarathi", "request_level"),
                     options=(("sarathi", (("kv_blocks", blocks),)),), variants=("raw",))
    series = {s.scheduler: s for s in build_series(spec, {})}
    cm = cost_model(CostSpec("ldp", "noattn", "paper", None, law_file, law_file))
    w = get_workload(WORKLOAD)
    kv = capacity_bound(cm, w, kv_tokens=blocks * 16.0)
    assert kv.binds == "kv-memory" and kv.lam_kv < kv.lam_compute
    assert series["sarathi"].certified == pytest.approx(kv.bound, rel=1e-12)
    assert series["sarathi"].certified_binds == "kv-memory"
    assert series["request_level"].certified == pytest.approx(B0 / (A * mean_tokens()), rel=1e-9)
    assert series["request_level"].certified_binds == "compute"
