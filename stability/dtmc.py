"""The RAD cycle DTMC of Appendix C, built by executing RAD's cycles.

At one node, ``X[c]`` is the number of pending requests at the start of RAD's cycle ``c``
(Appendix C.1); a cycle ends when the decode set empties (Algorithm 1, line 9). Lemma 2 shows
``X`` is a Markov chain: at a cycle start the decode set is empty, the ``X[c]`` waiting requests
have fresh i.i.d. lengths, and arrivals are Poisson of rate ``lambda / r``.

The transition kernel is estimated here by *running* Algorithm 1 (the simulator's compiled RAD
loop, :mod:`stability.schedulers.rad`) on one cycle from each state, never from the proof's
formulas:

* ``x >= n``: the cycle starts requests FCFS from the ``x`` present only, so its length ``T`` and
  completions ``K`` do not depend on arrivals (nor on ``x``). Their joint law is sampled once by
  running RAD on ``n`` requests present at time 0. RAD completes ``n`` requests in such a cycle
  *unless* all ``t*_col`` decoding requests finish in the same batch before ``n`` have started:
  line 9 then ends the cycle early, so ``K`` is measured, not assumed (Lemma 3 assumes ``K = n``).
  Given ``T``, the arrivals are ``A ~ Poisson(lambda T / r)``, and
  ``P(x -> x - K + A)`` is an average over the sampled ``(T, K)`` of shifted Poisson laws.
* ``x < n``: arrivals can start within the cycle and decide when it ends, so the cycle is run
  with ``x`` requests present and Poisson arrivals. At most ``n - x`` arrivals can start in the
  cycle and later ones cannot change any decision (Algorithm 1 only looks at whether P is empty),
  so exactly ``n - x`` arrivals are generated; the arrivals after the last of them that fall in
  the cycle are Poisson of rate ``lambda / r`` over the remaining ``exposure`` (strong Markov).

The drift ``E[X[c+1] - X[c] | X[c] = x] = E[B + (lambda / r) exposure - K]`` (``B`` = generated
arrivals inside the cycle) is averaged with the Poisson part integrated exactly, and a Student-t
interval over the independent cycles gives its confidence interval.

The chain is truncated at ``x_max``: mass that would leave ``{0..x_max}`` is put on ``x_max``.
The stationary law of the truncated chain (GTH, :mod:`theory.markov`) is reported with its
truncation error: the mass near ``x_max`` and the change of the mean when truncating lower.

References
----------
Bari, Hegde, de Veciana (2025), Algorithm 1, Appendix C (Lemmas 2-4, Eq. 23-25), Theorem 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import stats

from stability.schedulers import rad
from stability.sim import engine
from stability.sim.gpu import tables_for
from stability.sim.metrics import optimal_work
from theory.cost import CostModel
from theory.errors import FieldError, require_positive, require_positive_int
from theory.markov import ChainStructure, stationary_laws
from theory.stats import t_interval
from theory.workload import Workload

MAX_STATES = 4000  # largest truncation a default may choose (GTH is cubic in the states)
MAX_MATRIX_BYTES = 1 << 31  # largest transition matrix (8-byte floats) an explicit truncation may ask


@dataclass(frozen=True, eq=False)
class CycleSample:
    """Independent executed cycles of RAD from one starting state ``x`` (Appendix C.1).

    Attributes
    ----------
    x : int
        X[c], or ``n`` for the law shared by all states ``x >= n``.
    T, K, started : ndarray
        Cycle length (s), completions and requests started in each cycle.
    W : ndarray
        Optimal work sum T*_R(j) (Eq. 12) of the requests started in the cycle; ``T - W`` is the
        time the cycle lost to tiling (and to idling, for x = 0).
    B : ndarray
        Generated arrivals that fall inside the cycle (0 for ``x >= n``).
    exposure : ndarray
        Time (s) over which the arrivals not generated count: a Poisson(lambda/r exposure) more.
    """

    x: int
    T: np.ndarray
    K: np.ndarray
    started: np.ndarray
    W: np.ndarray
    B: np.ndarray
    exposure: np.ndarray

    def drift_samples(self, lam_node: float) -> np.ndarray:
        """Per-cycle ``E[X[c+1] - X[c] | cycle]`` (the Poisson part integrated out)."""
        return self.B + lam_node * self.exposure - self.K


class CycleSampler:
    """Runs single cycles of RAD (Algorithm 1) for one GPU, model, workload and n.

    Parameters
    ----------
    cm : CostModel
    w : Workload
        The (L^P, L^D) law; pad it first for Assumption 3.
    n : int
        RAD's requests per cycle.
    t_col, chunk : int, optional
        RAD's decode batch and prefill chunk (default t*_col and t*_lcm).
    """

    def __init__(self, cm: CostModel, w: Workload, n: int, t_col: int | None = None,
                 chunk: int | None = None):
        self.cm, self.w = cm, w
        self.params = rad.make_params(cm, n=n, t_col=t_col, chunk=chunk)
        self.n = self.params.n
        self.tables = tables_for(cm, w.L_P, w.L_D, self.params.chunk)
        self._prm = self.params.record()
        # T*_R (Eq. 12) of each support pair, looked up by the key L^P (l^D,max + 1) + L^D
        keys = w.L_P * (w.l_D_max + 1) + w.L_D
        order = np.argsort(keys)
        self._keys, self._work = keys[order], optimal_work(cm, w.L_P, w.L_D)[order]

    def _run(self, arrival, L_P, L_D) -> tuple[float, int, int, float]:
        """Run RAD from an empty GPU on the given requests (FCFS order); (T, K, started, W) of its
        first cycle, W the optimal work of the requests it started (the first ones)."""
        st = engine.new_state(arrival, L_P, L_D)
        engine.run_loop(rad.loop, st, self.tables, self._prm)
        start, end, _, started, done = engine.export_cycles(st)
        s = int(started[0])
        idx = np.searchsorted(self._keys, L_P[:s] * (self.w.l_D_max + 1) + L_D[:s])
        return float(end[0] - start[0]), int(done[0]), s, float(self._work[idx].sum())

    def saturated(self, samples: int, seed: int = 0) -> CycleSample:
        """Cycles from any state ``x >= n``: ``n`` requests present, arrivals irrelevant.

        Sample ``i`` draws its lengths from its own stream ``(seed, i)``, in request order, so
        runs with different ``n`` share their first requests (common random numbers).
        """
        require_positive_int("samples", samples)
        n = self.n
        T, K, S, W = _empty(samples)
        zeros = np.zeros(n)
        for i in range(samples):
            L_P, L_D = self.w.sample(n, np.random.default_rng([seed, i]))
            T[i], K[i], S[i], W[i] = self._run(zeros, L_P, L_D)
        return CycleSample(n, T, K, S, W, np.zeros(samples), T.copy())

    def from_state(self, x: int, lam_node: float, samples: int, seed: int = 0) -> CycleSample:
        """Cycles from ``X[c] = x < n`` with Poisson(``lam_node``) arrivals after the start."""
        require_positive_int("samples", samples)
        if not 0 <= x < self.n:
            raise FieldError("x", x, f"a state in [0, n) = [0, {self.n})")
        m = self.n - x  # arrivals that can start in this cycle
        rng = np.random.default_rng([seed, x, 1])
        L_P, L_D = self.w.sample(samples * self.n, rng)
        L_P, L_D = L_P.reshape(samples, self.n), L_D.reshape(samples, self.n)
        gaps = rng.exponential(1.0 / lam_node, size=(samples, m))
        T, K, S, W = _empty(samples)
        B, exposure = np.zeros(samples), np.zeros(samples)
        head = np.zeros(x)
        for i in range(samples):
            arrivals = np.cumsum(gaps[i])
            T[i], K[i], S[i], W[i] = self._run(np.concatenate([head, arrivals]), L_P[i], L_D[i])
            B[i] = np.count_nonzero(arrivals <= T[i])
            if B[i] == m:  # every generated arrival is in: later ones are Poisson on the rest
                exposure[i] = T[i] - arrivals[-1]
        return CycleSample(x, T, K, S, W, B, exposure)


def _empty(samples: int):
    return (np.zeros(samples), np.zeros(samples, dtype=np.int64), np.zeros(samples, dtype=np.int64),
            np.zeros(samples))


def ratio_ci(num: np.ndarray, den: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """``E[num] / E[den]`` with a delta-method normal interval (i.i.d. pairs)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    ratio = num.mean() / den.mean()
    resid = num - ratio * den
    se = resid.std(ddof=1) / (np.sqrt(num.size) * den.mean()) if num.size > 1 else float("nan")
    z = stats.norm.ppf(0.5 + confidence / 2)
    return float(ratio), float(ratio - z * se), float(ratio + z * se)


