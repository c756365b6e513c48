"""``llmq slai``: the paper's Section 7 experiment (SLAI vs Sarathi-Serve vs vLLM), side by side."""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from llmq.options import add, command, resolve
from theory.errors import require_positive_int
from theory.io import claim_output_dir

HELP = ("reproduce Section 7: SLAI, Sarathi-serve and vLLM on Mistral-7B / RTX 6000 Ada; writes "
        "out/slai/ (figures, points.csv, paper_vs_llmq.csv and .md)")


def add_parser(sub) -> None:
    """Register ``llmq slai`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "slai", HELP, HELP + ". Points are cached in out/slai/cache, so an interrupted run "
                                          "resumes.")
    add(p, "--quick", False, "real layers, Table-1 lengths, 5%% and 95%% paying and 5%% with the "
                             "weight-streaming floor; 2 replicates of 600 requests, 6 rates: well under "
                             "2 minutes")
    add(p, "--out", "out", "results go to OUT/slai (default out)", metavar="DIR")
    add(p, "--workers", 2, "default 2")
    add(p, "--seeds", None, "default 4; quick 2")
    add(p, "--requests", None, "default 4096; quick 600")
    add(p, "--panels", None, "comma-separated panel keys to run (default: every panel of the study, e.g. "
                             "real_table1_5pct,real_sharegpt4_5pct)")
    add(p, "--engine", None, "price the real panels with the serving engine's own costs: 'sarathi' (the "
                             "paper's engine: host time per step from its Fig. 5a, tokens padded to 8) "
                             "or a TOML file with an [engine] table (engine_step_s, pad_multiple, "
                             "frontend_s); results go to OUT/slai-engine", metavar="NAME|FILE")
    add(p, "--engine-sweep", None, "comma-separated host times per step in ms: Sarathi-FCFS and SLAI "
                                   "capacities on the first panel at each, with --engine's other terms "
                                   "(default sarathi); writes engine_sweep.csv/.md", metavar="MS,...")
    add(p, "--no-figures", True, "skip the PNG figures", action="store_false")
    add(p, "--json", False, "the paper-vs-llmq table, the claims and the files")
    add(p, "--no-progress", True)
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``llmq slai`` on the parsed ``args``; the exit code."""
    from tqdm import tqdm

    from llmq.output import out_dir, print_json
    from stability.runner import SweepInterrupted
    from stability.slai import sensitivity
    from stability.slai.engine import paper_engine, read_engine
    from stability.slai.report import n_points, run_study, write_outputs
    from stability.slai.study import FULL, QUICK, select_panels, with_engine
    from theory.io import json_load_exact

    values = resolve(args)
    study = QUICK if values["quick"] else FULL
    if values["seeds"] is not None:
        study = replace(study, seeds=require_positive_int("--seeds", values["seeds"]))
    if values["requests"] is not None:
        study = replace(study, n_requests=require_positive_int("--requests", values["requests"]))
    if values["panels"] is not None:
        study = select_panels(study, values["panels"])
    workers = require_positive_int("--workers", values["workers"])
    sweep = (sensitivity.step_values(values["engine_sweep"]) if values["engine_sweep"] is not None
             else ())
    engine = read_engine(values["engine"]) if values["engine"] is not None else None
    if sweep and engine is None:
        engine = paper_engine()
    if engine is not None:
        study = with_engine(study, engine)
    out = out_dir(values["out"]) / ("slai" if engine is None else "slai-engine")
    claim_output_dir(out, "slai", asdict(study), adds={"engine_sweep_ms": [v * 1e3 for v in sweep]})
    t0 = time.perf_counter()
    try:
        total = n_points(study) + (sensitivity.n_points(study, sweep) if sweep else 0)
        with tqdm(total=total, unit=" runs", desc="llmq slai",
                  disable=values["json"] or not values["progress"]) as bar:
            rows = run_study(study, out, workers, bar)
            table = sensitivity.run_sweep(study, engine, sweep, out, workers, bar) if sweep else []
        written = write_outputs(study, rows, out, figures=values["figures"])
        if sweep:
            written.update(sensitivity.write_sweep(table, out, study.panels[0].label))
    except KeyboardInterrupt:  # wherever it lands: say what is cached and how to resume
        raise SweepInterrupted(out / "cache") from None
    if values["json"]:
        from stability.slai.analysis import paper_table

        print_json({"smoke_test": study.smoke, "paper_vs_llmq": paper_table(rows, study.panels),
                    "engine_sweep": table,
                    "claims": json_load_exact((out / "claims.json").read_text(encoding="utf-8")),
                    "files": written, "elapsed_s": time.perf_counter() - t0})
        return 0
    print((out / "paper_vs_llmq.md").read_text(encoding="utf-8"))
    if sweep:
        print((out / "engine_sweep.md").read_text(encoding="utf-8"))
    print(f"wrote {len(written)} files to {out} in {time.perf_counter() - t0:.0f} s")
    return 0
