"""The KV-memory bound against the memory-enabled simulator, where memory binds.

The bound (:mod:`theory.capacity`): with ``M`` KV tokens per GPU, a request holds at least
``L_P + k - 1`` tokens during the batch of its k-th decode, which lasts at least ``F_min``
(the time of a one-token batch) plus its decode attention, so ``lam <= r M / E[K]`` with
``K = sum_k (L_P + k - 1) (F_min + A_D(L_P + k))``. It is tight when (a) every batch lasts
``F_min`` and there is no attention, (b) the cache is full all the time and (c) a request holds
no KV outside its decodes. The scenario of :func:`memory_scenarios` makes (a)-(c) nearly true with
a cost law stated only in TOML: Li, Dai and Peng's staircase ``c + a ceil(tau / b0)`` with a
wide step (every batch of at most ``b0`` tokens costs ``c + a``) and attention off; a
deterministic workload with short prompts and long outputs; Sarathi-Serve with one-token blocks,
no watermark, a budget of ``b0`` tokens and no sequence cap, so admission packs the cache and
preemption (by recompute) keeps it packed. What is left: a request holds its prompt during its
prefill batch and one token more than the bound counts per decode (a fraction ``(L_D + L_P) /
(L_D (L_P + L_D / 2))`` of ``K``, small for long outputs), and recomputed work after preemptions.

The same scenario with the systems' own defaults (blocks of 16 tokens, 1% watermark, 128 or 256
sequences; vLLM v0 prefill-first, SLAI) must stay below the bound: the never-exceeded half. Every
case batches at most ``b0`` tokens (vLLM's ``max_num_batched_tokens`` is set to it; Sarathi-Serve
and SLAI budget 512 by default), and the bound is taken with that token budget, whose one-token
batch ``c + a`` is the least batch time the law allows.

References
----------
Li, Dai, Peng (2025), arXiv:2504.07347 (the staircase law); Kwon et al. (2023), PagedAttention;
Agrawal et al. (2024), Sarathi-Serve; Little's law applied to KV-token-seconds (the bound's proof
in :mod:`theory.capacity`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from theory.law_files import StaircaseLawFile

LAW_KEY, MODEL_KEY = "staircase_wide", "mistral-7b-noattn"
LAW = StaircaseLawFile(LAW_KEY, MODEL_KEY, c=0.004, a=0.001, b0=4096, overhead_s=0.0,
                       note="Li, Dai, Peng (2025)'s staircase law c + a ceil(tau / b0) with a wide step, "
                            "attention off:\na custom cost law stated only in TOML "
                            "(stability/memory_bound.py).")
LAW_TOML = LAW.toml()
KV_TOKENS = 65536  # the cache, in tokens (one-token blocks)
BUDGET = 4096  # = b0: every batch costs c + a
WORKLOAD = "deterministic:16,1024"
MET_RTOL = 0.01  # the attaining case may fall this far below the bound (or its CI's half-width)


@dataclass(frozen=True)
class MemoryCase:
    """One scheduler on the memory-bound scenario: name, options, and whether it should attain."""

    label: str
    scheduler: str
    options: tuple
    attains: bool


CASES = (
    MemoryCase("sarathi, 1-token blocks, no watermark", "sarathi",
               (("block_size", 1), ("chunk_size", BUDGET), ("kv_blocks", KV_TOKENS), ("max_num_seqs", BUDGET),
                ("memory", True), ("watermark", 0.0)), True),
    MemoryCase("sarathi, defaults", "sarathi", (("kv_blocks", KV_TOKENS // 16), ("memory", True)), False),
    MemoryCase("vllm, defaults", "vllm", (("kv_blocks", KV_TOKENS // 16), ("max_num_batched_tokens", BUDGET),
                                          ("memory", True)), False),
    MemoryCase("slai, defaults", "slai", (("kv_blocks", KV_TOKENS // 16), ("memory", True)), False),
)


def law_file(directory: str | Path) -> str:
    """Write :data:`LAW_TOML` (GPU and model in one file) into ``directory``; returns its path."""
    return LAW.write(directory)


def memory_check(directory: str | Path, replicates: int = 4, n_requests: int = 6000, seed: int = 0,
                 confidence: float = 0.95, kv_tokens: int = KV_TOKENS, cases: tuple = CASES) -> dict:
    """Saturated throughput of every :data:`CASES` scheduler against the certified bound.

    Parameters
    ----------
    directory : path
        Where the law's TOML is written.
    replicates, n_requests, seed, confidence
        Saturation runs (:func:`stability.attain.saturated_runs`) at 1.5 x the bound.
    kv_tokens : int
        ``M`` given to the bound (a wrong ``M`` is how a test shows the check failing).
    cases : tuple of MemoryCase

    Returns
    -------
    dict
        ``bound``, ``binds``, ``lam_compute``, ``lam_kv``; ``cases``: label -> (mean, low, high)
        in req/s and ``saturated``; ``met`` (the attaining case's mean is within
        ``max(MET_RTOL, its half-width)`` of the bound, the tolerance of the compute table),
        ``never_exceeded`` (no case's interval lies wholly above it).
    """
    from stability.attain import SAT_LOAD, saturated_runs
    from stability.sim.simulate import Scenario, cost_model_of, workload_of
    from theory.capacity import capacity_bound

    path = law_file(directory)
    base = Scenario(gpu=LAW_KEY, gpu_file=path, model=MODEL_KEY, model_file=path, workload=WORKLOAD,
                    rate=1.0, load=None, n_requests=n_requests, seed=seed)
    cm = cost_model_of(base)
    w = workload_of(base, cm)
    b = capacity_bound(cm, w, b_max=BUDGET, kv_tokens=kv_tokens)
    out = {}
    for case in cases:
        sc = replace(base, scheduler=case.scheduler, options=case.options, rate=SAT_LOAD * b.bound)
        m = saturated_runs(sc, replicates, confidence)
        out[case.label] = {"count": list(m["count"]), "saturated": m["saturated"],
                             "attaining": case.attains}
    tol = 1e-9 * b.bound
    met = all(c["count"][0] >= b.bound - max(MET_RTOL * b.bound, (c["count"][2] - c["count"][1]) / 2)
              for c in out.values() if c["attaining"])
    never = all(c["count"][1] <= b.bound + tol for c in out.values())
    return {"bound": b.bound, "binds": b.binds, "lam_compute": b.lam_compute, "lam_kv": b.lam_kv,
            "kv_tokens": kv_tokens, "workload": WORKLOAD, "cases": out, "met": met,
            "never_exceeded": never}


__all__ = ["BUDGET", "CASES", "KV_TOKENS", "LAW_TOML", "MET_RTOL", "WORKLOAD", "MemoryCase", "law_file",
           "memory_check"]
