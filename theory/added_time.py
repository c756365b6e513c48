"""The numeric formulas of the added-time terms (:mod:`theory.cost_terms`) and the two slots through
which they reach Eq. 7.

An added-time term adds, to a batch of Eq. 7, a time per non-empty batch and a time per decode at
its position (either may be absent)::

    T_B += sum_terms ( per_batch(cm, v) + sum_{decodes at i} per_decode(cm, v, i) )    (tau >= 1)

with ``v`` the term's value. :attr:`theory.cost_model.CostModel.fixed_s` carries the per-batch
time, so everything that pays the fixed time of a batch pays it (:func:`theory.cost.T_batch`, the
simulator's ``overhead``, Eq. 13's one-token batches, the certified capacity's ``c_fix``);
:func:`decode_s` is the per-decode time, which :func:`theory.cost.T_batch` adds per decode, the
simulator adds to its decode prefix sums, and Theorem 1's least work, ``T^max`` and the certified
capacity's ``A_D`` add per decode position. Both are amortized or charged exactly as the fixed
time and the decode attention are, so the bounds stay bounds: a term that adds time per prefill
chunk or per token does not fit these slots and is a term of its own (``docs/howto/add-cost-term.md``).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 7, Theorem 1, Eq. 13.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from theory.cost_terms import TERMS
from theory.errors import FieldError


@dataclass(frozen=True)
class AddedTime:
    """The formulas of one added-time term, one per slot (``None``: the term adds nothing there).

    Attributes
    ----------
    per_batch : callable or None
        ``per_batch(model, value)``: seconds added to every non-empty batch.
    per_decode : callable or None
        ``per_decode(model, value, i)``: seconds added by each decode at position ``i`` (an array
        of positions >= 1 numerically; one position in the symbolic twin), over the whole model.

    The numeric twin's formulas take a :class:`theory.cost_model.CostModel` and numpy arrays; the
    symbolic twin registers its own (:func:`theory.symbolic.register_added_time`) over a
    :class:`theory.symbolic.SymbolicCostModel` and sympy numbers.
    """

    per_batch: Callable | None = None
    per_decode: Callable | None = None

    def __post_init__(self):
        if self.per_batch is None and self.per_decode is None:
            raise FieldError("added time", self, "a per_batch or a per_decode formula")


class Priced(Protocol):
    """What the slots read of a cost model (:class:`theory.cost_model.CostModel`): the added-time
    terms switched on, with their values."""

    added: tuple[tuple[str, float], ...]


FORMULAS: dict[str, AddedTime] = {}  # the numeric formula of each declared added-time term


def register(name: str, formula: AddedTime, registry: dict | None = None) -> None:
    """Register the numeric formula of the declared added-time term ``name`` (``registry``: the
    symbolic twin passes its own)."""
    term = TERMS.get(name)
    if term is None or not term.added:
        raise FieldError("added-time term", name,
                         "a term declared in theory.cost_terms with added=True")
    if not isinstance(formula, AddedTime):
        raise FieldError(f"formula of {name}", type(formula).__name__, "a theory.added_time.AddedTime")
    (FORMULAS if registry is None else registry)[name] = formula


def formula_of(name: str, registry: dict | None = None) -> AddedTime:
    """The formula registered for ``name`` (a clear error when the term was declared and switched
    on but its twin's formula was never registered)."""
    table = FORMULAS if registry is None else registry
    if name not in table:
        raise FieldError("added-time term", name, "a term whose formula is registered in this twin "
                         "(theory.added_time.register, theory.symbolic.register_added_time)")
    return table[name]


def batch_s(cm: Priced) -> float:
    """Seconds the added-time terms of ``cm`` add to every non-empty batch."""
    total = 0.0
    for name, value in cm.added:
        f = formula_of(name).per_batch
        if f is not None:
            total += float(f(cm, value))
    return total


def decode_s(cm: Priced, i) -> np.ndarray:
    """Seconds the added-time terms of ``cm`` add to a decode at each position of ``i``."""
    i = np.asarray(i, dtype=np.int64)
    total = np.zeros(i.shape)
    for name, value in cm.added:
        f = formula_of(name).per_decode
        if f is not None:
            total = total + np.asarray(f(cm, value, i), dtype=float)
    return total


def adds_per_decode(cm: Priced) -> bool:
    """Whether an added-time term of ``cm`` adds time per decode (else :func:`decode_s` is 0)."""
    return any(formula_of(name).per_decode is not None for name, _ in cm.added)


def decode_sums(cm: Priced, L_P, L_D) -> np.ndarray:
    """``sum_{k=1}^{L_D} decode_s(L_P + k)`` per request: a request's per-decode added time."""
    L_P = np.asarray(L_P, dtype=np.int64)
    L_D = np.asarray(L_D, dtype=np.int64)
    top = int((L_P + L_D).max(initial=0))
    prefix = np.zeros(top + 1)
    if top:
        np.cumsum(decode_s(cm, np.arange(1, top + 1)), out=prefix[1:])
    return prefix[L_P + L_D] - prefix[L_P]


def _engine_step(cm: Priced, value: float) -> float:
    """``engine_step_s``: the engine's host time, once per non-empty batch (:mod:`theory.cost_terms`)."""
    return value


register("engine_step_s", AddedTime(per_batch=_engine_step))
