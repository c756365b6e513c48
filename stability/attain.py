"""The certified capacity in simulation: a policy that attains it, and saturated throughput measured
over a fixed window.

The certified bound ``lam_C = r / T_bar_W`` of :mod:`theory.capacity` charges every batch
``F(tau) = G(tau) + c_fix`` for its token count and each request its forced decode attention and
its least prefill attention. A schedule comes within ``eps`` of it when (i) almost every batch
has the token count ``tau*`` that attains ``min_tau F(tau) / tau`` (the LP's best batch size),
(ii) decodes run one per batch, as they must, and (iii) prompts are chunked with little more
attention than the chunking DP's minimum. Sarathi-Serve's stall-free batching (Agrawal et al.,
2024) fills every batch to its token budget while a queue waits, so with the budget ``B``
set to a batch size the bound favours, (i) and (ii) hold under backlog; (iii) holds up to the
tile waste of its chunks, whose attention is a small part of the work on the presets.

The budget. Without a per-batch fixed time ``c_fix`` the LP's best size ``tau*`` (a multiple of
the tiles' t_col) gives a capped bound equal to the uncapped one, so ``B = tau*``. With
``c_fix > 0``, or per-GeMM fixed times and a memory floor (the calibrated presets), the uncapped
bound is a supremum approached as batches grow, so :func:`attaining_policy` doubles a cap from
``tau*`` (found with ``c_fix = 0``) or :data:`START_BUDGET` until the bound with token budget
``cap`` is within ``eps`` of the uncapped one, and states that gap. Under backlog every batch
holds exactly ``B`` tokens, so ``B`` is a size attaining the capped LP's least ``F(tau) / tau``,
not the cap itself: with wave quantization ``F(tau) / tau`` is far from monotone, so the cap may
cost more per token than a smaller size (:func:`stability.bound_gap.batch_log_gap` says what a
budget loses).

The chunks. Sarathi-Serve's chunk is whatever budget is left, so with a large ``B`` a whole prompt
runs as one chunk, and Eq. 6 charges a chunk ``PI(R, i, c)`` for ``c (i + c - 1)`` score entries,
twice the attention of small chunks for a whole prompt: chunks are capped (option ``max_chunk``)
while admission goes on until the batch holds ``B`` tokens. The cap is the DP's split period
``P`` where the law has one; with wave quantization on Eq. 6 (``attention_waves``) it has none and
Eq. 6 is far from monotone in the chunk size, so the cap is the fixed chunk size with the least
mean attention (:func:`best_fixed_chunk`). ``max_num_seqs`` is ``B`` (it never binds: a batch
holds at most ``B`` tokens) and KV memory is off, as the compute bound assumes
(Assumption 4).

Saturated throughput. :func:`window_throughput` counts the completions inside a fixed window
``(t0, t1]`` of arrival times (``t0`` the ``warmup`` arrival quantile, ``t1`` the last arrival)
and divides by ``t1 - t0``: a renewal-reward estimate that a clump of completions can move by at
most its size, where ``(k - 1) / span`` over the first and last completion
(:func:`stability.points.saturated_throughput`) also shrinks the span. The window measures the
capacity under backlog only if no node's queue empties in it (``min_pending > 0``).

Work-weighted estimate. Counting completions carries the spread of the request lengths into its
interval. Weighting each completion
by its certified charge ``w_j = u (L_P + L_D) + v L_D + D(L_P, L_D) + f(L_P)`` (the proof of the
bound in :mod:`theory.capacity`, :func:`request_charge`) and dividing by ``E[w] = T_bar_W`` gives
an estimate of the same limit (completions in the window are a fair sample of the lengths under
FCFS admission, which every scheduler measured here uses) without that spread, so with a narrower
interval. The theorem's sample-path inequality ``sum_{j finished} w_j <= r t`` says this rate can
exceed the bound only by the boundary terms of the window (work done before ``t0`` on requests
finished inside it).

References
----------
Bari, Hegde, de Veciana (2025), Theorem 1; Agrawal et al. (2024), Sarathi-Serve (OSDI);
microsoft/sarathi-serve @ 96f9911, ``sarathi/core/scheduler/sarathi_scheduler.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from theory.capacity import (
    BatchLaw,
    capacity_bound,
    law_from_cost_model,
    linear_fixed_cost,
    min_prefill_attention,
)
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int
from theory.workload import Workload

ATTAIN_EPS = 0.005  # largest gap the budget's capped bound may leave to the uncapped one
START_BUDGET = 512  # Sarathi-Serve's default chunk_size, the first budget tried when the bound names none
MAX_BUDGET = 1 << 16  # largest token budget tried
CHUNK_STEP = 64  # chunk sizes tried by best_fixed_chunk: multiples of the presets' smallest tile width
SAT_LOAD = 1.5  # saturation runs offer this multiple of the certified bound


@dataclass(frozen=True)
class Attaining:
    """Sarathi-Serve at a token budget chosen from the bound (module docstring).

    Attributes
    ----------
    scheduler : str
        ``"sarathi"``.
    options : tuple
        ``(("chunk_size", B), ("max_chunk", P), ("max_model_len", ...), ("max_num_seqs", B),
        ("memory", False))``.
    budget : int
        ``B``.
    max_chunk : int
        Largest prefill chunk: the chunking DP's split period ``P`` (chunks beyond it never
        lower the attention, :mod:`theory.capacity`), at most ``B``; without one,
        :func:`best_fixed_chunk`.
    bound : float
        The certified bound without caps (req/s).
    bound_at_budget : float
        The certified bound of schedules whose batches hold at most ``B`` tokens (req/s).
    epsilon : float
        ``1 - bound_at_budget / bound``: the price of the finite budget.
    """

    scheduler: str
    options: tuple
    budget: int
    max_chunk: int
    bound: float
    bound_at_budget: float
    epsilon: float


def attaining_policy(cm: CostModel, w: Workload, r: int = 1, eps: float = ATTAIN_EPS,
                     max_budget: int = MAX_BUDGET) -> Attaining:
    """Sarathi-Serve with the token budget the certified bound favours (module docstring).

    Parameters
    ----------
    cm : CostModel
        With its ``overhead_s`` (``c_fix``).
    w : Workload
    r : int
    eps : float
        Largest gap ``1 - bound_at_budget / bound`` accepted before doubling stops.
    max_budget : int
        The doubling of the cap stops here (``epsilon`` then says what is left).

    Returns
    -------
    Attaining
    """
    if not 0 <= eps < 1:
        raise FieldError("eps", eps, "a number in [0, 1)")
    max_budget = require_positive_int("max_budget", max_budget)
    bound = capacity_bound(cm, w, r).bound
    # the best batch size without the fixed time per batch; with per-GeMM fixed times or a
    # memory floor the infimum is only approached as batches grow (None): start at Sarathi-Serve's
    # default budget and let the doubling below close the gap
    cap = capacity_bound(cm, w, r, overhead_s=0.0).best_batch_tokens or START_BUDGET
    at = capacity_bound(cm, w, r, b_max=cap)
    while 1 - at.bound / bound > eps and 2 * cap <= max_budget:
        cap *= 2
        at = capacity_bound(cm, w, r, b_max=cap)
    # full batches hold exactly the budget: take a size attaining the capped LP's best F(tau) / tau
    # (with waves F(tau) / tau is far from monotone: on the calibrated A100, 4096 tokens cost 4.3%
    # more per token than 3456), which leaves the capped bound unchanged
    budget = at.best_batch_tokens or cap
    limit = max(8192, int((w.L_P + w.L_D).max()))
    law = law_from_cost_model(cm)
    chunk = (min(budget, law.split_period) if law.split_period is not None
             else best_fixed_chunk(law, w, budget))
    options = (("chunk_size", budget), ("max_chunk", chunk), ("max_model_len", limit),
               ("max_num_seqs", budget), ("memory", False))
    return Attaining("sarathi", options, budget, chunk, bound, at.bound, 1 - at.bound / bound)


def fixed_chunk_attention(law: BatchLaw, w: Workload, chunk: int) -> float:
    """``E[sum_s A_P(1 + s chunk, min(chunk, L_P - s chunk))]``: the mean prefill attention of
    prompts cut into chunks of ``chunk`` tokens (Eq. 6 summed over the chunks, the last one short).

    References
    ----------
    Eq. 6; Definition 1 (chunks ``PI(R, i, c)``).
    """
    chunk = require_positive_int("chunk", chunk)
    if law.prefill_attention is None:
        return 0.0
    n = -(-w.L_P // chunk)
    owner = np.repeat(np.arange(w.L_P.size), n)
    start = (np.arange(owner.size) - np.repeat(np.cumsum(n) - n, n)) * chunk
    size = np.minimum(chunk, w.L_P[owner] - start)
    cost = np.asarray(law.prefill_attention(start + 1, size), dtype=float)
    return w.expect(np.bincount(owner, weights=cost, minlength=w.L_P.size))


def best_fixed_chunk(law: BatchLaw, w: Workload, budget: int, step: int = CHUNK_STEP) -> int:
    """The chunk size, a multiple of ``step`` up to ``budget`` (or ``budget`` if smaller), whose
    fixed-size chunking (:func:`fixed_chunk_attention`) has the least mean prefill attention; ties
    go to the smaller size (``budget`` when the law has no attention). It serves laws without a
    split period: wave quantization of Eq. 6 makes the attention far from monotone in the chunk
    size.

    References
    ----------
    Eq. 6; :func:`theory.capacity.min_prefill_attention` (the minimum over all chunkings).
    """
    budget = require_positive_int("budget", budget)
    step = require_positive_int("step", step)
    if law.prefill_attention is None:  # attention off: chunking gains nothing, leave chunks whole
        return budget
    sizes = list(range(step, budget + 1, step)) or [budget]
    costs = [fixed_chunk_attention(law, w, c) for c in sizes]
    return sizes[int(np.argmin(costs))]


def request_charge(cm: CostModel, w: Workload):
    """The certified per-request charge ``w_j`` of the bound's proof, as a function of the lengths.

    Returns
    -------
    callable
        ``charge(L_P, L_D) -> ndarray`` (seconds) with ``E[charge] = T_bar_W`` on ``w``, for
        prompts up to ``w.l_P_max`` and totals up to ``max(L_P + L_D)``.

    References
    ----------
    :mod:`theory.capacity` (module docstring, proof of the compute bound).
    """
    law = law_from_cost_model(cm)
    lin = linear_fixed_cost(law, w.expect(w.L_P + w.L_D), w.expect(w.L_D))
    top = int((w.L_P + w.L_D).max())
    S = np.zeros(top + 1)  # prefix sums of A_D: D(L_P, L_D) = S[L_P + L_D] - S[L_P] (Eq. 5)
    if law.decode_attention is not None:
        S[1:] = np.cumsum(np.asarray(law.decode_attention(np.arange(1, top + 1)), dtype=float))
    f = min_prefill_attention(law, w.l_P_max)

    def charge(L_P, L_D) -> np.ndarray:
        L_P, L_D = np.asarray(L_P, dtype=np.int64), np.asarray(L_D, dtype=np.int64)
        return (lin.u_s_per_token * (L_P + L_D) + lin.v_s_per_decode * L_D
                + S[L_P + L_D] - S[L_P] + f[L_P])

    return charge


def window_throughput(arrival: np.ndarray, finish: np.ndarray, node: np.ndarray, nodes: int | Sequence[int],
                      warmup: float = 0.2, weight: np.ndarray | None = None) -> dict:
    """Completions per second in the window from the ``warmup`` arrival quantile to the last arrival.

    Parameters
    ----------
    arrival, finish, node : ndarray
        Per request (``finish`` NaN while unfinished; ``node``: the node that completes it).
    nodes : int or sequence of int
        The nodes that complete requests: a count r (nodes 0 .. r - 1), or their numbers (a
        disaggregated cluster's decode nodes: :func:`stability.sim.disaggregated.completing_nodes`;
        its prefill nodes complete nothing and would read as idle).
    warmup : float
    weight : ndarray, optional
        Per-request weights (e.g. :func:`request_charge`); their sum over the window's completions
        per second is returned as ``weighted``.

    Returns
    -------
    dict
        ``rate``: completions with ``t0 < finish <= t1`` over ``t1 - t0``; ``weighted`` (NaN
        without weights); ``min_pending``: the fewest requests in system at any of ``nodes`` at
        a completion in the window (> 0: every node was backlogged throughout, so the window measured
        the capacity under backlog); ``completions``.
    """
    from stability.sim.metrics import in_system

    if not 0 <= warmup < 1:
        raise FieldError("warmup", warmup, "a fraction in [0, 1)")
    arrival = np.asarray(arrival, dtype=float)
    finish = np.asarray(finish, dtype=float)
    order = np.sort(arrival)
    t0, t1 = float(order[int(warmup * (order.size - 1))]), float(order[-1])
    if not t1 > t0:
        raise FieldError("arrival", f"{arrival.size} arrivals", "a window of positive length")
    inside = (finish > t0) & (finish <= t1)
    weighted = float("nan") if weight is None else float(np.sum(np.asarray(weight)[inside]) / (t1 - t0))
    fewest = min((int(in_system(arrival[node == g], finish[node == g],
                                finish[inside & (node == g)]).min())
                  if np.any(inside & (node == g)) else 0)
                 for g in (range(nodes) if isinstance(nodes, (int, np.integer)) else nodes))
    return {"rate": float(inside.sum() / (t1 - t0)), "weighted": weighted, "min_pending": fewest,
            "completions": int(inside.sum())}


def saturated_runs(scenario, replicates: int, confidence: float = 0.95) -> dict:
    """Saturated throughput of one scheduler: ``replicates`` seeded runs of ``scenario`` (a
    :class:`stability.sim.simulate.Scenario` with a rate above capacity), each measured by
    :func:`window_throughput`, and Student-t intervals over the replicates.

    Returns
    -------
    dict
        ``count`` and ``work``: ``(mean, low, high)`` in req/s of the completion count and of the
        work-weighted estimate (module docstring); ``saturated`` (every run backlogged throughout);
        ``runs`` (per replicate: seed, rate, weighted rate, min_pending, completions).
    """
    from stability.sim.disaggregated import completing_nodes
    from stability.sim.simulate import cost_model_of, simulate, workload_of
    from theory.stats import t_interval

    replicates = require_positive_int("replicates", replicates)
    cm = cost_model_of(scenario)
    w = workload_of(scenario, cm)
    charge = request_charge(cm, w)
    mean_charge = w.expect(charge(w.L_P, w.L_D))
    runs = []
    for k in range(replicates):
        sc = replace(scenario, seed=scenario.seed + k)
        res = simulate(sc)
        rq = res.requests
        ok = ~(np.asarray(rq["reject"]) > 0)
        weight = charge(rq["L_P"][ok], rq["L_D"][ok]) / mean_charge
        m = window_throughput(rq["arrival"][ok], rq["t_finish"][ok], rq["node"][ok],
                              completing_nodes(res.runs), weight=weight)
        runs.append({"seed": sc.seed, **m})
    return {"count": t_interval([x["rate"] for x in runs], confidence),
            "work": t_interval([x["weighted"] for x in runs], confidence),
            "saturated": all(x["min_pending"] > 0 for x in runs), "runs": runs}


SCHEDULERS = (("rad", (("n", 2000),)), ("sarathi", ()), ("request_level", ()))  # region's, RAD at
# stability.region.N_FALLBACK (its n = auto searches the empirical n_min, a sweep of its own)


@dataclass(frozen=True)
class CellOptions:
    """How a cell of the capacity table is run (:func:`attain_cell`).

    Attributes
    ----------
    gpu_file : str or None
        A user TOML file of GPU presets (as every command takes it).
    model, workload : str
        The model preset and the workload.
    replicates : int
        Seeds simulated per scheduler (:func:`saturated_runs`).
    n_requests : int
        Requests per run, at least (raised so that the warm-up leaves the policy's batches full).
    seed : int
        The first replicate's seed.
    confidence : float
        Level of the throughput intervals.
    schedulers : tuple
        ``(name, options)`` of the schedulers compared with the attaining policy.
    """

    gpu_file: str | None = None
    model: str = "mistral-7b"
    workload: str = "table1"
    replicates: int = 3
    n_requests: int = 20000
    seed: int = 0
    confidence: float = 0.95
    schedulers: tuple = SCHEDULERS


def attain_cell(gpu: str, mode: str, variant: str, options: CellOptions = CellOptions()) -> dict:
    """One cell of the capacity table: the certified bound, the attaining policy and every
    scheduler's saturated throughput at ``SAT_LOAD`` x the bound, with the two verdicts, run as
    ``options`` says.

    Returns
    -------
    dict
        ``bound`` (req/s, uncapped), ``binds``, ``lambda_star`` (Theorem 1), the attaining
        policy's ``budget``, ``max_chunk``, ``bound_at_budget``, ``epsilon``; ``runs``: per
        scheduler (``"attain"`` for the policy) the :func:`saturated_runs` result; ``none_exceeds``
        (no scheduler's work-weighted or count interval lies wholly above the bound) and ``attains``
        (the policy's work-weighted mean is within ``max(1%, its half-width)`` of the bound).
    """
    from stability.sim.simulate import Scenario, cost_model_of, workload_of
    from theory.bounds import T_bar_R

    o = options
    replicates, n_requests, confidence = o.replicates, o.n_requests, o.confidence
    base = Scenario(gpu=gpu, model=o.model, mode=mode, workload=o.workload, pad=variant == "pad",
                    gpu_file=o.gpu_file, rate=1.0, load=None, n_requests=n_requests, seed=o.seed)
    cm = cost_model_of(base)
    w = workload_of(base, cm)
    pol = attaining_policy(cm, w)
    bound = capacity_bound(cm, w)
    # the policy needs about B E[L_D] / E[L_P + L_D] requests decoding at once; 20x that many
    # requests leave the warm-up (20% of arrivals) several fills long
    fill = pol.budget * w.expect(w.L_D) / w.expect(w.L_P + w.L_D)
    n = max(n_requests, int(20 * fill))
    runs = {}
    for key, name, opts in (("attain", pol.scheduler, pol.options), *((s, s, so) for s, so in o.schedulers)):
        sc = replace(base, scheduler=name, options=opts, rate=SAT_LOAD * pol.bound, n_requests=n)
        runs[key] = saturated_runs(sc, replicates, confidence)
    exceeds = [k for k, m in runs.items()
               if m["work"][1] > pol.bound * (1 + 1e-9) or m["count"][1] > pol.bound * (1 + 1e-9)]
    mean, low, high = runs["attain"]["work"]
    slack = max(0.01 * pol.bound, (high - low) / 2)
    return {"gpu": gpu, "mode": mode, "variant": variant, "overhead_s": cm.overhead_s,
            "lambda_star": 1.0 / T_bar_R(cm, w), "bound": pol.bound, "binds": bound.binds,
            "budget": pol.budget, "max_chunk": pol.max_chunk, "bound_at_budget": pol.bound_at_budget,
            "epsilon": pol.epsilon, "n_requests": n, "runs": runs, "exceeding": exceeds,
            "none_exceeds": not exceeds, "attains": bool(mean >= pol.bound - slack),
            "saturated": all(m["saturated"] for m in runs.values())}


__all__ = ["ATTAIN_EPS", "CHUNK_STEP", "MAX_BUDGET", "SAT_LOAD", "SCHEDULERS", "Attaining", "CellOptions",
           "attain_cell", "attaining_policy", "best_fixed_chunk", "fixed_chunk_attention",
           "request_charge", "saturated_runs", "window_throughput"]
