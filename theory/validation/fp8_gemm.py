"""The FP8 GeMMs measured on an H200 (``theory/data/profiles/fp8/llmq_h200_fp8_gemm.csv``) predicted
by the tile model at ``precision = "fp8"`` (:mod:`theory.precision`), with nothing fitted on them.

Each measured shape ``d_row x d_red`` at ``tokens`` activation rows is priced by
:func:`theory.cost.T_GeMM_terms` on the ``h200`` preset in real mode (its shipped calibration:
tile rates, memory floor, waves, L2 bandwidth and per-GeMM overhead, all fitted to bf16 layers of
other runs, never to these rows), with the measured bf16 GeMM law taken off so that both
precisions are the tile model's: ``fp8`` on the FP8 tile rates and one-byte weights and inputs,
``bf16`` as the calibration prices it. Scored per row: the FP8 time, the bf16 time, and the FP8/bf16
ratio of the same shape and token count (predicted ratio over measured ratio), each as
``|predicted / measured - 1|``.

How the rows were measured is the ``method`` of the run's ``fp8_gemm_meta.json``
(``benchmarks/device/runs/2026-11-27-h200-fp8/``; ``theory/data/profiles/README.md`` has the
provenance): ``torch._scaled_mm`` on ``float8_e4m3fn`` operands with per-tensor scales against
``torch.nn.functional.linear`` in bf16, each point the median of CUDA-graph replays.
The second table of :data:`FP8_TABLES`, ``aiconfigurator_h200_fp8_gemm.csv.gz``, is AIConfigurator's
H200 TensorRT-LLM GeMMs (:mod:`theory.validation.profiles_aiconfigurator`): its FP8 layer quantizes
its input dynamically inside the timed call, which Eq. 2 does not price. Such a table
(:data:`DYNAMIC_QUANT`) is scored both ways: on Eq. 2 alone, and with the bytes of the
quantization added to each FP8 time (``quant=True``, :func:`theory.precision.activation_quant_s`);
:func:`residual_by_tokens` splits what is left by token count.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2 (the tile model these rates enter); ai-dynamo/aiconfigurator,
``collector/trtllm/collect_gemm.py`` at commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce.
"""

from __future__ import annotations

import csv
import gzip
import itertools
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np

from theory.cost import T_GeMM_terms, build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.precision import activation_quant_s, with_precision

FP8_DIR = Path(__file__).resolve().parent.parent / "data" / "profiles" / "fp8"
FP8_TABLE = FP8_DIR / "llmq_h200_fp8_gemm.csv"
# the measured FP8 tables llmq validate scores: llmq's own, and AIConfigurator's TensorRT-LLM GeMMs
# (theory.validation.profiles_aiconfigurator; provenance in theory/data/profiles/README.md)
FP8_TABLES = (FP8_TABLE, FP8_DIR / "aiconfigurator_h200_fp8_gemm.csv.gz")
# the tables whose FP8 calls quantize their bf16 input inside the timed call (no static input scale)
DYNAMIC_QUANT = frozenset({FP8_TABLES[1].name})
GPU, MODE = "h200", "real"
KEYS = ("gpu", "model", "operation", "d_row", "d_red", "tokens")
QUANTITIES = ("fp8", "bf16", "ratio")
TOKEN_EDGES = (1, 17, 257, 4097, 32769)  # the token ranges of residual_by_tokens (bounds exclusive above)


def load_fp8_table(path: str | Path = FP8_TABLE) -> list[dict]:
    """The measured points that have both times, one dict per (shape, tokens) with the ``bf16``
    and ``fp8`` seconds side by side, in the file's order."""
    points: dict[tuple, dict] = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            if row.get("error") or not row.get("seconds"):
                continue
            if row["precision"] not in ("bf16", "fp8"):
                raise FieldError(f"{path}:{i} precision", row["precision"], "bf16 or fp8")
            key = tuple(int(row[k]) if k in ("d_row", "d_red", "tokens") else row[k] for k in KEYS)
            point = points.setdefault(key, dict(zip(KEYS, key, strict=True)))
            point[row["precision"]] = float(row["seconds"])
    return [p for p in points.values() if "bf16" in p and "fp8" in p]


