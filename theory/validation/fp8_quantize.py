"""AIConfigurator's H200 timings of the dynamic FP8 quantization alone, and what they say about the
FP8 GeMMs of ``aiconfigurator_h200_fp8_gemm.csv.gz`` (:mod:`theory.validation.fp8_gemm`).

AIConfigurator times TensorRT-LLM's per-tensor FP8 quantization of a bf16 input ``x`` of
``m x k`` on its own (``collector/trtllm/collect_computescale.py``, ``run_computescale``): the
dynamic op ``quantize_e4m3_per_tensor(x)`` (the scale from the input's absolute maximum, then
the quantization) and the static op ``static_quantize_e4m3_per_tensor(x, scale)`` (the
quantization alone), each as five calls in one CUDA graph; ``scale_matrix`` is the static time,
``compute_scale`` the dynamic less the static. Their sum is the time the FP8 ``Linear`` of the GeMM
table spends before its GeMM. The shipped subset
(``theory/data/profiles/fp8/aiconfigurator_h200_fp8_quantize.csv.gz``; provenance in
``theory/data/profiles/README.md``) keeps the reduction widths ``k`` of that GeMM table.

Two uses, nothing fitted: :func:`score_quantize` compares
:func:`theory.precision.activation_quant_s` (the passes' bytes at the achievable bandwidth) with
the measured sum, and :func:`gemm_less_quantize` scores the FP8 GeMM table's prediction with the
measured quantization added (a decomposition of the measured time, not a model), which says what
the tile model's FP8 GeMM itself leaves.
``python -m theory.validation.fp8_quantize COMPUTESCALE SCALEMATRIX OUT`` rebuilds the shipped
file from the two Parquet tables (needs ``pyarrow``).

Sources
-------
ai-dynamo/aiconfigurator at commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce,
``aic-core/src/aiconfigurator_core/systems/data/h200_sxm/quantize/trtllm/1.3.0rc20/``
``computescale_perf.parquet`` and ``scale_matrix_perf.parquet``; the collector
``collector/trtllm/collect_computescale.py``.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from theory.errors import FieldError
from theory.precision import activation_quant_s
from theory.validation.fp8_gemm import FP8_DIR, FP8_TABLES, GPU, Fp8Score, score_fp8, tile_cost_models
from theory.validation.profiles_aiconfigurator import DEVICES

QUANT_TABLE = FP8_DIR / "aiconfigurator_h200_fp8_quantize.csv.gz"
COLUMNS = ("gpu", "device", "tokens", "d_red", "compute_scale_s", "scale_matrix_s")
SOURCE_COLUMNS = ("device", "m", "k", "quant_dtype", "latency")


def convert_rows(compute_scale: dict, scale_matrix: dict, widths: set[int]) -> list[dict]:
    """The rows of the two tables (column dicts of AIConfigurator's ``computescale_perf`` and
    ``scale_matrix_perf``) at the reduction widths ``widths``, paired by ``(device, m, k)``, in
    :data:`COLUMNS`, sorted by width and tokens; seconds = latency / 1000 with 8 significant
    digits."""
    tables = {"computescale_perf": compute_scale, "scale_matrix_perf": scale_matrix}
    times: dict[str, dict] = {}
    for name, source in tables.items():
        for col in SOURCE_COLUMNS:
            if col not in source:
                raise FieldError(f"{name} column", col, f"the columns {', '.join(SOURCE_COLUMNS)}")
        out = times.setdefault(name, {})
        for i, (dev, m, k, dtype, ms) in enumerate(zip(*(source[c] for c in SOURCE_COLUMNS), strict=True)):
            if k not in widths:
                continue
            if dev not in DEVICES:
                raise FieldError(f"{name} row {i} device", dev, f"one of {sorted(DEVICES)}")
            if dtype != "fp8" or not ms >= 0 or (dev, m, k) in out:
                raise FieldError(
                    f"{name} row {i}", (dtype, ms), "one fp8 row per (device, m, k), latency >= 0 ms"
                )
            out[(dev, m, k)] = ms / 1000
    cs, sm = times["computescale_perf"], times["scale_matrix_perf"]
    if cs.keys() != sm.keys():
        raise FieldError(
            "scale_matrix_perf rows", sorted(set(cs) ^ set(sm))[:3], "the (device, m, k) of computescale_perf"
        )
    rows = [
        {
            "gpu": DEVICES[dev],
            "device": dev,
            "tokens": m,
            "d_red": k,
            "compute_scale_s": f"{cs[(dev, m, k)]:.8g}",
            "scale_matrix_s": f"{sm[(dev, m, k)]:.8g}",
        }
        for dev, m, k in cs
    ]
    rows.sort(key=lambda r: (r["gpu"], r["d_red"], r["tokens"]))
    return rows


def load_quantize(path: str | Path = QUANT_TABLE) -> dict[tuple[str, int, int], float]:
    """``(gpu, tokens, d_red) -> seconds`` of the dynamic quantization (``compute_scale_s +
    scale_matrix_s``) of the shipped table."""
    out = {}
    with gzip.open(path, "rt", newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            key = (row["gpu"], int(row["tokens"]), int(row["d_red"]))
            seconds = float(row["compute_scale_s"]) + float(row["scale_matrix_s"])
            if key in out or not seconds > 0:
                raise FieldError(f"{path}:{i}", key, "one row per (gpu, tokens, d_red) with a positive time")
            out[key] = seconds
    return out


def _measured_quant(score: Fp8Score, path: Path) -> np.ndarray:
    """The measured quantization of each point of ``score`` (FieldError where the table lacks one)."""
    table = load_quantize(path)
    keys = [(p["gpu"], p["tokens"], p["d_red"]) for p in score.points]
    missing = [k for k in keys if k not in table]
    if missing:
        raise FieldError(f"{path.name} rows", missing[:3], "every (gpu, tokens, d_red) of the GeMM table")
    return np.array([table[k] for k in keys])


@cache
def score_quantize(gpu_key: str = GPU, path: Path = QUANT_TABLE) -> Fp8Score:
    """:func:`theory.precision.activation_quant_s` against the measured quantization, at the points
    of the GeMM table ``FP8_TABLES[1]`` (columns ``quant``, ``pred_quant``, ``err_quant``)."""
    gemms = score_fp8(gpu_key, FP8_TABLES[1])
    measured = _measured_quant(gemms, path)
    tokens = np.array([p["tokens"] for p in gemms.points])
    d_red = np.array([p["d_red"] for p in gemms.points])
    pred = activation_quant_s(tile_cost_models(gpu_key)["fp8"], tokens, d_red)
    cols = {"quant": measured, "pred_quant": pred, "err_quant": np.abs(pred / measured - 1.0)}
    return Fp8Score(gpu=gpu_key, points=gemms.points, columns=cols)


@cache
def gemm_less_quantize(gpu_key: str = GPU, path: Path = QUANT_TABLE) -> Fp8Score:
    """The FP8 GeMM table ``FP8_TABLES[1]`` scored with the measured quantization added to each
    FP8 prediction (the ``fp8`` and ``ratio`` columns of :class:`Fp8Score`): what is left is the
    tile model's FP8 GeMM against the measured one."""
    gemms = score_fp8(gpu_key, FP8_TABLES[1])
    c = dict(gemms.columns)
    c["pred_fp8"] = c["pred_fp8"] + _measured_quant(gemms, path)
    c["err_fp8"] = np.abs(c["pred_fp8"] / c["fp8"] - 1.0)
    c["pred_ratio"] = c["pred_fp8"] / c["pred_bf16"]
    c["err_ratio"] = np.abs(c["pred_ratio"] / c["ratio"] - 1.0)
    return replace(gemms, columns=c)


def convert_aiconfigurator_quantize(
    compute_scale: str | Path, scale_matrix: str | Path, out: str | Path
) -> int:
    """Write :func:`convert_rows` of the two Parquet tables, at the reduction widths of the shipped
    GeMM table, to the gzipped CSV ``out`` (fixed timestamp); return how many rows."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise FieldError(
            "pyarrow", "not installed", "pyarrow to read AIConfigurator's Parquet tables"
        ) from exc
    widths = {p["d_red"] for p in score_fp8(GPU, FP8_TABLES[1]).points}
    rows = convert_rows(
        pq.read_table(compute_scale).to_pydict(), pq.read_table(scale_matrix).to_pydict(), widths
    )
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    Path(out).write_bytes(gzip.compress(buf.getvalue().encode(), compresslevel=9, mtime=0))
    return len(rows)


__all__ = [
    "QUANT_TABLE",
    "convert_aiconfigurator_quantize",
    "convert_rows",
    "gemm_less_quantize",
    "load_quantize",
    "score_quantize",
]


if __name__ == "__main__":  # pragma: no cover
    print(convert_aiconfigurator_quantize(*sys.argv[1:4]), "rows")
