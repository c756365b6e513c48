"""What ``llmq plan`` prints and writes: the counts, the cheapest plan, the Pareto front, and
``plan.md``, ``plan.csv``, ``plan.json`` (strict: no NaN, with a data dictionary of the CSV
columns) and ``plan.png`` (price per hour against the tail-latency SLO metric)."""

from __future__ import annotations

import math
from pathlib import Path

from stability.planner.caps import scheduler_caps
from stability.planner.runs import CONFIDENCE
from stability.planner.search import LENGTHENINGS, LONGER, Evaluated, PlanResult, Verified
from stability.planner.search_mixed import MixResult
from stability.sim.metrics import WARMUP
from theory.io import atomic_write_csv, atomic_write_json, atomic_write_text

COLUMNS = {
    "gpu": "GPU preset key",
    "model": "model preset",
    "mode": "layer model: paper (the paper's layer) or real (GQA + SwiGLU)",
    "scheduler": "scheduler name (stability.schedulers)",
    "knobs": "scheduler options as name=value;... (empty: the scheduler's defaults)",
    "tp": "tensor-parallel degree: GPUs per model replica (theory/data/tensor_parallel.toml)",
    "ep": "expert-parallel degree: replicas (one GPU each) per expert-parallel group of a mixture of "
          "experts, r a multiple of it (theory/expert_parallel.py); a column only where the plan has "
          "EP groups",
    "r": "number of model replicas behind the uniformly random planner",
    "gpus": "GPUs of the fleet: r x tp",
    "usd_per_hour": "gpus x the GPU's on-demand price per GPU-hour (prices.toml or --price-file), USD",
    "certified_rps": "certified upper bound on the request rate the fleet can sustain (any scheduler; "
                     "r x one replica's bound under random routing), req/s",
    "binds": "what binds the certified bound: compute or kv-memory",
    "memory_simulated": "whether the simulation models KV memory (false for rad, Assumption 4: there the "
                        "certified bound's KV part alone accounts for it)",
    "utilisation": "target rate / certified bound (a lower bound on the load of any deployment)",
    "headroom": "1 - utilisation",
    "feasible": "simulation met every SLO (mean over seeds), fewer than half the seeds unstable, no "
                "rejection; decided by the 95% intervals (every one within its limit, or one wholly above "
                "it) and the seeds' stability verdicts (none unstable, or all of at least two) unless "
                "undecided",
    "undecided": "the evidence did not decide feasible at the most seeds (--max-seeds): some SLO's "
                 "interval straddles its limit, or some but not all seeds are unstable, and nothing is "
                 "certain (no interval wholly above its limit, no rejection); feasible is then the means' "
                 "and the seeds' majority's verdict (use --verify or more --requests)",
    "seeds": "replicates simulated: --seeds, doubled while undecided up to --max-seeds",
    "requests_per_run": f"requests each seed simulated: --requests, {LONGER} times as many each time a "
                        "seed said unstable or the candidate was undecided at --max-seeds (at most "
                        f"{LENGTHENINGS} times; the shorter runs are set aside; a trace: its rows)",
    "missed": "SLOs missed (;-separated), 'stable' when at least half the seeds are unstable, 'rejections' "
              "for refused requests",
    "metric": "SLO metric key, e.g. ttft_p50, tbt_p99 or tbt_p99@class (columns <metric>, <metric>_lo, "
              "<metric>_hi: mean over seeds and its 95% Student-t interval as [max(low, 0), high], "
              "seconds (latencies are non-negative: the intersection keeps the coverage); empty if "
              "undefined)",
    "front": "on the Pareto front of price vs the tail-latency SLO metric",
    "best": "the cheapest feasible plan",
}


