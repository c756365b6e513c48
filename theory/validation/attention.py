"""Self-attention, Eq. 5 and Eq. 6, against measured attention batches of one layer.

A measured ``attention`` row of a profile (:mod:`theory.profiles`) is one layer's self-attention
over a batch of at most one prefill chunk and ``decodes`` decode requests. In the paper's notation
(Section 3.1) the chunk is ``PI(R, i, c)`` with ``c = tokens - decodes`` new tokens and ``i - 1 =
prefill_context`` tokens already in the KV cache, so ``i = prefill_context + 1``; a decode with
``context`` cached tokens is ``DI(R, i)`` at ``i = context + 1`` (its KV cache holds tokens 1 to
``i - 1``, and it attends over ``i`` keys with its own). The prediction of one layer is::

    T^{P,SA}(i_P, c) / N  +  decodes x T^{D,SA}(i_D)

(:func:`theory.cost.T_P_SA` sums Eq. 6 over the ``N`` layers, :func:`theory.cost.T_D_SA` is Eq. 5
for one layer), plus the GPU's fixed time per attention call ``attention_call_s`` (:mod:`theory.terms`;
0 unless the preset states it). LLMServingSim's profiler times one decoder layer (its ``meta.yaml`` sets
``num_hidden_layers = 1``; its simulator multiplies by the layer count), hence the ``/ N``.

Scored per GPU x model x TP x kind (:data:`KINDS`: prefill chunk only, decodes only, both) by the
median and 90th percentile of ``|predicted / measured - 1|`` (:class:`theory.validation.errors.ErrorStats`)
under three cost models (:data:`SCHEMES`): the GPU's roofline preset and its preset as shipped, both
in ``real`` mode (the served widths: ``d`` = query heads x head width for Eq. 6, the KV heads' width
for Eq. 5), and ``paper`` mode (one head of width ``d`` for both). ``ratio_median`` is the median of
``predicted / measured`` (below 1: the model predicts too little).

The fixed time per call is fitted and scored out of sample (:func:`fit_attention_call`): the
batches are split by shape (:func:`attention_split`: every 4th distinct ``(tokens, decodes,
context, prefill_context)`` held out, the rule of :func:`theory.validation.gemm.token_split`),
``attention_call_s`` is fitted on the training batches of the kinds :data:`FIT_KINDS` (a prefill
chunk alone, decodes alone: the batches whose kernel Eq. 5-6's summed work describes; a mixed batch's
kernel time follows another law, see ``README.md``), and the held-out batches of every kind are
scored with the shipped preset without the term (``before``) and with the fitted value (``after``).

The decodes of a mixed batch run through FlashAttention's varlen path, which reads each decode's KV
cache once per query head (``mixed_decode_eta``, :mod:`theory.terms`); their law ``eta T^{D,SA}``
at the query heads' width is fitted the same way (:func:`mixed_fit`): ``eta`` on the training
batches of kind ``mixed`` with ``attention_call_s`` at its fitted value, scored on the held-out
batches (``mixed``: the held-out error with both fitted terms). ``before`` and ``after`` leave
``mixed_decode_eta`` off, so they are the figures without it.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 5, Eq. 6, Definitions 1-2. Data: casys-kaist/LLMServingSim
@ 5daddb21a545658d5150b535712d0494584b5278 (theory/data/profiles/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from scipy.optimize import minimize_scalar

from theory.builder import CostSpec, cost_model
from theory.cost import T_D_SA, T_P_SA, CostModel, T_D_SA_mixed, build_cost_model
from theory.errors import TileDivisibilityError
from theory.hardware import get_gpu
from theory.models import get_model

OPERATION = "attention"
KINDS = {
    "prefill": "a prefill chunk alone (no decodes)",
    "decode": "decodes alone (no prefill chunk)",
    "mixed": "a prefill chunk and decodes in one batch",
}
SCHEMES = {
    "roofline": "GPU preset's roofline, real mode (served attention widths, GQA)",
    "shipped": "GPU preset as real mode ships it",
    "paper": ("GPU preset as shipped, paper mode (one head of width d for Eq. 5 and Eq. 6; empty at TP > 1: "
              "the paper's layer has no TP split, and for a model outside Section 3.2.1's divisibility)"),
}
FIT_KINDS = ("prefill", "decode")
HELD_OUT_EVERY = 4
GROUP_COLUMNS = {  # what names a group of measured rows (here and in theory.validation.results.COLUMNS)
    "profile": "shipped profile the rows come from (theory/data/profiles)",
    "gpu": "llmq GPU preset key of the measured card",
    "model": "llmq model preset key",
    "tp": "tensor-parallel degree of the measurement",
}
COLUMNS = {
    **GROUP_COLUMNS,
    "kind": "batch kind: " + "; ".join(f"{k}: {v}" for k, v in KINDS.items()) + "; all: every row",
    "n": "measured attention batches in the row",
    **{f"{s}_{k}": {"median": f"median of |predicted/measured - 1| under '{s}' ({v})",
                    "p90": f"90th percentile of |predicted/measured - 1| under '{s}'",
                    "ratio_median": f"median of predicted/measured under '{s}' (< 1: too little)"}[k]
       for s, v in SCHEMES.items() for k in ("median", "p90", "ratio_median")},
    "call_s_fit": ("attention_call_s (seconds per layer per call) fitted on the training batches of kinds "
                   + " and ".join(FIT_KINDS) + " of this GPU x model x TP (attention_split: every "
                   f"{HELD_OUT_EVERY}th batch shape held out); empty: no training batch"),
    "n_held_out": "held-out batches of this kind",
    "before_median": "median of |predicted/measured - 1| on the held-out batches, shipped preset with "
                     "attention_call_s = 0 and mixed_decode_eta = 0",
    "before_p90": "90th percentile of the same",
    "after_median": "median of |predicted/measured - 1| on the held-out batches, shipped preset with "
                    "attention_call_s = call_s_fit and mixed_decode_eta = 0",
    "after_p90": "90th percentile of the same",
    "eta_fit": ("mixed_decode_eta (factor of Eq. 5 at the query heads' width for a decode beside a prefill "
                "chunk) fitted on the training batches of kind mixed with attention_call_s = call_s_fit; "
                "empty: no training batch of that kind"),
    "mixed_median": "median of |predicted/measured - 1| on the held-out batches, shipped preset with "
                    "attention_call_s = call_s_fit and mixed_decode_eta = eta_fit",
    "mixed_p90": "90th percentile of the same",
}


def predict_attention(cm: CostModel, tokens, decodes, context, prefill_context) -> np.ndarray:
    """Predicted seconds of one layer's self-attention over measured batches (module docstring).

    Parameters
    ----------
    cm : CostModel
        The GPU and model.
    tokens, decodes : array_like of int
        Query tokens of the batch (prefill chunk + one per decode) and decode requests.
    context, prefill_context : array_like of int
        Tokens cached per decode request, and before the prefill chunk; read only where there
        are decodes, and a chunk (``tokens > decodes``), respectively.

    Returns
    -------
    numpy.ndarray
        ``T^{P,SA}(prefill_context + 1, tokens - decodes) / N + decodes T^{D,SA}(context + 1)``,
        plus ``attention_call_s`` per batch when attention is priced; beside a chunk the decodes
        take :func:`theory.cost.T_D_SA_mixed` (``mixed_decode_eta``; Eq. 5 when it is off).

    References
    ----------
    Eq. 5 (:func:`theory.cost.T_D_SA`), Eq. 6 (:func:`theory.cost.T_P_SA`).
    """
    tokens, decodes, context, prefill_context = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.int64) for x in (tokens, decodes, context, prefill_context)))
    chunk = tokens - decodes
    out = np.zeros(tokens.shape)
    pre, dec = chunk > 0, decodes > 0
    if pre.any():
        out[pre] += T_P_SA(cm, prefill_context[pre] + 1, chunk[pre]) / cm.N
    alone, mixed = dec & ~pre, dec & pre
    if alone.any():
        out[alone] += decodes[alone] * T_D_SA(cm, context[alone] + 1)
    if mixed.any():
        out[mixed] += decodes[mixed] * T_D_SA_mixed(cm, context[mixed] + 1)
    if cm.attention and cm.attention_call_s:
        out[tokens > 0] += cm.attention_call_s
    return out


def attention_split(tokens, decodes, context, prefill_context, every: int = HELD_OUT_EVERY) -> np.ndarray:
    """Held-out mask: every ``every``-th distinct batch shape ``(tokens, decodes, context,
    prefill_context)`` in sorted order, ranked from 0 (ranks ``every - 1, 2 every - 1, ...`` held
    out: the rule of :func:`theory.validation.gemm.token_split`, applied to the shapes)."""
    shapes = np.stack([np.asarray(x, dtype=np.int64) for x in (tokens, decodes, context, prefill_context)],
                      axis=1)
    rank = np.unique(shapes, axis=0, return_inverse=True)[1].ravel()
    return rank % every == every - 1


def fit_attention_call(predicted, measured) -> float:
    """The fixed time per call ``c >= 0`` minimising ``sum log((predicted + c) / measured)^2``.

    Parameters
    ----------
    predicted, measured : array_like of float
        Eq. 5-6 per layer without the term (:func:`predict_attention`) and the measured seconds of
        the same batches (at least one).

    Returns
    -------
    float
        The fitted ``attention_call_s``, seconds: the squared log-ratio weighs a batch's relative
        error symmetrically, so the many long batches do not swamp the short ones where a fixed
        time shows.
    """
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    if not p.size:
        raise ValueError("fit_attention_call needs at least one batch")
    return _least_log_ratio(p, np.ones_like(p), m, float(m.max()), 1e-12)


def fit_mixed_eta(base, decode_q, measured) -> float:
    """The factor ``eta >= 0`` minimising ``sum log((base + eta decode_q) / measured)^2``.

    Parameters
    ----------
    base : array_like of float
        Each batch's prediction without its decodes' attention (the chunk's Eq. 6 and
        ``attention_call_s``).
    decode_q : array_like of float
        ``decodes x T^{D,SA}(context + 1)`` at the query heads' width (``eta = 1``), > 0.
    measured : array_like of float
        Measured seconds (at least one batch).

    Returns
    -------
    float
        The fitted ``mixed_decode_eta``; the search runs over ``[0, max(measured / decode_q)]``,
        past which every batch is over-predicted and the loss only grows.
    """
    b, q, m = (np.asarray(x, dtype=float) for x in (base, decode_q, measured))
    if not q.size or np.any(q <= 0):
        raise ValueError("fit_mixed_eta needs at least one batch, each with decodes")
    return _least_log_ratio(b, q, m, float(np.max(m / q)), 1e-9)


def _least_log_ratio(base, per_unit, measured, upper: float, xatol: float) -> float:
    """The ``x`` in ``[0, upper]`` minimising ``sum log((base + x per_unit) / measured)^2``
    (bounded scalar search, :func:`scipy.optimize.minimize_scalar`, to ``xatol``)."""
    res = minimize_scalar(lambda x: float(np.sum(np.log((base + x * per_unit) / measured) ** 2)),
                          bounds=(0.0, upper), method="bounded", options={"xatol": xatol})
    return float(res.x)


def mixed_parts(cm: CostModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's prediction without its decodes beside a chunk, and those decodes' Eq. 5 at the
    query heads' width (0 where the row is not mixed): ``predict_attention = base + eta decode_q``
    on the mixed rows for a cost model with ``mixed_decode_eta = eta`` (:func:`fit_mixed_eta`)."""
    tokens, decodes, context = (np.asarray(rows[k], dtype=np.int64) for k in ("tokens", "decodes", "context"))
    mixed = (decodes > 0) & (tokens > decodes)
    base = predict_attention(replace(cm, mixed_decode_eta=0.0), np.where(mixed, tokens - decodes, tokens),
                             np.where(mixed, 0, decodes), context, rows["prefill_context"])
    decode_q = np.zeros(tokens.shape)
    if mixed.any():
        decode_q[mixed] = decodes[mixed] * T_D_SA_mixed(replace(cm, mixed_decode_eta=1.0), context[mixed] + 1)
    return base, decode_q


