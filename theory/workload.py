"""Joint laws of prompt and output lengths (L^P, L^D) (Theorems 1-2, Assumption 3, Section 7).

Every workload is an exact finite pmf over pairs ``(l^P, l^D)`` with ``l^P >= 1`` and ``l^D >= 1``
(a request has ``L^D`` decode iterations, at positions ``L^P + 1 .. L^P + L^D``), so expectations
such as those in T_bar^R are exact sums. Its support is bounded, as Assumption 3 needs:
``l^{P,max}`` and ``l^{D,max}`` are the largest values with positive mass; a law that is
unbounded by nature (the lognormal fit of Table 1) is truncated, and says so in ``notes``.

Assumption 3 also asks that prompt lengths be multiples of t*_lcm: :meth:`Workload.assumption3`
reports how much mass satisfies it, and :meth:`Workload.padded` rounds prompts up to multiples of
t*_lcm so the premise holds exactly.

Presets: ``deterministic``, ``uniform``, ``table1`` (discretized lognormal fitted to Table 1),
``sharegpt4`` (the paper's real trace, packaged), any CSV trace, and mixtures of these (two request
classes with different length laws: :func:`mixture`).

References
----------
Bari, Hegde, de Veciana (2025), Theorems 1-2, Assumption 3, Table 1, Section 7.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError, LlmqError, UnknownNameError
from theory.trace_prefix import prefix_columns

TABLE1 = {
    # Table 1 of the paper: openchat_sharegpt4 prompt and decode lengths (tokens).
    "prompt": {"median": 1730, "p90": 5696, "std": 2088},
    "decode": {"median": 415, "p90": 834, "std": 101},
}
TOTAL_CAP = 8192  # Section 7: "We cap each request's length to 8192 tokens in total."


@dataclass(frozen=True, eq=False)
class Workload:
    """An exact finite joint pmf of (L^P, L^D).

    Attributes
    ----------
    name : str
    L_P, L_D : ndarray of int64
        Support points (pairs), each >= 1, with no duplicates.
    p : ndarray of float
        Their probabilities (sum 1).
    notes : tuple of str
        How the law was built (fits, truncation, padding).
    """

    name: str
    L_P: np.ndarray
    L_D: np.ndarray
    p: np.ndarray
    notes: tuple[str, ...] = field(default=())

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_pairs(cls, name: str, L_P, L_D, weights=None, notes=()) -> Workload:
        """Build from (possibly repeated) pairs with optional weights, validating each field."""
        lp = _lengths("L_P (prompt length)", L_P)
        ld = _lengths("L_D (output length)", L_D)
        if lp.shape != ld.shape:
            raise FieldError("L_D", f"{ld.size} values", f"as many values as L_P ({lp.size})")
        if lp.size == 0:
            raise FieldError(f"{name}: pmf", "empty", "at least one (L_P, L_D) pair")
        w = np.ones(lp.size) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != lp.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise FieldError(f"{name}: probabilities", "invalid",
                             "finite non-negative weights, one per pair, with a positive sum")
        keys = lp.astype(np.int64) * (int(ld.max()) + 1) + ld
        uniq, inv = np.unique(keys, return_inverse=True)
        prob = np.bincount(inv, weights=w)
        keep = prob > 0
        base = int(ld.max()) + 1
        return cls(name, (uniq // base)[keep], (uniq % base)[keep], prob[keep] / prob[keep].sum(),
                   tuple(notes))

    # --- summaries ------------------------------------------------------------------------

    @property
    def l_P_max(self) -> int:
        """l^{P,max} of Assumption 3."""
        return int(self.L_P.max())

    @property
    def l_D_max(self) -> int:
        """l^{D,max} of Assumption 3."""
        return int(self.L_D.max())

    def expect(self, values) -> float:
        """E[f(L^P, L^D)] for ``values = f(L_P, L_D)`` evaluated on the support.

        Summed by numpy's pairwise reduction, not a BLAS dot product: a multithreaded BLAS splits
        a long dot product by its thread count, so its last bit (and every rate and seed derived
        from lambda*) would depend on the machine's cores.
        """
        return float(np.sum(self.p * np.asarray(values, dtype=float)))

    def mean(self) -> tuple[float, float]:
        """(E[L^P], E[L^D])."""
        return self.expect(self.L_P), self.expect(self.L_D)

    def quantile(self, which: str, q: float) -> float:
        """The q-quantile of the marginal of ``which`` (``"prompt"`` or ``"decode"``)."""
        x = self.L_P if which == "prompt" else self.L_D
        order = np.argsort(x, kind="stable")
        cdf = np.cumsum(self.p[order])
        return float(x[order][min(np.searchsorted(cdf, q - 1e-12), x.size - 1)])

    def std(self, which: str) -> float:
        """Standard deviation of the marginal of ``which``."""
        x = (self.L_P if which == "prompt" else self.L_D).astype(float)
        m = self.expect(x)
        return math.sqrt(max(self.expect((x - m) ** 2), 0.0))

    def assumption3(self, t_lcm: int) -> float:
        """Probability that L^P is a multiple of ``t_lcm`` (Assumption 3 asks for 1)."""
        return 1.0 - float(self.p[self.L_P % t_lcm != 0].sum())

    # --- transformations ------------------------------------------------------------------

    def padded(self, t_lcm: int) -> Workload:
        """Prompts rounded up to multiples of ``t_lcm``, so Assumption 3 holds exactly."""
        if isinstance(t_lcm, bool) or int(t_lcm) != t_lcm or t_lcm < 1:
            raise FieldError("t_lcm", t_lcm, "an integer >= 1")
        lp = -(-self.L_P // t_lcm) * t_lcm
        return Workload.from_pairs(f"{self.name}+pad{t_lcm}", lp, self.L_D, self.p,
                                   (*self.notes, f"prompts padded up to multiples of {t_lcm}"))

    def truncated(self, total_cap: int) -> Workload:
        """The law conditioned on L^P + L^D <= ``total_cap`` (renormalized)."""
        keep = self.L_P + self.L_D <= total_cap
        if not keep.any():
            raise FieldError("total_cap", total_cap, f"a cap >= the smallest total length "
                                                     f"{int((self.L_P + self.L_D).min())}")
        lost = float(self.p[~keep].sum())
        return Workload.from_pairs(self.name, self.L_P[keep], self.L_D[keep], self.p[keep],
                                   (*self.notes, f"conditioned on L^P + L^D <= {total_cap} "
                                                 f"(removed mass {lost:.4g})"))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` i.i.d. pairs drawn with ``rng`` (a numpy Generator)."""
        if not isinstance(rng, np.random.Generator):
            raise FieldError("rng", rng, "a numpy.random.Generator")
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise FieldError("n", n, "an integer >= 0")
        idx = _search_right(np.cumsum(self.p), rng.random(int(n)) * (1 - 1e-15))
        idx = np.minimum(idx, self.p.size - 1)
        return self.L_P[idx], self.L_D[idx]

    def describe(self) -> str:
        m_p, m_d = self.mean()
        return (f"{self.name}: {self.p.size} support pairs, E[L^P]={m_p:.1f}, E[L^D]={m_d:.1f}, "
                f"l^P,max={self.l_P_max}, l^D,max={self.l_D_max}")