FIELDS = {
    "spec": "the question: target rate (req/s; a trace's mean rate), trace, request classes (name, "
            "probability, TBT SLO s), workload, SLOs, candidates, fleet limits in GPUs, TP and EP degrees",
    "counts": "configurations considered, pruned by the certified bound, simulated, saved; families; "
              "runs (replicate simulations, shorter runs set aside included), lengthened (candidates "
              f"rerun on {LONGER} times longer runs: an unstable seed, or undecided at --max-seeds), "
              "undecided (candidates not decided at --max-seeds)",
    "prices": "price per GPU-hour of each GPU and its source; checked_against_source false: transcribed, "
              "not re-read from the page",
    "one_gpu_certified": "per family (label <gpu[-tpK|-epE]>/<model>/<mode>/<scheduler>): one replica's "
                         "certified bound (req/s), what binds it, its KV-cache tokens",
    "best": "the cheapest feasible plan (a row, see columns)",
    "front": "the Pareto front of price vs the tail SLO metric (rows)",
    "below_best": "the fleet one replica smaller than the best plan in its family, as the search judged "
                  "it (the evidence that the best r is the smallest): r, feasible, undecided, missed; "
                  "null when it was not simulated (the best is its family's smallest kept fleet)",
    "evaluated": "every simulated candidate (rows)",
    "verification": "--verify: the best plan and the front re-simulated with new seeds and longer runs, "
                    "judged as the search judges (holds: every SLO's mean within its limit, fewer than "
                    "half the seeds unstable, no rejection; missed names what failed; undecided: the "
                    "evidence did not decide it at the most replicates); metrics as [mean, max(low, 0), "
                    "high] seconds",
    "mixed": "--mixed: two-GPU-kind fleets cheaper than the best pure plan behind the --router (router, "
             "router_rule; pure fleets behind random routing): counts, the price to beat, whether a mix "
             "beats every pure fleet, each simulated mix with its members, price, certified bound (sum of "
             "the members', valid for every router), judged as pure fleets are (feasible, undecided, "
             "seeds), metrics [mean, max(low, 0), high]",
    "columns": "what each row field means",
    "elapsed_s": "wall-clock seconds of the whole run",
}


def _clean(x):
    """Strict-JSON value: NaN and infinities become None; containers recursively."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _metric_keys(res: PlanResult) -> list[str]:
    keys: list[str] = []
    for e in res.evaluated:
        for k in e.result["metrics"]:
            if k not in keys:
                keys.append(k)
    return keys


def has_ep(res: PlanResult) -> bool:
    """Whether the plan's grid has a family with expert parallelism (then rows carry ``ep``)."""
    return any(f.ep > 1 for f in res.grid.families)


def plan_row(e: Evaluated, keys: list[str], front: set, best: Evaluated | None, ep: bool = False) -> dict:
    """One evaluated candidate as a flat row (see ``COLUMNS``), with its EP degree if ``ep``."""
    c = e.candidate
    row = {"gpu": c.family.gpu, "model": c.family.model, "mode": c.family.mode,
           "scheduler": c.family.scheduler, "knobs": ";".join(f"{k}={v}" for k, v in c.family.options),
           "tp": c.family.tp, **({"ep": c.family.ep} if ep else {}), "r": c.r, "gpus": c.gpus,
           "usd_per_hour": c.usd_per_hour,
           "certified_rps": c.certified, "binds": c.binds,
           "memory_simulated": scheduler_caps(c.family.scheduler, dict(c.family.options)).memory_modelled,
           "utilisation": c.utilisation, "headroom": c.headroom, "feasible": e.feasible,
           "undecided": not e.decided, "seeds": len(e.result["replicates"]),
           "requests_per_run": e.result["replicates"][0]["requests"], "missed": ";".join(e.missed)}
    for k in keys:
        mean, lo, hi = e.result["metrics"].get(k, [None, None, None])
        row[k], row[f"{k}_lo"], row[f"{k}_hi"] = mean, lo, hi
    row["front"] = id(e) in front
    row["best"] = best is e
    return row


def _ci(m: list) -> str:
    mean, lo, hi = m
    if mean is None:
        return "n/a"
    return f"{mean * 1e3:.1f} ms" + (f" [{lo * 1e3:.1f}, {hi * 1e3:.1f}]" if lo is not None else "")


def _figures(result: dict, keys: list[str]) -> str:
    """The SLO metrics ``keys`` of a result that has them, each as its mean and interval."""
    return ", ".join(f"{k} {_ci(result['metrics'][k])}" for k in keys if k in result["metrics"])


def describe(e: Evaluated, slo_keys: list[str]) -> str:
    """One line: the configuration, price, certified bound, utilisation, SLO figures with CIs."""
    c = e.candidate
    figs = _figures(e.result, slo_keys)
    gpus = f" ({c.gpus} GPUs)" if c.family.tp > 1 else ""
    return (f"{c.r} x {c.family.label}{gpus}: ${c.usd_per_hour:.2f}/h, certified <= {c.certified:.2f} req/s "
            f"({c.binds}), utilisation {c.utilisation:.1%}, headroom {c.headroom:.1%}; {figs}"
            + undecided_note(e.decided, e.result))


def undecided_note(decided: bool, result: dict) -> str:
    """``""`` for a decided verdict, else what the intervals left open and what to do."""
    if decided:
        return ""
    return f"; undecided at {len(result['replicates'])} seeds: use --verify or more --requests"


