"""Fig. 5a and Fig. 5b (Section 6.1): what the text states about them, against the model.

The published points of Fig. 5a (median TTFT and mean batch time against the token budget) and
Fig. 5b (GPU memory against the number of concurrent decode-phase requests) are in the figure's
image only: the text gives none of their values. What the text states is checked instead, on the
paper's GPU and model (RTX 6000 Ada, Mistral-7B, real mode):

* Fig. 5a (Section 6.1.1): a small budget splits the 2048-token prefill into many chunks and raises
  the TTFT; a large budget makes each batch take longer. A request runs alone ("100 independent
  requests"): its prefill in chunks of the budget, one batch each, then its one decode; the TTFT is
  the sum of its prefill batches' Eq. 7 times, the mean batch time that sum plus the decode batch
  over the number of batches.
* Fig. 5b (Section 6.1.2): memory in use grows steadily with the requests. The model's memory in
  use is the weights plus each request's KV blocks (:mod:`stability.sim.memory`): a definition,
  read here, with the number of such requests that fit beside the study's cap alpha = 128.

The model is deterministic: there is no interval to state a tolerance from, and the published
points are not available to compare with; each comparison's margin says how far it is from
flipping (:mod:`paper_checks.margins`).
"""

from __future__ import annotations

import itertools
import math

from paper_checks.common import PAPER_GPU, PAPER_MODEL
from paper_checks.evidence import Points, Reading
from paper_checks.margins import NOT_APPLICABLE, least_margin, ratio_margin
from paper_checks.registry import Result, outcome, register
from theory import cost
from theory.builder import CostSpec, cost_model
from theory.cost import CostModel

PROMPT = 2048  # Fig. 5a-b: each request has a 2048-token prefill and a 1-token decode
BUDGETS = (32, 64, 128, 256, 512, 1024, 2048)  # token budgets, small to the whole prompt
ALPHA_CAP = 128  # Section 7: the cap on active requests


def paper_cost_model() -> CostModel:
    """The paper's GPU and model in real mode."""
    return cost_model(CostSpec(PAPER_GPU, PAPER_MODEL, "real"))


def prefill_batches(cm: CostModel, budget: int, prompt: int = PROMPT) -> list[float]:
    """Eq. 7 times of the prefill batches of one request alone, chunked by ``budget``."""
    return [cost.T_batch(cm, cost.Batch.of(prefill=[(s + 1, min(budget, prompt - s))]))
            for s in range(0, prompt, budget)]


def ttft(cm: CostModel, budget: int) -> float:
    """TTFT of a lone request: the sum of its prefill batches (the first token ends the prefill)."""
    return sum(prefill_batches(cm, budget))


def mean_batch_time(cm: CostModel, budget: int) -> float:
    """Mean execution time of a lone request's batches: its prefill chunks and its one decode."""
    pre = prefill_batches(cm, budget)
    return (sum(pre) + cost.T_batch(cm, cost.Batch.of(decode=[PROMPT + 1]))) / (len(pre) + 1)


@register("fig5a.budget_tradeoff", level="sample",
          domain="token budgets from a few tokens to the whole 2048-token prompt, RTX 6000 Ada, Mistral-7B",
          evaluates=(Points("budgets 32, 64, ..., 2048 (powers of two), RTX 6000 Ada, Mistral-7B, real "
                            "mode"),),
          location="Section 6.1.1 and Fig. 5a", items=("Eq. 7",),
          claim="A small token budget splits the 2048-token prefill into many chunks and raises the TTFT "
                "over a large one; a larger budget makes each batch take longer.",
          method="Eq. 7 (theory.cost.T_batch) for a lone request (2048-token prefill chunked by the "
                 "budget, one decode): TTFT at the smallest budget above that at the largest, and the "
                 "mean batch time strictly increasing from each budget to the next. The published "
                 "points are in the image only.")
def fig5a_budget_tradeoff(fast: bool) -> Result:
    cm = paper_cost_model()
    t = {b: ttft(cm, b) for b in BUDGETS}
    bt = {b: mean_batch_time(cm, b) for b in BUDGETS}
    small, large = BUDGETS[0], BUDGETS[-1]
    ttft_holds = t[small] > t[large]
    pairs = list(itertools.pairwise(BUDGETS))
    rising = [b for b, c in pairs if not bt[b] < bt[c]]
    holds = ttft_holds and not rising
    margin = least_margin([ratio_margin(t[small], t[large]),
                           *(ratio_margin(bt[b], bt[c]) for b, c in pairs)]) if holds else None
    best = min(t, key=t.get)
    return outcome(
        holds,
        summary=(f"TTFT {1e3 * t[small]:.0f} ms at budget {small} vs {1e3 * t[large]:.0f} ms at {large} "
                 f"(least at {best}: {1e3 * t[best]:.0f} ms); mean batch time "
                 f"{1e3 * bt[small]:.1f} -> {1e3 * bt[large]:.1f} ms"
                 + ("" if not rising else f", not rising after budgets {rising}")),
        coverage=f"{PAPER_GPU}, {PAPER_MODEL} (real mode), budgets {list(BUDGETS)}, one lone request",
        counterexample={"TTFT (s)": t, "mean batch time (s)": bt, "batch time not rising after": rising},
        evidence={"TTFT (s)": t, "mean batch time (s)": bt, "budget of least TTFT": best},
        margin=margin)


def kv_bytes_per_request(cm: CostModel, tokens: int = PROMPT + 1, block: int = 16) -> int:
    """KV bytes a request of ``tokens`` holds in whole blocks of ``block`` tokens
    (:mod:`stability.sim.memory`)."""
    return math.ceil(tokens / block) * block * cm.model.kv_bytes_per_token()


@register("fig5b.memory_growth", level="reading",
          domain="the memory the model holds for N concurrent 2048+1-token requests",
          evaluates=(Reading("Section 6.1.2: memory in use grows steadily with the active requests; the "
                             "model's memory is weights plus KV blocks per request"),),
          location="Section 6.1.2 and Fig. 5b", items=(),
          claim="GPU memory in use grows steadily with the number of active decode-phase requests "
                "(each a 2048-token prefill and a 1-token decode).",
          method="The model's memory in use (weights plus each request's KV blocks, stability.sim.memory) "
                 "restated: a positive constant per request; with how many such requests fit in 90% of "
                 "the RTX 6000 Ada's memory, beside the study's cap alpha = 128. The published points "
                 "are in the image only.")
def fig5b_memory_growth(fast: bool) -> Result:
    from stability.sim.memory import capacity_blocks

    cm = paper_cost_model()
    per = kv_bytes_per_request(cm)
    weights = cm.model.weight_bytes()
    fit = capacity_blocks(cm, 0.9) // math.ceil((PROMPT + 1) / 16)
    memory = {n: weights + n * per for n in (1, 32, 64, 128)}
    return outcome(
        per > 0,
        summary=(f"memory grows by {per / 2**20:.0f} MiB per request from {weights / 1e9:.1f} GB of weights; "
                 f"{fit} such requests fit in 90% of the GPU (alpha = {ALPHA_CAP})"),
        coverage=f"{PAPER_GPU}, {PAPER_MODEL}: the model's memory as a function of N",
        counterexample={"KV bytes per request": per},
        evidence={"KV bytes per request": per, "weights (bytes)": weights,
                  "memory at N (bytes)": memory, "requests that fit (90% of memory)": int(fit),
                  "alpha": ALPHA_CAP},
        margin=NOT_APPLICABLE)
