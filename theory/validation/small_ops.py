"""The small operators of a layer priced from a measured profile: one affine time per batch.

Eq. 7 prices the element-wise work of a batch of ``tau`` tokens as ``tau / mu_nLin``, ``mu_nLin``
the rate at which DRAM streams the activations (Section 3.2.3), plus the fixed time ``overhead_s``
of a non-empty batch. A profile that times the element-wise operators of one decoder layer one by
one gives the model's small-operator time of a batch of ``tau`` tokens::

    S(tau) = N sum_{op of a layer} c_op t_op(tau) + sum_{op of a pass} c_op t_op(tau)

``N`` layers, ``c_op`` the calls of the operator per layer or per forward pass (a
:class:`KernelSource`). Its law is the line ``S(tau) ~ a + b tau`` of least relative squares over
the profile's token counts, each once (``min sum ((a + b tau) / S(tau) - 1)^2``, ``a, b >= 0``): in
a GPU table, ``overhead_s`` gains ``a`` and ``mu_nLin = 1 / b`` replaces the streaming rate.

**Which profile** (:func:`small_ops_law`, the rule of the serving replay). The law is taken from a
profile of the same kernel implementation as the engine it prices, vLLM's fused CUDA kernels, with
the same layer shapes at the same TP degree: :data:`VIDUR`, microsoft/vidur's element-wise rows
(``vidur_kernels``), whose profiled layer is built from Sarathi-Serve's layers, a fork of vLLM that
calls vLLM's kernels (``rms_norm``, ``rotary_embedding``, ``silu_and_mul``, one CUDA kernel each).
Its rows are selected by the GPU, the TP degree and the layer shape (:data:`LAYER_SHAPE`: the model
presets' dimensions compared, not their names; several models of that shape are pooled by the
median per operator and token count). Where no such rows exist (the RTX 4090 and RTX PRO 6000
runs), there is no law and Eq. 7's memory-bandwidth estimate of ``mu_nLin`` stays.

:data:`VIDUR` composes a pass as vidur's simulator does (``ExecutionTime._get_block_execution_time``:
each of ``input_layernorm``, ``attn_rope``, ``post_attention_layernorm``, ``mlp_act`` and ``add``
once per layer), plus the per-pass operators: the embedding lookup ``emb`` once, and the model's
final norm as one more ``input_layernorm`` (the same RMSNorm kernel over the same ``tau x d_x``).
It leaves out the output softmax (not profiled) and the layer's first residual add (profiled by
neither source; vidur charges one add per layer). :data:`LLMSERVINGSIM_H100` composes
LLMServingSim's H100 profile (Hugging Face transformers' modules run eagerly, several kernels per
norm): two ``layernorm``, one ``rotary_emb`` and one ``act_fn`` per layer, one ``final_layernorm``;
it is kept for comparison (:func:`profile_law`), never used by the replay.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2.3 and Eq. 7. microsoft/vidur
``vidur/profiling/mlp/mlp_impl.py`` (the timed ranges of the profiled layer: ``RMSNorm``,
``get_rope`` and ``SiluAndMul`` of ``sarathi.model_executor.layers``) and
``vidur/entities/execution_time.py`` (the block's operators), commit
7d47513363ec447a741ac5e47241580b47724fbf; microsoft/sarathi-serve, branch ``vidur`` (the profiling
environment vidur's ``docs/profiling.md`` names), ``sarathi/model_executor/layers/{layernorm,
activation,rotary_embedding}.py`` and ``csrc/{layernorm,activation,pos_encoding}_kernels.cu``,
commit c94dbf438711a4670dbf7477175062e87748999d; casys-kaist/LLMServingSim
``llm_profile/models/llama.py``, commit e0f491188ed9d54bbfa73c702b60108be553d23a.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import nnls

from theory.errors import FieldError
from theory.models import Model, get_model
from theory.profiles import load_profile

LAYER_SHAPE = ("d_x", "n_heads", "n_kv_heads", "head_dim", "d_ff", "ffn")  # a preset's layer


@dataclass(frozen=True)
class KernelSource:
    """How a profile's element-wise operators make one forward pass (module docstring).

    Attributes
    ----------
    profile : str
        The shipped profile (:func:`theory.profiles.shipped_profiles`).
    layer_ops : dict
        ``{operation: calls per decoder layer}``.
    pass_ops : dict
        ``{operation: calls per forward pass}``.
    """

    profile: str
    layer_ops: dict[str, int] = field(default_factory=dict)
    pass_ops: dict[str, int] = field(default_factory=dict)

    @property
    def operations(self) -> tuple[str, ...]:
        """Every operation the source's ``S(tau)`` needs, each once."""
        return tuple(dict.fromkeys((*self.layer_ops, *self.pass_ops)))


