"""Checks of Section 5: what practical schedulers keep and lose of RAD's two design principles.

References
----------
Bari, Hegde, de Veciana (2025), Section 5, Algorithm 1, Algorithm 4 (Sarathi-Serve), Algorithm 5.
"""

from __future__ import annotations

import numpy as np

from paper_checks.common import PAPER_MODEL, gpus
from paper_checks.evidence import Points
from paper_checks.margins import EXACT, NOT_APPLICABLE, blind_spot, least_margin, ratio_margin
from paper_checks.pseudocode import instances, rad
from paper_checks.registry import Result, Verdict, register
from theory import cost
from theory.builder import CostSpec, cost_model


def sarathi_batches(t_lcm: int, budget: int, step: int, starts) -> list[tuple[int, int, int]]:
    """Batches a token budget forms (Algorithm 4): |D| decodes, then one chunk (i, budget - |D|) of a
    prompt already prefilled up to i - 1, as ``(n_decodes, i, c)``."""
    return [(nd, i0 + 1, budget - nd) for nd in range(0, budget, step) for i0 in starts]


def budget_efficiencies(cm, budget: int, batches: list[tuple[int, int, int]]) -> np.ndarray:
    """:func:`theory.cost.tiling_efficiency` of every batch ``(n_decodes, i, c)`` of ``budget``
    tokens (one prefill chunk ``(i, c)``, ``budget - c`` decodes), all at once: the same formula
    and the same floats (``T_Lin`` of the shared token count once, ``T_P_SA`` of every chunk in
    one call; tests/test_paper_checks.py compares them batch by batch)."""
    i = np.array([b[1] for b in batches], dtype=np.int64)
    c = np.array([b[2] for b in batches], dtype=np.int64)
    peak = 2.0 * cm.s * cm.mu[0] * cm.t_row[0] * cm.t_col[0] * cm.t_red[0]
    lin_flops = cm.model.linear_flops_per_token(cm.mode) * budget
    e = i + c - 1
    useful = lin_flops + 4.0 * cm.N * cm.d_pre * e * c
    actual = float(cost.T_Lin(cm, budget)) + cost.T_P_SA(cm, i, c)
    return np.minimum(1.0, useful / peak / actual)


@register("sec5.sarathi_tiling", level="sample",
          domain="every batch a token budget forms, on every GPU",
          evaluates=(Points("every GPU preset, budgets 512 (fast) or 256, 512, 1024, |D| in steps of 8 "
                            "(fast) or 1, 3 (fast) or 7 prefilled offsets"),),
          location="Section 5: 'Sarathi-serve maintains optimal resource allocation "
                                          "but sacrifices optimal GeMM tiling'",
          items=("Algorithm 4",),
          claim="Filling a token budget (a multiple of t*_col) with decodes and then prefill chunks does not "
                "guarantee optimal tiling, because the chunk size is not forced to a multiple of t*_lcm; "
                "chunks that are multiples of t*_lcm (aligned) are optimally tiled.",
          method="theory.cost.tiling_efficiency of every batch Algorithm 4 forms with tau_budget = 512 (also "
                 "256, 1024 in the full run): |D| decodes and one chunk of tau_budget - |D| tokens starting "
                 "after 0..2048 prefilled tokens, on every GPU preset (Mistral-7B, paper mode); evaluated "
                 "for all the batches of a budget at once (budget_efficiencies: the same formula, the same "
                 "floats).")
