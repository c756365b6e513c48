"""Converter from AIConfigurator's GeMM tables to llmq's FP8 GeMM table schema.

AIConfigurator (NVIDIA, Apache-2.0) ships per-GPU operator tables measured with each serving
framework; its ``gemm_perf.parquet`` holds one row per ``(gemm_dtype, m, n, k)`` with ``latency``
in milliseconds. :func:`convert_aiconfigurator_gemm` keeps the ``bfloat16`` and ``fp8`` rows whose
weight shape ``n x k`` is one GPU's shard of a GeMM of a model preset at some TP
(:func:`theory.profiles.gemm_shape`) and writes them in the columns of
``theory/data/profiles/fp8/llmq_h200_fp8_gemm.csv`` (read by
:func:`theory.validation.fp8_gemm.load_fp8_table`).
``python -m theory.validation.profiles_aiconfigurator PARQUET OUT`` rebuilds the packaged
``aiconfigurator_h200_fp8_gemm.csv.gz``; reading Parquet needs ``pyarrow``, which llmq does not
otherwise depend on.

Sources
-------
ai-dynamo/aiconfigurator at commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce,
``aic-core/src/aiconfigurator_core/systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet``;
the collector is ``collector/trtllm/collect_gemm.py`` (``run_gemm``: ``x`` is ``m x k``, the
TensorRT-LLM ``Linear(k, n)`` weight ``n x k``; ``latency`` is ``benchmark_with_power``'s mean
CUDA-graph replay time in ms, divided by the number of weight copies that defeat the L2 cache);
``theory/data/profiles/README.md`` records the provenance and what is dropped.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys
from pathlib import Path

from theory.errors import FieldError
from theory.models import get_model
from theory.profiles import gemm_shape

GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}  # AIConfigurator gemm_dtype -> llmq precision
DEVICES = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100"}  # CUDA device name -> preset
COLUMNS = ("gpu", "device", "model", "tp", "operation", "d_row", "d_red", "tokens", "precision", "seconds")


def model_shapes(model_key: str, tps: tuple[int, ...] = (1, 2, 4, 8)) -> dict[tuple[int, int], tuple]:
    """``(d_row, d_red) -> (tp, operation)`` of the four GeMMs of ``model_key`` at each TP in
    ``tps`` that divides it (the first TP and operation where two coincide)."""
    model = get_model(model_key)
    out: dict[tuple[int, int], tuple] = {}
    for tp in tps:
        for op in GEMMS:
            try:
                shape = gemm_shape(model, op, tp)
            except FieldError:
                continue
            out.setdefault(shape, (tp, op))
    return out


def convert_rows(source: dict, model_key: str) -> list[dict]:
    """The rows of ``source`` (a column dict of a ``gemm_perf.parquet``) at the GeMM shapes of
    ``model_key`` (:func:`model_shapes`), in the FP8 table's columns, sorted by TP, operation,
    precision and tokens. ``seconds = latency / 1000`` with 8 significant digits."""
    for col in ("device", "gemm_dtype", "m", "n", "k", "latency"):
        if col not in source:
            raise FieldError("gemm_perf column", col, "the columns of AIConfigurator's gemm_perf table")
    shapes = model_shapes(model_key)
    rows = []
    for i, (dev, dtype, m, n, k, ms) in enumerate(
        zip(*(source[c] for c in ("device", "gemm_dtype", "m", "n", "k", "latency")), strict=True)
    ):
        if dtype not in DTYPES or (n, k) not in shapes:
            continue
        if dev not in DEVICES:
            raise FieldError(f"gemm_perf row {i} device", dev, f"one of {sorted(DEVICES)}")
        if not ms > 0:
            raise FieldError(f"gemm_perf row {i} latency", ms, "a positive time in ms")
        tp, op = shapes[(n, k)]
        rows.append(
            {
                "gpu": DEVICES[dev],
                "device": dev,
                "model": model_key,
                "tp": tp,
                "operation": op,
                "d_row": n,
                "d_red": k,
                "tokens": m,
                "precision": DTYPES[dtype],
                "seconds": f"{ms / 1000:.8g}",
            }
        )
    keys = {(r["gpu"], r["d_row"], r["d_red"], r["tokens"], r["precision"]) for r in rows}
    if len(keys) != len(rows):
        raise FieldError("gemm_perf rows", len(rows), "one row per (device, dtype, m, n, k)")
    rows.sort(key=lambda r: (r["tp"], GEMMS.index(r["operation"]), r["precision"], r["tokens"]))
    return rows


def convert_aiconfigurator_gemm(parquet: str | Path, out: str | Path, model_key: str = "llama-3.1-8b") -> int:
    """Write the converted rows of ``parquet`` (:func:`convert_rows`) to the CSV ``out`` (gzipped,
    with a fixed timestamp, when it ends in ``.gz``); return how many."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise FieldError(
            "pyarrow", "not installed", "pyarrow to read AIConfigurator's Parquet tables"
        ) from exc
    rows = convert_rows(pq.read_table(parquet).to_pydict(), model_key)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    data = buf.getvalue().encode()
    Path(out).write_bytes(gzip.compress(data, compresslevel=9, mtime=0) if str(out).endswith(".gz") else data)
    return len(rows)


if __name__ == "__main__":  # pragma: no cover
    print(convert_aiconfigurator_gemm(*sys.argv[1:3]), "rows")
