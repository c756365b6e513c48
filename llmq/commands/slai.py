"""``llmq slai``: the paper's Section 7 experiment (SLAI vs Sarathi-Serve vs vLLM), side by side."""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from theory.errors import require_positive_int
from theory.io import claim_output_dir

HELP = ("reproduce Section 7: SLAI, Sarathi-serve and vLLM on Mistral-7B / RTX 6000 Ada; writes "
        "out/slai/ (figures, points.csv, paper_vs_llmq.csv and .md)")


def add_parser(sub) -> None:
    """Register ``llmq slai`` and its options on the sub-command parser ``sub``."""
    p = sub.add_parser("slai", help=HELP, description=HELP + ". Points are cached in out/slai/cache, "
                                                             "so an interrupted run resumes.")
    p.add_argument("--quick", action="store_true",
                   help="a small version (real layers, Table-1 lengths, 5%% and 95%% paying and "
                        "5%% with the weight-streaming floor; 2 replicates of 600 requests, 6 "
                        "rates): well under 2 minutes")
    p.add_argument("--out", default="out", help="output directory; results go to OUT/slai (default out)")
    p.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    p.add_argument("--seeds", type=int, help="replicates per point (default 4; quick 2)")
    p.add_argument("--requests", type=int, help="requests per run (default 4096; quick 600)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--json", action="store_true",
                   help="print the paper-vs-llmq table, the claims and the files as JSON")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(run=run)


def run(args) -> int:
    """Run ``llmq slai`` on the parsed ``args``; the exit code."""
    from tqdm import tqdm

    from llmq.output import out_dir, print_json
    from stability.runner import SweepInterrupted
    from stability.slai.report import n_points, run_study, write_outputs
    from stability.slai.study import FULL, QUICK
    from theory.io import json_load_exact

    study = QUICK if args.quick else FULL
    if args.seeds is not None:
        study = replace(study, seeds=require_positive_int("seeds", args.seeds))
    if args.requests is not None:
        study = replace(study, n_requests=require_positive_int("requests", args.requests))
    workers = require_positive_int("workers", args.workers)
    out = out_dir(args.out) / "slai"
    claim_output_dir(out, "slai", asdict(study))
    t0 = time.perf_counter()
    try:
        with tqdm(total=n_points(study), unit=" runs", desc="llmq slai",
                  disable=args.json or not args.progress) as bar:
            rows = run_study(study, out, workers, bar)
        written = write_outputs(study, rows, out, figures=not args.no_figures)
    except KeyboardInterrupt:  # wherever it lands: say what is cached and how to resume
        raise SweepInterrupted(out / "cache") from None
    if args.json:
        from stability.slai.analysis import paper_table

        print_json({"smoke_test": study.smoke, "paper_vs_llmq": paper_table(rows, study.panels),
                    "claims": json_load_exact((out / "claims.json").read_text(encoding="utf-8")),
                    "files": written, "elapsed_s": time.perf_counter() - t0})
        return 0
    print((out / "paper_vs_llmq.md").read_text(encoding="utf-8"))
    print(f"wrote {len(written)} files to {out} in {time.perf_counter() - t0:.0f} s")
    return 0