def sec5_sarathi_tiling(fast: bool) -> Result:
    budgets = (512,) if fast else (256, 512, 1024)
    starts = (0, 256, 1000) if fast else (0, 128, 256, 384, 512, 1000, 2048)
    step = 8 if fast else 1
    rows, ok_exists, ok_aligned, n_ties = {}, True, True, 0
    for g in gpus():
        cm = cost_model(CostSpec(g, PAPER_MODEL))
        t = cm.t_star
        for budget in budgets:
            n_bad = n_all = 0
            exceptions = []
            batches = sarathi_batches(t.t_lcm, budget, step, starts)
            effs = budget_efficiencies(cm, budget, batches).tolist()
            for (nd, i, c), eff in zip(batches, effs, strict=True):
                aligned = c % t.t_lcm == 0 and (i - 1) % t.t_lcm == 0
                n_all += 1
                n_bad += eff < 1 - 1e-9
                if aligned and eff < 1 - 1e-9:
                    ok_aligned = False
                if not aligned and eff >= 1 - 1e-9:
                    n_ties += 1
                    if len(exceptions) < 3:
                        exceptions.append({"decodes": nd, "chunk": (i, c), "efficiency": eff})
            ok_exists &= n_bad > 0
            rows[f"{g}/budget {budget}"] = {"batches": n_all, "not optimally tiled": n_bad,
                                            "optimally tiled without aligned t*_lcm chunks "
                                            "(ties)": exceptions}
    if not (ok_exists and ok_aligned):
        return Result(Verdict.FAIL, "a budget-formed batch contradicts the claim",
                      counterexample={"some GPU has no sub-optimal batch": not ok_exists,
                                      "an aligned t*_lcm chunk is "
                                      "sub-optimal": not ok_aligned}, evidence=rows)
    return Result(Verdict.PASS, "every GPU has budget-formed batches below optimal tiling; aligned t*_lcm "
                                f"chunks are optimally tiled ({n_ties} other batches reach it too, on tiles "
                                "tied with t*)",
                  coverage=f"{len(gpus())} GPUs x budgets {budgets}, |D| step {step}, prefilled offsets "
                           f"{starts}",
                  evidence=rows,
                  margin=EXACT)


@register("sec5.rad_tbt", level="sample",
          domain="every decode batch of RAD with stops",
          evaluates=(Points("every decode batch with stops in literal RAD runs of <= 3 (fast) or 4 "
                            "requests, lengths 1..3, t*_col 1..3, n 1..4"),),
          location="Section 5: 'in every batch of t*_col decode-iterations, one or more "
                                   "requests generate their stop token ... RAD has to complete "
                                   "prefill-phases of an equal number of new requests in between'",
          items=("Algorithm 1",),
          claim="After a decode batch in which k requests stop, RAD (if requests wait and the cycle has "
                "room) completes k prefills before the next decode batch.",
          method="Literal RAD on every small instance (<= 4 requests at time 0, lengths 1..3, t*_col 1..3, n "
                 "1..4): after each decode batch with k stops, count the prefill completions before the next "
                 "decode batch and compare with min(k, waiting requests, n - requests_in_cycle).")
def sec5_rad_tbt(fast: bool) -> Result:
    n_events = 0
    for t_col in (1, 2, 3):
        for n in range(1, 5):
            for reqs in instances(3 if fast else 4, (1, 2), (1, 2, 3), staggers=(0.0,)):
                run = rad(reqs, n=n, t_col=t_col, t_lcm=1)
                b = run.batches
                for k, ((_, end, its), st) in enumerate(zip(b, run.states, strict=True)):
                    if st["kind"] != "decode":
                        continue
                    stops = sum(1 for it in its if run.done.get(it[1]) == end)
                    if not stops or stops == len(its):
                        continue  # no stop, or D emptied: the cycle ended
                    nxt = next((j for j in range(k + 1, len(b)) if run.states[j]["kind"] == "decode"), len(b))
                    prefills = len({it[1] for _, _, its2 in b[k + 1:nxt] for it in its2})
                    waiting = sum(1 for r in reqs if all(it[1] != r.rid for _, _, x in b[:k + 1] for it in x))
                    expected = min(stops, waiting, n - st["ric"])
                    n_events += 1
                    if prefills != expected:
                        return Result(Verdict.FAIL, "RAD does not refill D after stops as described",
                                      counterexample={"t_col": t_col, "n": n,
                                                      "requests": [(r.L_P, r.L_D) for r in reqs],
                                                      "batch": k, "stops": stops, "prefills": prefills,
                                                      "expected": expected})
    return Result(Verdict.PASS, "after k stops RAD completes min(k, waiting, n - requests_in_cycle) prefills "
                                "before decoding again (so the other requests' TBT includes those prefills)",
                  coverage=f"{n_events} decode batches with stops in literal RAD runs",
                  margin=NOT_APPLICABLE)


@register("sec5.request_level_throughput", level="sample",
          domain="every workload whose total lengths are imbalanced",
          evaluates=(Points("lambda*, 20000 (fast) or 100000 requests, A100, Table 1 padded"),),
          location="Section 1.1.2 and Section 5 (request-level batching)",
          items=("Algorithm 3",),
          claim="Request-level batching loses throughput when total lengths are imbalanced.",
          method="simulated stability boundary of Algorithm 3 vs lambda*")
