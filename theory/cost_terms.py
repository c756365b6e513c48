"""The table of cost terms: every term beyond Eq. 2 declared once, with its unit, its value when
off, its value in the paper's model and the source of its form.

A term is a switch or a number of a GPU profile (``[gpus.<key>]``) or of a model profile
(``[models.<key>]``); :mod:`theory.terms` documents what each one changes and reads them from the
TOML files. Every other place a term must appear registers the terms it implements, by the names
of this table, and ``tests/test_cost_term_table.py`` fails when a declared term is missing from
one of them (``docs/howto/add-cost-term.md`` lists the places):

numeric   :data:`theory.cost.NUMERIC_TERMS` (Eq. 2-7 with the terms, :mod:`theory.cost`)
compiled  :data:`stability.sim.kernels.COMPILED_TERMS` (the simulator's cost tables)
symbolic  :data:`theory.symbolic.SYMBOLIC_TERMS` (the exact twin, or why it leaves the term out)
bounds    :data:`theory.bounds.BOUNDS_TERMS` (Theorem 1-2 and the certified capacity)
fit       :data:`theory.validation.term_fits.FIT_TERMS` (how a number of the term is fitted)

An *added-time* term (:attr:`CostTerm.added`) adds to Eq. 7 only through two slots: seconds per
non-empty batch, and seconds per decode at its position. Its numeric formula is registered with
:func:`theory.added_time.register` and its symbolic one with
:func:`theory.symbolic.register_added_time`; the compiled tables and the bounds take the two slots
as they come (the per-batch time rides on the fixed time of every batch, the per-decode time on the
decode prefix sums), so such a term needs no other code.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7; the sources named per term.
"""

from __future__ import annotations

from dataclasses import dataclass

from theory.errors import FieldError, require_nonneg

SIDES = ("gpu", "model")
RECORDS = ("terms", "profile")


@dataclass(frozen=True)
class CostTerm:
    """One cost term, as declared.

    Attributes
    ----------
    name : str
        The TOML key of the term (its switch or number).
    side : str
        ``"gpu"`` (a key of ``[gpus.<key>]``) or ``"model"`` (of ``[models.<key>]``).
    unit : str
        What its value is: ``"switch"`` (a TOML boolean), a unit of measure, or the shape of a table.
    default : object
        Its value when the key is absent: the term off.
    paper : object
        Its value in the paper's model (Eq. 2-7 as printed; the roofline presets of ``paper`` mode).
    citation : str
        The paper's equation, or the public source of its form.
    summary : str
        What it prices, in one line.
    keys : tuple of str
        Further TOML keys that belong to the term (read and checked with it).
    attr : str
        The attribute holding its value on its record (default: ``name``).
    record : str
        ``"terms"``: the value is on :class:`theory.terms.GpuTerms` or :class:`theory.terms.ModelTerms`;
        ``"profile"``: on the :class:`theory.hardware.GPU` profile itself.
    added : bool
        An added-time term (module docstring): its value is a number >= 0 read from its key, kept
        in ``terms.added``, and priced through the two slots of :class:`theory.added_time.AddedTime`.
    latency : bool
        A term of a request's latency alone: it adds to no batch, so no compiled table and no bound
        takes it (:mod:`theory.engine_terms`, ``frontend_s``).
    """

    name: str
    side: str
    unit: str
    default: object
    paper: object
    citation: str
    summary: str
    keys: tuple[str, ...] = ()
    attr: str = ""
    record: str = "terms"
    added: bool = False
    latency: bool = False

    def __post_init__(self):
        if not self.name.isidentifier():
            raise FieldError("cost term name", self.name, "an identifier (a TOML key)")
        if self.side not in SIDES:
            raise FieldError(f"cost term {self.name}.side", self.side, f"one of {', '.join(SIDES)}")
        if self.record not in RECORDS:
            raise FieldError(f"cost term {self.name}.record", self.record, f"one of {', '.join(RECORDS)}")
        if not self.citation.strip():
            raise FieldError(f"cost term {self.name}.citation", self.citation,
                             "the paper's equation or the public source of the term's form")
        if self.added and not (self.record == "terms" and self.default == 0.0 and self.paper == 0.0):
            raise FieldError(f"cost term {self.name}.added", True,
                             "an added-time term holds a number on its terms record, 0.0 when off")
        if self.latency and (self.added or self.record != "terms"):
            raise FieldError(f"cost term {self.name}.latency", True,
                             "a latency term holds its own number on its terms record (not added time)")
        if not self.attr:
            object.__setattr__(self, "attr", self.name)

    def value(self, gpu, model) -> object:
        """The term's value for ``gpu`` and ``model`` (:class:`theory.hardware.GPU`,
        :class:`theory.models.Model`)."""
        owner = model if self.side == "model" else gpu
        if self.record == "profile":
            return getattr(owner, self.attr)
        terms = owner.terms
        if self.added:
            return dict(terms.added).get(self.name, self.default)
        return getattr(terms, self.attr)

    def value_of(self, cm) -> object:
        """The term's value in the cost model ``cm`` (:class:`theory.cost_model.CostModel`): the
        model's own field of that name where it has one (a cost model may be replaced field by
        field), else its GPU's or model's; an added-time term's value is in ``cm.added``."""
        if self.added:
            return dict(cm.added).get(self.name, self.default)
        if hasattr(cm, self.attr):
            return getattr(cm, self.attr)
        return self.value(cm.gpu, cm.model)

    def is_on(self, cm) -> bool:
        """Whether the term changes the cost model ``cm`` (its value is not its default)."""
        return self.value_of(cm) != self.default