def below_line(res: PlanResult) -> str | None:
    """How the fleet one replica smaller than the best plan was judged (the evidence that the
    best ``r`` is the smallest of its family), or None when it was not simulated."""
    e = res.below_best()
    if e is None:
        return None
    head = f"one replica fewer ({e.candidate.r} x {e.candidate.family.label})"
    if e.decided:
        return f"{head}: decided infeasible (missed {', '.join(e.missed)})"
    return (f"{head}: undecided at {len(e.result['replicates'])} seeds, judged infeasible by the means: "
            "a smaller fleet may also meet the SLOs (more --requests or --max-seeds would decide it)")


def verification_line(v: Verified, keys: list[str]) -> str:
    """One re-simulated plan: whether it holds, and its SLO figures with intervals."""
    c = v.plan.candidate
    figs = _figures(v.result, keys)
    verdict = "holds" if v.holds else "REFUTED (" + ", ".join(v.missed) + ")"
    return (f"{c.r} x {c.family.label}: {verdict} ({len(v.result['replicates'])} seeds); {figs}"
            + undecided_note(v.decided, v.result))


ROUTER_TEXT = {
    "random": "capacity-proportional random router: each request to a member with probability "
              "proportional to its certified capacity (stability/planner/mixed_fleet.py)",
    "jsq": "JSQ router: each request to the replica with the fewest pending requests, ties to the "
           "lowest index (stability/sim/fleet.py)",
    "sed": "SED router: each request to the replica with the least (pending requests + 1) / certified "
           "capacity (stability/sim/fleet.py)",
}


def mix_lines(mixes: MixResult, keys: list[str]) -> list[str]:
    """What the search over mixed fleets found."""
    n = mixes.counts
    head = (f"mixed fleets (two GPU kinds, {ROUTER_TEXT[mixes.router]}) cheaper than the best pure "
            f"plan: considered {n['considered']}, pruned by the certified bound (sum of the members') "
            f"{n['pruned']}, simulated {n['simulated']}, skipped {n['skipped']} (a larger mix of the same "
            f"kinds missed)")
    if mixes.best is not None:
        b = mixes.best
        figs = _figures(b.result, keys)
        return [head, f"a mix beats every pure fleet: {b.mix.label}, ${b.mix.usd_per_hour:.2f}/h "
                      f"(best pure ${mixes.below:.2f}/h), certified <= {b.mix.certified:.2f} req/s, "
                      f"utilisation {b.mix.utilisation:.1%}; {figs}" + undecided_note(b.decided, b.result)]
    why = (f"the budget of {n['budget']} simulations ran out" if n["exhausted"]
           else "every cheaper mix is pruned by the bound or missed an SLO")
    return [head, f"no mix beats the best pure fleet ({why})"]


def console_lines(res: PlanResult, elapsed_s: float, checked: list[Verified] | None = None,
                  mixes: MixResult | None = None) -> list[str]:
    """The report ``llmq plan`` prints (with the re-simulations of ``--verify`` and the mixed
    fleets of ``--mixed`` if given); the run sizes are the search's (``res.options``: requests per
    run, the first replicates per candidate and the most)."""
    n_requests, seeds, max_seeds = res.options.n_requests, res.options.seeds, res.options.max_seeds
    s = res.spec
    n = res.counts
    keys = [x.key for x in s.slo.limits]
    load = (f"trace {s.trace} (mean {s.rate:.4g} req/s)" if s.trace else f"{s.rate:g} req/s of {s.workload}")
    classes = (", classes " + ",".join(f"{c[0]}:{c[1]:g}" for c in s.classes)) if s.classes else ""
    lines = [f"llmq plan: {load}{classes}, SLOs {s.slo.text}, GPUs <= {s.r_max}, "
             f"{'/'.join(s.models)} ({'/'.join(s.modes)} layers, TP "
             f"{'/'.join(map(str, s.tp)) if s.tp else 'where the model needs it'}"
             + (f", EP {'/'.join(map(str, s.ep)) if s.ep else 'where the experts divide'}"
                if has_ep(res) else "")
             + "), random routing",
             f"configurations considered {n['considered']}, pruned by the certified bound {n['pruned']}, "
             f"simulated {n['simulated']} ({n['runs']} runs), simulations saved {n['saved']} "
             f"(families {n['families']}, visited {n['families_visited']})",
             f"simulated SLO figures: mean over {seeds} seeds of {n_requests} requests after a warm-up (the "
             f"first {WARMUP:.0%} of the arrival window), doubled up to {max_seeds} while an SLO's interval "
             f"straddles its limit or the seeds' stability verdicts differ, with {CONFIDENCE:.0%} Student-t "
             f"intervals [max(low, 0), high]; runs {LONGER} times longer (at most {LENGTHENINGS} times) "
             f"after an unstable seed or while undecided: {n['lengthened']} candidates; undecided at "
             f"{max_seeds} seeds: {n['undecided']} (judged by the means and the seeds' majority)"]
    if res.best is None:
        lines.append("no simulated configuration met the SLOs (raise --max-gpus, relax --slo, or "
                     "simulate longer: see plan.csv for what each missed)")
    else:
        lines.append("cheapest feasible plan: " + describe(res.best, keys))
        below = below_line(res)
        if below is not None:
            lines.append("  " + below)
        lines.append(f"Pareto front (price vs {s.slo.tail_metric or 'price'}, among the simulated plans):")
        lines += ["  " + describe(e, keys) for e in res.front()]
    if mixes is not None:
        lines += mix_lines(mixes, keys)
    if checked is not None and res.best is not None:
        runs = checked[0].result["replicates"][0]["requests"]
        held = sum(v.holds for v in checked)
        lines.append(f"re-simulated with new seeds (runs of {runs} requests, seeds doubled while undecided): "
                     f"{held} of {len(checked)} plans hold (judged as the search judges)")
        lines += ["  " + verification_line(v, keys) for v in checked]
    lines.append(f"runtime {elapsed_s:.1f} s")
    return lines


