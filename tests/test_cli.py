"""The llmq command line: bounds (JSON and table), config files, and errors."""

import json

import pytest

from llmq.cli import main

FIELDS = {"gpu", "model", "workload", "r", "epsilon", "t_star", "t_lcm", "T_bar_R_s", "T_max_s",
          "lambda_star", "n_min", "cycle_bound_s", "lemma4_bound_s", "assumptions"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bounds_json_has_the_fields_and_depends_on_the_gpu(capsys):
    code, out, _ = run(capsys, "bounds", "--json")
    assert code == 0
    a100 = json.loads(out)
    assert FIELDS <= set(a100)
    code, out, _ = run(capsys, "bounds", "--json", "--gpu", "h100")
    assert code == 0
    h100 = json.loads(out)
    assert h100["lambda_star"] > a100["lambda_star"]
    assert h100["T_bar_R_s"] < a100["T_bar_R_s"]


def test_bounds_all_gpus_table(capsys):
    code, out, _ = run(capsys, "bounds", "--gpu", "all")
    assert code == 0
    for key in ("a100", "h100", "h200", "l40s", "rtx6000ada", "l4"):
        assert f"\n{key} " in out
    code, out, _ = run(capsys, "bounds", "--gpu", "all", "--json")
    assert code == 0 and len(json.loads(out)) >= 6


def test_bounds_marks_which_gpu_rates_are_calibrated(capsys):
    """Real mode uses the shipped calibration where public data exist; every other GPU, and paper
    mode always, says "roofline, uncalibrated"."""
    from theory.hardware import calibrated_keys

    code, out, _ = run(capsys, "bounds", "--gpu", "all", "--mode", "real", "--json")
    assert code == 0
    rates = {r["gpu"]: r["gpu_rates"] for r in json.loads(out)}
    assert {g for g, v in rates.items() if v != "roofline, uncalibrated"} == set(calibrated_keys())
    profile = {"rtx4090": "llmservingsim_rtx4090", "rtxpro6000": "llmservingsim_rtxpro6000",
               "h200": "llmq_h200"}
    assert all(profile.get(g, "vidur_gemm") in rates[g] for g in calibrated_keys())
    code, out, _ = run(capsys, "bounds", "--gpu", "all", "--mode", "real")
    assert "\nl4 " in out and out.count("roofline, uncalibrated") == len(rates) - len(calibrated_keys())
    code, out, _ = run(capsys, "bounds", "--gpu", "all", "--mode", "paper", "--json")
    assert {r["gpu_rates"] for r in json.loads(out)} == {"roofline, uncalibrated"}


def test_config_file_and_cli_precedence(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('gpu = "h100"\nworkload = "deterministic:512,64"\ngpus_r = 2\nepsilon = 0.2\n')
    code, out, _ = run(capsys, "bounds", "--config", str(f), "--json")
    assert code == 0
    row = json.loads(out)
    assert (row["gpu"], row["r"], row["epsilon"]) == ("h100", 2, 0.2)
    code, out, _ = run(capsys, "bounds", "--config", str(f), "--gpu", "l4", "--json")
    assert code == 0 and json.loads(out)["gpu"] == "l4"


def test_pad_meets_assumption3(capsys):
    code, out, _ = run(capsys, "bounds", "--pad", "--json", "--workload", "sharegpt4")
    assert code == 0
    row = json.loads(out)
    assert row["assumption3_mass"] == 1.0 and row["assumptions"]["Assumption 3"]["holds"]


@pytest.mark.parametrize("argv, message", [
    (["bounds", "--gpu", "b200"], "unknown GPU 'b200'"),
    (["bounds", "--model", "gpt"], "unknown model"),
    (["bounds", "--workload", "nope"], "unknown workload"),
    (["bounds", "--epsilon", "2"], "epsilon"),
    (["bounds", "--gpus-r", "0"], "r: expected an integer >= 1"),
    (["bounds", "--tiles", "96x96"], "tiles"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_bad_config(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("gpu = [")
    code, _, err = run(capsys, "bounds", "--config", str(f))
    assert code == 2 and "malformed TOML" in err
    f.write_text('colour = "blue"\n')
    code, _, err = run(capsys, "bounds", "--config", str(f))
    assert code == 2 and "colour" in err


def test_option_values_are_typed():
    from llmq.options import parse_options, parse_value

    assert parse_options(["memory=false", "n=2000", "order=spf", "delta=2.5", "dynamic=True"]) == (
        ("delta", 2.5), ("dynamic", True), ("memory", False), ("n", 2000), ("order", "spf"))
    assert parse_value("False") is False and parse_value("no") == "no"


@pytest.mark.parametrize("line, key", [('pad = "false"', "pad"), ('json = "no"', "json"),
                                       ('gpus_r = "two"', "gpus_r"), ('epsilon = "0.1"', "epsilon"),
                                       ("model = 7", "model")])
def test_config_values_have_the_option_type(capsys, tmp_path, line, key):
    f = tmp_path / "s.toml"
    f.write_text(line + "\n")
    code, out, err = run(capsys, "bounds", "--config", str(f))
    assert code == 2 and f"{key}: expected" in err and out == ""


def test_a_real_toml_boolean_is_accepted(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("pad = true\njson = true\n")
    code, out, _ = run(capsys, "bounds", "--config", str(f))
    assert code == 0 and json.loads(out)["assumption3_mass"] == 1.0


def test_bounds_prints_the_certified_capacity_and_why(capsys, tmp_path):
    from theory.bounds import lambda_star
    from theory.builder import CostSpec, cost_model
    from theory.workload import get_workload

    code, out, _ = run(capsys, "bounds", "--workload", "deterministic:512,64", "--json")
    row = json.loads(out)["certified"]
    # Eq. 2-7: never below lambda* (the exact minimal work is at most T_bar^R)
    assert code == 0 and row["binds"] == "compute" and row["vs_lambda_star"] >= -1e-12
    f = tmp_path / "g.toml"
    f.write_text('[gpus.slow]\nbase = "a100"\noverhead_s = 0.005\n')
    code, out, _ = run(capsys, "bounds", "--workload", "deterministic:512,64", "--gpu", "slow",
                       "--gpu-file", str(f), "--token-budget", "2048", "--json")
    row = json.loads(out)
    lam = lambda_star(cost_model(CostSpec("slow", gpu_file=str(f))), get_workload("deterministic:512,64"))
    assert code == 0 and row["lambda_star"] == pytest.approx(lam)
    # a 5 ms per-batch time that batches of <= 2048 tokens cannot amortise: below lambda*
    assert row["certified"]["bound"] < lam and "per-batch fixed time" in row["certified"]["why"]
    assert row["certified"]["token_budget"] == 2048
