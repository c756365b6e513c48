"""Converters from public measured serving runs to the run folders of :mod:`theory.validation.serving_runs`.

``python -m theory.validation.runs_convert --bench DIR --artifact DIR --out DIR`` rebuilds the
packaged run folders ``theory/data/runs/<source>_<gpu>_<model>/`` from two checkouts of
casys-kaist/LLMServingSim (MIT): ``--bench`` at commit :data:`BENCH_COMMIT` (its vLLM bench,
``bench/examples/<hardware>/<model>/``, and the request traces of ``workloads/``), ``--artifact``
at commit :data:`ARTIFACT_COMMIT` (the paper artifact's H100 Llama-3.1-70B TP 4 point,
``evaluation/artifacts/figure_8`` and ``figure_5/H100``, and its trace ``dataset/``).
``theory/data/runs/README.md`` records, per run, the source files, what each shipped file is and
the exact transformation; this module is that transformation.

What is dropped: the token ids of the traces (``input_tok_ids``, ``output_tok_ids``: ShareGPT text
tokenized, from a data set whose license is unverified). Kept from them: each prompt's longest
common token prefix with an earlier prompt (a count, :func:`shared_prefixes`), which is what
vLLM's prefix cache can reuse.

References
----------
casys-kaist/LLMServingSim ``bench/core/runner.py`` (what ``meta.json`` and ``requests.jsonl`` hold:
vLLM ``RequestStateStats``), ``bench/core/stat_logger.py`` (``timeseries.csv``),
``bench/core/validate.py`` and ``bench/core/plots.py`` (``summary.txt``), ``workloads/README.md``
(the trace format), commit 5daddb21a545658d5150b535712d0494584b5278; ``evaluation/figure_8.sh``,
``evaluation/figure_5.sh`` and ``evaluation/parser/parser_{latency,throughput}.py`` (the artifact's
files), commit e0f491188ed9d54bbfa73c702b60108be553d23a.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from theory.errors import ConfigFileError, FieldError

REPOSITORY = "casys-kaist/LLMServingSim"
BENCH_COMMIT = "5daddb21a545658d5150b535712d0494584b5278"
ARTIFACT_COMMIT = "e0f491188ed9d54bbfa73c702b60108be553d23a"
LICENSE_FILE = "LICENSE-llmservingsim.txt"
# ec099dc (2026-08-18, "Fix kv_cache_pct always reporting 0.0 in bench timeseries"): runs started
# before it wrote 0.0 in every kv_cache_pct cell, which is not a measurement
KV_PCT_FIXED_FROM = "2026-08-18"
# the run that records vLLM's whole resolved configuration: its field list is the known set
FIELDS_FROM = "llmservingsim_rtx4090_llama-3.1-8b"
FIELDS_FILE = "vllm_config_fields.json"
REQUEST_COLUMNS = ("request_id", "prompt_tokens", "output_tokens", "queued_s", "scheduled_s",
                   "first_token_s", "last_token_s", "arrival_wall_s")
TRACE_COLUMNS = ("request_id", "arrival_ns", "prompt_tokens", "output_tokens", "shared_prefix_tokens",
                 "prefix_parent")


@dataclass(frozen=True)
class BenchRun:
    """One example of LLMServingSim's vLLM bench: its folder and the llmq names of its GPU and model."""

    folder: str          # bench/examples/<folder>
    gpu: str             # llmq GPU preset key
    gpus: int            # GPUs the engine ran on (TP x DP)
    model: str | None    # llmq model preset key, None where llmq has none


