"""Converters from LLMServingSim's profiler bundles to the schema of :mod:`theory.profiles`.

Each ``convert_llmservingsim_*`` function takes one CSV of a bundle (from a checkout of the source
repository) and returns rows with the schema's columns (:mod:`theory.validation.profiles_rows`;
repeated measurements merged by their median); each bundle's ``meta.yaml`` is checked against the
llmq model preset (or, for a mixture of experts, the model's ``config.json``) first.
:func:`build_llmservingsim` and :func:`build_llmservingsim_moe` write the packaged files
(``python -m theory.validation.profiles_convert --llmservingsim DIR``), and
:func:`build_llmservingsim_v0` the element-wise layers of the first profiler's ``layers.csv``
(:func:`convert_llmservingsim_layers`).

Sources
-------
casys-kaist/LLMServingSim (MIT), ``profiler/perf/<hardware>/<model>/<variant>/tp<N>/{dense,
per_sequence,attention,moe,skew}.csv`` and the bundle's ``meta.yaml``: ``time_us`` in microseconds
(``docs/docs/profiler/output-bundle.md``, "Times are microseconds"), the CUDA kernel time vLLM's
layerwise profiler attributes to one module call of a one-layer model, averaged over the timed
forwards (``profiler/core/hooks/extension.py``, ``profiler/core/hooks/timings.py``);
``theory/data/profiles/README.md`` records the commits.

The same repository's first profiler (``llm_profile/`` at e0f491188ed9d54bbfa73c702b60108be553d23a,
kept as ``profiler/v0/`` at 5daddb2), ``perf_models/<hardware>/<model>/tp<N>/layers.csv``:
``latency(ns)`` in nanoseconds, the CUDA kernel time of one call of a Hugging Face transformers
module (``llm_profile/profiler/layers/main.py``, ``llm_profile/profiler/utils/record_function_tracer.py``).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

from theory.errors import ConfigFileError, FieldError
from theory.models import get_model
from theory.profiles import LLMSERVINGSIM_GEMMS, LLMSERVINGSIM_KERNELS, MOE_OPERATIONS
from theory.validation.profiles_rows import profile_row, read_source_csv, write_profile

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
# LLMServingSim's first profiler (llm_profile, Hugging Face transformers' eager modules):
# (hardware folder, model folder, TP degree) -> (GPU preset, model preset); the folders lie under
# LLMSERVINGSIM_V0_DIR in a checkout of 5daddb2 (llm_profile/perf_models/ at e0f4911, the same files)
LLMSERVINGSIM_V0_BUNDLES = {("H100", "meta-llama/Llama-3.1-70B", 4): ("h100", "llama-3.1-70b")}
LLMSERVINGSIM_V0_DIR = "profiler/v0/perf_models"
# its layers.csv names of the element-wise layers -> the schema's (LLMSERVINGSIM_KERNELS); its
# unfused GeMMs (q_proj, k_proj, v_proj, gate_proj, up_proj) and the rest are dropped
LLMSERVINGSIM_V0_KERNELS = {"embedding": "embedding", "input_layernorm": "layernorm",
                            "post_layernorm": "layernorm", "rope": "rotary_emb", "act_fn": "act_fn",
                            "final_layernorm": "final_layernorm"}
LLMSERVINGSIM_V0_DROPPED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                            "attn", "lm_head")
LLMSERVINGSIM_V0_COLUMNS = ("layer_name", "input", "kv_cache", "tp_size", "latency(ns)")
SKEW_SETUP = "skew"  # setup suffix of the rows of a bundle's skew.csv (a separate profiling session)


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
    return [profile_row("llmservingsim", gpu, setup, model, tp, layer, [us / 1e3 for us in times],
                        tokens=tokens)
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
    return [profile_row("llmservingsim", gpu, setup, model, tp, layer, [us / 1e3 for us in times], tokens=n)
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
        out.append(profile_row("llmservingsim", gpu, setup, model, tp, "attention",
                               [us / 1e3 for us in times], **cells))
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
        out.append(profile_row("llmservingsim", gpu, setup, model, tp, MOE_OPERATIONS[0],
                               [us / 1e3 for us in times], tokens=tokens, experts=experts))
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
    for k, r in enumerate(read_source_csv(path)):
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
        out.append(profile_row("llmservingsim", gpu, f"{setup}/{SKEW_SETUP}", model, tp, "attention",
                               [times["t_skew_us"] / 1e3], **cells, context=kvs, decodes_long=nb,
                               context_long=big))
        uniform[(pc, kp, n, v["kv_mean"])].append(times["t_mean_us"])
        uniform[(pc, kp, n, big)].append(times["t_max_us"])
    for (pc, kp, n, kv), us in sorted(uniform.items()):
        cells = {"tokens": pc + n, "decodes": n, "context": kv, **({"prefill_context": kp} if pc else {})}
        out.append(profile_row("llmservingsim", gpu, f"{setup}/{SKEW_SETUP}", model, tp, "attention",
                               [t / 1e3 for t in us], **cells))
    return out



def convert_llmservingsim_layers(path: str | Path, gpu: str, model: str, tp: int, setup: str) -> list[dict]:
    """Element-wise rows of a ``layers.csv`` of LLMServingSim's first profiler (``llm_profile``).

    A source row ``layer_name, input, kv_cache, tp_size, latency(ns)`` is the median, over the
    timed forwards, of the CUDA kernel time (summed durations of the kernels launched inside the
    layer's ``record_function`` range) of one call of a Hugging Face transformers module of one
    decoder layer, run eagerly in float16 on a prompt of ``input`` tokens with no KV history, the
    model's shapes divided by ``tp_size`` (one rank emulated on one GPU), in nanoseconds. Kept: the
    element-wise layers of :data:`LLMSERVINGSIM_V0_KERNELS`, under the schema's names (the two
    norms of a layer, ``input_layernorm`` and ``post_layernorm``, are both ``layernorm`` and merged
    by their median, the mean of the two); ``tokens = input``. Dropped:
    :data:`LLMSERVINGSIM_V0_DROPPED` (GeMMs unfused, unlike a served layer's; attention with no KV
    history). Every row must have ``kv_cache = 0`` and ``tp_size = tp``.

    References
    ----------
    casys-kaist/LLMServingSim ``llm_profile/profiler/layers/main.py`` (``run_profile``: one prompt of
    ``input`` tokens, ``kv_lengths = [0]``, ``latency(ns) = median x 10^6``),
    ``llm_profile/profiler/utils/record_function_tracer.py`` (CUDA time of a range) and
    ``llm_profile/models/llama.py`` (the timed ranges), commit
    e0f491188ed9d54bbfa73c702b60108be553d23a.
    """
    path = Path(path)
    rows = read_source_csv(path)
    header = list(rows[0]) if rows else []
    for col in LLMSERVINGSIM_V0_COLUMNS:
        if col not in header:
            raise FieldError(f"{path}: header (row 1), column {col!r}", header,
                             f"the column {col!r} (missing)")
    known = (*LLMSERVINGSIM_V0_KERNELS, *LLMSERVINGSIM_V0_DROPPED)
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for k, r in enumerate(rows):
        def where(col: str, line: int = k + 2) -> str:
            return f"{path}: row {line}, column {col!r}"

        layer = (r.get("layer_name") or "").strip()
        if layer not in known:
            raise FieldError(where("layer_name"), layer, f"one of {', '.join(known)}")
        cells = {}
        for col, low in (("input", 1), ("kv_cache", 0), ("tp_size", 1), ("latency(ns)", 1)):
            cell = (r.get(col) or "").strip()
            if not cell.isdigit() or int(cell) < low:
                raise FieldError(where(col), cell, f"an integer >= {low}")
            cells[col] = int(cell)
        if cells["kv_cache"] != 0:
            raise FieldError(where("kv_cache"), cells["kv_cache"], "0 (a prompt with no KV history)")
        if cells["tp_size"] != tp:
            raise FieldError(where("tp_size"), cells["tp_size"], f"{tp} (the bundle's TP degree)")
        if layer in LLMSERVINGSIM_V0_KERNELS:
            groups[(LLMSERVINGSIM_V0_KERNELS[layer], cells["input"])].append(cells["latency(ns)"] / 1e6)
    return [profile_row("llmservingsim", gpu, setup, model, tp, op, ms, tokens=tokens)
            for (op, tokens), ms in sorted(groups.items())]



def build_llmservingsim_v0(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Convert the ``layers.csv`` of :data:`LLMSERVINGSIM_V0_BUNDLES` in an LLMServingSim checkout
    at ``root`` (:func:`convert_llmservingsim_layers`) into ``llmservingsim_<gpu>.csv.gz`` in
    ``out_dir``, every bundle of one GPU together; returns the row count of each file."""
    by_gpu: dict[str, list[dict]] = defaultdict(list)
    for (hardware, folder, tp), (gpu, model) in LLMSERVINGSIM_V0_BUNDLES.items():
        path = Path(root) / LLMSERVINGSIM_V0_DIR / hardware / folder / f"tp{tp}" / "layers.csv"
        setup = f"{hardware}/fp16/transformers-eager"
        by_gpu[gpu] += convert_llmservingsim_layers(path, gpu, model, tp, setup)
    counts = {}
    for gpu, rows in by_gpu.items():
        write_profile(rows, Path(out_dir) / f"llmservingsim_{gpu}.csv.gz")
        counts[f"llmservingsim_{gpu}"] = len(rows)
    return counts



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