def tile_cost_models(gpu_key: str = GPU) -> dict:
    """The real-mode cost models of ``gpu_key`` at bf16 and fp8 on the tile model (the measured
    bf16 GeMM law off; the model's own dimensions do not enter a single GeMM's time)."""
    gpu = get_gpu(gpu_key, calibrated=True)
    gpu = replace(gpu, terms=replace(gpu.terms, gemm_profile=None, gemm_profile_gpu=None))
    model = get_model("llama-3.1-8b")
    return {p: build_cost_model(gpu, with_precision(model, p), MODE) for p in ("bf16", "fp8")}


@dataclass(frozen=True)
class Fp8Score:
    """Per-point measured and predicted times: ``columns`` maps ``bf16``, ``fp8``, ``ratio``
    (measured), ``pred_*`` (predicted) and ``err_*`` (``|predicted / measured - 1|``) to arrays,
    ``points`` the measured points in the same order."""

    gpu: str
    points: tuple
    columns: dict

    def stats(self, quantity: str) -> tuple[int, float, float]:
        """(points, median, p90) of ``|predicted / measured - 1|`` for ``quantity`` of
        :data:`QUANTITIES`."""
        err = self.columns[f"err_{quantity}"]
        return int(err.size), float(np.median(err)), float(np.quantile(err, 0.9))


@cache
def score_fp8(gpu_key: str = GPU, table: Path = FP8_TABLE, quant: bool = False) -> Fp8Score:
    """Predict every measured point of ``table`` (:func:`load_fp8_table`) with
    :func:`tile_cost_models`; with ``quant`` each FP8 time also pays the dynamic quantization of
    its input (:func:`theory.precision.activation_quant_s`)."""
    points = tuple(p for p in load_fp8_table(table) if p["gpu"] == gpu_key)
    col = {k: np.array([p[k] for p in points]) for k in ("d_row", "d_red", "tokens", "bf16", "fp8")}
    out = {}
    for prec, cm in tile_cost_models(gpu_key).items():
        out[prec] = col[prec]
        out[f"pred_{prec}"] = T_GeMM_terms(cm, col["d_row"], col["tokens"], col["d_red"])
        if quant and prec == "fp8":
            out["pred_fp8"] = out["pred_fp8"] + activation_quant_s(cm, col["tokens"], col["d_red"])
        out[f"err_{prec}"] = np.abs(out[f"pred_{prec}"] / col[prec] - 1.0)
    out["ratio"] = col["fp8"] / col["bf16"]
    out["pred_ratio"] = out["pred_fp8"] / out["pred_bf16"]
    out["err_ratio"] = np.abs(out["pred_ratio"] / out["ratio"] - 1.0)
    return Fp8Score(gpu=gpu_key, points=points, columns=out)


def residual_by_tokens(score: Fp8Score, edges: tuple[int, ...] = TOKEN_EDGES) -> list[dict]:
    """What the FP8 prediction leaves, per token range ``[edges[j], edges[j + 1])``: the points,
    and the medians of the measured and predicted seconds, of their difference (measured less
    predicted) and of ``predicted / measured - 1``."""
    c = score.columns
    tokens = np.array([p["tokens"] for p in score.points])
    out = []
    for lo, hi in itertools.pairwise(edges):
        sel = (tokens >= lo) & (tokens < hi)
        if not sel.any():
            continue
        measured, pred = c["fp8"][sel], c["pred_fp8"][sel]
        out.append(
            {
                "tokens": f"{lo}-{hi - 1}",
                "n": int(sel.sum()),
                "measured_s": float(np.median(measured)),
                "predicted_s": float(np.median(pred)),
                "residual_s": float(np.median(measured - pred)),
                "signed": float(np.median(pred / measured - 1.0)),
            }
        )
    return out


__all__ = [
    "DYNAMIC_QUANT",
    "FP8_TABLE",
    "FP8_TABLES",
    "QUANTITIES",
    "Fp8Score",
    "load_fp8_table",
    "residual_by_tokens",
    "score_fp8",
    "tile_cost_models",
]
