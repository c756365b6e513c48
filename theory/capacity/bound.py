"""The certified capacity ``min(lam_C, lam_M)`` and the KV-memory bound (the two theorems of
:mod:`theory.capacity`).

References
----------
Bari, Hegde, de Veciana (2025), Theorem 1 (generalised); Li, Dai, Peng (2025), arXiv:2504.07347.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from theory.capacity.law import BatchLaw, as_law, check_caps
from theory.capacity.pieces import (
    DEFAULT_HORIZON,
    decode_attention_sums,
    linear_fixed_cost,
    min_prefill_attention,
)
from theory.cost import CostModel
from theory.errors import FieldError, require_positive, require_positive_int
from theory.tp_split import shard_memory
from theory.workload import Workload


@dataclass(frozen=True)
class CapacityBound:
    """A certified upper bound on the stable request rate (module docstring's theorem).

    Attributes
    ----------
    bound : float
        ``min(lam_C, lam_M)``, requests per second over the r GPUs.
    binds : str
        ``"compute"`` or ``"kv-memory"``.
    lam_compute, lam_kv : float
        ``r / T_bar_W`` and ``r M / E[K]`` (``inf`` when no KV capacity is given).
    work_per_request_s : float
        ``T_bar_W = Phi + E[D] + E[f(L_P)]``.
    pieces_s : dict
        ``{"linear+fixed": Phi, "decode_attention": E[D], "prefill_attention": E[f(L_P)]}``.
    best_batch_tokens : int or None
        A batch size attaining ``min F(tau) / tau`` (None: approached as tau -> infinity).
    batch_mix : dict
        An optimal LP mix ``{tau: batches per request}``.
    kv_token_seconds : float
        ``E[K]``, the certified KV-token-seconds per request (nan without M).
    r : int
    b_max, max_decodes : int or None
    law : str
    """

    bound: float
    binds: str
    lam_compute: float
    lam_kv: float
    work_per_request_s: float
    pieces_s: dict
    best_batch_tokens: int | None
    batch_mix: dict
    kv_token_seconds: float
    r: int
    b_max: int | None
    max_decodes: int | None
    law: str = field(default="")


def kv_token_seconds(law: BatchLaw, w: Workload, b_max: int | None = None,
                     horizon: int = DEFAULT_HORIZON) -> np.ndarray:
    """Certified KV-token-seconds ``K(L_P, L_D)`` per support point (module docstring).

    ``K = sum_{k=1}^{L_D} (L_P + k - 1) (F_min + A_D(L_P + k))`` with ``F_min`` the least time of a
    non-empty batch.
    """
    b_max, _ = check_caps(b_max, None)
    H = b_max if b_max is not None else require_positive_int("horizon", horizon)
    F = np.asarray(law.token_time(H), dtype=float)[1:] + law.fixed_s
    F_min = float(F.min())
    if b_max is None:
        F_min = min(F_min, law.fixed_s + law.tail_slope * (H + 1))
    top = int((w.L_P + w.L_D).max())
    pos = np.arange(1, top + 1)
    a_d = (np.zeros(top) if law.decode_attention is None
           else np.asarray(law.decode_attention(pos), dtype=float))
    per = (pos - 1) * (F_min + a_d)  # decode at position i holds i - 1 tokens for >= F_min + A_D(i)
    S = np.concatenate([[0.0], np.cumsum(per)])
    return S[w.L_P + w.L_D] - S[w.L_P]


def kv_capacity_tokens(cm: CostModel, gpu_memory_utilization: float = 0.9) -> float:
    """KV-cache tokens that fit beside the weights in ``gpu_memory_utilization`` of one GPU's memory
    (the ``M`` of the KV-memory bound): ``(u M_gpu - W) / b_kv`` with ``b_kv`` the model's KV bytes per
    token; 0.9 is vLLM's default ``gpu_memory_utilization`` (vllm-project/vllm, ``EngineArgs``).
    For a tensor-parallel replica, ``W`` and ``b_kv`` are one GPU's shares
    (:func:`theory.terms.shard_memory`), and the result is the replica's capacity. ``W`` and
    ``b_kv`` are at the model's precision (:mod:`theory.precision`: one byte per element at fp8)."""
    if not 0 < gpu_memory_utilization <= 1:
        raise FieldError("gpu_memory_utilization", gpu_memory_utilization, "a fraction in (0, 1]")
    weights, kv_per_token = shard_memory(cm.model, cm.gpu.terms.tp, ep=cm.gpu.terms.ep)
    return max(0.0, (gpu_memory_utilization * cm.gpu.memory_bytes - weights) / kv_per_token)


def capacity_bound(law: BatchLaw | CostModel, w: Workload, r: int = 1, *, b_max: int | None = None,
                   max_decodes: int | None = None, kv_tokens: float | None = None,
                   overhead_s: float | None = None, horizon: int = DEFAULT_HORIZON) -> CapacityBound:
    """The certified capacity ``min(lam_C, lam_M)`` of the module docstring's two theorems.

    Parameters
    ----------
    law : BatchLaw or CostModel
        A cost model is wrapped by :func:`law_from_cost_model` (with ``overhead_s``).
    w : Workload
    r : int
        Number of GPUs.
    b_max, max_decodes : int, optional
        Token budget and decode cap per batch.
    kv_tokens : float, optional
        ``M``, KV-cache capacity per GPU in tokens (None: no memory bound).
    overhead_s : float, optional
        Per-batch fixed time for a cost model (default ``cm.overhead_s``).
    horizon : int
        Batch sizes tabulated when ``b_max`` is None.

    Returns
    -------
    CapacityBound

    References
    ----------
    Bari, Hegde, de Veciana (2025), Theorem 1 (generalised); Li, Dai, Peng (2025).
    """
    r = require_positive_int("r", r)
    b_max, q = check_caps(b_max, max_decodes)
    if not isinstance(w, Workload):
        raise FieldError("w", type(w).__name__, "a theory.workload.Workload")
    law = as_law(law, overhead_s)
    m_tok = w.expect(w.L_P + w.L_D)
    m_dec = w.expect(w.L_D)
    lin = linear_fixed_cost(law, m_tok, m_dec, b_max, q, horizon)
    dec = w.expect(decode_attention_sums(law, w))
    f = min_prefill_attention(law, w.l_P_max, b_max)
    pre = w.expect(f[w.L_P])
    work = lin.per_request_s + dec + pre
    lam_c = r / work
    if kv_tokens is None:
        lam_m, kv = math.inf, float("nan")
    else:
        require_positive("kv_tokens", kv_tokens)
        kv = w.expect(kv_token_seconds(law, w, b_max, horizon))
        lam_m = r * float(kv_tokens) / kv if kv > 0 else math.inf
    bound = min(lam_c, lam_m)
    return CapacityBound(
        bound=bound, binds="compute" if lam_c <= lam_m else "kv-memory", lam_compute=lam_c,
        lam_kv=lam_m, work_per_request_s=work,
        pieces_s={"linear+fixed": lin.per_request_s, "decode_attention": dec, "prefill_attention": pre},
        best_batch_tokens=lin.best_tau, batch_mix=lin.batch_mix, kv_token_seconds=kv, r=r,
        b_max=b_max, max_decodes=q, law=law.name)