def _jump_law(sample: CycleSample, lam_node: float, tail: float = 1e-14
              ) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, probabilities) of X[c+1] - X[c] from executed cycles: a mixture over the cycles of
    ``B - K + Poisson(lam_node exposure)``."""
    mu = lam_node * sample.exposure
    k_max = int(stats.poisson.isf(tail, max(float(mu.max()), 1e-300))) + 1
    k = np.arange(k_max + 1)
    pmf = stats.poisson.pmf(k[None, :], mu[:, None])
    base = (sample.B - sample.K).astype(np.int64)
    lo = int(base.min())
    out = np.zeros(int(base.max()) - lo + k_max + 1)
    np.add.at(out, (base - lo)[:, None] + k[None, :], pmf)
    out /= sample.T.size
    return np.arange(lo, lo + out.size), out


def _fold_row(P_row: np.ndarray, targets: np.ndarray, probs: np.ndarray) -> None:
    """Add ``probs`` at ``targets`` clipped into ``[0, x_max]``, then give the lost tail to x_max."""
    x_max = P_row.size - 1
    np.add.at(P_row, np.clip(targets, 0, x_max), probs)
    P_row[x_max] += max(0.0, 1.0 - P_row.sum())


@dataclass(frozen=True, eq=False)
class Stationary:
    """The stationary law of the truncated chain and how much the truncation matters.

    Attributes
    ----------
    pi : ndarray
        Stationary law on {0..x_max} (of the recurrent class holding state 0, or the first).
    mean : float
        Its mean, E_pi[X].
    boundary_mass : float
        pi-mass of the top ``band`` states: what the truncation can have moved.
    band : int
        Number of top states counted in ``boundary_mass``.
    mean_lower : float
        The stationary mean of the same chain truncated at ``x_lower`` (sensitivity).
    x_lower : int
    structure : ChainStructure
        Communicating classes and periods (networkx).
    """

    pi: np.ndarray
    mean: float
    boundary_mass: float
    band: int
    mean_lower: float
    x_lower: int
    structure: ChainStructure

    @property
    def truncation_error(self) -> float:
        """|mean at x_max - mean at x_lower|: a gauge of the error from truncating."""
        return abs(self.mean - self.mean_lower)


@dataclass(frozen=True, eq=False)
class CycleChain:
    """The executed cycle DTMC of RAD at one node, truncated at ``x_max``.

    Attributes
    ----------
    n, t_col, lam, r, x_max, confidence
        RAD's n and decode batch, the system arrival rate, the nodes, the truncation and the CI
        level.
    lam_node : float
        lambda / r, the Poisson rate at the node.
    rows : list of CycleSample
        Executed cycles from each state x < n.
    sat : CycleSample
        Executed cycles from states x >= n (one law for all).
    P : ndarray
        Transition matrix on {0..x_max}.
    """

    n: int
    t_col: int
    lam: float
    r: int
    x_max: int
    confidence: float
    lam_node: float
    rows: list
    sat: CycleSample
    P: np.ndarray = field(repr=False)

    def sat_params(self) -> tuple[int, int, float, int, float]:
        """(t_col, n, lambda, r, confidence)."""
        return self.t_col, self.n, self.lam, self.r, self.confidence

    def sample_of(self, x: int) -> CycleSample:
        return self.rows[x] if x < self.n else self.sat

    @cached_property
    def table(self) -> dict:
        """Per state x in {0..x_max}: drift, E[T | x] and E[K | x], each with its CI."""
        xs = np.arange(self.x_max + 1)
        cols: dict = {}
        for name, of in (("drift", lambda s: s.drift_samples(self.lam_node)),
                         ("ET", lambda s: s.T), ("EK", lambda s: s.K)):
            per_row = [t_interval(of(s), self.confidence) for s in self.rows]
            sat = t_interval(of(self.sat), self.confidence)
            values = np.array(per_row + [sat] * (xs.size - self.n)).reshape(xs.size, 3)
            cols[name], cols[name + "_lo"], cols[name + "_hi"] = values.T
        return {"x": xs, **cols}

    def saturated_drift(self) -> tuple[float, float, float]:
        """Drift at every x >= n with its CI (one value: the law does not depend on x)."""
        return t_interval(self.sat.drift_samples(self.lam_node), self.confidence)

    def cycle_throughput(self) -> tuple[float, float, float]:
        """E[K] / E[T] for x >= n (requests/s per node) with a CI: the drift there is negative
        iff lambda / r is below it, so ``r`` times it is RAD's stability boundary at this n."""
        return ratio_ci(self.sat.K, self.sat.T, self.confidence)

    def early_end_fraction(self) -> float:
        """P(K < n | x >= n): cycles that line 9 ended before n requests had started."""
        return float(np.mean(self.sat.K < self.n))

    def stationary(self, band: int | None = None, lower: float = 0.75) -> Stationary:
        """Stationary law of the truncated chain (GTH), with its truncation error.

        ``band`` (default max(1, x_max // 20)) top states count as the boundary; the mean is also
        computed with the chain truncated at ``lower * x_max`` (same rows, folded there).
        """
        laws, struct = stationary_laws(self.P)
        pi = next((p for p in laws if p[0] > 0), laws[0])
        band = band or max(1, self.x_max // 20)
        x_lower = max(1, int(lower * self.x_max))
        lower_laws, _ = stationary_laws(_refold(self.P, x_lower))
        pi_lower = next((p for p in lower_laws if p[0] > 0), lower_laws[0])
        xs = np.arange(pi.size)
        return Stationary(pi, float(pi @ xs), float(pi[-band:].sum()), band,
                          float(pi_lower @ np.arange(pi_lower.size)), x_lower, struct)


def _refold(P: np.ndarray, x_top: int) -> np.ndarray:
    """The chain on {0..x_top}: rows 0..x_top of P with mass above x_top moved to x_top."""
    Q = P[: x_top + 1, : x_top + 1].copy()
    Q[:, x_top] += P[: x_top + 1, x_top + 1:].sum(axis=1)
    return Q


def default_truncation(n: int, sat: CycleSample, lam_node: float, tail: float = 1e-8) -> int:
    """A truncation level whose stationary tail mass should be about ``tail``.

    Above n the chain is a random walk with drift d and jump variance v; its stationary tail
    decays like exp(-2 |d| x / v), so ``n + v ln(1/tail) / (2 |d|)`` (at least 5 jump deviations)
    leaves about ``tail`` beyond. Without negative drift: ``n + 10`` deviations. Capped at
    ``MAX_STATES``.
    """
    jumps = sat.drift_samples(lam_node)
    d = float(jumps.mean())
    v = float(jumps.var() + lam_node * sat.exposure.mean())  # plus the Poisson part's variance
    sd = np.sqrt(max(v, 1.0))
    extra = 10 * sd if d >= 0 else max(5 * sd, v * np.log(1 / tail) / (2 * abs(d)))
    return int(min(MAX_STATES - 1, n + np.ceil(extra)))


@dataclass(frozen=True)
class ChainOptions:
    """How the cycle DTMC is estimated (:func:`build_chain`).

    Attributes
    ----------
    x_max : int or None
        Truncation level (None: :func:`default_truncation`).
    samples : int
        Executed cycles per state x < n.
    samples_sat : int or None
        Executed cycles for the shared law of x >= n (None: 10 ``samples``).
    seed : int
        Seed of the executed cycles.
    confidence : float
        Level of every interval.
    """

    x_max: int | None = None
    samples: int = 200
    samples_sat: int | None = None
    seed: int = 0
    confidence: float = 0.99


def build_chain(cm: CostModel, w: Workload, n: int, lam: float, r: int = 1,
                options: ChainOptions | None = None, sampler: CycleSampler | None = None,
                sat: CycleSample | None = None) -> CycleChain:
    """Estimate RAD's cycle DTMC at one node by executing its cycles (see the module docstring).

    Implements Lemma 2 (the chain it states, at a truncation).

    Parameters
    ----------
    cm, w : CostModel, Workload
    n : int
        RAD's n.
    lam : float
        Arrival rate into the system (requests/s); a node sees lambda / r.
    r : int
        Nodes behind the uniformly random planner (Section 4.1).
    options : ChainOptions, optional
        Truncation, executed cycles, seed and level (None: the defaults of :class:`ChainOptions`).
    sampler, sat : optional
        Reuse a sampler and/or saturated sample (e.g. across arrival rates).

    References
    ----------
    Appendix C.1 (Lemma 2), C.3 (Lemma 3).
    """
    o = ChainOptions() if options is None else options
    x_max, samples, samples_sat, seed, confidence = o.x_max, o.samples, o.samples_sat, o.seed, o.confidence
    require_positive("lambda", lam)
    r = require_positive_int("r", r)
    if not 0 < confidence < 1:
        raise FieldError("confidence", confidence, "a number in (0, 1)")
    if sampler is None and isinstance(n, (int, np.integer)) and n >= MAX_STATES:
        raise FieldError("n", n, f"RAD's n below {MAX_STATES:,} for the cycle DTMC (the chain has more "
                                 "than n states, and GTH elimination is cubic in them)")
    if x_max is not None and not isinstance(x_max, bool) and isinstance(x_max, (int, np.integer)) \
            and (x_max + 1) ** 2 * 8 > MAX_MATRIX_BYTES:
        raise FieldError("truncate (x_max)", x_max, f"a truncation whose transition matrix fits in "
                                                    f"{MAX_MATRIX_BYTES >> 30} GiB (x_max <= 16383)")
    sampler = sampler or CycleSampler(cm, w, n)
    n = sampler.n
    lam_node = lam / r
    sat = sat or sampler.saturated(samples_sat or 10 * samples, seed)
    if x_max is None:
        x_max = default_truncation(n, sat, lam_node)
    if isinstance(x_max, bool) or int(x_max) != x_max or x_max < n:
        raise FieldError("truncate (x_max)", x_max, f"an integer >= n = {n}")
    x_max = int(x_max)
    rows = [sampler.from_state(x, lam_node, samples, seed) for x in range(n)]
    P = np.zeros((x_max + 1, x_max + 1))
    for x in range(n):
        offsets, probs = _jump_law(rows[x], lam_node)
        _fold_row(P[x], x + offsets, probs)
    offsets, probs = _jump_law(sat, lam_node)
    for x in range(n, x_max + 1):
        _fold_row(P[x], x + offsets, probs)
    return CycleChain(n, sampler.params.t_col, float(lam), r, x_max, confidence, lam_node, rows, sat, P)


@dataclass(frozen=True)
class NMin:
    """The smallest n whose executed drift is negative for x >= n at lambda = lambda*(1 - eps).

    Attributes
    ----------
    epsilon : float
    n_min : int or None
        None if no n up to ``n_max`` has an interval below 0.
    n_threshold : int
        Theorem 2's sufficient n.
    drift : tuple
        (mean, lo, hi) of the drift at ``n_min``.
    evaluated : dict
        n -> (mean, lo, hi) for every n tried.
    """

    epsilon: float
    n_min: int | None
    n_threshold: int
    drift: tuple
    evaluated: dict


def empirical_n_min(cm: CostModel, w: Workload, epsilon: float, samples: int = 200, seed: int = 0,
                    confidence: float = 0.99, n_max: int = 1 << 16) -> NMin:
    """Smallest n for which RAD's executed drift at every x >= n is negative (its whole CI) at
    ``lambda = lambda* (1 - eps)``, by doubling then bisection.

    The drift at x >= n is ``(lambda / r) E[T_n] - E[K_n]``, and ``lambda / r = (1 - eps) /
    T_bar^R`` whatever r is, so n_min does not depend on r. Runs at different n share their
    requests (common random numbers), which keeps the search monotone in practice; it assumes the
    drift sign is monotone in n.

    References
    ----------
    Theorem 2 (the threshold it is set against), Lemma 3.
    """
    from theory.bounds import T_bar_R, T_max, n_threshold

    tbar = T_bar_R(cm, w)
    n_thr = n_threshold(cm.t_star.t_col, T_max(cm, w.l_P_max, w.l_D_max), tbar, epsilon)
    lam_node = (1 - epsilon) / tbar
    evaluated: dict = {}

    def drift(n: int) -> tuple:
        if n not in evaluated:
            sat = CycleSampler(cm, w, n).saturated(samples, seed)
            evaluated[n] = t_interval(sat.drift_samples(lam_node), confidence)
        return evaluated[n]

    hi = 1
    while drift(hi)[2] >= 0:
        if hi >= n_max:
            return NMin(epsilon, None, n_thr, drift(hi), evaluated)
        hi = min(2 * hi, n_max)
    lo = hi // 2  # drift(lo) >= 0 (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if drift(mid)[2] < 0:
            hi = mid
        else:
            lo = mid
    return NMin(epsilon, hi, n_thr, drift(hi), evaluated)
