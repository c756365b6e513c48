"""``llmq simulate``: one run of a scheduler at a load, with metrics and a stability verdict."""

from __future__ import annotations

from llmq.options import add, add_common, command, one, resolve, single
from llmq.output import check_output_file, print_json
from theory.errors import FieldError, require_positive_int

HELP = "simulate a scheduler on r GPUs at a rate or load; TTFT/TBT, throughput, stability verdict"


# the data dictionary of --log (written beside it as <name>.columns.json)
BATCH_LOG_COLUMNS = {
    "node": "index of the GPU (node) that ran the batch, 0 .. r - 1",
    "start": "s; simulated time the batch started",
    "duration": "s; its execution time T_B (Eq. 7 with the GPU's tiles)",
    "tokens": "tokens processed: prefill chunk tokens plus one per decode",
    "decodes": "decode iterations in the batch",
    "prefills": "prefill chunks in the batch",
    "optimal": "true if every GeMM ran on an optimal tile (no time lost to tiling)",
    "wasted_fraction": "fraction of the batch's time lost to non-optimal tiling",
    "prefill_chunks": "space-separated request:i:c -- request's prefill from token i, c tokens",
    "decode_positions": "space-separated request:i -- request's decode at context position i",
}


def add_parser(sub) -> None:
    """Register ``llmq simulate`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "simulate", HELP)
    add_common(p, ("gpu", "gpu_file", "tiles", "model", "model_file", "precision", "mode",
                   "workload", "pad", "gpus_r",
                   "seed", "json"))
    add(p, "--scheduler", "rad", "rad, alg2, request_level, ... (default rad)")
    rate = p.add_mutually_exclusive_group()
    add(p, "--rate", None, "not with --trace", to=rate)
    add(p, "--load", 0.9, "default 0.9; not with --trace", to=rate)
    add(p, "--requests", 20000, "default 20000; with --trace the whole trace")
    add(p, "--planner", "random", "resource planner: random, round_robin or jsq (default random)")
    add(p, "--option", [], "e.g. --option n=2000; RAD's n defaults to 'auto': the DTMC's empirical n_min "
                           "at eps (theory.defaults)", metavar="[SCHED.]NAME=VALUE")
    add(p, "--fast", False, "skip per-token TBT recording (event skipping only)", action="store_true")
    add(p, "--log", None, "write every batch with its contents", metavar="batches.csv")
    add(p, "--trace", None, "its arrivals are the load (no --rate or --load)")
    add(p, "--stages", None, "its arrivals are the load (no --rate, --load or --trace); --requests "
                             "takes the first ones (default: all of them)",
        metavar="DURATION:RATE[:KIND],...")
    add(p, "--concurrency", None, "N users in a closed loop instead of an arrival rate: each sends a "
                                  "request, waits for its last token, thinks, sends the next (one GPU; "
                                  "no --rate, --load or --stages; with --trace its lengths in order)",
        type=int, metavar="N")
    think = p.add_mutually_exclusive_group()
    add(p, "--think-time", None, "with --concurrency: seconds a user waits between the end of a "
                                 "request and the next (default 0)", type=float, metavar="S", to=think)
    add(p, "--think-exp", None, "with --concurrency: think times exponential with this mean, seconds",
        type=float, metavar="MEAN", to=think)
    add(p, "--workers", 1, "one per node simulated in parallel (default 1)")
    add(p, "--classes", None, metavar="NAME:PROB:TBT,...")
    add(p, "--total-cap", None, "condition lengths on L^P + L^D <= this (Section 7: 8192)", type=int)
    p.set_defaults(run=run)


def scenario_from(values: dict, options: dict):
    """The :class:`stability.sim.simulate.Scenario` that the resolved command-line ``values`` and the
    scheduler's ``options`` describe."""
    from stability.sim.arrivals import parse_stages
    from stability.sim.classes import parse_classes
    from stability.sim.simulate import Scenario

    rate = values["rate"]
    closed = _closed(values)
    return Scenario(
        gpu=values["gpu"], model=values["model"], mode=values["mode"], workload=values["workload"],
        pad=bool(values["pad"]), tiles=values["tiles"], gpu_file=values["gpu_file"],
        model_file=values["model_file"],
        scheduler=values["scheduler"], options=tuple(sorted(options.items())), r=values["gpus_r"],
        planner=values["planner"], rate=rate,
        load=None if rate is not None or closed is not None else values["load"],
        n_requests=values["requests"], seed=values["seed"], detail=not values["fast"],
        log=bool(values["log"]), trace=values["trace"],
        stages=tuple((s.duration, s.rate, s.kind) for s in parse_stages(values["stages"], "--stages"))
        if values["stages"] else (),
        classes=tuple((c.name, c.prob, c.tbt_slo) for c in parse_classes(values["classes"]))
        if values["classes"] else (), total_cap=values["total_cap"],
        **({} if closed is None else {"concurrency": closed.users, "think_time": closed.think,
                                      "think": closed.kind}))


