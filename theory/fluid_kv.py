"""Ao, Luo, Simchi-Levi and Wang's fluid model of LLM inference under KV memory.

Prompts of ``m`` types arrive at rates ``lam_j``; a type-``j`` prompt has ``l_j`` tokens after
prefill and ``l'_j`` decode iterations. It is prefilled in one iteration (stage ``s = 0``, KV
``l_j``) and decoded in ``l'_j`` more (stage ``s``, KV ``l_j + s``), so over its life it holds::

    W_j = sum_{s=0}^{l'_j} (l_j + s) = (l'_j + 1) (l_j + l'_j / 2)

KV tokens summed over its iterations. An iteration over a batch ``B`` lasts ``d_0 + d_1
sum_{i in B} (l_{j(i)} + s_i)``. In the fluid equilibrium each stage of type ``j`` holds ``n*_j``
prompts, the memory is ``M* = sum_j n*_j W_j`` and flow balance ``(d_0 + d_1 M*) lam_j = n*_j``
gives (their Eq. memory_multi2)::

    M*(lam) = d_0 sum_j lam_j W_j / (1 - d_1 sum_j lam_j W_j),

finite when ``d_1 sum_j lam_j W_j < 1`` (Proposition large_rate: at or above it every policy is
unstable). For a memory capacity ``C`` the fluid stability region is ``{lam : M*(lam) <= C}``;
along a fixed type mix ``p`` (``lam = Lam p``) its boundary is the total rate::

    Lam* = C / ((d_0 + d_1 C) sum_j p_j W_j).

WAIT's thresholds ``n_j`` (their Eq. wait_thresholds) must satisfy ``Delta T(n) := d_0 + d_1
M^pi <= n_j / lam_j`` for every ``j`` with ``M^pi = sum_j n_j W_j <= C``; :func:`wait_thresholds`
gives the integers proportional to ``lam`` that fill ``C`` and checks their strict slack
``Delta T(n) < n_j / lam_j`` (the case of their Theorem wait_heavy_traffic with bounded latency).

References
----------
Ao, Luo, Simchi-Levi, Wang, "Optimizing LLM Inference: Fluid-Guided Online Scheduling with
Memory Constraints", arXiv:2504.11320, Sections 2-4 (Eq. time_consump, memory_single,
memory_multi2, wait_thresholds; Propositions large_rate and online policy expected throughput
upper bound; Theorem wait_heavy_traffic); the authors' LaTeX source, repository
Luoxiaogan/vidur_or, ``papers/model.tex``, ``papers/fluid.tex``, ``papers/known_type.tex`` at commit
1ebb920a5fd0bbc025db1d531b8193b0afddd804.
"""

from __future__ import annotations

import math

import numpy as np

from theory.errors import FieldError


def _types(L_P, L_D) -> tuple[np.ndarray, np.ndarray]:
    L_P, L_D = np.atleast_1d(np.asarray(L_P, dtype=np.int64)), np.atleast_1d(np.asarray(L_D, dtype=np.int64))
    if L_P.shape != L_D.shape or np.any(L_P < 1) or np.any(L_D < 1):
        raise FieldError("prompt types (l, l')", (L_P.tolist(), L_D.tolist()),
                         "equal-length lists of prefill lengths l >= 1 and decode counts l' >= 1")
    return L_P, L_D


def stage_memory(L_P, L_D) -> np.ndarray:
    """``W_j = (l'_j + 1) (l_j + l'_j / 2)``: KV tokens a type-``j`` prompt holds, summed over its
    ``l'_j + 1`` iterations (their Eq. memory_single without ``n*_j``)."""
    L_P, L_D = _types(L_P, L_D)
    return (L_D + 1) * (2 * L_P + L_D) / 2.0


def fluid_memory(lam, L_P, L_D, d0: float, d1: float) -> float:
    """``M*(lam)`` of their Eq. memory_multi2 (KV tokens); ``inf`` when ``d_1 sum lam_j W_j >= 1``
    (Proposition large_rate: unstable under every policy whatever the memory)."""
    load = float(np.dot(np.atleast_1d(np.asarray(lam, dtype=float)), stage_memory(L_P, L_D)))
    slack = 1.0 - d1 * load
    return d0 * load / slack if slack > 0 else math.inf


def fluid_boundary(p, L_P, L_D, d0: float, d1: float, capacity: float) -> float:
    """``Lam*``: the total arrival rate (req/s) at which ``M*(Lam p) = C`` for the type mix ``p``
    (probabilities), the edge of the fluid stability region along that mix (module docstring)."""
    p = np.atleast_1d(np.asarray(p, dtype=float))
    if np.any(p < 0) or not math.isclose(float(p.sum()), 1.0, rel_tol=1e-9):
        raise FieldError("type mix p", p.tolist(), "probabilities summing to 1")
    if not (d0 > 0 and d1 >= 0 and capacity > 0):
        raise FieldError("d0, d1, C", (d0, d1, capacity), "d0 > 0, d1 >= 0 and C > 0")
    return capacity / ((d0 + d1 * capacity) * float(np.dot(p, stage_memory(L_P, L_D))))


def wait_thresholds(lam, L_P, L_D, d0: float, d1: float, capacity: float) -> np.ndarray:
    """WAIT thresholds along ``lam`` that fill the memory: ``n_j = floor(lam_j C / sum_k lam_k
    W_k)``, so that ``M^pi = sum_j n_j W_j <= C``, checked against their Eq. wait_thresholds with
    strict slack, ``Delta T(n) = d_0 + d_1 M^pi < n_j / lam_j`` for every type (the case of their
    Theorem wait_heavy_traffic with bounded latency). Inside the fluid region these are the
    thresholds with the most slack among those proportional to ``lam`` (up to rounding).

    Raises
    ------
    FieldError
        If some type has no slack: ``lam`` is outside the region, or so close to its edge that
        the rounding of ``n_j`` eats the slack.
    """
    lam = np.atleast_1d(np.asarray(lam, dtype=float))
    w = stage_memory(L_P, L_D)
    if lam.shape != w.shape or np.any(lam <= 0):
        raise FieldError("arrival rates lam", lam.tolist(), f"{w.size} positive rates, one per type")
    n = np.floor(lam * capacity / float(np.dot(lam, w))).astype(np.int64)
    delta_t = d0 + d1 * float(np.dot(n, w))
    short = [j for j in range(w.size) if not delta_t < n[j] / lam[j]]
    if short:
        raise FieldError("arrival rates lam", lam.tolist(),
                         f"rates inside the fluid region with slack: thresholds n = {n.tolist()} filling "
                         f"C = {capacity:g} KV tokens give Delta T = {delta_t:.6g} s >= n_j / lam_j for "
                         f"types {short}")
    return n
