"""``llmq plan``: the cheapest fleet that carries a target rate within its SLOs, with certified bounds."""

from __future__ import annotations

import time
from dataclasses import asdict

from theory.errors import FieldError, require_positive, require_positive_int
from theory.io import claim_output_dir

HELP = ("the cheapest fleet (GPU, scheduler and knobs, r) that carries --rate req/s within --slo: "
        "certified bounds prune, simulations decide; writes OUT/plan.md, .csv, .json, .png")
DEFAULTS = {"rate": 40.0, "verify_requests": 6000, "workload": "table1", "slo": "ttft_p50=0.5,tbt_p99=0.1",
            "gpus": "all",
            "schedulers": "rad,sarathi,vllm,slai", "max_gpus": 16, "min_gpus": 1, "model": "mistral-7b",
            "mode": "real", "requests": 2000, "seeds": 2, "max_seeds": 8, "seed": 0, "workers": 1,
            "out": "out"}

# the options besides the spec that a plan's results depend on (the run's identity in OUT), and those
# that only add to the same plan's outputs (its verification: recorded, not compared)
RUN_FIELDS = ("requests", "seeds", "max_seeds", "seed", "full_front", "mixed", "router", "mix_budget")
ADD_FIELDS = ("verify", "verify_requests")


def add_parser(sub) -> None:
    """Register ``llmq plan`` and its options on the sub-command parser ``sub``."""
    d = DEFAULTS
    p = sub.add_parser("plan", help=HELP, description=HELP + ". Simulations are cached in OUT/plan/cache, "
                                                             "so an interrupted search resumes.")
    p.add_argument("--rate", type=float, default=None,
                   help=f"target req/s (default {d['rate']:g}; not with --trace)")
    p.add_argument("--trace", metavar="CSV",
                   help="replay this trace (columns arrival_time, prompt_len, output_len) as the load: "
                        "its mean rate is the target, its lengths the workload")
    p.add_argument("--classes", metavar="NAME:PROB:TBT,...",
                   help="request classes, e.g. paying:0.05:0.1,free:0.95:0.5: each class's TBT SLO "
                        "becomes a tbt_p99@NAME limit, and --slo may limit NAME@CLASS metrics")
    p.add_argument("--workload", default=d["workload"],
                   help="table1, sharegpt4, deterministic:LP,LD, uniform:a-b,c-d or a CSV path "
                        f"(default {d['workload']})")
    p.add_argument("--slo", default=d["slo"],
                   help="limits in seconds: ttft_p50, ttft_p99, tbt_p99 (NAME@CLASS for one class), "
                        f"or 'stable' (default {d['slo']})")
    p.add_argument("--gpus", default=d["gpus"], help="comma-separated GPU presets (default: every preset)")
    p.add_argument("--schedulers", default=d["schedulers"], help=f"default {d['schedulers']}")
    p.add_argument("--knob", action="append", default=[], metavar="SCHED.NAME=V1|V2",
                   help="knob values to try, e.g. sarathi.chunk_size=256|512 (repeatable; default: "
                        "each scheduler's defaults)")
    p.add_argument("--tp", default="auto",
                   help="tensor-parallel degrees to try, e.g. 1,2,4, where a GPU offers them "
                        "(theory/data/tensor_parallel.toml); default auto: the smallest degree whose "
                        "weight shard leaves room for KV cache")
    p.add_argument("--max-gpus", type=int, default=d["max_gpus"],
                   help=f"largest fleet in GPUs (default {d['max_gpus']})")
    p.add_argument("--min-gpus", type=int, default=d["min_gpus"], help="smallest fleet (default 1)")
    p.add_argument("--model", default=d["model"], help=f"comma-separated models (default {d['model']})")
    p.add_argument("--mode", default=d["mode"], help="paper, real or paper,real (default real)")
    p.add_argument("--price-file", help="TOML overriding or adding GPU prices ([prices.<gpu>], base =)")
    p.add_argument("--gpu-file", help="TOML file adding or overriding GPU profiles")
    p.add_argument("--model-file", help="TOML file adding or overriding model profiles")
    p.add_argument("--requests", type=int, default=d["requests"],
                   help=f"requests per simulation (default {d['requests']}: small, hence the CIs)")
    p.add_argument("--seeds", type=int, default=d["seeds"],
                   help=f"first replicates per candidate (default {d['seeds']})")
    p.add_argument("--max-seeds", type=int, default=d["max_seeds"],
                   help="replicates per candidate at most: while an SLO's 95%% interval straddles its "
                        "limit or the seeds' stability verdicts differ the replicates are doubled up to "
                        "this many, then the runs are made 3 times longer (at most twice) and, still open, "
                        "the candidate is judged by the means and marked undecided (default "
                        f"{d['max_seeds']}; at least --seeds)")
    p.add_argument("--seed", type=int, default=d["seed"], help="base seed (default 0)")
    p.add_argument("--workers", type=int, default=d["workers"],
                   help="processes, and families searched at once (default 1; the plan is the same "
                        "for any number)")
    p.add_argument("--dask", metavar="tcp://HOST:PORT",
                   help="run the simulations on this Dask scheduler (--workers families at once)")
    p.add_argument("--verify", action="store_true",
                   help="re-simulate the returned plans with new seeds and longer runs "
                        f"(--verify-requests, default {d['verify_requests']}) and say whether each "
                        "still meets its SLOs within the interval")
    p.add_argument("--verify-requests", type=int, default=d["verify_requests"],
                   help="requests per re-simulation (default %(default)s)")
    p.add_argument("--out", default=d["out"], help="output directory; results go to OUT (default out)")
    p.add_argument("--full-front", action="store_true",
                   help="no early stopping: find every family's smallest feasible fleet (a fuller Pareto "
                        "front, more simulations)")
    p.add_argument("--mixed", action="store_true",
                   help="also try two-GPU-kind fleets behind --router, cheaper than the best pure "
                        "fleet, and say whether one beats every pure fleet")
    p.add_argument("--router", default="random",
                   help="the mixed fleets' router: random (capacity-proportional split), jsq (join the "
                        "replica with the fewest pending requests) or sed (shortest expected delay: "
                        "pending + 1 over the certified capacity); pure fleets are planned behind "
                        "random routing (default %(default)s)")
    p.add_argument("--mix-budget", type=int, default=8,
                   help="most mixed fleets simulated (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print plan.json instead of the report")
    p.set_defaults(run=run)


