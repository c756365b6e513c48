"""``llmq validate``: the cost model's predictions against every shipped public profile.

Prints one line per GPU x model x TP x operation (median and 90th-percentile absolute relative
error as shipped, calibrated and scored on held-out token counts, calibrated on the other models,
and in paper mode), measured self-attention batches against Eq. 5-6 per batch kind, then one verdict
per GPU on the acceptance targets; writes ``OUT/validate.md``, ``validate.csv``, ``validate.json``,
``validate_not_predicted.csv`` (rows not scored, with the reason, among them those faster than
the roofline bound of their shape), ``validate_attention.csv`` (each with its data dictionary)
and the staircase figures
``OUT/validate_<gpu>_<model>.png`` (:mod:`theory.validation.report`). The computation is
:func:`theory.validation.validate.validate`.
"""

from __future__ import annotations

import time
from pathlib import Path

from llmq.options import COMMON_DEFAULTS, add_common, parse_names, resolve
from llmq.output import out_dir, print_json

HELP = ("predicted vs measured for every shipped profile (vidur and LLMServingSim GeMMs, all-reduce, "
        "splitwise batches, LLMServingSim attention): median/p90 error as shipped, calibrated on held-out "
        "tokens and models, paper mode")
DEFAULTS = {"gpu": "all", "model": "all", "quick": False, "profile": None, "every": 4, "max_train": 8000}
UNUSED = ("tiles", "workload", "pad", "gpus_r", "mode")  # common options validate has no use for


def add_parser(sub) -> None:
    """Register ``llmq validate`` and its options on the sub-command parser ``sub``."""
    p = sub.add_parser("validate", help=HELP, description=HELP)
    add_common(p, defaults=DEFAULTS, overrides={
        "gpu": {"help": "GPU preset(s) to validate, comma-separated, or 'all' (default all); "
                        "--gpu-file may override a preset's fields (e.g. to switch cost terms on)"},
        "model": {"help": "model preset(s) to validate, comma-separated, or 'all' (default all)"}})
    p.add_argument("--quick", action="store_true", default=None,
                   help="a small deterministic subset: Llama-2-7B (with InternLM-20B to calibrate "
                        "across models) at TP 1 and 2 on every GPU of the data")
    p.add_argument("--profile", help="profile name(s) or CSV path(s), comma-separated "
                                     "(default: every shipped profile)")
    p.add_argument("--every", type=int, help="hold out every k-th distinct token count (default 4)")
    p.add_argument("--max-train", type=int,
                   help="at most this many evenly spaced training rows per calibration (default 8000)")
    p.set_defaults(run=run)


def _names(value) -> tuple[str, ...]:
    names = parse_names(value)
    return () if [n.lower() for n in names] == ["all"] else tuple(names)


def _check_unused(values: dict) -> None:
    from theory.errors import FieldError

    for key in UNUSED:
        if values.get(key) != COMMON_DEFAULTS[key]:
            raise FieldError(f"--{key.replace('_', '-')}", values[key],
                             "not set: llmq validate scores both layer modes on the measured "
                             "profiles and uses no workload, tile restriction or r")
    if values["max_train"] < 10:
        raise FieldError("--max-train", values["max_train"], "an integer >= 10")


def _settings(values: dict):
    from theory.hardware import get_gpu
    from theory.models import get_model
    from theory.validation.results import Settings

    gpus = tuple(get_gpu(g, values["gpu_file"]).key for g in _names(values["gpu"]))
    models = tuple(get_model(m, values["model_file"]).key for m in _names(values["model"]))
    return Settings(every=values["every"], max_train=values["max_train"], seed=values["seed"],
                    quick=bool(values["quick"]), gpus=gpus, models=models,
                    gpu_file=values["gpu_file"], model_file=values["model_file"])


def _profiles(value) -> dict:
    from theory.profiles import load_profile, shipped_profiles

    names = parse_names(value) if value else list(shipped_profiles())
    return {Path(n).name.split(".")[0] if n not in shipped_profiles() else n: load_profile(n) for n in names}


def run(args) -> int:
    """Run ``llmq validate`` on the parsed ``args``; the exit code."""
    from dataclasses import asdict

    from theory.io import claim_output_dir
    from theory.validation.report import console_lines, to_json, write_outputs
    from theory.validation.validate import validate

    values = resolve(args)
    _check_unused(values)
    out = out_dir(values["out"])
    settings = _settings(values)
    start = time.perf_counter()
    profiles = _profiles(values["profile"])
    claim_output_dir(out, "validate", {**asdict(settings), "profiles": sorted(profiles)}, cached=False)
    report = validate(profiles, settings)
    elapsed = time.perf_counter() - start
    files = write_outputs(report, out, elapsed_s=elapsed)
    if values["json"]:
        print_json(to_json(report, files, elapsed))
    else:
        print("\n".join(console_lines(report, files)))
    return 0
