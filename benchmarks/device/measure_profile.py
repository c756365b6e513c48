"""Measure GeMM and whole-batch times on one GPU, in llmq's profile schema (``theory.profiles``).

Run on a machine with a CUDA GPU and PyTorch, from the repository root::

    python benchmarks/device/measure_profile.py --gpu h200 --out OUTDIR [--quick]

It writes ``OUTDIR/profile.csv`` (one row per measurement; the schema of :mod:`theory.profiles`,
``source = llmq``) and ``OUTDIR/meta.json`` (the machine, the software, the clocks read before and
after, the method). ``theory/data/profiles/README.md`` describes the shipped result and how it was
turned into the packaged file.

What is timed
-------------
* **GeMMs** (``attn_pre_proj``, ``attn_post_proj``, ``mlp_up_proj``, ``mlp_down_proj``, ``lm_head``):
  ``torch.nn.functional.linear(x, W)`` in fp16 (cuBLAS, as the serving stacks call it), ``x`` of
  ``tokens x d_red`` and ``W`` of the one-GPU weight shape ``d_row x d_red`` that
  :func:`theory.profiles.gemm_shape` gives for the model and tensor-parallel degree (a TP shard is
  timed alone on one GPU, as vidur profiles it; no communication). Token counts follow vidur's grid
  (1, 2, 4, every 8 to 1,024, every 16 to 2,048, every 32 to 4,096; ``lm_head``: up to 512).
* **Whole batches at TP 1** (``prefill_batch``, ``decode_batch``): the forward pass of the whole
  model with random fp16 weights (embedding gather, per layer RMSNorm, fused QKV GeMM, rotary
  embedding, FlashAttention through ``scaled_dot_product_attention``, output GeMM, residual add,
  RMSNorm, fused gate-up GeMM, SiLU-and-multiply, down GeMM, residual add; final RMSNorm and the LM
  head on the last token of each sequence). ``prefill_batch``: ``tokens / context`` prompts of
  ``context`` tokens each, causal. ``decode_batch``: ``tokens`` sequences each holding ``context``
  tokens in its KV cache (one cache per layer) that decode one token, which is appended to the cache
  and attends to ``context + 1`` keys; written with ``generated = 2`` (the step that produces each
  request's second output token, :func:`theory.validation.batches.batch_time`).
* **One rank's share of splitwise's batches** (``--per-rank MODEL:TP,...``; ``prefill_batch_rank``,
  ``decode_batch_rank``): the same forward pass on one tensor-parallel rank's shard (``1/TP`` of
  the query heads, KV heads, FFN width and vocabulary), without the all-reduces, at the batch
  shapes of ``theory/data/profiles/splitwise_perf_model.csv``; a decode at the position
  :func:`theory.validation.batches.batch_time` predicts the row at.

How it is timed
---------------
Every measurement is a CUDA graph (so host launch gaps are not timed, as in vidur's kernel-time
profiles). A GeMM's graph holds ``copies`` calls on independent operand sets, enough that the
weights of one replay exceed three times the L2 cache (a served layer's weights are not
L2-resident when the next batch comes); a batch's graph holds one forward pass (its weights are
many times the L2 cache). The graph is replayed ``warmup`` times, then ``reps`` times between CUDA
events; a row's time is the median over the replays of (replay time / calls in the graph).
Inputs are random (``torch.randn``), never zeros. The card's clocks and power limit are read
(``nvidia-smi --query-gpu``), never set.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from theory.models import get_model  # noqa: E402
from theory.profiles import gemm_shape, load_profile  # noqa: E402

GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
# (model, tensor-parallel degrees) whose four GeMMs are timed; the LM head at TP 1
GEMM_MODELS = (("llama-2-7b", (1, 2, 4)), ("llama-3-8b", (1, 2, 4, 8)), ("codellama-34b", (1, 2, 4, 8)),
               ("llama-2-70b", (1, 2, 4, 8)), ("qwen3-32b", (1, 2, 4, 8)))
LM_HEAD_MODELS = ("llama-2-7b", "llama-3-8b", "qwen3-32b")
BATCH_MODELS = ("mistral-7b", "llama-2-7b")
COLUMNS = ("source", "gpu", "setup", "model", "tp", "operation", "tokens", "decodes", "context",
           "generated", "src_rows", "seconds")
FIELDS = ("name", "memory.total", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm",
          "power.limit", "temperature.gpu")


def token_grid(limit: int = 4096) -> list[int]:
    """vidur's token counts: 1, 2, 4, every 8 to 1,024, every 16 to 2,048, every 32 to 4,096."""
    grid = [1, 2, 4, *range(8, 1025, 8), *range(1040, 2049, 16), *range(2080, 4097, 32)]
    return [t for t in grid if t <= limit]


