"""Eq. 7 and the step-time terms scored on measured whole serving-engine steps.

The data are a step table (:mod:`theory.validation.steps_data`; packaged: ``llmq_h200_steps.csv``,
Llama-3.1-8B's shapes with random bf16 weights on one H200, ``benchmarks/device/measure_steps.py``):
decode-only steps at vLLM v1's CUDA-graph capture sizes and off them, and mixed steps of decodes
plus one prefill chunk, each replayed as one CUDA graph (``graph``: GPU time) and launched op by op
from Python (``eager``: host wall time). Three things are scored, each derived from the table alone.

1. **Eq. 7 per step** (:func:`predict_step`, real mode on the table's GPU preset as shipped,
   :func:`theory.validation.batches.batch_cost_model`). A step of ``b`` decodes whose caches hold
   ``C`` tokens and a chunk of ``c`` tokens whose request holds ``p`` is the batch
   ``{DI(i = C + 1) x b, PI(i = p + 1, c)}`` (Section 3.1; a decode at position ``C + 1`` attends to
   ``C + 1`` keys, as the script's does; :func:`theory.validation.batches.batch_time` prices a
   ``decode_batch`` row at the same position). Scored against the ``graph`` rows vLLM would run:
   the decode-only steps at their capture size (``padded_to``), predicted at their real size
   ``decodes`` (Eq. 7 as printed) and with the padding term (:func:`predict_step` with
   ``padded=True``: the linear and element-wise terms on ``padded_to`` rows, attention on the real
   ``decodes``, as the padding rows attend to nothing), and the mixed steps. Each set's median and
   90th percentile of ``|predicted / measured - 1|`` (:class:`~theory.validation.errors.Accuracy`).

   Where it misses (:class:`Parts`): the step's GeMMs as it ran them (the layer GeMMs on every row,
   the LM head on one row per sequence) are taken from the preset (on the shipped H200 preset the
   linear GeMMs are interpolated from ``llmq_h200``'s measured GeMMs: measurements of the same
   kernels), and the rest of each measured step is set against Eq. 7's other terms: the non-GeMM
   time of the smallest step (where Eq. 7 has only ``tau / mu_nLin`` and attention); the growth
   of decode attention with the cache (the same decodes at two cache lengths: GeMMs and
   element-wise work cancel) and the KV bandwidth it implies; the growth of the chunk's attention
   with its request's cached tokens (the same step at two chunk contexts) and the attention
   FLOP rate it implies; the LM head, which Eq. 7 as printed runs on every row of a chunk; and,
   in sample and only as a diagnosis, the non-negative least-squares multipliers of Eq. 7's
   element-wise, decode-attention and chunk-attention terms plus a fixed time per step that
   describe the measured rest (:func:`scipy.optimize.nnls` on relative errors).
2. **The CUDA-graph padding term** (:class:`Padding`). For each off-capture size ``b`` the table
   times the step padded to ``P`` (the next capture size) and unpadded; where the capture size
   itself was timed (the same cache length, ``P`` real decodes), the rule "a decode-only step of
   ``b`` sequences costs the step of ``P``" predicts the padded row by the capture row: its error
   ``|capture / padded - 1|``, beside what padding costs (``padded / unpadded - 1``) and what the
   padding term of Eq. 7 says it costs.
3. **The fixed time per engine step** (:class:`~theory.validation.steps_fixed.FixedTime`):
   ``eager - graph`` per step (the graph timed without padding), its median and spread per band of
   batch size, and whether one constant describes it: a constant fitted on half the rows predicts
   ``eager = graph + c`` on the other half (two folds, alternate rows in order of batch size;
   :func:`~theory.validation.steps_fixed.fit_constant`), beside the launch overlap law
   ``eager = max(h, graph + c)`` (:func:`~theory.validation.steps_fixed.fit_overlap`: the host
   issues kernels while the GPU runs them, so a step costs the longer of the two plus what does not
   overlap). **What ``eager`` is**: PyTorch launching this script's forward pass op by op (Python
   and the dispatcher), not a serving engine's per-step overhead, which adds scheduling, input
   preparation and sampling on the CPU; it is a measured reference for what a step launched
   without a graph pays, not vLLM's figure.

Nothing here is fitted into a shipped preset. ``python -m theory.validation.steps [--json]`` prints
the score (:func:`console_lines`, :func:`to_json`); :mod:`theory.validation.steps_report` renders it
for the documentation.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7 and Section 3.2. vLLM v1's capture sizes and padding:
``vllm/config/vllm.py`` (``VllmConfig._set_cudagraph_sizes``), as cited in
``benchmarks/device/measure_steps.py``.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from theory.cost import (
    T_D_SA,
    T_P_SA,
    Batch,
    CostModel,
    T_batch,
    T_D_SA_mixed,
    T_GeMM_terms,
    T_Lin,
    linear_law_name,
)
from theory.errors import FieldError
from theory.io import json_text
from theory.terms import LM_HEAD
from theory.validation.batches import batch_cost_model
from theory.validation.errors import Accuracy, Summary
from theory.validation.steps_data import StepRow, StepTable, load_steps
from theory.validation.steps_fixed import FixedTime, score_fixed, unpadded_graphs

ACCURACY_SETS = ("decode_real", "decode_padded", "mixed")
ACCURACY_MEANING = {
    "decode_real": "decode-only steps as vLLM replays them (padded to the capture size), Eq. 7 at the real "
                   "number of decodes",
    "decode_padded": "the same steps, Eq. 7 with the padding term (linear and element-wise terms on the "
                     "capture size's rows, attention on the real decodes)",
    "mixed": "decodes plus one prefill chunk (not padded), Eq. 7",
}
DIAGNOSED_TERMS = ("elementwise", "decode_attention", "chunk_attention")  # Eq. 7's terms the diagnosis scales


@dataclass(frozen=True)
class StepOptions:
    """What the steps are scored with.

    Attributes
    ----------
    gpu : str or None
        GPU preset whose real mode predicts (``None``: the table's GPU, its shipped preset).
    gpu_file, model_file : str or None
        User TOML files overriding or adding presets (as every command takes them).
    """

    gpu: str | None = None
    gpu_file: str | None = None
    model_file: str | None = None


@dataclass(frozen=True)
class Parts:
    """Where Eq. 7 misses, part by part (the module docstring, item 1).

    Attributes
    ----------
    smallest : dict
        The smallest decode-only step (fewest decodes, shortest cache, unpadded): ``measured_s``,
        ``gemms_s`` (its GeMMs as run), ``measured_rest_s = measured - gemms``, ``predicted_rest_s``
        (Eq. 7 less its GeMMs: element-wise, attention and fixed terms), and the row's ``decodes``
        and ``decode_context``.
    decode_attention : dict
        Over pairs of decode-only steps at the same decodes and capture size and two cache lengths:
        ``ratio`` (:class:`~theory.validation.errors.Summary` of predicted / measured growth),
        ``measured_gbs`` and ``predicted_gbs`` (the KV-cache bytes the longer cache adds, over the
        measured and the predicted growth, GB/s), ``contexts`` (the two lengths) and ``pairs``.
    chunk_attention : dict
        Over pairs of mixed steps at the same decodes and chunk and two chunk contexts: ``ratio``,
        ``measured_tflops`` and ``predicted_tflops`` (the attention FLOPs the added context costs,
        ``4 N d_q c Delta p``, over the measured and predicted growth), ``contexts``, ``pairs``.
    lm_head : Summary
        Over the mixed steps: the time Eq. 7 gives the LM head on the rows the step did not run it
        on (every chunk row but the last), as a fraction of the measured step.
    multipliers : dict
        The diagnosis fit: ``fixed_s`` and the multipliers ``elementwise``, ``decode_attention``,
        ``chunk_attention`` of Eq. 7's terms (``None`` for a term no scored step has), and
        ``in_sample`` (:class:`~theory.validation.errors.Accuracy` of GeMMs + the fitted rest on the
        same steps).
    """

    smallest: dict
    decode_attention: dict
    chunk_attention: dict
    lm_head: Summary
    multipliers: dict


@dataclass(frozen=True)
class Padding:
    """The CUDA-graph padding term (the module docstring, item 2).

    Attributes
    ----------
    points : tuple of dict
        Per off-capture decode-only step: ``decodes``, ``decode_context``, ``padded_to``,
        ``padded_s``, ``unpadded_s`` and ``capture_s`` (``None`` where not timed), ``cost``
        (``padded / unpadded - 1``), ``capture_error`` (``capture / padded - 1``),
        ``predicted_cost`` (Eq. 7 with the padding term over Eq. 7 at the real size, less 1).
    cost, predicted_cost : Summary
        Of the measured and predicted padding costs.
    capture_rule, no_padding : Summary
        ``|capture / padded - 1|`` (the rule "costs the step of the next capture size") and
        ``|unpadded / padded - 1|`` (the step priced as if it were not padded).
    """

    points: tuple[dict, ...]
    cost: Summary
    predicted_cost: Summary
    capture_rule: Summary
    no_padding: Summary


@dataclass(frozen=True)
class StepScore:
    """The scoring of one step table (:func:`score_steps`).

    Attributes
    ----------
    table, gpu, model, tp, setup : str, str, str, int, str
        The table and what it measured.
    preset : str
        The cost model that predicted (:meth:`theory.cost.CostModel.describe`).
    gemm_law : str
        What priced its linear GeMMs (:func:`theory.cost.linear_law_name`).
    accuracy : dict of str to Accuracy
        Per :data:`ACCURACY_SETS`.
    parts : Parts
    padding : Padding
    fixed : FixedTime
    rows : tuple of dict
        Every scored ``graph`` row: its step, ``measured_s``, ``predicted_s`` (at the real size),
        ``predicted_padded_s`` and Eq. 7's parts (:func:`step_parts`).
    """

    table: str
    gpu: str
    model: str
    tp: int
    setup: str
    preset: str
    gemm_law: str
    accuracy: dict[str, Accuracy]
    parts: Parts
    padding: Padding
    fixed: FixedTime
    rows: tuple[dict, ...] = field(repr=False)


# --- Eq. 7 of one step ------------------------------------------------------------------------


def step_batch(row: StepRow) -> Batch:
    """The batch of a step (Section 3.1): ``decodes`` decodes at position ``decode_context + 1``
    and, for a mixed step, the chunk ``PI(chunk_context + 1, chunk_tokens)``; padding rows are not
    iterations of any request."""
    prefill = [(row.chunk_context + 1, row.chunk_tokens)] if row.chunk_tokens else []
    return Batch.of(prefill=prefill, decode=[row.decode_context + 1] * row.decodes if row.decodes else [])


def predict_step(cm: CostModel, row: StepRow, padded: bool = False) -> float:
    """Eq. 7 of a step (:func:`theory.cost.T_batch`), with ``padded`` the padding term: a step run
    at ``padded_to > decodes`` rows adds the linear and element-wise time of the padding rows,
    ``T_Lin(padded_to) - T_Lin(decodes) + (padded_to - decodes) / mu_nLin``; their attention is 0.

    References
    ----------
    Eq. 4 and 7; vLLM v1's padding of a decode-only batch to its capture size
    (``benchmarks/device/measure_steps.py``).
    """
    t = T_batch(cm, step_batch(row))
    if padded and row.padded_to is not None and row.padded_to > row.decodes:
        t += (float(T_Lin(cm, row.padded_to)) - float(T_Lin(cm, row.decodes))
              + (row.padded_to - row.decodes) / cm.mu_nLin)
    return t


def step_parts(cm: CostModel, row: StepRow) -> dict[str, float]:
    """Eq. 7's terms of a step on the rows it ran (``row.tokens``, padding included), seconds.

    ``gemms`` (Eq. 4: :func:`theory.cost.T_Lin`), ``elementwise`` (``tokens / mu_nLin``),
    ``decode_attention`` (``N`` times Eq. 5 per decode), ``chunk_attention`` (Eq. 6), ``fixed``
    (the profile's fixed time per batch) and ``lm_rows`` (the per-row vocab projection of the
    ``lm_head`` term, 0 without it) sum to :func:`predict_step` with ``padded=True``.
    ``lm_head_excess`` (not in that sum) is the part of ``gemms`` Eq. 4 spends on the vocab
    projection of the rows the step did not run it on (the step runs it on :attr:`StepRow.lm_rows`).
    """
    batch = step_batch(row)
    tau = row.tokens
    decode = 0.0
    if row.decodes:
        law = T_D_SA_mixed if row.chunk_tokens else T_D_SA
        decode = cm.N * float(law(cm, batch.decode_i).sum())
    chunk = float(T_P_SA(cm, batch.prefill_i, batch.prefill_c).sum()) if row.chunk_tokens else 0.0
    head = next((g for g in cm.gemms if g.name == LM_HEAD), None)
    excess = 0.0
    if head is not None and tau > row.lm_rows:
        on_all, on_run = (T_GeMM_terms(cm, head.d_row, n, head.d_red) for n in (tau, row.lm_rows))
        excess = float(on_all - on_run)
    lm_rows = cm.lm_out_s * (batch.decode_i.size + batch.prefill_i.size)
    return {"gemms": float(T_Lin(cm, tau)), "elementwise": tau / cm.mu_nLin, "decode_attention": decode,
            "chunk_attention": chunk, "fixed": cm.fixed_s, "lm_rows": lm_rows, "lm_head_excess": excess}


SUMMED_PARTS = ("gemms", "elementwise", "decode_attention", "chunk_attention", "fixed", "lm_rows")


# --- Scoring ----------------------------------------------------------------------------------


def score_steps(table: StepTable | str | Path | None = None, options: StepOptions | None = None) -> StepScore:
    """Score Eq. 7, the padding term and the fixed time per step on a step table.

    Parameters
    ----------
    table : StepTable, str or Path, optional
        A loaded table or its file (:func:`theory.validation.steps_data.load_steps`); by default
        the packaged ``llmq_h200_steps.csv``.
    options : StepOptions, optional

    Returns
    -------
    StepScore

    Raises
    ------
    FieldError
        A table without the rows a score needs (decode-only and mixed ``graph`` rows, and steps
        timed both ``graph`` and ``eager``), or a preset that cannot run the table's model and TP.
    """
    table = table if isinstance(table, StepTable) else load_steps(table)
    options = options or StepOptions()
    cm, reason = batch_cost_model(options.gpu or table.gpu, table.model, table.tp, gpu_file=options.gpu_file,
                                  model_file=options.model_file)
    if cm is None:
        raise FieldError("gpu", options.gpu or table.gpu,
                         f"a preset that runs {table.model} at TP {table.tp} ({reason})")
    decode = [r for r in table.select("decode_step", "graph") if r.padded_to is not None]
    mixed = table.select("mixed_step", "graph")
    for name, rows in (("decode_step graph rows at a capture size (padded_to)", decode),
                       ("mixed_step graph rows", mixed)):
        if not rows:
            raise FieldError(f"{table.path}: rows", 0, f"one or more {name}")
    scored = decode + mixed
    real = np.array([predict_step(cm, r) for r in scored])
    padded = np.array([predict_step(cm, r, padded=True) for r in scored])
    parts = [step_parts(cm, r) for r in scored]
    measured = np.array([r.seconds for r in scored])
    nd = len(decode)
    accuracy = {"decode_real": Accuracy.of(measured[:nd], real[:nd]),
                "decode_padded": Accuracy.of(measured[:nd], padded[:nd]),
                "mixed": Accuracy.of(measured[nd:], real[nd:])}
    rows = tuple({"kind": r.kind, "decodes": r.decodes, "decode_context": r.decode_context,
                  "chunk_tokens": r.chunk_tokens, "chunk_context": r.chunk_context, "padded_to": r.padded_to,
                  "tokens": r.tokens, "measured_s": r.seconds, "predicted_s": float(p_real),
                  "predicted_padded_s": float(p_pad), **{f"{k}_s": v for k, v in part.items()}}
                 for r, p_real, p_pad, part in zip(scored, real, padded, parts, strict=True))
    return StepScore(table.path, table.gpu, table.model, table.tp, table.setup, cm.describe(),
                     linear_law_name(cm), accuracy, diagnose(cm, table, scored, parts),
                     score_padding(cm, table), score_fixed(table), rows)


def _pairs(rows: list[StepRow], vary: str, same) -> tuple[list[tuple[StepRow, StepRow]], tuple]:
    """Pairs of rows equal in ``same(row)`` whose ``vary`` field takes its least and largest value."""
    values = sorted({getattr(r, vary) for r in rows})
    if len(values) < 2:
        return [], tuple(values)
    lo, hi = values[0], values[-1]
    by = {(same(r), getattr(r, vary)): r for r in rows}
    pairs = [(by[(k, lo)], by[(k, hi)]) for k, v in sorted(by, key=str) if v == lo and (k, hi) in by]
    return pairs, (lo, hi)


def diagnose(cm: CostModel, table: StepTable, scored: list[StepRow], parts: list[dict]) -> Parts:
    """The part-by-part comparison of :class:`Parts` on the scored ``graph`` rows and their parts."""
    from scipy.optimize import nnls

    cache: dict[StepRow, float] = {}

    def predicted(r: StepRow) -> float:
        if r not in cache:
            cache[r] = predict_step(cm, r, padded=True)
        return cache[r]

    def gemms_run(part: dict) -> float:
        return part["gemms"] - part["lm_head_excess"]

    # the smallest step
    plain = [r for r in table.select("decode_step", "graph") if r.unpadded]
    small = min(plain, key=lambda r: (r.decodes, r.decode_context))
    sp = step_parts(cm, small)
    smallest = {"decodes": small.decodes, "decode_context": small.decode_context, "measured_s": small.seconds,
                "gemms_s": gemms_run(sp), "measured_rest_s": small.seconds - gemms_run(sp),
                "predicted_rest_s": predicted(small) - sp["gemms"]}
    # decode attention: the same decodes and capture size at two cache lengths
    dec_rows = [r for r in scored if r.kind == "decode_step"]
    pairs, contexts = _pairs(dec_rows, "decode_context", lambda r: (r.decodes, r.padded_to))
    kv = cm.model.kv_bytes_per_token() / table.tp
    grow = [(b.seconds - a.seconds, predicted(b) - predicted(a),
             a.decodes * (b.decode_context - a.decode_context) * kv) for a, b in pairs]
    decode_attention = _growth(grow, contexts, "gbs", 1e9)
    # chunk attention: the same step at two chunk contexts
    mix_rows = [r for r in scored if r.kind == "mixed_step"]
    pairs, contexts = _pairs(mix_rows, "chunk_context",
                             lambda r: (r.decodes, r.decode_context, r.chunk_tokens))
    grow = [(b.seconds - a.seconds, predicted(b) - predicted(a),
             4.0 * cm.N * cm.d_pre * a.chunk_tokens * (b.chunk_context - a.chunk_context)) for a, b in pairs]
    chunk_attention = _growth(grow, contexts, "tflops", 1e12)
    lm_head = Summary.of([p["lm_head_excess"] / r.seconds for r, p in zip(scored, parts, strict=True)
                          if r.kind == "mixed_step"])
    # the diagnosis fit: measured - GeMMs as run = c + sum_k m_k (Eq. 7 term k), relative least squares
    measured = np.array([r.seconds for r in scored])
    gemms = np.array([gemms_run(p) for p in parts])
    x = np.column_stack([np.ones(len(scored))] + [[p[t] for p in parts] for t in DIAGNOSED_TERMS])
    used = np.flatnonzero(np.any(x > 0, axis=0))
    coef = np.zeros(x.shape[1])
    coef[used] = nnls(x[:, used] / measured[:, None], (measured - gemms) / measured)[0]
    multipliers = {"fixed_s": float(coef[0]),
                   **{t: (float(coef[k]) if k in used else None)
                      for k, t in enumerate(DIAGNOSED_TERMS, start=1)},
                   "in_sample": Accuracy.of(measured, gemms + x @ coef)}
    return Parts(smallest, decode_attention, chunk_attention, lm_head, multipliers)


def _growth(grow: list[tuple[float, float, float]], contexts: tuple, unit: str, scale: float) -> dict:
    """``ratio`` and the rates of measured and predicted growth ``(measured, predicted, amount)``."""
    meas, pred, amount = (np.array([g[k] for g in grow]) for k in range(3)) if grow else (np.array([]),) * 3
    ok = meas > 0
    return {"pairs": len(grow), "contexts": list(contexts), "ratio": Summary.of(pred[ok] / meas[ok]),
            f"measured_{unit}": Summary.of(amount[ok] / meas[ok] / scale),
            f"predicted_{unit}": Summary.of(amount[pred > 0] / pred[pred > 0] / scale)}


def score_padding(cm: CostModel, table: StepTable) -> Padding:
    """:class:`Padding`: every decode-only ``graph`` row run at a capture size above its decodes,
    against its unpadded control and the capture size's own step (same cache length)."""
    unpadded = unpadded_graphs(table)
    points = []
    for r in table.select("decode_step", "graph"):
        if r.padded_to is None or r.padded_to == r.decodes:
            continue
        plain = unpadded.get(r.key())
        capture = next((c for c in table.select("decode_step", "graph") if c.decodes == r.padded_to
                        and c.padded_to == r.padded_to and c.decode_context == r.decode_context), None)
        points.append({"decodes": r.decodes, "decode_context": r.decode_context, "padded_to": r.padded_to,
                       "padded_s": r.seconds, "unpadded_s": plain.seconds if plain else None,
                       "capture_s": capture.seconds if capture else None,
                       "cost": r.seconds / plain.seconds - 1.0 if plain else None,
                       "capture_error": capture.seconds / r.seconds - 1.0 if capture else None,
                       "predicted_cost": predict_step(cm, r, padded=True) / predict_step(cm, r) - 1.0})

    def values(name: str, absolute: bool = False) -> list[float]:
        return [abs(p[name]) if absolute else p[name] for p in points if p[name] is not None]

    no_padding = [abs(p["unpadded_s"] / p["padded_s"] - 1.0) for p in points if p["unpadded_s"] is not None]
    return Padding(tuple(points), Summary.of(values("cost")), Summary.of(values("predicted_cost")),
                   Summary.of(values("capture_error", absolute=True)), Summary.of(no_padding))


# --- Console and JSON forms ------------------------------------------------------------------


EAGER_NOTE = ("eager = PyTorch launching the measuring script's forward pass op by op (Python and the "
              "dispatcher), timed by the host clock; eager - graph is that launch cost, not a serving "
              "engine's per-step overhead (scheduling, input preparation and sampling add to it): a measured "
              "reference, not vLLM's figure")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3f} ms"