def mixed_fit(cm: CostModel, rows: np.ndarray, held: np.ndarray) -> tuple[float | None, np.ndarray]:
    """Fit ``mixed_decode_eta`` on the training batches of kind ``mixed`` (module docstring).

    Parameters
    ----------
    cm : CostModel
        The GPU and model with the ``attention_call_s`` to keep (its ``mixed_decode_eta`` is
        replaced).
    rows : numpy.ndarray
        Attention rows of one GPU x model x TP.
    held : numpy.ndarray of bool
        The held-out batches (:func:`attention_split`).

    Returns
    -------
    eta : float or None
        :func:`fit_mixed_eta` on the training mixed batches; ``None`` if there are none.
    predicted : numpy.ndarray
        :func:`predict_attention` with ``mixed_decode_eta = eta`` (off if ``None``).
    """
    base, decode_q = mixed_parts(cm, rows)
    train = ~held & (kind_of(rows["tokens"], rows["decodes"]) == "mixed")
    if not train.any() or not cm.attention:
        return None, base
    eta = fit_mixed_eta(base[train], decode_q[train], rows["seconds"][train])
    return eta, base + eta * decode_q


def kind_of(tokens, decodes) -> np.ndarray:
    """``"prefill"``, ``"decode"`` or ``"mixed"`` per batch (:data:`KINDS`)."""
    tokens, decodes = np.asarray(tokens), np.asarray(decodes)
    chunk = tokens - decodes
    return np.where(decodes == 0, "prefill", np.where(chunk == 0, "decode", "mixed"))


