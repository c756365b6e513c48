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
    add(p, "--no-figures", True, "skip the PNG figures", action="store_false")
    add(p, "--json", False, "the paper-vs-llmq table, the claims and the files")
    add(p, "--no-progress", True)
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``llmq slai`` on the parsed ``args``; the exit code."""
    from tqdm import tqdm

    from llmq.output import out_dir, print_json
    from stability.runner import SweepInterrupted
    from stability.slai.report import n_points, run_study, write_outputs
    from stability.slai.study import FULL, QUICK, select_panels
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
    out = out_dir(values["out"]) / "slai"
    claim_output_dir(out, "slai", asdict(study))
    t0 = time.perf_counter()
    try:
        with tqdm(total=n_points(study), unit=" runs", desc="llmq slai",
                  disable=values["json"] or not values["progress"]) as bar:
            rows = run_study(study, out, workers, bar)
        written = write_outputs(study, rows, out, figures=values["figures"])
    except KeyboardInterrupt:  # wherever it lands: say what is cached and how to resume
        raise SweepInterrupted(out / "cache") from None
    if values["json"]:
        from stability.slai.analysis import paper_table

        print_json({"smoke_test": study.smoke, "paper_vs_llmq": paper_table(rows, study.panels),
                    "claims": json_load_exact((out / "claims.json").read_text(encoding="utf-8")),
                    "files": written, "elapsed_s": time.perf_counter() - t0})
        return 0
    print((out / "paper_vs_llmq.md").read_text(encoding="utf-8"))
    print(f"wrote {len(written)} files to {out} in {time.perf_counter() - t0:.0f} s")
    return 0
