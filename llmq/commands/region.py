"""``llmq region``, the main job: empirical stability boundaries per GPU tile set and scheduler,
set against Theorem 1's lambda* and Theorem 2's guarantee (see :mod:`stability.region`)."""

from __future__ import annotations

import os
from dataclasses import asdict

from llmq.options import (
    add,
    add_common,
    command,
    parse_floats,
    parse_gpus,
    parse_ints,
    parse_names,
    renamed,
    resolve,
    single,
)
from llmq.output import out_dir, print_json
from llmq.scheduler_options import check_scheduler_options, scheduler_options
from theory.defaults import RAD_N
from theory.errors import FieldError
from theory.io import claim_output_dir

HELP = ("the main job: sweep lambda per GPU tile set, scheduler and r, locate each stability "
        "boundary with a CI, and plot it against lambda* (Theorem 1) and Theorem 2")


def add_parser(sub) -> None:
    """Register ``llmq region`` and its options on the sub-command parser ``sub``."""
    from stability.region import DEFAULT_LOADS, DEFAULT_SCHEDULERS, SweepSpec

    d = SweepSpec()
    p = command(sub, "region", HELP)
    add_common(p, ("gpu", "gpu_file", "tiles", "model", "model_file", "precision", "mode",
                   "workload", "gpus_r", "seed",
                   "out", "json"), defaults={"gpu": "a100,rtx6000ada", "gpus_r": [1]}, details={
        "gpu": "the tile sets to sweep: presets, 'all', or restricted tile sets such as a100:128x128 "
               "(default a100,rtx6000ada)",
        "gpus_r": "one or a comma-separated list to sweep, e.g. 1,2,4 (default 1)"})
    add(p, "--scheduler", ",".join(DEFAULT_SCHEDULERS),
        f"to compare (default {','.join(DEFAULT_SCHEDULERS)}; those not registered in this build are "
        "skipped)")
    add(p, "--option", [], "e.g. --option rad.n=2000 (RAD's n defaults to 'auto': the DTMC's empirical "
                           "n_min at --epsilon; see theory.defaults)", metavar="SCHED.NAME=VALUE")
    variant = p.add_mutually_exclusive_group()
    add(p, "--pad", False, "only padded prompts (default: both padded and raw)", to=variant)
    add(p, "--raw", False, "default: both padded and raw", to=variant)
    add(p, "--both", False, "padded (Assumption 3) and raw prompts (the default)", to=variant,
        action="store_true")
    add(p, "--requests-per-node", 100000, "requests per node in each verdict run, r times as many in all "
                                          "(default 100000)", type=int)
    renamed(p, "--requests", "--requests-per-node",
            "region counts its requests per node; --requests counts them in all in the other commands")
    add(p, "--loads", list(DEFAULT_LOADS), "grid of loads as fractions of lambda* "
                                          f"(default {','.join(map(str, DEFAULT_LOADS))})")
    add(p, "--bisect", d.bisect, f"bisection steps after the grid (default {d.bisect})", type=int)
    add(p, "--saturation", d.saturation, f"load of the saturation runs, x lambda* (default {d.saturation})",
        type=float)
    add(p, "--replicates", d.replicates, f"saturation runs per series (default {d.replicates})", type=int)
    add(p, "--sat-requests", d.sat_requests,
        f"requests per node in each saturation run (default {d.sat_requests})", type=int)
    add(p, "--confidence", d.confidence, f"of the boundary's CI (default {d.confidence})")
    add(p, "--epsilon", d.epsilon, f"default {d.epsilon}")
    add(p, "--two-class", False, "sweep the two-class region (rays in the (lambda_1, lambda_2) plane)",
        action="store_true")
    add(p, "--class1", "table1", "class 1 length law (default table1: chat)")
    add(p, "--class2", "uniform:2048-6144,16-128",
        "class 2 length law (default uniform:2048-6144,16-128: summarisation)")
    add(p, "--shares", [0.0, 0.25, 0.5, 0.75, 1.0], "class-1 shares of the rays (default 0,0.25,0.5,0.75,1)")
    add(p, "--dask", None, metavar="tcp://HOST:PORT")
    add(p, "--workers", os.cpu_count() or 1, "default: the CPU count")
    add(p, "--cache", None, "default OUT/cache")
    add(p, "--plot-only", None, "only redraw the figures from this CSV", metavar="region.csv")
    add(p, "--no-progress", True)
    p.set_defaults(run=run)


def _options(value, schedulers) -> tuple:
    """``["rad.n=2000"]`` -> ``(("rad", (("n", 2000),)),)``; RAD's ``n`` is ``auto`` unless given
    (:func:`llmq.scheduler_options.scheduler_options`)."""
    per = {s: {k: v[0] for k, v in opts.items()} for s, opts in scheduler_options(value, schedulers).items()}
    out = {"rad": {"n": RAD_N}}
    for sched, opts in per.items():
        out[sched] = {**out.get(sched, {}), **opts}
    return tuple(sorted((s, tuple(sorted(o.items()))) for s, o in out.items()))


