"""The figures a serving run's source published: the measured run's and the simulators' statistics.

``summary.txt`` (LLMServingSim's bench table: TTFT, TPOT, latency of vLLM and of LLMServingSim 2.0),
``reference_latency.tsv`` / ``llmservingsim_latency.tsv`` (published means) and
``reference_sim_time.tsv`` / ``llmservingsim_sim_time.tsv`` (simulation wall times) of a run folder
(:mod:`theory.validation.serving_runs` describes the layout), read as :class:`Figure` records.

References
----------
casys-kaist/LLMServingSim ``bench/core/validate.py`` (the summary table) at commit
5daddb21a545658d5150b535712d0494584b5278, ``evaluation/artifacts/figure_8/README.md`` (``X``: not
reported) at commit e0f4911.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from theory.errors import FieldError
from theory.validation.serving_io import read_cell, read_tsv

# latency TSV column -> (metric, statistic, scale to SI)
_LATENCY_COLUMNS = {"throughput_tok_s": ("output_throughput", "mean", 1.0),
                    "mean_ttft_ms": ("ttft", "mean", 1e-3), "mean_tpot_ms": ("tpot", "mean", 1e-3),
                    "mean_itl_ms": ("itl", "mean", 1e-3)}
SIMULATOR = "LLMServingSim 2.0"  # the simulator whose predictions the source publishes beside vLLM's
MEASURED = "vLLM"
_SUMMARY_LINE = re.compile(r"^(TTFT|TPOT|Latency) (Mean|Median|P90|P95|P99)\s+(\S+)\s+(\S+)\s+(\S+)%$")
_SUMMARY_METRICS = {"TTFT": "ttft", "TPOT": "tpot", "Latency": "latency"}
_SUMMARY_STATS = {"Mean": "mean", "Median": "p50", "P90": "p90", "P95": "p95", "P99": "p99"}


@dataclass(frozen=True)
class Figure:
    """One published figure of a run: ``value`` of ``statistic`` of ``metric`` by ``framework``.

    ``framework`` is :data:`MEASURED` (``"vLLM"``) for the measured run, else the simulator's name as
    the source spells it (:data:`SIMULATOR`, ``"Vidur"``, ``"APEX"``, ``"TokenSim"``; ``"LLMServingSim"``
    is its first version); ``metric`` one of ``ttft``, ``tpot``, ``latency``, ``itl`` (seconds),
    ``output_throughput`` (tokens/s), ``simulation_time`` (seconds); ``statistic`` one of
    :data:`theory.validation.serving_metrics.STATISTICS` or ``total``; ``file`` the run file it was read from.
    """

    framework: str
    metric: str
    statistic: str
    value: float
    file: str


def published_figures(folder: Path) -> tuple[Figure, ...]:
    """Every figure the run folder's source published, each file read and checked."""
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
            value = read_cell(f"{path}: row {k + 1}, column {framework!r}", cell, "float", 0.0)
            figures.append(Figure(framework, metric, stat, value * 1e-3, path.name))
        seen.add((metric, stat))
    missing = [f"{m} {s}" for m in _SUMMARY_METRICS for s in _SUMMARY_STATS
               if (_SUMMARY_METRICS[m], _SUMMARY_STATS[s]) not in seen]
    if missing:
        raise FieldError(f"{path}: row {missing[0]!r}", None, "a line '<metric> <stat> <vLLM> <Sim> <diff>%' "
                                                             "for each of TTFT, TPOT, Latency x Mean ... P99")
    return figures


def _latency_tsv(path: Path, framework: str | None) -> list[Figure]:
    header, rows = read_tsv(path)
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
            value = read_cell(f"{path}: row {k + 2}, column {col!r}", cell, "float", 0.0)
            figures.append(Figure(who, metric, stat, value * scale, path.name))
    return figures


def _sim_time_tsv(path: Path, framework: str | None) -> list[Figure]:
    header, rows = read_tsv(path)
    want = ["framework", "simulation_time_s"] if framework is None else ["simulation_time_s"]
    if header != want:
        raise FieldError(f"{path}: header (row 1)", header, f"the columns {', '.join(want)}")
    figures = []
    for k, row in enumerate(rows):
        cell = row["simulation_time_s"].strip()
        if cell == "X":
            continue
        value = read_cell(f"{path}: row {k + 2}, column 'simulation_time_s'", cell, "float", 0.0)
        who = framework or row["framework"].strip()
        figures.append(Figure(who, "simulation_time", "total", value, path.name))
    return figures
