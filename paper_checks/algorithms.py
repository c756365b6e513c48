"""Checks of the pseudo-code: Algorithm 1 (RAD), Algorithm 2 (Appendix D), Algorithms 3-5 (Appendix E).

Each algorithm runs in the literal interpreter of :mod:`paper_checks.pseudocode`, first as printed
(looking for the smallest instance that breaks it: non-termination within a step limit, or a
violation of Definitions 1-2), then corrected, on every small instance, against Definitions 1-2
and the algorithm's own invariants (at most t*_col active decodes, cycle accounting, token budget).

References
----------
Bari, Hegde, de Veciana (2025), Algorithms 1-5, Definitions 1-2, Section 4.2, Appendices D-E.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from paper_checks.evidence import Points, Reading
from paper_checks.margins import NOT_APPLICABLE, blind_spot
from paper_checks.pseudocode import (
    NonTerminationError,
    Req,
    alg2,
    alg3,
    alg4,
    alg5,
    instances,
    rad,
    violations,
)
from paper_checks.registry import Result, Verdict, outcome, register

STEPS = 400  # step limit for the printed variants: every instance below needs < 100 steps corrected
# the lines each check runs as printed (keys of paper_checks.pseudocode); () runs the corrected algorithm
PRINTED = {"alg1.line13": ("line13",), "alg2.line7": ("line7",), "alg2.arrivals": ("no_arrivals",),
           "alg3.line5": ("line5",), "alg4.line12": ("line12",), "alg4.line11": ("line11",)}


def domain(fast: bool) -> dict:
    """The exhaustive domain: up to 3 (fast) or 4 requests, L^P in 1..3, L^D in 1..2, arrivals
    together or staggered; algorithm parameters t*_col 1..3, n 1..4, t*_lcm 1..3, b 1..3, budget 1..4."""
    return {"requests": 3 if fast else 4, "L_P": (1, 2, 3), "L_D": (1, 2), "staggers": (0.0, 1.5),
            "t_col": (1, 2, 3), "n": (1, 2, 3, 4), "t_lcm": (1, 2, 3), "b": (1, 2, 3), "budget": (1, 2, 3, 4)}


PASS_SMALLEST = "the algorithm as printed terminates and keeps Definitions 1-2 on every smallest instance"
SMALLEST_COVERAGE = (f"every list of <= 2 requests at time 0, L^P in 1..4, L^D in 1..2 (step limit {STEPS}); "
                     "the correction on the exhaustive domain of the invariants check")


def smallest_failure(runner: Callable, params: list[dict], printed: tuple[str, ...]) -> dict | None:
    """The first instance (fewest requests, shortest prompts first) on which ``runner`` with the
    ``printed`` lines does not terminate or breaks Definitions 1-2; None if there is none."""
    for reqs in instances(2, (1, 2, 3, 4), (1, 2), staggers=(0.0,)):
        for p in params:
            try:
                run = runner(reqs, printed=printed, max_steps=STEPS, **p)
            except NonTerminationError as exc:
                return {**p, "requests (L_P, L_D)": [(r.L_P, r.L_D) for r in reqs], "outcome": str(exc),
                        "first batches": [its for _, _, its in exc.run.batches[:4]]}
            bad = violations(run)
            if bad:
                return {**p, "requests (L_P, L_D)": [(r.L_P, r.L_D) for r in reqs], "outcome": bad[:3]}
    return None


def exhaustive(runner: Callable, params: list[dict], invariant: Callable,
               fast: bool) -> tuple[int, dict | None]:
    """Run the corrected ``runner`` on every instance of :func:`domain` for every parameter set;
    returns (runs, first failure). ``invariant(run, **p)`` returns a list of problems."""
    d = domain(fast)
    n = 0
    for reqs in instances(d["requests"], d["L_P"], d["L_D"], d["staggers"]):
        for p in params:
            n += 1
            try:
                run = runner(reqs, **p)
            except NonTerminationError as exc:
                return n, {**p, "requests": [r.__dict__ for r in reqs], "problem": str(exc)}
            bad = violations(run) + invariant(run, **p)
            if bad:
                return n, {**p, "requests": [r.__dict__ for r in reqs], "problem": bad[:3]}
    return n, None


@cache
def corrected_runs(algorithm: str, fast: bool) -> tuple[int, dict | None]:
    """:func:`exhaustive` for the corrected ``algorithm`` ("1".."4"), shared by its checks."""
    d = domain(fast)
    if algorithm == "1":
        return exhaustive(rad, rad_params(fast), rad_invariants, fast)
    if algorithm == "2":
        return exhaustive(alg2, rad_params(fast), alg2_invariants, fast)
    if algorithm == "3":
        return exhaustive(alg3, [{"b": b} for b in d["b"]], alg3_invariants, fast)
    return exhaustive(alg4, [{"budget": k} for k in d["budget"]], alg4_invariants, fast)


def invariants_result(algorithm: str, fast: bool, who: str, coverage: str,
                      summary: str = "all invariants hold on every run") -> Result:
    """The verdict of an ``alg<k>.invariants`` check: FAIL with the first breaking run, or PASS with
    ``coverage`` (``{runs}`` is filled in) over :func:`corrected_runs`."""
    runs, fail = corrected_runs(algorithm, fast)
    if fail:
        return Result(Verdict.FAIL, f"an invariant of {who} breaks", counterexample=fail)
    return Result(Verdict.PASS, summary, coverage=coverage.format(runs=runs), margin=NOT_APPLICABLE)


def rad_params(fast: bool) -> list[dict]:
    """Every (n, t_col, t_lcm) of the check domain, as parameters of Algorithms 1 and 2."""
    d = domain(fast)
    return [{"n": n, "t_col": c, "t_lcm": t} for n in d["n"] for c in d["t_col"] for t in d["t_lcm"]]


# --- Algorithm 1 ------------------------------------------------------------------------------


def rad_invariants(run, *, n: int, t_col: int, t_lcm: int) -> list[str]:
    """At most t*_col active decodes; requests_in_cycle <= n, reset when a cycle ends; chunks of
    exactly t*_lcm when L^P is a multiple of it (Assumption 3); at most n started per cycle."""
    out = []
    for (_, _, its), st in zip(run.batches, run.states, strict=True):
        if st["D"] > t_col or st["ric"] > n:
            out.append(f"|D| = {st['D']}, requests_in_cycle = {st['ric']} (t*_col {t_col}, n {n})")
        if st["kind"] == "decode" and len(its) > t_col:
            out.append(f"decode batch of {len(its)} > t*_col")
        for it in its:
            r = run.requests[it[1]]
            if it[0] == "PI" and r.L_P % t_lcm == 0 and it[3] != t_lcm:
                out.append(f"chunk {it} of a prompt of {r.L_P} tokens is not t*_lcm = {t_lcm}")
    for cyc in run.cycles:
        if len(cyc["started"]) > n:
            out.append(f"cycle started {len(cyc['started'])} > n requests")
    starts = {c["start"] for c in run.cycles}
    for (b, _, _), st in zip(run.batches, run.states, strict=True):
        if b in starts and st["kind"] == "prefill" and st["ric"] != 0:
            out.append(f"requests_in_cycle = {st['ric']} at the start of a cycle")
    return out


@register("alg1.line13", level="reading",
          domain="every request and every t*_lcm",
          evaluates=(Reading("Algorithm 1, line 13: c = min{t*_lcm, L^P(R) - i}"),
                     Points("the literal interpreter on the smallest instances; the corrected line on "
                            "the domain of alg1.invariants"),),
          location="Algorithm 1, lines 11-15",
          items=("Algorithm 1",),
          claim="With i starting at 1 and c = min{t*_lcm, L^P(R) - i}, the loop of lines 12-16 prefills the "
                "prompt in chunks of t*_lcm and stops.",
          method=f"Run Algorithm 1 as printed in the literal interpreter on the smallest instances (step "
                 f"limit {STEPS}); then the corrected c = min{{t*_lcm, L^P(R) - i + 1}} on the same and on "
                 "every instance of alg1.invariants.")
def alg1_line13(fast: bool) -> Result:
    bad = smallest_failure(rad, [{"n": 1, "t_col": 1, "t_lcm": 2}], PRINTED["alg1.line13"])
    a3_case = None
    try:
        rad([Req(0, 2, 1)], n=1, t_col=1, t_lcm=2, printed=("line13",), max_steps=STEPS)
    except NonTerminationError as exc:
        a3_case = {"L_P = t*_lcm": 2, "batches": [its for _, _, its in exc.run.batches[:4]]}
    runs, fail = corrected_runs("1", fast)
    return outcome(bad is None, corrected_holds=fail is None,
                   summary=PASS_SMALLEST if bad is None else
                   "the last prompt token is never prefilled: once i = L^P, c = 0 and the loop never ends "
                   "(under Assumption 3 the first chunk is already t*_lcm - 1 tokens)",
                   coverage=SMALLEST_COVERAGE, counterexample=bad,
                   correction="c = min{t*_lcm, L^P(R) - i + 1}",
                   correction_check=f"the corrected loop terminates and satisfies Definitions 1-2 and RAD's "
                                   f"invariants on all {runs} runs of alg1.invariants",
                  evidence={"under Assumption 3 (L^P = t*_lcm = 2)": a3_case})


@register("alg1.invariants", level="sample",
          domain="every arrival sequence, request lengths and parameters (n, t*_col, t*_lcm)",
          evaluates=(Points("every instance of <= 3 (fast) or 4 requests, L^P in 1..3, L^D in 1..2, 2 "
                            "arrival gaps, t*_col 1..3, n 1..4, t*_lcm 1..3"),),
          location="Algorithm 1 and Section 4.2 (with line 13 corrected)",
          items=("Algorithm 1", "Definition 1", "Definition 2"),
          claim="RAD prefills every prompt token exactly once in contiguous chunks covering 1..L^P, never "
                "has more than t*_col active decode requests, counts at most n requests per cycle and resets "
                "the count when a cycle ends, uses chunks of exactly t*_lcm under Assumption 3, and finishes "
                "every request.",
          method="Exhaustive literal execution (corrected line 13) over the domain of "
                 "paper_checks.algorithms.domain, checking Definitions 1-2 and the invariants after every "
                 "batch.")
def alg1_invariants(fast: bool) -> Result:
    d = domain(fast)
    return invariants_result("1", fast, "RAD",
                             f"{{runs}} runs: <= {d['requests']} requests, L^P in {d['L_P']}, L^D in "
                             f"{d['L_D']}, arrival gaps {d['staggers']}, t*_col in {d['t_col']}, n in "
                             f"{d['n']}, t*_lcm in {d['t_lcm']}")


# --- Algorithm 2 ------------------------------------------------------------------------------


def alg2_invariants(run, *, n: int, t_col: int, t_lcm: int) -> list[str]:
    """At most t*_col active decodes; at most n requests per cycle; chunks of t*_lcm under
    Assumption 3; all prefills of a cycle before its decodes."""
    out = []
    for (_, _, its), st in zip(run.batches, run.states, strict=True):
        if st["kind"] == "decode" and len(its) > t_col:
            out.append(f"{len(its)} active decodes > t*_col = {t_col}")
        for it in its:
            r = run.requests[it[1]]
            if it[0] == "PI" and r.L_P % t_lcm == 0 and it[3] != t_lcm:
                out.append(f"chunk {it} is not t*_lcm")
    for cyc in run.cycles:
        if len(cyc["started"]) > n:
            out.append(f"cycle with {len(cyc['started'])} > n requests")
        kinds = [its[0][0] for b, _, its in run.batches if cyc["start"] <= b < cyc["end"]]
        if "PI" in kinds and "DI" in kinds and kinds.index("DI") < len(kinds) - kinds[::-1].index("PI") - 1:
            out.append("a prefill after a decode within one cycle")
    return out


@register("alg2.line7", level="reading",
          domain="every request and every t*_lcm",
          evaluates=(Reading("Algorithm 2, line 7: c = min{LCM(t*_row, t*_col, t*_red), L_P(R) - i}"),
                     Points("the literal interpreter on the smallest instances and on the domain of "
                            "alg1.invariants"),),
          location="Algorithm 2, line 7",
          items=("Algorithm 2",),
          claim="c = min{LCM(t*_row, t*_col, t*_red), L_P(R) - i} with i starting at 1 prefills the prompt.",
          method="As alg1.line13, for Algorithm 2 (with its arrivals erratum corrected, see alg2.arrivals).")
def alg2_line7(fast: bool) -> Result:
    bad = smallest_failure(alg2, [{"n": 1, "t_col": 1, "t_lcm": 2}], PRINTED["alg2.line7"])
    runs, fail = corrected_runs("2", fast)
    return outcome(bad is None, corrected_holds=fail is None,
                   summary=PASS_SMALLEST if bad is None else "the same off-by-one as Algorithm 1, line 13",
                   coverage=SMALLEST_COVERAGE, counterexample=bad,
                   correction="c = min{t*_lcm, L_P(R) - i + 1}",
                  correction_check=f"alg2.invariants: {runs} corrected runs terminate and satisfy all "
                                   "invariants")


@register("alg2.arrivals", level="reading",
          domain="every arrival sequence",
          evaluates=(Reading("Algorithm 2: P initialised empty, no line adding arrivals"),
                     Points("the literal interpreter on the smallest instances and on the domain of "
                            "alg1.invariants"),),
          location="Algorithm 2 (no 'Update P based on new arrivals' line)",
          items=("Algorithm 2",),
          claim="Algorithm 2 serves the requests that arrive.",
          method="Run Algorithm 2 as printed (P starts empty and no line adds arrivals) in the literal "
                 "interpreter with the off-by-one of line 7 corrected; then with 'Update P based on new "
                 "arrivals' before each test of line 4.")
def alg2_arrivals(fast: bool) -> Result:
    bad = smallest_failure(alg2, [{"n": 1, "t_col": 1, "t_lcm": 2}], PRINTED["alg2.arrivals"])
    runs, fail = corrected_runs("2", fast)
    return outcome(bad is None, corrected_holds=fail is None,
                   summary=PASS_SMALLEST if bad is None else
                   "P is initialised empty and never updated, so the scheduler never schedules a batch",
                   coverage=SMALLEST_COVERAGE, counterexample=bad,
                  correction="add 'Update P based on new arrivals' (as Algorithm 1, line 4) before each test "
                             "of line 4",
                  correction_check=f"alg2.invariants: {runs} corrected runs serve every request")


@register("alg2.invariants", level="sample",
          domain="every arrival sequence, request lengths and parameters (n, t*_col, t*_lcm)",
          evaluates=(Points("the instances of alg1.invariants"),),
          location="Algorithm 2, Appendix D (corrected)",
          items=("Algorithm 2", "Definition 1", "Definition 2"),
          claim="Algorithm 2 prefills up to n requests per cycle in chunks of t*_lcm, then decodes them with "
                "at most t*_col active, refilling D_active, and finishes every request.",
          method="Exhaustive literal execution (both errata corrected), Definitions 1-2 and the invariants.")
def alg2_invariants_check(fast: bool) -> Result:
    return invariants_result("2", fast, "Algorithm 2", "{runs} runs over the domain of alg1.invariants")


@register("alg2.theorem2", level="sample",
          domain="every lambda <= lambda* (1 - eps)",
          evaluates=(Points("0.9 and 1.1 lambda*, n = 2000, 20000 (fast) or 100000 requests, A100, Table "
                            "1 padded"),),
          location="Appendix D: 'Theorem 2 applies when the RAD scheduler is replaced by "
                                    "the scheduler in Algorithm 2'",
          items=("Algorithm 2",),
          claim="Algorithm 2 is stable for lambda T_bar^R <= r(1 - eps) with Theorem 2's n (proof omitted).",
          method="simulate Algorithm 2 below and above lambda*")
def alg2_theorem2(fast: bool) -> Result:
    from paper_checks.simulated import RAD_N, STABLE_BLIND, run, verdict_margin

    n_req = 20000 if fast else 100000
    below = run("alg2", 0.9, n_req, seed=4, n=RAD_N).verdict()
    above = run("alg2", 1.1, n_req, seed=4, n=RAD_N).verdict()
    evidence = {"0.9 lambda*": below.as_dict(), "1.1 lambda*": above.as_dict()}
    if below.verdict != "stable":
        return Result(Verdict.FAIL, f"Algorithm 2 is {below.verdict} at 0.9 lambda*",
                      counterexample={"load": 0.9, "n": RAD_N, **evidence})
    margin = verdict_margin(evidence["0.9 lambda*"])
    return Result(Verdict.PASS, "Algorithm 2 is stable at 0.9 lambda* (and unstable at 1.1), as Theorem 2 "
                                "would give",
                  coverage=f"n = {RAD_N}, {n_req} requests, A100, Mistral-7B, Table-1 padded; verdict by "
                           "regression of the work in system (99% CI)", evidence=evidence,
                  margin=margin, blind_spot=blind_spot(margin, STABLE_BLIND))


# --- Algorithm 3 ------------------------------------------------------------------------------


def alg3_invariants(run, *, b: int) -> list[str]:
    """At most b prefills per batch, each the whole prompt; no prefill while requests decode."""
    out = []
    for (_, _, its), st in zip(run.batches, run.states, strict=True):
        if st["kind"] == "prefill":
            if len(its) > b:
                out.append(f"{len(its)} > b prefills in one batch")
            if st["D"]:
                out.append("a prefill batch while requests are decoding")
    return out


@register("alg3.line5", level="reading",
          domain="every arrival sequence",
          evaluates=(Reading("Algorithm 3, lines 5 and 12: 'if mode = Prefill' and 'else if mode = "
                             "Prefill'"),
                     Points("the literal interpreter on the smallest instances and on the domain of "
                            "alg3.invariants"),),
          location="Algorithm 3, lines 2, 5 and 12",
          items=("Algorithm 3",),
          claim="Starting with mode = Decode, lines 5 ('if mode = Prefill') and 12 ('else if mode = "
                "Prefill') alternate between decode and prefill mode.",
          method="Run Algorithm 3 as printed in the literal interpreter (step limit); then with line 5 "
                 "testing mode = Decode, exhaustively (alg3.invariants).")
def alg3_line5(fast: bool) -> Result:
    bad = smallest_failure(alg3, [{"b": 1}], PRINTED["alg3.line5"])
    runs, fail = corrected_runs("3", fast)
    return outcome(bad is None, corrected_holds=fail is None,
                   summary=PASS_SMALLEST if bad is None else
                   "both branches test mode = Prefill while mode starts as Decode: nothing is ever scheduled",
                   coverage=SMALLEST_COVERAGE, counterexample=bad, correction="line 5: if mode = Decode",
                  correction_check=f"alg3.invariants: {runs} corrected runs serve every request")


@register("alg3.invariants", level="sample",
          domain="every arrival sequence, request lengths and b",
          evaluates=(Points("the instances of alg1.invariants, b in 1..3"),),
          location="Algorithm 3, Appendix E.1 (corrected)",
          items=("Algorithm 3", "Definition 1", "Definition 2"),
          claim="Request-level batching prefills up to b whole prompts at a time and admits no new request "
                "until the current ones finished; every request finishes.",
          method="Exhaustive literal execution (line 5 corrected), Definitions 1-2 and the invariants.")
def alg3_invariants_check(fast: bool) -> Result:
    return invariants_result("3", fast, "Algorithm 3", "{runs} runs, b in 1..3")


# --- Algorithm 4 ------------------------------------------------------------------------------


def alg4_invariants(run, *, budget: int) -> list[str]:
    """Every decode-phase request in every batch; token count <= budget; |D| <= budget."""
    out = []
    for (_, _, its), st in zip(run.batches, run.states, strict=True):
        if st["tau"] > budget or st["D"] > budget:
            out.append(f"tau = {st['tau']}, |D| = {st['D']} > budget {budget}")
        if sum(1 for it in its if it[0] == "DI") != st["D"]:
            out.append("a decode-phase request left out of a batch")
    return out


@register("alg4.termination", level="reading",
          domain="every arrival sequence and token budget",
          evaluates=(Reading("Algorithm 4, lines 11-12: 'while tau < tau_budget', c = min{tau_budget - "
                             "tau, L_j^P - i}"),
                     Points("the literal interpreter on the smallest instances and on the domain of "
                            "alg4.invariants"),),
          location="Algorithm 4, lines 11-12",
          items=("Algorithm 4",),
          claim="The inner loop 'while tau < tau_budget' with c = min{tau_budget - tau, L_j^P - i} fills the "
                "budget with prefill chunks and terminates.",
          method="Run Algorithm 4 in the literal interpreter with each printed line in turn (the other "
                 "corrected) on the smallest instances; then both corrected, exhaustively (alg4.invariants).")
def alg4_termination(fast: bool) -> Result:
    p = [{"budget": 2}]
    bad12 = smallest_failure(alg4, p, PRINTED["alg4.line12"])
    bad11 = smallest_failure(alg4, p, PRINTED["alg4.line11"])
    runs, fail = corrected_runs("4", fast)
    holds = bad11 is None and bad12 is None
    return outcome(holds, corrected_holds=fail is None,
                   summary=PASS_SMALLEST if holds else
                   "line 12's L^P - i never prefills the last token (c = 0 forever); and even corrected, "
                   "line "
                   "11 keeps adding empty chunks once R's prefill is complete before the budget fills",
                   coverage=SMALLEST_COVERAGE,
                   counterexample={"line 12 as printed": bad12, "line 11 as printed": bad11},
                  correction="c = min{tau_budget - tau, L^P(R) - i + 1}, and 'while tau < tau_budget and the "
                             "prefill of R is incomplete'",
                  correction_check=f"alg4.invariants: {runs} corrected runs terminate and satisfy the "
                                   "invariants")


@register("alg4.invariants", level="sample",
          domain="every arrival sequence, request lengths and token budget",
          evaluates=(Points("the instances of alg1.invariants, budget in 1..4"),),
          location="Algorithm 4, Appendix E.2 (corrected): 'the number of these is "
                                      "guaranteed to be below the budget'",
          items=("Algorithm 4", "Definition 1", "Definition 2"),
          claim="Sarathi-Serve puts every decode-phase request in every batch, fills the rest of the token "
                "budget with chunked prefills, never exceeds the budget (|D| <= tau_budget), and finishes "
                "every request.",
          method="Exhaustive literal execution (both errata corrected), Definitions 1-2 and the invariants.")
def alg4_invariants_check(fast: bool) -> Result:
    return invariants_result("4", fast, "Algorithm 4", "{runs} runs, budget in 1..4",
                             "all invariants hold: a request enters D only by a prefill that used >= 1 "
                             "token of the batch's budget, so |D| never exceeds it")


# --- Algorithm 5 ------------------------------------------------------------------------------


@register("alg5.invariants", level="sample",
          domain="every arrival sequence and request lengths",
          evaluates=(Points("the instances of alg1.invariants"),),
          location="Algorithm 5, Appendix E.3",
          items=("Algorithm 5", "Definition 1", "Definition 2"),
          claim="DistServe prefills each prompt whole on the prefill node, hands it to the decode node, "
                "which batches the decodes of all its requests; every request finishes.",
          method="Exhaustive literal execution (one prefill node, one decode node), Definitions 1-2 and: "
                 "every decode batch holds every request the decode node has received and not finished.")
def alg5_invariants(fast: bool) -> Result:
    d = domain(fast)
    n = 0
    for reqs in instances(d["requests"], d["L_P"], d["L_D"], d["staggers"]):
        n += 1
        run = alg5(reqs)
        bad = violations(run)
        for b, _, its in run.batches:
            if its[0][0] == "DI":
                live = {rid for rid, r in run.requests.items()
                        if any(x[0] == "PI" and x[1] == rid for _, f, y in run.batches if f <= b for x in y)
                        and run.done.get(rid, float("inf")) > b}
                if {it[1] for it in its} != live:
                    bad.append(f"decode batch at {b} holds {sorted(it[1] for it in its)}, live "
                               f"{sorted(live)}")
        if bad:
            return Result(Verdict.FAIL, "an invariant of Algorithm 5 breaks",
                          counterexample={"requests": [r.__dict__ for r in reqs], "problem": bad[:3]})
    return Result(Verdict.PASS, "all invariants hold on every run",
                  coverage=f"{n} runs over the request domain of alg1.invariants",
                  margin=NOT_APPLICABLE)