BENCH_RUNS = {
    "llmservingsim_rtx4090_llama-3.1-8b": BenchRun("RTX4090/Llama-3.1-8B", "rtx4090", 1, "llama-3.1-8b"),
    "llmservingsim_rtxpro6000_llama-3.1-8b": BenchRun("RTXPRO6000/Llama-3.1-8B", "rtxpro6000", 1,
                                                      "llama-3.1-8b"),
    "llmservingsim_rtxpro6000_qwen3-32b": BenchRun("RTXPRO6000/Qwen3-32B", "rtxpro6000", 2, "qwen3-32b"),
    # a mixture of experts (DP 2 with expert parallelism); the preset's layer shapes are the
    # Instruct-2507 variant's (theory/data/models.toml, qwen3-30b-a3b)
    "llmservingsim_rtxpro6000_qwen3-30b-a3b": BenchRun("RTXPRO6000/Qwen3-30B-A3B-Instruct-2507", "rtxpro6000",
                                                       2, "qwen3-30b-a3b"),
}
ARTIFACT_RUN = "llmservingsim_h100_llama-3.1-70b"
ARTIFACT_MODEL = "llama-3.1-70b"  # llmq model preset of the artifact's meta-llama/Llama-3.1-70B
# the artifact's single-dense (SD) scenario: source path -> shipped file (copied byte for byte)
SD_CONFIG = "evaluation/artifacts/figure_8/config/SD_config.json"
ARTIFACT_FILES = {
    SD_CONFIG: "llmservingsim_config.json",
    "evaluation/artifacts/figure_8/reference/SD_latency.tsv": "reference_latency.tsv",
    "evaluation/artifacts/figure_8/reference/SD_sim_time.tsv": "reference_sim_time.tsv",
    "evaluation/artifacts/figure_8/parsed/SD_latency.tsv": "llmservingsim_latency.tsv",
    "evaluation/artifacts/figure_8/parsed/SD_sim_time.tsv": "llmservingsim_sim_time.tsv",
    "evaluation/artifacts/figure_5/H100/reference/SD+PC_throughput.tsv": "throughput.tsv",
    "evaluation/artifacts/figure_5/H100/parsed/SD+PC_throughput.tsv": "llmservingsim_throughput.tsv",
}
ARTIFACT_TRACE = "dataset/sharegpt_req300_rate10_llama.jsonl"  # DATASET_DENSE of evaluation/figure_8.sh


def shared_prefixes(prompts: list[list[int]]) -> tuple[list[int], list[int]]:
    """Each prompt's longest common token prefix with an earlier prompt, and that earlier prompt.

    Parameters
    ----------
    prompts : list of list of int
        The prompts' token ids, in arrival order.

    Returns
    -------
    shared, parent : list of int
        ``shared[i]`` = max over ``j < i`` of the length of the common prefix of prompts ``i`` and
        ``j`` (0 for the first), ``parent[i]`` the first ``j`` attaining it (-1 when ``shared[i]``
        is 0). A block-aligned part of ``shared[i]`` is what vLLM's prefix cache can reuse when
        prompt ``j``'s blocks are still cached (not decided here).
    """
    shared, parent = [], []
    for i, p in enumerate(prompts):
        best, who = 0, -1
        for j in range(i):
            q = prompts[j]
            n, k = min(len(p), len(q)), 0
            while k < n and p[k] == q[k]:
                k += 1
            if k > best:
                best, who = k, j
        shared.append(best)
        parent.append(who)
    return shared, parent


def convert_trace(path: str | Path) -> list[dict]:
    """Rows of ``trace.csv`` from an LLMServingSim flat-request JSONL workload.

    A source line holds ``input_toks``, ``output_toks``, ``arrival_time_ns`` and the token ids
    ``input_tok_ids`` (``output_tok_ids``); kept: ``request_id`` (the line's index, which the bench
    names ``bench-<index>``), ``arrival_ns``, ``prompt_tokens``, ``output_tokens`` as written, and
    :func:`shared_prefixes` of the prompts. The token ids are dropped. The id lists must have the
    stated lengths.
    """
    path = Path(path)
    rows, prompts = [], []
    for k, line in enumerate(_lines(path)):
        rec = json.loads(line)
        ids = rec.get("input_tok_ids")
        if not isinstance(ids, list) or len(ids) != rec["input_toks"]:
            raise FieldError(f"{path}: line {k + 1}, field 'input_tok_ids'", len(ids or []),
                             f"{rec['input_toks']} token ids (input_toks)")
        prompts.append(ids)
        rows.append({"request_id": k, "arrival_ns": int(rec["arrival_time_ns"]),
                     "prompt_tokens": int(rec["input_toks"]), "output_tokens": int(rec["output_toks"])})
    shared, parent = shared_prefixes(prompts)
    for row, s, p in zip(rows, shared, parent, strict=True):
        row["shared_prefix_tokens"] = s
        row["prefix_parent"] = "" if p < 0 else p
    return rows


