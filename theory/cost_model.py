"""The cost model of one GPU running one model: its record (:class:`CostModel`) and the one
builder that checks tile divisibility and applies the cost terms (:func:`build_cost_model`).

The functions of Eq. 2-7 that take a cost model are in :mod:`theory.cost`, which also names these
two; :mod:`theory.terms` documents the terms.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from theory import added_time
from theory.errors import FieldError, TileDivisibilityError
from theory.expert_parallel import COLLECTIVES_PER_LAYER, bus_bytes_per_token, check_ep
from theory.hardware import GPU, Tile
from theory.linear_terms import LinearTerms
from theory.measured import MeasuredLinear
from theory.models import GemmShape, Model, _check_mode
from theory.moe import MoETerms
from theory.precision import at_precision
from theory.terms import LM_HEAD, ceil_div
from theory.tp_split import allreduce_count, allreduce_time, check_moe_tp, check_tp


@dataclass(frozen=True, eq=False)
class CostModel:
    """The batch-time model of one GPU running one model (Section 3.2).

    Build it with :func:`build_cost_model`. Tile arrays are ordered with t* first, so a tie in a
    minimum over tiles resolves to t*.

    Attributes
    ----------
    gpu, model, mode
        What it models; ``mode`` is ``"paper"`` or ``"real"`` (see :mod:`theory.models`).
    s, N : int
        SM count and layer count.
    d_pre, d_dec : int
        Attention width of prefill (Eq. 6) and decode (Eq. 5) iterations.
    t_row, t_col, t_red, mu : ndarray
        GeMM tiles and their rates (Eq. 2).
    lin_pairs : ndarray
        Tile pairs of all linear GeMMs per column block of tokens, per tile (Section 3.2.1).
    g_row, g_col, mu_gemv : ndarray
        GeMV tiles and rates (Eq. 3).
    mu_nLin : float
        Tokens per second of the non-linear operations (Section 3.2.3); ``inf`` under a linear
        law (the law includes it).
    overhead_s : float
        Fixed time per batch (0 reproduces Eq. 7).
    attention_call_s : float
        Fixed time per layer of a batch with attention work (``attention_call_s``,
        :mod:`theory.terms`; 0 reproduces Eq. 7); :attr:`fixed_s` adds it to ``overhead_s``.
    mixed_decode_eta : float
        Factor of Eq. 5 at the query heads' width ``d_pre`` for a decode in a batch with a prefill
        chunk (``mixed_decode_eta``, :mod:`theory.terms`; 0: Eq. 5 for every decode).
    added : tuple of (str, float)
        The added-time terms switched on, GPU side then model side, with their values
        (:mod:`theory.cost_terms`; their time is :mod:`theory.added_time`'s).
    gemms : tuple of GemmShape
        The linear GeMMs of a batch (one GPU's shards with TP; without the vocab projection
        when ``lm_head`` prices it per row).
    lin : LinearTerms or None
        The linear time with terms on; ``None`` is Eq. 4 exactly.
    lm_out_s : float
        Vocab projection time per scheduled request row (``lm_head``; 0 otherwise).
    attention : bool
        Whether self-attention (Eq. 5-6) is priced.
    waves : bool
        Wave quantization of the linear GeMMs (the ``waves`` term; priced through ``lin``).
    attention_waves : bool
        Wave quantization of the prefill-attention GeMMs of Eq. 6 (``attention_waves``).
    """

    gpu: GPU
    model: Model
    mode: str
    s: int
    N: int
    d_pre: int
    d_dec: int
    tiles: tuple[Tile, ...]
    t_row: np.ndarray
    t_col: np.ndarray
    t_red: np.ndarray
    mu: np.ndarray
    lin_pairs: np.ndarray
    g_row: np.ndarray
    g_col: np.ndarray
    mu_gemv: np.ndarray
    mu_nLin: float
    overhead_s: float
    gemms: tuple[GemmShape, ...] = ()
    lin: LinearTerms | None = None
    lm_out_s: float = 0.0
    attention: bool = True
    waves: bool = False
    attention_waves: bool = False
    attention_call_s: float = 0.0
    mixed_decode_eta: float = 0.0
    added: tuple[tuple[str, float], ...] = ()

    @property
    def plain(self) -> bool:
        """Whether every term beyond Eq. 2 is off (the model is Eq. 2-7 plus ``overhead_s``)."""
        return (self.lin is None and self.attention and not self.waves and not self.attention_waves
                and self.lm_out_s == 0.0 and self.attention_call_s == 0.0
                and self.mixed_decode_eta == 0.0 and not self.added)

    @property
    def base_fixed_s(self) -> float:
        """The fixed time of every non-empty batch before the added-time terms: ``overhead_s``
        plus, with attention priced, ``N attention_call_s`` (every decode and prefill chunk attends,
        so every non-empty batch calls attention once per layer)."""
        return self.overhead_s + (self.N * self.attention_call_s if self.attention else 0.0)

    @property
    def fixed_s(self) -> float:
        """The fixed time of every non-empty batch: :attr:`base_fixed_s` plus the per-batch time of
        the added-time terms (:func:`theory.added_time.batch_s`)."""
        return self.base_fixed_s + added_time.batch_s(self) if self.added else self.base_fixed_s

    @property
    def t_star(self) -> Tile:
        """Assumption 1's optimal tile (index 0 of the tile arrays)."""
        return self.tiles[0]

    @property
    def t_lcm(self) -> int:
        """RAD's chunk t*_lcm = LCM(t*_row, t*_col, t*_red) (Algorithm 1, line 13)."""
        return self.tiles[0].t_lcm

    @property
    def mu_Lin(self) -> np.ndarray:
        """mu_Lin(t) per tile: ``1 / mu_Lin(t)`` is the linear time of one column block (Eq. 4)."""
        return self.s * self.mu / self.lin_pairs

    def describe(self) -> str:
        precision = "" if self.model.spec_name == self.model.key else f", {self.model.precision}"
        return f"{self.gpu.name} / {self.model.name} ({self.mode} mode{precision})"


def build_cost_model(gpu: GPU, model: Model, mode: str = "paper") -> CostModel:
    """The cost model of ``model`` on ``gpu``; in paper mode after checking tile divisibility
    (Section 3.2.1, :func:`check_divisible`).

    In real mode a dimension that a tile does not divide is priced as real kernels run it, by the
    ceilings of Eq. 2-3: the last tile along it is a partial tile, padded, and takes a whole
    tile's time (``ceil(d_row / t_row) ceil(d_red / t_red)`` per column block for the linear and
    expert GeMMs, ``ceil(d / t)`` in Eq. 5-6's attention GeMVs and GeMMs). The functions of
    :mod:`theory.cost` and :mod:`theory.moe` already take these ceilings; Theorem 1's least work
    keeps the unpadded ``d / t`` (:func:`theory.bounds.T_bar_R_terms`), a lower bound of them.

    The terms of ``gpu.terms`` and ``model.terms`` (:mod:`theory.terms`) are applied here; with
    all of them off this is Eq. 2-7. A model at ``precision = "fp8"`` is priced on the GPU's FP8
    rates and byte counts (:func:`theory.precision.at_precision`); ``cm.gpu`` is then that GPU.

    Raises
    ------
    TileDivisibilityError
        In paper mode, if a tile does not divide a model dimension it is used on.
    FieldError
        If the GPU's ``tp`` cannot split the model, the terms contradict each other, or the model
        is at FP8 on a GPU without FP8 tensor cores.
    """
    _check_mode(mode)
    gpu = at_precision(gpu, model)
    gt, mt = gpu.terms, model.terms
    tp = gt.tp
    check_tp(tp, model.n_heads, model.n_kv_heads, model.d_ff, mode, model.key, f"gpus.{gpu.key}")
    if model.moe is not None:
        check_moe(gpu, model)
    else:
        check_ep(gt.ep, tp, model, f"gpus.{gpu.key}")
    if gt.linear_law is not None and mt.lm_head:
        raise FieldError(f"models.{model.key}.lm_head", True,
                         f"false on GPU {gpu.key}, whose linear_law replaces the whole linear time")
    t_star = gpu.optimal_tile()
    order = [gpu.tiles.index(t_star)] + [k for k, t in enumerate(gpu.tiles) if t != t_star]
    tiles = tuple(gpu.tiles[k] for k in order)
    if mode == "paper":
        check_divisible(gpu, model, tiles)
    t_row = np.array([t.t_row for t in tiles], dtype=np.int64)
    t_col = np.array([t.t_col for t in tiles], dtype=np.int64)
    t_red = np.array([t.t_red for t in tiles], dtype=np.int64)
    mu = np.array([gpu.mu[k] for k in order], dtype=float)
    all_gemms = model.linear_gemms(mode, tp)
    gemms = tuple(g for g in all_gemms if not (mt.lm_head and g.name == LM_HEAD))
    lin_pairs = np.zeros(len(tiles), dtype=float)
    for g in gemms:
        lin_pairs += g.count * ceil_div(g.d_row, t_row) * ceil_div(g.d_red, t_red)
    d_pre, d_dec = model.attention_widths(mode, tp)
    if gt.linear_law is not None:
        mu_nLin = math.inf
    elif gpu.mu_nLin is not None:
        mu_nLin = gpu.mu_nLin
    else:
        mu_nLin = gpu.eta_mem * gpu.bandwidth / (2.0 * model.nonlinear_elements_per_token(mode, tp))
    lin, lm_out = None, 0.0
    if not (gt.linear_plain and not mt.lm_head and model.moe is None):
        lin = _linear_terms(gpu, model, gemms, t_row, t_col, t_red, all_gemms)
        if model.moe is not None:
            lin = replace(lin, moe=moe_terms(gpu, model, mode, (t_row, t_col, t_red), mu))
        if gt.gemm_profile is not None:
            lin = replace(lin, measured=_measured(gpu, gemms, mode))
        if mt.lm_head:
            head = next(g for g in all_gemms if g.name == LM_HEAD)
            lm_out = float(ceil_div(head.d_row, t_row[0]) * ceil_div(head.d_red, t_red[0])
                           / (gpu.s * mu[0] * t_col[0]))
    return CostModel(
        gpu=gpu, model=model, mode=mode, s=gpu.s, N=model.N, d_pre=d_pre, d_dec=d_dec,
        tiles=tiles, t_row=t_row, t_col=t_col, t_red=t_red, mu=mu, lin_pairs=lin_pairs,
        g_row=np.array([g.t_row for g in gpu.gemv_tiles], dtype=np.int64),
        g_col=np.array([g.t_col for g in gpu.gemv_tiles], dtype=np.int64),
        mu_gemv=np.array(gpu.mu_gemv, dtype=float), mu_nLin=float(mu_nLin),
        overhead_s=gpu.overhead_s, gemms=gemms, lin=lin, lm_out_s=lm_out,
        attention=mt.attention, waves=gt.waves, attention_waves=gt.attention_waves,
        attention_call_s=gt.attention_call_s, mixed_decode_eta=gt.mixed_decode_eta,
        added=gt.added + mt.added)


def check_divisible(gpu: GPU, model: Model, tiles: tuple[Tile, ...]) -> None:
    """Raise :class:`TileDivisibilityError` where a tile of ``tiles`` (or a GeMV tile of ``gpu``)
    does not divide a paper-mode dimension of ``model`` it is used on
    (:meth:`theory.models.Model.divisibility_dims`): Section 3.2.1's hypothesis, and Eq. 5's
    ``d / t_row`` and ``d / t_col``.

    References
    ----------
    Bari, Hegde, de Veciana (2025), Section 3.2.1 and Eq. 5.
    """
    for label, (value, role) in model.divisibility_dims("paper").items():
        if role == "gemv":
            for g in gpu.gemv_tiles:
                if value % g.t_row or value % g.t_col:
                    raise TileDivisibilityError(
                        f"GeMV tile {g} of {gpu.key} does not divide {model.key} {label} = {value} "
                        f"(Eq. 5 assumes d divisible by t_row and t_col)")
            continue
        for t in tiles:
            dim = t.t_row if role == "row" else t.t_red
            if value % dim:
                raise TileDivisibilityError(
                    f"tile {t} of {gpu.key} does not divide {model.key} {label} = {value} "
                    f"(t_{role} = {dim}; Section 3.2.1 assumes model dimensions divisible by tiles)")


def _linear_terms(gpu: GPU, model: Model, gemms, t_row, t_col, t_red, all_gemms) -> LinearTerms:
    """The arrays of :class:`LinearTerms` for ``gemms`` on ``gpu`` (see :mod:`theory.terms`)."""
    gt, mt = gpu.terms, model.terms
    b, wb = gt.bytes_per_element, model.bytes_per_element  # activations; weights and GeMM inputs
    bw = gpu.eta_mem * gpu.bandwidth
    tok_s = 0.0
    batch_s = gt.gemm_overhead_s * sum(g.count for g in gemms)
    if mt.lm_head:  # embedding gather: read and write d_x elements per token
        tok_s += 2.0 * b * model.d_x / bw
        if gt.memory_floor:  # the vocab projection's weights are read once per batch
            head = next(g for g in all_gemms if g.name == LM_HEAD)
            batch_s += wb * head.d_row * head.d_red / bw
    if gt.tp > 1:  # two all-reduces per layer, one more for the vocab-parallel embedding
        n_ar = allreduce_count(model)
        tok_s += n_ar * float(allreduce_time(gt, b * model.d_x, latency=False))
        batch_s += n_ar * gt.allreduce_latency_s
    return LinearTerms(
        count=np.array([g.count for g in gemms], dtype=np.int64),
        rows=np.array([[int(ceil_div(g.d_row, r)) for g in gemms] for r in t_row], dtype=np.int64),
        red=np.array([[int(ceil_div(g.d_red, k)) for g in gemms] for k in t_red], dtype=np.int64),
        wbytes=np.array([float(wb * g.d_row * g.d_red) for g in gemms]),
        abytes=np.array([float(b * g.d_row + wb * g.d_red) for g in gemms]),
        waves=gt.waves, floor_bw=bw if gt.memory_floor else 0.0,
        traffic=np.array([[float(wb * (r + c) * g.d_red) for g in gemms]
                          for r, c in zip(t_row, t_col, strict=True)]),
        l2_bw=gt.l2_bandwidth or 0.0, tok_s=tok_s, batch_s=batch_s,
        law=gt.linear_law)


def _measured(gpu: GPU, gemms, mode: str) -> MeasuredLinear:
    """The measured-profile law of ``gemms`` (:mod:`theory.measured`; ``gemm_profile``)."""
    from theory.profiles import gemm_tables

    where = f"gpus.{gpu.key}"
    gt = gpu.terms
    if mode != "real":
        raise FieldError(f"{where}.gemm_profile", gt.gemm_profile,
                         "no measured profile in mode 'paper' (the profiles time the served layer's "
                         "GeMMs); use mode 'real'")
    by_shape = gemm_tables(gt.gemm_profile, gt.gemm_profile_gpu, where)
    return MeasuredLinear(tables=tuple(by_shape.get((g.d_row, g.d_red)) for g in gemms),
                          count=np.array([g.count for g in gemms], dtype=np.int64),
                          gemm_overhead_s=gt.gemm_overhead_s, profile=gt.gemm_profile,
                          gpu=gt.gemm_profile_gpu, by_shape=by_shape)


def check_moe(gpu: GPU, model: Model) -> None:
    """Raise :class:`FieldError` where the cost model cannot price ``model``'s MoE layers on ``gpu``
    (:mod:`theory.moe`): an expert or shared-expert width that the GPU's ``tp`` does not split
    (:func:`theory.tp_split.check_moe_tp`), tensor and expert parallelism together, an
    expert-parallel group that does not split the experts (:func:`theory.expert_parallel.check_ep`),
    or a law that replaces the whole linear time."""
    where = f"gpus.{gpu.key}"
    tp, ep = gpu.terms.tp, gpu.terms.ep
    check_moe_tp(tp, model)
    if tp > 1 and ep > 1:
        raise FieldError(f"{where}.tp", tp,
                         f"1 with ep = {ep} for the mixture of experts {model.key} (tensor parallelism "
                         "inside an expert-parallel group is not modelled: an EP group is ep replicas "
                         "of one GPU each)")
    check_ep(gpu.terms.ep, gpu.terms.tp, model, where)
    if gpu.terms.linear_law is not None:
        raise FieldError(f"{where}.linear_law", gpu.terms.linear_law.kind,
                         f"no law for the mixture of experts {model.key} (a token-count law has no "
                         "term for the experts a batch reaches)")


def moe_terms(gpu: GPU, model: Model, mode: str, tiles: tuple, mu: np.ndarray) -> MoETerms:
    """The arrays of :class:`theory.moe.MoETerms` for ``model``'s routed experts on ``gpu`` (one
    GPU's shard of every expert with ``tp > 1``, :meth:`theory.models.Model.expert_gemms`)."""
    t_row, t_col, t_red = tiles
    gt, moe = gpu.terms, model.moe
    b, wb = gt.bytes_per_element, model.bytes_per_element  # activations; weights and GeMM inputs
    gemms = model.expert_gemms(mode, gt.tp)
    return MoETerms(
        count=model.n_moe_layers, E=moe.n_experts, k=moe.experts_per_token,
        rows=np.array([[int(ceil_div(g.d_row, r)) for g in gemms] for r in t_row], dtype=np.int64),
        red=np.array([[int(ceil_div(g.d_red, k)) for g in gemms] for k in t_red], dtype=np.int64),
        t_col=t_col.copy(), mu=mu.copy(), s=gpu.s,
        wbytes=np.array([float(wb * g.d_row * g.d_red) for g in gemms]),
        abytes=np.array([float(b * g.d_row + wb * g.d_red) for g in gemms]),
        traffic=np.array([[float(wb * (r + c) * g.d_red) for g in gemms]
                          for r, c in zip(t_row, t_col, strict=True)]),
        waves=gt.waves, floor_bw=gpu.eta_mem * gpu.bandwidth if gt.memory_floor else 0.0,
        l2_bw=gt.l2_bandwidth or 0.0, launch_s=len(gemms) * gt.gemm_overhead_s,
        **_ep_fields(gt, model))


def _ep_fields(gt, model: Model) -> dict:
    """The expert-parallel fields of :class:`theory.moe.MoETerms` (:mod:`theory.expert_parallel`):
    none at ``ep = 1``."""
    if gt.ep == 1:
        return {}
    per_tok = bus_bytes_per_token(gt.all2all_backend, gt.ep, model.moe.experts_per_token, model.d_x,
                                  gt.bytes_per_element)
    return {"ep": gt.ep, "comm_tok_s": COLLECTIVES_PER_LAYER * per_tok / gt.allreduce_bandwidth,
            "comm_batch_s": COLLECTIVES_PER_LAYER * gt.allreduce_latency_s}
