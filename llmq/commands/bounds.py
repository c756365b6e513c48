"""``llmq bounds``: Theorem 1/2 quantities for a GPU, model, workload, r and epsilon."""

from __future__ import annotations

from llmq.options import (
    add,
    add_common,
    build_cost_model_from,
    build_workload_from,
    command,
    parse_gpus,
    resolve,
    single,
)
from llmq.output import print_json
from theory.defaults import EPSILON
from theory.errors import require_positive_int

HELP = "T_bar^R, T^max, lambda*, t*_lcm, Theorem 2's n and the cycle bounds (Theorems 1-2)"


def add_parser(sub) -> None:
    """Register ``llmq bounds`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "bounds", HELP)
    add_common(p, ("gpu", "gpu_file", "tiles", "model", "model_file", "precision", "mode",
                   "workload", "pad", "gpus_r",
                   "json"), details={"gpu": "or 'all' (default a100)"})
    add(p, "--epsilon", EPSILON, f"default {EPSILON}")
    add(p, "--token-budget", None, "tokens per batch at most, for the certified capacity (default: no "
                                   "budget)", type=int)
    p.set_defaults(run=run)


def _row(values: dict, gpu_name: str) -> dict:
    from theory.assumptions import check_assumptions
    from theory.bounds import compute_bounds
    from theory.cost import linear_law_name

    cm = build_cost_model_from(values, gpu_name)
    w = build_workload_from(values, cm)
    row = compute_bounds(cm, w, values["gpus_r"], values["epsilon"]).as_dict()
    row["gpu_name"] = cm.gpu.name
    row["gpu_rates"] = cm.gpu.calibration  # "roofline, uncalibrated" or the calibration's provenance
    row["linear_law"] = linear_law_name(cm)  # what priced the linear GeMMs (tile model, law, profile)
    row["certified"] = _certified(cm, w, values["gpus_r"], row["lambda_star"], values["token_budget"])
    row["assumptions"] = {a.name: {"holds": a.holds, "detail": a.detail}
                          for a in check_assumptions(cm, w)}
    return row


def _certified(cm, w, r: int, lam_star: float, b_max: int | None) -> dict:
    """The certified capacity (theory.capacity) beside the paper's lambda*, and why they differ."""
    from theory.capacity import capacity_bound, kv_capacity_tokens

    kv = kv_capacity_tokens(cm)
    cap = capacity_bound(cm, w, r, b_max=b_max, kv_tokens=kv if kv > 0 else None)
    gap = cap.bound / lam_star - 1
    if cap.binds == "kv-memory":
        why = "KV memory binds: fewer requests fit in the cache than the compute could serve"
    elif gap < -1e-9:
        causes = _below_lambda_star(cm, cap.best_batch_tokens)
        why = " and ".join(causes) + ": lambda* is not an upper bound here"
    elif gap > 1e-9:
        why = "lambda* undercuts the exact minimal work (Appendix B's chunking lemma fails: erratum)"
    else:
        why = "equal to lambda* (Eq. 2-7, the chunking lemma holds)"
    return {"bound": cap.bound, "binds": cap.binds, "lambda_compute": cap.lam_compute,
            "lambda_kv": cap.lam_kv if cap.lam_kv != float("inf") else None,
            "kv_tokens_per_gpu": kv, "vs_lambda_star": gap, "why": why,
            "work_per_request_s": cap.work_per_request_s, "pieces_s": cap.pieces_s,
            "best_batch_tokens": cap.best_batch_tokens, "token_budget": b_max}


def _below_lambda_star(cm, best_tau: int | None) -> list[str]:
    """Why the certified bound falls below lambda* (Theorem 1 amortises every batch's cost over
    ever larger batches): a fixed time per batch, and a linear time per token of the bound's best
    batch above Theorem 1's limit l* (tile padding, waves, the memory floor, experts not yet
    shared); the residual where neither applies."""
    from theory.cost import T_Lin, linear_per_token

    causes = []
    if cm.fixed_s > 0:
        causes.append("a per-batch fixed time that batches of at most the token budget cannot amortise")
    if best_tau and float(T_Lin(cm, best_tau)) / best_tau > linear_per_token(cm) * (1 + 1e-9):
        causes.append(f"a linear time per token of the best batch ({best_tau} tokens) above Theorem 1's "
                      "limit l* (tile padding, waves, the memory floor or experts not yet shared)")
    return causes or ["batches of at most the token budget cannot reach Theorem 1's amortised cost"]