def convert_requests(path: str | Path) -> list[dict]:
    """Rows of ``requests.csv`` from the bench's ``requests.jsonl`` (one vLLM request per line).

    A source line holds ``request_id`` (``bench-<index into the trace>``), ``input_toks``,
    ``output_toks`` and vLLM's ``RequestStateStats``: ``arrival_time`` (wall clock, epoch seconds,
    set by the front end) and ``queued_ts``, ``scheduled_ts``, ``first_token_ts``,
    ``last_token_ts`` (the engine's monotonic clock). The engine-clock times are written relative
    to the earliest ``queued_ts`` (``queued_s`` ...), ``arrival_time`` relative to the earliest
    ``arrival_time`` (``arrival_wall_s``, another clock), all to the nanosecond; rows sorted by
    ``queued_s`` (then ``request_id``).
    """
    path = Path(path)
    recs = []
    for k, line in enumerate(_lines(path)):
        rec = json.loads(line)
        for field in ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts"):
            if not isinstance(rec.get(field), (int, float)):
                raise FieldError(f"{path}: line {k + 1}, field {field!r}", rec.get(field),
                                 "a time in seconds")
        prefix, _, index = str(rec["request_id"]).partition("-")
        if prefix != "bench" or not index.isdigit():
            raise FieldError(f"{path}: line {k + 1}, field 'request_id'", rec["request_id"], "bench-<index>")
        recs.append((int(index), rec))
    t0 = min(r["queued_ts"] for _, r in recs)
    w0 = min(r["arrival_time"] for _, r in recs)
    rows = [{"request_id": i, "prompt_tokens": int(r["input_toks"]), "output_tokens": int(r["output_toks"]),
             "queued_s": _ns(r["queued_ts"] - t0), "scheduled_s": _ns(r["scheduled_ts"] - t0),
             "first_token_s": _ns(r["first_token_ts"] - t0), "last_token_s": _ns(r["last_token_ts"] - t0),
             "arrival_wall_s": _ns(r["arrival_time"] - w0)} for i, r in recs]
    return sorted(rows, key=lambda row: (float(row["queued_s"]), row["request_id"]))


def convert_timeseries(path: str | Path, started_at: str) -> str:
    """The text of ``timeseries.csv``: the bench's cells as written, lines ending in ``\\n`` (the
    source's end in ``\\r\\n``), and the ``kv_cache_pct`` cells emptied for a run started before
    :data:`KV_PCT_FIXED_FROM` (its logger wrote 0.0 for every tick)."""
    rows = list(csv.reader(io.StringIO(Path(path).read_text(encoding="utf-8"), newline="")))
    col = rows[0].index("kv_cache_pct")
    if started_at[:10] < KV_PCT_FIXED_FROM:
        if any(float(r[col]) != 0.0 for r in rows[1:]):
            raise FieldError(f"{path}: column 'kv_cache_pct'", "a non-zero cell",
                             f"0.0 everywhere in a run started before {KV_PCT_FIXED_FROM}")
        for r in rows[1:]:
            r[col] = ""
    return _csv_text(rows[0], [dict(zip(rows[0], r, strict=True)) for r in rows[1:]])


def config_fields(meta: dict) -> dict:
    """The field list of vLLM's resolved configuration in a bench ``meta.json``.

    Returns ``{"vllm_version", "resolved_config": {section: [fields] or None for a scalar}}``: the
    names :mod:`theory.validation.serving_runs` accepts in an engine configuration.
    """
    sections = {name: sorted(value) if isinstance(value, dict) else None
                for name, value in sorted(meta["resolved_config"].items())}
    return {"vllm_version": meta["vllm_version"], "resolved_config": sections}


