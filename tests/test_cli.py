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
    from llmq.options import parse_value
    from llmq.scheduler_options import scheduler_options

    got = scheduler_options(["memory=false", "n=2000", "order=spf", "delta=2.5", "dynamic=True"], ["rad"])
    assert got == {"rad": {"memory": [False], "n": [2000], "order": ["spf"], "delta": [2.5],
                           "dynamic": [True]}}
    assert parse_value("False") is False and parse_value("no") == "no"


def test_scheduler_options_have_one_syntax_on_the_command_line_and_in_a_config_file():
    """``SCHED.NAME=VALUE`` everywhere (``SCHED.`` may go with one scheduler), the same as a TOML
    table; ``V1|V2`` only where a command tries alternatives (``llmq plan``)."""
    from llmq.scheduler_options import scheduler_options
    from theory.errors import FieldError

    both = ["rad", "sarathi"]
    want = {"rad": {"n": [500]}, "sarathi": {"chunk_size": [256]}}
    assert scheduler_options(["rad.n=500", "sarathi.chunk_size=256"], both) == want
    assert scheduler_options({"rad": {"n": 500}, "sarathi": {"chunk_size": 256}}, both) == want
    assert scheduler_options({"n": 500}, ["rad"]) == scheduler_options(["rad.n=500"], ["rad"]) \
        == {"rad": {"n": [500]}}
    assert scheduler_options(["sarathi.chunk_size=256|512"], both, alternatives=True) == {
        "sarathi": {"chunk_size": [256, 512]}}
    for bad, message in ((["n=500"], "SCHEDULER.NAME=VALUE"), (["sarathi.chunk_size=256|512"], "--option"),
                         (["vllm.max_num_seqs=8"], "a scheduler among --scheduler"),
                         (["rad.n="], "SCHEDULER.NAME=VALUE")):
        with pytest.raises(FieldError, match=message):
            scheduler_options(bad, both)


def test_plan_options_come_from_a_config_file_too(tmp_path):
    """``llmq plan`` is on the same option layer: its config file keys are its option names, the
    command line wins, and a misspelled key names the nearest one."""
    from llmq.cli import build_parser
    from llmq.commands.plan import spec_from
    from llmq.options import resolve

    f = tmp_path / "plan.toml"
    f.write_text('gpu = "a100,l40s"\nscheduler = "sarathi"\noption = ["sarathi.chunk_size=256|512"]\n'
                 'rate = 12.5\n')
    spec = spec_from(resolve(build_parser().parse_args(["plan", "--config", str(f)])))
    assert (spec.gpus, spec.schedulers, spec.rate) == (("a100", "l40s"), ("sarathi",), 12.5)
    assert spec.knobs == {"sarathi": ({"chunk_size": 256}, {"chunk_size": 512})}
    spec = spec_from(resolve(build_parser().parse_args(["plan", "--config", str(f), "--gpu", "h100"])))
    assert spec.gpus == ("h100",)
    f.write_text("schedulr = 'rad'\n")
    with pytest.raises(ValueError, match="did you mean 'scheduler'"):
        resolve(build_parser().parse_args(["plan", "--config", str(f)]))


def test_bounds_takes_one_gpu_or_a_list(capsys):
    code, out, _ = run(capsys, "bounds", "--gpu", "a100,h100", "--json")
    assert code == 0 and [row["gpu"] for row in json.loads(out)] == ["a100", "h100"]


