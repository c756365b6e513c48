"""Explicit feasible schedules below the certified capacity, and the check of a claimed capacity
against both (:mod:`theory.capacity`).

References
----------
Bari, Hegde, de Veciana (2025), Theorem 1, Algorithm 1; Li, Dai, Peng (2025), arXiv:2504.07347.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.capacity.bound import capacity_bound
from theory.capacity.law import BatchLaw, as_law, check_caps, law_from_cost_model
from theory.cost import CostModel
from theory.errors import require_positive, require_positive_int
from theory.workload import Workload


def lockstep_throughput(law: BatchLaw | CostModel, w: Workload, r: int = 1, *, group: int,
                        chunk: int, b_max: int | None = None, max_decodes: int | None = None,
                        overhead_s: float | None = None) -> float:
    """Throughput (req/s) of an explicit feasible schedule: groups of ``group`` same-length requests.

    Per support point ``(L_P, L_D)``: the group's prompts advance in lock step, chunk ``s`` of
    every prompt (``PI(R, 1 + s chunk, min(chunk, L_P - s chunk))``) in one batch, then ``L_D``
    batches of ``group`` decodes; batches are timed by ``law.batch_time`` (for a cost model,
    :func:`theory.cost.T_batch`). Serving each length class in its own groups sustains
    ``r / E[W]`` with ``W`` the group's time per request. Returns 0 when the schedule breaks a cap.
    """
    law = as_law(law, overhead_s)
    group = require_positive_int("group", group)
    chunk = require_positive_int("chunk", chunk)
    r = require_positive_int("r", r)
    b_max, q = check_caps(b_max, max_decodes)
    if (b_max is not None and group > b_max) or (q is not None and group > q):
        return 0.0
    per = np.empty(w.p.size)
    for j, (lp, ld) in enumerate(zip(w.L_P.tolist(), w.L_D.tolist(), strict=True)):
        t = 0.0
        for s in range(-(-lp // chunk)):
            c = min(chunk, lp - s * chunk)
            if b_max is not None and group * c > b_max:
                return 0.0
            t += law.batch_time(prefill=[(1 + s * chunk, c)] * group, decode=[])
        for k in range(1, ld + 1):
            t += law.batch_time(prefill=[], decode=[lp + k] * group)
        per[j] = t / group
    return r / w.expect(per)


@dataclass(frozen=True)
class BoundCheck:
    """Verdict of :func:`check_bound_against`.

    Attributes
    ----------
    verdict : str
        ``"PASS"`` when ``best_feasible <= claimed <= certified`` (within ``rtol``); ``"FAIL"``
        otherwise.
    reason : str
    claimed, certified, best_feasible : float
    witness : dict
        The schedule (group, chunk) of ``best_feasible``.
    """

    verdict: str
    reason: str
    claimed: float
    certified: float
    best_feasible: float
    witness: dict


@dataclass(frozen=True)
class Schedules:
    """The lock-step schedules a claimed capacity is judged against (:func:`lockstep_throughput`
    for every ``group x chunk``), and the relative tolerance of the verdict."""

    groups: tuple[int, ...] = (1, 16, 128, 256)
    chunks: tuple[int, ...] = (64, 128, 256, 512)
    rtol: float = 1e-9


def check_bound_against(claimed: float, law: BatchLaw | CostModel, w: Workload, r: int = 1, *,
                        b_max: int | None = None, max_decodes: int | None = None,
                        overhead_s: float | None = None, schedules: Schedules = Schedules()) -> BoundCheck:
    """Judge a claimed capacity (req/s) against explicit schedules and the certified bound.

    A claimed capacity is refuted from below if a feasible lock-step schedule
    (:func:`lockstep_throughput` over ``schedules``) sustains more (then it is not an upper
    bound on throughput: e.g. the printed lam* of Theorem 1 where the chunking lemma fails), and
    from above if it exceeds :func:`theory.capacity.capacity_bound` (no scheduler reaches it: e.g.
    lam* ignoring a per-batch fixed time under a token budget).

    Returns
    -------
    BoundCheck
    """
    require_positive("claimed", claimed)
    law = as_law(law, overhead_s)
    cert = capacity_bound(law, w, r, b_max=b_max, max_decodes=max_decodes).bound
    best, wit = 0.0, {}
    rtol = schedules.rtol
    for g in schedules.groups:
        for c in schedules.chunks:
            x = lockstep_throughput(law, w, r, group=g, chunk=c, b_max=b_max, max_decodes=max_decodes)
            if x > best:
                best, wit = x, {"group": g, "chunk": c}
    if best > claimed * (1 + rtol):
        return BoundCheck("FAIL", f"a feasible schedule {wit} sustains {best:.6g} req/s > claimed "
                                  f"{claimed:.6g} (+{best / claimed - 1:.3%}): not an upper bound",
                          claimed, cert, best, wit)
    if claimed > cert * (1 + rtol):
        return BoundCheck("FAIL", f"claimed {claimed:.6g} req/s exceeds the certified bound {cert:.6g} "
                                  f"(+{claimed / cert - 1:.3%}): no scheduler attains it",
                          claimed, cert, best, wit)
    return BoundCheck("PASS", f"{best:.6g} <= claimed {claimed:.6g} <= certified {cert:.6g}",
                      claimed, cert, best, wit)


def rad_overhead_rate_bound(cm: CostModel, w: Workload, r: int = 1, overhead_s: float | None = None) -> float:
    """An upper bound on RAD's stable rate when every batch pays ``c_fix`` (:mod:`theory.capacity`).

    RAD (Algorithm 1) runs each prefill chunk of ``t*_lcm`` tokens alone (``ceil(L_P / t*_lcm)``
    batches per request) and at most ``t*_col`` decodes per batch, so its time per request is at
    least the c_fix = 0 work ``T_bar_W`` plus ``c_fix (E[ceil(L_P / t*_lcm)] + E[L_D] / t*_col)``.

    References
    ----------
    Algorithm 1, lines 6-16.
    """
    law = law_from_cost_model(cm, overhead_s)
    base = capacity_bound(law_from_cost_model(cm, 0.0), w, r).work_per_request_s
    t = cm.t_star
    n_batches = w.expect(-(-w.L_P // t.t_lcm)) + w.expect(w.L_D) / t.t_col
    return r / (base + law.fixed_s * n_batches)