_VLLM_GRAPHS = ("vllm-project/vllm @ 0045689 docs/design/cuda_graphs.md; "
                "@ 002284d vllm/config/compilation.py (cudagraph_capture_sizes)")
_FLASH = "FlashAttention: Dao et al. (2022), arXiv:2205.14135"
_NVIDIA_GEMM = "NVIDIA, \"Matrix Multiplication Background User's Guide\", section \"Wave Quantization\""

TERMS: dict[str, CostTerm] = {t.name: t for t in (
    CostTerm("memory_floor", "gpu", "switch", False, False,
             "Williams, Waterman, Patterson (2009), \"Roofline\", CACM 52(4)",
             "each linear GeMM at least its bytes over the achievable DRAM bandwidth"),
    CostTerm("waves", "gpu", "switch", False, False, _NVIDIA_GEMM,
             "each linear GeMM's output tiles dealt to the SMs in whole waves"),
    CostTerm("attention_waves", "gpu", "switch", False, False, _NVIDIA_GEMM + " (Eq. 6's two GeMMs)",
             "the same wave quantization for the prefill-attention GeMMs of Eq. 6"),
    CostTerm("l2_bandwidth_gbs", "gpu", "GB/s", None, None,
             "Ilic, Pratas, Sousa (2014), \"Cache-aware Roofline model\", IEEE CAL 13(1); NVIDIA CUTLASS "
             "media/docs/efficient_gemm.md",
             "each GeMM tile at least its operand slices over the L2 bandwidth", attr="l2_bandwidth"),
    CostTerm("overhead_s", "gpu", "s per batch", 0.0, 0.0, "Eq. 7 plus a constant per batch",
             "a fixed time per non-empty batch (launches, scheduling)", record="profile"),
    CostTerm("gemm_overhead_s", "gpu", "s per linear GeMM", 0.0, 0.0,
             "Eq. 2 plus an intercept per GeMM (as theory.validation.gemm_fit.fit_gemm fits it)",
             "a fixed time per linear GeMM of every batch"),
    CostTerm("attention_call_s", "gpu", "s per layer per batch", 0.0, 0.0,
             _FLASH + "; Flash-Decoding: Dao, Haziza, Massa, Sizov (2023), PyTorch blog",
             "a fixed time per attention kernel call: N of them per batch with attention"),
    CostTerm("mixed_decode_eta", "gpu", "factor of Eq. 5", 0.0, 0.0,
             "Eq. 5; vllm-project/vllm @ 0084b78 vllm/v1/attention/backends/flash_attn.py; "
             "Dao-AILab/flash-attention @ 00979f5 csrc/flash_attn/flash_api.cpp",
             "a decode beside a prefill chunk: eta times Eq. 5 at the query heads' width"),
    CostTerm("linear_law", "gpu", "table (kind, c, a, b0)", None, None,
             "Li, Dai, Peng (2025), arXiv:2504.07347, Fig. 4",
             "a literature law c + a ceil(tau / b0) in place of Eq. 4 and tau / mu_nLin"),
    CostTerm("gemm_profile", "gpu", "profile name or CSV path", None, None,
             "microsoft/vidur @ 7d47513 vidur/execution_time_predictor/",
             "measured GeMM times where the shape was profiled, interpolated in the tokens",
             keys=("gemm_profile_gpu",)),
    CostTerm("tp", "gpu", "GPUs per replica", 1, 1,
             "Shoeybi et al. (2019), Megatron-LM, arXiv:1909.08053, Section 3; nccl-tests doc/PERFORMANCE.md",
             "tensor parallelism: one GPU's shard of every GeMM plus the all-reduces",
             keys=("allreduce_latency_s", "allreduce_bandwidth_gbs")),
    CostTerm("ep", "gpu", "GPUs per expert-parallel group", 1, 1,
             "vllm-project/vllm@00193b82 vllm/config/parallel.py (enable_expert_parallel, all2all_backend); "
             "nccl-tests doc/PERFORMANCE.md",
             "expert parallelism of a mixture of experts: E/ep experts per GPU plus dispatch and combine",
             keys=("all2all_backend",)),
    CostTerm("attention", "model", "switch", True, True, "Eq. 5-6",
             "self-attention priced (false: 0, as token-count laws assume)"),
    CostTerm("lm_head", "model", "switch", False, False,
             "vllm-project/vllm vllm/v1/worker/gpu_model_runner.py (logits_indices)",
             "the vocab projection on one row per decode and per prefill chunk, not on every token"),
    CostTerm("moe", "model", "table (n_experts, experts_per_token, d_ff_expert, ...)", None, None,
             "Shazeer et al. (2017), arXiv:1701.06538 (top-k gating); vllm-project/vllm "
             "vllm/model_executor/layers/fused_moe/fused_moe.py (one grouped GeMM per expert weight)",
             "mixture-of-experts layers: the expected grouped GeMMs of the experts a batch reaches",
             keys=("n_experts", "experts_per_token", "d_ff_expert", "n_shared_experts", "d_ff_shared",
                   "first_dense_layers", "moe_every", "routing"), record="profile"),
    CostTerm("engine_step_s", "gpu", "s per engine step", 0.0, 0.0,
             "Eq. 7 plus a constant per batch; vllm-project/vllm vllm/v1/engine/core.py (EngineCore.step: "
             "schedule, execute, update from output; commit not verified)",
             "the engine's host time per step (scheduling, input preparation, sampling, output "
             "processing), beside the GPU profile's overhead_s", added=True),
    CostTerm("cudagraph_capture_sizes", "gpu", "list of token counts", None, None, _VLLM_GRAPHS,
             "a step of tau <= max(sizes) tokens runs its linear GeMMs at the least captured size >= tau"),
    CostTerm("frontend_s", "gpu", "s per request", 0.0, 0.0,
             "vllm-project/vllm vllm/entrypoints/openai/ (tokenize, detokenize, HTTP; commit not verified)",
             "the API front end's time per request, added to its TTFT and latency, not to GPU time",
             latency=True),
)}


