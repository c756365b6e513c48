"""The planner's latency SLOs: limits per metric and request class, parsed from text.

* **SLOs** (:func:`parse_slo`): ``ttft_p50``, ``ttft_p99``, ``tbt_p99`` limits in seconds, over
  all requests or one class (``tbt_p99@paying=0.1``), or ``stable`` alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from theory.errors import FieldError, UnknownNameError, require_positive

SLO_NAMES = ("ttft_p50", "ttft_p99", "tbt_p99")


@dataclass(frozen=True)
class Slo:
    """One latency limit: ``metric`` (one of ``SLO_NAMES``) of class ``cls`` (``"all"``: every
    request) at most ``limit`` seconds."""

    metric: str
    cls: str
    limit: float

    @property
    def key(self) -> str:
        return self.metric if self.cls == "all" else f"{self.metric}@{self.cls}"


@dataclass(frozen=True)
class SloSpec:
    """The SLOs a plan must meet; every plan must also be stable with no request rejected."""

    limits: tuple[Slo, ...] = ()

    @property
    def text(self) -> str:
        return ",".join(f"{s.key}={s.limit:g}" for s in self.limits) or "stable"

    @property
    def tail_metric(self) -> str | None:
        """The key of the SLO the Pareto front trades against cost: a P99 (TBT first), else the
        first limit."""
        for name in ("tbt_p99", "ttft_p99"):
            for s in self.limits:
                if s.metric == name:
                    return s.key
        return self.limits[0].key if self.limits else None


def parse_slo(text: str) -> SloSpec:
    """``"ttft_p50=0.5,tbt_p99=0.1"`` (or ``"tbt_p99@paying=0.1"``, or ``"stable"``) -> SloSpec.

    Raises
    ------
    UnknownNameError
        For a metric outside ``SLO_NAMES``.
    FieldError
        For a malformed item, a limit that is not a positive number, or one metric given twice.
    """
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise FieldError("slo", text, "NAME=SECONDS items (ttft_p50, ttft_p99, tbt_p99) or 'stable'")
    out: dict[str, Slo] = {}
    for item in items:
        if item == "stable":
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise FieldError("slo", item, "NAME=SECONDS, e.g. tbt_p99=0.1, or 'stable'")
        metric, _, cls = name.strip().partition("@")
        if metric not in SLO_NAMES:
            raise UnknownNameError("SLO", metric, SLO_NAMES)
        try:
            limit = float(value)
        except ValueError:
            raise FieldError(f"slo {name.strip()}", value, "a number of seconds > 0") from None
        require_positive(f"slo {name.strip()}", limit)
        s = Slo(metric, cls.strip() or "all", limit)
        if s.key in out and out[s.key].limit != limit:
            raise FieldError(f"slo {s.key}", (out[s.key].limit, limit), "one limit per metric and class")
        out[s.key] = s
    return SloSpec(tuple(out.values()))


def with_class_slos(slo: SloSpec, classes) -> SloSpec:
    """``slo`` with each class's TBT SLO as a ``tbt_p99@<class>`` limit (a finite one), so that a
    plan meets every class's own target.

    Raises
    ------
    FieldError
        If ``slo`` already limits ``tbt_p99@<class>`` to another value (contradictory limits).
    """
    limits = {s.key: s for s in slo.limits}
    for name, _, tbt in classes:
        key = f"tbt_p99@{name}"
        if not math.isfinite(float(tbt)):
            continue
        if key in limits and limits[key].limit != float(tbt):
            raise FieldError(f"slo {key}", limits[key].limit,
                             f"the class's own TBT SLO {float(tbt):g} s (--classes), or no {key} limit")
        limits.setdefault(key, Slo("tbt_p99", str(name), float(tbt)))
    return SloSpec(tuple(limits.values()))


__all__ = [
    "SLO_NAMES",
    "Slo",
    "SloSpec",
    "parse_slo",
    "with_class_slos",
]