def _closed(values):
    """The closed loop of ``--concurrency`` and its think time (:class:`stability.sim.closed_loop.Closed`),
    or None without one; a think time needs ``--concurrency`` and the two think times exclude each
    other (a config file may give both)."""
    from stability.sim.closed_loop import parse_closed

    users, const, exp = values["concurrency"], values["think_time"], values["think_exp"]
    if users is None:
        for key in ("think_time", "think_exp"):
            if values[key] is not None:
                raise FieldError("--" + key.replace("_", "-"), values[key],
                                 "--concurrency as well (a think time is a closed loop's)")
        return None
    if const is not None and exp is not None:
        raise FieldError("--think-exp", exp, "not with --think-time (one think time)")
    if exp is not None:
        return parse_closed(users, exp, "exponential", "--concurrency", "--think-exp")
    return parse_closed(users, 0.0 if const is None else const, "constant", "--concurrency", "--think-time")


def _requests(values) -> int:
    """The requests to simulate: ``--requests``, or with ``--trace`` by default the whole trace. A
    trace's arrivals are the load (no ``--rate`` or ``--load``), and at least two are replayed (its
    rate is ``(n - 1) / (last - first arrival)``)."""
    from llmq.options import trace_rate
    from theory.workload import read_trace

    n = require_positive_int("--requests", values["requests"])
    if _closed(values) is not None:
        return _closed_requests(values, n)
    if values["stages"]:
        return _staged_requests(values, n)
    if not values["trace"]:
        return n
    for key in ("rate", "load"):
        if key in values.given:
            raise FieldError(f"--{key}", values[key], "no --rate or --load with --trace (the trace's "
                                                      "arrival times are the load)")
    rows = int(read_trace(values["trace"]).L_P.size)
    if "requests" not in values.given:
        n = rows
    elif n > rows:
        raise FieldError("--requests", n, f"at most the trace's {rows} requests")
    trace_rate(values["trace"], n=n)
    return n


def _closed_requests(values, n: int) -> int:
    """The requests a closed loop sends: ``--requests``, or with ``--trace`` by default the whole
    trace (its lengths in order, not its arrival times); no ``--rate``, ``--load`` or ``--stages``
    beside ``--concurrency``."""
    from theory.workload import read_trace

    for key in ("rate", "load", "stages"):
        if key in values.given:
            raise FieldError(f"--{key}", values[key], "no --rate, --load or --stages with --concurrency "
                                                      "(the users' sends are the load)")
    if not values["trace"]:
        return n
    rows = int(read_trace(values["trace"]).L_P.size)
    if "requests" not in values.given:
        return rows
    if n > rows:
        raise FieldError("--requests", n, f"at most the trace's {rows} requests")
    return n


def _staged_requests(values, n: int) -> int:
    """The requests of a load schedule: ``--requests`` (at most its expected arrivals' worth) or,
    by default, all of them; no ``--rate``, ``--load`` or ``--trace`` beside it."""
    from stability.sim.arrivals import parse_stages

    for key in ("rate", "load", "trace"):
        if key in values.given:
            raise FieldError(f"--{key}", values[key], "no --rate, --load or --trace with --stages (the "
                                                      "stages' rates are the load)")
    from stability.sim.simulate import staged_arrivals

    parse_stages(values["stages"], "--stages")
    made = int(staged_arrivals(scenario_from({**values, "requests": n}, {})).size)
    if "requests" not in values.given:
        return made
    if n > made:
        raise FieldError("--requests", n,
                         f"at most the {made} arrivals the stages make (seed {values['seed']})")
    return n


def _options(values) -> dict:
    """The scheduler's ``--option`` values as ``{name: value}``, each name one it takes and each value
    one it accepts (RAD's n may be ``auto``): checked before any work."""
    from llmq.options import build_cost_model_from
    from llmq.scheduler_options import check_scheduler_options, scheduler_options
    from stability.sim.classes import parse_classes

    sched = values["scheduler"]
    per = scheduler_options(values["option"], [sched])
    per.setdefault(sched, {})
    classes = parse_classes(values["classes"]) if values["classes"] else ()
    check_scheduler_options(per, lambda: build_cost_model_from(values), auto=(("rad", "n"),), classes=classes)
    return {k: v[0] for k, v in per[sched].items()}


def _rad_n(values: dict, options: dict) -> dict:
    """The scheduler options with RAD's n resolved when it is ``auto`` or not given
    (:data:`theory.defaults.RAD_N`: the empirical n_min at :data:`theory.defaults.EPSILON`)."""
    from llmq.options import build_cost_model_from
    from stability.points import auto_rad_n
    from theory.defaults import EPSILON, RAD_N
    from theory.workload import get_workload

    if values["scheduler"] == "rad" and str(options.get("n", RAD_N)).strip().lower() == RAD_N:
        cm = build_cost_model_from(values)
        return {**options, "n": auto_rad_n(cm, get_workload(values["workload"]), EPSILON, values["seed"])}
    return options


