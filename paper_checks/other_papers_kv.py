"""Other papers: Nie, Si and Zhou's KV-memory stability threshold against the simulator.

``other.nsz_kv_threshold``. Nie, Si, Zhou (ICML 2026) model one GPU worker whose KV cache holds
at most ``M`` tokens; a request with prompt ``s`` and output ``o`` is prefilled in chunks of ``ŝ``
tokens, its KV growing chunk by chunk, then decoded one token per iteration, its KV growing by one
token per iteration up to ``s + o``, and released when it finishes. With ``g(s, o)`` the request's
lifetime cumulative KV demand (KV tokens held, summed over the iterations it is resident) and
``b̄`` a representative batch (iteration) time, their threshold is::

    mu = M / (b̄ E[g(s, o)]):

overloaded when ``lam > mu``, stable under a work-conserving batching policy when
``lam < mu (1 - delta)``, ``delta`` a memory-slack term tied to the largest single request.

What is transcribed and what is read. ``mu``, "overloaded above mu" and "stable below
mu (1 - delta)" are their statement as the issue and a public review of the paper give it. The
explicit ``g`` and ``delta`` were not available to us in the paper's own words; we use the model
as described (prompt KV growing per chunk, one token per decode iteration, released at the end)::

    g(s, o) = sum_{j=1}^{ceil(s / ŝ)} min(j ŝ, s) + sum_{k=1}^{o} (s + k),

and ``delta = (s + o)_max / M`` (the largest request's share of the cache). Both are our reading.

Mapping to llmq. ``M`` is the simulator's ``kv_blocks x block_size`` (blocks of one token here, so
no rounding); ``ŝ`` the chunk size (Sarathi-Serve's token budget); a decode iteration
``DI(R, s + k)`` holds ``blocks(s + k)`` (:mod:`stability.sim.memory`), the ``s + k`` of ``g``;
``b̄`` the time of a batch under :mod:`stability.memory_bound`'s staircase law, where every batch of
at most ``b0`` tokens costs ``c + a``, so that ``b̄`` is exact, not representative; ``g`` times
``b̄`` is then the per-request KV-token-seconds that :mod:`theory.capacity`'s KV bound ``lam_M =
M / E[K]`` lower-bounds with ``s + k - 1`` tokens per decode (``mu`` is below it by the prompt
term and one token per decode).

The check: Sarathi-Serve with one-token blocks, no watermark and no sequence cap (work-conserving:
it admits while a block is free and preempts by recompute to keep decoding) is run above capacity
(:func:`stability.attain.saturated_runs`) on two workloads (:data:`WORKLOADS`); its saturated
throughput must not exceed ``mu`` (beyond the tolerance) and must reach ``mu (1 - delta)`` (within
it). Tolerance: max(:data:`RTOL`, the 95% interval's half-width). It cannot see an error of ``mu``
below that tolerance (a few percent in ``--quick``).

References
----------
Nie, Si, Zhou (2026), "A Queueing-Theoretic Framework for Stability Analysis of LLM Inference with
KV Cache Memory Constraints", ICML 2026, arXiv:2605.04595 (the threshold ``mu = M / (b̄ E[g(s,
o)])``). Kwon et al. (2023), PagedAttention; Agrawal et al. (2024), Sarathi-Serve.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace

import numpy as np

from paper_checks.evidence import Points
from paper_checks.margins import blind_spot, least_margin, ratio_margin
from paper_checks.registry import Result, Verdict, register
from theory.workload import Workload

RTOL = 0.01  # least tolerance of the two sides: max(1%, the interval's half-width)
SAT_LOAD = 1.5  # saturation runs offer this multiple of mu
# memory_bound's decode-heavy instance, and one with spread lengths and longer prompts (one chunk each)
WORKLOADS = ("deterministic:16,1024", "uniform:256-1024,128-512")


def g_kv(s, o, chunk: int) -> np.ndarray:
    """Nie, Si, Zhou's ``g(s, o)``: KV tokens held, summed over the request's iterations (module
    docstring): prompt chunks of ``chunk`` tokens (``min(j chunk, s)`` during chunk ``j``), then
    ``s + k`` during decode ``k = 1..o``."""
    s, o = np.asarray(s, dtype=np.int64), np.asarray(o, dtype=np.int64)
    n = -(-s // chunk)  # chunks; all full but the last
    prompt = chunk * n * (n - 1) // 2 + s  # sum_{j < n} j chunk + s
    return prompt + o * s + o * (o + 1) // 2


def nsz_threshold(m_tokens: int, b_bar: float, w: Workload, chunk: int) -> tuple[float, float]:
    """``(mu, delta)``: ``mu = M / (b̄ E[g(s, o)])`` in req/s and ``delta = (s + o)_max / M``."""
    eg = w.expect(g_kv(w.L_P, w.L_D, chunk))
    return m_tokens / (b_bar * eg), float((w.L_P + w.L_D).max()) / m_tokens


def judge_threshold(mu: float, delta: float, measured: tuple[float, float, float], case: dict) -> Result:
    """PASS if the saturated throughput ``(mean, low, high)`` of the work-conserving policy neither
    exceeds ``mu`` nor falls short of ``mu (1 - delta)`` by more than max(RTOL, half-width) x mu;
    else FAIL."""
    mean, low, high = measured
    tol = max(RTOL * mu, (high - low) / 2)
    case = {**case, "mu req/s": mu, "delta": delta, "saturated req/s (mean, low, high)": measured,
            "tolerance req/s": tol}
    bad = []
    if mean > mu + tol:
        bad.append(f"sustains {mean:.6g} req/s > mu = {mu:.6g} (+ {tol:.3g}): not overloaded above mu")
    if mean < mu * (1 - delta) - tol:
        bad.append(f"sustains only {mean:.6g} req/s < mu (1 - delta) = {mu * (1 - delta):.6g} "
                   f"(- {tol:.3g}): unstable below mu (1 - delta)")
    if bad:
        return Result(Verdict.FAIL, "; ".join(bad), counterexample=case)
    half = (high - low) / 2

    def crossing(slope: float, sign: int) -> float:
        # the factor f on mu with f mu slope + sign max(RTOL f mu, half) = mean (increasing in f)
        f = mean / (mu * (slope + sign * RTOL))
        return f if RTOL * f * mu >= half else (mean - sign * half) / (mu * slope)

    # mu scaled down until the mean exceeds mu + tol, or up until it falls below mu (1 - delta) - tol
    margin = least_margin([ratio_margin(crossing(1.0, 1), 1.0), ratio_margin(crossing(1 - delta, -1), 1.0)])
    return Result(Verdict.PASS, f"mu = M / (b̄ E[g]) = {mu:.6g} req/s; work-conserving Sarathi-Serve "
                                f"saturates at {mean:.6g} [{low:.6g}, {high:.6g}] = {mean / mu:.4f} mu, "
                                f"within [mu (1 - delta), mu] (delta = {delta:.4f}, tolerance {tol:.3g})",
                  coverage=f"one memory-bound instance ({case['workload']}, M = {case['M tokens']} tokens, "
                           f"staircase law), {case['replicates']} seeded replicates of "
                           f"{case['requests']} requests", evidence=case, margin=margin,
                  blind_spot=blind_spot(margin, "errors of mu inside the interval [mu (1 - delta), mu] "
                                                "the claim allows"))


def nsz_runs(fast: bool, kv_tokens: int | None = None, workload: str = WORKLOADS[0]) -> dict:
    """``mu``, ``delta`` and the saturated throughput of work-conserving Sarathi-Serve on
    :mod:`stability.memory_bound`'s law with ``workload`` (``kv_tokens``: the cache given to the
    simulator, default its ``KV_TOKENS``). Returns ``mu``, ``delta``, ``b_bar``, ``measured`` and
    ``case``."""
    from stability import memory_bound as mb
    from stability.attain import saturated_runs
    from stability.sim.simulate import Scenario, cost_model_of, workload_of
    from theory.capacity import capacity_bound, law_from_cost_model

    m = mb.KV_TOKENS if kv_tokens is None else kv_tokens
    replicates, n = (3, 4000) if fast else (4, 12000)
    with tempfile.TemporaryDirectory() as tmp:
        path = mb.law_file(tmp)
        base = Scenario(gpu=mb.LAW_KEY, gpu_file=path, model=mb.MODEL_KEY, model_file=path,
                        workload=workload, rate=1.0, load=None, n_requests=n, seed=0)
        cm = cost_model_of(base)
        w = workload_of(base, cm)
        law = law_from_cost_model(cm)
        # b̄: every batch of 1..BUDGET tokens costs the same under this law (checked at both ends)
        b_bar = law.batch_time(decode=[int(w.L_P.max()) + 1])
        b_full = law.batch_time(prefill=[(1, mb.BUDGET)])
        if not math.isclose(b_bar, b_full, rel_tol=1e-12):
            raise AssertionError(f"batch time not constant on 1..{mb.BUDGET} tokens: {b_bar} vs {b_full}")
        mu, delta = nsz_threshold(m, b_bar, w, mb.BUDGET)
        options = (("block_size", 1), ("chunk_size", mb.BUDGET), ("kv_blocks", m),
                   ("max_num_seqs", mb.BUDGET), ("memory", True), ("watermark", 0.0))
        sc = replace(base, scheduler="sarathi", options=options, rate=SAT_LOAD * mu)
        sat = saturated_runs(sc, replicates)
        lam_kv = capacity_bound(cm, w, b_max=mb.BUDGET, kv_tokens=m).lam_kv
    case = {"workload": workload, "M tokens": m, "block size": 1, "chunk s_hat": mb.BUDGET,
            "b_bar s": b_bar, "E[g] token-iterations": w.expect(g_kv(w.L_P, w.L_D, mb.BUDGET)),
            "law": "staircase c + a ceil(tau / b0), b0 = 4096, attention off (stability.memory_bound)",
            "policy": "sarathi, 1-token blocks, no watermark, max_num_seqs = budget (work-conserving)",
            "llmq certified KV bound lam_M req/s": lam_kv, "replicates": replicates, "requests": n,
            "saturated": sat["saturated"]}
    return {"mu": mu, "delta": delta, "b_bar": b_bar, "measured": tuple(sat["count"]), "case": case}


@register("other.nsz_kv_threshold", level="sample",
          domain="every KV capacity M, batch time, length distribution p(s, o) and work-conserving "
                 "batching policy",
          evaluates=(Points("two memory-bound instances: staircase law with constant batch time, "
                            "M = 65536 tokens, deterministic s = 16, o = 1024 and uniform s in 256..1024, "
                            "o in 128..512; 3 seeded replicates each (4 without --quick)"),),
          section="other",
          location="Other papers: Nie, Si, Zhou (ICML 2026, arXiv:2605.04595), the KV-memory stability "
                   "threshold",
          items=(),
          claim="With KV capacity M tokens, batch time b̄ and per-request cumulative KV demand g(s, o), "
                "the system is overloaded for lam > mu = M / (b̄ E[g(s, o)]) and stable under "
                "work-conserving batching for lam < mu (1 - delta).",
          method="mu from M, b̄ and E[g] (g transcribed from their model; delta = largest request / M) "
                 "against the saturated throughput of work-conserving Sarathi-Serve (1-token KV blocks, "
                 "no watermark, recompute preemption) on stability.memory_bound's law with two workloads: "
                 "3 seeded runs at 1.5 mu, fixed-window estimate, 95% CI; it must lie in "
                 "[mu (1 - delta), mu] within max(1%, half-width).")
def other_nsz_kv_threshold(fast: bool) -> Result:
    results = []
    for workload in WORKLOADS:
        r = nsz_runs(fast, workload=workload)
        results.append(judge_threshold(r["mu"], r["delta"], r["measured"], r["case"]))
    failed = [x for x in results if x.verdict is not Verdict.PASS]
    if failed:
        return failed[0]
    return Result(Verdict.PASS, "; ".join(x.summary for x in results),
                  coverage="; ".join(x.coverage for x in results),
                  evidence={w: x.evidence for w, x in zip(WORKLOADS, results, strict=True)},
                  margin=(m := least_margin(x.margin for x in results)),
                  blind_spot=blind_spot(m, results[0].blind_spot))
