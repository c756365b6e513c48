"""What ``llmq validate --serving`` prints and writes: per run and statistic, measured against
predicted with the error, the source's own simulator beside it, the KV blocks, the wall time of
each replay; ``serving.md``, ``serving.csv`` (with ``serving.columns.json``), ``serving.json``
(strict: no NaN; its ``files`` entry names every file written) and per replayed run the figure
``serving_<run>.png`` and the data it plots, ``serving_<run>_requests.csv`` and
``serving_<run>_queues.csv`` (:mod:`stability.serving.figures`)."""

from __future__ import annotations

from pathlib import Path

from stability.serving import figures
from stability.serving.score import RunScore
from theory.io import atomic_write_csv, atomic_write_json, atomic_write_text

SCHEMA = "llmq.serving/1"
COLUMNS = {
    "run": "the shipped serving run (theory/data/runs/<run>)",
    "gpu, model": "llmq GPU and model presets of the run",
    "metric": "ttft (arrival to first token), tpot (per output token after the first), latency "
              "(arrival to last token), as vLLM's benchmark client defines them; seconds",
    "statistic": "mean, p50, p90, p99 over the requests (np.mean, np.percentile)",
    "measured": "the statistic of the measured run (seconds)",
    "predicted": "the statistic of llmq's replay of the run (seconds)",
    "error": "predicted / measured - 1",
    "published": "the source's own simulator's prediction (LLMServingSim 2.0), seconds; empty: not "
                 "published",
    "published_error": "published / measured - 1; empty: not published",
}
FILES = {
    "serving.md": "the tables, one per run (Markdown)",
    "serving.csv": "one row per run, metric and statistic; its columns in serving.columns.json",
    "serving.json": "the same rows per run, with the run fields (run_fields) and this dictionary",
    "serving_<run>.png": "CDFs of TTFT, TPOT and latency, measured and llmq, and the running and waiting "
                         "requests over time (vLLM's log, the measured requests' count, llmq's)",
    "serving_<run>_requests.csv": "per request, measured and llmq TTFT, TPOT and latency (the CDF "
                                  "panels' data); columns in serving_<run>_requests.columns.json",
    "serving_<run>_queues.csv": "running and waiting requests over time (the queue panels' data); "
                                "columns in serving_<run>_queues.columns.json",
}
CSV_COLUMNS = ("run", "gpu", "model", "metric", "statistic", "measured", "predicted", "error", "published",
               "published_error")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def console_lines(scores: list[RunScore], scheduler: str) -> list[str]:
    """The table ``llmq validate --serving`` prints (one block per run)."""
    lines = [f"serving runs replayed on {scheduler} (real mode), measured vs predicted "
             f"(error = predicted / measured - 1; LLMServingSim 2.0's published error beside it)"]
    for s in scores:
        if s.skipped:
            lines.append(f"\n{s.run}: not replayed ({s.skipped})")
            continue
        kv = f"KV blocks {s.kv_blocks:,} "
        kv += (f"(vLLM {s.vllm_kv_blocks:,}: {s.kv_blocks / s.vllm_kv_blocks - 1:+.1%})" if s.vllm_kv_blocks
               else "(vLLM's not recorded)")
        lines.append(f"\n{s.run}: {s.gpu}, {s.model}; {kv}; {s.preemptions} preemptions; "
                     f"replay {s.wall_s:.2f} s; measured: {s.available}")
        lines.append(f"  {'metric':<8} {'stat':<5} {'measured':>10} {'llmq':>10} {'error':>8} "
                     f"{'LLMServingSim':>14}")
        for r in s.rows:
            lines.append(f"  {r.metric:<8} {r.statistic:<5} {r.measured:10.4f} {r.predicted:10.4f} "
                         f"{_pct(r.error):>8} {_pct(r.published_error):>14}")
    lines.append("(seconds; '-': not published)")
    return lines


