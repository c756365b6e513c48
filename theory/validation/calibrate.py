"""Calibration: fit a GPU profile's rates to measured GeMM or batch timings (Eq. 2-7).

:func:`calibrate` dispatches GeMM timings to :func:`theory.validation.gemm_fit.fit_gemm` (Eq. 2
per tile, with the memory floor, waves and L2 traffic; its search is
:mod:`theory.validation.gemm_search`) and batch timings to
:func:`theory.validation.batch_fit.fit_batch` (Eq. 7, linear in its rates); both return a
:class:`theory.validation.calibration.Calibration`, written as a profile TOML by
:func:`theory.validation.calibration.write_profile`. :func:`staircase_jumps` measures the step
heights of GeMM times over the token count that Eq. 2's ceilings make.

Both fits minimise relative residuals ``predicted / measured - 1``: timings span orders of
magnitude, and absolute errors would ignore the small ones.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7 and Section 3.2.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from theory.errors import FieldError
from theory.hardware import GPU
from theory.models import Model
from theory.validation.batch_fit import fit_batch
from theory.validation.calibration import Calibration, FitOptions
from theory.validation.gemm_fit import fit_gemm
from theory.validation.timings import BatchTimings, GemmTimings


def calibrate(timings: GemmTimings | BatchTimings, base: GPU, model: Model, mode: str = "paper",
              options: FitOptions | None = None) -> Calibration:
    """Fit GeMM timings with :func:`theory.validation.gemm_fit.fit_gemm` or batch timings with
    :func:`theory.validation.batch_fit.fit_batch`.

    The GeMM fit models the memory floor, waves and the L2 traffic when ``options`` asks for them
    or the base profile switches them on; the batch fit is linear in Eq. 7's rates, so for it a
    base profile or model with cost terms beyond Eq. 2 (:mod:`theory.terms`) is refused rather than
    fitted as if the terms were off, and so are the other terms for either fit, and a tile subset
    or a GeMM term asked of a batch fit.
    """
    o = options or FitOptions()
    gemm = isinstance(timings, GemmTimings)
    on = [name for name, value in (("memory_floor", base.terms.memory_floor and not gemm),
                                   ("waves", base.terms.waves and not gemm),
                                   ("l2_bandwidth_gbs", base.terms.l2_bandwidth is not None and not gemm),
                                   ("tp", base.terms.tp > 1), ("linear_law", base.terms.linear_law),
                                   ("attention", not model.terms.attention),
                                   ("lm_head", model.terms.lm_head)) if value]
    if on:
        what = "GeMM" if gemm else "batch"
        raise FieldError("base", f"{base.key} / {model.key}",
                         f"a profile whose cost terms the {what} fit models (it has {', '.join(on)}; "
                         "GeMM timings fit memory_floor, waves and l2_bandwidth_gbs, batch timings none)")
    if gemm:
        return fit_gemm(timings, base, model, mode,
                        replace(o, floor=bool(o.floor) or base.terms.memory_floor,
                                waves=bool(o.waves) or base.terms.waves,
                                l2=bool(o.l2) or base.terms.l2_bandwidth is not None))
    for name, on in (("floor", o.floor), ("waves", o.waves), ("l2", o.l2)):
        if on:
            raise FieldError(name, on, "off with batch timings (the batch fit is linear in Eq. 7's rates)")
    if o.tiles:
        raise FieldError("tiles", o.tiles, "no tile subset with batch timings (only with GeMM timings)")
    return fit_batch(timings, base, model, mode, overhead=o.overhead, key=o.key)


def staircase_jumps(timings: GemmTimings, predictions: dict[str, np.ndarray], at) -> list[dict]:
    """Relative jumps ``T(next d_col) / T(d_col) - 1`` after each ``d_col`` in ``at``, measured and
    under each named prediction, per GeMM shape ``(d_row, d_red)``.

    "next" is the next larger measured ``d_col``; repeated measurements of a point are averaged.
    """
    out = []
    for d_row, d_red in sorted(set(zip(timings.d_row.tolist(), timings.d_red.tolist(), strict=True))):
        shape = (timings.d_row == d_row) & (timings.d_red == d_red)
        cols = np.unique(timings.d_col[shape])
        for a in at:
            if a not in cols or not np.any(cols > a):
                continue
            nxt = int(cols[cols > a][0])
            here, there = shape & (timings.d_col == a), shape & (timings.d_col == nxt)
            row = {"d_row": d_row, "d_red": d_red, "at": int(a), "next": nxt}
            for name, values in {"measured": timings.seconds, **predictions}.items():
                row[name] = float(values[there].mean() / values[here].mean() - 1)
            out.append(row)
    return out


__all__ = [
    "calibrate",
    "staircase_jumps",
]
