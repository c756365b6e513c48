"""The simulator's default (event-skipping) mode against its logged mode, for every scheduler the
checks run.

Most checks of Algorithms 1-5 and of the other schedulers replay the simulator's batch log, which
only its detail mode keeps: there every batch is built and priced one at a time. A user's run takes
the default mode, which skips from event to event: a run of decode-only batches (every scheduler),
a run of batches of one prompt's chunks beside the decodes (Sarathi-Serve, Algorithm 4, vLLM v1)
and a DistServe decode node's long decode set (Algorithm 5) are each priced in closed form, with
nothing logged. A price that is wrong there alone escapes every replay of the log. This check runs
each scheduler on the same seeded requests in both modes: every request must finish at the same
time and get its first token at the same time (to round-off), and the counters of batches, tokens,
completions, preemptions and batches not optimally tiled must be equal (only the count of events
may differ). The
logged mode is what the replays of :mod:`paper_checks.algorithms` and :mod:`paper_checks.compiled_rad`
hold to the literal pseudocode (Eq. 7 per batch), so the default mode is held to it through this
equality.

References
----------
Bari, Hegde, de Veciana (2025), Algorithms 1-5, Eq. 7.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from paper_checks.evidence import Points
from paper_checks.margins import EXACT
from paper_checks.registry import Result, Verdict, register
from stability.sim.simulate import Scenario, SimResult, simulate

# every scheduler a check runs (section 4-5 claims, the algorithms, Section 7 and the other papers)
SCHEDULERS = (
    "rad",
    "alg2",
    "request_level",
    "sarathi",
    "sarathi_paper",
    "slai",
    "distserve",
    "vllm",
    "vllm_v1",
    "wait",
    "nested_wait",
)
# the Table-1 workload above capacity: queues build, so every skipped event kind occurs
BASE = Scenario(gpu="a100", workload="table1", load=1.5, n_requests=300, seed=3)
# DistServe's decode node holds hundreds of decodes once the prefill node has handed off every
# request (short prompts, long outputs): its long-set path (300 > LONG_SET = 256 decodes)
LONG_SET_CASE = replace(BASE, scheduler="distserve", r=2, workload="uniform:16-64,400-800", load=3.0)
REL = 1e-9  # the two modes add the same batch times in another grouping: round-off only
# n_not_opt: batches not optimally tiled (the default mode's whole prefills count their chunks'
# tiling from stability.sim.kernels' prefill tables)
COUNTERS = ("n_batch", "n_tokens", "n_dec_tok", "n_pre_tok", "n_done", "n_preempt", "n_rej", "n_not_opt")


def scenarios() -> list[Scenario]:
    """Each scheduler on :data:`BASE` (DistServe on a prefill and a decode GPU), and
    :data:`LONG_SET_CASE`."""
    return [replace(BASE, scheduler=s, r=2 if s == "distserve" else 1) for s in SCHEDULERS] + [LONG_SET_CASE]


def both_modes(sc: Scenario) -> tuple[SimResult, SimResult]:
    """``sc`` simulated in the logged (detail) mode and in the default mode."""
    return simulate(replace(sc, detail=True)), simulate(replace(sc, detail=False))


def compare(sc: Scenario, logged: SimResult, skipping: SimResult) -> dict | None:
    """The first difference between the two runs of ``sc`` (None if none): a request's finish or
    first-token time beyond round-off, or a counter."""
    for key in ("t_finish", "t_first"):
        a, b = logged.requests[key], skipping.requests[key]
        off = np.flatnonzero(~np.isclose(a, b, rtol=REL, atol=0, equal_nan=True))
        if off.size:
            j = int(off[0])
            return {
                "scheduler": sc.scheduler,
                "workload": sc.workload,
                "load": sc.load,
                "r": sc.r,
                "request": j,
                "what": key,
                "logged mode (s)": float(a[j]),
                "default mode (s)": float(b[j]),
                "requests that differ": int(off.size),
            }
    c1, c2 = logged.counters(), skipping.counters()
    for k in COUNTERS:
        if c1.get(k, 0) != c2.get(k, 0):
            return {
                "scheduler": sc.scheduler,
                "workload": sc.workload,
                "load": sc.load,
                "r": sc.r,
                "what": k,
                "logged mode": c1.get(k, 0),
                "default mode": c2.get(k, 0),
            }
    return None


def judge(runs: list[tuple]) -> Result:
    """PASS if the two modes agree on every scenario of ``runs`` (``(scenario, logged, default)``),
    else FAIL with the first difference."""
    skipped = {}
    for sc, logged, skipping in runs:
        diff = compare(sc, logged, skipping)
        if diff is not None:
            return Result(
                Verdict.FAIL,
                f"{sc.scheduler}'s default mode differs from its logged mode: {diff['what']}"
                + (f" of request {diff['request']}" if "request" in diff else ""),
                counterexample=diff,
            )
        c1, c2 = logged.counters(), skipping.counters()
        skipped[f"{sc.scheduler} ({sc.workload})"] = f"{c2['n_event']} events for {c1['n_batch']} batches"
    return Result(
        Verdict.PASS,
        f"all {len(runs)} runs: every request finishes and gets its first token at the "
        "same time in the default mode as in the logged mode, with the same counts of batches, tokens, "
        "completions, preemptions and batches not optimally tiled",
        coverage=f"{', '.join(SCHEDULERS)} on the A100 (paper mode), Table 1 at 1.5 lambda*, 300 "
        "requests, seed 3; DistServe also with a decode set above 256 (uniform 16-64, "
        "400-800 at 3 lambda*)",
        evidence={"default mode": skipped},
        margin=EXACT,
    )


@register(
    "alg15.default_mode",
    level="sample",
    domain="every scheduler, GPU, workload and arrival sequence",
    evaluates=(
        Points(
            "11 schedulers on the A100, Table 1 at 1.5 lambda*, 300 seeded requests; DistServe "
            "also with a long decode set"
        ),
    ),
    location="Algorithms 1-5 as the simulator runs them by default (event skipping)",
    items=("Algorithm 1", "Algorithm 2", "Algorithm 3", "Algorithm 4", "Algorithm 5"),
    claim="The simulator's default mode, which prices runs of decode-only batches, runs of chunk "
    "batches and a long decode set in closed form, executes each algorithm as its logged mode "
    "(one batch at a time, Eq. 7 per batch) does.",
    method="Simulate each scheduler the checks run (RAD, Algorithms 2-3, Sarathi-Serve and its "
    "Algorithm 4, SLAI, DistServe, vLLM, vLLM v1, WAIT, Nested WAIT) on the same seeded "
    "requests in the logged and the default mode; FAIL if a request's finish or first-token "
    "time differs beyond round-off (1e-9) or a count of batches, tokens, completions, "
    "preemptions or batches not optimally tiled differs.",
)
def alg15_default_mode(fast: bool) -> Result:
    return judge([(sc, *both_modes(sc)) for sc in scenarios()])
