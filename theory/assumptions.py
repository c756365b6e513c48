"""Which of the paper's Assumptions 1-4 hold for a GPU, a model and a workload.

* Assumption 1: some tile t* reaches the GPU's maximal FLOP rate on large, perfectly tiled
  GeMMs. Checked: t* maximises ``mu(t) t_row t_col t_red`` over the tile set, and the model's
  weight and attention dimensions are divisible by t*_row and t*_red so its GeMMs can be perfectly
  tiled. In real mode a model outside it is still priced (partial tiles by Eq. 2's ceilings,
  :func:`theory.cost_model.build_cost_model`), and Assumption 1 fails, naming the dimensions.
* Assumption 2: ``d_col`` GeMVs ``y(i) = A x(i)`` take longer than the one GeMM ``Y = A X``.
  Checked for every weight matrix ``A`` of the model and every ``d_col`` in 1..``d_col_max``,
  each side on its fastest tile.
* Assumption 3: L^P is a multiple of t*_lcm almost surely, and lengths are bounded.
* Assumption 4: GPU memory holds the weights plus the KV cache of t*_col requests of maximal
  length.

References
----------
Bari, Hegde, de Veciana (2025), Assumptions 1-4 (Sections 2.3 and 4.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.cost import CostModel, T_GeMM, T_GeMV
from theory.workload import Workload


@dataclass(frozen=True)
class AssumptionReport:
    """One assumption's verdict and the evidence behind it."""

    name: str
    holds: bool
    detail: str


def assumption1(cm: CostModel) -> AssumptionReport:
    """Assumption 1 for the cost model's GPU and model (see module docstring).

    Implements Assumption 1.
    """
    rates = cm.mu * cm.t_row * cm.t_col * cm.t_red
    best = rates.max()
    t = cm.t_star
    is_max = rates[0] >= best * (1 - 1e-12)
    dims = cm.model.divisibility_dims(cm.mode)
    bad = [label for label, (v, role) in dims.items()
           if role in ("row", "red") and v % (t.t_row if role == "row" else t.t_red)]
    holds = bool(is_max and not bad)
    eff = 2 * cm.s * rates[0] / cm.gpu.peak_flops
    detail = (f"t* = {t} reaches {eff:.1%} of dense peak"
              + ("" if is_max else f", below the best tile's {2 * cm.s * best / cm.gpu.peak_flops:.1%}")
              + ("" if not bad else f"; not divisible: {', '.join(bad)}"))
    return AssumptionReport("Assumption 1", holds, detail)


def assumption2(cm: CostModel, d_col_max: int = 4096) -> AssumptionReport:
    """Assumption 2 for every weight matrix of the model and d_col = 1..d_col_max.

    Implements Assumption 2.
    """
    d_col = np.arange(1, d_col_max + 1)
    worst_ratio, worst = np.inf, None
    shapes = [(g.name, g.d_row, g.d_red) for g in cm.model.linear_gemms(cm.mode)]
    for name, d_row, d_red in shapes:
        gemm = np.min([T_GeMM(d_row, d_col, d_red, cm.t_row[k], cm.t_col[k], cm.t_red[k],
                              cm.mu[k], cm.s) for k in range(len(cm.tiles))], axis=0)
        gemv = np.min([T_GeMV(d_row, d_red, cm.g_row[k], cm.g_col[k], cm.mu_gemv[k], cm.s)
                       for k in range(len(cm.mu_gemv))])
        ratio = d_col * gemv / gemm
        k = int(np.argmin(ratio))
        if ratio[k] < worst_ratio:
            worst_ratio, worst = float(ratio[k]), (name, int(d_col[k]))
    holds = worst_ratio > 1
    detail = (f"min over weights and d_col <= {d_col_max} of (d_col GeMVs)/(GeMM) = "
              f"{worst_ratio:.3g} at {worst[0]}, d_col = {worst[1]}")
    return AssumptionReport("Assumption 2", bool(holds), detail)


def assumption3(cm: CostModel, w: Workload) -> AssumptionReport:
    """Assumption 3: prompts are multiples of t*_lcm a.s. (lengths are bounded by construction).

    Implements Assumption 3.
    """
    mass = w.assumption3(cm.t_lcm)
    detail = (f"P(L^P multiple of t*_lcm = {cm.t_lcm}) = {mass:.4g}; bounded: "
              f"l^P,max = {w.l_P_max}, l^D,max = {w.l_D_max}")
    return AssumptionReport("Assumption 3", mass >= 1 - 1e-12, detail)


def assumption4(cm: CostModel, w: Workload, bytes_per_element: int | None = None) -> AssumptionReport:
    """Assumption 4: memory for the weights and t*_col maximal-length KV caches.

    Implements Assumption 4.
    """
    need = cm.t_star.t_col * (w.l_P_max + w.l_D_max) * cm.model.kv_bytes_per_token(bytes_per_element)
    free = cm.gpu.memory_bytes - cm.model.weight_bytes(bytes_per_element)
    detail = (f"KV of t*_col = {cm.t_star.t_col} requests x {w.l_P_max + w.l_D_max} tokens needs "
              f"{need / 1e9:.1f} GB; {free / 1e9:.1f} GB free after weights")
    return AssumptionReport("Assumption 4", bool(need <= free), detail)


def check_assumptions(cm: CostModel, w: Workload) -> list[AssumptionReport]:
    """Assumptions 1-4 for the cost model's GPU and model and the workload ``w``."""
    return [assumption1(cm), assumption2(cm), assumption3(cm, w), assumption4(cm, w)]
