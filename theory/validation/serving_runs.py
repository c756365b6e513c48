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

The latency metrics of the requests, as vLLM's benchmark client defines them, are
:mod:`theory.validation.serving_metrics`'s; in ``requests.csv`` the arrival is ``queued_s``, the
anchor the source bench itself uses for these metrics (vLLM's ``arrival_time`` is on the wall
clock, the other times on the engine's monotonic clock). The figures the source published beside
the run: :mod:`theory.validation.serving_published`; the strict file readers:
:mod:`theory.validation.serving_io`.

References
----------
vllm-project/vllm ``vllm/engine/arg_utils.py`` (``EngineArgs.kv_cache_dtype =
CacheConfig.cache_dtype``) at commit 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b.
casys-kaist/LLMServingSim ``bench/core/validate.py`` (``_bench_latencies``: the metrics anchored
at ``queued_ts``), ``bench/core/runner.py`` and ``bench/core/recorder.py`` (the fields of
``meta.json``), commit 5daddb21a545658d5150b535712d0494584b5278.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError, UnknownNameError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.validation.serving_io import check_increasing, frozen, read_columns
from theory.validation.serving_published import Figure, published_figures

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
        timeseries = read_columns(folder / "timeseries.csv", TIMESERIES_COLUMNS)
        check_increasing(folder / "timeseries.csv", timeseries, "t", strict=True)
    elif (folder / "throughput.tsv").is_file():
        timeseries = _throughput(folder / "throughput.tsv")
    if (folder / "llmservingsim_throughput.tsv").is_file():
        simulated = _throughput(folder / "llmservingsim_throughput.tsv")
    return ServingRun(name=manifest["name"], path=str(folder), gpu=manifest["gpu"], gpus=manifest["gpus"],
                      hf_model=manifest["hf_model"], model=manifest["model"], source=manifest["source"],
                      engine_kwargs=engine_kwargs, resolved_config=resolved,
                      kv_cache=meta.get("kv_cache") or {}, meta=meta, trace=trace, requests=requests,
                      timeseries=timeseries, simulated_timeseries=simulated,
                      published=published_figures(folder))


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
    c = read_columns(path, TRACE_COLUMNS)
    n = c["request_id"].size
    bad = np.flatnonzero(c["request_id"] != np.arange(n))
    if bad.size:
        k = int(bad[0])
        raise FieldError(f"{path}: row {k + 2}, column 'request_id'", int(c["request_id"][k]),
                         f"{k} (request ids 0, 1, ... in file order)")
    check_increasing(path, c, "arrival_ns")
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
    return Trace(request_id=c["request_id"], arrival=frozen(c["arrival_ns"] / 1e9),
                 prompt_tokens=c["prompt_tokens"], output_tokens=c["output_tokens"],
                 shared_prefix_tokens=c["shared_prefix_tokens"], prefix_parent=parent)


def _requests(path: Path, trace: Trace) -> Requests:
    c = read_columns(path, REQUEST_COLUMNS)
    check_increasing(path, c, "queued_s")
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
    c = read_columns(path, THROUGHPUT_COLUMNS, delimiter="\t")
    check_increasing(path, c, "time_s", strict=True)
    return {"t": c["time_s"], "gen_throughput": c["throughput"]}