def _acc(a: Accuracy) -> str:
    ratio = "-" if a.ratio_median is None else f"x{a.ratio_median:.2f}"
    return (f"n {a.errors.n}, median {_pct(a.errors.median)}, p90 {_pct(a.errors.p90)} "
            f"(predicted/measured {ratio})")


def _spread(s: Summary, fmt=_ms) -> str:
    if not s.n:
        return "none"
    return (f"median {fmt(s.median)} (p10 {fmt(s.p10)}, p90 {fmt(s.p90)}; {fmt(s.low)} to {fmt(s.high)}; "
            f"n {s.n})")


def _num(fmt: str):
    return lambda x: "-" if x is None else format(x, fmt)


def _band(b: dict) -> str:
    return f"{b['low']}-{b['high']}" if b["high"] else f">= {b['low']}"


def sections(score: StepScore) -> list[tuple[str, list[str]]]:
    """``(title, lines)`` of each part of the score, shared by the console and Markdown forms."""
    p, pad, fx = score.parts, score.padding, score.fixed
    m = p.multipliers
    accuracy = [f"{name}: {_acc(score.accuracy[name])} -- {ACCURACY_MEANING[name]}" for name in ACCURACY_SETS]
    s = p.smallest
    da, ca = p.decode_attention, p.chunk_attention
    parts = [
        f"smallest step ({s['decodes']} decode(s), {s['decode_context']} cached tokens): measured "
        f"{_ms(s['measured_s'])}, of which GeMMs as run {_ms(s['gemms_s'])}; the rest measured "
        f"{_ms(s['measured_rest_s'])}, Eq. 7 {_ms(s['predicted_rest_s'])} (element-wise tau/mu_nLin, "
        "attention, fixed time)",
        f"decode attention, growth from {da['contexts'][0]} to {da['contexts'][-1]} cached tokens "
        f"({da['pairs']} pairs): predicted/measured {_spread(da['ratio'], _num('.2f'))}; KV read at "
        f"{_spread(da['measured_gbs'], _num('.0f'))} GB/s measured, "
        f"{_spread(da['predicted_gbs'], _num('.0f'))} GB/s in Eq. 5",
        f"chunk attention, growth from {ca['contexts'][0]} to {ca['contexts'][-1]} cached tokens of the "
        f"chunk's request ({ca['pairs']} pairs): predicted/measured {_spread(ca['ratio'], _num('.2f'))}; "
        "attention at "
        f"{_spread(ca['measured_tflops'], _num('.0f'))} TFLOP/s measured, "
        f"{_spread(ca['predicted_tflops'], _num('.0f'))} TFLOP/s in Eq. 6",
        f"LM head: Eq. 4 runs the vocab projection on every chunk row, the step on one row per sequence; "
        f"the difference is {_spread(p.lm_head, _pct)} of a mixed step",
        f"diagnosis (in sample, not a calibration): measured - GeMMs = {_ms(m['fixed_s'])} per step + "
        + " + ".join(f"{_num('.2f')(m[t])} x {t}" for t in DIAGNOSED_TERMS)
        + f" (Eq. 7's terms); {_acc(m['in_sample'])}",
    ]
    padding = [
        f"{q['decodes']} decodes at {q['decode_context']} tokens, padded to {q['padded_to']}: padded "
        f"{_ms(q['padded_s'])}, unpadded {_ms(q['unpadded_s'])}, capture-size step {_ms(q['capture_s'])}; "
        f"padding costs {_pct(q['cost'])} (Eq. 7's term {_pct(q['predicted_cost'])}), capture rule error "
        f"{_pct(q['capture_error'])}" for q in pad.points]
    padding += [f"padding cost: measured {_spread(pad.cost, _pct)}; Eq. 7's padding term "
                f"{_spread(pad.predicted_cost, _pct)}",
                f"'a step of b decodes costs the step of the next capture size': |capture/padded - 1| "
                f"{_spread(pad.capture_rule, _pct)}",
                f"priced unpadded instead: |unpadded/padded - 1| {_spread(pad.no_padding, _pct)}"]
    fixed = [f"eager - graph: {_spread(fx.overhead)}; Spearman rank correlation with the step's rows "
             f"{_num('.2f')(fx.rank_correlation)}"]
    fixed += [f"rows {_band(b)}: {_spread(b['overhead'])}" for b in fx.bands]
    fixed += [
        "one constant, eager = graph + c (fitted on one half, scored on the other): c = "
        + ", ".join(_ms(f["c"]) for f in fx.constant["folds"])
        + f"; held out {_acc(fx.constant['held_out'])}",
        "launch overlap, eager = max(h, graph + c): (h, c) = "
        + ", ".join(f"({_ms(f['h'])}, {_ms(f['c'])})" for f in fx.overlap["folds"])
        + f"; held out {_acc(fx.overlap['held_out'])}",
        EAGER_NOTE]
    return [("Eq. 7 against the graph steps (|predicted/measured - 1|)", accuracy),
            ("where Eq. 7 misses", parts),
            ("CUDA-graph padding of decode-only steps", padding),
            ("fixed time per step: eager - graph", fixed)]


