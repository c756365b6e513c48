"""Other papers: the exclusive-versus-mixed batching crossover of Zhang et al. (2026) on llmq's presets.

``other.eb_mb_crossover``. Zhang, Nie, Pang, Ma, Wu (2026) model a step's time as linear in its
tokens, ``T = alpha + beta n``, and report that prefill-decode interference makes a mixed batch's
per-step marginal cost ``beta_MB(r)`` (``r`` the decode share of the batch's tokens) exceed the
marginal cost ``beta_d`` of a decode-only step once ``r`` passes about 80% on an H200 and about
20% on an RTX PRO 6000. Their repository fits ``beta_d`` as the slope of decode-only step times
over 16..1024 decodes and ``beta_MB(r) = a + b r + c r^2`` per GPU.

llmq's side. With Eq. 7 in real mode (:func:`theory.cost.T_batch`, the calibrated presets
``h200`` and ``rtxpro6000``, whose mixed-decode term ``mixed_decode_eta`` prices a decode beside a
prefill chunk, :mod:`theory.terms`), the same two slopes are least-squares fits of llmq's step
times over the token counts of their calibration: ``beta_d`` over decode-only steps of
:data:`DECODE_COUNTS` decodes, ``beta_MB(r)`` over mixed steps of :data:`STEP_TOKENS` tokens, of
which ``round(r n)`` decodes and the rest prefill in chunks of :data:`CHUNK` tokens from a prompt's
start. Every decode is at position :data:`CONTEXT`, the mean decode position of their balanced
scenario (prompts of 512 and outputs of 512 tokens: ``512 + 512 / 2``). The crossover ``r*`` is
the least ``r`` on a grid of step 0.01 with ``beta_MB(r) > beta_d`` (1 when there is none). The
model is ``llama-3.1-8b``, the preset closest to their Qwen3-8B (same width, query and KV heads,
head size; four layers fewer, smaller vocabulary). The check PASSes when ``r*`` is within
:data:`TOL` of the published share on both GPUs.

Their published fits are evaluated the same way (``beta_MB(r*) = beta_d``) and reported beside
llmq's, with (without ``--quick``) the crossover at other decode positions (sensitivity), so a
reader sees which side a disagreement comes from.

References
----------
Zhang, Nie, Pang, Ma, Wu (2026), "Threshold-Based Exclusive Batching for LLM Inference",
arXiv:2606.00516 (abstract: the 80% and 20% decode shares); their code, github.com/weifang231/eb-vllm,
``reproduce/calibration/pd_calibration_Qwen3-8B_{H200,RTXPRO6000}.json`` (``beta_d``, fitted over
``decode_counts``; ``prefill_sizes``) and ``beta_mb_Qwen3-8B_{H200,RTXPRO6000}.json``
(``beta_MB(r) = a + b r + c r^2``). Bari, Hegde, de Veciana (2025), Eq. 7.
"""

from __future__ import annotations

import math

import numpy as np

from paper_checks.evidence import Points
from paper_checks.registry import Result, Verdict, register

CLAIMED = {"h200": 0.8, "rtxpro6000": 0.2}  # decode share beyond which beta_MB > beta_d (abstract)
TOL = 0.1  # "about": the decode share may differ by this much
MODEL = "llama-3.1-8b"
CONTEXT = 768  # a decode's position: their balanced scenario's mean, 512 + 512 / 2
CHUNK = 512  # prefill chunk of a mixed step (their balanced scenario's prompt)
DECODE_COUNTS = (16, 32, 64, 128, 256, 384, 512, 768, 1024)  # their calibration's decode_counts
STEP_TOKENS = (256, 512, 1024, 2048, 4096)  # their calibration's prefill_sizes
SHARES = np.round(np.linspace(0.0, 1.0, 101), 2)
SENSITIVITY_CONTEXTS = (256, 2048)
# their published fits for Qwen3-8B (s per token): beta_d of pd_calibration_*.json, (a, b, c) of
# beta_mb_*.json (References)
PUBLISHED_FITS = {"h200": {"beta_d": 4.586467522217373e-05, "abc": (2.494e-05, 5.193e-05, 1.478e-05)},
                  "rtxpro6000": {"beta_d": 1.0388105329650523e-04,
                                 "abc": (6.29342675989941e-05, 1.9689261661008702e-04, 9.8989734316548e-06)}}


def _step(cm, n_decode: int, n_prefill: int, context: int, chunk: int) -> float:
    from theory.cost import Batch, T_batch

    chunks = [(1, min(chunk, n_prefill - k)) for k in range(0, n_prefill, chunk)]
    return T_batch(cm, Batch.of(prefill=chunks, decode=[context] * n_decode))


def decode_slope(cm, context: int = CONTEXT) -> float:
    """``beta_d``: the least-squares slope (s per token) of llmq's decode-only step time over
    :data:`DECODE_COUNTS` decodes at position ``context``."""
    dec = np.array(DECODE_COUNTS, dtype=float)
    return float(np.polyfit(dec, [_step(cm, k, 0, context, CHUNK) for k in DECODE_COUNTS], 1)[0])


def mixed_slope(cm, share: float, context: int = CONTEXT, chunk: int = CHUNK) -> float:
    """``beta_MB(r)``: the least-squares slope (s per token) of llmq's mixed step time over
    :data:`STEP_TOKENS` tokens, ``round(r n)`` of them decodes at position ``context`` and the rest
    prefill in chunks of ``chunk`` (module docstring)."""
    n = np.array(STEP_TOKENS, dtype=float)
    decodes = [round(share * m) for m in STEP_TOKENS]
    t = [_step(cm, d, m - d, context, chunk) for d, m in zip(decodes, STEP_TOKENS, strict=True)]
    return float(np.polyfit(n, t, 1)[0])