def call_fit(cm: CostModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, float | None, np.ndarray]:
    """Fit ``attention_call_s`` to the training batches of ``rows`` (module docstring).

    Parameters
    ----------
    cm : CostModel
        The GPU and model; its own ``attention_call_s`` and ``mixed_decode_eta`` are set to 0.
    rows : numpy.ndarray
        Attention rows of one GPU x model x TP (:func:`theory.profiles.load_profile`).

    Returns
    -------
    held : numpy.ndarray of bool
        The held-out batches (:func:`attention_split`).
    before : numpy.ndarray
        The prediction without the term (:func:`predict_attention`).
    c_fit : float or None
        :func:`fit_attention_call` on the training batches of :data:`FIT_KINDS`; ``None`` if none.
    after : numpy.ndarray
        The prediction with ``attention_call_s = c_fit`` (``before`` if ``None``).
    """
    cm = replace(cm, attention_call_s=0.0, mixed_decode_eta=0.0)
    held = attention_split(rows["tokens"], rows["decodes"], rows["context"], rows["prefill_context"])
    before = predict_attention(cm, rows["tokens"], rows["decodes"], rows["context"], rows["prefill_context"])
    train = ~held & np.isin(kind_of(rows["tokens"], rows["decodes"]), FIT_KINDS)
    c_fit = fit_attention_call(before[train], rows["seconds"][train]) if train.any() else None
    after = before + (c_fit if c_fit is not None and cm.attention else 0.0)
    return held, before, c_fit, after


