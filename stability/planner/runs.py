"""One candidate's runs in the planner's search: a scenario replicated over seeds, each run measured
against the SLO metrics (:func:`measure`), the replicates pooled with Student-t intervals
(:func:`summarize_replicates`). :class:`PlanRun` is the runner's task of a pure fleet
(:mod:`stability.runner`); a mixed fleet's is :class:`stability.planner.search_mixed.MixedRun`.

A run starts from an empty system, so its first requests see short queues; the SLO metrics leave
out the warm-up the stability verdict leaves out (the first 10 % of the arrival window,
:data:`stability.sim.metrics.WARMUP`): TTFT over the requests arriving after it, TBT over the
tokens emitted after it. Replicate k of a task seeded s has the seed :func:`replicate_seed`
``(s, k)``, whichever task runs it, so a candidate's replicates depend neither on the number of
workers nor on the order of the runs.

References
----------
Bari, Hegde, de Veciana (2025), Section 7 (TTFT and TBT SLOs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from stability.runner import derive_seed
from stability.sim.simulate import Scenario
from theory.stats import t_interval

CONFIDENCE = 0.95


def replicate_seed(seed: int, k: int) -> int:
    """The seed of replicate ``k`` of a task seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([int(seed), int(k)]).generate_state(1)[0])


VERDICT_ORDER = ("stable", "inconclusive", "unstable")  # the worst member decides a fleet's verdict


def measure(*results) -> dict:
    """SLO metrics of one run, or of the independent runs of a mixed fleet's members taken as one
    system (detail mode), after the run's warm-up (the scenario's ``warmup``, ending at
    ``SimResult.tbt_from``): TTFT P50/P99 over the requests arriving at or after its end, TBT P99
    (from the TBT histograms) over the tokens emitted at or after it, keyed ``ttft_p50`` etc., and
    per request class, keyed ``ttft_p50@<class>``, when the scenario has classes; the stability
    verdict (the worst member's), requests, completions and rejections over the whole run."""
    from stability.sim.metrics import histogram_quantile, summarize_latency

    rqs = [res.requests for res in results]
    out = {"verdict": max((res.verdict().verdict for res in results), key=VERDICT_ORDER.index),
           "completed": int(sum(np.isfinite(rq["t_finish"]).sum() for rq in rqs)),
           "rejected": int(sum(np.sum(rq["reject"] > 0) for rq in rqs)),
           "requests": int(sum(rq["arrival"].size for rq in rqs))}
    hist = sum(run.tbt_hist for res in results for run in res.runs)  # (class, bin) counts of TBT gaps
    after = [res.requests["arrival"] >= res.tbt_from for res in results]  # arrived after the warm-up
    ttft = np.concatenate([(rq["t_first"] - rq["arrival"])[a] for rq, a in zip(rqs, after, strict=True)])
    cls = np.concatenate([rq["cls"][a] for rq, a in zip(rqs, after, strict=True)])
    groups = [("", np.ones(ttft.size, dtype=bool), hist.sum(axis=0))]
    if results[0].scenario.classes:
        groups += [(f"@{c.name}", cls == k, hist[k]) for k, c in enumerate(results[0].classes)]
    for suffix, mine, h in groups:
        lat = summarize_latency(ttft[mine])
        out[f"ttft_p50{suffix}"] = lat["p50"]
        out[f"ttft_p99{suffix}"] = lat["p99"]
        out[f"tbt_p99{suffix}"] = histogram_quantile(h, 0.99)
    return out


@dataclass(frozen=True)
class PlanRun:
    """The runner's task of one candidate: replicates ``first .. first + seeds - 1`` of
    ``scenario``, replicate i seeded :func:`replicate_seed` ``(seed, i)``; identity ``{"kind":
    "plan", "scenario": Scenario.to_dict(), "seeds": k, "seed": s}`` (and ``"first": j`` when
    j > 0)."""

    scenario: Scenario
    seeds: int
    seed: int = 0
    first: int = 0

    @classmethod
    def seeded(cls, scenario: Scenario, seeds: int, base_seed: int) -> PlanRun:
        """The first ``seeds`` replicates, seeded from the task's identity and ``base_seed``
        (:func:`stability.runner.derive_seed`)."""
        run = cls(scenario, int(seeds))
        return replace(run, seed=derive_seed(run.identity(), base_seed))

    def identity(self) -> dict:
        """The scenario, the number of replicates, the seed and the first replicate (when > 0)."""
        out = {"kind": "plan", "scenario": self.scenario.to_dict(), "seeds": self.seeds, "seed": self.seed}
        return {**out, "first": self.first} if self.first else out

    def replicates(self) -> range:
        """The replicate indices the task runs."""
        return range(self.first, self.first + self.seeds)

    def lengthened(self, factor: int) -> PlanRun | None:
        """The task with runs ``factor`` times longer, from its first replicates, under the same
        seed; None for a trace, whose replay is the whole trace already."""
        if self.scenario.trace:
            return None
        longer = replace(self.scenario, n_requests=factor * int(self.scenario.n_requests))
        return replace(self, scenario=longer, first=0)

    def run(self) -> dict:
        """Each replicate's metrics (:func:`measure`) and, per metric, ``[mean, low, high]``
        (Student-t, 95 %; :func:`summarize_replicates`), with the scenario's r and rate."""
        from stability.sim.simulate import simulate

        reps = [measure(simulate(replace(self.scenario, seed=replicate_seed(self.seed, k))))
                for k in self.replicates()]
        return {**summarize_replicates(reps), "r": self.scenario.r, "rate": self.scenario.rate}


def summarize_replicates(reps: list[dict]) -> dict:
    """Replicates' metrics, per metric ``[mean, max(low, 0), high]`` (Student-t, 95 %; the metrics
    are non-negative latencies), unstable seeds and rejections, in strict-JSON form."""
    keys = [k for k in reps[0] if k.startswith(("ttft_", "tbt_"))]
    ci = {}
    for k in keys:
        mean, lo, hi = (finite(x) for x in t_interval([math.nan if r[k] is None else r[k] for r in reps],
                                                       CONFIDENCE))
        ci[k] = [mean, None if lo is None else max(lo, 0.0), hi]
    return {"replicates": [{k: finite(v) if isinstance(v, float) else v for k, v in r.items()}
                           for r in reps],
            "metrics": ci, "unstable": sum(r["verdict"] == "unstable" for r in reps),
            "rejected": sum(r["rejected"] for r in reps)}


def finite(x):
    """A float for strict JSON: NaN and infinities become None."""
    return float(x) if x is not None and math.isfinite(float(x)) else None


__all__ = ["CONFIDENCE", "VERDICT_ORDER", "PlanRun", "finite", "measure", "replicate_seed",
           "summarize_replicates"]
