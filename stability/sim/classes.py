"""Request classes: users whose requests carry different TBT SLOs (Section 6, Section 7).

A class is ``(name, probability, TBT SLO in seconds)``. Each request belongs to class k with
probability p_k, independently of everything else (Section 7: "Each incoming request is randomly
marked as associated with a paying or free-tier user with some probability"; the authors' request
generator draws one uniform number per request from its own seeded generator). The paper's two
classes are *paying* users (TBT SLO 0.1 s) and *free-tier* users (0.5 s); :func:`paying_free`
builds them. Classes are listed in priority order: SLAI's paying-first prefill order
(Appendix F.2) serves class 0 first.

SLO attainment, per class (detail mode, where every TBT gap is recorded):

* *gap attainment*: the fraction of the class's TBT gaps (time between consecutive tokens of a
  request, a recompute prefill's token included) that are <= its SLO;
* *P99 met*: whether the class's P99 TBT is within its SLO, decided exactly from the count of
  gaps above it: with n gaps, the nearest-rank P99 (the ceil(0.99 n)-th smallest gap) is <= SLO
  iff at most n - ceil(0.99 n) gaps exceed the SLO;
* *request attainment*: the fraction of the class's finished requests whose own P99 TBT (nearest
  rank over its L^D gaps) is within the SLO, by the same rule per request;
* *request max attainment*: the fraction of finished requests none of whose gaps exceeds it.

References
----------
Bari, Hegde, de Veciana (2025), Section 6 ("Request classes"), Section 7 ("Workload");
agrimUT/SLAI ``synthetic_request_generator.py`` (``hetero_tbt_prob``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.errors import FieldError

PAYING_SLO = 0.1  # Section 7: TBT SLO of paying users, seconds
FREE_SLO = 0.5  # Section 7: TBT SLO of free-tier users, seconds


@dataclass(frozen=True)
class RequestClass:
    """One class of requests: its name, the probability a request belongs to it, its TBT SLO."""

    name: str
    prob: float
    tbt_slo: float


def paying_free(paying: float, paying_slo: float = PAYING_SLO,
                free_slo: float = FREE_SLO) -> tuple[tuple[str, float, float], ...]:
    """The paper's two classes as a :class:`stability.sim.simulate.Scenario` ``classes`` value: a
    request is paying with probability ``paying`` (TBT SLO 0.1 s), else free-tier (0.5 s)."""
    return (("paying", float(paying), float(paying_slo)), ("free", 1.0 - float(paying), float(free_slo)))


def parse_classes(spec) -> tuple[RequestClass, ...]:
    """Validate a class mix: a sequence of ``(name, probability, TBT SLO)`` triples, or a string
    ``"paying:0.05:0.1,free:0.95:0.5"``. Probabilities must be >= 0 and sum to 1 (within 1e-9);
    SLOs must be positive (``inf`` for none). An empty mix means one class without an SLO."""
    if isinstance(spec, str):
        items = [part.split(":") for part in spec.split(",") if part.strip()]
    else:
        items = list(spec or ())
    out = []
    for item in items:
        if len(item) != 3:
            raise FieldError("classes", item, "(name, probability, TBT SLO in seconds)")
        name, prob, slo = item
        try:
            prob, slo = float(prob), float(slo)
        except (TypeError, ValueError):
            raise FieldError(f"class {name!r}", item, "a numeric probability and TBT SLO") from None
        if not 0 <= prob <= 1:
            raise FieldError(f"class {name!r}: probability", prob, "a number in [0, 1]")
        if not slo > 0:
            raise FieldError(f"class {name!r}: TBT SLO", slo, "a positive number of seconds")
        out.append(RequestClass(str(name).strip(), prob, slo))
    if not out:
        return (RequestClass("all", 1.0, math.inf),)
    if len({c.name for c in out}) != len(out):
        raise FieldError("classes", [c.name for c in out], "distinct class names")
    total = sum(c.prob for c in out)
    if abs(total - 1.0) > 1e-9:
        raise FieldError("classes: probabilities", total, "a sum of 1")
    if len(out) > 32:
        raise FieldError("classes", len(out), "at most 32 classes")
    return tuple(out)


def draw_classes(classes: tuple[RequestClass, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """Class index of each of ``n`` requests: one uniform draw per request against the cumulative
    probabilities (class k iff its uniform falls in [P_{k-1}, P_k))."""
    cum = np.cumsum([c.prob for c in classes])
    u = rng.random(int(n))
    return np.minimum(np.searchsorted(cum, u, side="right"), len(classes) - 1).astype(np.int64)


def p99_met(n_gaps, n_above) -> np.ndarray:
    """Whether the nearest-rank P99 of ``n_gaps`` gaps, ``n_above`` of which exceed the SLO, is
    within the SLO: at most n - ceil(0.99 n) gaps may exceed it (integer arithmetic, exact)."""
    n = np.asarray(n_gaps, dtype=np.int64)
    allowed = n - (99 * n + 99) // 100  # n - ceil(0.99 n)
    return np.asarray(n_above, dtype=np.int64) <= allowed
