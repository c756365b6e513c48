"""Claims decided by sympy identities and z3 (SMT) inequalities.

Each check here has a core that takes the statement's input (a premise on t*_lcm, a set of cost
models, the cycle bound to assume, a batch shape) and returns a
:class:`~paper_checks.registry.Result` from one code path: PASS when the solver proves the claim
for every value of the free parameters, FAIL (or ERRATUM) with the solver's model as the
counterexample otherwise.

- the relaxed chunking bound of Appendix B (proof): over *all* chunkings of a prompt of L tokens,
  the ceiling-free attention cost sum_k 2 (i_k + c_k - 1) c_k equals L^2 + sum_k c_k^2 (a
  telescoping identity), hence is at least L (L + 1), with equality only for chunks of one token,
  for every t*_lcm;
- Assumption 2 for every d_col from d_col = 1 (exhaustive over the presets): ceil(d/t) <= d
  ceil(1/t) makes the best GeMM at most d_col times its d_col = 1 time, so d_col GeMVs are slower
  for every d_col once they are at d_col = 1, which is evaluated on every preset;
- Theorem 2 with the corrected Eq. 25 (proof; cycles that end before n requests started lose no
  time to tiling): the drift of the cycle chain is negative above n for every load below the bound;
- Eq. 7 for symbolic batches (a sample of batch shapes, every other quantity symbolic).

References
----------
Bari, Hegde, de Veciana (2025), Appendix B.1 (Eq. 10-12), Assumption 2, Appendix C.2 (Eq. 25,
Lemma 3), Theorem 2. z3: de Moura and Bjorner (2008), https://github.com/Z3Prover/z3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction

import sympy as sp
import z3

from paper_checks.common import frac, gpus, models
from paper_checks.evidence import Enumeration, Points, Symbolic
from paper_checks.margins import EXACT, NOT_APPLICABLE, ratio_margin
from paper_checks.registry import Result, outcome, register
from theory.builder import CostSpec, cost_model
from theory.cost import CostModel


def _model_dict(model: z3.ModelRef) -> dict:
    """A z3 model as ``{name: value}`` (exact rationals as strings)."""
    return {d.name(): str(model[d]) for d in model.decls() if d.arity() == 0 and not d.name().startswith("/")}


def prove(claim: z3.BoolRef, premises: Iterable[z3.BoolRef] = ()) -> tuple[bool, dict]:
    """Whether ``premises`` imply ``claim`` for every value of their variables (z3: the negation
    is unsatisfiable); otherwise the solver's counterexample.

    Raises
    ------
    RuntimeError
        If z3 answers ``unknown`` (no verdict may rest on it).
    """
    ctx = z3.Context()  # a fresh context: the counterexample does not depend on what ran before
    s = z3.Solver(ctx=ctx)
    s.set("timeout", 60_000)
    s.add(*(p.translate(ctx) for p in premises), z3.Not(claim).translate(ctx))
    answer = s.check()
    if answer == z3.unknown:
        raise RuntimeError(f"z3 could not decide {claim}: {s.reason_unknown()}")
    return answer == z3.unsat, (_model_dict(s.model()) if answer == z3.sat else {})


# --- the relaxed chunking bound (Appendix B.1) --------------------------------------------------


def relaxed_statements(t_premise: Callable | None = None) -> dict:
    """The statements of :func:`relaxed_bound_core`: sympy's telescoping identity of a chunk's
    cost, z3's ``c^2 >= c`` (equality only at c = 1) for integers c >= 1, and z3's question whether
    L (L + 1) = L (L + t) for every L = m t, m >= 1, t*_lcm ``t`` constrained by ``t_premise`` (every
    t >= 1 unless a test narrows it)."""
    S, c_ = sp.symbols("S c", integer=True, nonnegative=True)
    c = z3.Int("c")
    L, m, t = z3.Ints("L m t")
    t_premise = t_premise or (lambda t: t >= 1)
    return {"telescoping (sympy)": 2 * (S + c_) * c_ - ((S + c_) ** 2 - S**2 + c_**2),
            "c^2 >= c (z3)": (z3.And(c * c >= c, z3.Implies(c * c == c, c == 1)), [c >= 1]),
            "L(L+1) = L(L + t*_lcm) (z3)": (L * (L + 1) == L * (L + t), [m >= 1, L == m * t, t_premise(t)])}


def relaxed_bound_core(t_premise: Callable | None = None) -> Result:
    """Appendix B's claim that chunks of t*_lcm minimise the ceiling-free prefill attention, at
    cost L (L + t*_lcm), proved or refuted for every prompt length L that is a multiple of t*_lcm
    and every t*_lcm allowed by ``t_premise`` (every t*_lcm >= 1 unless a test narrows it).

    The minimum over all chunkings is L^2 + min sum_k c_k^2 over compositions of L (the
    telescoping identity, sympy), and z3 proves c^2 >= c for every integer c >= 1 (equality only at
    c = 1): the minimum is L (L + 1), reached by chunks of one token. The claim then holds iff
    L (L + t*_lcm) = L (L + 1) for every such L; z3 decides that and gives a refuting (L, t*_lcm).
    """
    st = relaxed_statements(t_premise)
    identity_ok = sp.expand(st["telescoping (sympy)"]) == 0
    square_ok, _ = prove(*st["c^2 >= c (z3)"])
    printed_ok, cex = prove(*st["L(L+1) = L(L + t*_lcm) (z3)"])
    corrected_ok = square_ok and identity_ok
    L, t = (int(cex["L"]), int(cex["t"])) if cex else (None, None)
    return outcome(
        printed_ok and corrected_ok,
        corrected_holds=corrected_ok,
        summary=(
            "proved: chunks of t*_lcm are optimal, cost L(L + t*_lcm)"
            if printed_ok and corrected_ok
            else "proved: the minimum over all chunkings is L(L+1) (chunks of one token), below "
            "L(L + t*_lcm) for every L >= 1 as soon as t*_lcm >= 2 (every GPU preset)"
        ),
        coverage="every prompt length L = m t*_lcm, m >= 1, every chunking, every t*_lcm the premise allows",
        counterexample={**cex, "cost of chunks of one token L(L+1)": L * (L + 1) if cex else None,
                        "printed L(L + t*_lcm)": L * (L + t) if cex else None},
        correction="the minimum of Eq. 10's ceiling-free bound over all chunkings is L (L + 1) "
        "(chunks of one token), not L (L + t*_lcm)",
        correction_check="sympy: 2 (S + c) c = (S + c)^2 - S^2 + c^2, so a chunking costs "
        "L^2 + sum c_k^2; z3: c^2 >= c for every integer c >= 1, with "
        "equality only at c = 1"
        if corrected_ok
        else "the proof failed",
        evidence={"telescoping identity (sympy)": identity_ok, "c^2 >= c (z3)": square_ok},
    )


@register(
    "appB.relaxed_bound_proof",
    level="proof",
    domain="every prompt length L^P = m t*_lcm (m >= 1), every chunking of it, every t*_lcm >= 1",
    evaluates=(Symbolic("sympy", lambda: relaxed_statements()["telescoping (sympy)"],
                        "a chunk's ceiling-free cost telescopes"),
               Symbolic("z3", lambda: {k: v for k, v in relaxed_statements().items() if "z3" in k},
                        "c^2 >= c for integers c >= 1; L (L + 1) = L (L + t*_lcm) for every L = m t*_lcm")),
    location="Appendix B.1, after Eq. 10: the optimal chunk set I_j and Eq. 12's L^P (L^P + t*_lcm)",
    items=("Eq. 10", "Eq. 12", "Proposition 1"),
    claim="Chunks of t*_lcm minimise the ceiling-free prefill attention of Eq. 10 over all "
    "chunkings, at cost L^P (L^P + t*_lcm).",
    method="sympy: the cost of a chunking telescopes to L^2 + sum c_k^2; z3: c^2 >= c for integers "
    "c >= 1 (equality iff c = 1), so the minimum is L (L + 1); z3 then decides L (L + 1) = "
    "L (L + t*_lcm) for all multiples L of every t*_lcm >= 1.",
)
def appB_relaxed_bound_proof(fast: bool) -> Result:
    return relaxed_bound_core()


# --- Assumption 2 for every d_col ----------------------------------------------------------------


def ceil_le_statement():
    """z3 over the integers: q = ceil(d/t) (the least q with q t >= d) is at most d for d, t >= 1.
    Returns ``(claim, premises)``."""
    d, t, q = z3.Ints("d t q")
    return q <= d, [d >= 1, t >= 1, q * t >= d, (q - 1) * t < d]


def d_col_one_times(cm: CostModel) -> list[tuple]:
    """(weight, best GeMV time, best GeMM time at d_col = 1) for every linear weight of ``cm``, in exact
    rationals (the binary value of each float rate), each side on its fastest tile."""
    out = []
    for g in cm.model.linear_gemms(cm.mode):
        gemm1 = min(
            Fraction(-(-g.d_row // int(cm.t_row[k])) * -(-g.d_red // int(cm.t_red[k])))
            / (cm.s * frac(cm.mu[k]))
            for k in range(len(cm.tiles))
        )
        gemv = min(
            Fraction(-(-g.d_row // int(cm.g_row[k])) * -(-g.d_red // int(cm.g_col[k])))
            / (cm.s * frac(cm.mu_gemv[k]))
            for k in range(len(cm.mu_gemv))
        )
        out.append((g, gemv, gemm1))
    return out


def assumption2_core(cms: Iterable[CostModel]) -> Result:
    """Assumption 2 for every weight matrix of each cost model and every d_col >= 1.

    z3 proves q = ceil(d/t) <= d for all integers d, t >= 1 (q the least integer with q t >= d),
    so a GeMM on any tile takes at most d_col times its d_col = 1 time, and the best GeMM at most
    d_col times the best at d_col = 1. Hence d_col GeMVs (d_col times the best GeMV) are slower
    for every d_col >= 1 as soon as the best GeMV is slower than the best GeMM at d_col = 1, which
    is checked in exact rationals (the binary value of each float rate).
    """
    lemma_ok, _ = prove(*ceil_le_statement())
    n, worst, cex = 0, None, {}
    for cm in cms:
        for g, gemv, gemm1 in d_col_one_times(cm):
            ratio = gemv / gemm1
            n += 1
            if worst is None or ratio < worst:
                worst = ratio
            if ratio <= 1 and not cex:
                cex = {
                    "gpu": cm.gpu.key,
                    "model": cm.model.key,
                    "mode": cm.mode,
                    "weight": g.name,
                    "d_col": 1,
                    "GeMV time (s)": float(gemv),
                    "GeMM time (s)": float(gemm1),
                }
    holds = lemma_ok and not cex
    return outcome(
        holds,
        summary=(
            f"proved for every d_col >= 1: the d_col = 1 ratio GeMV/GeMM is >= "
            f"{float(worst):.4g} > 1 on every weight, and ceil(d/t) <= d"
            if holds
            else "one GeMV is not slower than the GeMM with one column"
        ),
        coverage=f"every d_col >= 1, {n} (cost model, weight matrix) cases",
        counterexample=cex or {"lemma ceil(d/t) <= d": lemma_ok},
        evidence={
            "z3: ceil(d/t) <= d for d, t >= 1": lemma_ok,
            "least GeMV/GeMM ratio at d_col = 1": float(worst) if worst is not None else None,
        },
        margin=ratio_margin(float(worst), 1.0) if holds else None,
    )


@register(
    "assumption2.all_d_col",
    level="exhaustive",
    domain="every GPU preset x model preset x mode (paper, real), every d_col >= 1",
    evaluates=(Symbolic("z3", ceil_le_statement, "ceil(d/t) <= d for all integers d, t >= 1"),
               Enumeration("every GPU preset x model preset x mode (paper, real), every d_col >= 1",
                           lambda: len(gpus()) * len(models()) * 2),),
    location="Section 2.3, Assumption 2",
    items=("Assumption 2",),
    claim="Computing d_col GeMVs y(i) = A x(i) takes longer than the one GeMM Y = A X, for every d_col.",
    method="z3: ceil(d/t) <= d for integers d, t >= 1, so the best GeMM grows at most linearly in "
    "d_col from d_col = 1; exact rationals at d_col = 1 on every weight of every GPU x model x "
    "mode (each side on its fastest tile).",
)
def assumption2_all_d_col(fast: bool) -> Result:
    return assumption2_core(
        cost_model(CostSpec(g, mk, mode)) for g in gpus() for mk in models() for mode in ("paper", "real")
    )


# --- Theorem 2 with the corrected Eq. 25 -----------------------------------------------------------


def repaired_cycle_bound(ET, EK, p, n, T_bar, t_col, T_max):
    """The corrected Eq. 25: E[T] <= E[K] T_bar^R + P(K = n) (t*_col - 1) T^max, K the requests
    started in the cycle (only a cycle with K = n can lose time to tiling; Wald's identity gives
    E[K] T_bar^R for the requests' own work)."""
    return ET <= EK * T_bar + p * (t_col - 1) * T_max


def printed_cycle_bound(ET, EK, p, n, T_bar, t_col, T_max):
    """Eq. 25 as printed: E[T] <= n T_bar^R + (t*_col - 1) T^max, used with K = n completions."""
    return ET <= n * T_bar + (t_col - 1) * T_max


def theorem2_drift_statement(bound: Callable = repaired_cycle_bound):
    """Theorem 2's drift as a z3 statement over all positive reals, from the cycle bound ``bound``.

    Variables: lambda = theta r (1 - eps) / T_bar^R with 0 < theta <= 1, 0 < eps < 1; n >
    (t*_col - 1) T^max / (eps T_bar^R) (Theorem 2's threshold), n >= 1, t*_col >= 1, T^max >= 0;
    a cycle from x >= n starts K requests, 1 <= K <= n, with E[K] and p = P(K = n), so
    E[K] >= max(1, p n); the drift of the cycle chain is (lambda / r) E[T] - E[K] (Poisson(lambda/r)
    arrivals during the cycle, Wald). Claim: the drift is negative. Returns ``(claim, premises)``.
    """
    R = z3.Reals("lam r T_bar T_max eps theta n t_col ET EK p")
    lam, r, T_bar, T_max, eps, theta, n, t_col, ET, EK, p = R
    premises = [
        r >= 1,
        T_bar > 0,
        T_max >= 0,
        eps > 0,
        eps < 1,
        theta > 0,
        theta <= 1,
        lam * T_bar == theta * r * (1 - eps),
        t_col >= 1,
        n >= 1,
        n * eps * T_bar > (t_col - 1) * T_max,
        p >= 0,
        p <= 1,
        EK >= 1,
        EK <= n,
        EK >= p * n,
        ET >= 0,
        bound(ET, EK, p, n, T_bar, t_col, T_max),
    ]
    return lam / r * ET - EK < 0, premises


def theorem2_drift_core(bound: Callable = repaired_cycle_bound) -> Result:
    """Theorem 2's drift, proved by z3 from the cycle bound ``bound``
    (:func:`theorem2_drift_statement`), or refuted with z3's counterexample."""
    ok, cex = prove(*theorem2_drift_statement(bound))
    return outcome(
        ok,
        summary=(
            "proved: drift < 0 above n for every load below the bound, with the corrected Eq. 25"
            if ok
            else "the drift need not be negative: a cycle that ends early (K < n) keeps the "
            "whole (t*_col - 1) T^max of Eq. 25"
        ),
        coverage="every r >= 1, T_bar^R > 0, T^max >= 0, eps in (0, 1), lambda <= r (1 - eps) / "
        "T_bar^R, n above Theorem 2's threshold, every law of K in [1, n]",
        counterexample=cex,
        margin=NOT_APPLICABLE,
    )


@register(
    "thm2.repaired_drift",
    level="proof",
    domain="every r >= 1, T_bar^R > 0, T^max >= 0, eps in (0, 1), lambda <= r (1 - eps) / T_bar^R, n above "
    "Theorem 2's threshold and every law of the requests K started in a cycle",
    evaluates=(Symbolic("z3", theorem2_drift_statement, "the premises and the corrected Eq. 25 imply a "
                                                        "negative drift, over the reals"),),
    location="Theorem 2 and Appendix C.2 (Eq. 25, Lemma 3)",
    items=("Theorem 2", "Eq. 25", "Lemma 3"),
    claim="With the corrected Eq. 25 (a cycle that ends before n requests started loses no time to "
    "tiling), the cycle chain's drift is negative above Theorem 2's n for every lambda <= "
    "r (1 - eps) / T_bar^R: RAD is stable, although a cycle may complete fewer than n "
    "requests (lemma3.completes_n).",
    method="z3 over the reals: the premises (the load, the threshold, 1 <= K <= n, the corrected Eq. 25, "
    "drift = (lambda/r) E[T] - E[K]) imply drift < 0; with the printed Eq. 25 in its place "
    "z3 finds a counterexample.",
)
def thm2_repaired_drift(fast: bool) -> Result:
    return theorem2_drift_core()


# --- Eq. 7 for a symbolic batch -------------------------------------------------------------------


def printed_eq7_linear(tau, chunks, decodes, t_col):
    """The column blocks of Eq. 7's linear term as printed: ceil(tau / t_col), tau the batch's tokens
    (one GeMM per weight over all of them)."""
    return sp.ceiling(tau / t_col)


def eq7_core(linear_blocks: Callable = printed_eq7_linear, shapes=((1, 0), (0, 1), (1, 1), (2, 3))) -> Result:
    """Eq. 7, proved by sympy for a batch of m prefill chunks and k decodes with every position,
    chunk size, tile, rate and model dimension symbolic (dimensions multiples of their tiles), for
    each (m, k) of ``shapes``: the batch built from its GeMMs -- each weight once over the batch's
    tau tokens (Eq. 2), tau / mu_nLin, per decode the GeMVs K^T q and V p (Eq. 3), per chunk the
    GeMMs K^T Q and V P (Eq. 2) -- equals Eq. 7 (Eq. 4's mu_Lin, Eq. 5 with its 1/s, Eq. 6) and the
    project's symbolic twin :func:`theory.symbolic.batch_time`."""
    from theory import symbolic

    tr, tc, tk, gr, gc, D, N = sp.symbols("t_row t_col t_red g_row g_col D N", integer=True, positive=True)
    mu, mug, s, mun = sp.symbols("mu mu_gemv s mu_nLin", positive=True)
    n1, n2, a1, a2, b1, b2 = sp.symbols("n1 n2 a1 a2 b1 b2", integer=True, positive=True)
    d = D * tr * tk * gr * gc  # attention width, a multiple of every tile dimension
    gemms = [(n1, a1 * tr, b1 * tk), (n2, a2 * tr, b2 * tk)]
    mu_lin = s * mu / sp.Add(*[n * sp.ceiling(r / tr) * sp.ceiling(k / tk) for n, r, k in gemms])  # Eq. 4

    def dsa(i):  # Eq. 5 with the 1/s of Eq. 3
        return ((d / gc) * sp.ceiling(i / gr) + sp.ceiling(i / gc) * (d / gr)) / (s * mug)

    bad = {}
    for m, k in shapes:
        ii = sp.symbols(f"i0:{m}", integer=True, positive=True)
        cc = sp.symbols(f"c0:{m}", integer=True, positive=True)
        pp = sp.symbols(f"p0:{k}", integer=True, positive=True)
        chunks, tau = list(zip(ii, cc, strict=True)), sp.Add(*cc) + k
        built = (
            sp.Add(*[n * symbolic.gemm_time(r, tau, q, tr, tc, tk, mu, s) for n, r, q in gemms]) + tau / mun
        )
        built += N * sp.Add(
            *[symbolic.gemv_time(p, d, gr, gc, mug, s) + symbolic.gemv_time(d, p, gr, gc, mug, s) for p in pp]
        )
        built += sp.Add(
            *[
                N
                * (
                    symbolic.gemm_time(i + c - 1, c, d, tr, tc, tk, mu, s)
                    + symbolic.gemm_time(d, c, i + c - 1, tr, tc, tk, mu, s)
                )
                for i, c in chunks
            ]
        )
        printed = linear_blocks(tau, chunks, pp, tc) / mu_lin + tau / mun + N * sp.Add(*[dsa(p) for p in pp])
        printed += sp.Add(
            *[
                N
                / (s * mu)
                * (
                    sp.ceiling((i + c - 1) / tr) * sp.ceiling(c / tc) * d / tk
                    + d / tr * sp.ceiling(c / tc) * sp.ceiling((i + c - 1) / tk)
                )
                for i, c in chunks
            ]
        )
        twin = symbolic.batch_time(
            chunks,
            list(pp),
            symbolic.Printed(N=N, d=d, s=s, t_row=tr, t_col=tc, t_red=tk, mu=mu, mu_lin=mu_lin, mu_nLin=mun),
            dsa,
        )
        gap, twin_gap = sp.simplify(built - printed), sp.simplify(twin - built)
        if (gap != 0 or twin_gap != 0) and not bad:
            bad = {
                "prefill chunks m": m,
                "decodes k": k,
                "built from the GeMMs - Eq. 7": str(gap),
                "theory.symbolic.batch_time - built": str(twin_gap),
            }
    return outcome(
        not bad,
        summary="proved: Eq. 7 is the batch's GeMMs timed by Eq. 2-3 (one GeMM per weight over its "
        "tau tokens), and theory.symbolic.batch_time is Eq. 7"
        if not bad
        else "Eq. 7 differs from the batch built from its GeMMs",
        coverage=f"batches of (prefill chunks, decodes) in {list(shapes)}, every position, chunk size, "
        "tile, rate and model dimension symbolic",
        counterexample=bad,
        margin=EXACT,
    )


@register(
    "eq7.symbolic_batch",
    level="sample",
    domain="every batch of m prefill chunks and k decodes",
    evaluates=(Points("(m, k) in {(1, 0), (0, 1), (1, 1), (2, 3)}, every position, size, tile, rate and "
                      "dimension symbolic (sympy)"),),
    location="Section 3.2.3, Eq. 7",
    items=("Eq. 7", "Eq. 4"),
    claim="A batch's time is the sum of its linear time over all its tau tokens (Eq. 4), tau / mu_nLin, "
    "N T^{D,SA} per decode (Eq. 5) and Eq. 6 per prefill chunk, all GeMMs on one tile.",
    method="sympy: build the batch from its GeMMs and GeMVs (Eq. 2-3) with symbolic positions, sizes, tiles "
    "and dimensions, for several numbers of chunks and decodes, and compare with printed Eq. 7 and "
    "with theory.symbolic.batch_time.",
)
def eq7_symbolic_batch(fast: bool) -> Result:
    return eq7_core()
