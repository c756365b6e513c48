"""``llmq region``, the main job: empirical stability boundaries per GPU tile set and scheduler,
set against Theorem 1's lambda* and Theorem 2's guarantee (see :mod:`stability.region`)."""

from __future__ import annotations

import os
from dataclasses import asdict

from llmq.options import add_common, parse_floats, parse_ints, parse_names, parse_options, resolve
from llmq.output import out_dir, print_json
from theory.defaults import RAD_N
from theory.errors import FieldError
from theory.io import claim_output_dir

HELP = ("the main job: sweep lambda per GPU tile set, scheduler and r, locate each stability "
        "boundary with a CI, and plot it against lambda* (Theorem 1) and Theorem 2")


def add_parser(sub) -> None:
    """Register ``llmq region`` and its options on the sub-command parser ``sub``."""
    from stability.region import DEFAULT_LOADS, DEFAULT_SCHEDULERS, SweepSpec

    d = SweepSpec()
    p = sub.add_parser("region", help=HELP, description=HELP)
    add_common(p, defaults={
        "gpu": "a100,rtx6000ada", "gpus_r": [1], "scheduler": ",".join(DEFAULT_SCHEDULERS),
        "option": [], "raw": False, "both": False, "requests": 100000, "loads": list(DEFAULT_LOADS),
        "bisect": d.bisect, "saturation": d.saturation, "replicates": d.replicates,
        "sat_requests": d.sat_requests, "confidence": d.confidence, "epsilon": d.epsilon,
        "two_class": False, "class1": "table1", "class2": "uniform:2048-6144,16-128",
        "shares": [0.0, 0.25, 0.5, 0.75, 1.0], "dask": None, "workers": os.cpu_count() or 1,
        "plot_only": None, "cache": None, "progress": True}, overrides={
        # lists here, parsed in spec_from so that a bad value is reported like every other field
        "gpus_r": {"type": str, "help": "numbers of nodes r, e.g. 1,2,4 (default 1)"},
        "gpu": {"help": "GPU tile sets: presets, 'all', or restricted tile sets such as a100:128x128 "
                        "(default a100,rtx6000ada)"}})
    p.add_argument("--scheduler", help="schedulers to compare (default rad,sarathi,request_level; "
                                       "those not registered in this build are skipped)")
    p.add_argument("--option", action="append", metavar="SCHED.NAME=VALUE",
                   help="scheduler option, e.g. --option rad.n=2000 (RAD's n defaults to 'auto': "
                        "the DTMC's empirical n_min at --epsilon; see theory.defaults)")
    variant = p.add_mutually_exclusive_group()
    variant.add_argument("--raw", action="store_true", default=None,
                         help="only raw prompts (default: both padded and raw)")
    variant.add_argument("--both", action="store_true", default=None,
                         help="padded (Assumption 3) and raw prompts (the default)")
    p.add_argument("--requests", type=int, help="requests per node in each verdict run (default 100000)")
    p.add_argument("--loads", help="grid of loads as fractions of lambda* "
                                                 f"(default {','.join(map(str, DEFAULT_LOADS))})")
    p.add_argument("--bisect", type=int, help=f"bisection steps after the grid (default {d.bisect})")
    p.add_argument("--saturation", type=float,
                   help=f"load of the saturation runs, x lambda* (default {d.saturation})")
    p.add_argument("--replicates", type=int, help=f"saturation runs per series (default {d.replicates})")
    p.add_argument("--sat-requests", type=int,
                   help=f"requests per node in each saturation run (default {d.sat_requests})")
    p.add_argument("--confidence", type=float, help=f"level of the boundary CI (default {d.confidence})")
    p.add_argument("--epsilon", type=float, help=f"Theorem 2's margin eps (default {d.epsilon})")
    p.add_argument("--two-class", action="store_true", default=None,
                   help="sweep the two-class region (rays in the (lambda_1, lambda_2) plane)")
    p.add_argument("--class1", help="class 1 length law (default table1: chat)")
    p.add_argument("--class2", help="class 2 length law (default uniform:2048-6144,16-128: summarisation)")
    p.add_argument("--shares", help="class-1 shares of the rays (default 0,0.25,0.5,0.75,1)")
    p.add_argument("--dask", metavar="tcp://HOST:PORT", help="run on this Dask scheduler")
    p.add_argument("--workers", type=int, help="local worker processes (default: the CPU count)")
    p.add_argument("--cache", help="result cache directory (default OUT/cache)")
    p.add_argument("--plot-only", metavar="region.csv", help="only redraw the figures from this CSV")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="no progress bar")
    p.set_defaults(run=run)