def mix_json(mixes: MixResult | None) -> dict | None:
    """The search over mixed fleets as JSON: counts, the price to beat, every simulated mix."""
    if mixes is None:
        return None
    return {"counts": mixes.counts, "best_pure_usd_per_hour": mixes.below, "beats_pure": mixes.beats_pure,
            "router": mixes.router, "router_rule": ROUTER_TEXT[mixes.router],
            "simulated": [{"members": [{"gpu": f.gpu_key, "tp": f.tp, "replicas": n}
                                       for f, n in e.mix.members],
                           "label": e.mix.label, "usd_per_hour": e.mix.usd_per_hour,
                           "certified_rps": e.mix.certified, "utilisation": e.mix.utilisation,
                           "feasible": e.feasible, "undecided": not e.decided,
                           "seeds": len(e.result["replicates"]), "missed": list(e.missed),
                           "metrics": e.result["metrics"]}
                          for e in mixes.evaluated]}


def _below_json(e: Evaluated | None) -> dict | None:
    if e is None:
        return None
    return {"label": e.candidate.family.label, "r": e.candidate.r, "feasible": e.feasible,
            "undecided": not e.decided, "missed": list(e.missed)}


def to_json(res: PlanResult, elapsed_s: float, rows: list[dict], checked: list[Verified] | None = None,
            mixes: MixResult | None = None) -> dict:
    """The whole result as a strict-JSON-able dict (the run sizes: ``res.options``)."""
    s = res.spec
    verification = None if checked is None else [
        {"label": v.plan.candidate.family.label, "r": v.plan.candidate.r, "holds": v.holds,
         "missed": list(v.missed), "undecided": not v.decided, "metrics": v.result["metrics"],
         "replicates": len(v.result["replicates"]), "requests_per_run": v.result["replicates"][0]["requests"]}
        for v in checked]
    return _clean({
        "spec": {"rate": s.rate, "trace": s.trace, "classes": [list(c) for c in s.classes],
                 "workload": s.workload, "slo": s.slo.text, "gpus": list(s.gpu_list),
                 "models": list(s.models), "modes": list(s.modes), "schedulers": list(s.schedulers),
                 "knobs": {k: [dict(x) for x in v] for k, v in s.knobs.items()}, "r_min": s.r_min,
                 "r_max": s.r_max, "planner": s.planner, "tp": list(s.tp) or "auto",
                 "ep": list(s.ep) or "auto",
                 "requests_per_run": res.options.n_requests, "seeds": res.options.seeds,
                 "max_seeds": res.options.max_seeds,
                 "confidence": CONFIDENCE},
        "counts": res.counts,
        "prices": {k: {"usd_per_gpu_hour": p.usd_per_gpu_hour, "instance": p.instance,
                       "provider": p.provider, "source": p.source, "as_of": p.as_of,
                       "checked_against_source": p.checked}
                   for k, p in res.grid.prices.items()},
        "one_gpu_certified": {f.label: {"bound": o.bound, "binds": o.binds, "kv_tokens": o.kv_tokens}
                              for f, o in res.grid.one_gpu.items()},
        "best": next((r for r in rows if r["best"]), None),
        "front": [r for r in rows if r["front"]],
        "below_best": _below_json(res.below_best()),
        "verification": verification,
        "mixed": mix_json(mixes),
        "evaluated": rows,
        "columns": COLUMNS,
        "fields": FIELDS,
        "elapsed_s": elapsed_s,
    })