def to_json(scores: list[RunScore], scheduler: str) -> dict:
    """The scores as a strict-JSON object with its column and file dictionaries."""
    runs = []
    for s in scores:
        offset = None if s.replay is None else figures.queues(s.replay).offset
        runs.append({"run": s.run, "gpu": s.gpu, "model": s.model, "skipped": s.skipped,
                     "kv_blocks": s.kv_blocks, "vllm_kv_blocks": s.vllm_kv_blocks,
                     "replay_wall_s": s.wall_s, "preemptions": s.preemptions, "logger_offset_s": offset,
                     "measured": s.available,
                     "rows": [{k: getattr(r, k) for k in CSV_COLUMNS if k not in ("run", "gpu", "model")}
                              for r in s.rows]})
    return {"schema": SCHEMA, "scheduler": scheduler, "mode": "real", "columns": COLUMNS, "files": FILES,
            "run_fields": {"skipped": "why the run was not replayed (null: it was)",
                           "kv_blocks": "KV blocks llmq derives from the GPU, model and memory share",
                           "vllm_kv_blocks": "num_gpu_blocks vLLM allocated (null: not recorded)",
                           "replay_wall_s": "wall seconds of the simulation",
                           "preemptions": "requests the replay preempted (recompute)",
                           "measured": "which measured statistics the run has: per request, or the "
                                       "source's published means only",
                           "logger_offset_s": "where vLLM's stat logger's clock starts on the requests' "
                                              "clock (stability.serving.figures.logger_offset); null: none"},
            "runs": runs}


def markdown(scores: list[RunScore], scheduler: str) -> str:
    """``serving.md``: one table per run."""
    out = [f"# Serving runs replayed on `{scheduler}`\n",
           "Error = predicted / measured - 1; LLMServingSim 2.0's published error beside it.\n"]
    for s in scores:
        if s.skipped:
            out.append(f"## {s.run}\n\nNot replayed: {s.skipped}.\n")
            continue
        out.append(f"## {s.run}\n\n{s.gpu}, {s.model}; KV blocks {s.kv_blocks:,} "
                   f"(vLLM: {s.vllm_kv_blocks or 'not recorded'}); {s.preemptions} preemptions; "
                   f"replay {s.wall_s:.2f} s; measured: {s.available}.\n")
        out.append("| metric | statistic | measured (s) | llmq (s) | error | LLMServingSim error |")
        out.append("|---|---|---:|---:|---:|---:|")
        out += [f"| {r.metric} | {r.statistic} | {r.measured:.4f} | {r.predicted:.4f} | {_pct(r.error)} | "
                f"{_pct(r.published_error)} |" for r in s.rows]
        out.append("")
    return "\n".join(out)


def _cell(x) -> object:
    return "" if x is None else x


def plot(s: RunScore, path: Path) -> Path:
    """The figure of a replayed run (:func:`stability.serving.figures.figure`) written to ``path``."""
    return figures.plot(s.replay, figures.queues(s.replay), path)


def write_outputs(scores: list[RunScore], scheduler: str, out: Path) -> list[Path]:
    """Write the files of :data:`FILES` (each CSV with its column dictionary)."""
    rows = [r for s in scores for r in s.rows]
    by_run = {s.run: s for s in scores}
    columns = {c: [] for c in CSV_COLUMNS}
    for r in rows:
        s = by_run[r.run]
        for c in CSV_COLUMNS:
            columns[c].append(_cell(getattr(s, c) if c in ("gpu", "model") else getattr(r, c)))
    dictionary = {c: COLUMNS["gpu, model"] if c in ("gpu", "model") else COLUMNS[c] for c in CSV_COLUMNS}
    paths = [atomic_write_csv(out / "serving.csv", columns, dictionary),
             atomic_write_json(out / "serving.json", to_json(scores, scheduler)),
             atomic_write_text(out / "serving.md", markdown(scores, scheduler))]
    for s in scores:
        if s.replay is not None:
            q = figures.queues(s.replay)
            paths += [figures.plot(s.replay, q, out / f"serving_{s.run}.png"),
                      *figures.write_data(s.replay, q, out)]
    return paths
