"""The batch-time law a capacity bound is computed for: ``T_B = G(tau) + c_fix + sum A_D + sum A_P``
(Eq. 7, generalised; :mod:`theory.capacity` states the theorem), built from a cost model or the
staircase law of Li, Dai and Peng.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7; Li, Dai, Peng (2025), arXiv:2504.07347.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from theory import added_time
from theory.cost import T_P_SA, Batch, CostModel, T_batch, T_D_SA_least, linear_per_token, linear_table
from theory.errors import FieldError, require_positive, require_positive_int


@dataclass(frozen=True, eq=False)
class BatchLaw:
    """A batch-time law ``T_B = G(tau) + c_fix + sum A_D + sum A_P`` (:mod:`theory.capacity`).

    Attributes
    ----------
    name : str
    token_time : callable
        ``token_time(tau_max) -> ndarray`` of ``G(tau)``, tau = 0..tau_max (``G(0) = 0``): the time
        that depends on the batch's token count alone (Eq. 4 plus non-linear ops).
    fixed_s : float
        ``c_fix``, the time every non-empty batch pays (the per-batch fixed-time hook).
    tail_slope : float
        ``sigma``: a lower bound on ``G(tau) / tau`` for every tau (used beyond the tabulated
        range; checked on the table).
    decode_attention : callable or None
        ``A_D(i)``, whole-model attention time of one decode at position ``i`` (None: 0).
    prefill_attention : callable or None
        ``A_P(i, c)``, whole-model attention time of chunk ``PI(R, i, c)`` (None: 0).
    split_period : int or None
        ``P`` such that splitting a chunk of size ``c > P`` at ``P`` never costs more (None: the
        chunking DP tries every size).
    batch_time : callable
        ``batch_time(prefill=[(i, c), ...], decode=[i, ...]) -> float``: the time of one explicit
        batch, for the feasible schedules of :func:`theory.capacity.check.lockstep_throughput`.
    content_key : str or None
        A digest of everything the law is built from (:func:`law_from_cost_model`: the pickled cost
        model), so that :func:`theory.capacity.pieces.min_prefill_attention` can reuse a table
        for an equal law; None: never reused.
    """

    name: str
    token_time: Callable[[int], np.ndarray]
    fixed_s: float
    tail_slope: float
    decode_attention: Callable[[np.ndarray], np.ndarray] | None
    prefill_attention: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
    split_period: int | None
    batch_time: Callable[..., float]
    content_key: str | None = None


def law_from_cost_model(cm: CostModel, overhead_s: float | None = None) -> BatchLaw:
    """The batch-time law of a cost model, built on ``linear_table``, ``T_D_SA``, ``T_P_SA``.

    Parameters
    ----------
    cm : CostModel
    overhead_s : float, optional
        Fixed time per batch in place of ``cm.overhead_s`` (default: ``cm.overhead_s``, 0 reproduces
        Eq. 7); ``c_fix`` is it plus the attention calls ``N attention_call_s``
        (:attr:`theory.cost.CostModel.fixed_s`).

    Notes
    -----
    ``tail_slope`` is Eq. 4's floor ``min_t 1 / (mu_Lin(t) t_col) + 1 / mu_nLin``, a lower bound
    on ``G(tau) / tau`` for Eq. 4; with cost terms on (:mod:`theory.terms`) it is their infimum
    ``l* + 1 / mu_nLin`` (:func:`theory.cost.linear_per_token`; ``a / b0`` under a staircase law).
    :func:`theory.capacity.capacity_bound` checks it on the table. ``split_period`` is the LCM of
    the tiles' t_col (:mod:`theory.capacity`); with ``attention_waves`` or ``lm_head`` (a row per
    chunk) splitting can cost more, so it is None and the DP tries every size (``waves`` on the
    linear GeMMs leaves Eq. 6, and so the split property, unchanged). ``lm_head``'s row per
    decode and per chunk is part of ``A_D`` and ``A_P``. With ``mixed_decode_eta`` a decode costs
    more or less beside a prefill chunk than alone (:mod:`theory.terms`), so ``A_D`` is the smaller
    of the two per position (:func:`theory.cost.T_D_SA_least`): part (a) of the proof still holds,
    and ``batch_time`` is the exact Eq. 7 of the batch. The added-time terms
    (:mod:`theory.added_time`) ride on ``c_fix`` (per batch) and on ``A_D`` (per decode).

    References
    ----------
    Eq. 4-7.
    """
    c_fix = cm.overhead_s if overhead_s is None else overhead_s
    if not (math.isfinite(float(c_fix)) and float(c_fix) >= 0):
        raise FieldError("overhead_s", overhead_s, "a finite number >= 0")
    cm_fixed = replace(cm, overhead_s=float(c_fix))

    def token_time(tau_max: int) -> np.ndarray:
        return linear_table(cm, tau_max) + np.arange(tau_max + 1) / cm.mu_nLin

    def batch_time(prefill=(), decode=()) -> float:
        return T_batch(cm_fixed, Batch.of(prefill=prefill, decode=decode))

    if cm.lin is None:
        tail_slope = float(np.min(1.0 / (cm.mu_Lin * cm.t_col)) + 1.0 / cm.mu_nLin)
    else:
        tail_slope = linear_per_token(cm) + 1.0 / cm.mu_nLin
    row = cm.lm_out_s  # lm_head: one vocab-projection row per decode and per prefill chunk
    decode = (lambda i: cm.N * T_D_SA_least(cm, i) + row) if row else (lambda i: cm.N * T_D_SA_least(cm, i))
    if cm.added and added_time.adds_per_decode(cm):
        attention = decode

        def decode(i):
            return attention(i) + added_time.decode_s(cm, i)

    return BatchLaw(
        name=f"{cm.describe()}, c_fix = {cm_fixed.fixed_s:.4g} s", token_time=token_time,
        fixed_s=cm_fixed.fixed_s, tail_slope=tail_slope, decode_attention=decode,
        prefill_attention=(lambda i, c: T_P_SA(cm, i, c) + row) if row else (lambda i, c: T_P_SA(cm, i, c)),
        split_period=None if (cm.attention_waves or row) else int(np.lcm.reduce(cm.t_col)),
        batch_time=batch_time,
        content_key=hashlib.sha256(pickle.dumps(cm_fixed)).hexdigest())


def staircase_law(c: float, a: float, b0: int) -> BatchLaw:
    """``t(b) = c + a ceil(b / b0)`` for a batch of ``b >= 1`` tokens, attention off.

    References
    ----------
    Li, Dai, Peng (2025), arXiv:2504.07347 (batch time as a function of the batch's tokens).
    """
    if not (math.isfinite(float(c)) and float(c) >= 0):
        raise FieldError("c", c, "a finite number >= 0")
    require_positive("a", a)
    require_positive_int("b0", b0)

    def token_time(tau_max: int) -> np.ndarray:
        return a * (-(-np.arange(tau_max + 1) // b0)).astype(float)

    def batch_time(prefill=(), decode=()) -> float:
        b = sum(int(ch[1]) for ch in prefill) + len(list(decode))
        return 0.0 if b == 0 else float(c + a * math.ceil(b / b0))

    return BatchLaw(name=f"staircase c={c:.4g}, a={a:.4g}, b0={b0}", token_time=token_time,
                    fixed_s=float(c), tail_slope=float(a) / b0, decode_attention=None,
                    prefill_attention=None, split_period=None, batch_time=batch_time)


def as_law(law: BatchLaw | CostModel, overhead_s: float | None = None) -> BatchLaw:
    """``law`` as a :class:`BatchLaw`: a cost model wrapped by :func:`law_from_cost_model` (with
    ``overhead_s``); a law as it is (``overhead_s`` must then be None)."""
    if isinstance(law, CostModel):
        return law_from_cost_model(law, overhead_s)
    if isinstance(law, BatchLaw):
        if overhead_s is not None:
            raise FieldError("overhead_s", overhead_s, "None for a BatchLaw (set BatchLaw.fixed_s)")
        return law
    raise FieldError("law", type(law).__name__, "a BatchLaw or a theory.cost.CostModel")


def check_caps(b_max, q_max) -> tuple[int | None, int | None]:
    """The token budget ``b_max`` and decode cap ``q_max`` checked (positive integers, or None)."""
    if b_max is not None:
        b_max = require_positive_int("b_max", b_max)
    if q_max is not None:
        q_max = require_positive_int("max_decodes", q_max)
    return b_max, q_max
