"""Time GeMMs in bf16 and in FP8 (e4m3) on one GPU: the data the precision term of the cost model needs.

Run on a machine with a CUDA GPU that has FP8 tensor cores (Ada, Hopper, Blackwell) and PyTorch,
from the repository root::

    python benchmarks/device/measure_fp8_gemm.py --gpu h200 --out OUTDIR [--quick]

It writes ``OUTDIR/fp8_gemm.csv`` and ``OUTDIR/fp8_gemm_meta.json``.

What is timed
-------------
``y = x W^T`` for the weight shapes ``d_row x d_red`` of the served layer of two models, one GPU,
TP 1: Llama-3.1-8B (``attn_pre_proj`` 6144 x 4096, ``attn_post_proj`` 4096 x 4096,
``mlp_up_proj`` 28672 x 4096, ``mlp_down_proj`` 4096 x 14336; the fused shapes of
:func:`theory.profiles.gemm_shape`) and one expert of Qwen3-30B-A3B (its public ``config.json``:
hidden size 2048, ``moe_intermediate_size`` 768; fused gate-up 1536 x 2048 and down 2048 x 768),
at ``tokens`` activation rows. Two precisions:

* ``bf16``: ``torch.nn.functional.linear(x, W)`` (cuBLAS);
* ``fp8``: ``torch._scaled_mm(x8, W8.t(), scale_a, scale_b, out_dtype=bfloat16)`` with ``x8`` and
  ``W8`` in ``float8_e4m3fn`` and one float32 scale per tensor (per-tensor scaling, as vLLM's
  default FP8 checkpoints; cuBLASLt's FP8 kernels). The quantisation of ``x`` is not timed.

How it is timed
---------------
As ``measure_steps.py`` times a step: one CUDA graph per point holding ``copies`` GeMMs on
independent operand sets, enough that one replay streams more than three times the L2 cache of
weights (a served layer's weights are not L2-resident); the graph is replayed once to warm up, then
``reps`` times between CUDA events; a row's time is the median of (replay time / copies).

Columns of ``fp8_gemm.csv``
---------------------------
``gpu`` llmq preset key; ``device`` the name PyTorch reports; ``model`` llmq model key (or
``qwen3-30b-a3b-expert``); ``operation`` the GeMM (names of :mod:`theory.profiles`);
``d_row``, ``d_red`` the weight's shape; ``tokens`` activation rows; ``precision`` ``bf16`` or
``fp8``; ``copies`` GeMMs per graph; ``seconds``, ``seconds_p10``, ``seconds_p90`` the median and
the 10th and 90th percentiles over the replays of one GeMM's time; ``reps`` replays; ``error``
empty, or why the point was not timed (then the time cells are empty).
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_profile import smi
from measure_steps import _stats, _time_graph, write_run

SHAPES = (  # (model, operation, d_row, d_red)
    ("llama-3.1-8b", "attn_pre_proj", 6144, 4096),
    ("llama-3.1-8b", "attn_post_proj", 4096, 4096),
    ("llama-3.1-8b", "mlp_up_proj", 28672, 4096),
    ("llama-3.1-8b", "mlp_down_proj", 4096, 14336),
    ("qwen3-30b-a3b-expert", "mlp_up_proj", 1536, 2048),
    ("qwen3-30b-a3b-expert", "mlp_down_proj", 2048, 768),
)
TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
COLUMNS = ("gpu", "device", "model", "operation", "d_row", "d_red", "tokens", "precision", "copies",
           "seconds", "seconds_p10", "seconds_p90", "reps", "error")


def _write(out: Path, rows: list[dict], meta: dict) -> None:
    """``fp8_gemm.csv`` and ``fp8_gemm_meta.json``, atomically (:func:`measure_steps.write_run`)."""
    write_run(out, rows, meta, ("fp8_gemm.csv", "fp8_gemm_meta.json"), COLUMNS)


def main(argv: list[str] | None = None) -> None:
    """Time every shape x token count x precision and write the CSV (the command of the docstring)."""
    t_start = time.monotonic()
    import torch
    from torch.nn import functional as nnf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", required=True, help="llmq GPU preset key of this card (e.g. h200)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="two shapes, three token counts")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=150.0,
                    help="no point is started after this many seconds from the script's start")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("a CUDA GPU is needed (FP8 GeMMs run on tensor cores only)")
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 0) or 64 << 20
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    meta = {"gpu_key": args.gpu, "device": props.name, "sm_count": props.multi_processor_count,
            "l2_bytes": l2, "torch": torch.__version__, "cuda": torch.version.cuda,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(), "smi_before": smi(),
            "reps": args.reps, "method": __doc__, "left_out": []}
    shapes = SHAPES[:1] + SHAPES[4:5] if args.quick else SHAPES
    tokens_grid = (1, 16, 1024) if args.quick else TOKENS
    rows: list[dict] = []
    one = torch.ones((), device=dev, dtype=torch.float32)
    try:
        for model, op, d_row, d_red in shapes:
            copies = max(1, min(64, math.ceil(3 * l2 / (d_row * d_red))))  # fp8 bytes; bf16 has twice
            ws = [torch.randn(d_row, d_red, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            w8s = [w.to(torch.float8_e4m3fn) for w in ws]
            for tokens in tokens_grid:
                if time.monotonic() - t_start > args.budget_s:
                    meta["left_out"].append({"model": model, "operation": op, "tokens": tokens,
                                             "why": "budget"})
                    continue
                xs = [torch.randn(tokens, d_red, device=dev, dtype=torch.bfloat16) for _ in ws]
                x8s = [x.to(torch.float8_e4m3fn) for x in xs]
                calls = {
                    "bf16": lambda xs=xs, ws=ws: [nnf.linear(x, w) for x, w in zip(xs, ws, strict=True)],
                    "fp8": lambda x8s=x8s, w8s=w8s: [
                        torch._scaled_mm(x, w.t(), one, one, out_dtype=torch.bfloat16)
                        for x, w in zip(x8s, w8s, strict=True)],
                }
                for precision, fn in calls.items():
                    row = {"gpu": args.gpu, "device": props.name, "model": model, "operation": op,
                           "d_row": d_row, "d_red": d_red, "tokens": tokens, "precision": precision,
                           "copies": copies, "error": ""}
                    try:
                        times = [t / copies for t in _time_graph(fn, dev, 1, args.reps)]
                        row |= _stats(times)
                    except RuntimeError as err:  # a shape the FP8 kernels refuse: recorded, not fatal
                        row["error"] = str(err).splitlines()[0][:200]
                    rows.append(row)
                print(f"[{time.monotonic() - t_start:6.1f} s] {model} {op} {d_row}x{d_red} tokens={tokens}: "
                      + ", ".join(f"{r['precision']} {float(r['seconds']) * 1e6:.1f} us" if r.get("seconds")
                                  else f"{r['precision']} failed" for r in rows[-2:]), flush=True)
                _write(args.out, rows, meta)
            del ws, w8s
            torch.cuda.empty_cache()
    finally:
        meta["smi_after"] = smi()
        meta["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
        meta["wall_s"] = time.monotonic() - t_start
        _write(args.out, rows, meta)
        print(f"{len(rows)} rows -> {args.out / 'fp8_gemm.csv'} ({meta['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
