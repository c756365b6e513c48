"""The small operators of a layer priced from a measured profile: one affine time per batch.

Eq. 7 prices the element-wise work of a batch of ``tau`` tokens as ``tau / mu_nLin``, ``mu_nLin``
the rate at which DRAM streams the activations (Section 3.2.3), plus the fixed time ``overhead_s``
of a non-empty batch. A profile that times the element-wise layers of one decoder layer one by one
(``layernorm``, ``rotary_emb``, ``act_fn``, ``final_layernorm``, names of
:data:`theory.profiles.LLMSERVINGSIM_KERNELS`) gives the model's small-operator time of a batch of
``tau`` tokens::

    S(tau) = N (2 t_layernorm(tau) + t_rotary_emb(tau) + t_act_fn(tau)) + t_final_layernorm(tau)

(two norms per layer, one rotary embedding, one activation; the final norm once). Its law is the
line ``S(tau) ~ a + b tau`` of least relative squares over the profile's token counts, each once
(``min sum ((a + b tau) / S(tau) - 1)^2``, ``a, b >= 0``): in a GPU table, ``overhead_s`` gains
``a`` and ``mu_nLin = 1 / b`` replaces the streaming rate. What the law leaves out: the residual
adds and the output softmax, which the profile does not time (they are in the streaming rate it
replaces), and the embedding gather (a gather, not in Section 3.2.3's element-wise work).

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2.3 and Eq. 7. casys-kaist/LLMServingSim
``llm_profile/models/llama.py`` (the timed ranges: the two norms of a decoder layer, the rotary
embedding of queries and keys, ``act_fn(gate) * up``, the model's final norm), commit
e0f491188ed9d54bbfa73c702b60108be553d23a.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from theory.errors import FieldError
from theory.models import get_model
from theory.profiles import load_profile, shipped_profiles

LAYER_OPS = {"layernorm": 2, "rotary_emb": 1, "act_fn": 1}  # calls per decoder layer
MODEL_OPS = {"final_layernorm": 1}  # calls per forward pass
PROFILE = "llmservingsim_{gpu}"  # the shipped profile that may time a GPU's small operators


@dataclass(frozen=True)
class SmallOpsLaw:
    """The affine law of a model's small operators on one GPU (module docstring).

    Attributes
    ----------
    profile : str
        The profile it was fitted on.
    fixed_s : float
        ``a``: seconds per non-empty batch.
    per_token_s : float
        ``b``: seconds per token of the batch.
    tokens : numpy.ndarray
        The token counts of the fit.
    measured_s : numpy.ndarray
        ``S(tau)`` at those counts, seconds.
    """

    profile: str
    fixed_s: float
    per_token_s: float
    tokens: np.ndarray
    measured_s: np.ndarray

    def time(self, tau: np.ndarray | int) -> np.ndarray:
        """The law's time of a batch of ``tau`` tokens, seconds."""
        return self.fixed_s + self.per_token_s * np.asarray(tau, dtype=float)

    def relative_error(self) -> np.ndarray:
        """``law / S - 1`` at the profile's token counts."""
        return self.time(self.tokens) / self.measured_s - 1.0

    def gpu_fields(self, table: dict) -> dict:
        """The fields of a GPU table that price the law: ``overhead_s`` (the table's plus ``a``)
        and ``mu_nLin = 1 / b`` tokens per second."""
        return {
            "overhead_s": float(table.get("overhead_s", 0.0)) + self.fixed_s,
            "mu_nLin": 1.0 / self.per_token_s,
        }


def small_ops_seconds(rows: np.ndarray, n_layers: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tau, S(tau))`` of a profile's element-wise rows of one GPU, model and TP degree (the
    structured array of :class:`theory.profiles.Profile`): the token counts every operator of
    :data:`LAYER_OPS` and :data:`MODEL_OPS` was timed at, and ``S`` (module docstring) there."""
    per_op = {}
    for op in (*LAYER_OPS, *MODEL_OPS):
        mine = rows[rows["operation"] == op]
        if not mine.size:
            raise FieldError(
                "small-operator profile", op, f"rows of each of {', '.join((*LAYER_OPS, *MODEL_OPS))}"
            )
        per_op[op] = dict(zip(mine["tokens"].tolist(), mine["seconds"].tolist(), strict=True))
    tau = np.array(sorted(set.intersection(*(set(t) for t in per_op.values()))), dtype=np.int64)
    if tau.size < 2:
        raise FieldError(
            "small-operator profile", tau.size, "at least 2 token counts timed for every operator"
        )
    s = np.zeros(tau.size)
    for op, calls in (*((op, n_layers * c) for op, c in LAYER_OPS.items()), *MODEL_OPS.items()):
        s += calls * np.array([per_op[op][t] for t in tau.tolist()])
    return tau, s


def fit_small_ops(tau: np.ndarray, s: np.ndarray, profile: str) -> SmallOpsLaw:
    """The line ``a + b tau`` of least relative squares through ``(tau, S)``, ``a, b >= 0``."""
    tau, s = np.asarray(tau, dtype=float), np.asarray(s, dtype=float)
    design = np.stack([np.ones_like(tau), tau], axis=1) / s[:, None]
    (a, b), _ = nnls(design, np.ones_like(s))
    if not b > 0:
        raise FieldError(
            f"small-operator law of {profile}", b, "a time per token > 0 (the times do not grow)"
        )
    return SmallOpsLaw(
        profile=profile, fixed_s=float(a), per_token_s=float(b), tokens=tau.astype(np.int64), measured_s=s
    )


def small_ops_law(gpu: str, model: str, tp: int) -> SmallOpsLaw | None:
    """The small-operator law of ``model`` at TP ``tp`` on ``gpu`` from the shipped profile
    ``llmservingsim_<gpu>`` (:data:`PROFILE`), or None where it has no element-wise row of them."""
    name = PROFILE.format(gpu=gpu)
    if name not in shipped_profiles():
        return None
    rows = load_profile(name).where(gpu=gpu, model=model, tp=tp)
    rows = rows[np.isin(rows["operation"], (*LAYER_OPS, *MODEL_OPS))]
    if not rows.size:
        return None
    tau, s = small_ops_seconds(rows, get_model(model).N)
    return fit_small_ops(tau, s, name)