@pytest.mark.parametrize("raised, message", [
    (KeyboardInterrupt(), "llmq simulate: interrupted"),
    ("sweep", "llmq simulate: interrupted; 0 runs cached in"),
])
def test_ctrl_c_prints_interrupted_and_exits_130(capsys, monkeypatch, tmp_path, raised, message):
    """A bare Ctrl-C says "interrupted" (never an empty message); a sweep's says what it cached."""
    from llmq.commands import simulate
    from stability.runner import SweepInterrupted

    exc = SweepInterrupted(tmp_path) if raised == "sweep" else raised

    def interrupted(args):
        raise exc

    monkeypatch.setattr(simulate, "run", interrupted)
    code, _, err = run(capsys, "simulate")
    assert code == 130 and err.startswith(message) and len(err.strip().splitlines()) == 1


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
    assert "linear time per token" not in row["certified"]["why"]  # 2048 is a whole number of tiles
    # no fixed time: a mixture of experts whose batches of <= 2048 tokens leave experts unshared
    code, out, _ = run(capsys, "bounds", "--gpu", "h100", "--model", "qwen3-30b-a3b", "--mode", "real",
                       "--token-budget", "2048", "--json")
    row = json.loads(out)
    assert code == 0 and row["certified"]["bound"] < row["lambda_star"]
    assert "linear time per token of the best batch" in row["certified"]["why"]
    assert "fixed time" not in row["certified"]["why"]


def _boundary(tileset, scheduler, variant, **kw):
    """One row of stability.region.boundary_rows, as a sweep without two classes gives it."""
    nan = float("nan")
    row = {"tileset": tileset, "scheduler": scheduler, "options": "", "r": 1, "workload": "table1",
           "workload_variant": variant, "class_1": "", "share_1": nan, "boundary": 1.6, "ci_low": 1.59,
           "ci_high": 1.61, "lambda_star": 1.7, "ratio": 1.6 / 1.7,
           "theorem2": 1.615 if variant == "pad" else nan,
           "dtmc_boundary": nan, "exceeds_lambda_star": False, "consistent": True, "saturated": True}
    return {**row, **kw}


def test_region_table_says_what_does_not_apply_and_explains_its_flags():
    """'-' (never nan) where a value does not apply; RAD's n with the rate n = auto was tuned for
    (lambda* (1 - eps) of its padded workload); a legend line for every flag shown, none for others."""
    from llmq.region_table import FLAGS, table_lines
    from stability.region import SweepSpec

    rows = [_boundary("a100", "rad", "pad", options="n=183", dtmc_boundary=1.65),
            _boundary("a100", "rad", "raw", options="n=183", dtmc_boundary=1.7, consistent=False),
            _boundary("a100", "sarathi", "pad", options="chunk_size=256", saturated=False,
                      ci_high=float("inf")),
            _boundary("a100", "sarathi", "raw")]
    spec = SweepSpec(tilesets=("a100",), schedulers=("rad", "sarathi"), epsilon=0.05)
    lines = table_lines(rows, spec)
    text = "\n".join(lines)
    assert "nan" not in text.lower()
    body = {ln.split()[1] + " " + ln.split()[3]: ln.split() for ln in lines[2:6]}
    # columns: tile set, scheduler, r, var, share, boundary, CI (two words), lambda*, ratio, lam*(1-e), n...
    assert body["rad pad"][10:15] == ["1.615", "183", "auto", "1.615", "1.65"]
    assert body["rad raw"][10:15] == ["-", "183", "auto", "1.615", "1.7"]  # n's target is the pad row's
    assert body["sarathi[chunk_size=256] pad"][10:14] == ["1.615", "-", "-", "-"]  # no n, target or DTMC
    assert body["sarathi raw"][4] == "-"  # no share in a one-class sweep
    assert "[1.59, inf]" in lines[4] and lines[4].endswith("not saturated")
    assert lines[3].endswith("bisection bracket disagrees")
    legend = text[text.index("legend:"):]
    assert "lambda* (1 - eps), eps = 0.05" in legend and "n target" in legend and "Sarathi-Serve" in legend
    for flag in FLAGS:
        assert (f"  {flag}:" in legend) == (flag != "ABOVE lambda*"), flag
    given = "\n".join(table_lines(rows, SweepSpec(tilesets=("a100",), options=(("rad", (("n", 183),)),))))
    assert "183 auto" not in given and "n target" not in given.split("legend:")[1]  # n given: no target