def prefill_shapes(context_length: int) -> list[tuple[int, int]]:
    """``(prompts, prompt length)`` of the timed prefill batches."""
    single = [(1, n) for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if n <= context_length]
    return single + [(b, 512) for b in (2, 4, 8, 16)] + [(b, 128) for b in (4, 16, 64)]


def decode_shapes(context_length: int, kv_token_cap: int) -> list[tuple[int, int]]:
    """``(sequences, KV length)`` of the timed decode batches: at most ``kv_token_cap`` cached tokens."""
    return [(b, c) for c in (128, 512, 2048) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)
            if b * c <= kv_token_cap and c < context_length]


def splitwise_shapes(model: str, gpu: str) -> tuple[list, list]:
    """Splitwise's prefill shapes ``(prompts, prompt length)`` and decode shapes ``(batch, prompt
    length, generated)`` of ``model`` on ``gpu`` (the packaged ``splitwise_perf_model`` profile)."""
    rows = load_profile("splitwise_perf_model").where(gpu=gpu, model=model)
    pre = {(int(r["tokens"]) // int(r["context"]), int(r["context"]))
           for r in rows[rows["operation"] == "prefill_batch"]}
    dec = {(int(r["tokens"]), int(r["context"]), int(r["generated"]))
           for r in rows[rows["operation"] == "decode_batch"]}
    return sorted(pre), sorted(dec)


def smi() -> dict:
    """The card's state as ``nvidia-smi`` reports it (read only)."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return dict(zip(FIELDS, (v.strip() for v in out.split(",")), strict=False))
    except (OSError, subprocess.SubprocessError) as err:
        return {"error": str(err)}


def main() -> None:
    import torch
    from torch.nn import functional as nnf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", required=True, help="llmq GPU preset key of this card (e.g. h200)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--quick", action="store_true", help="a few points of each kind (a smoke test)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--gemm-budget-s", type=float, default=300.0,
                    help="no new GeMM series is started after this many seconds of GeMM timing")
    ap.add_argument("--skip-gemm", action="store_true")
    ap.add_argument("--per-rank", default="", metavar="MODEL:TP,TP",
                    help="also time one rank's share of splitwise's batches of MODEL at these TP degrees")
    ap.add_argument("--per-rank-gpu", default="h100", help="whose splitwise rows give the shapes")
    ap.add_argument("--skip-batch", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    args.out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(dev) if dev.type == "cuda" else None
    l2 = getattr(props, "L2_cache_size", 0) or 64 << 20
    setup = (f"{props.name if props else 'cpu'}; torch {torch.__version__}, CUDA {torch.version.cuda}; "
             "fp16; CUDA graph, L2-cold operands")
    torch.manual_seed(0)
    meta = {"gpu_key": args.gpu, "setup": setup, "host": platform.node(), "python": sys.version,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
            "sm_count": props.multi_processor_count if props else None, "l2_bytes": l2,
            "smi_before": smi(), "reps": args.reps, "warmup": args.warmup, "started": time.time()}
    rows: list[dict] = []
    out_csv = args.out / "profile.csv"

    def timed(calls: list) -> float:
        """Median seconds of one of ``calls`` (closures over independent operands), launched back to
        back in one CUDA graph (on the CPU: one pass, for smoke tests)."""
        if dev.type != "cuda":
            t0 = time.perf_counter()
            for f in calls:
                f()
            return (time.perf_counter() - t0) / len(calls)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for f in calls:  # warm-up outside the graph (workspace, heuristics, lazy init)
                f()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for f in calls:
                f()
        for _ in range(args.warmup):
            graph.replay()
        times = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / len(calls))
        del graph
        return float(sorted(times)[len(times) // 2])

    def emit(**row) -> None:
        rows.append({"source": "llmq", "gpu": args.gpu, "setup": setup, "src_rows": args.reps, **row})

    # --- GeMMs -------------------------------------------------------------------------------
    def gemms() -> None:
        plan = [(m, tp, op) for m in LM_HEAD_MODELS for tp in (1,) for op in ("lm_head",)]
        plan += [(m, tp, op) for m, tps in GEMM_MODELS for tp in tps for op in GEMMS]
        if args.quick:
            plan = plan[:1] + plan[3:7]
        t_start = time.time()
        for i, (m, tp, op) in enumerate(plan):
            if time.time() - t_start > args.gemm_budget_s:
                meta["gemm_stopped_before"] = [list(p) for p in plan[i:]]
                print(f"gemm budget spent: {len(plan) - i} series left out", flush=True)
                break
            d_row, d_red = gemm_shape(get_model(m), op, tp)
            copies = max(1, min(64, math.ceil(3 * l2 / (2 * d_row * d_red))))
            ws = [torch.randn(d_row, d_red, device=dev, dtype=dtype) for _ in range(copies)]
            grid = token_grid(512 if op == "lm_head" else 4096)
            if args.quick:
                grid = grid[::40]
            for tokens in grid:
                xs = [torch.randn(tokens, d_red, device=dev, dtype=dtype) for _ in ws]
                sec = timed([lambda x=x, w=w: nnf.linear(x, w) for x, w in zip(xs, ws, strict=True)])
                emit(model=m, tp=tp, operation=op, tokens=tokens, decodes="", context="", generated="",
                     seconds=f"{sec:.8g}")
                del xs
            del ws
            print(f"gemm {i + 1}/{len(plan)} {m} tp{tp} {op} {d_row}x{d_red} ({copies} copies): "
                  f"{len(grid)} points, {time.time() - t_start:.0f} s", flush=True)
            _write(out_csv, rows)

    # --- whole batches at TP 1 ---------------------------------------------------------------
    def batches() -> None:
        free = torch.cuda.mem_get_info(dev)[0] if dev.type == "cuda" else 8 << 30
        for m in BATCH_MODELS:
            model = get_model(m)
            net = _Transformer(model, dev, dtype, layers=2 if args.quick else model.N, backends=backends)
            kv_cap = int(0.5 * (free - net.bytes) / model.kv_bytes_per_token())
            pre = prefill_shapes(model.context_length or 4096)
            dec = decode_shapes(model.context_length or 4096, min(kv_cap, 262144))
            if args.quick:
                pre, dec = pre[:2], dec[:2]
            for b, n in pre:
                ids = torch.randint(0, model.d_out, (b, n), device=dev)
                sec = timed([lambda ids=ids, net=net: net.prefill(ids)])
                emit(model=m, tp=1, operation="prefill_batch", tokens=b * n, decodes=0, context=n,
                     generated="", seconds=f"{sec:.8g}")
                print(f"prefill {m} {b} x {n}: {sec * 1e3:.3f} ms", flush=True)
            for b, c in dec:
                cache = net.cache(b, c)
                ids = torch.randint(0, model.d_out, (b, 1), device=dev)
                sec = timed([lambda ids=ids, cache=cache, c=c, net=net: net.decode(ids, cache, c)])
                emit(model=m, tp=1, operation="decode_batch", tokens=b, decodes=b, context=c, generated=2,
                     seconds=f"{sec:.8g}")
                print(f"decode {m} {b} x {c}: {sec * 1e3:.3f} ms", flush=True)
                del cache
            del net
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            _write(out_csv, rows)

    # --- one tensor-parallel rank's share of splitwise's whole batches ---------------------------
    def ranks() -> None:
        model_key, _, tps = args.per_rank.partition(":")
        model = get_model(model_key)
        pre, dec = splitwise_shapes(model_key, args.per_rank_gpu)
        for tp in (int(t) for t in tps.split(",")):
            net = _Transformer(model, dev, dtype, layers=2 if args.quick else model.N, backends=backends,
                               tp=tp)
            shapes = (pre[:2], dec[:2]) if args.quick else (pre, dec)
            for b, n in shapes[0]:
                ids = torch.randint(0, model.d_out, (b, n), device=dev)
                sec = timed([lambda ids=ids, net=net: net.prefill(ids)])
                emit(model=model_key, tp=tp, operation="prefill_batch_rank", tokens=b * n, decodes=0,
                     context=n, generated="", seconds=f"{sec:.8g}")
                print(f"rank prefill {model_key} tp{tp} {b} x {n}: {sec * 1e3:.3f} ms", flush=True)
                _write(out_csv, rows)
            for b, c, g in shapes[1]:
                kv = c + max(g, 2) // 2 - 1  # the step at theory.validation.batches.batch_time's position
                cache = net.cache(b, kv)
                ids = torch.randint(0, model.d_out, (b, 1), device=dev)
                sec = timed([lambda ids=ids, cache=cache, kv=kv, net=net: net.decode(ids, cache, kv)])
                emit(model=model_key, tp=tp, operation="decode_batch_rank", tokens=b, decodes=b, context=c,
                     generated=g, seconds=f"{sec:.8g}")
                print(f"rank decode {model_key} tp{tp} {b} x {c}+{g}: {sec * 1e3:.3f} ms", flush=True)
                _write(out_csv, rows)
                del cache
            del net
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            _write(out_csv, rows)

    backends = _attention_backends(dev, dtype)
    meta["attention_backends"] = [str(b) for b in backends] if backends else "default"
    for part, skip in ((ranks, not args.per_rank), (batches, args.skip_batch), (gemms, args.skip_gemm)):
        if skip:
            continue
        try:
            part()
        except Exception as err:  # keep what the other part measures; the error is in meta.json
            import traceback

            traceback.print_exc()
            meta.setdefault("errors", []).append(f"{part.__name__}: {err!r}")
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    meta["smi_after"], meta["finished"] = smi(), time.time()
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1))
    _write(out_csv, rows)
    print(f"{len(rows)} rows -> {out_csv}")


def _attention_backends(dev, dtype) -> list | None:
    """FlashAttention alone if it runs causal GQA prefill and GQA decode here, else the fused
    kernels without the math fallback, else ``None`` (PyTorch's own choice)."""
    import torch
    from torch.nn import functional as nnf
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if dev.type != "cuda":
        return None
    q = torch.randn(2, 8, 64, 128, device=dev, dtype=dtype)
    kv = torch.randn(2, 2, 64, 128, device=dev, dtype=dtype)
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    for backends in ([SDPBackend.FLASH_ATTENTION], fused):
        try:
            with sdpa_kernel(backends):
                nnf.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
                nnf.scaled_dot_product_attention(q[:, :, :1], kv, kv, enable_gqa=True)
            torch.cuda.synchronize()
            return backends
        except RuntimeError as err:
            print(f"attention backends {backends}: {err}", flush=True)
    return None


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows(rows)


class _Transformer:
    """A Llama-style decoder (RMSNorm, rotary embedding, GQA, SwiGLU) with random weights."""

    def __init__(self, model, dev, dtype, layers: int, backends=None, tp: int = 1):
        import torch

        self.m, self.dev, self.dtype, self.torch, self.backends = model, dev, dtype, torch, backends
        self.heads, self.kv_heads = model.n_heads // tp, max(model.n_kv_heads // tp, 1)
        hd, d_q, d_kv = model.head_dim, self.heads * model.head_dim, self.kv_heads * model.head_dim
        d_ff, vocab = model.d_ff // tp, -(-model.d_out // tp)
        scale = model.d_x ** -0.5

        def w(*shape):
            return torch.randn(*shape, device=dev, dtype=dtype) * scale

        self.emb = w(vocab, model.d_x)
        self.head = w(vocab, model.d_x)
        self.layers = [dict(qkv=w(d_q + 2 * d_kv, model.d_x), o=w(model.d_x, d_q),
                            up=w(2 * d_ff, model.d_x), down=w(model.d_x, d_ff),
                            n1=torch.ones(model.d_x, device=dev, dtype=dtype),
                            n2=torch.ones(model.d_x, device=dev, dtype=dtype)) for _ in range(layers)]
        self.bytes = sum(t.numel() * t.element_size() for lay in self.layers for t in lay.values())
        self.bytes += 2 * self.emb.numel() * self.emb.element_size()
        pos = torch.arange(16384, device=dev, dtype=torch.float32)
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
        ang = torch.outer(pos, inv)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)
        self.d_q, self.d_kv = d_q, d_kv

    def cache(self, b: int, c: int) -> list:
        """One K and one V cache per layer of ``b`` sequences with room for ``c + 1`` tokens."""
        t, m = self.torch, self.m
        return [(t.randn(b, self.kv_heads, c + 1, m.head_dim, device=self.dev, dtype=self.dtype),
                 t.randn(b, self.kv_heads, c + 1, m.head_dim, device=self.dev, dtype=self.dtype))
                for _ in self.layers]

    def _norm(self, x, g):
        x32 = x.float()
        return (x32 * self.torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(self.dtype) * g

    def _rope(self, x, start: int):
        n = x.shape[2]
        cos, sin = self.cos[start:start + n], self.sin[start:start + n]
        x1, x2 = x[..., ::2], x[..., 1::2]
        return self.torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def _layer(self, x, lay, kv=None, c: int = 0):
        from torch.nn import functional as nnf

        m, (b, n, _) = self.m, x.shape
        h = self._norm(x, lay["n1"])
        q, k, v = nnf.linear(h, lay["qkv"]).split((self.d_q, self.d_kv, self.d_kv), dim=-1)
        q = self._rope(q.view(b, n, self.heads, m.head_dim).transpose(1, 2), c)
        k = self._rope(k.view(b, n, self.kv_heads, m.head_dim).transpose(1, 2), c)
        v = v.view(b, n, self.kv_heads, m.head_dim).transpose(1, 2)
        gqa = self.heads != self.kv_heads
        if kv is None:
            a = nnf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            kc, vc = kv
            kc[:, :, c:c + 1].copy_(k)
            vc[:, :, c:c + 1].copy_(v)
            a = nnf.scaled_dot_product_attention(q, kc, vc, enable_gqa=gqa)
        x = x + nnf.linear(a.transpose(1, 2).reshape(b, n, self.d_q), lay["o"])
        g, u = nnf.linear(self._norm(x, lay["n2"]), lay["up"]).chunk(2, dim=-1)
        return x + nnf.linear(nnf.silu(g) * u, lay["down"])

    def _forward(self, ids, caches, c: int):
        import contextlib

        from torch.nn import functional as nnf
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(self.backends) if self.backends else contextlib.nullcontext():
            x = nnf.embedding(ids.remainder(self.emb.shape[0]), self.emb)
            for i, lay in enumerate(self.layers):
                x = self._layer(x, lay, None if caches is None else caches[i], c)
            return nnf.linear(self._norm(x[:, -1], self.layers[-1]["n2"]), self.head).argmax(-1)

    def prefill(self, ids):
        return self._forward(ids, None, 0)

    def decode(self, ids, caches, c: int):
        return self._forward(ids, caches, c)


if __name__ == "__main__":
    main()