def sec5_request_level(fast: bool) -> Result:
    from paper_checks.simulated import UNSTABLE_BLIND, run, verdict_margin

    n_req = 20000 if fast else 100000
    v = run("request_level", 1.0, n_req, seed=5).verdict()
    # above its capacity the accumulating fraction is 1 - capacity / lambda
    capacity = (1 - v.growth, 1 - v.ci_high, 1 - v.ci_low)
    evidence = {"verdict at lambda*": v.as_dict(), "capacity / lambda* (estimate, 99% CI)": list(capacity)}
    if v.verdict != "unstable":
        return Result(Verdict.FAIL, "request-level batching keeps up with lambda*", counterexample=evidence)
    return Result(Verdict.PASS, f"request-level batching (b = t*_col) carries only {capacity[0]:.1%} of "
                                f"lambda* (99% CI {capacity[1]:.1%}-{capacity[2]:.1%})",
                  coverage=f"{n_req} requests at lambda*, A100, Mistral-7B, Table-1 padded",
                  evidence=evidence, margin=(m := verdict_margin(v.as_dict())),
                  blind_spot=blind_spot(m, UNSTABLE_BLIND))


@register("sec5.distserve_throughput", level="sample",
          domain="every static split and work mix",
          evaluates=(Points("r = 4, every split, two length mixes, lambda*, A100"),),
          location="Section 5: 'Distserve ... sacrifices optimal resource "
                                                "allocation'",
          items=("Algorithm 5",),
          claim="Static prefill/decode partitioning loses throughput when the prefill/decode work mix "
                "differs from the partition.",
          method="simulated stability boundary of Algorithm 5 for each static split vs lambda*")
def sec5_distserve(fast: bool) -> Result:
    from paper_checks.simulated import RAD_N, run

    n_req = 10000 if fast else 50000
    r = 4
    mixes = {"short prompts, long outputs": "uniform:64-256,200-600",
             "long prompts, short outputs": "uniform:2000-6000,10-60"}
    table, best = {}, {}
    for label, spec in mixes.items():
        rows = {}
        for r_p in range(1, r):
            v = run("distserve", 1.0, n_req, seed=6, r=r, workload=spec, prefill_nodes=r_p).verdict()
            # above capacity the accumulating fraction is 1 - capacity / lambda (here lambda = lambda*)
            rows[f"{r_p} prefill + {r - r_p} decode"] = [1 - v.growth, 1 - v.ci_high, 1 - v.ci_low]
        v = run("rad", 1.0, n_req, seed=6, r=r, workload=spec, n=RAD_N).verdict()
        rows["RAD on every GPU"] = [1 - v.growth, 1 - v.ci_high, 1 - v.ci_low]
        table[label] = rows
        splits = {k: x for k, x in rows.items() if k != "RAD on every GPU"}
        best[label] = max(splits, key=lambda k: splits[k][0])
    loses = all(table[m][best[m]][2] < 1 for m in mixes)
    differ = len(set(best.values())) > 1
    evidence = {"capacity / lambda* (estimate, 99% CI) at r = 4": table, "best static split": best}
    if not (loses and differ):
        return Result(Verdict.FAIL, "a static split keeps up with lambda* or one split suits both mixes",
                      counterexample=evidence)
    worst_best = min(table[m][best[m]][0] for m in mixes)
    # the best split's capacity interval up to lambda*, or another mix's best split up to this mix's best
    margin = least_margin([ratio_margin(table[m][best[m]][2], 1.0) for m in mixes]
                          + [ratio_margin(table[m][best[m]][0], table[m][best[o]][0])
                             for m in mixes for o in mixes if best[o] != best[m]])
    return Result(Verdict.PASS, f"the best static split depends on the mix ({', '.join(best.values())}) and "
                                f"still loses throughput (down to {worst_best:.0%} of lambda*), where RAD "
                                "keeps ~lambda* on both",
                  coverage=f"r = {r}, every split, two length mixes, {n_req} requests per point at lambda*, "
                           "A100, Mistral-7B, prompts padded; whole-prompt prefill nodes, decode nodes "
                           "batching all decodes, no KV transfer time", evidence=evidence,
                  margin=margin, blind_spot=blind_spot(margin, "how much throughput a split loses"))
