"""Arrivals in stages: piecewise-constant request rates, as load generators drive a server.

A *stage* is ``(duration in seconds, rate in requests per second, kind)``; the stages run one
after the other from time 0. Within a stage of kind

* ``poisson``: arrivals form a Poisson process of the stage's rate (exponential gaps, drawn afresh
  at the stage's start: the process is memoryless, so this is the stage's Poisson process
  restricted to its window);
* ``deterministic``: arrivals are evenly spaced, one every ``1 / rate`` seconds from the stage's
  start, those strictly inside its window.

A rate of 0 is an idle stage. This is how benchmark clients define a load schedule: vLLM's
``benchmarks/benchmark_serving.py`` (``--request-rate``, Poisson or, with ``inf``, all at once;
``--burstiness`` 1 is Poisson), and the staged ("ramp") load of load generators such as AIPerf
and Locust, each stage a constant rate for a set time.

The run's requests are the stages' arrivals in time order (the scenario's ``n_requests`` takes the
first ones, as it does a trace's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.errors import FieldError

KINDS = ("poisson", "deterministic")


@dataclass(frozen=True)
class Stage:
    """One stage of a load schedule (module docstring).

    Attributes
    ----------
    duration : float
        Seconds, positive and finite.
    rate : float
        Requests per second, at least 0 (0: an idle stage).
    kind : str
        ``"poisson"`` or ``"deterministic"``.
    """

    duration: float
    rate: float
    kind: str = "poisson"


def parse_stages(spec, field: str = "stages") -> tuple[Stage, ...]:
    """Validate a load schedule: a sequence of ``(duration, rate[, kind])`` or a string
    ``"60:2,60:4:deterministic"`` (``DURATION:RATE[:KIND]`` per stage, comma-separated); errors
    name ``field``.

    Raises
    ------
    FieldError
        Naming the stage (its position, from 1) and the field, for a duration that is not a
        positive finite number, a rate below 0 or not finite, an unknown kind, a malformed stage,
        an empty schedule or one that makes no arrival.
    """
    if isinstance(spec, str):
        items = [tuple(part.strip().split(":")) for part in spec.split(",") if part.strip()]
    else:
        items = [tuple(item) for item in (spec or ())]
    if not items:
        raise FieldError(field, spec, "at least one stage DURATION:RATE[:KIND]")
    out = []
    for k, item in enumerate(items, start=1):
        if len(item) not in (2, 3):
            raise FieldError(f"{field}: stage {k}", ":".join(map(str, item)), "DURATION:RATE[:KIND]")
        try:
            duration, rate = float(item[0]), float(item[1])
        except (TypeError, ValueError):
            raise FieldError(f"{field}: stage {k}", ":".join(map(str, item)),
                             "a numeric duration (s) and rate (req/s)") from None
        if not (math.isfinite(duration) and duration > 0):
            raise FieldError(f"{field}: stage {k}: duration", item[0], "a positive finite number of seconds")
        if not (math.isfinite(rate) and rate >= 0):
            raise FieldError(f"{field}: stage {k}: rate", item[1], "a finite rate >= 0 requests per second")
        kind = str(item[2]).strip() if len(item) == 3 else "poisson"
        if kind not in KINDS:
            raise FieldError(f"{field}: stage {k}: kind", kind, f"one of {', '.join(KINDS)}")
        out.append(Stage(duration, rate, kind))
    if all(s.rate == 0 for s in out):
        raise FieldError(field, spec, "a stage with a positive rate (every stage is idle)")
    return tuple(out)


def stage_arrivals(stages: tuple[Stage, ...], rng: np.random.Generator) -> np.ndarray:
    """The arrival times (seconds from 0, increasing) of a load schedule.

    Parameters
    ----------
    stages : tuple of Stage
        From :func:`parse_stages`.
    rng : numpy.random.Generator
        Draws the Poisson stages' gaps, stage after stage.

    Returns
    -------
    numpy.ndarray
        float64 arrival times, strictly inside each stage's window ``[start, start + duration)``.
    """
    parts, start = [], 0.0
    for s in stages:
        end = start + s.duration
        if s.rate > 0 and s.kind == "deterministic":
            t = start + np.arange(math.ceil(s.duration * s.rate)) / s.rate
            parts.append(t[t < end])
        elif s.rate > 0:
            # enough gaps to pass the window's end with overwhelming probability, then more if not
            t, last = [], start
            while last < end:
                size = int(s.duration * s.rate + 10 * math.sqrt(s.duration * s.rate) + 16)
                chunk = last + np.cumsum(rng.exponential(1.0 / s.rate, size=size))
                t.append(chunk)
                last = float(chunk[-1])
            t = np.concatenate(t)
            parts.append(t[t < end])
        start = end
    return np.concatenate(parts) if parts else np.zeros(0)
