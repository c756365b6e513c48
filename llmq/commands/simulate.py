"""``llmq simulate``: one run of a scheduler at a load, with metrics and a stability verdict."""

from __future__ import annotations

from llmq.options import add_common, parse_options, resolve
from llmq.output import check_output_file, print_json
from theory.errors import require_positive_int

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
    p = sub.add_parser("simulate", help=HELP, description=HELP)
    add_common(p, defaults={"scheduler": "rad", "rate": None, "load": 0.9, "requests": 20000,
                            "planner": "random", "option": [], "fast": False, "log": None,
                            "trace": None, "workers": 1, "classes": None, "total_cap": None},
               omit=("out",))
    p.add_argument("--scheduler", help="rad, alg2, request_level, ... (default rad)")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--rate", type=float, help="arrival rate into the system, requests/s")
    rate.add_argument("--load", type=float, help="arrival rate as a fraction of lambda* (default 0.9)")
    p.add_argument("--requests", type=int, help="number of requests (default 20000)")
    p.add_argument("--planner", choices=["random", "round_robin", "jsq"], help="resource planner")
    p.add_argument("--option", action="append", metavar="NAME=VALUE",
                   help="scheduler option, e.g. --option n=2000 (repeatable); RAD's n defaults to "
                        "'auto': the DTMC's empirical n_min at eps (theory.defaults)")
    p.add_argument("--fast", action="store_true", default=None,
                   help="skip per-token TBT recording (event skipping only)")
    p.add_argument("--log", metavar="batches.csv", help="write every batch with its contents")
    p.add_argument("--trace", help="CSV trace with arrival_time, prompt_len, output_len")
    p.add_argument("--workers", type=int, help="processes simulating nodes in parallel")
    p.add_argument("--classes", metavar="NAME:PROB:TBT,...",
                   help="request classes with TBT SLOs, e.g. paying:0.05:0.1,free:0.95:0.5 (Section 7)")
    p.add_argument("--total-cap", type=int, help="condition lengths on L^P + L^D <= this (Section 7: 8192)")
    p.set_defaults(run=run)


def scenario_from(values: dict):
    """The :class:`stability.sim.simulate.Scenario` that the resolved command-line ``values`` describe."""
    from stability.sim.classes import parse_classes
    from stability.sim.simulate import Scenario

    rate = values["rate"]
    return Scenario(
        gpu=values["gpu"], model=values["model"], mode=values["mode"], workload=values["workload"],
        pad=bool(values["pad"]), tiles=values["tiles"], gpu_file=values["gpu_file"],
        model_file=values["model_file"],
        scheduler=values["scheduler"], options=parse_options(values["option"]), r=values["gpus_r"],
        planner=values["planner"], rate=rate, load=None if rate is not None else values["load"],
        n_requests=values["requests"], seed=values["seed"], detail=not values["fast"],
        log=bool(values["log"]), trace=values["trace"],
        classes=tuple((c.name, c.prob, c.tbt_slo) for c in parse_classes(values["classes"]))
        if values["classes"] else (), total_cap=values["total_cap"])


def _rad_n(values: dict) -> tuple:
    """The scheduler options with RAD's n resolved when it is ``auto`` or not given
    (:data:`theory.defaults.RAD_N`: the empirical n_min at :data:`theory.defaults.EPSILON`)."""
    from llmq.options import build_cost_model_from
    from stability.points import auto_rad_n
    from theory.defaults import EPSILON, RAD_N
    from theory.workload import get_workload

    options = dict(parse_options(values["option"]))
    if values["scheduler"] == "rad" and str(options.get("n", RAD_N)).strip().lower() == RAD_N:
        cm = build_cost_model_from(values)
        options["n"] = auto_rad_n(cm, get_workload(values["workload"]), EPSILON, values["seed"])
    return tuple(sorted(options.items()))


def _check_context(sc) -> None:
    """Every request of the scenario fits its model's context (:func:`llmq.options.check_fits_context`)."""
    from llmq.options import check_fits_context
    from stability.sim.simulate import cost_model_of, workload_of

    cm = cost_model_of(sc)
    check_fits_context(cm.model, workload_of(sc, cm), spec=None if sc.trace else sc.workload,
                       trace=sc.trace, total_cap=sc.total_cap)


def run(args) -> int:
    """Run ``llmq simulate`` on the parsed ``args``; the exit code."""
    from tqdm import tqdm

    from stability.sim.simulate import simulate
    from theory.io import atomic_write_csv

    values = resolve(args)
    require_positive_int("--workers", values["workers"])
    if values["log"]:
        check_output_file(values["log"], "--log")
    _check_context(scenario_from(values))
    values = {**values, "option": dict(_rad_n(values))}
    sc = scenario_from(values)
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
    print(f"{'':14}{'mean':>9}{'p50':>9}{'p90':>9}{'p99':>9}   (ms)")
    for name in ("ttft", "latency"):
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
