"""SLAI's batch construction (Section 6, steps 1-4) checked on the simulator's batch log.

The check replays a seeded run of :mod:`stability.schedulers.slai` batch by batch. It keeps its
own state from the log alone (prefill tokens done, decodes done, the end of the batch that gave
each request its latest token, the running mean of the batch times) and recomputes every decode's
last schedulable time with Eq. 8,

    C_j = e_j + TBT_j - delta * t_bar_batch,

``t_bar_batch`` being the mean duration of the batches up to the one that ended at ``e_j``
(agrimUT/SLAI @ 5098a7a, ``sarathi/core/scheduler/slai_scheduler.py``, sets C when the token is
emitted). At each batch, starting at ``t``, it predicts the batch the four steps build:

1. a decode of an active request is critical when ``t >= C_j``;
2. the critical decodes, by increasing (C_j, arrival), at most ``beta`` and the token budget;
3. the started prefill first (non-preemptive), then new prefills from the arrived requests in
   FCFS, SPF or paying-first SPF order (Appendix F.2), each with ``min(prompt, budget left)``,
   while budget remains and fewer than ``alpha`` requests are active;
4. the other decodes by increasing (C_j, arrival) while budget remains and fewer than ``beta``
   decodes are in the batch;

and compares it with the logged batch, naming the first step that differs. Runs are without the
KV-memory model (no preemption), so steps 1-4 alone decide every batch. A batch in which some
``t - C_j`` is within :data:`TIE` of 0 is not compared (the float rounding of the running mean
could decide it either way); the evidence counts them. Step 1 ("for each active decode-phase
request, compute the last schedulable time") can also be read as recomputing every C_j at each
batch with the mean so far; the evidence counts the batches that reading would change.

References
----------
Bari, Hegde, de Veciana (2025), Section 6 (Eq. 8, batch construction) and Appendix F.2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paper_checks.evidence import Points
from paper_checks.margins import NOT_APPLICABLE
from paper_checks.registry import Result, outcome, register
from stability.sim.gpu import GpuRun, RunOptions, run_gpu
from stability.sim.registry import get_scheduler
from theory.builder import CostSpec, cost_model

TIE = 1e-9  # seconds: |t - C_j| below this leaves a batch uncompared


@dataclass(frozen=True)
class Scenario:
    """One seeded SLAI run: its options and its requests' seed."""

    order: str
    budget: int
    alpha: int
    beta: int
    delta: float
    tbt: tuple[float, ...]
    seed: int
    m: int = 40

    def options(self) -> dict:
        """Keyword arguments of :func:`stability.schedulers.slai.make_params`."""
        return {"token_budget": self.budget, "max_num_seqs": self.alpha,
                "limit_total_decodes": self.beta, "order": self.order, "dynamic": False,
                "delta": self.delta, "tbt_slo": self.tbt, "memory": False}


SCENARIOS = (Scenario("spf", 64, 6, 4, 2.0, (0.02, 0.1), 5),
             Scenario("fcfs", 48, 8, 2, 1.0, (0.001, 0.06), 7),
             Scenario("spf_priority", 64, 5, 3, 3.0, (0.002, 0.12), 11),
             Scenario("fcfs", 256, 16, 4, 5.0, (0.02, 0.1), 3))


def simulate(sc: Scenario) -> GpuRun:
    """The seeded SLAI run of ``sc`` on the A100 preset, with its batch log."""
    cm = cost_model(CostSpec("a100"))
    rng = np.random.default_rng(sc.seed)
    L_P, L_D = rng.integers(1, 300, size=sc.m), rng.integers(1, 30, size=sc.m)
    arrival = np.sort(rng.uniform(0.0, 0.3, size=sc.m))
    cls = rng.integers(0, len(sc.tbt), size=sc.m)
    sch = get_scheduler("slai")
    return run_gpu(cm, sch, sch.make_params(cm, **sc.options()), arrival, L_P, L_D, cls,
                   RunOptions(n_class=len(sc.tbt), detail=True, log=True))


