"""Converters from public profiling data to the schema of :mod:`theory.profiles`, and the command
that rebuilds the packaged profiles.

Each ``convert_*`` function takes the path of one source file (from a checkout of the source
repository) and returns rows as dicts with the schema's columns (exact duplicate source rows are
dropped first; repeated measurements are then merged by their median;
:mod:`theory.validation.profiles_rows`); :func:`~theory.validation.profiles_rows.write_profile`
writes them (``.csv.gz`` compressed). LLMServingSim's bundles are converted by
:mod:`theory.validation.profiles_llmservingsim`. ``python -m theory.validation.profiles_convert
--vidur DIR --splitwise DIR --llmservingsim DIR --out DIR`` rebuilds the packaged files from
checkouts; ``theory/data/profiles/README.md`` records the commits and the exact transformation.

Sources
-------
microsoft/vidur (MIT), ``data/profiling/compute/<gpu>/<org>/<model>/mlp.csv`` and
``data/profiling/network/<node>/all_reduce.csv``: times in milliseconds (vidur's profilers record
CUDA kernel time in ms, ``vidur/profiling/utils/record_function_tracer.py`` and
``vidur/profiling/common/cuda_timer.py``; its simulator multiplies by ``1e-3`` to get seconds,
``vidur/entities/execution_time.py``).

Mutinifni/splitwise-sim (MIT), ``data/perf_model.csv``: ``prompt_time`` and ``token_time`` in
milliseconds (``performance_model.py``, ``DatabasePerformanceModel``: "convert to seconds" by
dividing by 1000).

casys-kaist/LLMServingSim (MIT): :mod:`theory.validation.profiles_llmservingsim`.

llmq's own measurements (Apache-2.0, this repository), ``benchmarks/device/measure_profile.py``:
each run writes its rows in this schema already (seconds); :func:`build_device` merges the runs of
one GPU into ``llmq_<gpu>.csv.gz``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from theory.errors import ConfigFileError, FieldError
from theory.models import get_model
from theory.profiles import (
    INT_COLUMNS,
    VIDUR_GEMMS,
    VIDUR_KERNELS,
    load_profile,
)
from theory.validation.profiles_llmservingsim import (
    build_llmservingsim,
    build_llmservingsim_moe,
    build_llmservingsim_v0,
)
from theory.validation.profiles_rows import COLUMNS, profile_row, read_source_csv, write_profile

# vidur model folder -> llmq model preset
VIDUR_MODELS = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Meta-Llama-3-70B": "llama-3-70b",
    "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b",
    "internlm/internlm-20b": "internlm-20b",
    "Qwen/Qwen-72B": "qwen-72b",
    "microsoft/phi-2": "phi-2",
}
VIDUR_GPUS = {"a100": "a100", "h100": "h100", "a40": "a40"}  # compute folder -> GPU preset
VIDUR_NODES = {  # network folder -> GPU preset
    "a100_dgx": "a100", "a100_pairwise_nvlink": "a100", "h100_dgx": "h100", "h100_pairwise_nvlink": "h100",
}
SPLITWISE_MODELS = {"llama2-70b": "llama-2-70b", "bloom-176b": "bloom-176b"}
SPLITWISE_GPUS = {"a100-80gb": "a100", "h100-80gb": "h100"}
# hardware whose rows are not measurements, and why (checked on all rows of perf_model.csv @ 8f99e7d)
SPLITWISE_DERIVED = {
    "h100-80gb-pcap": "prompt_time is exactly 1.3 x the h100-80gb row's, token_time and e2e_time equal "
                      "it: a modelled power cap, not a measurement",
}


def convert_vidur_mlp(path: str | Path, gpu: str, model: str,
                      operations: tuple[str, ...] = VIDUR_GEMMS + VIDUR_KERNELS) -> list[dict]:
    """Rows of vidur's per-layer operator profile ``mlp.csv`` (one per TP degree, token count, op).

    Keeps each operator's ``time_stats.<op>.median`` (ms, the median over vidur's 20 timed runs),
    at ``num_tokens`` and ``num_tensor_parallel_workers``; rows profiled more than once (same TP
    and token count) are merged by the median of their medians. An operator absent from the file
    (Phi-2 has no ``post_attention_layernorm``) or empty in a row is skipped. The file's model
    columns (``n_head, n_kv_head, n_embd, n_expanded_embd``) must match the llmq preset ``model``.

    References
    ----------
    microsoft/vidur ``vidur/profiling/mlp/main.py`` and ``mlp_wrapper.py`` (what a row is),
    commit 7d47513363ec447a741ac5e47241580b47724fbf.
    """
    rows = read_source_csv(path)
    preset = get_model(model)
    expect = {"n_head": preset.n_heads, "n_kv_head": preset.n_kv_heads, "n_embd": preset.d_x,
              "n_expanded_embd": preset.d_ff}
    groups: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for k, r in enumerate(rows):
        for col, want in expect.items():
            if int(r[col]) != want:
                raise FieldError(f"{path}: row {k + 2}, column {col!r}", r[col], f"{want} ({model})")
        tp, tokens = int(r["num_tensor_parallel_workers"]), int(r["num_tokens"])
        for op in operations:
            cell = r.get(f"time_stats.{op}.median", "")
            if cell not in ("", None):
                groups[(tp, tokens, op)].append(float(cell))
    out = []
    for (tp, tokens, op), ms in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        out.append(profile_row("vidur", gpu, "", model, tp, op, ms, tokens=tokens))
    return out


def convert_vidur_all_reduce(path: str | Path, gpu: str, setup: str) -> list[dict]:
    """Rows of vidur's NCCL all-reduce profile ``all_reduce.csv`` for single-node groups.

    Keeps the rows with ``devices_per_node == num_workers`` (all GPUs of the group in one node,
    the only case vidur's predictor uses for tensor parallelism) and ``collective == all_reduce``;
    ``size`` is the buffer in bytes (fp16 elements x 2), the time is ``time_stats.all_reduce.median``
    in ms. Sizes profiled more than once are merged by the median.

    References
    ----------
    microsoft/vidur ``vidur/profiling/collectives/collectives_wrapper.py`` (``size * 2`` bytes,
    kineto NCCL kernel time) and ``vidur/execution_time_predictor/sklearn_execution_time_predictor.py``
    (``_load_all_reduce_df``), commit 7d47513363ec447a741ac5e47241580b47724fbf.
    """
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for r in read_source_csv(path):
        if r["collective"] != "all_reduce" or r["devices_per_node"] != r["num_workers"]:
            continue
        groups[(int(r["num_workers"]), int(r["size"]))].append(float(r["time_stats.all_reduce.median"]))
    return [profile_row("vidur", gpu, setup, "", tp, "all_reduce", ms, bytes=size)
            for (tp, size), ms in sorted(groups.items())]


def convert_splitwise(path: str | Path) -> list[dict]:
    """Rows of splitwise-sim's ``perf_model.csv``: one prefill and one decode row per configuration.

    A source row is a request batch of ``batch_size`` requests with ``prompt_size`` prompt and
    ``token_size`` output tokens on ``tensor_parallel`` GPUs; ``prompt_time`` (ms) is the prefill
    of the whole batch and ``token_time`` (ms) the mean time of one decode iteration of it.

    * ``prefill_batch``: ``tokens = prompt_size x batch_size``, ``decodes = 0``,
      ``context = prompt_size``; the
      median of ``prompt_time`` over all rows with that prompt size and batch size (the prefill
      does not depend on ``token_size``).
    * ``decode_batch``: ``tokens = decodes = batch_size``, ``context = prompt_size``,
      ``generated = token_size``; the median of ``token_time`` over the repeated rows.

    ``setup`` keeps splitwise-sim's hardware name. Rows of :data:`SPLITWISE_DERIVED` hardware
    (the power-capped ``h100-80gb-pcap``, derived from the H100 rows) are dropped.

    References
    ----------
    Mutinifni/splitwise-sim ``performance_model.py`` (``DatabasePerformanceModel``), commit
    8f99e7dc9b407f4ce2488d03dd44c0b8b946dab0.
    """
    prefill: dict[tuple, list[float]] = defaultdict(list)
    decode: dict[tuple, list[float]] = defaultdict(list)
    for k, r in enumerate(read_source_csv(path)):
        if r["hardware"] in SPLITWISE_DERIVED:
            continue
        try:
            model, gpu = SPLITWISE_MODELS[r["model"]], SPLITWISE_GPUS[r["hardware"]]
        except KeyError as exc:
            raise FieldError(f"{path}: row {k + 2}", exc.args[0], "a model and hardware with an llmq "
                             "preset (SPLITWISE_MODELS, SPLITWISE_GPUS)") from None
        head = (model, gpu, r["hardware"], int(r["tensor_parallel"]))
        p, b, t = int(r["prompt_size"]), int(r["batch_size"]), int(r["token_size"])
        prefill[(*head, p, b)].append(float(r["prompt_time"]))
        decode[(*head, p, b, t)].append(float(r["token_time"]))
    out = [profile_row("splitwise-sim", gpu, setup, model, tp, "prefill_batch", ms, tokens=p * b, decodes=0,
                       context=p)
           for (model, gpu, setup, tp, p, b), ms in sorted(prefill.items())]
    out += [profile_row("splitwise-sim", gpu, setup, model, tp, "decode_batch", ms, tokens=b, decodes=b,
                        context=p, generated=t)
            for (model, gpu, setup, tp, p, b, t), ms in sorted(decode.items())]
    return out


def build_vidur(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Convert every known compute and network profile of a vidur checkout at ``root``.

    Writes ``vidur_gemm.csv.gz`` (the four GeMMs, :data:`VIDUR_GEMMS`), ``vidur_kernels.csv.gz``
    (the element-wise operators, :data:`VIDUR_KERNELS`) and ``vidur_all_reduce.csv.gz`` to
    ``out_dir``; returns the row count of each.
    """
    root, out_dir = Path(root), Path(out_dir)
    gemm, kernels = [], []
    for folder, gpu in VIDUR_GPUS.items():
        for name, model in VIDUR_MODELS.items():
            f = root / "data/profiling/compute" / folder / name / "mlp.csv"
            if f.exists():
                gemm += convert_vidur_mlp(f, gpu, model, VIDUR_GEMMS)
                kernels += convert_vidur_mlp(f, gpu, model, VIDUR_KERNELS)
    network = []
    for node, gpu in VIDUR_NODES.items():
        f = root / "data/profiling/network" / node / "all_reduce.csv"
        if f.exists():
            network += convert_vidur_all_reduce(f, gpu, node)
    write_profile(gemm, out_dir / "vidur_gemm.csv.gz")
    write_profile(kernels, out_dir / "vidur_kernels.csv.gz")
    write_profile(network, out_dir / "vidur_all_reduce.csv.gz")
    return {"vidur_gemm": len(gemm), "vidur_kernels": len(kernels), "vidur_all_reduce": len(network)}


def build_splitwise(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Convert ``data/perf_model.csv`` of a splitwise-sim checkout; writes ``splitwise_perf_model.csv``."""
    rows = convert_splitwise(Path(root) / "data/perf_model.csv")
    write_profile(rows, Path(out_dir) / "splitwise_perf_model.csv")
    return {"splitwise_perf_model": len(rows)}


def build_device(runs: list[str | Path], out_dir: str | Path) -> dict[str, int]:
    """Merge the ``profile.csv`` of measurement runs (``benchmarks/device/measure_profile.py``)
    into ``llmq_<gpu>.csv.gz`` per GPU; returns the row count of each file.

    Each file is loaded and checked as a profile (:func:`theory.profiles.load_profile`); every row
    must have ``source = llmq``. A row of a later run replaces the row of an earlier run with the
    same GPU, model, TP, operation and integer columns (a rerun of a shape); nothing else changes.
    """
    merged: dict[str, dict[tuple, dict]] = defaultdict(dict)
    for run in runs:
        path = Path(run) / "profile.csv" if Path(run).is_dir() else Path(run)
        for i, r in enumerate(load_profile(path).rows, start=2):
            if r["source"] != "llmq":
                raise ConfigFileError(f"{path}: row {i}, column source: expected 'llmq', got {r['source']!r}")
            row = {c: "" for c in COLUMNS}
            row.update({c: r[c].item() for c in ("source", "gpu", "setup", "model", "tp", "operation")})
            row.update({c: int(r[c]) for c in INT_COLUMNS if int(r[c]) >= 0})
            row["seconds"] = f"{float(r['seconds']):.8g}"
            key = tuple(row[c] for c in ("gpu", "model", "tp", "operation", *INT_COLUMNS) if c != "src_rows")
            merged[row["gpu"]][key] = row
    counts = {}
    for gpu, rows in sorted(merged.items()):
        write_profile(list(rows.values()), Path(out_dir) / f"llmq_{gpu}.csv.gz")
        counts[f"llmq_{gpu}"] = len(rows)
    return counts


def main(argv: list[str] | None = None) -> None:
    """Command line: rebuild the packaged profiles from source checkouts."""
    ap = argparse.ArgumentParser(prog="python -m theory.validation.profiles_convert",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--vidur", help="checkout of microsoft/vidur")
    ap.add_argument("--splitwise", help="checkout of Mutinifni/splitwise-sim")
    ap.add_argument("--llmservingsim", help="checkout of casys-kaist/LLMServingSim")
    ap.add_argument("--device", nargs="+", metavar="RUN",
                    help="folders (or profile.csv files) of benchmarks/device/measure_profile.py runs")
    ap.add_argument("--out", default=str(Path(__file__).parents[1] / "data" / "profiles"))
    args = ap.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    counts = {}
    if args.vidur:
        counts |= build_vidur(args.vidur, args.out)
    if args.splitwise:
        counts |= build_splitwise(args.splitwise, args.out)
    if args.llmservingsim:
        counts |= build_llmservingsim(args.llmservingsim, args.out)
        counts |= build_llmservingsim_moe(args.llmservingsim, args.out)
        counts |= build_llmservingsim_v0(args.llmservingsim, args.out)
    if args.device:
        counts |= build_device(args.device, args.out)
    for name, n in counts.items():
        print(f"{name}: {n} rows")


if __name__ == "__main__":  # pragma: no cover
    main()