def run(args) -> int:
    """Run ``llmq bounds`` on the parsed ``args``; the exit code."""
    from theory.hardware import ROOFLINE, gpu_names

    values = single(resolve(args), "bounds", "model", "mode", "gpus_r", "epsilon")
    if values["token_budget"] is not None:
        require_positive_int("--token-budget", values["token_budget"])
    names = gpu_names() if str(values["gpu"]).lower() == "all" else parse_gpus("--gpu", values["gpu"])
    rows = [_row(values, name) for name in names]
    if values["json"]:
        print_json(rows if len(names) > 1 else rows[0])
        return 0
    first = rows[0]
    print(f"model {first['model']} ({first['mode']} mode), workload {first['workload']}, "
          f"r = {first['r']}, epsilon = {first['epsilon']}")
    header = (f"{'GPU':<16}{'t*':>12}{'t_lcm':>7}{'T_bar^R ms':>12}{'T^max s':>10}"
              f"{'lambda* req/s':>15}{'certified':>11}{'binds':>10}{'n_min':>10}{'Eq.25 s':>10}  A1 A2 A3 A4"
              "  rates")
    print(header)
    print("-" * len(header))
    for row in rows:
        flags = "  ".join("y" if a["holds"] else "n" for a in row["assumptions"].values())
        print(f"{row['gpu']:<16}{row['t_star']:>12}{row['t_lcm']:>7}{row['T_bar_R_s'] * 1e3:>12.1f}"
              f"{row['T_max_s']:>10.1f}{row['lambda_star']:>15.3f}{row['certified']['bound']:>11.3f}"
              f"{row['certified']['binds']:>10}{row['n_min']:>10}"
              f"{row['cycle_bound_s']:>10.0f}   {flags}"
              f"  {'calibrated' if row['gpu_rates'] != ROOFLINE else ROOFLINE}")
    for row in rows:
        if row["gpu_rates"] != ROOFLINE:
            print(f"  {row['gpu']} rates: {row['gpu_rates']}")
        if not row["linear_law"].startswith("tile model"):
            print(f"  {row['gpu']} linear GeMMs: {row['linear_law']}")
    print(f"\nlambda* with the corrected T_bar^R (erratum prop1.drain_lower_bound; a valid upper bound): "
          f"{first['lambda_star_corrected']:.4f} req/s, "
          f"+{first['lambda_star_corrected'] / first['lambda_star'] - 1:.3%}  [{first['gpu']}]")
    print(f"T^max as Eq. 13's text describes its schedule (erratum eq13.tmax; prompt tokens in chunks of "
          f"one, Eq. 6): {first['T_max_corrected_s']:.4g} s, "
          f"+{first['T_max_corrected_s'] / first['T_max_s'] - 1:.3%}; with it Theorem 2's n "
          f"{first['n_min_corrected']} (printed T^max: {first['n_min']}), Eq. 25 "
          f"{first['cycle_bound_corrected_s']:.0f} s ({first['cycle_bound_s']:.0f} s)  [{first['gpu']}]")
    cert = first["certified"]
    print(f"certified capacity (theory.capacity: any scheduler, this cost law): {cert['bound']:.4f} req/s, "
          f"{cert['vs_lambda_star']:+.3%} vs lambda*; {cert['why']}  [{first['gpu']}]")
    print("T_bar^R terms (ms): " + ", ".join(
        f"{k} {v * 1e3:.1f}" for k, v in first["terms_s"].items()) + f"  [{first['gpu']}]")
    print(f"Assumptions on {first['gpu']}:")
    for name, a in first["assumptions"].items():
        print(f"  {name}: {'holds' if a['holds'] else 'FAILS'} -- {a['detail']}")
    return 0
