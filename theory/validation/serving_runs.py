"""Measured serving runs: the shipped runs, a validating loader, and the latency metrics of benchmark clients.

A serving run is one replay of a request trace through a real serving engine, measured per
request. The packaged runs live in ``theory/data/runs/<source>_<gpu>_<model>/``; their README
gives the source repository, commit, license, every file's columns and the exact transformation;
:mod:`theory.validation.runs_convert` rebuilds them. :func:`load_run` reads a packaged run by name
or any folder in the same layout, and checks every file before returning.

Files of a run folder (``run.json`` and ``trace.csv`` required, the others where the source has them):

========================== ===================================================================================
file                       what it holds
========================== ===================================================================================
run.json                   manifest: ``name``, ``gpu`` (llmq GPU preset), ``gpus`` (GPUs the engine ran
                           on), ``hf_model``, ``model`` (llmq model preset or null), ``source``
                           (``repository``, ``commit``, ``license``, ``license_file``, ``paths``);
                           ``engine_kwargs`` where there is no ``meta.json``
trace.csv                  the input trace: ``request_id`` (0, 1, ... in file order), ``arrival_ns`` (ns
                           from the trace's origin, non-decreasing), ``prompt_tokens``, ``output_tokens``
                           (>= 1), ``shared_prefix_tokens`` (the prompt's longest common token prefix
                           with an earlier prompt), ``prefix_parent`` (that earlier request, empty if none)
meta.json                  the bench's record of the vLLM engine: ``engine_kwargs`` (vLLM ``EngineArgs``),
                           and where recorded ``kv_cache``, ``hardware``, ``resolved_config`` (vLLM's
                           ``VllmConfig`` after start-up, one object per sub-config)
requests.csv               measured, one row per request: ``request_id`` (row of ``trace.csv``),
                           ``prompt_tokens``, ``output_tokens``, ``queued_s``, ``scheduled_s``,
                           ``first_token_s``, ``last_token_s`` (vLLM's ``RequestStateStats`` on the engine's
                           clock, seconds from the earliest ``queued_s``; rows in ``queued_s`` order),
                           ``arrival_wall_s`` (the front end's wall-clock arrival, seconds from the earliest)
timeseries.csv             measured, one row per second: ``t`` (end of the second), ``prompt_throughput``,
                           ``gen_throughput`` (tokens/s), ``running``, ``waiting`` (requests, summed over
                           data-parallel engines), ``kv_cache_pct`` (empty where not recorded)
summary.txt                the source's published table: TTFT, TPOT, latency (ms; mean, median, P90, P95, P99)
                           of the measured run (``vLLM``) and of LLMServingSim 2.0 (``Sim``)
reference_latency.tsv      published means (``throughput_tok_s``, ``mean_ttft_ms``, ``mean_tpot_ms``) of the
                           measured run (``vLLM``) and of other simulators, ``X`` where not reported;
                           ``llmservingsim_latency.tsv`` the same (and ``mean_itl_ms``) for LLMServingSim 2.0
reference_sim_time.tsv     published simulation wall times (s); ``llmservingsim_sim_time.tsv``: LLMServingSim
                           2.0's
throughput.tsv             measured generation throughput per second (``time_s``, ``throughput``);
                           ``llmservingsim_throughput.tsv`` LLMServingSim 2.0's
========================== ===================================================================================

The engine configuration's names are checked against the fields vLLM's resolved configuration
holds in the shipped run that records it (``theory/data/runs/vllm_config_fields.json``), plus
``kv_cache_dtype`` (``EngineArgs``'s name for ``cache_config.cache_dtype``).

Metrics, as vLLM's benchmark client defines them (times in seconds, per request): :func:`ttft`
from arrival to the first token; :func:`tpot` per output token after the first; :func:`latency`
from arrival to the last token; :func:`itl` every gap between consecutive tokens after the first;
:func:`statistics` their mean and percentiles. In ``requests.csv`` the arrival is ``queued_s``,
the anchor the source bench itself uses for these metrics (vLLM's ``arrival_time`` is on the wall
clock, the other times on the engine's monotonic clock).

References
----------
vllm-project/vllm ``vllm/benchmarks/serve.py`` (``calculate_metrics``: TPOT = (latency - TTFT) /
(output_len - 1) for output_len > 1; ``np.mean``, ``np.percentile``) at commit
def9ce85ba1079af970a58ed3d42dd861ae35d58; ``vllm/benchmarks/lib/endpoint_request_func.py``
(``async_request_openai_completions``: ``ttft`` = first chunk - start, ``itl`` = the gaps after
it, ``latency`` = last chunk - start) at commit 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602;
``vllm/engine/arg_utils.py`` (``EngineArgs.kv_cache_dtype = CacheConfig.cache_dtype``) at commit
99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b. casys-kaist/LLMServingSim ``bench/core/validate.py``
(``_bench_latencies``: the same three definitions, anchored at ``queued_ts``),
``bench/core/runner.py`` and ``bench/core/recorder.py`` (the fields of ``meta.json``), commit
5daddb21a545658d5150b535712d0494584b5278.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError, UnknownNameError
from theory.hardware import get_gpu
from theory.io import read_csv_table
from theory.models import get_model

STATISTICS = ("mean", "p50", "p90", "p95", "p99")
_PACKAGED = ("data", "runs")
FIELDS_FILE = "vllm_config_fields.json"
# engine argument -> the resolved field it sets, where the names differ (vllm/engine/arg_utils.py)
ENGINE_ARG_ALIASES = {"kv_cache_dtype": "cache_config.cache_dtype"}
# the bench's meta.json (bench/core/recorder.py write_meta, bench/core/runner.py _kv_cache_facts,
# _hardware_facts)
META_KEYS = ("schema_version", "model", "vllm_version", "engine_kwargs", "dataset_path", "dataset_hash",
             "num_requests", "started_at", "finished_at", "tick_seconds", "kv_cache", "hardware",
             "resolved_config")
KV_CACHE_KEYS = ("num_gpu_blocks", "num_cpu_blocks", "block_size", "gpu_memory_utilization",
                 "enable_prefix_caching", "kv_cache_memory_bytes", "num_kv_tokens")
HARDWARE_KEYS = ("torch_version", "cuda_version", "device_count", "device_name", "device_total_memory_bytes",
                 "device_capability", "error")
MANIFEST_KEYS = {"name": str, "gpu": str, "gpus": int, "hf_model": str, "model": (str, type(None)),
                 "source": dict, "engine_kwargs": dict}
MANIFEST_REQUIRED = ("name", "gpu", "gpus", "hf_model", "model", "source")
SOURCE_REQUIRED = ("repository", "commit", "license", "license_file", "paths")
# column: (kind, smallest value); kinds: int, int? (empty = absent), float, float? (empty = NaN)
TRACE_COLUMNS = {"request_id": ("int", 0), "arrival_ns": ("int", 0), "prompt_tokens": ("int", 1),
                 "output_tokens": ("int", 1), "shared_prefix_tokens": ("int", 0),
                 "prefix_parent": ("int?", 0)}
REQUEST_COLUMNS = {"request_id": ("int", 0), "prompt_tokens": ("int", 1), "output_tokens": ("int", 1),
                   "queued_s": ("float", 0.0), "scheduled_s": ("float", 0.0), "first_token_s": ("float", 0.0),
                   "last_token_s": ("float", 0.0), "arrival_wall_s": ("float", 0.0)}
TIMESERIES_COLUMNS = {"t": ("float", 0.0), "prompt_throughput": ("float", 0.0),
                      "gen_throughput": ("float", 0.0), "running": ("int", 0), "waiting": ("int", 0),
                      "kv_cache_pct": ("float?", 0.0)}
THROUGHPUT_COLUMNS = {"time_s": ("float", 0.0), "throughput": ("float", 0.0)}
# summary.txt: "<Metric> <Stat>  <vLLM>  <Sim>  <Diff%>" (bench/core/plots.py write_summary)
_SUMMARY_LINE = re.compile(r"^(TTFT|TPOT|Latency) (Mean|Median|P90|P95|P99)\s+(\S+)\s+(\S+)\s+(\S+)%$")
_SUMMARY_METRICS = {"TTFT": "ttft", "TPOT": "tpot", "Latency": "latency"}
_SUMMARY_STATS = {"Mean": "mean", "Median": "p50", "P90": "p90", "P95": "p95", "P99": "p99"}
# latency TSV column -> (metric, statistic, scale to SI)
_LATENCY_COLUMNS = {"throughput_tok_s": ("output_throughput", "mean", 1.0),
                    "mean_ttft_ms": ("ttft", "mean", 1e-3), "mean_tpot_ms": ("tpot", "mean", 1e-3),
                    "mean_itl_ms": ("itl", "mean", 1e-3)}
SIMULATOR = "LLMServingSim 2.0"  # the simulator whose predictions the source publishes beside vLLM's
MEASURED = "vLLM"


# --- the metrics, as benchmark clients define them --------------------------------------------


def ttft(arrival: np.ndarray, first_token: np.ndarray) -> np.ndarray:
    """Time to first token of each request: ``first_token - arrival`` (seconds).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.ttft =
    time.perf_counter() - st`` at the first streamed chunk) at commit
    3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602.
    """
    return np.asarray(first_token, dtype=float) - np.asarray(arrival, dtype=float)


def tpot(first_token: np.ndarray, last_token: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Time per output token of each request, the first token excluded:
    ``(last_token - first_token) / (output_tokens - 1)``; NaN where ``output_tokens <= 1`` (vLLM
    leaves those requests out of its TPOT statistics).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/serve.py`` (``calculate_metrics``: ``latency_minus_ttft /
    (output_len - 1)`` when ``output_len > 1``) at commit def9ce85ba1079af970a58ed3d42dd861ae35d58.
    """
    out = np.asarray(output_tokens, dtype=float)
    gap = np.asarray(last_token, dtype=float) - np.asarray(first_token, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(out > 1, gap / (out - 1), np.nan)


def latency(arrival: np.ndarray, last_token: np.ndarray) -> np.ndarray:
    """End-to-end latency of each request: ``last_token - arrival`` (vLLM's E2EL, seconds).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.latency =
    most_recent_timestamp - st``) at commit 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602.
    """
    return np.asarray(last_token, dtype=float) - np.asarray(arrival, dtype=float)


def itl(token_times: Sequence[np.ndarray]) -> np.ndarray:
    """Inter-token latencies: every gap between consecutive tokens of a request after its first,
    all requests' gaps concatenated (seconds).

    Parameters
    ----------
    token_times : sequence of arrays
        Per request, the times its output tokens arrived, in order (the first is the first token).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.itl.append(
    timestamp - most_recent_timestamp)`` for every chunk after the first) and
    ``vllm/benchmarks/serve.py`` (``itls += outputs[i].itl``), commits as in the module docstring.
    """
    gaps = [np.diff(np.asarray(t, dtype=float)) for t in token_times]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def statistics(values: np.ndarray) -> dict[str, float]:
    """Mean and the 50th, 90th, 95th and 99th percentiles of ``values``, NaN entries left out.

    Percentiles interpolate linearly between order statistics (``numpy.percentile``'s default),
    as vLLM's benchmark client and LLMServingSim's bench summary compute them.

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/serve.py`` (``np.mean``, ``np.percentile``) at commit
    def9ce85ba1079af970a58ed3d42dd861ae35d58; casys-kaist/LLMServingSim ``bench/core/plots.py``
    (``_percentile``) at commit 5daddb21a545658d5150b535712d0494584b5278.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if not x.size:
        return dict.fromkeys(STATISTICS, math.nan)
    return {"mean": float(x.mean()), **{f"p{q}": float(np.percentile(x, q)) for q in (50, 90, 95, 99)}}


# --- the records -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Trace:
    """The input trace of a run (arrays of one length, read-only).

    Attributes
    ----------
    request_id : numpy.ndarray
        0, 1, ... (int64).
    arrival : numpy.ndarray
        Arrival times in seconds from the trace's origin, non-decreasing.
    prompt_tokens, output_tokens : numpy.ndarray
        Lengths (int64, >= 1).
    shared_prefix_tokens : numpy.ndarray
        The prompt's longest common token prefix with an earlier prompt (int64).
    prefix_parent : numpy.ndarray
        That earlier request's id, -1 where none (int64).
    """

    request_id: np.ndarray
    arrival: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    shared_prefix_tokens: np.ndarray
    prefix_parent: np.ndarray


@dataclass(frozen=True, eq=False)
class Requests:
    """The measured requests of a run (arrays of one length, read-only; times in seconds).

    Attributes
    ----------
    request_id : numpy.ndarray
        Index into the run's :class:`Trace` (int64).
    prompt_tokens, output_tokens : numpy.ndarray
        Lengths (int64).
    arrival, scheduled, first_token, last_token : numpy.ndarray
        The engine's clock: queued, first scheduled, first and last output token (``requests.csv``'s
        ``queued_s`` ... ``last_token_s``); ``arrival`` non-decreasing.
    arrival_wall : numpy.ndarray
        The front end's wall-clock arrival, from its own origin.
    """

    request_id: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival: np.ndarray
    scheduled: np.ndarray
    first_token: np.ndarray
    last_token: np.ndarray
    arrival_wall: np.ndarray


@dataclass(frozen=True)
class Figure:
    """One published figure of a run: ``value`` of ``statistic`` of ``metric`` by ``framework``.

    ``framework`` is :data:`MEASURED` (``"vLLM"``) for the measured run, else the simulator's name as
    the source spells it (:data:`SIMULATOR`, ``"Vidur"``, ``"APEX"``, ``"TokenSim"``; ``"LLMServingSim"``
    is its first version); ``metric`` one of ``ttft``, ``tpot``, ``latency``, ``itl`` (seconds),
    ``output_throughput`` (tokens/s), ``simulation_time`` (seconds); ``statistic`` one of
    :data:`STATISTICS` or ``total``; ``file`` the run file it was read from.
    """

    framework: str
    metric: str
    statistic: str
    value: float
    file: str


@dataclass(frozen=True, eq=False)
class ServingRun:
    """A loaded serving run (:func:`load_run`).

    Attributes
    ----------
    name, path : str
        The run's name and folder.
    gpu : str
        llmq GPU preset key of the card; ``gpus`` how many the engine ran on.
    hf_model : str
        The model served (Hugging Face id); ``model`` its llmq preset key, None where llmq has none.
    source : dict
        Repository, commit, license, license file and the source path of each file.
    engine_kwargs : dict
        The engine arguments the run passed (vLLM ``EngineArgs`` names).
    resolved_config : dict
        vLLM's resolved configuration, one object per sub-config; empty where not recorded.
    kv_cache : dict
        The KV cache vLLM allocated (``num_gpu_blocks``, ``block_size`` ...); empty where not recorded.
    meta : dict
        The whole ``meta.json``; empty where the run has none.
    trace : Trace
        The input trace.
    requests : Requests or None
        The measured requests; None where the source publishes only aggregates.
    timeseries : dict or None
        Measured per-second columns (``t``, ``gen_throughput``, and for the bench ``prompt_throughput``,
        ``running``, ``waiting``, ``kv_cache_pct``) as arrays.
    simulated_timeseries : dict or None
        The same columns as LLMServingSim 2.0 published them, where shipped.
    published : tuple of Figure
        Every published figure of the run.
    """

    name: str
    path: str
    gpu: str
    gpus: int
    hf_model: str
    model: str | None
    source: dict
    engine_kwargs: dict
    resolved_config: dict
    kv_cache: dict
    meta: dict
    trace: Trace
    requests: Requests | None
    timeseries: dict | None
    simulated_timeseries: dict | None
    published: tuple[Figure, ...]

    def figure(self, framework: str, metric: str, statistic: str) -> float:
        """The published value of ``statistic`` of ``metric`` by ``framework`` (see :class:`Figure`)."""
        for f in self.published:
            if (f.framework, f.metric, f.statistic) == (framework, metric, statistic):
                return f.value
        have = sorted({f"{f.framework}/{f.metric}/{f.statistic}" for f in self.published})
        raise FieldError(f"run {self.name}: figure", f"{framework}/{metric}/{statistic}",
                         f"one of {', '.join(have) or 'none (nothing published)'}")


# --- loading -----------------------------------------------------------------------------------


def shipped_runs() -> dict[str, Path]:
    """The packaged runs, ``{name: folder}``."""
    folder = resources.files("theory").joinpath(*_PACKAGED)
    found = {entry.name: Path(str(entry)) for entry in folder.iterdir()
             if entry.is_dir() and entry.joinpath("run.json").is_file()}
    return dict(sorted(found.items()))


def load_run(name: str | Path) -> ServingRun:
    """Read and check a serving run: a packaged one by name (:func:`shipped_runs`) or a run folder.

    Raises
    ------
    ConfigFileError
        A missing, empty or malformed file.
    FieldError
        A bad field, naming the file, the row (header = row 1) and the column or key: a missing,
        duplicated or unknown column; a cell that is not a number of its kind or is below its
        least value (negative times, zero lengths); arrivals out of order; an engine
        configuration name vLLM's resolved configuration does not hold; a request longer than
        the context window; a measured request whose lengths differ from its trace row.
    """
    shipped = shipped_runs()
    folder = shipped.get(str(name), Path(name))
    if not (folder / "run.json").is_file():
        raise FieldError("run", str(name),
                         f"a shipped run ({', '.join(shipped)}) or a folder with a run.json")
    manifest = _manifest(folder / "run.json")
    meta = _meta(folder / "meta.json") if (folder / "meta.json").is_file() else {}
    if meta and "engine_kwargs" in manifest:
        raise FieldError(f"{folder / 'run.json'}: field 'engine_kwargs'", manifest["engine_kwargs"],
                         "no value: the engine arguments are meta.json's where the run has one")
    engine_kwargs = meta.get("engine_kwargs", manifest.get("engine_kwargs", {}))
    _check_engine_kwargs(folder / ("meta.json" if meta else "run.json"), engine_kwargs)
    resolved = meta.get("resolved_config") or {}
    trace = _trace(folder / "trace.csv")
    _check_context(folder / "trace.csv", trace, _context_limit(manifest, engine_kwargs, resolved))
    requests = _requests(folder / "requests.csv", trace) if (folder / "requests.csv").is_file() else None
    timeseries = simulated = None
    if (folder / "timeseries.csv").is_file():
        timeseries = _read_columns(folder / "timeseries.csv", TIMESERIES_COLUMNS)
        _check_increasing(folder / "timeseries.csv", timeseries, "t", strict=True)
    elif (folder / "throughput.tsv").is_file():
        timeseries = _throughput(folder / "throughput.tsv")
    if (folder / "llmservingsim_throughput.tsv").is_file():
        simulated = _throughput(folder / "llmservingsim_throughput.tsv")
    return ServingRun(name=manifest["name"], path=str(folder), gpu=manifest["gpu"], gpus=manifest["gpus"],
                      hf_model=manifest["hf_model"], model=manifest["model"], source=manifest["source"],
                      engine_kwargs=engine_kwargs, resolved_config=resolved,
                      kv_cache=meta.get("kv_cache") or {}, meta=meta, trace=trace, requests=requests,
                      timeseries=timeseries, simulated_timeseries=simulated, published=_published(folder))


def _json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigFileError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ConfigFileError(f"{path}: expected a JSON object")
    return obj


def _manifest(path: Path) -> dict:
    m = _json(path)
    for key in m:
        if key not in MANIFEST_KEYS:
            raise FieldError(f"{path}: field {key!r}", m[key],
                             f"a manifest field ({', '.join(MANIFEST_KEYS)})")
    for key in MANIFEST_REQUIRED:
        if key not in m:
            raise FieldError(f"{path}: field {key!r}", None, "a value (missing)")
    for key, kind in MANIFEST_KEYS.items():
        if key in m and (not isinstance(m[key], kind) or isinstance(m[key], bool)):
            raise FieldError(f"{path}: field {key!r}", m[key], f"a {kind}")
    if m["gpus"] < 1:
        raise FieldError(f"{path}: field 'gpus'", m["gpus"], "an integer >= 1")
    for key in SOURCE_REQUIRED:
        if key not in m["source"]:
            raise FieldError(f"{path}: field 'source.{key}'", None, "a value (missing)")
    for key, getter in (("gpu", get_gpu), ("model", get_model)):
        if m[key] is None:
            continue
        try:
            getter(m[key])
        except UnknownNameError as exc:
            raise FieldError(f"{path}: field {key!r}", m[key], f"an llmq preset ({exc})") from None
    return m


def _meta(path: Path) -> dict:
    meta = _json(path)
    for key in meta:
        if key not in META_KEYS:
            raise FieldError(f"{path}: field {key!r}", meta[key], f"a field of the bench's meta.json "
                                                                  f"({', '.join(META_KEYS)})")
    if not isinstance(meta.get("engine_kwargs"), dict):
        raise FieldError(f"{path}: field 'engine_kwargs'", meta.get("engine_kwargs"), "an object")
    for key, known in (("kv_cache", KV_CACHE_KEYS), ("hardware", HARDWARE_KEYS)):
        for name in meta.get(key) or {}:
            if name not in known:
                raise FieldError(f"{path}: field '{key}.{name}'", meta[key][name],
                                 f"one of {', '.join(known)}")
    fields = _config_fields()
    for section, value in (meta.get("resolved_config") or {}).items():
        if section not in fields["resolved_config"]:
            raise FieldError(f"{path}: field 'resolved_config.{section}'", value,
                             f"a sub-config of vLLM {fields['vllm_version']}'s resolved configuration "
                             f"({', '.join(fields['resolved_config'])})")
        known = fields["resolved_config"][section]
        for name in value if isinstance(value, dict) and known is not None else ():
            if name not in known:
                raise FieldError(f"{path}: field 'resolved_config.{section}.{name}'", value[name],
                                 f"a field of vLLM {fields['vllm_version']}'s {section} ({', '.join(known)})")
    return meta


def _config_fields() -> dict:
    return _json(Path(str(resources.files("theory").joinpath(*_PACKAGED, FIELDS_FILE))))


def _check_engine_kwargs(path: Path, kwargs: dict) -> None:
    fields = _config_fields()
    known = {f for names in fields["resolved_config"].values() for f in names or ()} | set(ENGINE_ARG_ALIASES)
    for name, value in kwargs.items():
        if name not in known:
            raise FieldError(f"{path}: field 'engine_kwargs.{name}'", value,
                             f"a field of vLLM {fields['vllm_version']}'s resolved configuration "
                             f"({FIELDS_FILE}) or {', '.join(ENGINE_ARG_ALIASES)}")


def _context_limit(manifest: dict, kwargs: dict, resolved: dict) -> tuple[int, str] | None:
    """The longest request the engine admits, and where that number comes from."""
    model_config = resolved.get("model_config") or {}
    if isinstance(model_config.get("max_model_len"), int):
        return model_config["max_model_len"], "resolved_config.model_config.max_model_len"
    if isinstance(kwargs.get("max_model_len"), int):
        return kwargs["max_model_len"], "engine_kwargs.max_model_len"
    if manifest["model"] and get_model(manifest["model"]).context_length:
        return get_model(manifest["model"]).context_length, f"the context_length of {manifest['model']}"
    return None


def _check_context(path: Path, trace: Trace, limit: tuple[int, str] | None) -> None:
    if limit is None:
        return
    total = trace.prompt_tokens + trace.output_tokens
    over = np.flatnonzero(total > limit[0])
    if over.size:
        k = int(over[0])
        raise FieldError(f"{path}: row {k + 2}, column 'output_tokens'", int(trace.output_tokens[k]),
                         f"prompt_tokens + output_tokens <= {limit[0]} ({limit[1]}); the prompt has "
                         f"{int(trace.prompt_tokens[k])}")


def _trace(path: Path) -> Trace:
    c = _read_columns(path, TRACE_COLUMNS)
    n = c["request_id"].size
    bad = np.flatnonzero(c["request_id"] != np.arange(n))
    if bad.size:
        k = int(bad[0])
        raise FieldError(f"{path}: row {k + 2}, column 'request_id'", int(c["request_id"][k]),
                         f"{k} (request ids 0, 1, ... in file order)")
    _check_increasing(path, c, "arrival_ns")
    over = np.flatnonzero(c["shared_prefix_tokens"] > c["prompt_tokens"])
    if over.size:
        k = int(over[0])
        raise FieldError(f"{path}: row {k + 2}, column 'shared_prefix_tokens'",
                         int(c["shared_prefix_tokens"][k]),
                         f"at most prompt_tokens = {int(c['prompt_tokens'][k])}")
    parent = c["prefix_parent"]
    bad = np.flatnonzero((parent >= c["request_id"]) | ((parent < 0) != (c["shared_prefix_tokens"] == 0)))
    if bad.size:
        k = int(bad[0])
        raise FieldError(f"{path}: row {k + 2}, column 'prefix_parent'", int(parent[k]),
                         "an earlier request_id where shared_prefix_tokens > 0, empty where it is 0")
    return Trace(request_id=c["request_id"], arrival=_frozen(c["arrival_ns"] / 1e9),
                 prompt_tokens=c["prompt_tokens"], output_tokens=c["output_tokens"],
                 shared_prefix_tokens=c["shared_prefix_tokens"], prefix_parent=parent)


def _requests(path: Path, trace: Trace) -> Requests:
    c = _read_columns(path, REQUEST_COLUMNS)
    _check_increasing(path, c, "queued_s")
    for later, earlier in (("scheduled_s", "queued_s"), ("first_token_s", "scheduled_s"),
                           ("last_token_s", "first_token_s")):
        bad = np.flatnonzero(c[later] < c[earlier])
        if bad.size:
            k = int(bad[0])
            raise FieldError(f"{path}: row {k + 2}, column {later!r}", float(c[later][k]),
                             f">= {earlier} = {float(c[earlier][k])!r}")
    ids = c["request_id"]
    seen = np.zeros(trace.request_id.size, dtype=bool)
    for k, i in enumerate(ids.tolist()):
        if i >= seen.size or seen[i]:
            raise FieldError(f"{path}: row {k + 2}, column 'request_id'", i,
                             f"a request of the trace (0 to {seen.size - 1}), once")
        seen[i] = True
        for col in ("prompt_tokens", "output_tokens"):
            if c[col][k] != getattr(trace, col)[i]:
                raise FieldError(f"{path}: row {k + 2}, column {col!r}", int(c[col][k]),
                                 f"{int(getattr(trace, col)[i])} (trace.csv, request {i})")
    return Requests(request_id=ids, prompt_tokens=c["prompt_tokens"], output_tokens=c["output_tokens"],
                    arrival=c["queued_s"], scheduled=c["scheduled_s"], first_token=c["first_token_s"],
                    last_token=c["last_token_s"], arrival_wall=c["arrival_wall_s"])


def _throughput(path: Path) -> dict:
    c = _read_columns(path, THROUGHPUT_COLUMNS, delimiter="\t")
    _check_increasing(path, c, "time_s", strict=True)
    return {"t": c["time_s"], "gen_throughput": c["throughput"]}


def _check_increasing(path: Path, c: dict, col: str, strict: bool = False) -> None:
    x = c[col]
    bad = np.flatnonzero(x[1:] <= x[:-1]) if strict else np.flatnonzero(x[1:] < x[:-1])
    if bad.size:
        k = int(bad[0]) + 1
        raise FieldError(f"{path}: row {k + 2}, column {col!r}", x[k].item(),
                         f"{'>' if strict else '>='} {x[k - 1].item()!r} (the previous row's: rows in "
                         "time order)")


def _read_columns(path: Path, spec: dict, delimiter: str = ",") -> dict[str, np.ndarray]:
    """The columns of ``spec`` of a CSV (TSV) file as read-only arrays, every cell checked."""
    if delimiter == ",":
        header, rows = read_csv_table(path, f"the columns {', '.join(spec)}")
    else:
        header, rows = _read_tsv(path)
    where = f"{path}: header (row 1)"
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise FieldError(f"{where}, column {dup[0]!r}", header, "each column once")
    missing = [c for c in spec if c not in header]
    if missing:
        raise FieldError(f"{where}, column {missing[0]!r}", header,
                         f"the column(s) {', '.join(missing)} (missing)")
    unknown = [h for h in header if h not in spec]
    if unknown:
        raise FieldError(f"{where}, column {unknown[0]!r}", header, f"only the columns {', '.join(spec)}")
    out = {}
    for col, (kind, low) in spec.items():
        values = [_cell(f"{path}: row {k + 2}, column {col!r}", (row.get(col) or "").strip(), kind, low)
                  for k, row in enumerate(rows)]
        out[col] = _frozen(np.array(values, dtype=np.int64 if kind.startswith("int") else float))
    return out


def _cell(where: str, text: str, kind: str, low: float) -> float:
    if not text and kind.endswith("?"):
        return -1 if kind == "int?" else math.nan
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    integer = kind.startswith("int")
    if not math.isfinite(value) or value < low or (integer and not value.is_integer()):
        raise FieldError(where, text, f"{'an integer' if integer else 'a finite number'} >= {low}")
    return int(value) if integer else value


def _read_tsv(path: Path) -> tuple[list[str], list[dict]]:
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    if not lines:
        raise ConfigFileError(f"{path}: empty file")
    header = [h.strip() for h in lines[0].split("\t")]
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:]]


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _published(folder: Path) -> tuple[Figure, ...]:
    figures: list[Figure] = []
    if (folder / "summary.txt").is_file():
        figures += _summary(folder / "summary.txt")
    for name, framework in (("reference_latency.tsv", None), ("llmservingsim_latency.tsv", SIMULATOR)):
        if (folder / name).is_file():
            figures += _latency_tsv(folder / name, framework)
    for name, framework in (("reference_sim_time.tsv", None), ("llmservingsim_sim_time.tsv", SIMULATOR)):
        if (folder / name).is_file():
            figures += _sim_time_tsv(folder / name, framework)
    return tuple(figures)


def _summary(path: Path) -> list[Figure]:
    """The figures of the bench's ``summary.txt`` (ms in the file, seconds here); all 15 rows required."""
    figures, seen = [], set()
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        m = _SUMMARY_LINE.match(line.strip())
        if not m:
            continue
        metric, stat = _SUMMARY_METRICS[m[1]], _SUMMARY_STATS[m[2]]
        for framework, cell in ((MEASURED, m[3]), (SIMULATOR, m[4])):
            value = _cell(f"{path}: row {k + 1}, column {framework!r}", cell, "float", 0.0)
            figures.append(Figure(framework, metric, stat, value * 1e-3, path.name))
        seen.add((metric, stat))
    missing = [f"{m} {s}" for m in _SUMMARY_METRICS for s in _SUMMARY_STATS
               if (_SUMMARY_METRICS[m], _SUMMARY_STATS[s]) not in seen]
    if missing:
        raise FieldError(f"{path}: row {missing[0]!r}", None, "a line '<metric> <stat> <vLLM> <Sim> <diff>%' "
                                                             "for each of TTFT, TPOT, Latency x Mean ... P99")
    return figures