def score_attention(profile: str, rows: np.ndarray, *, gpu_file: str | None = None,
                    model_file: str | None = None) -> list[dict]:
    """Per GPU x model x TP: one row per kind present and one for ``"all"`` (:data:`COLUMNS`).

    ``rows`` are a loaded profile's rows; those of operation :data:`OPERATION` are scored. The
    statistics are those of :class:`theory.validation.errors.ErrorStats` (median and numpy's default 90th
    percentile of ``|predicted / measured - 1|``).
    """
    rows = rows[rows["operation"] == OPERATION]
    out = []
    for g, m, tp in sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(),
                                   strict=True))):
        sel = rows[(rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp)]
        models = _cost_models(g, m, int(tp), gpu_file, model_file)
        axes = (sel["tokens"], sel["decodes"], sel["context"], sel["prefill_context"])
        pred = {s: _predict(cm_of, axes, may_not_divide=s == "paper") for s, cm_of in models.items()}
        kinds = kind_of(sel["tokens"], sel["decodes"])
        shipped = models["shipped"]()
        held, before, c_fit, after = call_fit(shipped, sel)
        eta, mixed = mixed_fit(replace(shipped, attention_call_s=c_fit or 0.0), sel, held)
        for kind in (*(k for k in KINDS if (kinds == k).any()), "all"):
            part = kinds == kind if kind != "all" else np.ones(sel.size, dtype=bool)
            row = {"profile": profile, "gpu": g, "model": m, "tp": int(tp), "kind": kind,
                   "n": int(part.sum())}
            for s, p in pred.items():
                if p is None:
                    row |= {f"{s}_median": None, f"{s}_p90": None, f"{s}_ratio_median": None}
                    continue
                ratio = p[part] / sel["seconds"][part]
                err = np.abs(ratio - 1.0)
                row |= {f"{s}_median": float(np.median(err)), f"{s}_p90": float(np.percentile(err, 90)),
                        f"{s}_ratio_median": float(np.median(ratio))}
            ho = part & held
            row |= {"call_s_fit": c_fit, "n_held_out": int(ho.sum()), "eta_fit": eta}
            for label, p, fit in (("before", before, c_fit), ("after", after, c_fit), ("mixed", mixed, eta)):
                err = np.abs(p[ho] / sel["seconds"][ho] - 1.0)
                fitted = ho.any() and fit is not None
                row |= {f"{label}_median": float(np.median(err)) if fitted else None,
                        f"{label}_p90": float(np.percentile(err, 90)) if fitted else None}
            out.append(row)
    return out


