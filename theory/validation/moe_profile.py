"""The mixture-of-experts block of a measured per-layer profile, predicted by the cost model.

LLMServingSim's Qwen3-30B-A3B profile of the RTX PRO 6000
(``theory/data/profiles/moe/llmservingsim_rtxpro6000_qwen3-30b-a3b.csv.gz``, its section of
``theory/data/profiles/README.md``) times one call of vLLM's ``Qwen3MoeSparseMoeBlock`` (the router
GeMM, the fused expert GeMMs and the block's element-wise kernels) over ``tokens`` tokens whose
``8 tokens`` slots are forced onto exactly ``experts`` experts, each expert getting the slots'
share within one (:func:`theory.moe.forced_loads`). Each row is predicted from the GPU preset as
real mode prices it (the shipped calibration, fitted on the dense GeMMs of other models:
:mod:`theory.validation.presets_fit`) and the model preset, with nothing fitted on these rows, so
every row is out of sample; the held-out token counts of the dense scores
(:func:`theory.validation.gemm.token_split`, every 4th distinct count) are reported beside all rows.

Two predictions, both the cost model's own terms (:mod:`theory.moe`):

``gemms``
    the router GeMM ``E x d_x`` over the tokens (:func:`theory.cost.T_GeMM_terms`) plus the grouped
    expert GeMMs of one layer at the forced loads (:meth:`theory.moe.MoETerms.layer_time_of_loads`);
``block``
    ``gemms`` plus the block's element-wise work as Eq. 7 prices it, at the non-linear rate:
    ``tokens moe_elements_per_token b / (eta_mem B)``
    (:meth:`theory.models.Model.moe_elements_per_token`, the share of ``tau / mu_nLin`` that the
    MoE block's router softmax, expert activation and weighted sum take).

The routing law is not tested here: the profile's routing is forced, not a router's
(``tests/test_moe.py`` checks the uniform law against a simulated router).

References
----------
casys-kaist/LLMServingSim @ 5daddb21a545658d5150b535712d0494584b5278,
``profiler/perf/RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16/tp1/moe.csv`` and
``profiler/core/hooks/moe_hook.py``; Bari, Hegde, de Veciana (2025), Eq. 2 and Eq. 7.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from theory.builder import CostSpec, cost_model
from theory.cost import T_GeMM_terms
from theory.cost_model import CostModel
from theory.errors import FieldError
from theory.moe import forced_loads
from theory.profiles import load_profile
from theory.validation.errors import ErrorStats, abs_rel_error
from theory.validation.gemm import token_split

MOE_PROFILE = (
    Path(__file__).resolve().parent.parent
    / "data"
    / "profiles"
    / "moe"
    / "llmservingsim_rtxpro6000_qwen3-30b-a3b.csv.gz"
)


@dataclass(frozen=True)
class MoEScore:
    """Predicted against measured MoE-block times of one profile (module docstring).

    Attributes
    ----------
    gpu, model : str
        The presets that predicted the rows.
    tokens, experts : ndarray of int
        Each row's tokens and forced active experts.
    measured, gemms, block : ndarray of float
        Seconds measured, and the two predictions.
    held_out : ndarray of bool
        The rows of the held-out token counts (:func:`theory.validation.gemm.token_split`).
    """

    gpu: str
    model: str
    tokens: np.ndarray
    experts: np.ndarray
    measured: np.ndarray
    gemms: np.ndarray
    block: np.ndarray
    held_out: np.ndarray

    def stats(self, prediction: str = "block", held_out_only: bool = False) -> ErrorStats:
        """Median and p90 of ``|predicted / measured - 1|`` of ``prediction`` (``"gemms"`` or
        ``"block"``), over all rows or the held-out token counts."""
        if prediction not in ("gemms", "block"):
            raise FieldError("prediction", prediction, "'gemms' or 'block'")
        err = abs_rel_error(self.measured, getattr(self, prediction))
        return ErrorStats.of(err[self.held_out] if held_out_only else err)


def predict_moe_block(cm: CostModel, tokens: int, experts: int) -> tuple[float, float]:
    """The ``(gemms, block)`` predictions of one MoE layer's block over ``tokens`` tokens whose
    slots are forced onto ``experts`` experts (module docstring)."""
    model = cm.model
    if model.moe is None:
        raise FieldError("model", model.key, "a mixture of experts (a model with n_experts)")
    moe = model.moe
    router = float(T_GeMM_terms(cm, moe.n_experts, tokens, model.d_x))
    gemms = router + cm.lin.moe.layer_time_of_loads(forced_loads(tokens, experts, moe.experts_per_token))
    b = cm.gpu.terms.bytes_per_element
    elementwise = tokens * model.moe_elements_per_token(cm.mode) * b / (cm.gpu.eta_mem * cm.gpu.bandwidth)
    return gemms, gemms + elementwise


def score_moe_profile(gpu: str = "rtxpro6000", path: str | Path = MOE_PROFILE) -> MoEScore:
    """Predict every ``moe`` row of the profile at ``path`` with ``gpu`` (real mode) and the
    profile's model preset (module docstring)."""
    rows = load_profile(path).where(operation="moe")
    models = set(rows["model"].tolist())
    if len(models) != 1:
        raise FieldError(f"{path}: model", sorted(models), "one model per MoE profile")
    model = models.pop()
    cm = cost_model(CostSpec(gpu, model, mode="real"))
    tokens = rows["tokens"].astype(np.int64)
    experts = rows["experts"].astype(np.int64)
    pred = np.array([predict_moe_block(cm, int(t), int(a)) for t, a in zip(tokens, experts, strict=True)])
    return MoEScore(
        gpu=gpu,
        model=model,
        tokens=tokens,
        experts=experts,
        measured=rows["seconds"].astype(float),
        gemms=pred[:, 0],
        block=pred[:, 1],
        held_out=token_split(tokens),
    )
