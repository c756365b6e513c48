"""benchmarks/device/measure_steps.py: vLLM's capture sizes and padding, a chunked mixed step against
a plain full prefill of the same tokens (the bottom-right causal mask, the decode rows, the padding
rows), and the script's tiny CPU run (columns, both kinds and modes, the budget). The torch tests
skip where PyTorch is not installed (CI installs ``.[test]`` only)."""

from __future__ import annotations

import csv
import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest

from theory.models import get_model

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("measure_steps",
                                                  ROOT / "benchmarks" / "device" / "measure_steps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # torch is imported inside the functions only
    return module


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model gains nothing from threads on a shared machine
    yield torch
    torch.set_num_threads(threads)


def test_capture_sizes_are_vllms_default_and_padding_rounds_up_to_one():
    script = _script()
    # 1, 2, 4, the multiples of 8 below 256, the multiples of 16 from 256 to 512: 3 + 31 + 17 sizes
    want = [1, 2, 4] + [8 * i for i in range(1, 32)] + [256 + 16 * i for i in range(17)]
    assert list(script.CAPTURE_SIZES) == want and len(want) == 51
    assert set(script.DECODE_SIZES) <= set(want)
    assert not set(script.OFF_GRID_SIZES) & set(want)
    assert [script.padded_size(b) for b in (1, 3, 5, 12, 20, 100, 255, 257, 300, 512, 513)] == \
        [1, 4, 8, 16, 24, 104, 256, 272, 304, 512, 513]


def test_the_plan_covers_every_shape_once_and_the_kv_it_needs():
    script = _script()
    points = script.plan()
    assert len(points) == len(set(points))
    decode = [p for p in points if p[0] == "decode_step"]
    mixed = [p for p in points if p[0] == "mixed_step"]
    assert len(decode) == 2 * (18 + 6) and len(mixed) == 7 * 5 * 2
    assert script.kv_tokens(("decode_step", 64, 2048, 0, 0)) == 64 * 2049
    assert script.kv_tokens(("mixed_step", 8, 1024, 512, 2048)) == 8 * 1025 + 2560
    assert {p[0] for p in script.plan(quick=True)} == {"decode_step", "mixed_step"}


def _full_prefill(net, torch, ids):
    """Every row's final hidden state for one prompt, by measure_profile's causal prefill layers."""
    x = torch.nn.functional.embedding(ids[None], net.emb)
    for lay in net.layers:
        x = net._layer(x, lay)
    return net._norm(x[0], net.layers[-1]["n2"])


@pytest.mark.parametrize("lower_right", [True, False])
def test_a_mixed_step_computes_what_full_prefills_of_the_same_tokens_compute(torch, lower_right):
    script = _script()
    model = replace(get_model("llama-3.1-8b"), **script.TINY)
    torch.manual_seed(1)
    net = script.StepModel(model, torch.device("cpu"), torch.float32, layers=model.N)
    net.lower_right = lower_right
    prior, n, d, context, pad = 37, 11, 3, 29, 2
    request = torch.randint(0, model.d_out, (prior + n,))
    seqs = torch.randint(0, model.d_out, (d, context + 1))
    # the caches filled the way an engine fills them: the request's first prior tokens as a chunk of
    # their own, each decoding sequence's context likewise (its row of the batch cache as a view)
    chunk_cache = net.cache(1, prior + n - 1)
    net.step(request[:prior], 0, 0, None, prior, 0, chunk_cache)
    dec_cache = net.cache(d, context)
    for i in range(d):
        net.step(seqs[i, :context], 0, 0, None, context, 0, [(k[i:i + 1], v[i:i + 1]) for k, v in dec_cache])
    ids = torch.cat((seqs[:, context], request[prior:], torch.zeros(pad, dtype=torch.long)))
    hidden, tokens = net.step(ids, d, context, dec_cache, n, prior, chunk_cache)
    want_chunk = _full_prefill(net, torch, request)[prior:]
    want_decodes = torch.stack([_full_prefill(net, torch, s)[-1] for s in seqs])
    torch.testing.assert_close(hidden[d:d + n], want_chunk, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(hidden[:d], want_decodes, atol=1e-4, rtol=1e-4)
    assert hidden.shape[0] == d + n + pad
    logits = torch.cat((want_decodes, want_chunk[-1:])) @ net.head.T
    assert tokens.tolist() == logits.argmax(-1).tolist()
    # the cached prior matters: the chunk's tokens as a prompt of their own compute something else
    assert (_full_prefill(net, torch, request[prior:]) - want_chunk).abs().max() > 0.1


def test_the_chunk_attention_falls_back_from_backends_that_cannot_run_it(torch):
    from torch.nn.attention import SDPBackend

    script = _script()
    model = replace(get_model("llama-3.1-8b"), **script.TINY)
    net = script.StepModel(model, torch.device("cpu"), torch.float32, layers=1,
                           backends=[SDPBackend.EFFICIENT_ATTENTION])  # no CPU kernel
    lower_right, backends, info = script._pick_chunk_attention(net)
    assert lower_right and backends is None and info["backends"] == "PyTorch's choice"
    assert [t["backends"] for t in info["tried_before"]] == [["SDPBackend.EFFICIENT_ATTENTION"]]
    assert info["max_abs_error"] <= info["tolerance"]


def _run(tmp_path, *extra):
    script = _script()
    script.main(["--gpu", "cpu", "--out", str(tmp_path), "--device", "cpu", "--tiny", "--quick",
                 "--reps", "3", *extra])
    with open(tmp_path / "steps.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    return script, tuple(reader.fieldnames), rows, json.loads((tmp_path / "meta.json").read_text())


def test_the_tiny_cpu_run_times_every_point_in_both_modes(torch, tmp_path):
    script, columns, rows, meta = _run(tmp_path)
    assert columns == script.COLUMNS
    assert {(r["kind"], r["mode"]) for r in rows} == {(k, m) for k in ("decode_step", "mixed_step")
                                                      for m in ("graph", "eager")}
    for kind, d, c, n, p in script.plan(quick=True):
        mine = [r for r in rows if (r["kind"], int(r["decodes"]), int(r["chunk_tokens"])) == (kind, d, n)]
        modes = sorted((r["mode"], r["padded_to"], int(r["tokens"])) for r in mine)
        if kind == "decode_step":
            pad = script.padded_size(d)
            want = [("eager", "", d), ("graph", str(pad), pad)] + ([("graph", "", d)] if pad != d else [])
            assert {(r["decode_context"], r["chunk_context"]) for r in mine} == {(str(c), "")}
        else:
            want = [("eager", "", d + n), ("graph", "", d + n)]
            assert {r["chunk_context"] for r in mine} == {str(p)}
            assert {r["decode_context"] for r in mine} == {str(c) if d else ""}
        assert modes == sorted(want), (kind, d, n)
    for r in rows:
        assert 0 < float(r["seconds_p10"]) <= float(r["seconds"]) <= float(r["seconds_p90"])
        assert r["reps"] == "3"
    assert meta["left_out"] == [] and meta["errors"] == [] and meta["wall_s"] > 0
    assert meta["chunk_attention"]["max_abs_error"] <= meta["chunk_attention"]["tolerance"]
    assert "aten::scaled_dot_product_attention" in meta["kernels"]
    assert {"smi_before", "smi_after", "started", "finished", "torch", "method"} <= meta.keys()


def test_a_spent_budget_leaves_every_point_out_and_still_writes_both_files(torch, tmp_path):
    script, columns, rows, meta = _run(tmp_path, "--budget-s", "0")
    assert columns == script.COLUMNS and rows == []
    assert [tuple(x["point"]) for x in meta["left_out"]] == script.plan(quick=True)
    assert {x["why"] for x in meta["left_out"]} == {"budget"} and meta["finished"]
