"""Mixture-of-experts layers: the model fields, the expected spread of a batch's tokens over the
experts, and the time of the grouped expert GeMMs.

The fields (``[models.<key>]``)::

    n_experts = 128            # E, routed experts per MoE layer (config.json num_experts)
    experts_per_token = 8      # k, experts each token is routed to (num_experts_per_tok)
    d_ff_expert = 768          # each expert's FFN width (moe_intermediate_size)
    n_shared_experts = 0       # experts every token runs (DeepSeek n_shared_experts); 0: none
    d_ff_shared = 0            # the width of each shared expert (needed when n_shared_experts > 0)
    first_dense_layers = 0     # the first layers keep a dense FFN of width d_ff (first_k_dense_replace)
    moe_every = 1              # layer i (from 0) is MoE when (i + 1) % moe_every == 0 (decoder_sparse_step)
    routing = "uniform"        # how the token-slots spread over the experts (below)

A MoE layer runs, for a batch of ``tau`` tokens, a router GeMM ``E x d_x`` over the ``tau`` tokens,
the shared experts as a dense FFN of width ``n_shared_experts d_ff_shared`` over the ``tau`` tokens
(both are ordinary linear GeMMs, :meth:`theory.models.Model.linear_gemms`), and the routed experts:
``tau k`` token-slots spread over the ``E`` experts, expert ``e`` receiving ``n_e`` of them, and
each expert with ``n_e > 0`` runs its FFN GeMMs over its ``n_e`` tokens (real mode: SwiGLU
gate/up ``2 d_ff_expert x d_x`` and down ``d_x x d_ff_expert``; paper mode: the paper's two-matrix
FFN, ``d_ff_expert x d`` and ``d_x x d_ff_expert``, Section 3.2.1).

The grouped GeMM. Serving engines run the experts of one MoE layer as one grouped GeMM per weight
(vLLM's ``fused_moe`` Triton kernel: the tokens are sorted by expert, each expert's block padded to
the kernel's ``BLOCK_SIZE_M``, and one launch's grid covers the output tiles of all experts;
vllm-project/vllm ``vllm/model_executor/layers/fused_moe/fused_moe.py``, ``invoke_fused_moe_kernel``
and ``moe_align_block_size``). So per weight and per tile ``t``:

- output tiles ``X_t = ceil(d_row / t_row) sum_e ceil(n_e / t_col)`` (Eq. 2's tile count per
  expert, the expert's tokens as the column dimension);
- compute ``X_t ceil(d_red / t_red) / (s mu(t))`` (Eq. 2), or with ``waves``
  ``ceil(X_t / s) ceil(d_red / t_red) / mu(t)``: the tiles of all experts are dealt to the SMs
  together, one grid;
- with ``l2_bandwidth_gbs``, at least ``X_t b (t_row + t_col) d_red / B_L2``;
- with ``memory_floor``, at least the bytes of the grouped GeMM over the achievable bandwidth:
  the weights of every active expert and the activations of every slot,
  ``b (A d_row d_red + S (d_row + d_red)) / (eta_mem B)`` with ``A`` the active experts and ``S``
  the slots (at FP8 the weights and inputs at one byte, the outputs at two: :mod:`theory.precision`);
- the fastest tile of the set (as every GeMM of :mod:`theory.cost`), plus ``gemm_overhead_s``
  per launch: two launches per MoE layer.

An expert width that a tile does not divide (gpt-oss's 2,880) is priced in real mode by these
ceilings, a padded last tile; paper mode refuses it (:func:`theory.cost_model.check_divisible`).

Routing. ``routing = "uniform"`` (the only law for now; a measured skew is a later value of the
field): each token picks ``k`` *distinct* experts uniformly at random, independently of the other
tokens, as a top-k router picks ``k`` distinct experts. Then expert ``e``'s load ``n_e`` is
exactly Binomial(``tau``, ``k / E``) (a token includes ``e`` with probability ``C(E-1, k-1) /
C(E, k) = k / E``), and, by linearity of expectation, the expected tile count, active count and
bytes are exact:

- expected active experts ``A(tau) = E (1 - (1 - k/E)^tau)`` (:func:`active_experts`); the
  balls-into-bins form with replacement, ``E (1 - (1 - 1/E)^(tau k))``
  (:func:`active_experts_with_replacement`), lets a token pick an expert twice and so undercounts;
  it is kept for comparison only;
- expected column blocks ``E E[ceil(n / t_col)] = E sum_{j >= 0} P(n > j t_col)``
  (:func:`expected_blocks`), the exact expectation of the ceiling over the binomial law.

The approximation. The cost is linear in these three quantities at a given tile, except for the
waves' ceiling and the floors' maxima; these, and the choice of the fastest tile, are taken at the
expectations (Jensen's gap: ``E[min_t f_t] <= min_t E[f_t]``, and the ceiling and the maxima move
either way, by less than one wave and by at most the spread of the terms they compare).
``tests/test_moe.py`` measures the gap against a seeded router simulation (a top-k router on random
logits) and holds it within a stated tolerance.

Theorem 1's least work per token. ``sum_e ceil(n_e / t_col) >= tau k / t_col`` and the floor's
bytes are at least ``S (d_row + d_red) b``, so the MoE time per token is at least
``N_moe sum_g min_t max(k ceil(d_row/t_row) ceil(d_red/t_red) / (s mu t_col), ...)``
(:meth:`MoETerms.per_token_limit`), which it approaches as the batch grows (every expert active,
each with many tokens): the infimum, as :func:`theory.cost.linear_per_token` needs it.

Expert parallelism (the GPU field ``ep``, :mod:`theory.expert_parallel`): a GPU of an
expert-parallel group of ``ep`` replicas holds ``E / ep`` experts and, the group's batches taken
of equal size, runs the slots the group's ``ep tau`` tokens route to them: the expected column
blocks and active experts are ``1 / ep`` of those of ``ep tau`` tokens over the ``E`` experts
(each local expert's load is ``Binomial(ep tau, k/E)``), the slots ``tau k``; each MoE layer adds
its dispatch and combine (``comm_tok_s`` per token, ``comm_batch_s`` per batch).

Tensor parallelism (the GPU field ``tp``, real mode): as vLLM runs a MoE model with
``--tensor-parallel-size tp`` and no ``enable_expert_parallel``, every GPU of the group holds all
``E`` experts, each split like a dense MLP: gate/up column-parallel, ``2 d_ff_expert / tp`` rows,
and down row-parallel, a reduction of ``d_ff_expert / tp`` (:meth:`theory.models.Model.expert_gemms`;
vllm-project/vllm @ c439a139790cafaecb54e8dea123b78049f1442b
``vllm/model_executor/layers/fused_moe/layer.py``, ``FusedMoE.__init__``:
``intermediate_size_per_partition = intermediate_size // tp_size``, and ``reduce_results``: the
block's output all-reduced once). Routing is per token, not per GPU, so the expected column blocks,
active experts and slots are those of ``tau`` tokens over the ``E`` experts, unchanged; each GPU
prices its shards of them. The block's output is all-reduced once per layer, as a dense MLP's
(:func:`theory.tp_split.allreduce_count`: one after attention, one after the FFN or MoE block).
``tp`` must divide ``d_ff_expert`` and the shared experts' width
(:func:`theory.tp_split.check_moe_tp`); ``tp`` and ``ep`` both above 1 are refused.

What is not modelled here: tensor parallelism inside an expert-parallel group (refused: ``tp`` must
be 1 when ``ep > 1``), expert parallelism with unequal batches across the group, a measured routing
skew, and the element-wise work of the block (router softmax and top-k, the SwiGLU over the slots,
the weighted sum) beyond the model's aggregate non-linear rate
(:meth:`theory.models.Model.nonlinear_elements_per_token`).

References
----------
Shazeer et al. (2017), "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts
Layer", arXiv:1701.06538 (top-k gating); Fedus, Zoph, Shazeer (2022), "Switch Transformers", JMLR
23(120); vllm-project/vllm ``vllm/model_executor/layers/fused_moe/fused_moe.py`` (the grouped
kernel); Bari, Hegde, de Veciana (2025), Eq. 2 and Eq. 4.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from theory.errors import FieldError
from theory.io import keep_array, read_kept_array, theory_kept_path

ROUTINGS = ("uniform",)
KEEP_FROM = 4096  # token counts per call from which expected_blocks keeps its table on disk
_TAIL = 14.0  # sd (plus 14 tokens) past which a binomial tail is below 1e-16 (Bernstein's inequality)
MOE_FIELDS = (
    "n_experts",
    "experts_per_token",
    "d_ff_expert",
    "n_shared_experts",
    "d_ff_shared",
    "first_dense_layers",
    "moe_every",
    "routing",
)


@dataclass(frozen=True)
class MoE:
    """The mixture-of-experts layers of a model (module docstring).

    Attributes
    ----------
    n_experts : int
        ``E``, routed experts per MoE layer.
    experts_per_token : int
        ``k``, distinct experts each token is routed to (``1 <= k <= E``).
    d_ff_expert : int
        Each routed expert's FFN width.
    n_shared_experts, d_ff_shared : int
        Experts every token runs, and the width of each (0, 0: none).
    first_dense_layers : int
        The first layers keep the dense FFN of width ``d_ff``.
    moe_every : int
        Layer ``i`` (from 0) past the dense ones is MoE when ``(i + 1) % moe_every == 0``.
    routing : str
        The law of the token-slots over the experts (``"uniform"``).
    """

    n_experts: int
    experts_per_token: int
    d_ff_expert: int
    n_shared_experts: int = 0
    d_ff_shared: int = 0
    first_dense_layers: int = 0
    moe_every: int = 1
    routing: str = "uniform"

    def layers(self, n_layers: int) -> int:
        """How many of ``n_layers`` layers are MoE layers."""
        return sum(1 for i in range(self.first_dense_layers, n_layers) if (i + 1) % self.moe_every == 0)

    @property
    def d_shared(self) -> int:
        """The width of the shared experts run as one dense FFN: ``n_shared_experts d_ff_shared``."""
        return self.n_shared_experts * self.d_ff_shared


def _int_at_least(table: dict, key: str, where: str, minimum: int, default=None) -> int:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise FieldError(f"{where}.{key}", v, f"an integer >= {minimum}")
    return v


def moe_from(table: dict, where: str, n_layers: int) -> MoE | None:
    """The :class:`MoE` a ``[models.<key>]`` table states, or None for a dense model (no
    ``n_experts``); every MoE field is checked, and a field given without ``n_experts`` is refused."""
    if "n_experts" not in table:
        stray = [k for k in MOE_FIELDS if k in table]
        if stray:
            raise FieldError(
                f"{where}.n_experts", None, f"an integer >= 1 (the model states the MoE field {stray[0]})"
            )
        return None
    E = _int_at_least(table, "n_experts", where, 1)
    k = _int_at_least(table, "experts_per_token", where, 1)
    if k > E:
        raise FieldError(f"{where}.experts_per_token", k, f"at most n_experts = {E}")
    d_ff_expert = _int_at_least(table, "d_ff_expert", where, 1)
    n_shared = _int_at_least(table, "n_shared_experts", where, 0, 0)
    if n_shared and "d_ff_shared" not in table:
        raise FieldError(
            f"{where}.d_ff_shared", None, f"the width of each shared expert (n_shared_experts = {n_shared})"
        )
    d_ff_shared = _int_at_least(table, "d_ff_shared", where, 1 if n_shared else 0, 0)
    if d_ff_shared and not n_shared:
        raise FieldError(
            f"{where}.n_shared_experts", n_shared, f"an integer >= 1 (d_ff_shared = {d_ff_shared} is given)"
        )
    first = _int_at_least(table, "first_dense_layers", where, 0, 0)
    if first >= n_layers:
        raise FieldError(f"{where}.first_dense_layers", first, f"fewer than n_layers = {n_layers}")
    every = _int_at_least(table, "moe_every", where, 1, 1)
    routing = table.get("routing", "uniform")
    if routing not in ROUTINGS:
        raise FieldError(f"{where}.routing", routing, f"one of {', '.join(ROUTINGS)}")
    moe = MoE(E, k, d_ff_expert, n_shared, d_ff_shared, first, every, routing)
    if moe.layers(n_layers) == 0:
        raise FieldError(
            f"{where}.moe_every",
            every,
            f"a period that leaves at least one MoE layer of {n_layers} past first_dense_layers = {first}",
        )
    return moe


# --- the spread of the token-slots over the experts -----------------------------------------------


def active_experts(E: int, k: int, tau) -> np.ndarray:
    """Expected distinct experts a batch of ``tau`` tokens reaches when each token picks ``k``
    distinct experts uniformly: ``E (1 - (1 - k/E)^tau)`` (exact; module docstring)."""
    tau = np.asarray(tau, dtype=float)
    return E * (1.0 - (1.0 - k / E) ** tau)


def active_experts_with_replacement(E: int, k: int, tau) -> np.ndarray:
    """The balls-into-bins form ``E (1 - (1 - 1/E)^(tau k))``: ``tau k`` slots each thrown at an
    expert independently (a token may pick an expert twice; an approximation of top-k routing)."""
    tau = np.asarray(tau, dtype=float)
    return E * (1.0 - (1.0 - 1.0 / E) ** (tau * k))


def expected_blocks(E: int, k: int, tau, t_col: int) -> np.ndarray:
    """``E E[ceil(n / t_col)]`` for ``n ~ Binomial(tau, k/E)``: the expected column blocks of
    ``t_col`` tokens summed over the experts, ``E sum_{j >= 0} P(n > j t_col)`` (exact up to
    rounding: the terms more than ``_TAIL`` standard deviations from the mean, where
    ``P(n > j t_col)`` is 1 or 0 to double precision, are counted, not summed). ``tau`` of any
    shape (a scalar as shape (1,)); the result has its shape.

    A call over at least :data:`KEEP_FROM` token counts (the simulator's cost tables) is kept on
    disk and read back by later processes (:func:`kept_blocks_path`)."""
    tau = np.atleast_1d(np.asarray(tau, dtype=np.int64))
    if tau.ndim > 1:  # the sum below runs over a second axis: one row per token count
        return expected_blocks(E, k, tau.ravel(), t_col).reshape(tau.shape)
    if tau.size < KEEP_FROM:
        return _expected_blocks(E, k, tau, t_col)
    path = kept_blocks_path(E, k, tau, t_col)
    kept = read_kept_array(path)
    if kept is not None and kept.shape == tau.shape and kept.dtype == np.float64:
        return kept
    out = _expected_blocks(E, k, tau, t_col)
    keep_array(path, out)
    return out


def kept_blocks_path(E: int, k: int, tau: np.ndarray, t_col: int) -> Path:
    """Where :func:`expected_blocks` keeps a table: ``cache_home()/moe/<theory digest>-<key>.npy``,
    named by every source and data file of :mod:`theory`, scipy's version (its binomial tail) and
    ``E``, ``k``, ``t_col`` and the token counts."""
    from importlib.metadata import version

    key = hashlib.sha256(f"{E},{k},{t_col},scipy {version('scipy')}".encode())
    key.update(np.ascontiguousarray(tau, dtype=np.int64).tobytes())
    return theory_kept_path("moe", key.hexdigest()[:32])


def _expected_blocks(E: int, k: int, tau: np.ndarray, t_col: int) -> np.ndarray:
    """:func:`expected_blocks` of a 1-D ``tau``, computed."""
    p = k / E
    if p >= 1.0:
        return E * -(-tau // t_col).astype(float)
    mean, sd = tau * p, np.sqrt(tau * p * (1.0 - p))
    lo = np.maximum(np.floor(mean - _TAIL * (sd + 1.0)), 0).astype(np.int64)  # P(n <= lo) < 1e-16
    hi = np.minimum(np.ceil(mean + _TAIL * (sd + 1.0)), tau).astype(np.int64)  # P(n > hi) < 1e-16
    sure = -(-lo // t_col)  # the j with j t_col < lo: P(n > j t_col) = 1
    span = int(np.max(-(-hi // t_col) - sure + 1, initial=0))
    j = sure[:, None] + np.arange(span)[None, :]
    live = j * t_col < hi[:, None]
    from scipy.stats import binom  # imported here: scipy.stats costs seconds, and only a MoE needs it
    sf = np.where(live, binom.sf(j * t_col, tau[:, None], p), 0.0)
    out = sure + sf.sum(axis=1)
    return E * out


def forced_loads(tokens: int, active: int, k: int) -> np.ndarray:
    """Per-expert token counts when the ``tokens k`` slots cycle over exactly ``active`` experts
    (slot ``j`` of token ``t`` to expert ``(k t + j) mod active``), as LLMServingSim's MoE profile
    forces them (``profiler/core/hooks/moe_hook.py``): each expert gets the slots' share, within one."""
    if not 1 <= active <= min(tokens * k, 10**9):
        raise FieldError("active experts", active, f"between 1 and tokens x k = {tokens * k}")
    q, r = divmod(tokens * k, active)
    return np.array([q + 1] * r + [q] * (active - r), dtype=np.int64)


# --- the time of the grouped expert GeMMs ----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MoETerms:
    """The routed experts' grouped GeMMs of a batch, per tile ``k`` (index of the GPU's tile
    arrays) and expert weight ``g`` (module docstring for the formulas).

    Attributes
    ----------
    count : int
        MoE layers per batch.
    E, k : int
        Experts and experts per token.
    rows, red : ndarray (K, G)
        ``ceil(d_row_g / t_row_k)`` and ``ceil(d_red_g / t_red_k)``.
    t_col, mu : ndarray (K,)
        The tiles' column widths and rates.
    s : int
        SMs.
    wbytes, abytes : ndarray (G,)
        Weight bytes of one expert's GeMM, activation bytes per slot.
    traffic : ndarray (K, G)
        Operand bytes per output tile through L2.
    waves : bool
    floor_bw, l2_bw : float
        Bytes/s of the memory floor and of the L2 term (0: off).
    launch_s : float
        Fixed time of one MoE layer's launches (``2 gemm_overhead_s``).
    ep : int
        GPUs of the expert-parallel group (1: none; :mod:`theory.expert_parallel`).
    comm_tok_s, comm_batch_s : float
        One MoE layer's dispatch and combine: seconds per token of the batch (bus bytes over the
        bus bandwidth) and per batch (the latencies); 0 at ``ep = 1``.
    """

    count: int
    E: int
    k: int
    rows: np.ndarray
    red: np.ndarray
    t_col: np.ndarray
    mu: np.ndarray
    s: int
    wbytes: np.ndarray
    abytes: np.ndarray
    traffic: np.ndarray
    waves: bool
    floor_bw: float
    l2_bw: float
    launch_s: float
    ep: int = 1
    comm_tok_s: float = 0.0
    comm_batch_s: float = 0.0

    def grouped(self, blocks: np.ndarray, active, slots) -> np.ndarray:
        """One MoE layer's expert time given, per tile, the column blocks summed over the experts
        (``blocks``, shape (K, ...)), the active experts and the slots (broadcast)."""
        active = np.asarray(active, dtype=float)
        slots = np.asarray(slots, dtype=float)
        total = np.zeros(np.broadcast(blocks[0], active, slots).shape)
        for g in range(self.rows.shape[1]):
            best = None
            for kk in range(self.t_col.size):
                tiles = self.rows[kk, g] * blocks[kk]
                if self.waves:
                    comp = np.ceil(tiles / self.s) * self.red[kk, g] / self.mu[kk]
                else:
                    comp = tiles * self.red[kk, g] / (self.s * self.mu[kk])
                if self.l2_bw:
                    comp = np.maximum(comp, tiles * self.traffic[kk, g] / self.l2_bw)
                if self.floor_bw:
                    comp = np.maximum(
                        comp, (active * self.wbytes[g] + slots * self.abytes[g]) / self.floor_bw
                    )
                best = comp if best is None else np.minimum(best, comp)
            total = total + best
        return np.where(slots > 0, total + self.launch_s, 0.0)

    def time(self, tau) -> np.ndarray:
        """Expected time of the routed experts of all MoE layers for batches of ``tau`` tokens under
        uniform routing (module docstring: exact expectations of the tile count, active count and
        bytes; the waves' ceiling, the floors' maxima and the fastest tile at the expectation)."""
        tau = np.atleast_1d(np.asarray(tau, dtype=np.int64))
        group = tau * self.ep  # the balanced group's tokens (module docstring, expert parallelism; 1: tau)
        by_width = {
            int(t): expected_blocks(self.E, self.k, group, int(t)) / self.ep for t in set(self.t_col.tolist())
        }
        blocks = np.stack([by_width[int(t)] for t in self.t_col])
        local = self.grouped(blocks, active_experts(self.E, self.k, group) / self.ep, tau * self.k)
        comm = np.where(tau > 0, tau * self.comm_tok_s + self.comm_batch_s, 0.0)
        return self.count * (local + comm)

    def layer_time_of_loads(self, loads) -> float:
        """One MoE layer's expert time when the experts receive ``loads`` tokens (one count per
        expert; zeros are idle experts)."""
        loads = np.asarray(loads, dtype=np.int64)
        loads = loads[loads > 0]
        blocks = np.array([float(np.sum(-(-loads // int(t)))) for t in self.t_col])
        return float(self.grouped(blocks, loads.size, loads.sum()))

    def per_token_limit(self) -> float:
        """``lim_tau time(tau) / tau``, also its infimum (module docstring)."""
        total = 0.0
        for g in range(self.rows.shape[1]):
            best = np.inf
            for kk in range(self.t_col.size):
                comp = self.k * self.rows[kk, g] * self.red[kk, g] / (self.s * self.mu[kk] * self.t_col[kk])
                if self.l2_bw:
                    comp = max(
                        comp, self.k * self.rows[kk, g] * self.traffic[kk, g] / (self.t_col[kk] * self.l2_bw)
                    )
                if self.floor_bw:
                    comp = max(comp, self.k * self.abytes[g] / self.floor_bw)
                best = min(best, comp)
            total += best
        return self.count * float(total + self.comm_tok_s)