def crossover(beta_d: float, beta_mb) -> float:
    """The least decode share of :data:`SHARES` with ``beta_mb(r) > beta_d`` (``beta_mb`` a
    function of the share, evaluated in increasing order until then); 1.0 if none."""
    for r in SHARES:
        if beta_mb(float(r)) > beta_d:
            return float(r)
    return 1.0


def published_crossover(beta_d: float, abc: tuple[float, float, float]) -> float:
    """The root in [0, 1] of ``a + b r + c r^2 = beta_d`` (their fits); 0 or 1 if it lies outside."""
    a, b, c = abc
    if a >= beta_d:
        return 0.0
    r = (-b + math.sqrt(b * b - 4 * c * (a - beta_d))) / (2 * c) if c else (beta_d - a) / b
    return min(1.0, r)


def llmq_crossovers(context: int = CONTEXT, model: str = MODEL, transform=None) -> dict:
    """llmq's ``r*`` per GPU of :data:`CLAIMED` (``transform(cm)``, if given, changes each cost
    model first: how tests perturb the model under check)."""
    from theory.builder import CostSpec, cost_model

    out = {}
    for gpu in CLAIMED:
        cm = cost_model(CostSpec(gpu=gpu, model=model, mode="real"))
        if transform is not None:
            cm = transform(cm)
        beta_d = decode_slope(cm, context)
        out[gpu] = {"r_star": crossover(beta_d, lambda r, cm=cm: mixed_slope(cm, r, context)),
                    "beta_d": beta_d, "beta_MB(0)": mixed_slope(cm, 0.0, context),
                    "beta_MB(1)": mixed_slope(cm, 1.0, context), "mixed_decode_eta": cm.mixed_decode_eta}
    return out


def judge_crossover(found: dict, claimed: dict, evidence: dict) -> Result:
    """PASS if llmq's crossover ``found[gpu]["r_star"]`` is within :data:`TOL` of ``claimed[gpu]``
    on every GPU; else FAIL, naming the GPUs where it is not, with where the two sides differ:
    llmq's decode slope against their fitted ``beta_d`` and llmq's mixed-decode term."""
    off = {g: (found[g]["r_star"], share) for g, share in claimed.items()
           if abs(found[g]["r_star"] - share) > TOL}
    case = {"claimed decode share": claimed, "llmq": found, "tolerance": TOL, **evidence}
    text = ", ".join(f"{g}: llmq r* = {found[g]['r_star']:.2f} vs {claimed[g]:.2f}" for g in claimed)
    if off:
        published = evidence["published beta_d s/token"]
        where = "; ".join(
            f"{g}: llmq's decode slope is {found[g]['beta_d'] / published[g]:.3f} x their beta_d, so the "
            f"difference is the mixed step (llmq: Eq. 7's step-time slope with mixed_decode_eta = "
            f"{found[g]['mixed_decode_eta']:.3g}; theirs: a quadratic in r through end-to-end seconds "
            "per token)" for g in off if g in published)
        return Result(Verdict.FAIL, f"crossover not reproduced on {', '.join(off)} ({text}); their own "
                                    "published fits give " + ", ".join(
                                        f"{g} {r:.2f}" for g, r in evidence["published fits r*"].items())
                      + (f"; {where}" if where else ""), counterexample=case)
    return Result(Verdict.PASS, f"crossover within {TOL} of the published share ({text})",
                  coverage=f"h200 and rtxpro6000 presets, {MODEL} real mode, decodes at position {CONTEXT}, "
                           "decode share on a 0.01 grid", evidence=case)


def crossover_evidence(fast: bool, model: str = MODEL) -> dict:
    """Their fits' crossovers and, without ``fast``, llmq's at :data:`SENSITIVITY_CONTEXTS` (what the
    verdict does not use)."""
    contexts = () if fast else SENSITIVITY_CONTEXTS
    return {"published fits r*": {g: published_crossover(f["beta_d"], f["abc"])
                                  for g, f in PUBLISHED_FITS.items()},
            "published beta_d s/token": {g: f["beta_d"] for g, f in PUBLISHED_FITS.items()},
            "llmq r* at other decode positions": {
                ctx: {g: v["r_star"] for g, v in llmq_crossovers(ctx, model).items()}
                for ctx in contexts},
            "model": model, "decode position": CONTEXT, "prefill chunk": CHUNK}


@register("other.eb_mb_crossover", level="sample",
          domain="the H200 and the RTX PRO 6000, the models and workloads of their experiments",
          evaluates=(Points("the h200 and rtxpro6000 presets, llama-3.1-8b in real mode, decodes at "
                            "position 768, prefill chunks of 512, decode shares 0, 0.01, ..., 1"),),
          section="other",
          location="Other papers: Zhang, Nie, Pang, Ma, Wu (2026, arXiv:2606.00516), the exclusive- "
                   "versus mixed-batching crossover",
          items=(),
          claim="A mixed batch's per-step marginal cost exceeds a decode-only step's once decodes are "
                "more than about 80% of the batch's tokens on an H200, and about 20% on an RTX PRO 6000.",
          method="llmq's Eq. 7 (real mode) step times fitted the way their calibration fits them: beta_d the "
                 "slope over 16..1024 decodes, beta_MB(r) the slope over mixed steps of 256..4096 tokens "
                 "at decode share r; r* the least r with beta_MB(r) > beta_d, within 0.1 of the published "
                 "share on both GPUs; their own fits' r* and llmq's at other decode positions reported.")
def other_eb_mb_crossover(fast: bool) -> Result:
    return judge_crossover(llmq_crossovers(), CLAIMED, crossover_evidence(fast))