def _variants(values: dict) -> tuple[str, ...]:
    """The workload variants of ``--pad``, ``--raw`` or ``--both`` (the default), at most one given."""
    chosen = [k for k in ("pad", "raw", "both") if values[k]]
    if len(chosen) > 1:
        raise FieldError(f"--{chosen[1]}", True, f"no --{chosen[1]} with --{chosen[0]} (one of --pad, --raw, "
                                                 "--both)")
    return {"pad": ("pad",), "raw": ("raw",)}.get(chosen[0] if chosen else "both", ("pad", "raw"))


def spec_from(values: dict, notes: list[str]):
    """The :class:`stability.region.SweepSpec` the options describe (``notes`` collects what was
    skipped)."""
    from stability.region import SweepSpec
    from stability.sim.registry import scheduler_names
    from theory.hardware import gpu_names

    values = single(values, "region", "model", "mode", "epsilon")
    gpus = gpu_names() if str(values["gpu"]).strip().lower() == "all" else parse_gpus("--gpu", values["gpu"])
    if values["tiles"]:
        gpus = [f"{g.partition(':')[0]}:{values['tiles']}" for g in gpus]
    schedulers = parse_names("--scheduler", values["scheduler"])
    if "scheduler" not in values.given:  # the default list: skip the missing
        missing = [s for s in schedulers if s not in scheduler_names()]
        schedulers = [s for s in schedulers if s in scheduler_names()]
        notes += [f"scheduler {s!r} is not registered in this build: skipped" for s in missing]
    rs = parse_ints("--gpus-r", values["gpus_r"])
    shares = tuple(parse_floats("--shares", values["shares"]))
    two = (values["class1"], values["class2"], shares) if values["two_class"] else ()
    return SweepSpec(
        tilesets=tuple(gpus), model=values["model"], mode=values["mode"], workload=values["workload"],
        gpu_file=values["gpu_file"], model_file=values["model_file"], schedulers=tuple(schedulers),
        options=_options(values["option"], schedulers),
        rs=tuple(rs), variants=_variants(values),
        loads=tuple(parse_floats("--loads (lambda grid)", values["loads"])),
        bisect=values["bisect"],
        n_requests=values["requests_per_node"], saturation=values["saturation"],
        replicates=values["replicates"], sat_requests=values["sat_requests"],
        confidence=values["confidence"], epsilon=values["epsilon"], two_class=two, seed=values["seed"])


def _check_options(spec) -> None:
    """Every scheduler option a name its scheduler takes and a value it accepts, on every tile set
    (RAD's n may be ``auto``): before any run."""
    from theory.builder import cost_model

    per = {s: {k: [v] for k, v in opts} for s, opts in spec.options if s in spec.schedulers}
    for tileset in spec.tilesets:
        check_scheduler_options(per, lambda t=tileset: cost_model(spec.cost_spec(t)), auto=(("rad", "n"),))


def _check_context(spec) -> None:
    """Every length law of the sweep, padded or raw, fits the model's context on every tile set
    (:func:`llmq.options.check_fits_context`)."""
    from llmq.options import check_fits_context
    from stability.points import workload
    from theory.builder import cost_model

    laws = (("--class1", spec.two_class[0]), ("--class2", spec.two_class[1])) if spec.two_class \
        else (("--workload", spec.workload),)
    for tileset in spec.tilesets:
        cm = cost_model(spec.cost_spec(tileset))
        for field, law in laws:
            for variant in spec.variants:
                check_fits_context(cm.model, workload(law, cm.t_lcm if variant == "pad" else None),
                                   spec=law, field=field)


def run(args) -> int:
    """Run ``llmq region`` on the parsed ``args``; the exit code."""
    from stability import region
    from stability.runner import parse_dask_address

    values = resolve(args)
    out = out_dir(values["out"])
    if values["dask"]:
        parse_dask_address(values["dask"])
    if values["plot_only"]:
        files = region.plot_outputs(region.read_csv(values["plot_only"]), out)
        for name, path in files.items():
            print(f"{name}: {path}")
        return 0
    notes: list[str] = []
    spec = spec_from(values, notes)
    spec.validate()
    _check_options(spec)
    _check_context(spec)
    if values["cache"]:
        out_dir(values["cache"], "--cache")
    claim_output_dir(out, "region", asdict(spec))
    for note in notes:
        print(f"note: {note}")
    res = region.run_sweep(spec, values["cache"] or out / "cache", values["workers"], values["dask"],
                           progress=bool(values["progress"]) and not values["json"])
    files = region.write_outputs(res, out)
    table = region.boundary_rows(res)
    if values["json"]:
        print_json({"boundaries": table, "files": {k: str(v) for k, v in files.items()},
                    "tasks": {"computed": res.computed, "cached": res.cached}})
        return 0
    _print(table, res, files)
    return 0


def _print(table: list[dict], res, files: dict) -> None:
    from llmq.region_table import table_lines

    spec = res.spec
    print(f"model {spec.model} ({spec.mode} mode), workload {spec.workload}"
          + (f", two classes {spec.two_class[0]} | {spec.two_class[1]}" if spec.two_class else "")
          + f"; boundary = throughput of {spec.replicates} saturated runs at {spec.saturation} "
            f"lambda*, {spec.confidence:.0%} t-interval")
    print("\n".join(table_lines(table, spec)))
    print(f"{res.computed} runs computed, {res.cached} reused from the cache, in {res.elapsed_s:.1f} s")
    for name, path in files.items():
        print(f"{name}: {path}")
