"""The linear time of a batch with the GPU-side cost terms on, as arrays per tile and GeMM
(:mod:`theory.terms` documents the terms; :func:`theory.cost_model.build_cost_model` fills it).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 and Eq. 4; the sources of :mod:`theory.terms`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.measured import MeasuredLinear
from theory.moe import MoETerms
from theory.terms import LinearLaw, ceil_div


@dataclass(frozen=True, eq=False)
class LinearTerms:
    """The linear time of a batch with the GPU-side terms on, in arrays per tile and GeMM.

    ``L(tau) = min_k sum_g count_g G_kg(tau) + tok_s tau + batch_s`` for ``tau >= 1`` with::

        G_kg(tau) = max(C_kg(tau), rows_kg ceil(tau/t_col_k) traffic_kg / l2_bw,   (l2 on)
                        (wbytes_g + abytes_g tau) / floor_bw)                      (floor on)
        C_kg(tau) = ceil(rows_kg ceil(tau/t_col_k) / s) red_kg / mu_k       (waves on)
                  = rows_kg ceil(tau/t_col_k) red_kg / (s mu_k)              (waves off)

    or ``law(tau)`` when a law is set. ``rows_kg = ceil(d_row_g / t_row_k)``, ``red_kg =
    ceil(d_red_g / t_red_k)``, ``traffic_kg = b (t_row_k + t_col_k) d_red_g``. With ``measured``
    (``gemm_profile``) a GeMM ``g`` its table covers at ``tau`` has ``G_kg(tau) = 0`` for every
    tile and adds ``count_g (M_g(tau) - gemm_overhead_s)`` instead (``batch_s`` holds its
    ``gemm_overhead_s``, which the measured time ``M_g`` already includes). A MoE model adds the
    expected time of its routed experts, ``moe.time(tau)``, on their own tiles (:mod:`theory.moe`;
    :func:`theory.cost.T_Lin`).
    """

    count: np.ndarray  # (G,) int
    rows: np.ndarray  # (K, G) int
    red: np.ndarray  # (K, G) int
    wbytes: np.ndarray  # (G,) weight bytes of one GeMM instance
    abytes: np.ndarray  # (G,) activation bytes per token (input + output)
    waves: bool
    floor_bw: float  # bytes/s of the floor; 0 when the floor is off
    traffic: np.ndarray  # (K, G) operand bytes per output tile through L2
    l2_bw: float  # bytes/s of the L2 term; 0 when it is off
    tok_s: float  # seconds per batch token outside the GeMMs (all-reduce bytes, embedding gather)
    batch_s: float  # seconds per non-empty batch (all-reduce latencies, vocab-projection weight read)
    law: LinearLaw | None
    measured: MeasuredLinear | None = None  # the measured-profile law (gemm_profile), if on
    moe: MoETerms | None = None  # a MoE model's routed experts (theory.moe), added to every batch

    def per_tile(self, tau: np.ndarray, k: int, t_col: int, mu: float, s: int,
                 covered: np.ndarray | None = None) -> np.ndarray:
        """``sum_g count_g G_kg(tau)`` at tile index ``k`` (no per-token or per-batch additions);
        ``covered[g]`` (``gemm_profile``) marks where GeMM ``g`` is measured and left out here."""
        cols = ceil_div(tau, t_col)
        out = np.zeros(tau.shape)
        for g in range(self.count.size):
            tiles_out = self.rows[k, g] * cols
            if self.waves:
                comp = ceil_div(tiles_out, s) * self.red[k, g] / mu
            else:
                comp = tiles_out * self.red[k, g] / (s * mu)
            if self.l2_bw:
                comp = np.maximum(comp, tiles_out * self.traffic[k, g] / self.l2_bw)
            if self.floor_bw:
                comp = np.maximum(comp, (self.wbytes[g] + self.abytes[g] * tau) / self.floor_bw)
            if covered is not None:
                comp = np.where(covered[g], 0.0, comp)
            out = out + self.count[g] * comp
        return out

    def per_token_limit(self, k: int, t_col: int, mu: float, s: int) -> float:
        """``lim_tau sum_g count_g G_kg(tau) / tau``, which is also its infimum (see module doc)."""
        total = 0.0
        for g in range(self.count.size):
            comp = self.rows[k, g] * self.red[k, g] / (s * mu * t_col)
            if self.l2_bw:
                comp = max(comp, self.rows[k, g] * self.traffic[k, g] / (t_col * self.l2_bw))
            if self.floor_bw:
                comp = max(comp, self.abytes[g] / self.floor_bw)
            total += self.count[g] * comp
        return total