def _waiting_key(order: str, cls: np.ndarray, L_P: np.ndarray):
    if order == "fcfs":
        return lambda j: (j,)
    if order == "spf":
        return lambda j: (int(L_P[j]), j)
    return lambda j: (int(cls[j]), int(L_P[j]), j)


def replay(run: GpuRun, sc: Scenario, t_bar_at: str = "token") -> dict:
    """Replay ``run``'s batch log through steps 1-4 of Section 6 (module docstring).

    ``t_bar_at``: ``"token"`` takes Eq. 8's ``t_bar_batch`` when the token is emitted (the
    authors' code, which the simulator follows); ``"decision"`` recomputes every C_j at each
    batch with the mean of the batches so far (step 1 read literally).

    Returns
    -------
    dict
        ``"violations"``: the batches that differ from the prediction (step, batch, time, the
        predicted and the logged decodes and chunks), and counts of what was exercised.
    """
    L_P, L_D, cls, arrival = run.L_P, run.L_D, run.cls, run.arrival
    b, it = run.batches, run.items
    m, nb = arrival.size, b["start"].size
    key = _waiting_key(sc.order, cls, L_P)
    done_p, n_dec = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    C, e = np.full(m, np.nan), np.full(m, np.nan)
    tbt = np.asarray(sc.tbt)[cls]
    busy = 0.0
    rows = np.argsort(it["batch"], kind="stable")
    cuts = np.searchsorted(it["batch"][rows], np.arange(nb + 1))
    n = {"batches compared": 0, "batches with a tie": 0, "critical decodes": 0,
         "deferred non-critical decodes": 0, "critical decodes beyond beta or the budget": 0,
         "non-critical decodes filling the budget": 0, "started prefills continued": 0,
         "admissions stopped by alpha": 0}
    bad = []
    for k in range(nb):
        t = float(b["start"][k])
        sel = rows[cuts[k]:cuts[k + 1]]
        req, c = it["request"][sel], it["c"][sel]
        logged_dec = sorted(int(j) for j in req[c == 0])
        logged_chunks = {int(j): int(x) for j, x in zip(req[c > 0], c[c > 0], strict=True)}
        if t_bar_at == "decision" and k > 0:
            C = e + tbt - sc.delta * busy / k                                 # Eq. 8
        active = [j for j in range(m) if done_p[j] == L_P[j] and n_dec[j] < L_D[j]]
        active.sort(key=lambda j: (C[j], j))
        if any(abs(t - C[j]) <= TIE for j in active):
            n["batches with a tie"] += 1
            compare = False
        else:
            compare = True
        crit = [j for j in active if t >= C[j]]
        n1 = min(len(crit), sc.beta, sc.budget)                               # steps 1-2
        chosen, tokens = crit[:n1], n1
        chunks = {}
        started = [j for j in range(m) if 0 < done_p[j] < L_P[j]]
        for j in started:                                                     # step 3
            if tokens >= sc.budget:
                break
            chunks[j] = int(min(L_P[j] - done_p[j], sc.budget - tokens))
            tokens += chunks[j]
        held = len(active) + len(started)
        waiting = sorted((j for j in range(m) if arrival[j] <= t and done_p[j] == 0), key=key)
        for j in waiting:
            if tokens >= sc.budget:
                break
            if held >= sc.alpha:
                n["admissions stopped by alpha"] += compare
                break
            chunks[j] = int(min(L_P[j], sc.budget - tokens))
            tokens += chunks[j]
            held += 1
        rest = [j for j in active if j not in chosen]
        n4 = max(0, min(len(rest), sc.beta - n1, sc.budget - tokens))         # step 4
        chosen = chosen + rest[:n4]
        if compare:
            n["batches compared"] += 1
            n["critical decodes"] += n1
            n["critical decodes beyond beta or the budget"] += len(crit) - n1
            n["non-critical decodes filling the budget"] += len([j for j in rest[:n4] if t < C[j]])
            n["deferred non-critical decodes"] += len([j for j in rest[n4:] if t < C[j]])
            n["started prefills continued"] += len([j for j in started if j in chunks])
            step = ("2: critical decodes" if not set(crit[:n1]) <= set(logged_dec) else
                    "3: prefills" if chunks != logged_chunks else
                    "4: non-critical decodes" if sorted(chosen) != logged_dec else None)
            if step:
                bad.append({"step": step, "batch": k, "t (s)": t,
                            "critical": sorted(crit), "predicted decodes": sorted(chosen),
                            "logged decodes": logged_dec,
                            "predicted chunks": {str(j): x for j, x in sorted(chunks.items())},
                            "logged chunks": {str(j): x for j, x in sorted(logged_chunks.items())}})
        busy += float(b["duration"][k])
        end, t_bar = t + float(b["duration"][k]), busy / (k + 1)
        emitted = list(logged_dec)
        for j, x in logged_chunks.items():
            done_p[j] += x
            if done_p[j] == L_P[j]:
                emitted.append(j)
        for j in logged_dec:
            n_dec[j] += 1
        for j in emitted:
            e[j] = end
            C[j] = end + tbt[j] - sc.delta * t_bar                            # Eq. 8
    return {"violations": bad, "counts": n}


