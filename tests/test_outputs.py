"""Output contracts of the command line: every ``--json`` print and every JSON file a command writes
parses with a strict JSON reader (no NaN, no Infinity), files are written 0644, region.csv's
columns are all described in region.json's data dictionary, and ``llmq --version`` answers."""

import io
import json
import re
import stat
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from llmq.cli import main
from tests.toys import SOLO_TOML

SOLO = ["--gpu", "solo2", "--workload", "uniform:1-64,1-40"]


def strict(text: str):
    """Parse ``text`` as strict JSON: a bare NaN or Infinity fails the test."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Run every command that prints or writes JSON, small, into one directory; {command: stdout}."""
    import stability.slai.study as study

    tmp = tmp_path_factory.mktemp("outputs")
    (tmp / "simulate").mkdir()  # --log's directory must exist
    gpus = tmp / "solo.toml"
    gpus.write_text(SOLO_TOML)
    g = ["--gpu-file", str(gpus), *SOLO]
    runs = {
        "bounds": ["bounds", "--json", *g],
        "bounds_all": ["bounds", "--json", "--gpu", "all"],
        "simulate": ["simulate", "--json", *g, "--requests", "400", "--scheduler", "rad",
                     "--option", "n=8", "--log", str(tmp / "simulate" / "batches.csv")],
        "dtmc": ["dtmc", "--json", *g, "--n", "4", "--samples", "20", "--out", str(tmp / "dtmc")],
        "region": ["region", "--json", *g, "--scheduler", "rad,request_level", "--raw", "--loads",
                   "0.6,1.1", "--bisect", "0", "--requests-per-node", "1000", "--replicates", "2",
                   "--sat-requests", "2000", "--epsilon", "0.1", "--workers", "1", "--no-progress",
                   "--out", str(tmp / "region")],
        "calibrate": ["calibrate", "--json", "--out", str(tmp / "calibrate")],
        "validate": ["validate", "--quick", "--json", "--gpu", "a100", "--model", "llama-2-7b",
                     "--out", str(tmp / "validate")],
        "plan": ["plan", "--json", "--rate", "60", "--workload", "uniform:64-320,8-40", "--gpu", "a100",
                 "--scheduler", "sarathi", "--max-gpus", "2", "--requests", "300",
                 "--out", str(tmp / "plan")],
        "slai": ["slai", "--quick", "--json", "--no-figures", "--no-progress", "--requests", "200",
                 "--out", str(tmp / "slai")],
    }
    printed = {}
    with pytest.MonkeyPatch.context() as mp:  # one panel at one rate: the outputs' shape, in seconds
        mp.setattr(study, "QUICK", study.Study(study.QUICK.panels[:1], seeds=2, n_requests=200,
                                               rel_rates=(0.8,), paper_rates=(1.6,), smoke=True))
        for name, argv in runs.items():
            buf = io.StringIO()
            with redirect_stdout(buf):
                code = main(argv)
            assert code == 0, (name, buf.getvalue())
            printed[name] = buf.getvalue()
    return tmp, printed


@pytest.mark.parametrize("name", ["bounds", "bounds_all", "simulate", "dtmc", "region", "calibrate",
                                  "validate", "plan", "slai"])
def test_every_json_print_is_strict_json(outputs, name):
    _, printed = outputs
    assert isinstance(strict(printed[name]), (dict, list))


def test_every_json_file_written_is_strict_json_and_0644(outputs):
    tmp, _ = outputs
    files = [p for p in tmp.rglob("*") if p.is_file() and p.name != "solo.toml"]
    written = [p for p in files if p.suffix == ".json"]
    # region.json, validate.json, plan.json, claims.json and the runners' cache entries
    names = {p.name for p in written}
    assert {"region.json", "validate.json", "plan.json", "claims.json"} <= names
    assert sum(p.parent.name == "cache" for p in written) >= 10
    for path in written:
        strict(path.read_text(encoding="utf-8"))
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_null_stands_for_the_non_finite_numbers(outputs):
    """The raw-prompt series has no Theorem 2 line (NaN in memory): null in the JSON, and the
    dictionary says what null means."""
    tmp, printed = outputs
    data = strict((tmp / "region" / "region.json").read_text(encoding="utf-8"))
    assert all(b["theorem2"] is None for b in data["boundaries"] if b["workload_variant"] == "raw")
    assert "null" in data["columns"] and "not finite" in data["columns"]["null"]
    assert strict(printed["region"])["boundaries"][0]["theorem2"] is None


