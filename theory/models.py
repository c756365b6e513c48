"""Transformer presets and the GeMM shapes a batch runs (paper Sections 2.1 and 3.2).

The paper models one attention head of width ``d`` per layer, QKV projections ``W_Q, W_K, W_V``
of shape ``d x d_x`` and a two-matrix FFN ``W_F1 (d_ff x d)``, ``W_F2 (d_x x d_ff)``, plus a final
projection ``d_out x d_x`` (Section 3.2.1). That is ``mode="paper"``, the default.

``mode="real"`` follows the models as served: grouped-query attention with a fused QKV projection
of width ``d + 2 d_kv``, an output projection ``d_x x d``, a SwiGLU FFN with fused gate/up
``(2 d_ff) x d_x`` and down ``d_x x d_ff``. Prefill attention keeps the paper's Eq. 6 with the
query width ``d`` (heads batched into one GeMM); decode attention (Eq. 5) streams only the KV cache,
of width ``d_kv = n_kv_heads * head_dim``.

References
----------
Bari, Hegde, de Veciana (2025), Sections 2.1, 3.2.1-3.2.3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from theory.config import inherit, read_packaged, read_section
from theory.cost_terms import term_keys
from theory.errors import FieldError, UnknownNameError
from theory.moe import MOE_FIELDS, MoE, moe_from
from theory.precision import BYTES, DEFAULT, check_precision
from theory.terms import LM_HEAD, ModelTerms, model_terms_from

MODES = ("paper", "real")
ROUTER = "W_router"
_INT_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab")
# every field a [models.<key>] table may give (besides base)
# the keys a [models.<key>] table may hold, beside those of the model-side cost terms
# (theory.cost_terms.term_keys("model"), read when the file is: a term may be declared later)
MODEL_FIELDS = (*_INT_FIELDS, "name", "ffn", "params", "context_length", "source", "precision",
                *MOE_FIELDS)


@dataclass(frozen=True)
class GemmShape:
    """A weight GeMM ``W Z`` with ``W`` of shape ``d_row x d_red``, run ``count`` times per batch."""

    name: str
    count: int
    d_row: int
    d_red: int


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer (Section 2.1).

    Attributes
    ----------
    N : int
        Number of layers.
    d_x : int
        Model (residual) width.
    n_heads, n_kv_heads, head_dim : int
        Query heads, key/value heads (GQA) and per-head width.
    d_ff : int
        FFN hidden width.
    d_out : int
        Vocabulary size (final projection rows).
    params : float
        Parameter count.
    context_length : int or None
        The context window in tokens (config.json's ``max_position_embeddings``): a request must
        have ``L^P + L^D <= context_length`` (:func:`theory.workload.check_context`); ``None`` where
        no public source is recorded.
    terms : ModelTerms
        Model-side cost terms (``attention``, ``lm_head``); see :mod:`theory.terms`.
    moe : MoE or None
        The mixture-of-experts layers (:mod:`theory.moe`); ``None`` for a dense model. A MoE
        layer's FFN is its router, its shared experts and its routed experts; ``d_ff`` is then
        the FFN width of the dense layers alone.
    precision : str
        ``"bf16"`` (the paper's two bytes per element) or ``"fp8"`` (weights and KV cache at one
        byte, GeMMs at the GPU's FP8 rates): :mod:`theory.precision`.
    """

    key: str
    name: str
    N: int
    d_x: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    d_out: int
    ffn: str
    params: float
    source: str = ""
    terms: ModelTerms = field(default_factory=ModelTerms)
    context_length: int | None = None
    moe: MoE | None = None
    precision: str = DEFAULT

    @property
    def bytes_per_element(self) -> int:
        """Bytes of one weight or KV-cache element at the model's precision (:mod:`theory.precision`)."""
        return BYTES[self.precision]

    @property
    def spec_name(self) -> str:
        """The key, with ``":PRECISION"`` where it is not the default (how :func:`get_model` spells it)."""
        return self.key if self.precision == DEFAULT else f"{self.key}:{self.precision}"

    @property
    def n_moe_layers(self) -> int:
        """How many layers are MoE layers (0 for a dense model)."""
        return 0 if self.moe is None else self.moe.layers(self.N)

    @property
    def d(self) -> int:
        """The paper's attention width d (all query heads together): n_heads * head_dim."""
        return self.n_heads * self.head_dim

    @property
    def d_kv(self) -> int:
        """Width of the K (or V) cache per layer: n_kv_heads * head_dim."""
        return self.n_kv_heads * self.head_dim

    def kv_bytes_per_token(self, bytes_per_element: int | None = None) -> int:
        """KV-cache bytes one token occupies: 2 (K and V) x N x d_kv x bytes (``None``: the model's
        :attr:`bytes_per_element`, 1 at fp8)."""
        b = self.bytes_per_element if bytes_per_element is None else bytes_per_element
        return 2 * self.N * self.d_kv * b

    def weight_bytes(self, bytes_per_element: int | None = None) -> float:
        """Bytes of the weights in GPU memory (``None``: at the model's :attr:`bytes_per_element`)."""
        return self.params * (self.bytes_per_element if bytes_per_element is None else bytes_per_element)

    def linear_gemms(self, mode: str = "paper", tp: int = 1) -> tuple[GemmShape, ...]:
        """The weight GeMMs of one batch (Section 3.2.1), each over the batch's tokens.

        In ``paper`` mode these are the terms of the sum behind Eq. 4:
        ``3N (d x d_x) + N (d_ff x d) + N (d_x x d_ff) + 1 (d_out x d_x)``.

        With ``tp > 1`` (``real`` mode only; checked by :func:`theory.terms.check_tp`) each shape
        is one GPU's shard as Megatron-LM splits it: QKV and gate/up column-parallel (rows / tp,
        KV heads replicated when tp > n_kv_heads), O and down row-parallel (reduction / tp), the
        vocab projection over the vocabulary (``ceil(d_out / tp)`` rows).
        """
        _check_mode(mode)
        if self.moe is not None:
            return self._moe_linear_gemms(mode, tp)
        if mode == "paper":
            return (
                GemmShape("W_Q, W_K, W_V", 3 * self.N, self.d, self.d_x),
                GemmShape("W_F1", self.N, self.d_ff, self.d),
                GemmShape("W_F2", self.N, self.d_x, self.d_ff),
                GemmShape(LM_HEAD, 1, self.d_out, self.d_x),
            )
        up = 2 * self.d_ff if self.ffn == "swiglu" else self.d_ff
        q, kv = self._heads_per_gpu(tp)
        return (
            GemmShape("W_QKV (fused, GQA)", self.N, (q + 2 * kv) * self.head_dim, self.d_x),
            GemmShape("W_O", self.N, self.d_x, q * self.head_dim),
            GemmShape("W_gate_up (fused)" if self.ffn == "swiglu" else "W_up", self.N, up // tp, self.d_x),
            GemmShape("W_down", self.N, self.d_x, self.d_ff // tp),
            GemmShape(LM_HEAD, 1, -(-self.d_out // tp), self.d_x),
        )

    def _ffn_gemms(self, mode: str, label: str, count: int, width: int) -> tuple[GemmShape, ...]:
        """A dense FFN of ``width`` in ``count`` layers: the paper's two matrices, or as served."""
        if count == 0 or width == 0:
            return ()
        if mode == "paper":
            return (GemmShape(f"{label} W_F1", count, width, self.d),
                    GemmShape(f"{label} W_F2", count, self.d_x, width))
        up = 2 * width if self.ffn == "swiglu" else width
        name = f"{label} W_gate_up" if self.ffn == "swiglu" else f"{label} W_up"
        return (GemmShape(name, count, up, self.d_x), GemmShape(f"{label} W_down", count, self.d_x, width))

    def _moe_linear_gemms(self, mode: str, tp: int) -> tuple[GemmShape, ...]:
        """The GeMMs over all of a batch's tokens of a MoE model (:mod:`theory.moe`): attention,
        the dense layers' FFN, each MoE layer's router ``E x d_x`` (paper mode: ``E x d``) and
        shared experts, and the vocab projection. The routed experts are :meth:`expert_gemms`.
        With ``tp > 1`` one GPU's shards as for a dense model (:meth:`linear_gemms`): the dense
        layers' and the shared experts' FFN split like a dense MLP (widths / tp), the router
        replicated (vLLM's ``ReplicatedLinear`` gate)."""
        moe, n_moe = self.moe, self.n_moe_layers
        if mode == "paper":
            attn = (GemmShape("W_Q, W_K, W_V", 3 * self.N, self.d, self.d_x),)
            router = GemmShape(ROUTER, n_moe, moe.n_experts, self.d)
            head = GemmShape(LM_HEAD, 1, self.d_out, self.d_x)
        else:
            q, kv = self._heads_per_gpu(tp)
            attn = (GemmShape("W_QKV (fused, GQA)", self.N, (q + 2 * kv) * self.head_dim, self.d_x),
                    GemmShape("W_O", self.N, self.d_x, q * self.head_dim))
            router = GemmShape(ROUTER, n_moe, moe.n_experts, self.d_x)
            head = GemmShape(LM_HEAD, 1, -(-self.d_out // tp), self.d_x)
        return (*attn, *self._ffn_gemms(mode, "dense", self.N - n_moe, self.d_ff // tp), router,
                *self._ffn_gemms(mode, "shared", n_moe, moe.d_shared // tp), head)

    def expert_gemms(self, mode: str = "paper", tp: int = 1) -> tuple[GemmShape, ...]:
        """One routed expert's GeMMs, each run in every MoE layer (``count``) over the tokens routed
        to it (:mod:`theory.moe`); empty for a dense model.

        With ``tp > 1`` (checked by :func:`theory.cost_model.check_moe`) one GPU's shard of the
        expert: vLLM without expert parallelism splits every expert over the tensor-parallel
        GPUs like a dense MLP, gate/up column-parallel (``2 d_ff_expert / tp`` rows) and down
        row-parallel (a reduction of ``d_ff_expert / tp``), every GPU holding all ``E`` experts
        (vllm-project/vllm @ c439a139790cafaecb54e8dea123b78049f1442b
        ``vllm/model_executor/layers/fused_moe/layer.py``, ``FusedMoE.__init__``:
        ``intermediate_size_per_partition = intermediate_size // tp_size``, ``local_num_experts =
        global_num_experts`` without ``enable_expert_parallel``; ``UnquantizedFusedMoEMethod.
        create_weights``: ``w13`` of ``2 intermediate_size_per_partition x hidden_size``, ``w2`` of
        ``hidden_size x intermediate_size_per_partition``)."""
        _check_mode(mode)
        if self.moe is None:
            return ()
        return self._ffn_gemms(mode, "expert", self.n_moe_layers, self.moe.d_ff_expert // tp)

    def _heads_per_gpu(self, tp: int) -> tuple[int, int]:
        """(query heads, KV heads) on one GPU of a ``tp``-way split (KV replicated past n_kv_heads)."""
        return self.n_heads // tp, max(self.n_kv_heads // tp, 1)

    def attention_widths(self, mode: str = "paper", tp: int = 1) -> tuple[int, int]:
        """(d used by prefill attention, Eq. 6; d used by decode attention, Eq. 5), per GPU."""
        _check_mode(mode)
        if mode == "paper":
            return self.d, self.d
        q, kv = self._heads_per_gpu(tp)
        return q * self.head_dim, kv * self.head_dim

    def linear_flops_per_token(self, mode: str = "paper") -> int:
        """2 x (weights touched per token): the useful FLOPs of the linear layers per token."""
        dense = sum(2 * g.count * g.d_row * g.d_red for g in self.linear_gemms(mode))
        if self.moe is None:
            return dense
        return dense + self.moe.experts_per_token * sum(2 * g.count * g.d_row * g.d_red
                                                        for g in self.expert_gemms(mode))

    def nonlinear_elements_per_token(self, mode: str = "paper", tp: int = 1) -> int:
        """Activation elements the element-wise operations read and write per token (Sec. 3.2.3).

        Per layer: two norms (read and write d_x each), two residual adds (read 2 d_x, write d_x
        each) and the FFN activation (ReLU: read and write d_ff; SwiGLU: read 2 d_ff, write d_ff);
        then a final norm (2 d_x) and the output softmax (2 d_out). Attention's mask and softmax
        are neglected as in the paper. With ``tp > 1`` one GPU's share: the activation and the
        softmax over its shard, the norms and residuals replicated. A MoE layer's FFN part is
        :meth:`moe_elements_per_token` in place of the dense activation.
        """
        _check_mode(mode)
        per = 3 if (mode == "real" and self.ffn == "swiglu") else 2
        if self.moe is None:
            return self.N * (10 * self.d_x + per * self.d_ff // tp) + 2 * self.d_x + 2 * -(-self.d_out // tp)
        n_moe = self.n_moe_layers
        return (self.N * 10 * self.d_x + (self.N - n_moe) * per * self.d_ff // tp
                + n_moe * self.moe_elements_per_token(mode, tp) + 2 * self.d_x + 2 * -(-self.d_out // tp))

    def moe_elements_per_token(self, mode: str = "paper", tp: int = 1) -> int:
        """Activation elements one MoE layer's element-wise work reads and writes per token
        (:mod:`theory.moe`): the router's ``E`` logits (softmax and top-k: read and write), the
        activation of the ``k`` routed and the shared experts (as a dense FFN's, per token), and
        the weighted sum of the ``k`` expert outputs (read ``k d_x``, write ``d_x``: vLLM's fused
        MoE writes each slot's output, then sums them, ``moe_sum`` in
        ``vllm/model_executor/layers/fused_moe/fused_moe.py``); 0 for a dense model. With
        ``tp > 1`` one GPU's share: the experts' activation over its shard of their width
        (:meth:`expert_gemms`), the router's softmax and the weighted sum replicated."""
        _check_mode(mode)
        if self.moe is None:
            return 0
        moe = self.moe
        per = 3 if (mode == "real" and self.ffn == "swiglu") else 2
        return (per * (moe.experts_per_token * moe.d_ff_expert // tp + moe.d_shared // tp)
                + 2 * moe.n_experts + (moe.experts_per_token + 1) * self.d_x)

    def divisibility_dims(self, mode: str = "paper", tp: int = 1) -> dict[str, tuple[int, str]]:
        """Model dimensions a tile must divide, as ``{label: (value, role)}`` (Section 3.2.1).

        In paper mode :func:`theory.cost_model.check_divisible` refuses a model where a tile does
        not divide one of them. In real mode nothing is refused: the cost model prices a partial
        tile by Eq. 2-3's ceilings, as real kernels pad it (:func:`theory.cost_model.build_cost_model`),
        and these are the dimensions Assumption 1's perfect tiling asks (:mod:`theory.assumptions`).

        ``role`` is ``"row"`` (divided by t_row), ``"red"`` (by t_red) or ``"gemv"`` (by the GeMV
        tile's t_row and t_col, Eq. 5). With ``tp > 1`` the per-GPU shards; the vocab shard is then
        left out (serving frameworks pad it, and Eq. 2's ceilings price the padding). In real mode
        the vocabulary (the LM head's rows) is left out at TP 1 too, for the same reason (vLLM pads
        it to a multiple of 64, ``vllm/model_executor/layers/vocab_parallel_embedding.py``,
        ``pad_vocab_size``; Qwen3's 151,936 is not a multiple of 256); paper mode keeps it
        (Section 3.2.1 assumes every dimension divisible). A MoE router's ``E`` rows are left out
        too: fewer than a tile's rows in every preset, padded by Eq. 2's ceiling (:mod:`theory.moe`).
        """
        dims: dict[str, tuple[int, str]] = {}
        for g in (*self.linear_gemms(mode, tp), *self.expert_gemms(mode, tp)):
            if tp > 1 and g.name == LM_HEAD:
                continue
            if not (mode == "real" and g.name == LM_HEAD) and g.name != ROUTER:
                dims[f"{g.name}: d_row"] = (g.d_row, "row")
            dims[f"{g.name}: d_red"] = (g.d_red, "red")
        d_pre, d_dec = self.attention_widths(mode, tp)
        dims["prefill attention d (K^T Q reduction)"] = (d_pre, "red")
        dims["prefill attention d (V P rows)"] = (d_pre, "row")
        dims["decode attention d"] = (d_dec, "gemv")
        return dims


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise FieldError("mode", mode, f"one of {', '.join(MODES)}")


def _build_model(key: str, table: dict) -> Model:
    where = f"models.{key}"
    values = {}
    for f in _INT_FIELDS:
        v = table.get(f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise FieldError(f"{where}.{f}", v, "an integer >= 1")
        values[f] = v
    if values["n_heads"] % values["n_kv_heads"]:
        raise FieldError(f"{where}.n_kv_heads", values["n_kv_heads"],
                         f"a divisor of n_heads = {values['n_heads']}")
    ffn = table.get("ffn", "swiglu")
    if ffn not in ("swiglu", "mlp"):
        raise FieldError(f"{where}.ffn", ffn, "'swiglu' or 'mlp'")
    params = table.get("params")
    if isinstance(params, bool) or not isinstance(params, (int, float)) or not math.isfinite(params) \
            or params <= 0:
        raise FieldError(f"{where}.params", params, "a parameter count > 0")
    context = table.get("context_length")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 2):
        raise FieldError(f"{where}.context_length", context, "an integer >= 2 (tokens), or no entry")
    moe = moe_from(table, where, values["n_layers"])
    precision = check_precision(table.get("precision", DEFAULT), f"{where}.precision")
    return Model(key=key, name=str(table.get("name", key)), N=values["n_layers"],
                 d_x=values["d_model"], n_heads=values["n_heads"],
                 n_kv_heads=values["n_kv_heads"], head_dim=values["head_dim"],
                 d_ff=values["d_ff"], d_out=values["vocab"], ffn=ffn, params=float(params),
                 source=str(table.get("source", "")), terms=model_terms_from(table, where),
                 context_length=context, moe=moe, precision=precision)


@cache
def _preset_tables() -> dict:
    return read_packaged("models.toml")["models"]


def load_models(path: str | Path | None = None) -> dict[str, Model]:
    """All model presets, plus or overridden by the ``[models.<key>]`` tables of a user TOML."""
    fields = (*MODEL_FIELDS, *sorted(term_keys("model")))
    user = read_section(path, "models", fields) if path is not None else {}
    tables = inherit(_preset_tables(), user, "model")
    return {key: _build_model(key, t) for key, t in tables.items()}


def model_names() -> list[str]:
    """Keys of the model presets."""
    return list(_preset_tables())


def get_model(name: str, path: str | Path | None = None) -> Model:
    """A model by key or display name (case-insensitive); ``"NAME:PRECISION"`` is the model at that
    precision (``"llama-3.1-8b:fp8"``, :mod:`theory.precision`), as ``"GPU:TILES"`` restricts a GPU."""
    if not isinstance(name, str) or not name.strip():
        raise FieldError("model", name, "a model name such as 'mistral-7b'")
    base, sep, precision = name.partition(":")
    if sep:
        model = get_model(base, path)
        return replace(model, precision=check_precision(precision, f"model {name.strip()!r}: precision"))
    models = load_models(path) if path is not None else _preset_models()
    wanted = name.strip().lower()
    for key, m in models.items():
        if wanted in (key.lower(), m.name.lower()):
            return m
    raise UnknownNameError("model", name, list(models))


@cache
def _preset_models() -> dict[str, Model]:
    return load_models(None)
