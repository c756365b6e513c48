"""``llmq dtmc``: RAD's cycle DTMC built by executing its cycles; drift, stationary law, and the
paper's Appendix C statements set against it."""

from __future__ import annotations

from llmq.options import (
    add,
    add_common,
    build_cost_model_from,
    build_workload_from,
    command,
    parse_floats,
    resolve,
    single,
)
from llmq.output import out_dir, print_json
from theory.defaults import EPSILON, RAD_N
from theory.errors import FieldError

HELP = ("RAD's cycle DTMC (Appendix C) by executing Algorithm 1: drift with CIs, E[T | x], "
        "stationary law, classes; Eq. 25, Lemmas 3-4, Theorem 2's n vs the empirical n")


def add_parser(sub) -> None:
    """Register ``llmq dtmc`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "dtmc", HELP)
    add_common(p, ("gpu", "gpu_file", "tiles", "model", "model_file", "mode", "workload", "gpus_r", "seed",
                   "out", "json"))
    add(p, "--raw", False, "the default pads them (Assumption 3)")
    add(p, "--n", None, "RAD's requests per cycle n, or 'auto' (the default): the empirical n_min at the "
                        "first --epsilon (theory.defaults)")
    rate = p.add_mutually_exclusive_group()
    add(p, "--rate", None, to=rate)
    add(p, "--load", 0.9, "default 0.9", to=rate)
    add(p, "--truncate", None, "truncation level x_max (default: from the drift)", type=int)
    add(p, "--samples", 100, "executed cycles per state x < n (default 100)", type=int)
    add(p, "--samples-sat", None, "executed cycles for x >= n (default 10 x samples)", type=int)
    add(p, "--n-min", False, "also search the empirical smallest n with negative drift per epsilon",
        action="store_true")
    add(p, "--epsilon", [EPSILON], f"one or a comma-separated list: the margins of --n-min, the first "
                                   f"that of n = auto (default {EPSILON})")
    add(p, "--confidence", 0.99, "default 0.99")
    p.set_defaults(run=run)


def _n(value, cm, w, epsilon: float, seed: int) -> int:
    """RAD's n: an integer, or ``auto`` or not given (:data:`theory.defaults.RAD_N`, resolved by
    :func:`stability.points.auto_rad_n`)."""
    if value is None or str(value).strip().lower() == RAD_N:
        from stability.points import auto_rad_n

        return auto_rad_n(cm, w, epsilon, seed)
    try:
        return int(str(value))
    except ValueError:
        raise FieldError("n", value, "an integer >= 1 or 'auto'") from None


def _check_numbers(values: dict) -> None:
    """The rate or load, sizes and confidence, checked before RAD's n search (minutes when auto)."""
    from theory.errors import require_positive, require_positive_int

    if values["rate"] is not None:
        require_positive("--rate", values["rate"])
    require_positive("--load", values["load"])
    require_positive_int("--samples", values["samples"])
    for key in ("samples_sat", "truncate"):
        if values[key] is not None:
            require_positive_int(f"--{key.replace('_', '-')}", values[key])
    if not 0 < values["confidence"] < 1:
        raise FieldError("--confidence", values["confidence"], "a number in (0, 1)")