def _check_context(sc) -> None:
    """Every request of the scenario fits its model's context (:func:`llmq.options.check_fits_context`)."""
    from llmq.options import check_fits_context
    from stability.sim.simulate import cost_model_of, workload_of

    cm = cost_model_of(sc)
    check_fits_context(cm.model, workload_of(sc, cm), spec=None if sc.trace else sc.workload,
                       trace=sc.trace, total_cap=sc.total_cap)


def run(args) -> int:
    """Run ``llmq simulate`` on the parsed ``args``; the exit code. Every option is checked before
    any work (RAD's n search included)."""
    from tqdm import tqdm

    from stability.sim.simulate import simulate, validate_scenario
    from theory.io import atomic_write_csv

    values = single(resolve(args), "simulate", "gpu", "model", "mode", "gpus_r")
    values["scheduler"] = one("--scheduler", values["scheduler"], "scheduler", "simulate")
    require_positive_int("--workers", values["workers"])
    if values["log"]:
        check_output_file(values["log"], "--log")
    values["requests"] = _requests(values)
    validate_scenario(scenario_from(values, {}))
    options = _options(values)
    _check_context(scenario_from(values, options))
    sc = scenario_from(values, _rad_n(values, options))
    with tqdm(total=sc.n_requests, unit="req", disable=values["json"] or sc.n_requests < 50000,
              desc=f"{sc.scheduler} on {sc.r} x {sc.gpu}") as bar:
        res = simulate(sc, workers=values["workers"], progress=bar.update)
    summary = res.summary()
    if values["log"]:
        atomic_write_csv(values["log"], res.batch_log(), BATCH_LOG_COLUMNS)
    if values["json"]:
        print_json(summary)
        return 0
    _print(summary, res)
    if values["log"]:
        print(f"batch log: {values['log']} ({summary['batches']} batches)")
    return 0


def _print(s: dict, res) -> None:
    ms = lambda d, k: f"{d[k] * 1e3:9.1f}"  # noqa: E731
    print(f"{s['scheduler']} on {s['r']} x {s['gpu']}, {s['model']}, workload {s['workload']}, "
          f"params {res.params}")
    print(f"rate {s['rate']:.4g} req/s = {s['load']:.3f} x lambda* ({s['lambda_star']:.4g} req/s); "
          f"{s['completed']}/{s['requests']} requests completed ({s['rejected']} rejected, "
          f"{s['preemptions']} preemptions); throughput {s['throughput']:.4g} req/s")
    if "kv" in s:
        kv = s["kv"]
        print(f"KV cache: peak {kv['peak_blocks']} of {kv['blocks']} blocks of {kv['block_size']} tokens "
              "per GPU"
              + (" (OVERFLOWED: a policy that counts memory without evicting, e.g. wait, nested_wait, needed "
                 "more than the cache holds)" if kv["overflowed"] else ""))
    if "closed_loop" in s:
        c = s["closed_loop"]
        print(f"closed loop: {c['users']} users, think time {c['think_time']:g} s ({c['think']}); the rate "
              "above is their sends'")
    print(f"{'':14}{'mean':>9}{'p50':>9}{'p90':>9}{'p99':>9}   (ms)")
    for name in ("ttft", "tpot", "latency") if "tpot" in s else ("ttft", "latency"):
        d = s[name]
        print(f"{name.upper():<14}" + "".join(ms(d, k) for k in ("mean", "p50", "p90", "p99")))
    for k, d in enumerate(s.get("tbt", [])):
        label = "TBT" if len(s["tbt"]) == 1 else f"TBT {s['classes'][k]['name']}"
        print(f"{label:<14}" + "".join(ms(d, q) for q in ("mean", "p50", "p90", "p99"))
              + f"   max {d['max'] * 1e3:.1f} ms over {d['count']} gaps")
    for c in s["classes"] if len(s["classes"]) > 1 else ():
        slo = c.get("slo")
        within = (f"; TBT SLO {c['tbt_slo']} s: {slo['gaps_within']:.2%} of gaps within, P99 "
                  f"{'met' if slo['p99_met'] else 'missed'}" if slo else "")
        print(f"class {c['name']}: {c['requests']} requests, median TTFT {c['ttft']['p50'] * 1e3:.1f} ms"
              + within)
    print(f"GPU busy {s['utilization']:.1%}; {s['batches']} batches in {s['events']} engine events; "
          f"{s['not_optimally_tiled']:.1%} not optimally tiled, {s['wasted_fraction']:.1%} of busy time "
          "lost to tiling")
    print("verdict: " + res.verdict().describe())
