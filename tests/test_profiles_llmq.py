"""The profiles measured here (benchmarks/device/measure_profile.py): the merge of measurement runs,
the shipped files against the runs' own logs, the script's grid against vidur's, a rank's share
of a whole batch scored against Eq. 7 without its all-reduces, and what the files show
(theory/data/profiles/README.md)."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from theory.cost import Batch, T_batch, build_cost_model
from theory.errors import ConfigFileError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.profiles import VIDUR_GEMMS, Profile, gemm_shape, load_profile
from theory.validation.errors import abs_rel_error
from theory.validation.profiles_convert import build_device
from theory.validation.results import Settings
from theory.validation.validate import validate

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "device" / "runs"
HEADER = "source,gpu,setup,model,tp,operation,tokens,decodes,context,generated,src_rows,seconds\n"


def _script():
    spec = importlib.util.spec_from_file_location("measure_profile",
                                                  ROOT / "benchmarks" / "device" / "measure_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # torch is imported by main() only
    return module


def test_build_device_merges_runs_later_rows_replacing_earlier(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    (first / "profile.csv").write_text(HEADER + "llmq,h200,s,llama-2-7b,1,mlp_up_proj,8,,,,5,0.001\n"
                                       "llmq,h200,s,llama-2-7b,1,mlp_up_proj,16,,,,5,0.002\n")
    (second / "profile.csv").write_text(HEADER + "llmq,h200,s2,llama-2-7b,1,mlp_up_proj,16,,,,5,0.003\n")
    assert build_device([first, second], tmp_path) == {"llmq_h200": 2}
    rows = load_profile(tmp_path / "llmq_h200.csv.gz").rows
    assert dict(zip(rows["tokens"].tolist(), rows["seconds"].tolist(), strict=True)) == {8: 0.001, 16: 0.003}
    assert rows["setup"].tolist() == ["s", "s2"]


def test_build_device_refuses_rows_of_another_source_naming_file_row_and_column(tmp_path):
    (tmp_path / "profile.csv").write_text(HEADER + "llmq,h200,,llama-2-7b,1,mlp_up_proj,8,,,,5,0.001\n"
                                          "vidur,h200,,llama-2-7b,1,mlp_up_proj,16,,,,5,0.002\n")
    with pytest.raises(ConfigFileError, match=r"profile\.csv: row 3, column source: expected 'llmq'"):
        build_device([tmp_path], tmp_path)


@pytest.mark.parametrize("name, run", [("llmq_h200", "2026-11-27-h200"), ("llmq_h100", "2026-11-27-h100-a"),
                                       ("llmq_h100", "2026-11-27-h100-b")])
def test_shipped_batch_rows_are_the_times_the_runs_printed(name, run):
    # the run's log prints every batch in ms with 3 decimals, independently of the CSV it wrote
    rows = load_profile(name).rows
    pattern = re.compile(r"^(rank )?(prefill|decode) (\S+) (?:tp(\d+) )?(\d+) x (\d+)(?:\+(\d+))?: "
                         r"([\d.]+) ms$")
    seen = 0
    for line in (RUNS / run / "log.txt").read_text().splitlines():
        m = pattern.match(line)
        if not m:
            continue
        rank, kind, model, tp, b, n, g, ms = m.groups()
        op = f"{kind}_batch" + ("_rank" if rank else "")
        sel = (rows["operation"] == op) & (rows["model"] == model) & (rows["tp"] == int(tp or 1))
        sel &= (rows["tokens"] == (int(b) * int(n) if kind == "prefill" else int(b)))
        sel &= (rows["context"] == int(n)) & ((rows["generated"] == int(g)) if g else True)
        assert sel.sum() == 1, line
        assert rows["seconds"][sel][0] * 1e3 == pytest.approx(float(ms), abs=6e-4), line
        seen += 1
    assert seen >= 32


def test_script_grid_and_shapes_are_vidurs():
    script = _script()
    vidur = load_profile("vidur_gemm").where(gpu="a100", model="llama-2-7b", tp=1, operation="mlp_up_proj")
    assert script.token_grid() == sorted(set(vidur["tokens"].tolist()))
    shipped = load_profile("llmq_h200").rows
    for model, tps in script.GEMM_MODELS:
        for tp in tps:
            for op in script.GEMMS:
                n = ((shipped["model"] == model) & (shipped["tp"] == tp) & (shipped["operation"] == op)).sum()
                assert n == len(script.token_grid()), (model, tp, op)
    # the shapes the script timed are gemm_shape's, which tests/test_profiles.py checks by hand
    assert gemm_shape(get_model("llama-2-70b"), "attn_pre_proj", 8) == ((64 + 2 * 8) // 8 * 128, 8192)


def test_splitwise_shapes_are_the_h100_rows_of_the_packaged_file():
    pre, dec = _script().splitwise_shapes("llama-2-70b", "h100")
    sw = load_profile("splitwise_perf_model").where(gpu="h100", model="llama-2-70b", tp=8)
    assert len(pre) == (sw["operation"] == "prefill_batch").sum()
    assert len(dec) == (sw["operation"] == "decode_batch").sum()
    assert (64, 512) in pre and (1, 512, 8192) in dec


def test_a_rank_row_is_scored_against_eq7_without_all_reduces():
    rows = load_profile("llmq_h100").rows
    rows = rows[(rows["operation"] == "prefill_batch_rank") & (rows["tp"] == 8)]
    report = validate({"llmq_h100": Profile("test", rows)}, Settings(screen=False))
    group = next(g for g in report.groups if g["operation"] == "prefill_batch_rank")
    # independent recomputation: the shipped H100 at TP 8 with free collectives, Eq. 7 per row
    g = get_gpu("h100", calibrated=True)
    g = replace(g, terms=replace(g.terms, tp=8, allreduce_latency_s=0.0, allreduce_bandwidth=np.inf))
    cm = build_cost_model(g, get_model("llama-2-70b"), "real")
    pred = [T_batch(cm, Batch.of(prefill=[(1, int(r["context"]))] * (int(r["tokens"]) // int(r["context"]))))
            for r in rows]
    err = abs_rel_error(rows["seconds"], np.array(pred))
    assert group["shipped_median"] == pytest.approx(float(np.median(err)))
    # and not against the whole batch with its all-reduces, which costs more
    g_ar = get_gpu("h100", calibrated=True)
    whole = build_cost_model(replace(g_ar, terms=replace(g_ar.terms, tp=8)), get_model("llama-2-70b"), "real")
    assert T_batch(whole, Batch.of(prefill=[(1, 512)])) > T_batch(cm, Batch.of(prefill=[(1, 512)]))


def test_a_rank_computes_linearly_in_the_prompt_tokens_where_splitwise_does_not():
    # what the README says the files show: a rank's time per prompt token at 8,192 tokens is within
    # 10% of its time at 2,048 at TP 4 and 8, while what splitwise's H100 rows add to it per token
    # grows by more than half (TP 4) and more than 2.5 times (TP 8)
    rank = load_profile("llmq_h100").rows
    sw = load_profile("splitwise_perf_model").where(gpu="h100", model="llama-2-70b")

    def per_token(rows, op, tp, tokens):
        sel = (rows["operation"] == op) & (rows["tp"] == tp) & (rows["tokens"] == tokens)
        return float(rows["seconds"][sel & (rows["context"] == 512)][0]) / tokens

    for tp, jump in ((4, 1.5), (8, 2.5)):
        r = [per_token(rank, "prefill_batch_rank", tp, n) for n in (2048, 8192)]
        added = [per_token(sw, "prefill_batch", tp, n) - x for n, x in zip((2048, 8192), r, strict=True)]
        assert abs(r[1] / r[0] - 1) < 0.10 and added[1] / added[0] > jump, (tp, r, added)


def test_the_h200_shares_the_h100s_compute_and_not_its_memory_time():
    h100, h200 = load_profile("llmq_h100").rows, load_profile("llmq_h200").rows

    def times(rows):
        g = rows[np.isin(rows["operation"], VIDUR_GEMMS)]
        keys = zip(g["model"].tolist(), g["tp"].tolist(), g["operation"].tolist(), g["tokens"].tolist(),
                   strict=True)
        return dict(zip(keys, g["seconds"].tolist(), strict=True))

    a, b = times(h100), times(h200)
    ratio = {k: b[k] / a[k] for k in a.keys() & b.keys()}
    memory = np.median([r for k, r in ratio.items() if k[3] <= 128])
    compute = np.median([r for k, r in ratio.items() if k[3] > 1024])
    assert 0.70 <= memory <= 0.85 and abs(compute - 1) < 0.03
