"""``llmq validate``: the cost model's predictions against every shipped public profile.

Prints one line per GPU x model x TP x operation (median and 90th-percentile absolute relative
error as shipped, calibrated and scored on held-out token counts, calibrated on the other models,
and in paper mode), measured self-attention batches against Eq. 5-6 per batch kind, then one verdict
per GPU on the acceptance targets; writes ``OUT/validate.md``, ``validate.csv``, ``validate.json``,
``validate_not_predicted.csv`` (rows not scored, with the reason, among them those faster than
the roofline bound of their shape), ``validate_attention.csv`` (each with its data dictionary)
and the staircase figures
``OUT/validate_<gpu>_<model>.png`` (:mod:`theory.validation.report`). The computation is
:func:`theory.validation.validate.validate`; the profile loads, the calibrations, the MoE scoring and
the figures run on ``--workers`` processes (:mod:`theory.validation.fan_out`), and no output depends
on their number.

``--serving`` replays the shipped measured serving runs end to end instead
(:mod:`stability.serving`): measured against predicted TTFT, TPOT and latency per run, beside the
source's own simulator; writes ``OUT/serving.md``, ``serving.csv`` (with its data dictionary),
``serving.json`` (whose ``files`` entry names every file) and per run ``serving_<run>.png`` with
the data it plots (``serving_<run>_requests.csv``, ``serving_<run>_queues.csv``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from llmq.options import add, add_common, command, one, parse_gpus, parse_names, resolve
from llmq.output import out_dir, print_json

HELP = ("predicted vs measured for every shipped profile (vidur and LLMServingSim GeMMs, all-reduce, "
        "splitwise batches, LLMServingSim attention): median/p90 error as shipped, calibrated on held-out "
        "tokens and models, paper mode")


def add_parser(sub) -> None:
    """Register ``llmq validate`` and its options on the sub-command parser ``sub``; it scores both layer
    modes on the measured profiles, so it takes no workload, tile restriction, mode or r."""
    p = command(sub, "validate", HELP)
    add_common(p, ("gpu", "gpu_file", "model", "model_file", "seed", "out", "json"),
               defaults={"gpu": "all", "model": "all"}, details={
                   "gpu": "the GPUs to validate, or 'all' (default all); --gpu-file may override a preset's "
                          "fields (e.g. to switch cost terms on)",
                   "model": "the models to validate, or 'all' (default all)"})
    add(p, "--quick", False, "a small deterministic subset: Llama-2-7B (with InternLM-20B to calibrate "
                             "across models) at TP 1 and 2 on every GPU of the data")
    add(p, "--profile", None, "profile name(s) or CSV path(s), comma-separated (default: every shipped "
                              "profile)")
    add(p, "--every", 4, "hold out every k-th distinct token count, k >= 2 (default 4)", type=int)
    add(p, "--max-train", 8000, "at most this many evenly spaced training rows per calibration, >= 10 "
                                "(default 8000)", type=int)
    add(p, "--workers", os.cpu_count() or 1, "processes for the calibrations and figures (default: the CPU "
                                             "count); the results do not depend on it")
    add(p, "--serving", False, "replay the shipped measured serving runs (vLLM) end to end instead of "
                               "scoring the profiles", action="store_true")
    add(p, "--scheduler", "vllm_v1", "with --serving: the policy the runs are replayed on, vllm_v1 "
                                     "(default) or sarathi")
    add(p, "--runs", None, "with --serving: run name(s), comma-separated (default: every shipped run)")
    p.set_defaults(run=run)


def _names(field: str, value) -> tuple[str, ...]:
    names = parse_gpus(field, value) if field == "--gpu" else parse_names(field, value)
    return () if [n.lower() for n in names] == ["all"] else tuple(names)


def _check_numbers(values: dict) -> None:
    """The hold-out stride, the training cap and the workers, checked before the validation's minutes
    of work."""
    from theory.errors import FieldError
    from theory.validation.fan_out import check_workers

    every = values["every"]
    if isinstance(every, bool) or not isinstance(every, int) or every < 2:
        raise FieldError("--every", every, "an integer >= 2 (every k-th distinct token count is held out)")
    if isinstance(values["max_train"], bool) or not isinstance(values["max_train"], int) \
            or values["max_train"] < 10:
        raise FieldError("--max-train", values["max_train"], "an integer >= 10")
    try:
        check_workers(values["workers"])
    except FieldError as exc:
        raise FieldError("--workers", values["workers"], exc.expected) from None


def _settings(values: dict):
    from theory.hardware import get_gpu
    from theory.models import get_model
    from theory.validation.results import Settings

    gpus = tuple(get_gpu(g, values["gpu_file"]).key for g in _names("--gpu", values["gpu"]))
    models = tuple(get_model(m, values["model_file"]).key for m in _names("--model", values["model"]))
    return Settings(every=values["every"], max_train=values["max_train"], seed=values["seed"],
                    quick=bool(values["quick"]), gpus=gpus, models=models,
                    gpu_file=values["gpu_file"], model_file=values["model_file"])


def _profile_names(value) -> dict[str, str]:
    """``--profile`` as ``{key: name or path}`` (every shipped profile by default)."""
    from theory.profiles import shipped_profiles

    names = parse_names("--profile", value) if value else list(shipped_profiles())
    return {Path(n).name.split(".")[0] if n not in shipped_profiles() else n: n for n in names}


def _serving_options(values: dict) -> tuple[str, tuple[str, ...] | None]:
    """``--scheduler`` and ``--runs`` of ``--serving``, checked before any replay; the profile
    options are refused with it (they would be silently ignored)."""
    from stability.serving.replay import SCHEDULERS
    from theory.errors import FieldError, UnknownNameError
    from theory.validation.serving_runs import shipped_runs

    for name in ("quick", "profile", "gpu_file", "model_file"):
        if values[name] not in (None, False):
            raise FieldError(f"--{name.replace('_', '-')}", values[name], "not given with --serving "
                             "(the runs fix their GPU, model and engine)")
    if "workers" in values.given:
        raise FieldError("--workers", values["workers"], "not given with --serving (the replays run in "
                         "one process)")
    scheduler = one("--scheduler", values["scheduler"], "scheduler", "validate --serving")
    if scheduler not in SCHEDULERS:
        raise UnknownNameError("--scheduler", scheduler, list(SCHEDULERS))
    runs = None
    if values["runs"]:
        runs = tuple(parse_names("--runs", values["runs"]))
        for r in runs:
            if r not in shipped_runs():
                raise UnknownNameError("--runs", r, list(shipped_runs()))
    return scheduler, runs


def run_serving(values: dict) -> int:
    """``llmq validate --serving``: every shipped run (or ``--runs``) replayed and scored."""
    from stability.serving.report import console_lines, to_json, write_outputs
    from stability.serving.score import score_runs

    scheduler, runs = _serving_options(values)
    out = out_dir(values["out"])
    scores = score_runs(scheduler, runs)
    files = write_outputs(scores, scheduler, out)
    if values["json"]:
        print_json(to_json(scores, scheduler))
    else:
        print("\n".join([*console_lines(scores, scheduler), "wrote " + ", ".join(str(f) for f in files)]))
    return 0


def run(args) -> int:
    """Run ``llmq validate`` on the parsed ``args``; the exit code."""
    from dataclasses import asdict

    from theory.io import claim_output_dir
    from theory.validation.fan_out import load_profiles
    from theory.validation.kept import kept_validate
    from theory.validation.report import console_lines, to_json, write_outputs

    values = resolve(args)
    if values["serving"]:
        return run_serving(values)
    for name in ("runs", "scheduler"):
        if name in values.given:
            from theory.errors import FieldError

            raise FieldError(f"--{name}", values[name], "given only with --serving")
    _check_numbers(values)
    out = out_dir(values["out"])
    settings = _settings(values)
    start = time.perf_counter()
    names = _profile_names(values["profile"])
    identity = {**asdict(settings), "profiles": sorted(names)}
    claim_output_dir(out, "validate", identity, cached=False, write=False)  # before the profiles load
    profiles = load_profiles(names, values["workers"])
    claim_output_dir(out, "validate", identity, cached=False)
    report = kept_validate(profiles, settings, values["workers"])
    elapsed = time.perf_counter() - start
    files = write_outputs(report, out, elapsed_s=elapsed, workers=values["workers"])
    if values["json"]:
        print_json(to_json(report, files, elapsed))
    else:
        print("\n".join(console_lines(report, files)))
    return 0