def parse_knobs(items: list[str]) -> dict:
    """``["sarathi.chunk_size=256|512"]`` -> ``{"sarathi": ({"chunk_size": 256}, {"chunk_size": 512})}``
    (several knobs of one scheduler combine as a grid)."""
    from itertools import product

    from llmq.options import parse_value

    grid: dict = {}
    for item in items:
        name, sep, values = str(item).partition("=")
        sched, dot, knob = name.strip().partition(".")
        if not (sep and dot and sched and knob and values.strip()):
            raise FieldError("--knob", item, "SCHEDULER.NAME=V1|V2, e.g. sarathi.chunk_size=256|512")
        grid.setdefault(sched, {})[knob] = [parse_value(v) for v in values.split("|") if v.strip()]
    return {s: tuple(dict(zip(k, combo, strict=True)) for combo in product(*k.values()))
            for s, k in grid.items()}


def parse_tp(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; anything but positive integers is an error naming ``--tp``."""
    out = []
    for item in str(text).split(","):
        try:
            k = int(item)
        except ValueError:
            raise FieldError("--tp", item, "'auto' or comma-separated integers >= 1, e.g. 1,2,4") from None
        if k < 1:
            raise FieldError("--tp", k, "integers >= 1")
        out.append(k)
    return out


def spec_from(args):
    """The :class:`stability.planner.grid.PlanSpec` the options describe."""
    from llmq.options import parse_names
    from stability.planner.slo import parse_slo, with_class_slos
    from stability.planner.spec import PlanSpec

    gpus = () if str(args.gpus).strip().lower() == "all" else tuple(parse_names(args.gpus))
    knobs = parse_knobs(args.knob)
    schedulers = tuple(parse_names(args.schedulers))
    unknown = sorted(set(knobs) - set(schedulers))
    if unknown:
        raise FieldError("--knob", unknown, f"schedulers among --schedulers ({', '.join(schedulers)})")
    tp = () if str(args.tp).strip().lower() == "auto" else tuple(parse_tp(args.tp))
    classes = parse_class_option(args.classes)
    rate, workload = args.rate, args.workload
    if args.trace:
        if rate is not None:
            raise FieldError("--rate", rate, "no rate with --trace (the trace's arrivals are the load)")
        if workload != DEFAULTS["workload"]:
            raise FieldError("--workload", workload, "no workload with --trace (its lengths are it)")
        rate, workload = trace_rate(args.trace), args.trace
    return PlanSpec(rate=float(require_positive("--rate", DEFAULTS["rate"] if rate is None else rate)),
                    workload=workload, slo=with_class_slos(parse_slo(args.slo), classes), gpus=gpus,
                    models=tuple(parse_names(args.model)),
                    modes=tuple(parse_names(args.mode)), schedulers=schedulers, knobs=knobs, tp=tp,
                    r_min=args.min_gpus, r_max=args.max_gpus, price_file=args.price_file,
                    gpu_file=args.gpu_file, model_file=args.model_file, classes=classes, trace=args.trace)


def parse_class_option(text: str | None) -> tuple:
    """``--classes`` as ``((name, probability, TBT SLO), ...)``
    (:func:`stability.sim.classes.parse_classes`)."""
    from stability.sim.classes import parse_classes

    return tuple((c.name, c.prob, c.tbt_slo) for c in parse_classes(text)) if text else ()


def trace_rate(path: str) -> float:
    """The mean arrival rate of a trace, ``(n - 1) / (last - first arrival)``, as the simulator
    measures a replayed trace's rate."""
    import numpy as np

    from theory.workload import read_trace

    t = read_trace(path).arrival_time
    if t is None:
        raise FieldError(f"{path}: arrival_time", None, "a column of arrival times (seconds)")
    t = np.asarray(t, dtype=float)
    if t.size < 2 or not np.all(np.diff(t) >= 0) or t[-1] <= t[0]:
        raise FieldError(f"{path}: arrival_time", t.size,
                         "at least two non-decreasing arrival times spanning some time")
    return float((t.size - 1) / (t[-1] - t[0]))


def check_context(spec) -> None:
    """The spec's workload or trace fits the context of every model it plans
    (:func:`llmq.options.check_fits_context`)."""
    from llmq.options import check_fits_context
    from theory.models import get_model
    from theory.workload import get_workload, read_trace

    law = read_trace(spec.trace).workload("trace") if spec.trace else get_workload(spec.workload)
    for name in spec.models:
        check_fits_context(get_model(name, spec.model_file), law,
                           spec=None if spec.trace else spec.workload, trace=spec.trace)


def run(args) -> int:
    """Run ``llmq plan`` on the parsed ``args``; the exit code."""
    from llmq.output import out_dir
    from stability.planner.grid import build_grid
    from stability.planner.report import console_lines, write_outputs
    from stability.planner.search import SearchOptions, cached_capacity, check_max_seeds, search, verify
    from stability.planner.search_mixed import search_mixes
    from stability.runner import Cache, DaskExecutor, LocalExecutor, Runner, SweepInterrupted
    from stability.sim.fleet import ROUTERS
    from theory.errors import UnknownNameError, require_seed

    t0 = time.perf_counter()
    out = out_dir(args.out)
    require_seed("--seed", args.seed)
    spec = spec_from(args)
    check_context(spec)
    n_requests = require_positive_int("--requests", args.requests)
    seeds = require_positive_int("--seeds", args.seeds)
    max_seeds = check_max_seeds(seeds, args.max_seeds, "--max-seeds", "--seeds")
    workers = require_positive_int("--workers", args.workers)
    verify_requests = require_positive_int("--verify-requests", args.verify_requests)
    budget = require_positive_int("--mix-budget", args.mix_budget)
    if args.mixed and args.trace:
        raise FieldError("--mixed", True, "no --trace (a mixed fleet splits Poisson arrivals)")
    if args.router not in ROUTERS:
        raise UnknownNameError("--router", args.router, ROUTERS)
    if args.router != "random" and not args.mixed:
        raise FieldError("--router", args.router, "random, or --mixed as well (it routes the mixed fleets)")
    identity = {**asdict(spec), **{k: getattr(args, k) for k in RUN_FIELDS}}
    claim_output_dir(out, "plan", identity, write=False)  # before the bounds
    cache = Cache(out / "plan" / "cache")
    try:
        grid = build_grid(spec, cached_capacity(cache), tp_dir=out / "plan")
        claim_output_dir(out, "plan", identity, adds={k: getattr(args, k) for k in ADD_FIELDS})  # it starts
        runner = Runner(cache, DaskExecutor(args.dask) if args.dask else LocalExecutor(workers))
        try:
            options = SearchOptions(n_requests, seeds, args.seed, not args.full_front, workers, max_seeds)
            res = search(spec, runner, options, grid)
            mixes = (search_mixes(res, runner, n_requests, seeds, args.seed, budget, args.router, max_seeds)
                     if args.mixed else None)
            checked = (verify(res, runner, verify_requests, seeds + 1, args.seed, max(max_seeds, seeds + 1))
                       if args.verify else None)
        finally:
            runner.executor.close()
        elapsed = time.perf_counter() - t0
        lines = console_lines(res, elapsed, checked, mixes)
        files = write_outputs(res, out, lines, elapsed, checked, mixes)
    except KeyboardInterrupt:  # wherever it lands: say what is cached and how to resume
        raise SweepInterrupted(cache.dir) from None
    if args.json:
        print((out / "plan.json").read_text(encoding="utf-8"))
    else:
        print("\n".join(lines))
        print(f"wrote {', '.join(files)} (simulations cached in {out / 'plan' / 'cache'}: "
              f"{runner.computed} run, {runner.cached} reused)")
    return 0