def build_bench(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Write the folders of :data:`BENCH_RUNS` from a checkout of the bench's commit at ``root``.

    Per run: ``meta.json``, ``llmservingsim_config.json`` and ``summary.txt`` copied byte for byte;
    ``timeseries.csv`` (:func:`convert_timeseries`), ``requests.csv`` (:func:`convert_requests`),
    ``trace.csv`` (:func:`convert_trace` of the workload ``meta.json`` names, whose sha256 must be
    the ``dataset_hash`` it records) and ``run.json``; then :data:`FIELDS_FILE` from the run
    :data:`FIELDS_FROM`, and the repository's ``LICENSE`` as :data:`LICENSE_FILE`. Returns each
    run's request count.
    """
    root, out_dir = Path(root), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "LICENSE", out_dir / LICENSE_FILE)
    counts = {}
    for name, run in BENCH_RUNS.items():
        src = root / "bench/examples" / run.folder
        dst = out_dir / name
        dst.mkdir(parents=True, exist_ok=True)
        meta = json.loads((src / "vllm/meta.json").read_text(encoding="utf-8"))
        trace = root / meta["dataset_path"]
        digest = hashlib.sha256(trace.read_bytes()).hexdigest()
        if digest != meta["dataset_hash"]:
            raise FieldError(f"{trace}: sha256", digest, f"the dataset_hash of {src / 'vllm/meta.json'}")
        paths = {"meta.json": f"bench/examples/{run.folder}/vllm/meta.json",
                 "llmservingsim_config.json": f"bench/examples/{run.folder}/config.json",
                 "summary.txt": f"bench/examples/{run.folder}/validation/summary.txt",
                 "timeseries.csv": f"bench/examples/{run.folder}/vllm/timeseries.csv",
                 "requests.csv": f"bench/examples/{run.folder}/vllm/requests.jsonl",
                 "trace.csv": meta["dataset_path"]}
        for shipped in ("meta.json", "llmservingsim_config.json", "summary.txt"):
            shutil.copyfile(root / paths[shipped], dst / shipped)
        (dst / "timeseries.csv").write_text(convert_timeseries(root / paths["timeseries.csv"],
                                                               meta["started_at"]), encoding="utf-8")
        requests = convert_requests(root / paths["requests.csv"])
        (dst / "requests.csv").write_text(_csv_text(REQUEST_COLUMNS, requests), encoding="utf-8")
        (dst / "trace.csv").write_text(_csv_text(TRACE_COLUMNS, convert_trace(trace)), encoding="utf-8")
        _write_json(dst / "run.json", _manifest(name, BENCH_COMMIT, paths, run.gpu, run.gpus, meta["model"],
                                                run.model))
        counts[name] = len(requests)
    meta = json.loads((out_dir / FIELDS_FROM / "meta.json").read_text(encoding="utf-8"))
    _write_json(out_dir / FIELDS_FILE, {"from": f"{FIELDS_FROM}/meta.json", **config_fields(meta)})
    return counts


def build_artifact(root: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Write the folder :data:`ARTIFACT_RUN` from a checkout of the artifact's commit at ``root``.

    The files of :data:`ARTIFACT_FILES` copied byte for byte, ``trace.csv`` from
    :data:`ARTIFACT_TRACE` (:func:`convert_trace`) and ``run.json``, whose ``engine_kwargs`` hold
    what the artifact states of the engine (the model and four GPUs per instance,
    ``SD_config.json``): no vLLM configuration is recorded for this point.
    """
    root, dst = Path(root), Path(out_dir) / ARTIFACT_RUN
    dst.mkdir(parents=True, exist_ok=True)
    config = json.loads((root / SD_CONFIG).read_text(encoding="utf-8"))
    (instance,) = [i for node in config["nodes"] for i in node["instances"]]
    for path, shipped in ARTIFACT_FILES.items():
        shutil.copyfile(root / path, dst / shipped)
    trace = convert_trace(root / ARTIFACT_TRACE)
    (dst / "trace.csv").write_text(_csv_text(TRACE_COLUMNS, trace), encoding="utf-8")
    paths = {shipped: path for path, shipped in ARTIFACT_FILES.items()} | {"trace.csv": ARTIFACT_TRACE}
    manifest = _manifest(ARTIFACT_RUN, ARTIFACT_COMMIT, paths, "h100", instance["npu_num"],
                         instance["model_name"], ARTIFACT_MODEL)
    manifest["engine_kwargs"] = {"model": instance["model_name"], "tensor_parallel_size": instance["npu_num"]}
    _write_json(dst / "run.json", manifest)
    return {ARTIFACT_RUN: len(trace)}


def main(argv: list[str] | None = None) -> None:
    """Command line: rebuild the packaged run folders from checkouts of the source repository."""
    ap = argparse.ArgumentParser(prog="python -m theory.validation.runs_convert",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--bench", help=f"checkout of {REPOSITORY} at {BENCH_COMMIT[:7]}")
    ap.add_argument("--artifact", help=f"checkout of {REPOSITORY} at {ARTIFACT_COMMIT[:7]}")
    ap.add_argument("--out", default=str(Path(__file__).parents[1] / "data" / "runs"))
    args = ap.parse_args(argv)
    counts = {}
    if args.bench:
        counts |= build_bench(args.bench, args.out)
    if args.artifact:
        counts |= build_artifact(args.artifact, args.out)
    for name, n in counts.items():
        print(f"{name}: {n} requests")


def _manifest(name: str, commit: str, paths: dict, gpu: str, gpus: int, hf_model: str,
              model: str | None) -> dict:
    return {"name": name, "gpu": gpu, "gpus": gpus, "hf_model": hf_model, "model": model,
            "source": {"repository": REPOSITORY, "commit": commit, "license": "MIT",
                       "license_file": f"../{LICENSE_FILE}", "paths": paths}}


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    return [line for line in text.splitlines() if line.strip()]


def _ns(seconds: float) -> str:
    return f"{seconds:.9f}"


def _csv_text(columns, rows: list[dict]) -> str:
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()
