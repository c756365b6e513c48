"""``llmq plan``: the cheapest fleet that carries a target rate within its SLOs, with certified bounds."""

from __future__ import annotations

import time
from dataclasses import asdict

from llmq.options import (
    add,
    command,
    parse_gpus,
    parse_modes,
    parse_names,
    renamed,
    resolve,
)
from llmq.scheduler_options import scheduler_options
from theory.errors import FieldError, require_positive, require_positive_int
from theory.io import claim_output_dir

HELP = ("the cheapest fleet (GPU, scheduler and its options, r) that carries --rate req/s within --slo: "
        "certified bounds prune, simulations decide; writes OUT/plan.md, .csv, .json, .png")
DEFAULTS = {"rate": 40.0, "verify_requests": 6000, "workload": "table1", "slo": "ttft_p50=0.5,tbt_p99=0.1",
            "gpu": "all",
            "scheduler": "rad,sarathi,vllm,slai", "max_gpus": 16, "min_gpus": 1, "model": "mistral-7b",
            "mode": "real", "requests": 2000, "seeds": 2, "max_seeds": 8, "seed": 0, "workers": 1,
            "out": "out"}

# the options besides the spec that a plan's results depend on (the run's identity in OUT), and those
# that only add to the same plan's outputs (its verification: recorded, not compared)
RUN_FIELDS = ("requests", "seeds", "max_seeds", "seed", "full_front", "mixed", "router", "mix_budget")
ADD_FIELDS = ("verify", "verify_requests")


def add_parser(sub) -> None:
    """Register ``llmq plan`` and its options on the sub-command parser ``sub``."""
    d = DEFAULTS
    p = command(sub, "plan", HELP, HELP + ". Simulations are cached in OUT/plan/cache, so an interrupted "
                                          "search resumes.")
    add(p, "--rate", None, f"the target the fleet must carry (default {d['rate']:g}; not with --trace)")
    add(p, "--trace", None, "its mean rate is the target, its lengths the workload", metavar="CSV")
    add(p, "--classes", None, "each class's TBT SLO becomes a tbt_p99@NAME limit, and --slo may limit "
                              "NAME@CLASS metrics", metavar="NAME:PROB:TBT,...")
    add(p, "--workload", d["workload"], f"default {d['workload']}")
    add(p, "--slo", d["slo"], "limits in seconds: ttft_p50, ttft_p99, tbt_p99 (NAME@CLASS for one class), "
                              f"or 'stable' (default {d['slo']})")
    add(p, "--gpu", d["gpu"], "the GPU kinds to plan, or 'all' (default: every preset)")
    add(p, "--scheduler", d["scheduler"], f"to plan (default {d['scheduler']})")
    add(p, "--option", [], "V1|V2 gives values to try, e.g. sarathi.chunk_size=256|512 (several options "
                           "of one scheduler combine as a grid; default: each scheduler's defaults)",
        metavar="SCHED.NAME=V1|V2")
    add(p, "--tp", "auto", "tensor-parallel degrees to try, e.g. 1,2,4, where a GPU offers them "
                           "(theory/data/tensor_parallel.toml); default auto: the smallest degree whose "
                           "weight shard leaves room for KV cache")
    add(p, "--ep", "auto", "expert-parallel degrees to try for a mixture of experts, e.g. 1,2,4: EP groups "
                           "of one-GPU replicas on the servers of theory/data/tensor_parallel.toml, whose "
                           "experts divide (dense models: 1 only); default auto: 1, and for a mixture "
                           "every such degree within --max-gpus")
    add(p, "--max-gpus", d["max_gpus"], f"largest fleet in GPUs (default {d['max_gpus']})", type=int)
    add(p, "--min-gpus", d["min_gpus"], "smallest fleet in GPUs (default 1)", type=int)
    add(p, "--model", d["model"], f"default {d['model']}")
    add(p, "--mode", d["mode"], f"default {d['mode']}")
    add(p, "--price-file")
    add(p, "--gpu-file")
    add(p, "--model-file")
    add(p, "--precision")
    add(p, "--requests", d["requests"], f"default {d['requests']}: small, hence the CIs")
    add(p, "--seeds", d["seeds"], f"the first replicates per candidate (default {d['seeds']})")
    add(p, "--max-seeds", d["max_seeds"],
        "replicates per candidate at most: while an SLO's 95%% interval straddles its limit or the seeds' "
        "stability verdicts differ the replicates are doubled up to this many, then the runs are made 3 "
        "times longer (at most twice) and, still open, the candidate is judged by the means and marked "
        f"undecided (default {d['max_seeds']}; at least --seeds)", type=int)
    add(p, "--seed", d["seed"], "the base seed (default 0)")
    add(p, "--workers", d["workers"], "and families searched at once (default 1; the plan is the same for "
                                      "any number)")
    add(p, "--dask", None, "the simulations, --workers families at once", metavar="tcp://HOST:PORT")
    add(p, "--verify", False, "re-simulate the returned plans with new seeds and longer runs "
                              f"(--verify-requests, default {d['verify_requests']}) and say whether each "
                              "still meets its SLOs within the interval", action="store_true")
    add(p, "--verify-requests", d["verify_requests"],
        f"requests per re-simulation (default {d['verify_requests']})", type=int)
    add(p, "--out", d["out"], "results go to OUT (default out)", metavar="DIR")
    add(p, "--full-front", False, "no early stopping: find every family's smallest feasible fleet (a fuller "
                                  "Pareto front, more simulations)", action="store_true")
    add(p, "--mixed", False, "also try two-GPU-kind fleets behind --router, cheaper than the best pure "
                             "fleet, and say whether one beats every pure fleet", action="store_true")
    add(p, "--router", "random",
        "the mixed fleets' router: random (capacity-proportional split), jsq (join the replica with the "
        "fewest pending requests) or sed (shortest expected delay: pending + 1 over the certified capacity); "
        "pure fleets are planned behind random routing (default random)")
    add(p, "--mix-budget", 8, "most mixed fleets simulated (default 8)", type=int)
    add(p, "--json", False, "plan.json instead of the report")
    renamed(p, "--gpus", "--gpu", "a comma-separated list of GPU presets; --gpus-r counts replicas elsewhere")
    renamed(p, "--schedulers", "--scheduler", "one or a comma-separated list")
    renamed(p, "--knob", "--option", "same syntax: SCHED.NAME=V1|V2")
    p.set_defaults(run=run)


