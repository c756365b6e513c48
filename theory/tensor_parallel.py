"""Tensor-parallel replicas for ``llmq plan``: the degrees a GPU offers, their all-reduce laws,
and the GPU profile of a TP group.

A replica with tensor parallelism is a group of ``tp`` GPUs joined by one interconnect; Theorem 1's
``r`` counts groups, and a fleet of r groups costs ``r tp`` GPUs. The cost model already prices a
group (:mod:`theory.terms`: each GPU's shard of every GeMM plus two all-reduces per layer); this
module says which groups exist:

* ``theory/data/tensor_parallel.toml`` lists, per GPU preset, the degrees a server of that GPU
  offers and the packaged NCCL profile (setup) whose fit gives the all-reduce law
  (:func:`allreduce_law`, :func:`theory.terms.fit_allreduce_law`);
* :func:`fits` says whether one GPU's shard of the weights leaves room for KV cache
  (:func:`theory.terms.shard_memory`), :func:`auto_degree` picks the smallest degree that does
  ("TP where the model needs it");
* :func:`variant_file` writes a GPU file holding a ``<gpu>-tp<k>`` profile per group (the GPU's
  table with ``tp`` and the fitted law), so that a group runs through every command, task and
  cache key as any GPU of a ``--gpu-file`` does.

References
----------
Shoeybi et al. (2019), Megatron-LM, arXiv:1909.08053, Section 3; nccl-tests ``doc/PERFORMANCE.md``;
microsoft/vidur@7d47513 ``data/profiling/network/*/all_reduce.csv`` (the packaged profile).
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import cache
from pathlib import Path

from theory.config import read_packaged
from theory.errors import FieldError
from theory.terms import check_tp, shard_memory
from theory.tp_split import check_moe_tp

TP_FILE = "theory/data/tensor_parallel.toml"
MIN_PROFILE_BYTES = 2**20  # messages of at least 1 MiB: the law's latency + bandwidth regime
AUTO_UTILIZATION = 0.9  # memory fraction at which "the model fits" is judged (vLLM's default)


@cache
def tp_table() -> dict:
    """``{gpu: {"degrees": [...], "setup": ..., "interconnect": ...}}`` of ``tensor_parallel.toml``."""
    return read_packaged("tensor_parallel.toml")["tensor_parallel"]


def degrees(gpu: str) -> tuple[int, ...]:
    """The TP degrees a server of ``gpu`` offers: 1, and those of ``tensor_parallel.toml``."""
    return (1, *tuple(tp_table().get(gpu, {}).get("degrees", ())))


@cache
def allreduce_law(gpu: str, tp: int) -> tuple[float, float]:
    """(latency s, bus bandwidth bytes/s) of a ``tp``-GPU all-reduce on ``gpu``'s server: the fit of
    :func:`theory.terms.fit_allreduce_law` to the packaged profile's rows of the GPU's setup at
    ``tp`` with messages of at least 1 MiB.

    Raises
    ------
    FieldError
        If the GPU offers no such degree.
    """
    from theory.profiles import load_profile
    from theory.terms import fit_allreduce_law

    if tp not in degrees(gpu) or tp == 1:
        raise FieldError(f"tensor_parallel.{gpu}.degrees", list(degrees(gpu)[1:]),
                         f"a degree {tp} listed in {TP_FILE}")
    rows = load_profile("vidur_all_reduce").where(operation="all_reduce", setup=tp_table()[gpu]["setup"],
                                                  tp=tp)
    rows = rows[rows["bytes"] >= MIN_PROFILE_BYTES]
    return fit_allreduce_law(rows["bytes"], rows["seconds"], tp)


def variant_key(gpu: str, tp: int) -> str:
    """The GPU key of a ``tp``-GPU group of ``gpu`` (``gpu`` itself for tp = 1)."""
    return gpu if tp == 1 else f"{gpu}-tp{tp}"


def splits(model, tp: int, mode: str) -> bool:
    """Whether ``model`` can be split ``tp`` ways in ``mode`` (:func:`theory.terms.check_tp`; a
    mixture of experts also :func:`theory.tp_split.check_moe_tp`, its experts' widths)."""
    try:
        check_tp(tp, model.n_heads, model.n_kv_heads, model.d_ff, mode, model.key, "tp")
        check_moe_tp(tp, model)
    except FieldError:
        return False
    return True


def fits(gpu, model, tp: int, utilization: float = AUTO_UTILIZATION) -> bool:
    """Whether one GPU's shard of the weights leaves room for KV cache in ``utilization`` of its
    memory (:func:`theory.terms.shard_memory`)."""
    return utilization * gpu.memory_bytes > shard_memory(model, tp)[0]


def auto_degree(gpu, model, mode: str, utilization: float = AUTO_UTILIZATION) -> int:
    """The smallest degree of ``gpu`` that splits ``model`` and leaves room for KV cache in
    ``utilization`` of each GPU's memory (1 when none does: the plan then finds no capacity there)."""
    for tp in degrees(gpu.key):
        if splits(model, tp, mode) and fits(gpu, model, tp, utilization):
            return tp
    return 1


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise FieldError("GPU field", v, "a finite number")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise FieldError("GPU field", v, "a TOML scalar or array")


def _toml_table(name: str, table: dict) -> list[str]:
    lines = [f"[{name}]"]
    subs = []
    for k, v in table.items():
        if isinstance(v, dict):
            subs.append((k, v))
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    for k, v in subs:
        lines += _toml_table(f"{name}.{k}", v)
    return lines


def variant_text(groups, gpu_file: str | None = None) -> str:
    """A GPU file with a ``<gpu>-tp<k>`` table per ``(gpu, k)`` of ``groups`` (k > 1): the GPU's
    resolved table (:func:`theory.hardware.gpu_table`, so a user's override of it carries over)
    with ``tp`` and the fitted all-reduce law, after the text of ``gpu_file`` if given."""
    from theory.hardware import gpu_table

    out = [Path(gpu_file).read_text(encoding="utf-8")] if gpu_file else []
    out.append(f"# Tensor-parallel groups written by llmq plan ({TP_FILE}).")
    for gpu, tp in sorted(set(groups)):
        if tp == 1:
            continue
        lat, bw = allreduce_law(gpu, tp)
        # tp > 1 runs in real mode only, so the group copies the real-mode (calibrated) table
        table = {k: v for k, v in gpu_table(gpu, gpu_file, calibrated=True).items() if k != "base"}
        table.update(name=f"{table.get('name', gpu)} x{tp} (TP)", aliases=[], tp=tp,
                     allreduce_latency_s=lat, allreduce_bandwidth_gbs=bw / 1e9)
        out += _toml_table(f"gpus.{variant_key(gpu, tp)}", table)
    return "\n".join(out) + "\n"


def variant_file(groups, gpu_file: str | None, directory: str | Path) -> str | None:
    """Write :func:`variant_text` into ``directory`` (named by its content) and return its path;
    ``gpu_file`` unchanged when every group has tp = 1."""
    from theory.io import atomic_write_text

    if all(tp == 1 for _, tp in groups):
        return gpu_file
    text = variant_text(groups, gpu_file)
    path = Path(directory) / f"gpus-tp-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"
    if not path.exists():
        atomic_write_text(path, text)
    return str(path)


__all__ = ["AUTO_UTILIZATION", "MIN_PROFILE_BYTES", "TP_FILE", "allreduce_law", "auto_degree", "degrees",
           "fits", "splits", "tp_table", "variant_file", "variant_key", "variant_text"]
