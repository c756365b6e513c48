"""The staircase of GeMM times over the token count: measured and predicted step heights, the
monotone envelope, and the verdict.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 (the ceilings make the staircase), Eq. 4.
"""

from __future__ import annotations

import numpy as np

from theory.profiles import VIDUR_GEMMS
from theory.validation.calibrate import staircase_jumps
from theory.validation.gemm import GemmRows
from theory.validation.results import Report
from theory.validation.timings import GemmTimings

STAIRCASE_AT = (64, 128, 256, 384, 768)
STEP_TOLERANCE = 0.10  # step heights: |predicted - measured| <= 10 percentage points
STEP_SCHEMES = ("shipped", "calibrated", "models")  # "calibrated": the token-split fit, all points


def staircase(report: Report, data: GemmRows, gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1,
              at=STAIRCASE_AT) -> list[dict]:
    """Relative step heights ``T(next tokens) / T(tokens) - 1`` after each count in ``at``,
    measured and under each scheme, per GeMM of ``model`` on ``gpu`` at ``tp`` and for the layer
    (``operation = "layer"``: the sum of the four GeMMs at each token count, the linear time a
    batch pays per layer, Eq. 4).

    Uses the predictions of :func:`theory.validation.validate.validate` (``report.series``); a scheme that
    did not predict a point gives ``None``. ``"<scheme>_within"`` says whether the predicted height is
    within :data:`STEP_TOLERANCE` (absolute, i.e. percentage points) of the measured one. ``"envelope"``
    is the step of the measured :func:`monotone_envelope` (for the layer: the sum of the four GeMMs'
    envelopes), the most a fastest-tile model can show, and ``"<scheme>_within_envelope"`` compares with
    it. Empty when the data have no such rows.

    References
    ----------
    Eq. 2 (the ceilings make the staircase); :func:`theory.validation.calibrate.staircase_jumps`.
    """
    series = {op: {**report.series[(gpu, model, tp, op)],
                   "envelope": monotone_envelope(report.series[(gpu, model, tp, op)]["measured"])}
              for op in VIDUR_GEMMS if (gpu, model, tp, op) in report.series}
    if len(series) == len(VIDUR_GEMMS):
        common = series[VIDUR_GEMMS[0]]["token_count"]
        for ser in series.values():
            common = np.intersect1d(common, ser["token_count"])
        layer = {"token_count": common}
        for k in ("measured", "envelope", *STEP_SCHEMES):
            layer[k] = sum(ser[k][np.isin(ser["token_count"], common)] for ser in series.values())
        series["layer"] = layer
    out = []
    for op, ser in series.items():
        n = ser["token_count"].size
        timings = GemmTimings(np.ones(n, dtype=np.int64), ser["token_count"], np.ones(n, dtype=np.int64),
                              np.ones(n, dtype=np.int64), ser["measured"])
        preds = {k: ser[k] for k in STEP_SCHEMES}
        for j in staircase_jumps(timings, {"envelope": ser["envelope"], **preds}, at):
            row = {"gpu": gpu, "model": model, "tp": tp, "operation": op, "after": j["at"], "next": j["next"],
                   "measured": j["measured"], "envelope": j["envelope"]}
            for k in preds:
                ok = bool(np.isfinite(j[k]))
                row[k] = j[k] if ok else None
                for ref, name in (("measured", f"{k}_within"), ("envelope", f"{k}_within_envelope")):
                    row[name] = bool(abs(j[k] - j[ref]) <= STEP_TOLERANCE) if ok else None
            out.append(row)
    return out


def monotone_envelope(seconds) -> np.ndarray:
    """``min_{m >= n} T(m)`` over a series sorted by token count: the least time measured for at
    least as many tokens.

    A model that runs every GeMM on its fastest tile is non-decreasing in the token count (each
    tile's Eq. 2 time, with waves and the memory floor, is; so is their minimum), so it can at
    best follow this envelope. Where the measured time lies above it, the library ran a kernel
    slower than one it runs for a larger problem (cuBLAS's heuristic, not a fastest-tile choice).
    """
    y = np.asarray(seconds, dtype=float)
    return np.minimum.accumulate(y[::-1])[::-1]


def staircase_verdict(steps: list[dict], scheme: str = "calibrated") -> dict:
    """How many step heights ``scheme`` reproduces within :data:`STEP_TOLERANCE`, for the layer
    and per GeMM, and whether every layer step is (the acceptance criterion); also how many
    layer steps it reproduces against the steps of the measured :func:`monotone_envelope`.

    The default scheme is the tile model calibrated on the training token counts, at every count
    (as shipped in real mode's tile model, ``a100-tile``): real mode's default prices these GeMMs
    by the measured law, which takes its steps from the measurements themselves."""
    def count(rows):
        judged = [r[f"{scheme}_within"] for r in rows if r[f"{scheme}_within"] is not None]
        return {"within": int(sum(judged)), "steps": len(judged)}

    layer = [r for r in steps if r["operation"] == "layer"]
    per_op = {op: count([r for r in steps if r["operation"] == op]) for op in VIDUR_GEMMS}
    envelope = [r[f"{scheme}_within_envelope"] for r in layer if r[f"{scheme}_within_envelope"] is not None]
    return {"scheme": scheme, "tolerance": STEP_TOLERANCE, "positions": list(STAIRCASE_AT),
            "layer": count(layer), "per_gemm": per_op,
            "layer_against_envelope": {"within": int(sum(envelope)), "steps": len(envelope)},
            "holds": bool(layer) and all(r[f"{scheme}_within"] for r in layer)}


def step_positions(tokens, seconds, threshold: float = 0.10) -> np.ndarray:
    """Token counts after which the time jumps by more than ``threshold`` to the next count.

    ``tokens`` sorted ascending; repeated counts are not expected (one row per count and group).
    """
    tokens, seconds = np.asarray(tokens), np.asarray(seconds, dtype=float)
    if tokens.size < 2:
        return tokens[:0]
    jump = seconds[1:] / seconds[:-1] - 1.0
    return tokens[:-1][jump > threshold]


__all__ = [
    "STAIRCASE_AT",
    "STEP_SCHEMES",
    "STEP_TOLERANCE",
    "monotone_envelope",
    "staircase",
    "staircase_verdict",
    "step_positions",
]
