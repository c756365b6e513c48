"""All-reduce rows: the GPU profile's all-reduce law and its scores against measured collectives.

References
----------
:mod:`theory.terms` (the all-reduce law, nccl-tests ``doc/PERFORMANCE.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from theory.hardware import GPU, get_gpu
from theory.terms import allreduce_time
from theory.validation.errors import abs_rel_error
from theory.validation.results import SCHEMES, Report, Settings, not_predicted, stats_row

NO_ALLREDUCE = "no all-reduce law in the GPU profile (allreduce_bandwidth_gbs; theory.terms)"


def allreduce_law(gpu: GPU) -> Callable[[np.ndarray, int], np.ndarray] | None:
    """``seconds(bytes, tp)`` of one all-reduce on ``gpu`` (:func:`theory.terms.allreduce_time`
    with the profile's latency and bus bandwidth), or ``None`` when the profile states no law."""
    if gpu.terms.allreduce_bandwidth is None:
        return None
    return lambda n_bytes, tp: allreduce_time(replace(gpu.terms, tp=int(tp)), n_bytes)


def score_allreduce(report: Report, profile: str, rows: np.ndarray, s: Settings) -> None:
    """Score the ``all_reduce`` rows of ``profile`` against the GPU profile's law
    (:func:`allreduce_law`), one group per GPU x setup x TP; without a law they are not predicted."""
    rows = rows[rows["operation"] == "all_reduce"]
    for g in sorted(set(rows["gpu"].tolist())):
        part = rows[rows["gpu"] == g]
        law = allreduce_law(get_gpu(g, s.gpu_file, calibrated=True))
        if law is None:
            not_predicted(report, profile, part, NO_ALLREDUCE)
            continue
        for setup, tp in sorted(set(zip(part["setup"].tolist(), part["tp"].tolist(), strict=True))):
            sel = part[(part["setup"] == setup) & (part["tp"] == tp)]
            e = abs_rel_error(sel["seconds"], law(sel["bytes"].astype(float), tp))
            nan = np.full(e.size, np.nan)
            report.groups.append({
                "profile": profile, "gpu": g, "model": "", "tp": tp, "operation": "all_reduce",
                "n": int(sel.size), **stats_row({**dict.fromkeys(SCHEMES, nan), "shipped": e},
                                                 np.ones(e.size, dtype=bool)),
                "note": f"setup {setup}: the GPU profile's all-reduce law (theory.terms), every message "
                        "size (the law is fitted on the DGX node, >= 1 MiB: theory.validation.presets_fit)"})


__all__ = [
    "NO_ALLREDUCE",
    "allreduce_law",
    "score_allreduce",
]