GUIDE = 4096  # buckets of [0, 1) in _search_right's guide table (a power of two: exact bounds)


def _search_right(cdf: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(cdf, x, side="right")`` for a non-decreasing ``cdf`` and ``0 <= x < 1``,
    the same indices about four times faster: a guide table of the answers at the bucket edges
    b / GUIDE (exact: GUIDE is a power of two) brackets each answer, and a binary search inside
    the bracket finishes it.

    References
    ----------
    Chen, Asau (1974), On generating random variates from an empirical distribution, AIIE
    Transactions 6(2), 163-166 (the guide table).
    """
    guide = np.searchsorted(cdf, np.arange(GUIDE + 1) / GUIDE, side="right")
    return _compiled_search()(cdf, guide, np.asarray(x, dtype=np.float64))


@cache
def _compiled_search():
    """:func:`_bracketed_search` compiled by numba (cached on disk), on first use: importing numba
    takes about a second, which a command that never samples a workload does not pay."""
    from numba import njit

    return njit(cache=True)(_bracketed_search)


def _bracketed_search(cdf, guide, x):
    out = np.empty(x.size, dtype=np.int64)
    for k in range(x.size):
        v = x[k]
        b = int(v * GUIDE)  # cdf <= b / GUIDE <= v counts below the answer, (b + 1) / GUIDE above
        lo = guide[b]
        hi = guide[b + 1]
        while lo < hi:  # the first index with cdf > v
            mid = (lo + hi) >> 1
            if cdf[mid] <= v:
                lo = mid + 1
            else:
                hi = mid
        out[k] = lo
    return out


# Longest prompt or output accepted, in tokens: 2^20, longer than the context window of every model
# preset; a longer length is a unit or data error, rejected before the cost tables and simulator
# arrays it would size are allocated.
MAX_TOKENS = 1 << 20


def _lengths(name: str, x) -> np.ndarray:
    """Token counts as int64, checked: integers in [1, MAX_TOKENS]."""
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise FieldError(name, x, "integer token counts")
        if arr.size and arr.max() > MAX_TOKENS:  # before the cast: 1e30 does not fit an int64
            raise FieldError(name, float(arr.max()), f"lengths <= {MAX_TOKENS:,} tokens (2^20: longer "
                                                     "than any model preset's context window)")
    elif arr.dtype.kind not in "iu" and arr.size:
        raise FieldError(name, x, "integer token counts")
    arr = arr.astype(np.int64).ravel()
    if arr.size and arr.min() < 1:
        raise FieldError(name, int(arr.min()), "lengths >= 1")
    if arr.size and arr.max() > MAX_TOKENS:
        raise FieldError(name, int(arr.max()), f"lengths <= {MAX_TOKENS:,} tokens (2^20: longer than "
                                               "any model preset's context window)")
    return arr


# --- presets ------------------------------------------------------------------------------


def deterministic(l_P: int, l_D: int) -> Workload:
    """All requests have prompt length ``l_P`` and output length ``l_D``."""
    return Workload.from_pairs(f"deterministic({l_P},{l_D})", [l_P], [l_D])


def uniform(p_lo: int, p_hi: int, d_lo: int, d_hi: int) -> Workload:
    """Independent uniform integers L^P on [p_lo, p_hi] and L^D on [d_lo, d_hi]."""
    for f, lo, hi in (("prompt", p_lo, p_hi), ("decode", d_lo, d_hi)):
        if lo < 1 or hi < lo:
            raise FieldError(f"uniform {f} range", (lo, hi), "1 <= lo <= hi")
    if (p_hi - p_lo + 1) * (d_hi - d_lo + 1) > 5_000_000:
        raise FieldError("uniform ranges", (p_lo, p_hi, d_lo, d_hi),
                         "at most 5,000,000 support pairs")
    lp, ld = np.meshgrid(np.arange(p_lo, p_hi + 1), np.arange(d_lo, d_hi + 1), indexing="ij")
    return Workload.from_pairs(f"uniform({p_lo}-{p_hi},{d_lo}-{d_hi})", lp.ravel(), ld.ravel())


def table1_marginal(which: str, atoms: int = 200, cap: int = TOTAL_CAP
                    ) -> tuple[np.ndarray, np.ndarray, str]:
    """(values, probabilities, note) of Table 1's ``"prompt"`` or ``"decode"`` marginal.

    A lognormal truncated to [1, ``cap``] whose median and P90 equal Table 1's exactly, discretized
    into ``atoms`` equal-probability bins, each at its median rounded to an integer.
    """
    from theory.truncated_lognormal import discretize, fit_to_quantiles  # scipy: only Table 1 needs it

    row = TABLE1[which]
    mu, sigma = fit_to_quantiles(row["median"], row["p90"], cap)
    values, probs = discretize(mu, sigma, cap, atoms)
    note = (f"{which}: lognormal(mu={mu:.4f}, sigma={sigma:.4f}) truncated to [1, {cap}] with "
            f"Table 1's median {row['median']} and P90 {row['p90']}, {atoms} equal-mass atoms")
    return values, probs, note


def table1(atoms: int = 200, total_cap: int = TOTAL_CAP) -> Workload:
    """Independent lognormal L^P and L^D fitted to Table 1, discretized, with L^P + L^D <= 8192.

    Each marginal comes from :func:`table1_marginal`; the joint law is then conditioned on
    ``L^P + L^D <= total_cap`` (Section 7's cap), which moves the quantiles slightly. Table 1's
    standard deviations are not fitted: the decode column's (101) is incompatible with its own
    median and P90 (see ``paper_checks``); the fitted law reports the deviations it has.
    """
    vp, pp, note_p = table1_marginal("prompt", atoms, total_cap)
    vd, pd, note_d = table1_marginal("decode", atoms, total_cap)
    lp, ld = np.meshgrid(vp, vd, indexing="ij")
    law = Workload.from_pairs("table1", lp.ravel(), ld.ravel(), np.outer(pp, pd).ravel(),
                              (note_p, note_d))
    return law.truncated(total_cap)


def _read_trace_csv(path, text: str | None = None) -> dict[str, np.ndarray]:
    """Columns of a length trace: prompt_len, output_len (required); arrival_time, class,
    prefix_parent and shared_prefix_tokens (:func:`theory.trace_prefix.prefix_columns`)."""
    try:
        if text is None:
            with open(path, newline="", encoding="utf-8-sig") as fh:  # with or without a BOM
                table = list(csv.reader(fh))
        else:
            table = list(csv.reader(text.removeprefix("\ufeff").splitlines()))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except OSError as exc:  # a directory, no permission
        raise ConfigFileError(f"{path}: cannot read it as a CSV file ({exc.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"{path}: malformed CSV: {exc}") from None
    rows = _records(path, table)
    header = set(rows[0])
    aliases = {"prompt_len": ("prompt_len", "num_prefill_tokens"),
               "output_len": ("output_len", "num_decode_tokens")}
    cols: dict[str, np.ndarray] = {}
    for canonical, names in aliases.items():
        name = next((n for n in names if n in header), None)
        if name is None:
            raise ConfigFileError(f"{path}: missing column {canonical!r} "
                                  f"(found columns: {', '.join(sorted(h for h in header if h))})")
        cols[canonical] = _column(path, rows, name, int)
    if "arrival_time" in header:
        t = _column(path, rows, "arrival_time", float)
        if np.any(~np.isfinite(t)) or np.any(t < 0):
            raise ConfigFileError(f"{path}: column 'arrival_time' must be finite and >= 0")
        if np.any(np.diff(t) <= 0):
            k = int(np.argmax(np.diff(t) <= 0))
            raise ConfigFileError(f"{path}: column 'arrival_time' must be strictly increasing; "
                                  f"row {k + 3} ({t[k + 1]}) does not exceed row {k + 2} ({t[k]})")
        cols["arrival_time"] = t
    if "class" in header:
        cols["class"] = np.array([r["class"] for r in rows])
    if "prefix_parent" in header or "shared_prefix_tokens" in header:
        cols.update(prefix_columns(path, rows, header, cols["prompt_len"]))
    return cols


def _records(path, table: list[list[str]]) -> list[dict[str, str]]:
    """The data rows of a CSV read as lists of cells, as dicts by column name. A header naming a
    column twice, or a row with more or fewer cells than the header, is an error naming the file,
    the column or row (never a silent choice of one copy, or a dropped cell)."""
    header = table[0] if table else []
    rows = [cells for cells in table[1:] if cells]  # blank lines are no rows
    if not rows:
        raise ConfigFileError(f"{path}: no data rows")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ConfigFileError(f"{path}: column {twice[0]!r} appears more than once in the header")
    for k, cells in enumerate(table[1:]):
        if cells and len(cells) != len(header):
            raise ConfigFileError(f"{path}: row {k + 2} has {len(cells)} cells, the header "
                                  f"{len(header)} ({', '.join(header)})")
    return [dict(zip(header, cells, strict=True)) for cells in rows]


def _column(path, rows, name, kind) -> np.ndarray:
    out = []
    for k, row in enumerate(rows):
        raw = row.get(name)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ConfigFileError(f"{path}: column {name!r}, row {k + 2}: {raw!r} is not a number"
                                  ) from None
        if kind is int and not value.is_integer():
            raise ConfigFileError(f"{path}: column {name!r}, row {k + 2}: {raw!r} is not an integer")
        out.append(value)
    # token counts stay floats when an int64 cannot hold them: _lengths rejects them by value
    fits = kind is int and all(abs(v) < 2.0**62 for v in out)
    return np.asarray(out, dtype=np.int64 if fits else float)


@dataclass(frozen=True, eq=False)
class Trace:
    """A request trace: lengths, and optionally arrival times, class labels and the prefix
    relation (``prefix``: each request's prefix parent, an earlier row or -1, and the prompt
    tokens it shares with it; prefix caching reuses their KV blocks)."""

    L_P: np.ndarray
    L_D: np.ndarray
    arrival_time: np.ndarray | None = None
    request_class: np.ndarray | None = None
    prefix: tuple[np.ndarray, np.ndarray] | None = None

    def workload(self, name: str) -> Workload:
        """The empirical joint law of the trace's lengths."""
        return Workload.from_pairs(name, self.L_P, self.L_D,
                                   notes=(f"empirical law of {self.L_P.size} requests",))


# request traces shipped with the package, by name: the file under theory/data/workloads/
# (source, license and transformation in its README)
PACKAGED_TRACES = {"azure-code-2023": "azure_code_2023.csv", "azure-conv-2023": "azure_conv_2023.csv"}


def read_trace(path: str | Path) -> Trace:
    """Read a CSV trace (columns prompt_len, output_len; optional arrival_time, class, and the
    prefix relation prefix_parent with shared_prefix_tokens, :mod:`theory.trace_prefix`).

    ``path`` may also name a packaged trace (:data:`PACKAGED_TRACES`): ``azure-code-2023`` and
    ``azure-conv-2023``, the one-hour Azure LLM inference traces of 2023 (arrival times and
    lengths; Patel et al., "Splitwise", ISCA 2024; Azure/AzurePublicDataset, CC-BY-4.0), unless a
    file of that name exists.
    """
    name = str(path)
    if name in PACKAGED_TRACES and not Path(name).exists():
        res = resources.files("theory").joinpath("data", "workloads", PACKAGED_TRACES[name])
        cols = _read_trace_csv(name, res.read_text(encoding="utf-8"))
    else:
        cols = _read_trace_csv(path)
    lp = _lengths(f"{path}: prompt_len", cols["prompt_len"])
    ld = _lengths(f"{path}: output_len", cols["output_len"])
    return Trace(lp, ld, cols.get("arrival_time"), cols.get("class"),
                 (cols["prefix_parent"], cols["shared_prefix_tokens"]) if "prefix_parent" in cols else None)


@cache
def sharegpt4_trace() -> Trace:
    """The packaged openchat_sharegpt4 length trace (30,731 requests; Section 7)."""
    res = resources.files("theory").joinpath("data/workloads/sharegpt4_lengths.csv")
    cols = _read_trace_csv("sharegpt4_lengths.csv", res.read_text(encoding="utf-8"))
    return Trace(_lengths("prompt_len", cols["prompt_len"]),
                 _lengths("output_len", cols["output_len"]))


def sharegpt4() -> Workload:
    """The empirical law of the packaged ``openchat_sharegpt4`` trace (the paper's dataset)."""
    return replace(sharegpt4_trace().workload("sharegpt4"),
                   notes=("empirical law of the 30,731 openchat_sharegpt4 requests "
                          "(SLAI repository, Apache-2.0); totals <= 8149 tokens",))


_PRESETS = {"table1": table1, "sharegpt4": sharegpt4}


def mixture(parts, name: str | None = None) -> Workload:
    """The law of a request of class k with probability ``w_k``: ``sum_k w_k p_k(l^P, l^D)``.

    Parameters
    ----------
    parts : sequence of (weight, Workload)
        Non-negative weights (normalized here) with a positive sum.

    Any expectation of a per-request quantity is linear in the law, so T_bar^R of the mixture is
    ``sum_k w_k T_bar^R_k`` and Theorem 1's condition ``lambda T_bar^R > r`` for the mixture with
    ``lambda_k = w_k lambda`` reads ``sum_k lambda_k T_bar^R_k > r``: a hyperplane in rate space.
    """
    parts = [(float(wk), law) for wk, law in parts]
    total = sum(wk for wk, _ in parts)
    if not parts or any(not math.isfinite(wk) or wk < 0 for wk, _ in parts) or total <= 0:
        raise FieldError("mixture weights", [wk for wk, _ in parts],
                         "non-negative numbers with a positive sum")
    kept = [(wk / total, law) for wk, law in parts if wk > 0]
    label = name or "mix(" + ", ".join(f"{wk:.4g} {law.name}" for wk, law in kept) + ")"
    return Workload.from_pairs(
        label, np.concatenate([law.L_P for _, law in kept]), np.concatenate([law.L_D for _, law in kept]),
        np.concatenate([wk * law.p for wk, law in kept]),
        (f"mixture of {len(kept)} classes",))


def mixture_spec(parts) -> str:
    """The :func:`get_workload` spec of a mixture: ``mix:0.25*table1+0.75*uniform:2048-6144,16-128``."""
    return "mix:" + "+".join(f"{float(wk):.12g}*{spec}" for wk, spec in parts)


def parse_mixture(spec: str) -> list[tuple[float, str]]:
    """(weight, class spec) pairs of a ``mix:W1*SPEC1+W2*SPEC2`` spec."""
    out = []
    for item in spec.partition(":")[2].split("+"):
        weight, star, part = item.partition("*")
        try:
            value = float(weight)
        except ValueError:
            value = None
        if not star or value is None or not part.strip():
            raise FieldError("workload", spec, "'mix:W1*SPEC1+W2*SPEC2', e.g. "
                                               "'mix:0.3*table1+0.7*deterministic:4096,64'")
        out.append((value, part.strip()))
    total = sum(w for w, _ in out)
    if not abs(total - 1) <= 1e-9:
        raise FieldError("workload: mixture weights", [w for w, _ in out],
                         f"weights summing to 1 (within 1e-9; they sum to {total:.12g}) in {spec!r}")
    return out


def workload_names() -> list[str]:
    """Names accepted by :func:`get_workload` (besides ``deterministic:``, ``uniform:``, CSV paths)."""
    return [*_PRESETS, *PACKAGED_TRACES, "deterministic:LP,LD", "uniform:P_LO-P_HI,D_LO-D_HI",
            "mix:W1*SPEC1+W2*SPEC2", "<path>.csv"]


@cache
def _preset(name: str) -> Workload:
    return _PRESETS[name]()


def get_workload(spec: str) -> Workload:
    """A workload by name: ``table1``, ``sharegpt4``, the lengths of a packaged trace
    (``azure-code-2023``, ``azure-conv-2023``), ``deterministic:2048,256``,
    ``uniform:256-4096,1-512``, a mixture ``mix:0.3*table1+0.7*deterministic:4096,64``, or the
    path of a CSV trace."""
    if not isinstance(spec, str) or not spec.strip():
        raise FieldError("workload", spec, "a workload name such as 'table1'")
    spec = spec.strip()
    if spec in _PRESETS:
        return _preset(spec)
    if spec in PACKAGED_TRACES:
        return read_trace(spec).workload(spec)
    kind, _, args = spec.partition(":")
    if kind == "mix":
        return mixture([(wk, get_workload(part)) for wk, part in parse_mixture(spec)])
    try:
        if kind == "deterministic":
            lp, ld = (int(x) for x in args.split(","))
            return deterministic(lp, ld)
        if kind == "uniform":
            p, d = args.split(",")
            p_lo, p_hi = (int(x) for x in p.split("-"))
            d_lo, d_hi = (int(x) for x in d.split("-"))
            return uniform(p_lo, p_hi, d_lo, d_hi)
    except ValueError as exc:
        if isinstance(exc, LlmqError):
            raise
        raise FieldError("workload", spec,
                         "'deterministic:LP,LD' or 'uniform:P_LO-P_HI,D_LO-D_HI'") from None
    if spec.lower().endswith(".csv"):
        return read_trace(spec).workload(Path(spec).stem)
    raise UnknownNameError("workload", spec, workload_names())


# --- the model's context window -----------------------------------------------------------------


def check_context(w: Workload, context_length: int | None, model: str, field: str = "workload") -> None:
    """Raise a :class:`theory.errors.FieldError` naming ``field`` unless every request of ``w`` fits
    the model's context window: ``L^P + L^D <= context_length`` on the whole support.

    A request's prompt and its ``L^D`` decode iterations occupy positions ``1 .. L^P + L^D`` of the
    context, so a longer request cannot be served (servers reject it: vLLM refuses prompts longer
    than ``max_model_len`` and stops generation at it). Nothing is capped here: a law that needs a
    cap states it (``truncated``, ``--total-cap``). ``context_length=None`` (no public source for
    the model) checks nothing beyond ``MAX_TOKENS``. The message names the longest request, its
    probability, and the mass of the law beyond the limit.
    """
    if context_length is None:
        return
    total = w.L_P + w.L_D
    over = total > context_length
    if over.any():
        k = int(np.argmax(total))
        raise FieldError(field, f"{w.name}: a request of L^P {int(w.L_P[k])} + L^D {int(w.L_D[k])} = "
                                f"{int(total[k])} tokens ({float(w.p[over].sum()):.3g} of the law is "
                                "longer than the context)",
                         f"L^P + L^D <= {context_length} tokens, the context length of {model}")


def check_trace_context(path: str | Path, context_length: int | None, model: str, field: str,
                        total_cap: int | None = None) -> None:
    """Like :func:`check_context` for the rows of a CSV trace: the first row whose
    ``prompt_len + output_len`` exceeds the model's context is named (rows above ``total_cap``
    are left out, as the capped law leaves them out)."""
    if context_length is None:
        return
    tr = read_trace(path)
    total = tr.L_P + tr.L_D
    bad = (total > context_length) & (total <= (total_cap if total_cap is not None else total.max()))
    if bad.any():
        k = int(np.argmax(bad))
        raise FieldError(f"{field} {path}, row {k + 2}",
                         f"prompt_len {int(tr.L_P[k])} + output_len {int(tr.L_D[k])} = {int(total[k])}",
                         f"prompt_len + output_len <= {context_length} tokens, the context length "
                         f"of {model}")


def csv_paths(spec: str) -> list[str]:
    """The CSV traces a :func:`get_workload` spec reads (itself, or the parts of a mixture)."""
    spec = spec.strip()
    if spec.startswith("mix:"):
        return [p for _, part in parse_mixture(spec) for p in csv_paths(part)]
    return [spec] if spec.lower().endswith(".csv") else []