def header(score: StepScore) -> str:
    """The first line: the table, what it measured and what predicted it."""
    return (f"{Path(score.table).name}: {score.model} TP {score.tp} on {score.gpu} ({score.setup}); "
            f"predicted by {score.preset}, linear GeMMs: {score.gemm_law}")


def console_lines(score: StepScore) -> list[str]:
    """Lines for the console."""
    out = [header(score)]
    for title, lines in sections(score):
        out += ["", title + ":"] + [f"  {line}" for line in lines]
    return out


def to_json(score: StepScore) -> str:
    """The score as strict JSON (:func:`theory.io.json_text`), every record as an object."""
    return json_text(asdict(score))


def main(argv: list[str] | None = None) -> None:
    """``python -m theory.validation.steps [--table FILE] [--gpu PRESET] [--json]``: print the score."""
    ap = argparse.ArgumentParser(description="Score Eq. 7 and the step-time terms on measured engine steps.")
    ap.add_argument("--table", default=None, help="a step table (default: the packaged llmq_h200_steps.csv)")
    ap.add_argument("--gpu", default=None, help="GPU preset that predicts (default: the table's)")
    ap.add_argument("--gpu-file", default=None)
    ap.add_argument("--model-file", default=None)
    ap.add_argument("--json", action="store_true", help="print the score as JSON")
    args = ap.parse_args(argv)
    score = score_steps(args.table, StepOptions(args.gpu, args.gpu_file, args.model_file))
    print(to_json(score) if args.json else "\n".join(console_lines(score)))


if __name__ == "__main__":
    main()
