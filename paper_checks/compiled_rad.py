"""The compiled RAD of the simulator replayed through the literal interpreter of Algorithm 1.

The simulator's RAD (:mod:`stability.schedulers.rad`, a compiled loop) logs every batch it runs.
On seeded random scenarios, the same requests go through :func:`paper_checks.pseudocode.rad`, the
line-by-line interpreter of Algorithm 1 (chunks of t*_lcm with line 13 corrected, |D| <= t*_col,
line 6's rule, a cycle ends when D empties), with each batch timed by Eq. 7
(:func:`theory.cost.T_batch`); the two must run the same batches, at the same times, with the
same iterations, and end the same cycles. The simulator's default mode, the one every user's run
takes, skips from event to event (a run of decode batches is priced in closed form, nothing is
logged): there each request must finish, and each cycle end, when the interpreter's do.

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 1, Definitions 1-2, Eq. 7.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from paper_checks.evidence import Points
from paper_checks.margins import EXACT
from paper_checks.pseudocode import Req, rad
from paper_checks.registry import Result, outcome, register
from paper_checks.simulated import run_gpu, small_tile_cost_model
from stability.sim.gpu import RunOptions
from stability.sim.registry import get_scheduler
from theory.cost import Batch, T_batch


def engine_batches(run) -> list[tuple[float, float, tuple]]:
    """The simulator's batch log as ``(start, end, iterations)``, iterations as the interpreter
    writes them: ``("PI", request, i, c)`` and ``("DI", request, token index)``, sorted."""
    b, it = run.batches, run.items
    out = []
    for k in range(b["start"].size):
        mine = np.flatnonzero(it["batch"] == k)
        its = tuple(
            sorted(
                ("PI", int(it["request"][j]), int(it["i"][j]), int(it["c"][j]))
                if it["c"][j] > 0
                else ("DI", int(it["request"][j]), int(it["i"][j]))
                for j in mine
            )
        )
        out.append((float(b["start"][k]), float(b["start"][k] + b["duration"][k]), its))
    return out


def scenario(seed: int, t_lcm: int) -> dict:
    """A seeded random scenario: 40 requests, prompts of 1..3 t*_lcm tokens (Assumption 3 not
    required), outputs of 1..12 tokens, Poisson arrivals at a rate that keeps a queue, n in 1..12."""
    rng = np.random.default_rng(seed)
    m = 40
    return {
        "seed": seed,
        "n": int(rng.integers(1, 13)),
        "arrival": np.cumsum(rng.exponential(0.004, m)),
        "L_P": rng.integers(1, 3 * t_lcm + 1, m),
        "L_D": rng.integers(1, 13, m),
    }


def replay_core(seeds: list[int], params_of: Callable | None = None) -> Result:
    """Each scenario of ``seeds`` through the compiled RAD (parameters ``params_of(cm, n)``, RAD's
    defaults t*_col and t*_lcm unless a test feeds others) and through the literal Algorithm 1."""
    cm = small_tile_cost_model()
    t = cm.t_star
    sch = get_scheduler("rad")
    params_of = params_of or (lambda cm, n: sch.make_params(cm, n=n))

    def batch_time(its) -> float:
        return T_batch(
            cm,
            Batch.of(
                prefill=[(x[2], x[3]) for x in its if x[0] == "PI"],
                decode=[x[2] for x in its if x[0] == "DI"],
            ),
        )

    n_batches, full, started_n, cex = 0, 0, 0, {}
    for seed in seeds:
        sc = scenario(seed, t.t_lcm)
        run = run_gpu(
            cm, sch, params_of(cm, sc["n"]), sc["arrival"], sc["L_P"], sc["L_D"],
            options=RunOptions(detail=True, log=True),
        )
        skipping = run_gpu(cm, sch, params_of(cm, sc["n"]), sc["arrival"], sc["L_P"], sc["L_D"])
        got = engine_batches(run)
        reqs = [
            Req(j, int(sc["L_P"][j]), int(sc["L_D"][j]), float(sc["arrival"][j]))
            for j in range(sc["arrival"].size)
        ]
        lit = rad(reqs, n=sc["n"], t_col=t.t_col, t_lcm=t.t_lcm, batch_time=batch_time, max_steps=10**6)
        want = [(b, f, tuple(sorted(its))) for b, f, its in lit.batches]
        ends_got, ends_want = run.cycles["end"].tolist(), [c["end"] for c in lit.cycles]
        n_batches += len(want)
        full += sum(1 for _, _, its in want if len(its) == t.t_col and its[0][0] == "DI")
        started_n += sum(1 for c in lit.cycles if len(c["started"]) == sc["n"])
        k = next(
            (
                k
                for k, (x, y) in enumerate(zip(got, want, strict=False))
                if x[2] != y[2]
                or not math.isclose(x[0], y[0], rel_tol=1e-9)
                or not math.isclose(x[1], y[1], rel_tol=1e-9)
            ),
            None if len(got) == len(want) else min(len(got), len(want)),
        )
        cycles_ok = len(ends_got) == len(ends_want) and np.allclose(ends_got, ends_want, rtol=1e-9, atol=0)
        done_want = np.array([lit.done[j] for j in range(len(reqs))])
        late = np.flatnonzero(~np.isclose(skipping.t_finish, done_want, rtol=1e-9, atol=0))
        ends_skip = skipping.cycles["end"].tolist()
        skip_ok = not late.size and len(ends_skip) == len(ends_want) and np.allclose(
            ends_skip, ends_want, rtol=1e-9, atol=0)
        if not skip_ok and not cex:
            j = int(late[0]) if late.size else None
            cex = {
                "seed": seed,
                "n": sc["n"],
                "mode": "default (event-skipping, no log)",
                "request": j,
                "finish (compiled, Algorithm 1)": [float(skipping.t_finish[j]), float(done_want[j])]
                if j is not None else None,
                "cycles (compiled, Algorithm 1)": [len(ends_skip), len(ends_want)],
            }
        if (k is not None or not cycles_ok) and not cex:
            cex = {
                "seed": seed,
                "n": sc["n"],
                "t*_col": t.t_col,
                "t*_lcm": t.t_lcm,
                "first differing batch": k,
                "compiled": got[k] if k is not None and k < len(got) else None,
                "Algorithm 1": want[k] if k is not None and k < len(want) else None,
                "cycles (compiled, Algorithm 1)": [len(ends_got), len(ends_want)],
            }
    return outcome(
        not cex,
        summary=(
            f"the compiled RAD runs exactly Algorithm 1's {n_batches} batches, iterations and cycle ends; "
            "in its default event-skipping mode every request and cycle ends when Algorithm 1's do"
            if not cex
            else "the compiled RAD leaves Algorithm 1"
        ),
        coverage=f"{len(seeds)} seeded random scenarios (40 requests each, Poisson arrivals, prompts "
        f"1..{3 * t.t_lcm} tokens, n 1..12) on an A100 with one tile {t} (t*_col = "
        f"{t.t_col}, t*_lcm = {t.t_lcm}), {n_batches} batches",
        counterexample=cex,
        evidence={
            "decode batches of t*_col (line 6: |D| = t*_col)": full,
            "cycles that started n requests (line 6: requests_in_cycle = n)": started_n,
        },
        margin=EXACT,  # the batch times and finish times equal Algorithm 1's under Eq. 7
    )


@register(
    "alg1.compiled_replay",
    level="sample",
    domain="every arrival sequence, request lengths and n",
    evaluates=(Points("4 (fast) or 20 seeded random scenarios of 40 requests on an A100 with one 16x4x16 "
                      "tile"),),
    location="Algorithm 1 (RAD), as the simulator runs it",
    items=("Algorithm 1",),
    claim="The simulator's compiled RAD is Algorithm 1: chunks of t*_lcm (the last the rest of the "
    "prompt), at most t*_col decodes, line 6's rule, a cycle ends when D empties; in its logged detail "
    "mode and in its default event-skipping mode alike.",
    method="Seeded random scenarios through the compiled RAD with its batch log and through the literal "
    "interpreter of Algorithm 1 timed by Eq. 7: the same batches, iterations, times and cycle ends; and "
    "through the compiled RAD's default mode (decode runs priced in closed form, no log): the same "
    "finish time of every request and the same cycle ends.",
)
def alg1_compiled_replay(fast: bool) -> Result:
    return replay_core(list(range(4 if fast else 20)))
