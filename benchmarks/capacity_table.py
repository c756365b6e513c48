"""The certified capacity against simulation: every preset GPU x {paper, real} x {no overhead,
c_fix = 5 ms} x {padded, raw} Table-1 workload, Mistral-7B, one GPU.

Per cell (:func:`stability.attain.attain_cell`): the certified bound of :mod:`theory.capacity`
(no token budget, so it bounds every scheduler), Theorem 1's lambda*, the attaining policy
(Sarathi-Serve at the token budget the bound favours, chunks capped at the DP's split period) with
the gap ``epsilon`` its finite budget leaves, and the saturated throughput (3 seeded replicates at
1.5 x the bound, window from the 20% arrival to the last; completion count and work-weighted
estimate, 95% Student-t intervals) of the policy and of the region sweep's schedulers: RAD
(n = 2000), Sarathi-Serve (its defaults: budget 512, 128 sequences, KV memory on, 80% of the GPU)
and request-level batching. Verdicts: no scheduler's interval lies wholly above the bound, and
the policy's work-weighted mean is within max(1%, its half-width) of the bound.

The overhead cells use a GPU file per layer model written next to the outputs: a fixed time per
batch (``overhead_s = 0.005``, the kind of launch and CPU time that ``llmq calibrate`` fits) on the
law the mode prices, i.e. ``[gpus.<key>_c5ms] base = <key>`` for paper mode (the roofline preset)
and, for real mode, the preset's real-mode table (:func:`theory.hardware.gpu_table` with
``calibrated=True``: the shipped calibration, or the roofline with the terms of
``[real_mode.<tileset>]``) restated in full.

Writes ``capacity_table.csv`` (one row per cell and scheduler), ``capacity_table.json`` (cells
with every replicate, and what each column means) and ``capacity_table.md``; a finished cell is
cached in ``cells/`` and not recomputed. Run from the repository root::

    python benchmarks/capacity_table.py [--out out/capacity] [--gpu a100,l4] [--mode real]
        [--overhead 0|5ms] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import tomli_w

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stability.attain import CellOptions, attain_cell
from theory.hardware import gpu_names, gpu_table
from theory.io import atomic_write_csv, atomic_write_text

OVERHEAD_S = 0.005
COLUMNS = {
    "gpu": "GPU preset", "mode": "layer model (paper: Eq. 2-7 single head; real: GQA, SwiGLU)",
    "overhead_s": "fixed time per batch c_fix, s", "variant": "pad: prompts padded to t*_lcm; raw",
    "lambda_star": "Theorem 1's r / T_bar_R (ignores c_fix), req/s",
    "bound": "certified bound of theory.capacity, any scheduler, req/s",
    "budget": "attaining policy's token budget B", "max_chunk": "its largest prefill chunk",
    "epsilon": "1 - (bound with token budget B) / bound",
    "scheduler": "attain (the policy), rad (n = 2000), sarathi (defaults), request_level",
    "work_mean": "work-weighted saturated throughput / bound", "work_low": "95% CI low / bound",
    "work_high": "95% CI high / bound",
    "count_mean": "completion-count saturated throughput / bound", "count_low": "95% CI low / bound",
    "count_high": "95% CI high / bound",
    "saturated": "every replicate backlogged through its window",
    "none_exceeds": "no scheduler of the cell has a CI wholly above the bound",
    "attains": "the policy's work-weighted mean within max(1%, its half-width) of the bound",
}


def cells(gpus, quick: bool, modes=("paper", "real"), overheads=(0.0, OVERHEAD_S)):
    modes = ("paper",) if quick else modes
    variants = ("pad",) if quick else ("pad", "raw")
    for gpu in gpus:
        for mode in modes:
            for overhead in overheads:
                for variant in variants:
                    yield gpu, mode, overhead, variant


def overhead_file(out: Path, gpus, mode: str) -> Path:
    """The GPU file of ``mode``'s overhead cells: each preset's law in that mode plus ``OVERHEAD_S``
    per batch (module docstring)."""
    path = out / f"gpus_c5ms_{mode}.toml"
    if mode == "paper":
        text = "".join(f'[gpus.{g}_c5ms]\nbase = "{g}"\noverhead_s = {OVERHEAD_S!r}\n\n' for g in gpus)
    else:
        tables = {}
        for g in gpus:
            table = {k: v for k, v in gpu_table(g, calibrated=True).items() if k not in ("base", "aliases")}
            tables[f"{g}_c5ms"] = {**table, "aliases": [], "overhead_s": OVERHEAD_S}
        text = tomli_w.dumps({"gpus": tables})
    atomic_write_text(path, f"# the presets' {mode}-mode laws with a fixed time per batch "
                      f"(benchmarks/capacity_table.py)\n" + text)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/capacity")
    ap.add_argument("--gpu", default="all", help="comma-separated presets (default: all)")
    ap.add_argument("--quick", action="store_true", help="paper mode, padded prompts only")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--mode", default="paper,real", help="comma-separated layer models (default: both)")
    ap.add_argument("--overhead", default="both", choices=("both", "0", "5ms"),
                    help="cells without (0) or with (5ms) the fixed time per batch (default: both)")
    args = ap.parse_args(argv)
    modes = tuple(args.mode.split(","))
    if not modes or not set(modes) <= {"paper", "real"}:
        ap.error(f"--mode: expected paper, real or paper,real; given {args.mode!r}")
    overheads = {"both": (0.0, OVERHEAD_S), "0": (0.0,), "5ms": (OVERHEAD_S,)}[args.overhead]
    gpus = gpu_names() if args.gpu == "all" else tuple(args.gpu.split(","))
    out = Path(args.out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    gfiles = {mode: overhead_file(out, gpus, mode) for mode in modes}
    done, rows = [], []
    for gpu, mode, overhead, variant in cells(gpus, args.quick, modes, overheads):
        law = ("c5ms_on_real_law" if mode == "real" else "c5ms") if overhead else "c0"
        key = f"{gpu}_{mode}_{law}_{variant}_{args.replicates}x{args.requests}"
        path = out / "cells" / f"{key}.json"
        if path.exists():
            cell = json.loads(path.read_text())
        else:
            t = time.perf_counter()
            cell = attain_cell(f"{gpu}_c5ms" if overhead else gpu, mode, variant,
                               CellOptions(gpu_file=str(gfiles[mode]) if overhead else None,
                                           replicates=args.replicates, n_requests=args.requests))
            cell["gpu"], cell["elapsed_s"] = gpu, time.perf_counter() - t
            atomic_write_text(path, json.dumps(cell, indent=1))
        done.append(cell)
        print(f"{key}: bound {cell['bound']:.4g} req/s, none_exceeds {cell['none_exceeds']}, attains "
              f"{cell['attains']} ({cell['runs']['attain']['work'][0] / cell['bound']:.4f})", flush=True)
        for name, m in cell["runs"].items():
            b = cell["bound"]
            rows.append({**{k: cell[k] for k in ("gpu", "mode", "overhead_s", "variant", "lambda_star",
                                                 "bound", "budget", "max_chunk", "epsilon")},
                         "scheduler": name,
                         **{f"{est}_{s}": v / b for est in ("work", "count")
                            for s, v in zip(("mean", "low", "high"), m[est], strict=True)},
                         "saturated": m["saturated"], "none_exceeds": cell["none_exceeds"],
                         "attains": cell["attains"]})
    atomic_write_csv(out / "capacity_table.csv", {c: [r[c] for r in rows] for c in COLUMNS})
    atomic_write_text(out / "capacity_table.json", json.dumps(
        {"columns": COLUMNS, "cells": done}, indent=1))
    atomic_write_text(out / "capacity_table.md", markdown(rows))
    bad = [c for c in done if not (c["none_exceeds"] and c["attains"])]
    print(f"{len(done)} cells; {len(done) - len(bad)} with both verdicts holding")
    return 1 if bad else 0


def markdown(rows: list[dict]) -> str:
    head = ("| GPU | mode | c_fix | prompts | lambda* | bound | B | eps | attain | RAD | Sarathi | "
            "request-level |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    out, cell = [], {}
    for r in rows:
        cell.setdefault((r["gpu"], r["mode"], r["overhead_s"], r["variant"]), {})[r["scheduler"]] = r
    for (gpu, mode, c, v), by in cell.items():
        a = by["attain"]
        fmt = [f"{by[k]['work_mean']:.4f} ± {(by[k]['work_high'] - by[k]['work_low']) / 2:.4f}"
               for k in ("attain", "rad", "sarathi", "request_level")]
        out.append(f"| {gpu} | {mode} | {c * 1e3:g} ms | {v} | {a['lambda_star']:.4g} | "
                   f"{a['bound']:.4g} | {a['budget']} | {a['epsilon']:.4f} | " + " | ".join(fmt) + " |")
    return ("Saturated throughput / certified bound (work-weighted, mean ± 95% half-width); lambda* and "
            "the bound in req/s.\n\n" + head + "\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
