"""Symbolic twins of :mod:`theory.cost` and :mod:`theory.bounds` (sympy, exact arithmetic).

Each formula is written once more as a sympy expression with ``ceiling``, in the paper's
notation, so that a check can substitute integers and exact rationals and compare with the
vectorized numeric code, or manipulate the formula itself (e.g. show Eq. 4 is the sum of the
per-layer GeMMs, or Eq. 11 equals Eq. 12).

:class:`SymbolicCostModel` is the exact twin of :class:`theory.cost.CostModel`: it holds the same
tiles with their rates as exact rationals (the binary value of each float) and evaluates Eq. 4-7
with sympy, choosing tiles by ``Min`` over the set as the numeric code does.

Terms beyond Eq. 2 (:mod:`theory.cost_terms`): :data:`SYMBOLIC_TERMS` says, for each, where the
twin takes it or why it leaves it out. It covers the staircase ``linear_law`` (its
``c + a ceiling(tau/b0)`` replaces ``T_Lin + tau/mu_nLin``), ``attention = false``, ``overhead_s``
and ``attention_call_s`` (the fixed time per batch), and the added-time terms whose symbolic formula
is registered (:func:`register_added_time`). The others are numeric only:
:meth:`SymbolicCostModel.from_cost_model` refuses a cost model that has one on, and
``tests/test_cost_terms.py`` checks them against recomputations by hand instead.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7, Eq. 11-13, Eq. 25, Theorems 1-2, Lemmas 3-4.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from theory import added_time
from theory.added_time import AddedTime
from theory.cost import CostModel
from theory.cost_terms import TERMS
from theory.errors import FieldError
from theory.workload import Workload

ceiling = sp.ceiling


def exact(x) -> sp.Rational:
    """The exact rational value of a Python number (a float's binary value, not a decimal)."""
    return sp.Rational(Fraction(x)) if not isinstance(x, sp.Basic) else x


# --- Eq. 2-7 as expressions --------------------------------------------------------------


def gemm_time(d_row, d_col, d_red, t_row, t_col, t_red, mu, s):
    """Eq. 2: ceiling(d_row/t_row) ceiling(d_col/t_col) ceiling(d_red/t_red) / (s mu).

    Symbolic twin of Eq. 2.
    """
    return ceiling(d_row / t_row) * ceiling(d_col / t_col) * ceiling(d_red / t_red) / (s * mu)


def gemv_time(d_row, d_col, t_row, t_col, mu, s):
    """Eq. 3: ceiling(d_row/t_row) ceiling(d_col/t_col) / (s mu).

    Symbolic twin of Eq. 3.
    """
    return ceiling(d_row / t_row) * ceiling(d_col / t_col) / (s * mu)


def linear_time_sum(tau, gemms, t_row, t_col, t_red, mu, s):
    """Section 3.2.1: the linear time of a batch as the sum of its per-layer GeMMs (Eq. 2).

    ``gemms`` is a sequence of ``(count, d_row, d_red)``.
    """
    return sp.Add(*[count * gemm_time(d_row, tau, d_red, t_row, t_col, t_red, mu, s)
                    for count, d_row, d_red in gemms])


def mu_Lin(gemms, t_row, t_red, mu, s):
    """mu_Lin(t) of Eq. 4: ``s mu / sum_k count_k ceiling(d_row_k/t_row) ceiling(d_red_k/t_red)``."""
    pairs = sp.Add(*[count * ceiling(d_row / t_row) * ceiling(d_red / t_red)
                     for count, d_row, d_red in gemms])
    return s * mu / pairs


def linear_time(tau, mu_lin, t_col):
    """Eq. 4: ceiling(tau / t_col) / mu_Lin."""
    return ceiling(tau / t_col) / mu_lin


def decode_attention_time(i, d, t_row, t_col, mu, s, printed: bool = False):
    """Eq. 5: (d/t_col ceiling(i/t_row) + ceiling(i/t_col) d/t_row) / (s mu(t_row, t_col)).

    ``printed=True`` gives the formula exactly as printed in the paper, without the ``1/s`` that
    Eq. 3 carries.
    """
    tiles = (d / t_col) * ceiling(i / t_row) + ceiling(i / t_col) * (d / t_row)
    return tiles / mu if printed else tiles / (s * mu)


@dataclass(frozen=True)
class Printed:
    """The quantities of Eq. 4-7 with one common tile ``t``, as the paper prints them (numbers or
    sympy symbols).

    Attributes
    ----------
    N, d, s
        Layers, attention width, SMs.
    t_row, t_col, t_red
        The tile.
    mu, mu_lin, mu_nLin
        ``mu(t)`` (Eq. 2), ``mu_Lin(t)`` (Eq. 4) and the non-linear rate (Section 3.2.3).
    """

    N: object
    d: object
    s: object
    t_row: object
    t_col: object
    t_red: object
    mu: object
    mu_lin: object
    mu_nLin: object


def prefill_attention_time(i, c, p: Printed):
    """Eq. 6 over all N layers: N/(s mu) (ceiling((i+c-1)/t_row) ceiling(c/t_col) d/t_red
    + d/t_row ceiling(c/t_col) ceiling((i+c-1)/t_red))."""
    e = i + c - 1
    return p.N / (p.s * p.mu) * (ceiling(e / p.t_row) * ceiling(c / p.t_col) * p.d / p.t_red
                                 + p.d / p.t_row * ceiling(c / p.t_col) * ceiling(e / p.t_red))


def batch_time(prefill, decode, p: Printed, t_dsa):
    """Eq. 7 with one common GeMM tile, exactly as printed.

    ``prefill`` is a sequence of ``(i_j, c_j)``, ``decode`` of positions ``i_j``, and ``t_dsa`` a
    function ``i -> T^{D,SA}(i)``.
    """
    tau = sp.Add(*[c for _, c in prefill]) + len(decode)
    out = linear_time(tau, p.mu_lin, p.t_col) + tau / p.mu_nLin
    out += p.N * sp.Add(*[t_dsa(i) for i in decode])
    out += sp.Add(*[prefill_attention_time(i, c, p) for i, c in prefill])
    return out


# --- the exact twin of CostModel -----------------------------------------------------------


@dataclass(frozen=True)
class SymbolicCostModel:
    """Exact twin of :class:`theory.cost.CostModel` (same tiles, rates as exact rationals)."""

    s: sp.Integer
    N: sp.Integer
    d_pre: sp.Integer
    d_dec: sp.Integer
    tiles: tuple  # (t_row, t_col, t_red, mu) with t* first
    gemv_tiles: tuple  # (t_row, t_col, mu)
    gemms: tuple  # (count, d_row, d_red)
    mu_nLin: sp.Rational
    overhead: sp.Rational
    law: tuple | None = None  # (c, a, b0) of a staircase linear law
    attention: bool = True
    added: tuple = ()  # (formula, exact value) of each added-time term on (register_added_time)
    moe: tuple | None = None  # (MoE layers, E, k, ((d_row, d_red) per expert GeMM)) of a MoE model

    @classmethod
    def from_cost_model(cls, cm: CostModel) -> SymbolicCostModel:
        """The twin of ``cm``; a cost model with a numeric-only term on is refused (FieldError)."""
        numeric_only = [t.name for t in TERMS.values() if t.is_on(cm) and not _covered(t.name)]
        if numeric_only:
            raise FieldError("cost model", cm.describe(),
                             f"no numeric-only term for the symbolic twin (has {', '.join(numeric_only)})")
        law = cm.gpu.terms.linear_law
        return cls(
            s=sp.Integer(cm.s), N=sp.Integer(cm.N), d_pre=sp.Integer(cm.d_pre),
            d_dec=sp.Integer(cm.d_dec),
            tiles=tuple((sp.Integer(int(r)), sp.Integer(int(c)), sp.Integer(int(k)), exact(float(m)))
                        for r, c, k, m in zip(cm.t_row, cm.t_col, cm.t_red, cm.mu, strict=True)),
            gemv_tiles=tuple((sp.Integer(int(r)), sp.Integer(int(c)), exact(float(m)))
                             for r, c, m in zip(cm.g_row, cm.g_col, cm.mu_gemv, strict=True)),
            gemms=tuple((g.count, g.d_row, g.d_red) for g in cm.gemms),
            mu_nLin=sp.oo if law is not None else exact(cm.mu_nLin), overhead=exact(cm.base_fixed_s),
            law=None if law is None else (exact(law.c), exact(law.a), sp.Integer(law.b0)),
            attention=cm.attention,
            added=tuple((SYMBOLIC_ADDED[name], exact(value)) for name, value in cm.added),
            moe=_moe_of(cm))

    @property
    def fixed(self):
        """The fixed time of every non-empty batch: ``overhead`` plus the added-time terms'
        per-batch time."""
        per_batch = [f.per_batch(self, v) for f, v in self.added if f.per_batch is not None]
        return self.overhead + sp.Add(*per_batch) if per_batch else self.overhead

    def added_decode(self, i):
        """The added-time terms' time of one decode at position ``i`` (0 without them)."""
        return sp.Add(*[f.per_decode(self, v, i) for f, v in self.added if f.per_decode is not None])

    def printed(self, k: int = 0) -> Printed:
        """The model as Eq. 4-7 print it with tile index ``k`` common to every GeMM (prefill
        attention width ``d_pre``)."""
        t_row, t_col, t_red, mu = self.tiles[k]
        return Printed(N=self.N, d=self.d_pre, s=self.s, t_row=t_row, t_col=t_col, t_red=t_red, mu=mu,
                       mu_lin=self.mu_Lin(k), mu_nLin=self.mu_nLin)

    def mu_Lin(self, k: int = 0):
        t_row, _, t_red, mu = self.tiles[k]
        return mu_Lin(self.gemms, t_row, t_red, mu, self.s)

    def T_Lin(self, tau, tile: int | None = None):
        """Eq. 4, minimised over tiles (or at tile index ``tile``); the law if one is set.

        Symbolic twin of Eq. 4.
        """
        if self.law is not None:
            c, a, b0 = self.law
            return c + a * ceiling(tau / b0) if tau != 0 else sp.Integer(0)
        ks = range(len(self.tiles)) if tile is None else [tile]
        dense = sp.Min(*[linear_time(tau, self.mu_Lin(k), self.tiles[k][1]) for k in ks])
        return dense if self.moe is None else dense + self.T_MoE(tau)

    def T_MoE(self, tau):
        """The expected time of a MoE model's routed experts for a batch of ``tau`` tokens under
        uniform routing (:mod:`theory.moe`), exactly: per MoE layer and expert GeMM, the fastest
        tile's ``ceiling(d_row/t_row) ceiling(d_red/t_red) / (s mu)`` times the expected column
        blocks ``E sum_n binomial(tau, n) p^n (1-p)^(tau-n) ceiling(n/t_col)``, ``p = k/E``; 0 for
        a dense model or ``tau = 0``. ``tau`` must be an integer."""
        if self.moe is None or tau == 0:
            return sp.Integer(0)
        count, E, k, gemms = self.moe
        p, tau = sp.Rational(k, E), int(tau)
        law = [sp.binomial(tau, n) * p**n * (1 - p) ** (tau - n) for n in range(tau + 1)]

        def blocks(t_col):
            return E * sp.Add(*[w * ceiling(sp.Rational(n, t_col)) for n, w in enumerate(law)])

        by_width = {t_col: blocks(t_col) for _, t_col, _, _ in self.tiles}
        per_gemm = [sp.Min(*[ceiling(sp.Rational(d_row, r)) * ceiling(sp.Rational(d_red, t)) / (self.s * mu)
                             * by_width[c] for r, c, t, mu in self.tiles]) for d_row, d_red in gemms]
        return count * sp.Add(*per_gemm)

    def T_Lin_as_sum(self, tau, tile: int = 0):
        """Section 3.2.1's sum of per-layer GeMMs at one tile (what Eq. 4 abbreviates)."""
        t_row, t_col, t_red, mu = self.tiles[tile]
        return linear_time_sum(tau, self.gemms, t_row, t_col, t_red, mu, self.s)

    def T_D_SA(self, i):
        """Eq. 5 (with Eq. 3's 1/s), each GeMV on its fastest tile; 0 without attention.

        Symbolic twin of Eq. 5.
        """
        if not self.attention:
            return sp.Integer(0)
        d, s = self.d_dec, self.s
        first = sp.Min(*[gemv_time(i, d, r, c, m, s) for r, c, m in self.gemv_tiles])
        second = sp.Min(*[gemv_time(d, i, r, c, m, s) for r, c, m in self.gemv_tiles])
        return first + second

    def T_P_SA(self, i, c, tile: int | None = None):
        """Eq. 6, each of its two GeMMs on its fastest tile (or at tile index ``tile``); 0 without
        attention.

        Symbolic twin of Eq. 6.
        """
        if not self.attention:
            return sp.Integer(0)
        e = i + c - 1
        d, s = self.d_pre, self.s
        ks = range(len(self.tiles)) if tile is None else [tile]
        qk = sp.Min(*[gemm_time(e, c, d, *self.tiles[k][:3], self.tiles[k][3], s) for k in ks])
        pv = sp.Min(*[gemm_time(d, c, e, *self.tiles[k][:3], self.tiles[k][3], s) for k in ks])
        return self.N * (qk + pv)

    def T_batch(self, prefill=(), decode=()):
        """Eq. 7 of a batch (plus the fixed overhead), tiles chosen per GeMM.

        Symbolic twin of Eq. 7.
        """
        tau = sum(c for _, c in prefill) + len(decode)
        if tau == 0:
            return sp.Integer(0)
        out = self.T_Lin(sp.Integer(tau)) + self.fixed
        if self.law is None:  # a law includes the non-linear term
            out += sp.Integer(tau) / self.mu_nLin
        out += self.N * sp.Add(*[self.T_D_SA(sp.Integer(i)) for i in decode])
        out += sp.Add(*[self.T_P_SA(sp.Integer(i), sp.Integer(c)) for i, c in prefill])
        if self.added:
            out += sp.Add(*[self.added_decode(sp.Integer(i)) for i in decode])
        return out

    def T_star_R(self, l_P: int, l_D: int, chunk: int | None = None):
        """Eq. 11: one request's optimal effective completion time, summing Eq. 6's no-ceiling
        terms over the chunk set I_j = {(1 + k t*_lcm, t*_lcm)}.

        Requires ``chunk`` (default t*_lcm) to divide ``l_P``, and the model as printed (no law,
        attention on). Where t*_row or t*_red does not divide ``d_pre`` (real mode's partial
        tiles), ``d / t`` is below Eq. 6's ``ceiling(d / t)``, and this is a lower bound of the
        chunks' Eq. 6 time, as :func:`theory.bounds.T_bar_R_terms` takes it, not that time.

        Symbolic twin of Eq. 11.
        """
        self._require_printed("Eq. 11")
        t_row, t_col, t_red, mu = self.tiles[0]
        lcm = sp.ilcm(t_row, t_col, t_red) if chunk is None else sp.Integer(chunk)
        if l_P % lcm:
            raise ValueError(f"Eq. 11 needs l_P ({l_P}) divisible by the chunk ({lcm})")
        total = sp.Integer(l_P + l_D)
        out = total / (self.mu_Lin(0) * t_col) + total / self.mu_nLin
        out += self.N * sp.Add(*[self.T_D_SA(sp.Integer(i)) for i in range(l_P + 1, l_P + l_D + 1)])
        att = sp.Add(*[(i + lcm - 1) / t_row * lcm / t_col * self.d_pre / t_red
                       + self.d_pre / t_row * lcm / t_col * (i + lcm - 1) / t_red
                       for i in range(1, l_P, int(lcm))])
        return out + self.N / (self.s * mu) * att

    def T_star_R_closed(self, l_P: int, l_D: int):
        """Eq. 12: the closed form of Eq. 11, with ``N d L^P (L^P + t*_lcm) / (s mu t t t)``.

        Symbolic twin of Eq. 12.
        """
        self._require_printed("Eq. 12")
        t_row, t_col, t_red, mu = self.tiles[0]
        lcm = sp.ilcm(t_row, t_col, t_red)
        total = sp.Integer(l_P + l_D)
        out = total / (self.mu_Lin(0) * t_col) + total / self.mu_nLin
        out += self.N * sp.Add(*[self.T_D_SA(sp.Integer(i)) for i in range(l_P + 1, l_P + l_D + 1)])
        return out + (self.N * self.d_pre / (self.s * mu * t_row * t_col * t_red)
                      * l_P * (l_P + lcm))

    def _require_printed(self, what: str) -> None:
        if self.law is not None or not self.attention or self.added or self.moe is not None:
            raise FieldError("symbolic cost model", what, "the model as printed (no linear_law, attention "
                             "on, no added-time term, no mixture of experts) for this closed form")

    def T_max(self, l_P_max: int, l_D_max: int):
        """Eq. 13 / Theorem 2: max over tiles of l/mu_Lin(t) + l/mu_nLin + N sum_{i<=l} T^{D,SA}(i),
        plus l times the per-batch overhead (each token alone is a batch); under a law,
        ``l (law(1) + overhead)`` and the attention sum. Each token, a decode, also pays the
        added-time terms' per-decode time.

        Symbolic twin of Eq. 13.
        """
        if self.moe is not None:
            raise FieldError("symbolic cost model", "Eq. 13", "a dense model (its one-token batches are "
                             "written with mu_Lin; a mixture of experts takes T_max_described)")
        ell = sp.Integer(l_P_max + l_D_max)
        att = self.N * sp.Add(*[self.T_D_SA(sp.Integer(i)) for i in range(1, l_P_max + l_D_max + 1)])
        if self.added:
            att += sp.Add(*[self.added_decode(sp.Integer(i)) for i in range(1, l_P_max + l_D_max + 1)])
        if self.law is not None:
            return ell * (self.T_Lin(sp.Integer(1)) + self.fixed) + att
        worst = sp.Max(*[ell / self.mu_Lin(k) for k in range(len(self.tiles))])
        return worst + ell / self.mu_nLin + att + ell * self.fixed

    def T_max_described(self, l_P_max: int, l_D_max: int):
        """The schedule Eq. 13's text describes: every token alone as a batch (Eq. 7 with the
        per-batch overhead), prompt token i as Eq. 6's chunk of one, one tile for all GeMMs, the
        max over tiles; decode j adds ``N T^{D,SA}(j)`` and the added-time terms' per-decode time."""
        ell = sp.Integer(l_P_max + l_D_max)
        decode = self.N * sp.Add(*[self.T_D_SA(sp.Integer(j))
                                   for j in range(l_P_max + 1, l_P_max + l_D_max + 1)])
        if self.added:
            decode += sp.Add(*[self.added_decode(sp.Integer(j))
                               for j in range(l_P_max + 1, l_P_max + l_D_max + 1)])
        per_tile = []
        for k in range(len(self.tiles)):
            prompt = sp.Add(*[self.T_P_SA(sp.Integer(i), sp.Integer(1), tile=k)
                              for i in range(1, l_P_max + 1)])
            per_tile.append(ell * (self.T_Lin(sp.Integer(1), tile=k) + self.fixed) + prompt)
        nonlinear = sp.Integer(0) if self.law is not None else ell / self.mu_nLin
        return sp.Max(*per_tile) + nonlinear + decode


# --- the cost terms the twin takes ------------------------------------------------------------


@dataclass(frozen=True)
class NumericOnly:
    """A cost term the exact twin leaves out, and why: a cost model with it on is refused."""

    reason: str


_BY_HAND = "checked against recomputations by hand in tests/test_cost_terms.py"

# Where the twin takes each cost term of theory.cost_terms, or why it does not (an added-time term
# is taken through the formula registered by register_added_time and is not listed here).
SYMBOLIC_TERMS: dict[str, tuple | NumericOnly] = {
    "memory_floor": NumericOnly(f"a max of Eq. 2 and a byte count per GeMM, {_BY_HAND}"),
    "waves": NumericOnly(f"Eq. 2 in whole waves of output tiles, {_BY_HAND}"),
    "attention_waves": NumericOnly(f"Eq. 6 in whole waves of output tiles, {_BY_HAND}"),
    "l2_bandwidth_gbs": NumericOnly(f"a max of Eq. 2 and a tile's L2 traffic, {_BY_HAND}"),
    "overhead_s": (SymbolicCostModel.T_batch, SymbolicCostModel.T_max, SymbolicCostModel.T_max_described),
    "gemm_overhead_s": NumericOnly(f"an intercept per GeMM inside the linear time, {_BY_HAND}"),
    "attention_call_s": (SymbolicCostModel.T_batch, SymbolicCostModel.T_max),
    "mixed_decode_eta": NumericOnly(f"Eq. 5 at the query heads' width beside a chunk, {_BY_HAND}"),
    "linear_law": (SymbolicCostModel.T_Lin, SymbolicCostModel.T_batch, SymbolicCostModel.T_max),
    "gemm_profile": NumericOnly("measured times interpolated in a table (tests/test_measured.py)"),
    "tp": NumericOnly(f"one GPU's shards plus all-reduces, {_BY_HAND}"),
    "attention": (SymbolicCostModel.T_D_SA, SymbolicCostModel.T_P_SA),
    "lm_head": NumericOnly(f"a vocab-projection row per decode and chunk, {_BY_HAND}"),
    "moe": (SymbolicCostModel.T_MoE, SymbolicCostModel.T_Lin, SymbolicCostModel.T_batch,
            SymbolicCostModel.T_max_described),
    "ep": NumericOnly(f"the experts of a balanced expert-parallel group plus dispatch and combine, "
                      f"{_BY_HAND.replace('test_cost_terms', 'test_expert_parallel')}"),
    "cudagraph_capture_sizes": NumericOnly(f"Eq. 4 at the token count rounded up to a captured size, "
                                           f"{_BY_HAND}"),
    "frontend_s": NumericOnly("a time per request added to its TTFT and latency, in no batch and no bound"),
}
SYMBOLIC_ADDED: dict[str, AddedTime] = {}  # the symbolic formulas of the added-time terms


def register_added_time(name: str, formula: AddedTime) -> None:
    """Register the symbolic formula of the declared added-time term ``name``: its slots over a
    :class:`SymbolicCostModel`, a sympy value and (per decode) one sympy position."""
    added_time.register(name, formula, SYMBOLIC_ADDED)


register_added_time("engine_step_s", AddedTime(per_batch=lambda scm, v: v))  # once per batch, exact


def _moe_of(cm: CostModel) -> tuple | None:
    """The twin's ``moe`` record of ``cm`` (:mod:`theory.moe`), or None for a dense model: one GPU's
    shard of the expert GeMMs at the GPU's ``tp`` (:meth:`theory.models.Model.expert_gemms`)."""
    if cm.model.moe is None:
        return None
    gemms = cm.model.expert_gemms(cm.mode, cm.gpu.terms.tp)
    return (sp.Integer(cm.model.n_moe_layers), cm.model.moe.n_experts, cm.model.moe.experts_per_token,
            tuple((g.d_row, g.d_red) for g in gemms))


def _covered(name: str) -> bool:
    """Whether the twin takes the term ``name`` (a formula, not a :class:`NumericOnly` or nothing)."""
    if TERMS[name].added:
        return name in SYMBOLIC_ADDED
    return isinstance(SYMBOLIC_TERMS.get(name), tuple)


# --- Theorem 1/2 quantities -----------------------------------------------------------------

E_total, E_PP, E_DSA = sp.symbols("E_total E_PP E_DSA", positive=True)
T_bar, T_mx, eps, lam, r, n = sp.symbols("T_bar T_max epsilon lambda r n", positive=True)


def T_bar_R_expr(p: Printed, E_total=E_total, E_PP=E_PP, E_DSA=E_DSA):
    """Theorem 1's T_bar^R at the tile ``t* = (p.t_row, p.t_col, p.t_red)`` with E_total =
    E[L^P + L^D], E_PP = E[L^P (L^P + t*_lcm)] and E_DSA = E[sum_{i=1}^{L^D} T^{D,SA}(L^P + i)].

    Symbolic twin of Theorem 1 (its T_bar^R).
    """
    return (E_total / (p.mu_lin * p.t_col) + E_total / p.mu_nLin + p.N * E_DSA
            + p.N * p.d / (p.s * p.mu * p.t_row * p.t_col * p.t_red) * E_PP)


def T_bar_R_exact(scm: SymbolicCostModel, w: Workload) -> sp.Rational:
    """T_bar^R as an exact rational: the pmf-weighted mean of Eq. 11 over the support of ``w``.

    Needs every prompt length of ``w`` to be a multiple of t*_lcm (Assumption 3), as Eq. 11 does.
    """
    return sp.Add(*[exact(float(p)) * scm.T_star_R(int(lp), int(ld))
                    for lp, ld, p in zip(w.L_P, w.L_D, w.p, strict=True)])


def n_threshold_expr(t_col, T_max=T_mx, epsilon=eps, T_bar_R=T_bar):
    """Theorem 2's threshold: n must exceed (t*_col - 1) T^max / (eps T_bar^R).

    Symbolic twin of Theorem 2 (its threshold on n).
    """
    return (t_col - 1) * T_max / (epsilon * T_bar_R)


def cycle_bound_expr(n_, T_bar_R, t_col, T_max):
    """Eq. 25: n T_bar^R + (t*_col - 1) T^max.

    Symbolic twin of Eq. 25.
    """
    return n_ * T_bar_R + (t_col - 1) * T_max


def lemma4_expr(n_, T_max, lam_, r_):
    """Lemma 4: r / lambda + n T^max.

    Symbolic twin of Lemma 4.
    """
    return r_ / lam_ + n_ * T_max


def lemma3_drift_expr(n_, lam_, r_, T_bar_R, t_col, T_max, printed: bool = False):
    """Lemma 3's drift bound; ``printed=True`` keeps the paper's ``lambda`` in the second term.

    Symbolic twin of Lemma 3.
    """
    rate = lam_ if printed else lam_ / r_
    return n_ * (lam_ / r_ * T_bar_R - 1) + rate * (t_col - 1) * T_max
