"""Section 7's capacities against the engine's host time per step (``llmq slai --engine-sweep``).

No public figure measures the paper's engine's host time alone (:mod:`stability.slai.engine`), so
besides the run at the value estimated from Fig. 5a, this shows which value would be needed: on one
panel, Sarathi-Serve (FCFS)'s and SLAI (SPF, dynamic)'s serving capacities and SLAI's gain, each
with its 95% interval over replicates (:func:`stability.slai.analysis.capacities`), at each
``engine_step_s`` of a list, the engine's other terms as given. Only these two policies run.

References
----------
Bari, Hegde, de Veciana (2025), Section 7 (the serving capacities of Sarathi-Serve and SLAI).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from stability.slai.analysis import PAPER, capacities, ci
from stability.slai.engine import EngineCosts
from stability.slai.study import (
    BASELINE,
    SLAI_DYNAMIC,
    Panel,
    Study,
    panel_gpu_file,
    rates,
    run_tasks,
    tasks_at,
)
from theory.errors import FieldError
from theory.io import atomic_write_csv, atomic_write_text

POLICIES = (BASELINE, SLAI_DYNAMIC)
COLUMNS = {
    "panel": "panel key (as in points.csv)",
    "engine_step_ms": "ms; the engine's host time per step",
    **{
        f"{k}{s}": f"{what}{tail}"
        for k, what in (
            ("cap_sarathi", "req/s; capacity of Sarathi-serve (FCFS)"),
            ("cap_slai", "req/s; capacity of SLAI (SPF, dynamic offset)"),
            ("gain_pct", "%; SLAI's capacity gain over Sarathi-serve (FCFS), paired per replicate"),
        )
        for s, tail in (
            ("", ", mean over replicates"),
            ("_lo", ", lower limit of the 95% t-interval"),
            ("_hi", ", upper limit of the 95% t-interval"),
        )
    },
    "paper_cap_sarathi": "req/s; the paper's",
    "paper_cap_slai": "req/s; the paper's",
}


def step_values(text) -> tuple[float, ...]:
    """``engine_step_s`` values in seconds from milliseconds, comma-separated (or a list)."""
    expected = "comma-separated host times per step in ms, each a finite number >= 0, e.g. 0,2.5,5"
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        ms = [float(x) for x in items if str(x).strip()]
    except (TypeError, ValueError):
        raise FieldError("--engine-sweep", text, expected) from None
    if not ms or any(not math.isfinite(x) or x < 0 for x in ms):
        raise FieldError("--engine-sweep", text, expected)
    return tuple(sorted({x / 1e3 for x in ms}))


def panels(panel: Panel, engine: EngineCosts, values_s) -> list[Panel]:
    """``panel`` priced with ``engine`` at each host time of ``values_s``."""
    return [replace(panel, engine=replace(engine, engine_step_s=v)) for v in values_s]


def n_points(study: Study, values_s) -> int:
    """Points the sweep simulates (its panel is the study's first)."""
    return len(values_s) * len(POLICIES) * study.seeds * len(rates(study, study.panels[0]))


def run_sweep(
    study: Study, engine: EngineCosts, values_s, out: str | Path, workers: int = 1, bar=None
) -> list[dict]:
    """Capacities at each host time on the study's first panel (points cached in ``out/cache``);
    one row per value (:data:`COLUMNS`)."""
    out = Path(out)
    tasks = []
    chosen = panels(study.panels[0], engine, values_s)
    for p in chosen:
        tasks += tasks_at(study, p, rates(study, p), panel_gpu_file(p, out)[1], POLICIES)
    rows = run_tasks(tasks, out / "cache", workers, bar)
    paper = PAPER.get(study.panels[0].paying, {})
    table = []
    for p in chosen:
        cb, cs = capacities(rows, p.key, BASELINE), capacities(rows, p.key, SLAI_DYNAMIC)
        gain = [100 * (cs[s] / cb[s] - 1) for s in cb if s in cs and cb[s] > 0]
        row = {"panel": p.key, "engine_step_ms": p.engine.engine_step_s * 1e3}
        for name, values in (("cap_sarathi", cb.values()), ("cap_slai", cs.values()), ("gain_pct", gain)):
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = ci(list(values))
        row["paper_cap_sarathi"] = paper.get("cap_base", math.nan)
        row["paper_cap_slai"] = paper.get("cap_slai", math.nan)
        table.append(row)
    return table


def write_sweep(table: list[dict], out: str | Path, label: str) -> dict:
    """``engine_sweep.csv`` (with its data dictionary) and ``engine_sweep.md``; {name: path}."""
    out = Path(out)

    def cell(r, k):
        return f"{r[k]:.3g} [{r[k + '_lo']:.3g}, {r[k + '_hi']:.3g}]"

    lines = [
        f"# Section 7 capacities against the engine's host time per step ({label})",
        "",
        "| host time per step [ms] | Sarathi-serve (FCFS) [req/s] | SLAI (SPF, dynamic) [req/s] | gain [%] |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r['engine_step_ms']:.3g} | {cell(r, 'cap_sarathi')} | {cell(r, 'cap_slai')} | "
        f"{cell(r, 'gain_pct')} |"
        for r in table
    ]
    if table and math.isfinite(table[0]["paper_cap_sarathi"]):
        lines += [
            "",
            f"The paper: {table[0]['paper_cap_sarathi']:g} and {table[0]['paper_cap_slai']:g} req/s.",
        ]
    return {
        "sweep_csv": str(
            atomic_write_csv(out / "engine_sweep.csv", {k: [r[k] for r in table] for k in COLUMNS}, COLUMNS)
        ),
        "sweep_md": str(atomic_write_text(out / "engine_sweep.md", "\n".join(lines) + "\n")),
    }