def _options(items) -> tuple:
    """``["rad.n=2000"]`` -> ``(("rad", (("n", 2000),)),)``; ``n=auto`` kept as a string."""
    per: dict = {}
    for item in items or []:
        sched, dot, rest = str(item).partition(".")
        if not dot or "=" not in rest:
            raise FieldError("--option", item, "SCHEDULER.NAME=VALUE, e.g. rad.n=2000")
        per.setdefault(sched.strip(), []).append(rest)
    out = {"rad": (("n", RAD_N),)}
    for sched, opts in per.items():
        out[sched] = tuple(sorted({**dict(out.get(sched, ())), **dict(parse_options(opts))}.items()))
    return tuple(sorted(out.items()))


def spec_from(values: dict, notes: list[str]):
    """The :class:`stability.region.SweepSpec` the options describe (``notes`` collects what was
    skipped)."""
    from stability.region import DEFAULT_SCHEDULERS, SweepSpec
    from stability.sim.registry import scheduler_names
    from theory.hardware import gpu_names

    gpus = gpu_names() if str(values["gpu"]).strip().lower() == "all" else parse_names(values["gpu"])
    if values["tiles"]:
        gpus = [f"{g.partition(':')[0]}:{values['tiles']}" for g in gpus]
    schedulers = parse_names(values["scheduler"])
    if values["scheduler"] == ",".join(DEFAULT_SCHEDULERS):  # the default list: skip the missing
        missing = [s for s in schedulers if s not in scheduler_names()]
        schedulers = [s for s in schedulers if s in scheduler_names()]
        notes += [f"scheduler {s!r} is not registered in this build: skipped" for s in missing]
    variants = ("raw",) if values["raw"] else ("pad",) if values["pad"] and not values["both"] \
        else ("pad", "raw")
    rs = parse_ints("r (gpus)", values["gpus_r"])
    shares = tuple(parse_floats("shares", values["shares"]))
    two = (values["class1"], values["class2"], shares) if values["two_class"] else ()
    return SweepSpec(
        tilesets=tuple(gpus), model=values["model"], mode=values["mode"], workload=values["workload"],
        gpu_file=values["gpu_file"], model_file=values["model_file"], schedulers=tuple(schedulers),
        options=_options(values["option"]),
        rs=tuple(rs), variants=variants, loads=tuple(parse_floats("loads (lambda grid)", values["loads"])),
        bisect=values["bisect"],
        n_requests=values["requests"], saturation=values["saturation"],
        replicates=values["replicates"], sat_requests=values["sat_requests"],
        confidence=values["confidence"], epsilon=values["epsilon"], two_class=two, seed=values["seed"])


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

    values = resolve(args)
    out = out_dir(values["out"])
    if values["plot_only"]:
        files = region.plot_outputs(region.read_csv(values["plot_only"]), out)
        for name, path in files.items():
            print(f"{name}: {path}")
        return 0
    notes: list[str] = []
    spec = spec_from(values, notes)
    spec.validate()
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
    spec = res.spec
    print(f"model {spec.model} ({spec.mode} mode), workload {spec.workload}"
          + (f", two classes {spec.two_class[0]} | {spec.two_class[1]}" if spec.two_class else "")
          + f"; boundary = throughput of {spec.replicates} saturated runs at {spec.saturation} "
            f"lambda*, {spec.confidence:.0%} t-interval")
    header = (f"{'tile set':<16}{'scheduler':<22}{'r':>2} {'var':<4}{'share':>6} {'boundary':>9} "
              f"{'CI':>21} {'lambda*':>9} {'ratio':>7} {'Thm 2':>8} {'DTMC (RAD)':>10}  flags")
    print(header)
    print("-" * len(header))
    for b in table:
        sched = b["scheduler"] + (f"[{b['options']}]" if b["options"] else "")
        share = "" if b["class_1"] == "" else f"{b['share_1']:.2f}"
        flags = []
        if b["exceeds_lambda_star"]:
            flags.append("ABOVE lambda* (Theorem 1)")
        if not b["consistent"]:
            flags.append("bisection bracket disagrees")
        print(f"{b['tileset']:<16}{sched:<22}{b['r']:>2} {b['workload_variant']:<4}{share:>6} "
              f"{b['boundary']:>9.4g} [{b['ci_low']:>9.4g},{b['ci_high']:>9.4g}] "
              f"{b['lambda_star']:>9.4g} {b['ratio']:>7.4f} {b['theorem2']:>8.4g} "
              f"{b['dtmc_boundary']:>10.4g}  {'; '.join(flags)}")
    print(f"{res.computed} runs computed, {res.cached} reused from the cache, in {res.elapsed_s:.1f} s")
    for name, path in files.items():
        print(f"{name}: {path}")