def markdown(res: PlanResult, lines: list[str], rows: list[dict]) -> str:
    """``plan.md``: the console report and a table of every simulated candidate."""
    keys = [x.key for x in res.spec.slo.limits]
    ep = ["ep"] * has_ep(res)
    head = ["GPU", "model", "mode", "scheduler", "knobs", "tp", *ep, "r", "$/h", "certified req/s",
            "utilisation", *keys, "seeds", "feasible"]
    out = ["# llmq plan", "", *[f"* {x}" for x in lines], "", "## Simulated candidates", "",
           "SLO figures in ms: mean over the seeds [95% Student-t interval as [max(low, 0), high]: the "
           "latencies are non-negative]; undecided: the intervals did not decide the verdict at the "
           "most seeds, which the means then gave.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["gpu"], r["model"], r["mode"], r["scheduler"], r["knobs"] or "-", r["tp"],
                 *[r[k] for k in ep], r["r"],
                 f"{r['usd_per_hour']:.2f}", f"{r['certified_rps']:.2f}", f"{r['utilisation']:.1%}",
                 *[_ci([r.get(k), r.get(f"{k}_lo"), r.get(f"{k}_hi")]) for k in keys], r["seeds"],
                 ("yes" if r["feasible"] else "no (" + r["missed"] + ")")
                 + (", undecided" if r["undecided"] else "")]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    out += ["", "Prices: " + "; ".join(f"{k} ${p.usd_per_gpu_hour:.3f}/GPU-h ({p.instance}, {p.provider}, "
                                       f"{p.as_of}, {p.source})" for k, p in res.grid.prices.items()), ""]
    return "\n".join(out)


def plot(res: PlanResult, path: Path) -> Path:
    """``plan.png``: price per hour against the tail SLO metric of every simulated candidate, the
    front joined, titled with the model, workload and SLOs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = res.spec
    key = s.slo.tail_metric
    fig, ax = plt.subplots(figsize=(7, 4.5))
    front = res.front()
    if key is not None:
        for ok, mark, lab in ((True, "o", "feasible"), (False, "x", "missed an SLO")):
            pts = [(e.candidate.usd_per_hour, e.result["metrics"][key][0]) for e in res.evaluated
                   if e.feasible == ok and e.result["metrics"].get(key, [None])[0] is not None]
            if pts:
                ax.scatter(*zip(*pts, strict=True), marker=mark, label=lab)
        if front:
            ax.plot([e.candidate.usd_per_hour for e in front], [e.result["metrics"][key][0] for e in front],
                    "-", color="k", lw=1, label="Pareto front")
            for e in front:
                ax.annotate(f"{e.candidate.r}x{e.candidate.family.gpu_key}/{e.candidate.family.scheduler}",
                            (e.candidate.usd_per_hour, e.result["metrics"][key][0]), fontsize=7)
        limit = next(x.limit for x in s.slo.limits if x.key == key)
        ax.axhline(limit, ls="--", color="r", lw=1, label=f"SLO {key} = {limit:g} s")
        ax.set_ylabel(f"{key} (s, mean over seeds)")
        ax.legend(fontsize=8)
    ax.set_xlabel("price (USD per hour)")
    ax.set_title(f"llmq plan: {'/'.join(s.models)} ({'/'.join(s.modes)}), {s.workload}, {s.rate:g} req/s\n"
                 f"SLOs {s.slo.text}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(res: PlanResult, out: Path, lines: list[str], elapsed_s: float,
                  checked: list[Verified] | None = None, mixes: MixResult | None = None) -> list[str]:
    """Write ``plan.md``, ``plan.csv``, ``plan.json`` and ``plan.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    keys = _metric_keys(res)
    front = {id(e) for e in res.front()}
    rows = [plan_row(e, keys, front, res.best, has_ep(res)) for e in res.evaluated]
    files = []
    cols = {k: [("" if r[k] is None else r[k]) for r in rows] for k in (rows[0] if rows else COLUMNS)}
    files.append(str(atomic_write_csv(out / "plan.csv", cols)))
    data = to_json(res, elapsed_s, rows, checked, mixes)
    files.append(str(atomic_write_json(out / "plan.json", data)))
    files.append(str(atomic_write_text(out / "plan.md", markdown(res, lines, rows))))
    files.append(str(plot(res, out / "plan.png")))
    return files