def _rows_to_print(x_max: int, n: int) -> list[int]:
    """Every state if few; else a spread of states below n, n itself and a few above."""
    if x_max <= 40:
        return list(range(x_max + 1))
    below = sorted({0, 1, 2, 3, 5, *range(0, n, max(1, n // 10)), n - 1})
    above = sorted({n, n + 1, *range(n, x_max + 1, max(1, (x_max - n) // 6)), x_max})
    return [x for x in below if x < n] + [x for x in above if x <= x_max]


def run(args) -> int:
    """Run ``llmq dtmc`` on the parsed ``args``; the exit code."""
    from paper_checks.chain_statements import compare_with_paper
    from stability.dtmc import ChainOptions, build_chain, empirical_n_min
    from stability.plot import plot_drift
    from theory.bounds import T_bar_R, lemma3_drift_bound

    values = single(resolve(args), "dtmc", "gpu", "model", "mode", "gpus_r")
    values["pad"] = not values["raw"]
    out = out_dir(values["out"])
    epsilons = parse_floats("--epsilon", values["epsilon"], "comma-separated numbers in (0, 1)")
    if not all(0 < e < 1 for e in epsilons):
        raise FieldError("--epsilon", values["epsilon"], "comma-separated numbers in (0, 1)")
    _check_numbers(values)
    cm = build_cost_model_from(values)
    w = build_workload_from(values, cm)
    n = _n(values["n"], cm, w, epsilons[0], values["seed"])
    r = values["gpus_r"]
    lam_star = r / T_bar_R(cm, w)
    lam = values["rate"] if values["rate"] is not None else values["load"] * lam_star
    chain = build_chain(cm, w, n, lam, r, ChainOptions(values["truncate"], values["samples"],
                                                       values["samples_sat"], values["seed"],
                                                       values["confidence"]))
    info, checks = compare_with_paper(chain, cm, w)
    stat = chain.stationary()
    tb = chain.table
    lemma3 = lemma3_drift_bound(chain.n, lam, r, info["T_bar_R_s"], chain.t_col, info["T_max_s"])
    printed = lemma3_drift_bound(chain.n, lam, r, info["T_bar_R_s"], chain.t_col, info["T_max_s"],
                                 printed=True)
    throughput = chain.cycle_throughput()
    n_mins = []
    if values["n_min"]:
        for eps in epsilons:
            res = empirical_n_min(cm, w, eps, values["samples"], values["seed"], values["confidence"])
            n_mins.append({"epsilon": eps, "n_min": res.n_min, "n_threshold": res.n_threshold,
                           "drift_at_n_min": list(res.drift)})
    plot = plot_drift(chain, out / "dtmc_drift.png", lemma3, printed,
                      f"RAD cycle DTMC, {cm.gpu.key}, {cm.model.key} ({values['mode']}), {w.name}, "
                      f"n = {chain.n}, "
                      f"lambda = {lam / lam_star:.3g} lambda*")
    result = {
        "gpu": cm.gpu.key, "model": cm.model.key, "workload": w.name, **info,
        "x_max": chain.x_max, "samples": values["samples"], "samples_sat": chain.sat.T.size,
        "confidence": chain.confidence,
        "drift_saturated": list(chain.saturated_drift()),
        "cycle_throughput_per_node": list(throughput),
        "rad_boundary": [r * v for v in throughput],
        "stationary": {"mean": stat.mean, "boundary_mass": stat.boundary_mass, "band": stat.band,
                       "mean_truncated_lower": stat.mean_lower, "x_lower": stat.x_lower,
                       "irreducible": stat.structure.irreducible,
                       "recurrent_classes": [[int(c[0]), int(c[-1]), int(c.size)]
                                             for c in stat.structure.recurrent],
                       "periods": stat.structure.periods,
                       "transient_states": int(stat.structure.transient.size)},
        "checks": [c.__dict__ for c in checks],
        "states": {k: v.tolist() for k, v in tb.items()},
        "n_min": n_mins, "plot": str(plot),
    }
    if values["json"]:
        print_json(result)
        return 0
    _print(result, chain, lemma3)
    return 0


def _print(res: dict, chain, lemma3: float) -> None:
    tb = chain.table
    print(f"RAD cycle DTMC on {res['gpu']}, {res['model']}, workload {res['workload']}: "
          f"n = {res['n']}, t*_col = {res['t_col']}, r = {res['r']}")
    print(f"lambda = {res['lambda']:.4g} req/s = {res['lambda'] / res['lambda_star']:.3f} lambda* "
          f"(lambda* = {res['lambda_star']:.4g}); T_bar^R = {res['T_bar_R_s'] * 1e3:.2f} ms, "
          f"T^max = {res['T_max_s']:.4g} s; truncation x_max = {res['x_max']}")
    print(f"executed cycles: {res['samples']} per state x < n, {res['samples_sat']} for x >= n; "
          f"intervals at {res['confidence']:.0%}")
    print(f"{'x':>6} {'drift':>10} {'CI':>22} {'E[T|x] s':>11} {'E[K|x]':>8} {'Lemma 3':>10}")
    for x in _rows_to_print(chain.x_max, chain.n):
        bound = f"{lemma3:10.3f}" if x >= chain.n else f"{'-':>10}"
        print(f"{x:>6} {tb['drift'][x]:>10.3f} [{tb['drift_lo'][x]:>9.3f},{tb['drift_hi'][x]:>9.3f}] "
              f"{tb['ET'][x]:>11.4g} {tb['EK'][x]:>8.2f} {bound}")
    st = res["stationary"]
    print(f"stationary law of the truncated chain: mean {st['mean']:.4g}, mass in the top "
          f"{st['band']} states {st['boundary_mass']:.2e}, mean if truncated at {st['x_lower']}: "
          f"{st['mean_truncated_lower']:.4g}")
    if st["boundary_mass"] > 1e-3:
        print("  the mass piles up at the truncation: the chain has no stationary law at this rate "
              "(the truncated law is an artefact of x_max)")
    print(f"classes: {'irreducible' if st['irreducible'] else 'reducible'}, recurrent classes "
          f"(first, last, size) {st['recurrent_classes']}, periods {st['periods']}, "
          f"{st['transient_states']} transient states")
    lo, hi = res["rad_boundary"][1:]
    print(f"RAD's boundary at this n (r E[K]/E[T] for x >= n): {res['rad_boundary'][0]:.4g} req/s "
          f"[{lo:.4g}, {hi:.4g}] = {res['rad_boundary'][0] / res['lambda_star']:.4f} lambda*; "
          f"P(K < n | x >= n) = {res['early_end_fraction']:.3g}")
    print("Appendix C against the executed chain:")
    for c in res["checks"]:
        verdict = {True: "holds", False: "FAILS", None: "n/a"}[c["holds"]]
        where = f" at {c['states']}" if c["states"] else ""
        print(f"  {c['name']:<20} {verdict:<6} paper {c['paper']:.4g}, executed {c['executed']:.4g} "
              f"[{c['lo']:.4g}, {c['hi']:.4g}]{where}")
        print(f"  {'':<20} {c['claim']}")
    for m in res["n_min"]:
        print(f"empirical n_min at eps = {m['epsilon']}: {m['n_min']} (Theorem 2: n > "
              f"{m['n_threshold'] - 1}, i.e. {m['n_threshold']})")
    print(f"drift plot: {res['plot']}")
