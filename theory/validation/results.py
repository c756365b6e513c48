"""What a validation run did and found: its settings (:class:`Settings`), its record
(:class:`Report`), the schemes it scores and the data dictionary of its group columns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from theory.validation.attention import GROUP_COLUMNS
from theory.validation.errors import ErrorStats

SCHEMES = ("roofline", "shipped", "tokens", "models", "paper", "measured_law", "measured_law_models")
SCHEME_MEANING = {
    "roofline": "GPU preset's roofline per tile, no calibration, served layer shapes (real mode)",
    "shipped": "GPU preset as real mode ships it (where public data exist the measured law of the "
               "whole profile, in sample, and the calibrated tile model elsewhere; else the roofline "
               "with the unfitted terms of gpus.toml [real_mode]), served layer shapes",
    "tokens": "tile model: preset calibrated on the other token counts, scored on held-out token counts",
    "models": "tile model: preset calibrated on the other models of the GPU, scored on the held-out model",
    "paper": "GPU preset as shipped, the paper's single-head 2-matrix-FFN layer (paper mode)",
    "measured_law": "measured-profile law (interpolation of the training token counts; no transfer "
                    "to unprofiled shapes), scored on held-out token counts; 'tokens' where not covered",
    "measured_law_models": "measured-profile law from the other models' series of the same shape, "
                           "scored on the held-out model; 'models' where no such series covers the row",
}
MEASURED_LABEL = ("measured-profile law (interpolation of the training token counts; no transfer to "
                  "unprofiled shapes)")


@dataclass(frozen=True)
class Settings:
    """What a validation run did: held-out stride, training cap, seed, the terms the calibrations
    fit (``floor``: memory floor, ``waves``, ``l2``: L2 traffic), subset, user files, and whether
    rows faster than the roofline bound of their shape are screened out (``screen``; off only for
    synthetic profiles timed by a model that itself beats the bound,
    :mod:`theory.validation.plausibility`)."""

    every: int = 4
    max_train: int = 8000
    seed: int = 0
    floor: bool = True
    waves: bool = True
    l2: bool = True
    quick: bool = False
    gpus: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    gpu_file: str | None = None
    model_file: str | None = None
    screen: bool = True


@dataclass(eq=False)
class Report:
    """The result of :func:`theory.validation.validate.validate`.

    Attributes
    ----------
    groups : list of dict
        One per GPU x model x TP x operation (columns :data:`COLUMNS`).
    gpus : list of dict
        One per GPU preset: status, pooled statistics per scheme, targets met or missed.
    summary : list of dict
        Pooled statistics per GPU x TP.
    bands : list of dict
        Pooled statistics per GPU x token band (:data:`theory.validation.score_gemm.TOKEN_BANDS`): where
        the error lives; ``tile_below`` is the fraction of the band's rows the calibrated tile model (the
        token-split fit at every row) under-predicts.
    not_predicted : list of dict
        Rows not scored, counted per profile x GPU x model x TP x operation, with the reason.
    staircase : list of dict
        Measured and predicted step heights (:func:`theory.validation.staircase.staircase`).
    series : dict
        ``(gpu, model, tp, operation) -> {"token_count", "measured", scheme: predicted,
        "calibrated"}`` for plots ("calibrated": the token-split fit on every point).
    fits : dict
        ``"<gpu> tokens"`` / ``"<gpu> without <model>"`` -> fitted parameters and training size.
    batch_stack : list of dict
        Per GPU x model x TP x operation of the whole-batch rows: the
        :class:`theory.validation.stack_law.StackLaw` fitted per GPU x model x TP on every shape
        (:func:`theory.validation.stack_law.fit_stack_law`) and the held-out median / p90 error of the
        interior shapes (each predicted by the fold without it,
        :func:`theory.validation.batches.batch_folds`) under the shipped preset (``before``: Eq. 7) and
        the stack law (``after``).
    batch_verdicts : list of dict
        Per profile x GPU with whole-batch rows: the held-out (interior) rows of every model and TP pooled
        under the stack law (``n``), their median and p90 error checked against the held-out-token targets
        (``targets``, as :func:`theory.validation.targets.target_checks` checks them), whether both hold,
        the operations pooled (``kinds``) and the law fitted on every shape scored on every row
        (``in_sample``: the least-squares law, no held-out figure), whether any one law per group meets
        both targets on every row (``in_sample_reach``: the least-squares laws where they do, else
        :func:`theory.validation.stack_law_reach.reach_in_sample`) and its equal-token pairs
        (``orderings``, :func:`theory.validation.batch_orderings.ordering_summary`).
    batch_orderings : list of dict
        Every pair of whole-batch rows of one GPU x model x TP x kind with equal tokens and
        different shapes, with the order Eq. 7 gives them, the measured order and the least error
        any one stack law makes on one of the two (:func:`theory.validation.batch_orderings.ordering_pairs`).
    screened : list of dict
        Rows left out of every score because they are faster than the roofline lower bound of
        their shape (:func:`theory.validation.plausibility.implausible`), one entry per row with the bound.
    measured_coverage : list of dict
        Per GPU and measured scheme: rows scored, rows the tables interpolated, rows that fell back
        to the tile model (:func:`theory.validation.gemm.measured_predictions`).
    attention : list of dict
        Measured self-attention batches against Eq. 5-6, per GPU x model x TP x batch kind
        (:func:`theory.validation.attention.score_attention`, columns
        :data:`theory.validation.attention.COLUMNS`).
    moe : list of dict
        The MoE block of the measured mixture-of-experts profile against the cost model
        (:func:`theory.validation.moe_report.moe_rows`).
    fp8 : list of dict
        The measured bf16 and FP8 GeMMs of the H200 against the tile model at each precision
        (:func:`theory.validation.fp8_report.fp8_rows`).
    fp8_residuals : list of dict
        Per FP8 table that quantizes its input dynamically, what the FP8 prediction leaves by token
        count, without and with the quantization (:func:`theory.validation.fp8_gemm.residual_by_tokens`).
    """

    settings: Settings
    groups: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    summary: list = field(default_factory=list)
    bands: list = field(default_factory=list)
    not_predicted: list = field(default_factory=list)
    staircase: list = field(default_factory=list)
    series: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    batch_stack: list = field(default_factory=list)
    batch_verdicts: list = field(default_factory=list)
    batch_orderings: list = field(default_factory=list)
    screened: list = field(default_factory=list)
    measured_coverage: list = field(default_factory=list)
    attention: list = field(default_factory=list)
    moe: list = field(default_factory=list)
    fp8: list = field(default_factory=list)
    fp8_residuals: list = field(default_factory=list)


COLUMNS = {
    **GROUP_COLUMNS,
    "operation": "measured operation (GeMM name: vidur's or vLLM's layer name; prefill_batch, "
                 "decode_batch, all_reduce)",
    "n": "rows (measured points) in the group",
    **{f"{s}_{k}": (f"points scored under '{s}'" if k == "n" else
                    f"{'median' if k == 'median' else '90th percentile'} of |predicted/measured - 1| "
                    f"under '{s}' ({SCHEME_MEANING[s]})")
       for s in SCHEMES for k in ("n", "median", "p90")},
    "note": "why a scheme scored nothing in the group (empty when all did)",
}
NULL_MEANING = ("null (JSON) or an empty cell (CSV) in a *_median or *_p90 column: that scheme scored "
                "no point of the group (its *_n is 0); the note column says why")


def stats_row(errors: dict[str, np.ndarray], mask) -> dict:
    """``<scheme>_n``, ``<scheme>_median`` and ``<scheme>_p90`` of every scheme's errors at ``mask``
    (:class:`theory.validation.errors.ErrorStats`): the statistics columns of a group."""
    out = {}
    for s in SCHEMES:
        st = ErrorStats.of(errors[s][mask])
        out |= {f"{s}_n": st.n, f"{s}_median": st.median, f"{s}_p90": st.p90}
    return out


def not_predicted(report: Report, profile: str, rows: np.ndarray, reason: str) -> None:
    """Count ``rows`` in :attr:`Report.not_predicted`, per GPU x model x TP x operation, with ``reason``."""
    counts = Counter(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(),
                         rows["operation"].tolist(), strict=True))
    for (g, m, tp, op), n in sorted(counts.items()):
        report.not_predicted.append({"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                                     "n": n, "reason": reason})


__all__ = [
    "COLUMNS",
    "MEASURED_LABEL",
    "NULL_MEANING",
    "SCHEMES",
    "SCHEME_MEANING",
    "Report",
    "Settings",
    "not_predicted",
    "stats_row",
]