def test_region_csv_columns_are_in_the_data_dictionary(outputs):
    tmp, _ = outputs
    header = (tmp / "region" / "region.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    described = strict((tmp / "region" / "region.json").read_text(encoding="utf-8"))["columns"]["region.csv"]
    assert header == list(described) and all(described[c] for c in header)


def test_every_csv_has_a_data_dictionary(outputs):
    """Beside it (``<stem>.columns.json``) or in the JSON file of its command."""
    tmp, _ = outputs
    in_json = {"region.csv": ("region.json", lambda d: d["columns"]["region.csv"]),
               "validate.csv": ("validate.json", lambda d: d["columns"]),
               "plan.csv": ("plan.json", lambda d: d["columns"])}
    csvs = list(tmp.rglob("*.csv"))
    assert {p.name for p in csvs} >= {"region.csv", "validate.csv", "plan.csv", "batches.csv",
                                      "points.csv", "paper_vs_llmq.csv"}
    for path in csvs:
        header = path.read_text(encoding="utf-8").splitlines()[0].split(",")
        if path.name in in_json:
            name, get = in_json[path.name]
            described = get(strict((path.parent / name).read_text(encoding="utf-8")))
        else:
            side = strict(path.with_name(path.stem + ".columns.json").read_text(encoding="utf-8"))
            assert side["file"] == path.name
            described = side["columns"]
        # plan.csv: one family of columns per latency metric, described by its "metric" entry
        family = re.compile(r"(ttft|tbt|latency)_(p\d+|mean)(@\w+)?(_lo|_hi)?") if "metric" in described \
            else None
        missing = [c for c in header if not described.get(c) and not (family and family.fullmatch(c))]
        assert not missing, (path.name, missing)


def test_quick_slai_says_it_is_a_smoke_test(outputs):
    tmp, printed = outputs
    assert strict(printed["slai"])["smoke_test"] is True
    md = (tmp / "slai" / "slai" / "paper_vs_llmq.md").read_text(encoding="utf-8")
    assert "Smoke test" in md and md.count("(smoke test: see above)") == 1


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    from theory.config import read_toml

    version = read_toml(Path(__file__).resolve().parents[1] / "pyproject.toml")["project"]["version"]
    assert capsys.readouterr().out.strip() == f"llmq {version}"


def test_strict_writer_round_trips_the_cache_encoding():
    """The cache's tagged encoding gives back exactly the non-finite floats it was given."""
    import math

    import numpy as np

    from theory.io import json_load_exact, json_text

    obj = {"a": float("nan"), "b": [np.float64("inf"), -math.inf, 1.5], "c": np.int64(3), "d": (1, 2)}
    back = json_load_exact(json_text(obj, exact=True))
    assert math.isnan(back["a"]) and back["b"] == [math.inf, -math.inf, 1.5] and back["c"] == 3
    assert strict(json_text(obj)) == {"a": None, "b": [None, None, 1.5], "c": 3, "d": [1, 2]}


def test_a_run_manifest_is_written_once_and_compared_field_by_field(tmp_path):
    from theory.errors import FieldError
    from theory.io import claim_output_dir

    run = {"loads": (0.5, 1.0), "seed": 0, "gpu_file": None}
    claim_output_dir(tmp_path, "region", run, write=False)
    assert list(tmp_path.iterdir()) == []  # a check alone writes nothing
    path = claim_output_dir(tmp_path, "region", run)
    assert strict(path.read_text())["run"] == {"loads": [0.5, 1.0], "seed": 0, "gpu_file": None}
    assert claim_output_dir(tmp_path, "region", {**run, "loads": [0.5, 1.0]}) == path  # same run
    with pytest.raises(FieldError, match=r"differs in seed \(0 there, 1 here\)") as err:
        claim_output_dir(tmp_path, "region", {**run, "seed": 1})
    assert "gpu_file" not in str(err.value)
    with pytest.raises(FieldError, match=r"differs in extra \(null there, 2 here\)"):
        claim_output_dir(tmp_path, "region", {**run, "extra": 2})
    claim_output_dir(tmp_path, "plan", {"rate": 1.0})  # another command's manifest: its own file
    # options that only add to the same run's outputs are recorded as the latest run gave them
    claim_output_dir(tmp_path, "plan", {"rate": 1.0}, adds={"verify": True})
    claim_output_dir(tmp_path, "plan", {"rate": 1.0}, adds={"verify": False})
    assert strict((tmp_path / "plan.run.json").read_text())["adds"] == {"verify": False}
    with pytest.raises(FieldError, match=r"differs in rate"):
        claim_output_dir(tmp_path, "plan", {"rate": 2.0}, adds={"verify": False})