def _latency_tsv(path: Path, framework: str | None) -> list[Figure]:
    header, rows = _read_tsv(path)
    known = ({"framework"} if framework is None else set()) | set(_LATENCY_COLUMNS)
    for h in header:
        if h not in known:
            raise FieldError(f"{path}: header (row 1), column {h!r}", header,
                             f"columns among {', '.join(known)}")
    figures = []
    for k, row in enumerate(rows):
        who = framework or row.get("framework", "").strip()
        for col, (metric, stat, scale) in _LATENCY_COLUMNS.items():
            cell = (row.get(col) or "").strip()
            if col not in header or cell == "X":  # not reported (evaluation/artifacts/figure_8/README.md)
                continue
            value = _cell(f"{path}: row {k + 2}, column {col!r}", cell, "float", 0.0)
            figures.append(Figure(who, metric, stat, value * scale, path.name))
    return figures


def _sim_time_tsv(path: Path, framework: str | None) -> list[Figure]:
    header, rows = _read_tsv(path)
    want = ["framework", "simulation_time_s"] if framework is None else ["simulation_time_s"]
    if header != want:
        raise FieldError(f"{path}: header (row 1)", header, f"the columns {', '.join(want)}")
    figures = []
    for k, row in enumerate(rows):
        cell = row["simulation_time_s"].strip()
        if cell == "X":
            continue
        value = _cell(f"{path}: row {k + 2}, column 'simulation_time_s'", cell, "float", 0.0)
        who = framework or row["framework"].strip()
        figures.append(Figure(who, "simulation_time", "total", value, path.name))
    return figures