VIDUR = KernelSource(
    "vidur_kernels",
    layer_ops={"input_layernorm": 1, "attn_rope": 1, "post_attention_layernorm": 1, "mlp_act": 1, "add": 1},
    pass_ops={"emb": 1, "input_layernorm": 1},
)
LLMSERVINGSIM_H100 = KernelSource(
    "llmservingsim_h100",
    layer_ops={"layernorm": 2, "rotary_emb": 1, "act_fn": 1},
    pass_ops={"final_layernorm": 1},
)


@dataclass(frozen=True)
class SmallOpsLaw:
    """The affine law of a model's small operators on one GPU (module docstring).

    Attributes
    ----------
    profile : str
        The profile it was fitted on.
    models : tuple of str
        The profile's models whose rows were used (the layer shape of the priced model).
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
    models: tuple[str, ...]
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


def layer_shape(model: Model) -> tuple:
    """The dimensions of ``model``'s decoder layer (:data:`LAYER_SHAPE`), None for a mixture of
    experts (its FFN is not one activation of width ``d_ff``)."""
    return None if model.moe is not None else tuple(getattr(model, name) for name in LAYER_SHAPE)


def same_layer_models(rows: np.ndarray, model: str) -> tuple[str, ...]:
    """The models of a profile's ``rows`` whose presets have ``model``'s layer shape (sorted)."""
    want = layer_shape(get_model(model))
    if want is None:
        return ()
    names = sorted(set(rows["model"].tolist()) - {""})
    return tuple(name for name in names if layer_shape(get_model(name)) == want)


def small_ops_seconds(rows: np.ndarray, n_layers: int, source: KernelSource) -> tuple[np.ndarray, np.ndarray]:
    """``(tau, S(tau))`` of a profile's element-wise rows of one GPU and TP degree (the structured
    array of :class:`theory.profiles.Profile`) composed as ``source`` says: the token counts every
    operation of the source was timed at, and ``S`` (module docstring) there. Rows of several
    models at one token count are pooled by their median."""
    per_op = {}
    for op in source.operations:
        mine = rows[rows["operation"] == op]
        if not mine.size:
            want = f"rows of each of {', '.join(source.operations)}"
            raise FieldError(f"small-operator rows of {source.profile}", op, want)
        times = {
            int(t): float(np.median(mine["seconds"][mine["tokens"] == t])) for t in np.unique(mine["tokens"])
        }
        per_op[op] = times
    tau = np.array(sorted(set.intersection(*(set(t) for t in per_op.values()))), dtype=np.int64)
    if tau.size < 2:
        want = "at least 2 token counts timed for every operation"
        raise FieldError(f"small-operator rows of {source.profile}", tau.size, want)
    s = np.zeros(tau.size)
    calls = [(op, n_layers * c) for op, c in source.layer_ops.items()] + list(source.pass_ops.items())
    for op, c in calls:
        s += c * np.array([per_op[op][t] for t in tau.tolist()])
    return tau, s


def fit_small_ops(tau: np.ndarray, s: np.ndarray, profile: str, models: tuple[str, ...] = ()) -> SmallOpsLaw:
    """The line ``a + b tau`` of least relative squares through ``(tau, S)``, ``a, b >= 0``."""
    tau, s = np.asarray(tau, dtype=float), np.asarray(s, dtype=float)
    design = np.stack([np.ones_like(tau), tau], axis=1) / s[:, None]
    (a, b), _ = nnls(design, np.ones_like(s))
    if not b > 0:
        want = "a time per token > 0 (the times do not grow)"
        raise FieldError(f"small-operator law of {profile}", b, want)
    return SmallOpsLaw(
        profile=profile,
        models=tuple(models),
        fixed_s=float(a),
        per_token_s=float(b),
        tokens=tau.astype(np.int64),
        measured_s=s,
    )


def profile_law(source: KernelSource, gpu: str, model: str, tp: int) -> SmallOpsLaw | None:
    """The small-operator law of ``model`` at TP ``tp`` on ``gpu`` from ``source``'s profile: its
    rows of that GPU and TP degree of the models with ``model``'s layer shape
    (:func:`same_layer_models`), composed with ``model``'s layer count; None where there are none."""
    rows = load_profile(source.profile).where(gpu=gpu, tp=tp)
    rows = rows[np.isin(rows["operation"], source.operations)]
    models = same_layer_models(rows, model)
    if not models:
        return None
    rows = rows[np.isin(rows["model"], models)]
    tau, s = small_ops_seconds(rows, get_model(model).N, source)
    return fit_small_ops(tau, s, source.profile, models)


def small_ops_law(gpu: str, model: str, tp: int) -> SmallOpsLaw | None:
    """The serving replay's small-operator law (module docstring, *Which profile*): fitted on
    :data:`VIDUR`'s rows of ``model``'s layer shape on ``gpu`` at TP ``tp``, or None (Eq. 7's
    streaming rate stays) where that profile has none."""
    return profile_law(VIDUR, gpu, model, tp)
