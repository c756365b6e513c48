"""The H100 Llama-3.1-70B TP 4 point (LLMServingSim's paper artifact): its model preset, its
tensor-parallel group (its small operators priced on vidur's H100 profile of the same layer in vLLM's
fused kernels), and its replay from the trace, scored on the published means only."""

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from stability.serving.replay import ReplaySpec, replay, tp_gpu_table, unsupported
from stability.serving.score import AGGREGATES, score_run
from tests import reference_sim as ref
from theory.hardware import gpu_table
from theory.models import get_model
from theory.tensor_parallel import allreduce_law
from theory.validation.serving_published import MEASURED
from theory.validation.serving_runs import load_run, shipped_runs
from theory.validation.small_ops import small_ops_law

H100 = "llmservingsim_h100_llama-3.1-70b"


def test_the_preset_is_the_artifacts_model_config():
    # casys-kaist/LLMServingSim@e0f4911 model_config/meta-llama/Llama-3.1-70B.json (HF config.json values)
    m = get_model(load_run(H100).model)
    assert (m.N, m.d_x, m.n_heads, m.n_kv_heads, m.d_ff, m.d_out, m.context_length) == (
        80,
        8192,
        64,
        8,
        28672,
        128256,
        131072,
    )
    assert m.head_dim * m.n_heads == m.d_x


def test_the_run_is_replayable_as_a_tp4_group_with_the_packaged_law():
    run = load_run(H100)
    assert unsupported(run) is None and run.requests is None
    key, table = tp_gpu_table(run)
    lat, bw = allreduce_law("h100", 4)
    assert key == "h100-tp4" and table["tp"] == 4
    assert table["allreduce_latency_s"] == lat and table["allreduce_bandwidth_gbs"] == bw / 1e9


def test_the_groups_small_operators_are_priced_by_their_law_on_vidurs_h100_profile():
    # the element-wise time of Eq. 7 is the law fitted on vidur_kernels' Llama-2-70B rows (the same
    # layer, one rank at TP 4), not the streaming rate nor LLMServingSim's eager profile; the
    # calibrated preset has no fixed time of its own
    run = load_run(H100)
    law = small_ops_law("h100", "llama-3.1-70b", 4)
    assert (law.profile, law.models) == ("vidur_kernels", ("llama-2-70b",))
    _, table = tp_gpu_table(run)
    assert "overhead_s" not in gpu_table("h100", calibrated=True)
    assert table["overhead_s"] == law.fixed_s and table["mu_nLin"] == 1 / law.per_token_s


def small_trace_run(tmp_path: Path, keep: int = 40) -> Path:
    """A copy of the H100 run holding its first ``keep`` trace requests (its published figures are
    the whole run's: only the scoring's wiring is tested on them)."""
    dst = tmp_path / f"{H100}-{keep}"
    shutil.copytree(shipped_runs()[H100], dst)
    with open(dst / "trace.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    with open(dst / "trace.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(r for r in rows if int(r["request_id"]) < keep)
    return dst


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = small_trace_run(tmp_path_factory.mktemp("runs"))
    return folder, replay(ReplaySpec(str(folder)))


def test_the_trace_replay_is_the_naive_reference(small):
    folder, rep = small
    run = load_run(folder)
    prm, rq = rep.result.params, rep.result.requests
    assert rep.measured is None and rep.result.cost_model.gpu.terms.tp == 4
    law = small_ops_law("h100", "llama-3.1-70b", 4)
    cm = rep.result.cost_model
    assert cm.mu_nLin == pytest.approx(1 / law.per_token_s, rel=1e-12)
    assert cm.overhead_s == pytest.approx(law.fixed_s, rel=1e-12)
    assert np.allclose(rq["arrival"], run.trace.arrival - run.trace.arrival[0])
    assert np.array_equal(rq["L_D"], np.maximum(run.trace.output_tokens - 1, 1))
    parent = [int(p) for p in run.trace.prefix_parent]
    shared = [int(s) if p >= 0 else 0 for p, s in zip(parent, run.trace.shared_prefix_tokens, strict=True)]
    mem = ref.PrefixPool(prm.kv.blocks, prm.kv.block_size, parent, shared)
    sim = ref.vllm_v1(
        rep.result.cost_model,
        rq["arrival"],
        rq["L_P"].astype(int),
        rq["L_D"].astype(int),
        prm.max_num_batched_tokens,
        prm.max_num_seqs,
        prm.long_prefill_token_threshold,
        prm.max_model_len,
        mem,
    )
    first = np.array([r.first for r in sim.reqs])
    finish = np.array([r.finish for r in sim.reqs])
    assert np.allclose(rep.predicted["ttft"], first - rq["arrival"], rtol=0, atol=1e-9)
    assert np.allclose(rep.predicted["latency"], finish - rq["arrival"], rtol=0, atol=1e-9)


def test_the_replay_is_deterministic(small):
    folder, rep = small
    again = replay(ReplaySpec(str(folder)))
    for k in ("ttft", "tpot", "latency"):
        assert np.array_equal(rep.predicted[k], again.predicted[k], equal_nan=True)


def test_a_means_only_run_scores_the_published_means_only(small):
    folder, _ = small
    run = load_run(folder)
    s = score_run(ReplaySpec(str(folder)))
    assert s.available == AGGREGATES and s.replay is None
    assert {(r.metric, r.statistic) for r in s.rows} == {("ttft", "mean"), ("tpot", "mean")}
    for r in s.rows:
        assert r.measured == run.figure(MEASURED, r.metric, "mean")
        assert r.error == pytest.approx(r.predicted / r.measured - 1)
