"""Whole batches under Eq. 7: the cost model that runs a batch's tensor-parallel degree, the
time of a splitwise batch row, its parts (compute, all-reduce, bytes beyond the large-message
boundary) and the cross-validation folds of a batch series.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 7, Section 3.1; :mod:`theory.terms` (tensor parallelism).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from theory.builder import CostSpec, cost_model
from theory.cost import Batch, CostModel, T_batch, build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.terms import allreduce_count, allreduce_time
from theory.validation.stack_law import LARGE_MESSAGE_BYTES

NEEDS_TP = ("needs tensor parallelism: an all-reduce law in the GPU profile "
            "(allreduce_latency_s, allreduce_bandwidth_gbs; theory.terms)")
BATCH_OPERATIONS = ("prefill_batch", "decode_batch")
# one tensor-parallel rank's share of a whole batch, timed alone (no all-reduce) -> the batch it is of
RANK_OPERATIONS = {"prefill_batch_rank": "prefill_batch", "decode_batch_rank": "decode_batch"}


def batch_cost_model(gpu: str, model: str, tp: int, *, gpu_file: str | None = None,
                     model_file: str | None = None) -> tuple[CostModel | None, str]:
    """The cost model that predicts a whole batch on ``tp`` GPUs, or ``(None, reason)``.

    ``tp = 1``: the profile as named. ``tp > 1``: the profile with its tensor-parallel degree set
    to ``tp`` (:mod:`theory.terms`: Megatron split and all-reduces), which needs an all-reduce law
    in the GPU profile; without one, or when ``tp`` cannot split the model, the reason.

    References
    ----------
    Eq. 7; :mod:`theory.terms` (tensor parallelism).
    """
    if tp == 1:
        return cost_model(CostSpec(gpu, model, "real", None, gpu_file, model_file)), ""
    g = get_gpu(gpu, gpu_file, calibrated=True)
    if g.terms.allreduce_bandwidth is None or g.terms.linear_law is not None:
        return None, NEEDS_TP
    try:
        return build_cost_model(replace(g, terms=replace(g.terms, tp=tp)), get_model(model, model_file),
                                "real"), ""
    except FieldError as err:
        return None, str(err)


def prompts(tokens: int, context: int) -> int:
    """Prompts of a splitwise prefill row: ``tokens / context`` of ``context`` tokens, at least one."""
    return max(tokens // max(context, 1), 1)


def batch_tokens(operation: str, tokens: int, context: int) -> int:
    """Tokens one iteration of the batch :func:`batch_time` prices runs through the linear layers
    (and each all-reduce): every prompt token, or one per decode."""
    if RANK_OPERATIONS.get(operation, operation) == "prefill_batch":
        return prompts(tokens, context) * context
    return tokens


def batch_time(cm: CostModel, operation: str, tokens: int, context: int, generated: int) -> float:
    """Eq. 7 for a splitwise row: ``tokens / context`` prompts of ``context`` tokens prefilled in
    one batch, or ``tokens`` decodes at the mean position of the ``generated - 1`` decode
    iterations the row averages (``context + generated / 2``, profiles README). A rank's share
    (:data:`RANK_OPERATIONS`) is predicted as the batch it is of.

    References
    ----------
    Eq. 7; Section 3.1 (batches of prefill and decode iterations).
    """
    operation = RANK_OPERATIONS.get(operation, operation)
    if operation == "prefill_batch":
        return T_batch(cm, Batch.of(prefill=[(1, context)] * prompts(tokens, context)))
    if operation == "decode_batch":
        position = context + max(generated, 2) // 2
        return T_batch(cm, Batch.of(decode=[position] * tokens))
    raise FieldError("operation", operation, f"one of {', '.join(BATCH_OPERATIONS)}")


def batch_folds(rows: np.ndarray, every: int = 4) -> np.ndarray:
    """Cross-validation fold of each whole-batch row: per operation, the rank of its distinct batch
    shape ``(tokens, context, generated)`` in sorted order modulo ``every``, and ``-1`` (never held
    out) for the first and last shape of each operation's series.

    Fold ``j`` holds out the rows of fold ``j`` and trains on every other row, so that each interior shape
    is predicted once, by a law that never saw it, and every held-out shape lies inside the trained range
    (as :func:`theory.validation.gemm.token_split` trains on a GeMM's smallest token counts). A single
    split is too few points here: a series has 13 to 19 shapes, and one fold of them decides a p90. Ranked
    over the operations together, the first prompt shape had taken the rank after the last decode shape
    and been held out (on splitwise's grid the 128-token prompt and the 32,768-token batch, both ends of
    the prompt series: extrapolation, not held-out tokens). """
    if isinstance(every, bool) or int(every) != every or every < 2:
        raise FieldError("every", every, "an integer >= 2")
    folds = np.full(rows.size, -1, dtype=np.int64)
    for op in np.unique(rows["operation"]):
        on = np.flatnonzero(rows["operation"] == op)
        shapes = np.stack([rows[c][on] for c in ("tokens", "context", "generated")], axis=1)
        rank = np.unique(shapes, axis=0, return_inverse=True)[1].ravel()
        interior = (rank > 0) & (rank < rank.max())
        folds[on[interior]] = rank[interior] % every
    return folds


def batch_parts(cm: CostModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(compute, allreduce, large)``: Eq. 7 of each whole-batch row (:func:`batch_time`) split into the
    time of its all-reduces and the rest, the all-reduce part being Eq. 7 less Eq. 7 with the all-reduces
    free (zero latency, unbounded bandwidth; 0 at TP 1); ``large`` is the bandwidth time of the bytes of
    each all-reduce beyond :data:`theory.validation.stack_law.LARGE_MESSAGE_BYTES` (part of ``allreduce``;
    :func:`theory.terms.allreduce_count` messages of the batch's tokens x ``d_x`` activations)."""
    free = cm
    terms = cm.gpu.terms
    if terms.tp > 1:
        free = build_cost_model(replace(cm.gpu, terms=replace(terms, allreduce_latency_s=0.0,
                                                              allreduce_bandwidth=np.inf)),
                                cm.model, cm.mode)

    def times(model):
        return np.array([batch_time(model, str(r["operation"]), int(r["tokens"]), int(r["context"]),
                                    int(r["generated"])) for r in rows])

    total, compute = times(cm), times(free)
    tokens = np.array([batch_tokens(str(r["operation"]), int(r["tokens"]), int(r["context"])) for r in rows])
    beyond = np.maximum(tokens * terms.bytes_per_element * cm.model.d_x - LARGE_MESSAGE_BYTES, 0.0)
    large = allreduce_count(cm.model) * allreduce_time(terms, beyond, latency=False)
    return compute, total - compute, large


__all__ = [
    "BATCH_OPERATIONS",
    "NEEDS_TP",
    "RANK_OPERATIONS",
    "batch_cost_model",
    "batch_folds",
    "batch_parts",
    "batch_time",
    "batch_tokens",
    "prompts",
]
