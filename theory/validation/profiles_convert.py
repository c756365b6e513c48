"""Converters from public profiling data to the schema of :mod:`theory.profiles`.

Each ``convert_*`` function takes the path of one source file (from a checkout of the source
repository) and returns rows as dicts with the schema's columns (exact duplicate source rows are
dropped first; repeated measurements are then merged by their median); :func:`write_profile` writes them
(``.csv.gz`` compressed). ``python -m theory.validation.profiles_convert --vidur DIR --splitwise DIR
--llmservingsim DIR --out DIR`` rebuilds the packaged files from checkouts;
``theory/data/profiles/README.md`` records the commits and the exact transformation.

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

casys-kaist/LLMServingSim (MIT), ``profiler/perf/<hardware>/<model>/<variant>/tp<N>/{dense,
per_sequence,attention,moe,skew}.csv`` and the bundle's ``meta.yaml``: ``time_us`` in microseconds
(``docs/docs/profiler/output-bundle.md``, "Times are microseconds"), the CUDA kernel time vLLM's
layerwise profiler attributes to one module call of a one-layer model, averaged over the timed
forwards (``profiler/core/hooks/extension.py``, ``profiler/core/hooks/timings.py``).

llmq's own measurements (Apache-2.0, this repository), ``benchmarks/device/measure_profile.py``:
each run writes its rows in this schema already (seconds); :func:`build_device` merges the runs of
one GPU into ``llmq_<gpu>.csv.gz``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from theory.errors import ConfigFileError, FieldError
from theory.models import get_model
from theory.profiles import (
    INT_COLUMNS,
    LLMSERVINGSIM_GEMMS,
    LLMSERVINGSIM_KERNELS,
    MOE_OPERATIONS,
    VIDUR_GEMMS,
    VIDUR_KERNELS,
    load_profile,
)

COLUMNS = ("source", "gpu", "setup", "model", "tp", "operation", *INT_COLUMNS, "seconds")
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
# LLMServingSim bundles converted: (hardware folder, model folder) -> (GPU preset, model preset)
# (Qwen/Qwen3-30B-A3B-Instruct-2507 on RTXPRO6000 is a mixture of experts: LLMSERVINGSIM_MOE_BUNDLES)
LLMSERVINGSIM_BUNDLES = {
    ("RTX4090", "meta-llama/Llama-3.1-8B"): ("rtx4090", "llama-3.1-8b"),
    ("RTXPRO6000", "meta-llama/Llama-3.1-8B"): ("rtxpro6000", "llama-3.1-8b"),
    ("RTXPRO6000", "Qwen/Qwen3-32B"): ("rtxpro6000", "qwen3-32b"),
}
LLMSERVINGSIM_VARIANT = "bf16"
LLMSERVINGSIM_LAYERS = (*LLMSERVINGSIM_GEMMS, *LLMSERVINGSIM_KERNELS)
# meta.yaml hf_overrides key -> the llmq Model attribute it must equal
LLMSERVINGSIM_SHAPES = {"num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads",
                        "intermediate_size": "d_ff", "vocab_size": "d_out"}
# mixture-of-experts bundles: (hardware folder, model folder) -> (GPU preset, model key, the model's
# config.json in the checkout); written to theory/data/profiles/moe/, outside shipped_profiles(),
# until the model key is an llmq preset (the profile loader checks every row's model against one)
LLMSERVINGSIM_MOE_BUNDLES = {
    ("RTXPRO6000", "Qwen/Qwen3-30B-A3B-Instruct-2507"):
        ("rtxpro6000", "qwen3-30b-a3b", "configs/model/Qwen/Qwen3-30B-A3B-Instruct-2507.json"),
}
MOE_PROFILE_DIR = "moe"
SKEW_SETUP = "skew"  # setup suffix of the rows of a bundle's skew.csv (a separate profiling session)


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
    rows = _read_csv(path)
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
        out.append(_row("vidur", gpu, "", model, tp, op, ms, tokens=tokens))
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
    for r in _read_csv(path):
        if r["collective"] != "all_reduce" or r["devices_per_node"] != r["num_workers"]:
            continue
        groups[(int(r["num_workers"]), int(r["size"]))].append(float(r["time_stats.all_reduce.median"]))
    return [_row("vidur", gpu, setup, "", tp, "all_reduce", ms, bytes=size)
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
    for k, r in enumerate(_read_csv(path)):
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
    out = [_row("splitwise-sim", gpu, setup, model, tp, "prefill_batch", ms, tokens=p * b, decodes=0,
                context=p)
           for (model, gpu, setup, tp, p, b), ms in sorted(prefill.items())]
    out += [_row("splitwise-sim", gpu, setup, model, tp, "decode_batch", ms, tokens=b, decodes=b,
                 context=p, generated=t)
            for (model, gpu, setup, tp, p, b, t), ms in sorted(decode.items())]
    return out


def check_llmservingsim_meta(path: str | Path, hardware: str, model: str) -> dict:
    """Check an LLMServingSim bundle's ``meta.yaml`` against the llmq ``model`` preset; return it.

    The bundle must be the ``hardware`` folder's and the bf16 variant, time one decoder layer
    (``hf_overrides.num_hidden_layers = 1``) and have the preset's heads, KV heads, FFN width and
    vocabulary divided by the last TP degree of ``tp_degrees`` (``hf_overrides``: for ``tp > 1``
    the profiler divides them by the degree to emulate one rank on one GPU, and ``meta.yaml``
    records the engine arguments of the last degree profiled; 1 when ``tp_degrees`` is absent).

    References
    ----------
    casys-kaist/LLMServingSim ``docs/docs/profiler/output-bundle.md`` (``meta.yaml``,
    ``engine_effective.hf_overrides``), ``profiler/core/engine.py`` (``SHARD_FIELDS`` divided by
    ``tp``) and ``profiler/core/writer.py`` (``engine_effective``), commit
    5daddb21a545658d5150b535712d0494584b5278.
    """
    preset = get_model(model)
    shapes = {k: getattr(preset, attr) for k, attr in LLMSERVINGSIM_SHAPES.items()}
    return _check_bundle_meta(path, hardware, model, shapes, {})


def check_llmservingsim_moe_meta(path: str | Path, hardware: str,
                                 config_path: str | Path) -> tuple[dict, dict]:
    """Check a mixture-of-experts bundle's ``meta.yaml`` against the model's ``config.json``; return both.

    As :func:`check_llmservingsim_meta`, with the shapes read from ``config.json`` (the model has no
    llmq preset): ``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size`` and
    ``vocab_size`` divided by the last TP degree, and ``architecture`` equal to the config's
    ``model_type`` (``qwen3_moe``).

    References
    ----------
    casys-kaist/LLMServingSim ``configs/model/Qwen/Qwen3-30B-A3B-Instruct-2507.json`` (the model's
    public config.json as the repository copies it) and ``profiler/models/qwen3_moe.yaml``, commit
    5daddb21a545658d5150b535712d0494584b5278.
    """
    try:
        config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{config_path}: file not found") from None
    shapes = {k: config[k] for k in LLMSERVINGSIM_SHAPES}
    meta = _check_bundle_meta(path, hardware, config["model_type"], shapes,
                              {"architecture": config["model_type"]})
    return meta, config


def _check_bundle_meta(path: str | Path, hardware: str, model: str, shapes: dict, extra: dict) -> dict:
    import yaml  # only to rebuild the packaged files from a checkout

    try:
        meta = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    engine = meta.get("engine_effective") or {}
    hf = engine.get("hf_overrides") or {}
    degrees = meta.get("tp_degrees") or [1]
    if not (isinstance(degrees, list) and all(type(d) is int and d > 0 for d in degrees)):
        raise FieldError(f"{path}: tp_degrees", degrees, "a list of TP degrees (positive integers)")
    tp = degrees[-1]
    expect = {"hardware": hardware, "variant": LLMSERVINGSIM_VARIANT, "tensor_parallel_size": 1,
              "num_hidden_layers": 1, **{k: v // tp for k, v in shapes.items()}, **extra}
    found = {"hardware": meta.get("hardware"), "variant": meta.get("variant"),
             "architecture": meta.get("architecture"),
             "tensor_parallel_size": engine.get("tensor_parallel_size"), **hf}
    for key, want in expect.items():
        if found.get(key) != want:
            raise FieldError(f"{path}: {key}", found.get(key), f"{want} ({hardware}, {model}, TP {tp})")
    return meta


def convert_llmservingsim_dense(path: str | Path, gpu: str, model: str, tp: int, setup: str) -> list[dict]:
    """Rows of an LLMServingSim ``dense.csv`` (``layer, tokens, time_us``): one per layer and token count.

    A source row is the mean CUDA kernel time of one call of the vLLM module ``layer`` (its GeMM
    or element-wise kernels) over a batch of one request of ``tokens`` new tokens and no KV
    history, in microseconds; ``operation`` keeps the layer name (``qkv_proj`` ... are the GeMMs
    of :data:`theory.profiles.LLMSERVINGSIM_GEMMS`).

    References
    ----------
    casys-kaist/LLMServingSim ``profiler/core/categories.py`` (``DenseCategory``: one request of
    ``total_tokens`` new tokens), commit 5daddb21a545658d5150b535712d0494584b5278.
    """
    return [_row("llmservingsim", gpu, setup, model, tp, layer, [us / 1e3 for us in times], tokens=tokens)
            for (layer, tokens), times in _lss_groups(path, ("layer", "tokens"), tokens_low=1).items()]


def convert_llmservingsim_per_sequence(path: str | Path, gpu: str, model: str, tp: int,
                                       setup: str) -> list[dict]:
    """Rows of an LLMServingSim ``per_sequence.csv`` (``layer, sequences, time_us``).

    ``lm_head`` (vLLM's ``LogitsProcessor``: the vocab projection of one hidden row per
    sequence) and ``sampler`` over ``sequences`` one-token requests; ``tokens = sequences`` (the
    activation rows the operation runs over).

    References
    ----------
    casys-kaist/LLMServingSim ``profiler/core/categories.py`` (``SequenceCategory``), commit
    5daddb21a545658d5150b535712d0494584b5278.
    """
    return [_row("llmservingsim", gpu, setup, model, tp, layer, [us / 1e3 for us in times], tokens=n)
            for (layer, n), times in _lss_groups(path, ("layer", "sequences"), tokens_low=1).items()]


def convert_llmservingsim_attention(path: str | Path, gpu: str, model: str, tp: int,
                                    setup: str) -> list[dict]:
    """Rows of an LLMServingSim ``attention.csv``: the self-attention of one layer over a batch.

    A source row ``prefill_chunk, kv_prefill, n_decode, kv_decode, time_us`` is a batch of at most
    one prefill chunk of ``prefill_chunk`` tokens whose request has ``kv_prefill`` tokens in the
    KV cache, and ``n_decode`` decodes with ``kv_decode`` cached tokens each; ``time_us`` is the
    vLLM ``Attention`` module's CUDA time. In the schema: ``operation = attention``, ``tokens =
    prefill_chunk + n_decode``, ``decodes = n_decode``, ``context = kv_decode`` (empty without
    decodes), ``prefill_context = kv_prefill`` (empty without a prefill chunk).

    References
    ----------
    casys-kaist/LLMServingSim ``profiler/core/categories.py`` (``AttentionCategory``) and
    ``profiler/core/hooks/batch.py`` (``Shot.attention``: ``num_computed_tokens = history``),
    commit 5daddb21a545658d5150b535712d0494584b5278.
    """
    keys = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode")
    out = []
    for (chunk, kv_p, n_dec, kv_d), times in _lss_groups(path, keys, tokens_low=0).items():
        cells = {"tokens": chunk + n_dec, "decodes": n_dec}
        if n_dec:
            cells["context"] = kv_d
        if chunk:
            cells["prefill_context"] = kv_p
        out.append(_row("llmservingsim", gpu, setup, model, tp, "attention", [us / 1e3 for us in times],
                        **cells))
    return out


def convert_llmservingsim_moe(path: str | Path, gpu: str, model: str, tp: int, setup: str,
                              top_k: int) -> list[dict]:
    """Rows of an LLMServingSim ``moe.csv`` (``tokens, activated_experts, time_us``).

    A source row is the mean CUDA kernel time of one call of the model's sparse MoE block (vLLM's
    ``Qwen3MoeSparseMoeBlock``: the router GeMM and the fused expert GeMMs) over ``tokens`` tokens
    on one rank, with the routing forced so that the ``tokens x top_k`` slots cycle over exactly
    ``activated_experts`` experts (each gets ``tokens x top_k / activated_experts`` of them, within
    one); in the schema ``operation = moe``, ``experts = activated_experts``, which must lie in
    ``[top_k, tokens x top_k]`` (the profiler's own bound).

    References
    ----------
    casys-kaist/LLMServingSim ``profiler/core/hooks/moe_hook.py`` (``ExpertRoute.forge``,
    ``_cycle_expert_ids``), ``profiler/models/qwen3_moe.yaml`` (``moe: Qwen3MoeSparseMoeBlock``) and
    ``docs/docs/profiler/output-bundle.md`` (``moe.csv``: "Profiled at TP=1 only"), commit
    5daddb21a545658d5150b535712d0494584b5278.
    """
    out = []
    for (tokens, experts), times in _lss_groups(path, ("tokens", "activated_experts"), tokens_low=1).items():
        if not top_k <= experts <= tokens * top_k:
            raise FieldError(f"{path}: column 'activated_experts'", experts,
                             f"{top_k} (top_k) to {tokens * top_k} (tokens x top_k) at {tokens} tokens")
        out.append(_row("llmservingsim", gpu, setup, model, tp, MOE_OPERATIONS[0], [us / 1e3 for us in times],
                        tokens=tokens, experts=experts))
    return out


def convert_llmservingsim_skew(path: str | Path, gpu: str, model: str, tp: int, setup: str) -> list[dict]:
    """Attention rows of an LLMServingSim ``skew.csv``: batches whose decodes have two KV lengths.

    A source row (one shot, three timings) has ``n`` decodes, ``nb`` of them with ``kv_big`` cached
    tokens and the others with ``kvs``, beside a prefill chunk of ``pc`` tokens with ``kp`` cached
    (``pc = 0``: none; ``regime`` says ``pure`` then, else ``mixed``); ``t_skew_us`` times that
    batch, ``t_mean_us`` and ``t_max_us`` the same batch with every decode at ``kv_mean``
    (``(nb kv_big + (n - nb) kvs) // n``) and at ``kv_big``. In the schema, ``setup`` ends in
    ``/skew``: one ``attention`` row per shot with ``decodes = n``, ``context = kvs``,
    ``decodes_long = nb``, ``context_long = kv_big`` (the time ``t_skew_us``), and ``attention`` rows
    of the uniform batches (``context = kv_mean`` or ``kv_big``), a shape timed in several shots
    merged by the median. Dropped: ``ratio`` (``nb / n``), ``skew`` (``kv_big / kvs``) and
    ``alpha`` (``(t_skew - t_mean) / (t_max - t_mean)``), which the kept columns give; each is
    checked against them first (``skew`` through ``kv_big = round(kvs x skew)``).

    References
    ----------
    casys-kaist/LLMServingSim ``profiler/core/skew.py`` (``SkewCase``: ``kv_big``, ``kv_mean``; the
    three timed batches) and ``docs/docs/profiler/output-bundle.md`` (``skew.csv``), commit
    5daddb21a545658d5150b535712d0494584b5278.
    """
    ints = ("n", "nb", "pc", "kp", "kvs", "kv_big", "kv_mean")
    out, uniform = [], defaultdict(list)
    for k, r in enumerate(_read_csv(path)):
        def where(col: str, line: int = k + 2) -> str:
            return f"{path}: row {line}, column {col!r}"

        v = {}
        for col in ints:
            cell = (r.get(col) or "").strip()
            if not cell.isdigit():
                raise FieldError(where(col), cell, "an integer >= 0")
            v[col] = int(cell)
        times = {}
        for col in ("t_mean_us", "t_max_us", "t_skew_us"):
            try:
                times[col] = float(r.get(col) or "")
            except ValueError:
                times[col] = math.nan
            if not (math.isfinite(times[col]) and times[col] > 0):
                raise FieldError(where(col), r.get(col), "a finite time > 0 in microseconds")
        n, nb, pc, kp, kvs, big = (v[c] for c in ints[:-1])
        try:
            skew = float(r.get("skew") or "")
        except ValueError:
            skew = math.nan
        mean = (nb * big + (n - nb) * kvs) // n
        checks = {"nb": (1 <= nb < n, f"1 to n - 1 = {n - 1}"),
                  "regime": (r.get("regime") == ("pure" if pc == 0 else "mixed"), "pure iff pc = 0"),
                  "kv_big": (math.isfinite(skew) and big == round(kvs * skew) > kvs,
                             "round(kvs x skew) > kvs"),
                  "kv_mean": (v["kv_mean"] == mean, f"(nb kv_big + (n - nb) kvs) // n = {mean}"),
                  "kp": (pc > 0 or kp == 0, "0 without a prefill chunk")}
        for col, (ok, want) in checks.items():
            if not ok:
                raise FieldError(where(col), r.get(col), want)
        cells = {"tokens": pc + n, "decodes": n, **({"prefill_context": kp} if pc else {})}
        out.append(_row("llmservingsim", gpu, f"{setup}/{SKEW_SETUP}", model, tp, "attention",
                        [times["t_skew_us"] / 1e3], **cells, context=kvs, decodes_long=nb, context_long=big))
        uniform[(pc, kp, n, v["kv_mean"])].append(times["t_mean_us"])
        uniform[(pc, kp, n, big)].append(times["t_max_us"])
    for (pc, kp, n, kv), us in sorted(uniform.items()):
        cells = {"tokens": pc + n, "decodes": n, "context": kv, **({"prefill_context": kp} if pc else {})}
        out.append(_row("llmservingsim", gpu, f"{setup}/{SKEW_SETUP}", model, tp, "attention",
                        [t / 1e3 for t in us], **cells))
    return out


def write_profile(rows: list[dict], path: str | Path) -> None:
    """Write schema rows as CSV (gzip-compressed, with a fixed timestamp, if ``path`` ends in .gz)."""
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = buf.getvalue().encode("utf-8")
    path = Path(path)
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=9, mtime=0)
    path.write_bytes(data)


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


def build_llmservingsim(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Convert the bundles of :data:`LLMSERVINGSIM_BUNDLES` in an LLMServingSim checkout at ``root``.

    Each bundle's ``meta.yaml`` is checked (:func:`check_llmservingsim_meta`); the ``dense.csv``,
    ``per_sequence.csv`` and ``attention.csv`` of each of its ``tp<N>`` folders (``tp_degrees``)
    are written, every bundle of one GPU together, as ``llmservingsim_<gpu>.csv.gz`` to
    ``out_dir``; returns the row count of each file. A ``tp2`` folder times one rank's shard on
    one GPU (the per-rank shapes of ``hf_overrides``): valid one-GPU GeMMs and attention at TP 2,
    with no all-reduce measured.
    """
    by_gpu: dict[str, list[dict]] = defaultdict(list)
    for (hardware, folder), (gpu, model) in LLMSERVINGSIM_BUNDLES.items():
        bundle = Path(root) / "profiler/perf" / hardware / folder / LLMSERVINGSIM_VARIANT
        meta = check_llmservingsim_meta(bundle / "meta.yaml", hardware, model)
        setup = f"{hardware}/{LLMSERVINGSIM_VARIANT}/vllm-{meta.get('vllm_version')}"
        for tp in meta.get("tp_degrees") or [1]:
            d = bundle / f"tp{tp}"
            by_gpu[gpu] += convert_llmservingsim_dense(d / "dense.csv", gpu, model, tp, setup)
            by_gpu[gpu] += convert_llmservingsim_per_sequence(d / "per_sequence.csv", gpu, model, tp, setup)
            by_gpu[gpu] += convert_llmservingsim_attention(d / "attention.csv", gpu, model, tp, setup)
    counts = {}
    for gpu, rows in by_gpu.items():
        write_profile(rows, Path(out_dir) / f"llmservingsim_{gpu}.csv.gz")
        counts[f"llmservingsim_{gpu}"] = len(rows)
    return counts


def build_llmservingsim_moe(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Convert the bundles of :data:`LLMSERVINGSIM_MOE_BUNDLES` in an LLMServingSim checkout at ``root``.

    Each bundle's ``meta.yaml`` is checked against the model's ``config.json``
    (:func:`check_llmservingsim_moe_meta`); per ``tp<N>`` folder its ``dense.csv``,
    ``per_sequence.csv``, ``attention.csv``, ``moe.csv`` (where profiled: TP 1) and ``skew.csv``
    are written as ``<out_dir>/moe/llmservingsim_<gpu>_<model>.csv.gz``; returns the row count.
    """
    counts = {}
    for (hardware, folder), (gpu, model, config) in LLMSERVINGSIM_MOE_BUNDLES.items():
        bundle = Path(root) / "profiler/perf" / hardware / folder / LLMSERVINGSIM_VARIANT
        meta, cfg = check_llmservingsim_moe_meta(bundle / "meta.yaml", hardware, Path(root) / config)
        setup = f"{hardware}/{LLMSERVINGSIM_VARIANT}/vllm-{meta.get('vllm_version')}"
        rows = []
        for tp in meta.get("tp_degrees") or [1]:
            d = bundle / f"tp{tp}"
            rows += convert_llmservingsim_dense(d / "dense.csv", gpu, model, tp, setup)
            rows += convert_llmservingsim_per_sequence(d / "per_sequence.csv", gpu, model, tp, setup)
            rows += convert_llmservingsim_attention(d / "attention.csv", gpu, model, tp, setup)
            if (d / "moe.csv").exists():
                rows += convert_llmservingsim_moe(d / "moe.csv", gpu, model, tp, setup,
                                                  cfg["num_experts_per_tok"])
            rows += convert_llmservingsim_skew(d / "skew.csv", gpu, model, tp, setup)
        name = f"llmservingsim_{gpu}_{model}"
        (Path(out_dir) / MOE_PROFILE_DIR).mkdir(parents=True, exist_ok=True)
        write_profile(rows, Path(out_dir) / MOE_PROFILE_DIR / f"{name}.csv.gz")
        counts[name] = len(rows)
    return counts


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
    if args.device:
        counts |= build_device(args.device, args.out)
    for name, n in counts.items():
        print(f"{name}: {n} rows")


def _row(source: str, gpu: str, setup: str, model: str, tp: int, op: str, ms: list[float],
         **ints: int) -> dict:
    row = {c: "" for c in COLUMNS}
    row.update(source=source, gpu=gpu, setup=setup, model=model, tp=tp, operation=op,
               src_rows=len(ms), seconds=_seconds(statistics.median(ms)))
    row.update(ints)
    return row


def _seconds(ms: float) -> str:
    """Milliseconds as seconds, 8 significant digits (the sources give at most 7, plus a median)."""
    return f"{ms / 1e3:.8g}"


def _lss_groups(path: str | Path, keys: tuple[str, ...], tokens_low: int) -> dict[tuple, list[float]]:
    """The ``time_us`` of an LLMServingSim CSV grouped by ``keys`` (sorted), every cell checked.

    The header must hold ``keys`` and ``time_us`` (a time column with another name or unit is
    refused); ``layer`` must be a known layer (:data:`LLMSERVINGSIM_LAYERS`), the other keys
    integers (``tokens``/``sequences`` >= ``max(tokens_low, 1)``, the attention axes >= 0, not
    both ``prefill_chunk`` and ``n_decode`` 0), the time finite and > 0. Errors name the file,
    the row (header = row 1) and the column.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    for col in (*keys, "time_us"):
        if col not in header:
            other = [h for h in header if h not in keys]
            hint = (f"; {', '.join(other)} is not a time in microseconds (the source writes time_us)"
                    if col == "time_us" and other else "")
            raise FieldError(f"{path}: header (row 1), column {col!r}", header, f"the column {col!r} "
                             f"(missing{hint})")
    groups: dict[tuple, list[float]] = defaultdict(list)
    for k, r in enumerate(rows):
        def where(col: str, line: int = k + 2) -> str:
            return f"{path}: row {line}, column {col!r}"

        key = []
        for col in keys:
            cell = (r.get(col) or "").strip()
            if col == "layer":
                if cell not in LLMSERVINGSIM_LAYERS:
                    raise FieldError(where(col), cell, f"one of {', '.join(LLMSERVINGSIM_LAYERS)}")
                key.append(cell)
                continue
            low = max(tokens_low, 1) if col in ("tokens", "sequences") else 0
            if not cell.isdigit() or int(cell) < low:
                raise FieldError(where(col), cell, f"an integer >= {low}")
            key.append(int(cell))
        axes = dict(zip(keys, key, strict=True))
        if axes.get("prefill_chunk") == axes.get("n_decode") == 0:
            raise FieldError(where("n_decode"), r.get("n_decode"),
                             "> 0 when prefill_chunk is 0 (an empty batch)")
        try:
            us = float(r.get("time_us") or "")
        except ValueError:
            us = math.nan
        if not (math.isfinite(us) and us > 0):
            raise FieldError(where("time_us"), r.get("time_us"), "a finite time > 0 in microseconds")
        groups[tuple(key)].append(us)
    return dict(sorted(groups.items()))


def _read_csv(path: str | Path) -> list[dict]:
    """The rows of a source CSV, exact duplicate rows dropped (the first copy kept)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    seen, unique = set(), []
    for r in rows:
        key = tuple(r.items())
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return unique


if __name__ == "__main__":  # pragma: no cover
    main()