def slai_runs(fast: bool) -> list[tuple[Scenario, GpuRun]]:
    """The seeded runs the check replays (the same in fast and full mode: they are small)."""
    return [(sc, simulate(sc)) for sc in SCENARIOS]


def slai_steps_core(runs: list[tuple[Scenario, GpuRun]]) -> Result:
    """Replay every run (:func:`replay`): PASS when every compared batch is the predicted one."""
    found = {f"{sc.order} (seed {sc.seed})": replay(run, sc) for sc, run in runs}
    bad = {name: r["violations"][:2] for name, r in found.items() if r["violations"]}
    totals = {k: sum(r["counts"][k] for r in found.values()) for k in next(iter(found.values()))["counts"]}
    holds = not bad
    literal = sum(len(replay(run, sc, "decision")["violations"]) for sc, run in runs)
    where = "; ".join(f"{name} batch {v[0]['batch']}, step {v[0]['step']}" for name, v in bad.items())
    return outcome(holds,
                   summary="every compared batch is the one steps 1-4 of Section 6 build, with C_j "
                           "recomputed from the log by Eq. 8" if holds else
                           f"a batch differs from Section 6's steps: {where}",
                   coverage=f"{totals['batches compared']} batches of {len(runs)} seeded runs (FCFS, SPF, "
                            "paying-first SPF; 40 requests, two TBT classes, no KV-memory model), "
                            f"{totals['batches with a tie']} with a tie not compared",
                   counterexample={"first differing batches": bad},
                   evidence={"counts": totals,
                             "batches that differ when every C_j is recomputed at each batch with "
                             "the mean so far (step 1 read literally)": literal,
                             "per run": {name: r["counts"] for name, r in found.items()}},
                   margin=NOT_APPLICABLE)


@register("sec6.slai_batch_steps", level="sample",
          domain="every batch SLAI builds",
          evaluates=(Points("seeded runs of stability.schedulers.slai, three orders, fixed delta, two "
                            "TBT classes, every batch replayed"),),
          location="Section 6, 'Batch construction', steps (1)-(4), with Eq. 8",
          items=("Eq. 8",),
          claim="SLAI builds each batch by marking a decode critical when t >= C_j (Eq. 8), adding the "
                "critical decodes by increasing C_j, then the started prefill (non-preemptive) and new "
                "prefills in FCFS or SPF order within the token budget and the cap alpha, then the "
                "non-critical decodes by increasing C_j while budget remains and fewer than beta "
                "decodes are in the batch; a decode is deferred only when it is non-critical or the "
                "caps are reached.",
          method="Replay seeded runs of stability.schedulers.slai (three orders, fixed delta, two TBT "
                 "classes) batch by batch, recompute every C_j from the logged batch ends and durations "
                 "by Eq. 8, predict each batch by steps 1-4 and compare it with the logged decodes and "
                 "chunks.")
def sec6_slai_batch_steps(fast: bool) -> Result:
    return slai_steps_core(slai_runs(fast))