def _predict(cm_of: Callable[[], CostModel] | None, axes: tuple, may_not_divide: bool) -> np.ndarray | None:
    """:func:`predict_attention` by the cost model ``cm_of`` builds; ``None`` without one, or, where
    ``may_not_divide`` (paper mode), when the model is outside Section 3.2.1's divisibility."""
    if cm_of is None:
        return None
    try:
        cm = cm_of()
    except TileDivisibilityError:
        if not may_not_divide:
            raise
        return None
    return predict_attention(cm, *axes)


def _cost_models(gpu: str, model: str, tp: int, gpu_file: str | None,
                 model_file: str | None) -> dict[str, Callable[[], CostModel] | None]:
    """The cost model of each scheme of :data:`SCHEMES` (built when called) for rows of degree ``tp``.

    At ``tp > 1`` a row is one rank's attention over its share of the heads (LLMServingSim's
    ``tp<N>`` folders: the shard timed on one GPU, no collective), so the GPU is set to ``tp``
    (:mod:`theory.terms`: each rank's heads) with a free all-reduce, which Eq. 5-6 do not use;
    paper mode, whose layer has no TP split, is ``None`` there.
    """
    if tp == 1:
        return {
            "roofline": lambda: build_cost_model(get_gpu(gpu, gpu_file), get_model(model, model_file),
                                                 "real"),
            "shipped": lambda: cost_model(CostSpec(gpu, model, "real", None, gpu_file, model_file)),
            "paper": lambda: cost_model(CostSpec(gpu, model, "paper", None, gpu_file, model_file)),
        }

    def at_tp(calibrated: bool) -> CostModel:
        g = get_gpu(gpu, gpu_file, calibrated=calibrated)
        terms = replace(g.terms, tp=tp, allreduce_latency_s=0.0, allreduce_bandwidth=float("inf"))
        return build_cost_model(replace(g, terms=terms), get_model(model, model_file), "real")

    return {"roofline": lambda: at_tp(False), "shipped": lambda: at_tp(True), "paper": None}


__all__ = ["COLUMNS", "FIT_KINDS", "KINDS", "OPERATION", "SCHEMES", "attention_split", "call_fit",
           "fit_attention_call", "fit_mixed_eta", "kind_of", "mixed_fit", "mixed_parts", "predict_attention",
           "score_attention"]