def parse_knobs(value, schedulers) -> dict:
    """``["sarathi.chunk_size=256|512"]`` -> ``{"sarathi": ({"chunk_size": 256}, {"chunk_size": 512})}``
    (several options of one scheduler combine as a grid; :func:`llmq.scheduler_options.scheduler_options`)."""
    from itertools import product

    grid = scheduler_options(value, schedulers, alternatives=True)
    return {s: tuple(dict(zip(k, combo, strict=True)) for combo in product(*k.values()))
            for s, k in grid.items()}


def parse_tp(text: str, option: str = "--tp") -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; anything but positive integers is an error naming ``option``
    (``--tp``, or ``--ep``, which takes the same dialect)."""
    out = []
    for item in str(text).split(","):
        try:
            k = int(item)
        except ValueError:
            raise FieldError(option, item, "'auto' or comma-separated integers >= 1, e.g. 1,2,4") from None
        if k < 1:
            raise FieldError(option, k, "integers >= 1")
        out.append(k)
    return out


def parse_degrees(text, option: str) -> tuple:
    """``"auto"`` -> ``()``, else :func:`parse_tp` naming ``option``."""
    return () if str(text).strip().lower() == "auto" else tuple(parse_tp(text, option))


def spec_from(values):
    """The :class:`stability.planner.spec.PlanSpec` the resolved option ``values`` describe."""
    from llmq.options import trace_rate
    from stability.planner.slo import parse_slo, with_class_slos
    from stability.planner.spec import PlanSpec

    gpus = () if str(values["gpu"]).strip().lower() == "all" else tuple(parse_gpus("--gpu", values["gpu"]))
    schedulers = tuple(parse_names("--scheduler", values["scheduler"]))
    knobs = parse_knobs(values["option"], schedulers)
    tp, ep = parse_degrees(values["tp"], "--tp"), parse_degrees(values["ep"], "--ep")
    classes = parse_class_option(values["classes"])
    rate, workload = values["rate"], values["workload"]
    if values["trace"]:
        if rate is not None:
            raise FieldError("--rate", rate, "no rate with --trace (the trace's arrivals are the load)")
        if "workload" in values.given:
            raise FieldError("--workload", workload, "no workload with --trace (its lengths are it)")
        rate, workload = trace_rate(values["trace"]), values["trace"]
    return PlanSpec(rate=float(require_positive("--rate", DEFAULTS["rate"] if rate is None else rate)),
                    workload=workload, slo=with_class_slos(parse_slo(values["slo"]), classes), gpus=gpus,
                    models=tuple(parse_names("--model", values["model"])),
                    modes=tuple(parse_modes("--mode", values["mode"])), schedulers=schedulers, knobs=knobs,
                    tp=tp, ep=ep, r_min=values["min_gpus"], r_max=values["max_gpus"],
                    price_file=values["price_file"],
                    gpu_file=values["gpu_file"], model_file=values["model_file"], classes=classes,
                    trace=values["trace"])


def parse_class_option(text: str | None) -> tuple:
    """``--classes`` as ``((name, probability, TBT SLO), ...)``
    (:func:`stability.sim.classes.parse_classes`)."""
    from stability.sim.classes import parse_classes

    return tuple((c.name, c.prob, c.tbt_slo) for c in parse_classes(text)) if text else ()


def check_options(spec) -> None:
    """Every ``--option`` a name its scheduler takes and every value to try one it accepts (on the
    first GPU and model planned, in paper mode: no measured profile to load), and every ``--tp``
    degree one that some planned GPU offers and some planned model splits into, and every ``--ep``
    degree one that some planned family plans (:func:`stability.planner.grid.ep_degrees`): before
    any bound."""
    from llmq.scheduler_options import check_scheduler_options
    from stability.planner.grid import families_of
    from stability.sim.classes import parse_classes
    from theory.builder import CostSpec, cost_model
    from theory.hardware import get_gpu
    from theory.tensor_parallel import degrees

    grid = {s: {k: list(dict.fromkeys(c[k] for c in combos)) for k in combos[0]}
            for s, combos in spec.knobs.items()}
    cm = lambda: cost_model(CostSpec(spec.gpu_list[0], spec.models[0], "paper",  # noqa: E731
                                     gpu_file=spec.gpu_file, model_file=spec.model_file))
    check_scheduler_options(grid, cm, classes=parse_classes(spec.classes) if spec.classes else ())
    fams = families_of(spec)
    offered = sorted({k for g in spec.gpu_list for k in degrees(get_gpu(g, spec.gpu_file).key)})
    missing = [e for e in spec.ep if e not in {f.ep for f in fams}]
    if missing:
        raise FieldError("--ep", missing[0], f"a degree the servers of a planned GPU offer "
                                             f"({', '.join(map(str, offered))}) that divides the experts "
                                             "of a planned mixture of experts, with 1 among --tp, and a "
                                             "fleet of --min-gpus..--max-gpus GPUs holds")
    missing = [k for k in spec.tp if k not in {f.tp for f in fams}]
    if missing:
        raise FieldError("--tp", missing[0], "a degree that a planned GPU offers and the model splits into "
                                             f"(the planned GPUs offer {', '.join(map(str, offered))})"
                                             + ("; TP > 1 is planned at EP 1 only, so 1 among --ep"
                                                * bool(spec.ep and 1 not in spec.ep)))


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
    from stability.runner import (
        Cache,
        DaskExecutor,
        LocalExecutor,
        Runner,
        SweepInterrupted,
        parse_dask_address,
    )
    from stability.sim.fleet import ROUTERS
    from theory.errors import UnknownNameError

    t0 = time.perf_counter()
    values = resolve(args)
    out = out_dir(values["out"])
    if values["dask"]:
        parse_dask_address(values["dask"])
    spec = spec_from(values)
    spec.validate_ep("--ep")
    spec.validate()
    check_context(spec)
    check_options(spec)
    n_requests = require_positive_int("--requests", values["requests"])
    seeds = require_positive_int("--seeds", values["seeds"])
    max_seeds = check_max_seeds(seeds, values["max_seeds"], "--max-seeds", "--seeds")
    workers = require_positive_int("--workers", values["workers"])
    verify_requests = require_positive_int("--verify-requests", values["verify_requests"])
    budget = require_positive_int("--mix-budget", values["mix_budget"])
    if values["mixed"] and values["trace"]:
        raise FieldError("--mixed", True, "no --trace (a mixed fleet splits Poisson arrivals)")
    if values["router"] not in ROUTERS:
        raise UnknownNameError("--router", values["router"], ROUTERS)
    if values["router"] != "random" and not values["mixed"]:
        raise FieldError("--router", values["router"],
                         "random, or --mixed as well (it routes the mixed fleets)")
    identity = {**asdict(spec), **{k: values[k] for k in RUN_FIELDS}}
    if not spec.ep:  # auto: a run of the same identity as before --ep existed
        del identity["ep"]
    claim_output_dir(out, "plan", identity, write=False)  # before the bounds
    cache = Cache(out / "plan" / "cache")
    try:
        grid = build_grid(spec, cached_capacity(cache), tp_dir=out / "plan")
        claim_output_dir(out, "plan", identity, adds={k: values[k] for k in ADD_FIELDS})  # it starts
        runner = Runner(cache, DaskExecutor(values["dask"]) if values["dask"] else LocalExecutor(workers))
        try:
            seed = values["seed"]
            options = SearchOptions(n_requests, seeds, seed, not values["full_front"], workers, max_seeds)
            res = search(spec, runner, options, grid)
            mixes = (search_mixes(res, runner, n_requests, seeds, seed, budget, values["router"], max_seeds)
                     if values["mixed"] else None)
            checked = (verify(res, runner, verify_requests, seeds + 1, seed, max(max_seeds, seeds + 1))
                       if values["verify"] else None)
        finally:
            runner.executor.close()
        elapsed = time.perf_counter() - t0
        lines = console_lines(res, elapsed, checked, mixes)
        files = write_outputs(res, out, lines, elapsed, checked, mixes)
    except KeyboardInterrupt:  # wherever it lands: say what is cached and how to resume
        raise SweepInterrupted(cache.dir) from None
    if values["json"]:
        print((out / "plan.json").read_text(encoding="utf-8"))
    else:
        print("\n".join(lines))
        print(f"wrote {', '.join(files)} (simulations cached in {out / 'plan' / 'cache'}: "
              f"{runner.computed} run, {runner.cached} reused)")
    return 0
