"""Time whole serving-engine steps of one model on one GPU: decode-only steps and mixed steps.

Run on a machine with a CUDA GPU and PyTorch, from the repository root::

    python benchmarks/device/measure_steps.py --gpu h200 --out OUTDIR [--quick]

It writes ``OUTDIR/steps.csv`` (one row per measured step, columns below), rewritten after every
point, and ``OUTDIR/meta.json`` (the machine, the software, the clocks read before and after, the
method, the plan, what was left out and why). ``--device cpu --tiny`` runs the same code on the CPU
with a two-layer fp32 model of small widths (``tests/test_measure_steps.py``); on the CPU there is
no CUDA graph, so ``graph`` rows there are the step run without one.

The model is the forward pass of ``benchmarks/device/measure_profile.py`` (``_Transformer``: random
weights, here bf16; embedding gather, per layer RMSNorm, fused QKV GeMM, rotary embedding,
attention through ``scaled_dot_product_attention``, output GeMM, residual add, RMSNorm, fused
gate-up GeMM, SiLU-and-multiply, down GeMM, residual add; final RMSNorm and the LM head with an
argmax on the last row of each sequence), of ``--model``'s shapes (default ``llama-3.1-8b``,
``theory/data/models.toml``), at TP 1. One step is one forward pass over a flat batch of rows, as
a vLLM v1 engine step: every GeMM and element-wise kernel runs on all rows together, attention
runs per part.

What is timed
-------------
* ``decode_step``: ``decodes`` sequences, each holding ``decode_context`` tokens in its KV cache
  (one dense cache per layer, not paged), decode one token each: the token's K and V are written
  into the cache at position ``decode_context`` and it attends to ``decode_context + 1`` keys.
  Sequence counts: vLLM v1's default CUDA-graph capture sizes named in :data:`DECODE_SIZES` and
  the off-grid counts :data:`OFF_GRID_SIZES`, at each context of :data:`DECODE_CONTEXTS`, where
  the KV cache fits in the budget (``meta.json``: ``kv_budget_tokens``, ``left_out``).
* ``mixed_step``: ``decodes`` decode rows as above (``decode_context`` = :data:`MIXED_CONTEXT`)
  and then one prefill chunk of ``chunk_tokens`` rows of one request whose cache already holds
  ``chunk_context`` tokens (chunked prefill): the chunk's K and V are written at positions
  ``chunk_context`` to ``chunk_context + chunk_tokens - 1``, and chunk row ``i`` attends to keys
  ``0 .. chunk_context + i`` (a causal mask aligned to the bottom right, see
  :func:`chunk_attention`). The LM head runs on the decode rows and the chunk's last row.

Modes
-----
* ``graph``: the step captured in one CUDA graph (attention included) and replayed between CUDA
  events: GPU time, no host launch gaps. For a decode step the graph holds
  ``padded_to`` = the smallest capture size >= ``decodes`` rows, as vLLM v1 replays a decode-only
  batch (:data:`CAPTURE_SIZES`): the padding rows run through every GeMM and element-wise kernel
  and attend to nothing (their attention output is zero), like the padded slots of vLLM's
  attention metadata. For an off-grid ``decodes`` a second ``graph`` row with an empty
  ``padded_to`` times the same step without padding (what the padding rows cost). Mixed steps are
  not padded (vLLM runs them with piecewise graphs, attention outside them, or eagerly).
* ``eager``: the same step (no padding) launched op by op from Python, timed by the host clock
  between ``torch.cuda.synchronize()`` calls, one step per repetition: ``eager`` minus the
  unpadded ``graph`` row is this script's host launch overhead per step (Python and PyTorch's
  dispatcher launching every kernel of every layer), an estimate of what a step launched without
  a graph pays, not vLLM's own scheduler or input preparation.

How it is timed
---------------
Each point allocates its caches (``torch.randn``, never zeros), runs the eager step ``warmup`` times
and then ``reps`` times, then captures the graph (after one run on a side stream), replays it
``warmup`` times and then ``reps`` times. The weights (2 bytes a parameter: 16 GB for Llama-3.1-8B)
are far larger than the L2 cache, so every step reads them from HBM. Points run in the order of
:func:`plan`; none starts after ``--budget-s`` seconds from the script's start, and the CSV keeps
every point finished before an error or the budget. The chunk attention's kernel path is chosen at
start and checked against a float32 reference with an explicit mask (``meta.json``:
``chunk_attention``), and the kernels of one eager mixed step are listed by the PyTorch profiler at
the end (``meta.json``: ``kernels``). The card's clocks and power limit are read (``nvidia-smi``),
never set.

Columns of ``steps.csv``
------------------------
``kind``
    ``decode_step`` or ``mixed_step``.
``mode``
    ``graph`` or ``eager`` (above).
``decodes``
    Decode rows (sequences decoding one token), padding rows not counted.
``decode_context``
    Tokens in each decoding sequence's cache before the step; empty when ``decodes`` is 0.
``chunk_tokens``
    Rows of the prefill chunk; 0 for a decode step.
``chunk_context``
    Tokens of the chunk's request already in its cache; empty for a decode step.
``tokens``
    Rows every GeMM ran on: ``padded_to`` for a padded decode graph, else
    ``decodes + chunk_tokens``.
``padded_to``
    The CUDA-graph capture size a decode step's graph was padded to; empty for eager rows, the
    unpadded control graphs and mixed steps.
``seconds``, ``seconds_p10``, ``seconds_p90``
    Median, 10th and 90th percentile (linear interpolation) of one step's time over ``reps``.
``reps``
    Timed repetitions.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import os
import platform
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: theory
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure_profile, beside this file

from measure_profile import _attention_backends, _Transformer, smi

from theory.models import get_model

# vLLM v1's default CUDA-graph capture sizes: [1, 2, 4] + range(8, 256, 8) + range(256, 512 + 1, 16),
# the upper end being min(2 max_num_seqs, 512) with the default max_num_seqs = 256
# (vllm/config/vllm.py, VllmConfig._set_cudagraph_sizes; the field cudagraph_capture_sizes in
# vllm/config/compilation.py). A decode-only batch of b sequences is replayed at the smallest size >= b.
CAPTURE_SIZES = (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
DECODE_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512)
OFF_GRID_SIZES = (3, 5, 12, 20, 100, 300)
DECODE_CONTEXTS = (512, 2048)
MIXED_DECODES = (0, 1, 8, 32, 64, 128, 256)
MIXED_CONTEXT = 1024
CHUNK_TOKENS = (64, 256, 512, 1024, 2048)
CHUNK_CONTEXTS = (0, 2048)
COLUMNS = ("kind", "mode", "decodes", "decode_context", "chunk_tokens", "chunk_context", "tokens",
           "padded_to", "seconds", "seconds_p10", "seconds_p90", "reps")
KV_SHARE = 0.75  # of the GPU memory free after the weights, for one point's KV caches
TINY = {"N": 2, "d_x": 64, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "d_ff": 128, "d_out": 256}

Point = tuple[str, int, int, int, int]  # kind, decodes, decode_context, chunk_tokens, chunk_context


def padded_size(b: int) -> int:
    """The capture size a decode-only batch of ``b`` sequences is replayed at (``b`` beyond the
    largest size: ``b``, no graph in vLLM)."""
    return next((s for s in CAPTURE_SIZES if s >= b), b)


def plan(quick: bool = False) -> list[Point]:
    """The points in the order they are measured: decode steps, then mixed steps.

    Parameters
    ----------
    quick : bool
        Three decode points (one off the capture grid) and three mixed points, for a smoke test.

    Returns
    -------
    list of (kind, decodes, decode_context, chunk_tokens, chunk_context)
    """
    if quick:
        return [("decode_step", 1, 512, 0, 0), ("decode_step", 3, 512, 0, 0), ("decode_step", 64, 2048, 0, 0),
                ("mixed_step", 0, MIXED_CONTEXT, 256, 0), ("mixed_step", 8, MIXED_CONTEXT, 512, 2048),
                ("mixed_step", 64, MIXED_CONTEXT, 64, 2048)]
    sizes = sorted(DECODE_SIZES + OFF_GRID_SIZES)
    points: list[Point] = [("decode_step", b, c, 0, 0) for c in DECODE_CONTEXTS for b in sizes]
    points += [("mixed_step", d, MIXED_CONTEXT, n, p) for p in CHUNK_CONTEXTS for n in CHUNK_TOKENS
               for d in MIXED_DECODES]
    return points


def kv_tokens(point: Point) -> int:
    """Cached tokens a point holds: each decode's ``decode_context + 1`` and the chunk's request."""
    _, d, c, n, p = point
    return d * (c + 1) + (p + n if n else 0)


def chunk_attention(q, k, v, lower_right: bool):
    """Attention of a prefill chunk to its request's cached keys and its own.

    Parameters
    ----------
    q : Tensor
        ``(1, heads, n, head_dim)``: the chunk's ``n`` queries.
    k, v : Tensor
        ``(1, kv_heads, p + n, head_dim)``: the ``p`` cached keys and values, then the chunk's own.
    lower_right : bool
        Pass the mask as ``torch.nn.attention.bias.causal_lower_right`` (PyTorch runs it on
        FlashAttention's causal kernel, whose diagonal ends at the bottom right, or on the
        memory-efficient kernel's bottom-right mask, else materializes it); else as an explicit
        boolean mask. ``is_causal=True`` would align the diagonal to the top left, wrong when
        ``p > 0``.

    Returns
    -------
    Tensor
        ``(1, heads, n, head_dim)``: query ``i`` attends to keys ``0 .. p + i``.
    """
    import torch
    from torch.nn import functional as nnf
    from torch.nn.attention.bias import causal_lower_right

    n, s = q.shape[2], k.shape[2]
    mask = (causal_lower_right(n, s) if lower_right
            else torch.ones(n, s, dtype=torch.bool, device=q.device).tril(s - n))
    return nnf.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def reference_attention(q, k, v):
    """:func:`chunk_attention`'s result in float32 by explicit softmax, keys repeated per group."""
    import torch

    n, s, group = q.shape[2], k.shape[2], q.shape[1] // k.shape[1]
    k, v = (t.float().repeat_interleave(group, dim=1) for t in (k, v))
    scores = q.float() @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    allowed = torch.arange(s, device=q.device)[None, :] <= torch.arange(n, device=q.device)[:, None] + s - n
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


class StepModel(_Transformer):
    """``measure_profile``'s transformer with one engine step over a flat batch of rows: decode rows,
    then at most one prefill chunk, then padding rows."""

    lower_right = True  # chunk_attention's mask form; main() sets it from _pick_chunk_attention

    def step(self, ids, decodes: int, context: int, dec_cache, chunk: int, prior: int, chunk_cache):
        """One forward pass over ``ids`` (``(rows,)`` token ids).

        Parameters
        ----------
        ids : Tensor
            ``decodes`` decode tokens, then ``chunk`` chunk tokens, then padding rows.
        decodes, context : int
            Decode rows and the tokens each one's cache holds; ``dec_cache`` is one ``(K, V)`` per
            layer of shape ``(decodes, kv_heads, >= context + 1, head_dim)`` (``cache(decodes,
            context)``).
        chunk, prior : int
            Chunk rows and the tokens of its request already cached; ``chunk_cache`` is one
            ``(K, V)`` per layer of shape ``(1, kv_heads, >= prior + chunk, head_dim)``.

        Returns
        -------
        hidden : Tensor
            ``(rows, d_x)``: every row after the final RMSNorm.
        tokens : Tensor
            The LM head's argmax for each decode row and the chunk's last row.
        """
        from torch.nn import functional as nnf
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(self.backends) if self.backends else contextlib.nullcontext():
            x = nnf.embedding(ids.remainder(self.emb.shape[0]), self.emb)
            for i, lay in enumerate(self.layers):
                x = self._step_layer(x, lay, decodes, context, dec_cache and dec_cache[i], chunk, prior,
                                     chunk_cache and chunk_cache[i])
            h = self._norm(x, self.layers[-1]["n2"])
            last = h[:decodes + chunk][-1:] if chunk else h[:0]
            return h, nnf.linear(self.torch.cat((h[:decodes], last)), self.head).argmax(-1)

    def _heads(self, t, rows: int, heads: int, start: int, seqs: int):
        """Rows ``start .. start + rows`` of a projection as ``(seqs, heads, rows / seqs, head_dim)``."""
        return t[start:start + rows].view(seqs, rows // seqs, heads, self.m.head_dim).transpose(1, 2)

    def _step_layer(self, x, lay, decodes: int, context: int, dec_kv, chunk: int, prior: int, chunk_kv):
        from torch.nn import functional as nnf

        gqa = self.heads != self.kv_heads
        q, k, v = nnf.linear(self._norm(x, lay["n1"]), lay["qkv"]).split((self.d_q, self.d_kv, self.d_kv), -1)
        parts = []
        for rows, start, seqs, pos, kv, is_chunk in ((decodes, 0, decodes, context, dec_kv, False),
                                                     (chunk, decodes, 1, prior, chunk_kv, True)):
            if not rows:
                continue
            end = pos + rows // seqs  # the keys this part attends to: its cache up to its own rows
            kc, vc = kv[0][:, :, :end], kv[1][:, :, :end]
            kc[:, :, pos:].copy_(self._rope(self._heads(k, rows, self.kv_heads, start, seqs), pos))
            vc[:, :, pos:].copy_(self._heads(v, rows, self.kv_heads, start, seqs))
            qs = self._rope(self._heads(q, rows, self.heads, start, seqs), pos)
            a = (chunk_attention(qs, kc, vc, self.lower_right) if is_chunk
                 else nnf.scaled_dot_product_attention(qs, kc, vc, enable_gqa=gqa))
            parts.append(a.transpose(1, 2).reshape(rows, self.d_q))
        if pad := x.shape[0] - decodes - chunk:
            parts.append(x.new_zeros(pad, self.d_q))
        x = x + nnf.linear(self.torch.cat(parts), lay["o"])
        g, u = nnf.linear(self._norm(x, lay["n2"]), lay["up"]).chunk(2, dim=-1)
        return x + nnf.linear(nnf.silu(g) * u, lay["down"])


def _pick_chunk_attention(net: StepModel) -> tuple[bool, list | None, dict]:
    """The first form of :func:`chunk_attention` (mask form, SDPA backends) that runs here and agrees
    with :func:`reference_attention`, on the model's heads with 80 cached keys and a 48-row chunk."""
    import torch
    from torch.nn.attention import sdpa_kernel

    hd = net.m.head_dim
    q = torch.randn(1, net.heads, 48, hd, device=net.dev, dtype=net.dtype)
    k, v = (torch.randn(1, net.kv_heads, 128, hd, device=net.dev, dtype=net.dtype) for _ in range(2))
    want = reference_attention(q, k, v)
    tol = 1e-4 if net.dtype == torch.float32 else 3e-2
    tried: list[dict] = []
    forms = [(True, net.backends), (True, None), (False, None)]
    for lower_right, backends in [f for i, f in enumerate(forms) if f not in forms[:i]]:
        form = {"mask": "causal_lower_right" if lower_right else "explicit boolean",
                "backends": [str(b) for b in backends] if backends else "PyTorch's choice"}
        try:
            with sdpa_kernel(backends) if backends else contextlib.nullcontext():
                got = chunk_attention(q, k, v, lower_right)
            form["max_abs_error"] = float((got.float() - want).abs().max())
        except RuntimeError as err:
            tried.append({**form, "error": str(err)[:300]})
            continue
        if form["max_abs_error"] <= tol:
            return lower_right, backends, {**form, "tolerance": tol, "tried_before": tried}
        tried.append(form)
    raise RuntimeError(f"no form of the chunk attention agrees with the reference here: {tried}")


def _stats(times: list[float]) -> dict:
    import numpy as np

    p10, p50, p90 = np.percentile(times, [10, 50, 90])
    return {"seconds": f"{p50:.8g}", "seconds_p10": f"{p10:.8g}", "seconds_p90": f"{p90:.8g}",
            "reps": len(times)}


def _time_eager(fn, dev, warmup: int, reps: int) -> list[float]:
    """Seconds of each of ``reps`` calls of ``fn`` by the host clock, synchronized before and after."""
    import torch

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def _time_graph(fn, dev, warmup: int, reps: int) -> list[float]:
    """Seconds of each of ``reps`` replays of ``fn`` captured in a CUDA graph, by CUDA events (on the
    CPU: :func:`_time_eager`)."""
    import torch

    if dev.type != "cuda":
        return _time_eager(fn, dev, warmup, reps)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph (workspaces, heuristics, lazy init)
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(warmup):
        graph.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return times


def _measure(net: StepModel, point: Point, warmup: int, reps: int, rows: list[dict]) -> None:
    """Append the rows of one point to ``rows`` as each is timed: ``eager``, then ``graph`` (padded
    for a decode step), then, for an off-grid decode step, the unpadded ``graph``."""
    import torch

    kind, d, c, n, p = point
    dec_cache = net.cache(d, c) if d else None
    chunk_cache = net.cache(1, p + n - 1) if n else None  # room for p + n tokens
    pad = padded_size(d) if kind == "decode_step" else d + n
    ids = torch.randint(0, net.m.d_out, (pad,), device=net.dev)
    modes = [("eager", d + n, ""), ("graph", pad, pad if kind == "decode_step" else "")]
    if pad != d + n:
        modes.append(("graph", d + n, ""))
    for mode, tokens, padded_to in modes:
        timer = _time_graph if mode == "graph" else _time_eager
        times = timer(lambda t=tokens: net.step(ids[:t], d, c, dec_cache, n, p, chunk_cache), net.dev, warmup,
                      reps)
        rows.append({"kind": kind, "mode": mode, "decodes": d, "decode_context": c if d else "",
                     "chunk_tokens": n, "chunk_context": p if kind == "mixed_step" else "", "tokens": tokens,
                     "padded_to": padded_to, **_stats(times)})


def _kernels(net: StepModel) -> dict[str, int]:
    """The kernels (on the CPU: the operators) of one eager mixed step of 8 decodes at
    :data:`MIXED_CONTEXT` and a 256-token chunk after 2,048 cached tokens, with their counts."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    d, c, n, p = 8, MIXED_CONTEXT, 256, 2048
    dec_cache, chunk_cache = net.cache(d, c), net.cache(1, p + n - 1)
    ids = torch.randint(0, net.m.d_out, (d + n,), device=net.dev)

    def step():
        return net.step(ids, d, c, dec_cache, n, p, chunk_cache)

    cuda = net.dev.type == "cuda"
    _time_eager(step, net.dev, 1, 1)  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        _time_eager(step, net.dev, 0, 1)
    kind = DeviceType.CUDA if cuda else DeviceType.CPU
    return dict(Counter(e.name for e in prof.events() if e.device_type == kind).most_common())


def write_run(out: Path, rows: list[dict], meta: dict, names=("steps.csv", "meta.json"),
              columns=COLUMNS) -> None:
    """The rows as a CSV and the meta record as JSON (``names``), each written to a temporary file
    and renamed over the old, so a run cut short keeps every finished row."""
    table, record = (out / n for n in names)
    with open(table.with_name(table.name + ".tmp"), "w", newline="") as fh:
        w = csv.DictWriter(fh, columns)
        w.writeheader()
        w.writerows(rows)
    os.replace(table.with_name(table.name + ".tmp"), table)
    record.with_name(record.name + ".tmp").write_text(json.dumps(meta, indent=1))
    os.replace(record.with_name(record.name + ".tmp"), record)


def _commit() -> str | None:
    """The repository's commit, where git and the repository are there."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> None:
    """Measure the points of :func:`plan` and write ``steps.csv`` and ``meta.json`` (the command line
    of the module docstring)."""
    t_start, started = time.monotonic(), datetime.datetime.now(datetime.timezone.utc)
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", required=True, help="llmq GPU preset key of this card (e.g. h200)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--model", default="llama-3.1-8b", help="llmq model preset key whose shapes are timed")
    ap.add_argument("--quick", action="store_true", help="three points of each kind (a smoke test)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=240.0,
                    help="no point is started after this many seconds from the script's start")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu (with --tiny)")
    ap.add_argument("--tiny", action="store_true",
                    help=f"the model's widths replaced by {TINY} (fp32 on the CPU), for tests")
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cpu" and not args.tiny:
        ap.error("--device cpu needs --tiny")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    model = replace(get_model(args.model), **TINY) if args.tiny else get_model(args.model)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(dev) if dev.type == "cuda" else None
    meta: dict = {
        "gpu_key": args.gpu, "device": props.name if props else "cpu", "model": args.model, "tiny": args.tiny,
        "model_dims": {k: getattr(model, k) for k in ("N", "d_x", "n_heads", "n_kv_heads", "head_dim", "d_ff",
                                                      "d_out")},
        "dtype": str(dtype), "sm_count": props.multi_processor_count if props else None,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "memory_bytes": props.total_memory if props else None,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if dev.type == "cuda" else None,
        "python": sys.version, "host": platform.node(), "commit": _commit(), "smi_before": smi(),
        "started": started.isoformat(), "finished": None, "wall_s": None,
        "reps": args.reps, "warmup": args.warmup, "budget_s": args.budget_s, "quick": args.quick,
        "capture_sizes": CAPTURE_SIZES, "method": __doc__, "left_out": [], "errors": []}
    rows: list[dict] = []
    try:
        net = StepModel(model, dev, dtype, layers=model.N, backends=_attention_backends(dev, dtype))
        meta["attention_backends"] = [str(b) for b in net.backends] if net.backends else "PyTorch's choice"
        net.lower_right, net.backends, meta["chunk_attention"] = _pick_chunk_attention(net)
        free = torch.cuda.mem_get_info(dev)[0] if dev.type == "cuda" else 1 << 30
        kv_budget = int(KV_SHARE * free / model.kv_bytes_per_token(net.emb.element_size()))
        meta |= {"weights_bytes": net.bytes, "free_bytes_after_weights": free, "kv_budget_tokens": kv_budget,
                 "kv_bytes_per_token": model.kv_bytes_per_token(net.emb.element_size())}
        points = plan(args.quick)
        meta["plan"] = points
        print(f"{meta['device']}, {args.model}{' (tiny)' if args.tiny else ''}: {len(points)} points, "
              f"KV budget {kv_budget} tokens, chunk attention {meta['chunk_attention']['mask']} on "
              f"{meta['chunk_attention']['backends']}", flush=True)
        for i, point in enumerate(points):
            elapsed = time.monotonic() - t_start
            if elapsed > args.budget_s:
                meta["left_out"] += [{"point": q, "why": "budget"} for q in points[i:]]
                print(f"[{elapsed:6.1f} s] budget spent: {len(points) - i} points left out", flush=True)
                break
            label = "{} decodes={} context={} chunk={} chunk_context={}".format(*point)
            if kv_tokens(point) > kv_budget:
                meta["left_out"].append({"point": point, "why": f"{kv_tokens(point)} KV tokens > budget"})
                print(f"[{elapsed:6.1f} s] {label}: left out, KV cache over the budget", flush=True)
                continue
            done = len(rows)
            try:
                _measure(net, point, args.warmup, args.reps, rows)
            except Exception as err:  # keep every other row; the error is in meta.json
                import traceback

                traceback.print_exc()
                meta["errors"].append({"point": point, "error": repr(err)[:500]})
            if dev.type == "cuda":
                torch.cuda.empty_cache()
            new = rows[done:]
            times = ", ".join(f"{r['mode']}{'@' + str(r['padded_to']) if r['padded_to'] else ''} "
                              f"{float(r['seconds']) * 1e3:.3f} ms" for r in new)
            print(f"[{time.monotonic() - t_start:6.1f} s] {i + 1}/{len(points)} {label}: {times or 'failed'}",
                  flush=True)
            write_run(args.out, rows, meta)
        try:
            meta["kernels"] = _kernels(net)
        except Exception as err:  # the rows are measured: record the error, keep the exit clean
            meta["errors"].append({"kernels": repr(err)[:500]})
    finally:
        meta["smi_after"] = smi()
        meta["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
        meta["wall_s"] = time.monotonic() - t_start
        write_run(args.out, rows, meta)
        print(f"{len(rows)} rows -> {args.out / 'steps.csv'} ({meta['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