def declare(term: CostTerm) -> CostTerm:
    """Add ``term`` to the table (a new term; the names of the table stay unique)."""
    if not isinstance(term, CostTerm):
        raise FieldError("term", type(term).__name__, "a theory.cost_terms.CostTerm")
    taken = {key for t in TERMS.values() if t.side == term.side for key in (t.name, *t.keys)}
    clash = sorted(taken & {term.name, *term.keys})
    if clash:
        raise FieldError(f"cost term {term.name}", clash, f"keys not yet declared on the {term.side} side")
    TERMS[term.name] = term
    return term


def withdraw(name: str) -> CostTerm:
    """Remove the term ``name`` from the table (the inverse of :func:`declare`)."""
    if name not in TERMS:
        raise FieldError("cost term", name, f"one of {', '.join(TERMS)}")
    return TERMS.pop(name)


def term_keys(side: str) -> frozenset[str]:
    """Every TOML key the terms of ``side`` read from a ``terms`` record (their names and
    further keys)."""
    return frozenset(key for t in TERMS.values() if t.side == side and t.record == "terms"
                     for key in (t.name, *t.keys))


def added_terms(side: str) -> tuple[CostTerm, ...]:
    """The added-time terms of ``side``, in table order."""
    return tuple(t for t in TERMS.values() if t.side == side and t.added)


def switches(side: str) -> tuple[str, ...]:
    """The names of the terms of ``side`` that are switches (they need no fitted number)."""
    return tuple(t.name for t in TERMS.values() if t.side == side and t.unit == "switch")


def read_added(table: dict, where: str, side: str) -> tuple[tuple[str, float], ...]:
    """The added-time terms of ``side`` that ``table`` switches on, as ``(name, value)`` pairs in
    table order (a value must be a finite number >= 0; 0 is off)."""
    out = []
    for term in added_terms(side):
        value = require_nonneg(f"{where}.{term.name}", table.get(term.name, 0.0), term.unit)
        if value:
            out.append((term.name, value))
    return tuple(out)
