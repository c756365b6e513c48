"""vLLM's data-parallel lockstep (stability.serving.lockstep): a hand trace of two ranks whose step
times are summed by hand from Eq. 7 (theory.cost.T_batch), one rank identical to the engine as it
runs alone, lockstep never faster than independent replicas on the same routing, the refusals, and
the replay of the measured DP 2 + EP run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stability.schedulers import sarathi, vllm_v1
from stability.serving.lockstep import run_lockstep
from stability.serving.replay import ReplaySpec, locks_ranks, replay
from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.routing import Cluster, Requests
from theory.builder import CostSpec, cost_model
from theory.cost import Batch, T_batch, T_Lin
from theory.errors import FieldError
from theory.validation.serving_runs import load_run

SIZES = [1, 2, 4, 8, 16]  # CUDA-graph capture sizes: a step of at most 16 tokens pads
LINK = "allreduce_latency_s = 2e-5\nallreduce_bandwidth_gbs = 16.0\n"


@pytest.fixture(scope="module")
def gpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("lockstep") / "gpus.toml"
    path.write_text(
        f'[gpus.a100-ep2]\nbase = "a100"\nep = 2\n{LINK}cudagraph_capture_sizes = {SIZES}\n'
        f'[gpus.a100-graphs]\nbase = "a100"\ncudagraph_capture_sizes = {SIZES}\n',
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture(scope="module")
def moe(gpus):
    return cost_model(CostSpec("a100-ep2", "qwen3-30b-a3b", "real", None, gpus, None))


@pytest.fixture(scope="module")
def dense(gpus):
    return cost_model(CostSpec("a100-graphs", "llama-3.1-8b", "real", None, gpus, None))


def _eager(cm):
    """The cost model without CUDA graphs (a step above the capture sizes runs eagerly)."""
    return replace(cm, gpu=replace(cm.gpu, terms=replace(cm.gpu.terms, cudagraph_capture_sizes=None)))


def _padded(cm, batch: Batch, top: int) -> float:
    """Eq. 7 of ``batch`` with its token-wise part (linear, with the experts of a balanced group,
    and non-linear) taken at ``top`` tokens, the count every rank pads to."""
    tau = batch.tau
    return (
        T_batch(cm, batch)
        - float(T_Lin(cm, tau))
        - tau / cm.mu_nLin
        + float(T_Lin(cm, top))
        + top / cm.mu_nLin
    )


def _unbalanced(cm, batch: Batch, total: int) -> float:
    """Eq. 7 of ``batch`` run eagerly while the group of two ranks holds ``total`` tokens: its
    routed experts those of a balanced group of ``total / 2`` tokens per rank."""
    eager = _eager(cm)
    return (
        T_batch(eager, batch) - float(cm.lin.moe.time(batch.tau)[0]) + float(cm.lin.moe.time(total // 2)[0])
    )


def _dummy(cm, top: int) -> float:
    """An idle rank's dummy pass, padded to ``top`` tokens (its attention not priced)."""
    return float(T_Lin(cm, top)) + top / cm.mu_nLin + cm.fixed_s


def test_a_hand_trace_of_two_ranks_steps_together(moe):
    """Rank 0 runs A (40 prompt tokens, 3 decodes); rank 1 runs B (10, 1) and C (12, 1), C arriving
    during the first step. Step 1 (A 40 + B 10 tokens: above the capture sizes, eager, experts on
    50 tokens); step 2 (A's decode beside B's decode and C's 12-token prompt: both pad to 13);
    step 3 (two decodes); step 4 (A's last decode beside rank 1's dummy pass)."""
    prm = vllm_v1.make_params(
        moe, max_num_batched_tokens=64, max_num_seqs=8, memory=False, enable_prefix_caching=False
    )
    rq = Requests(np.array([0.0, 0.0, 1e-9]), np.array([40, 10, 12]), np.array([3, 1, 1]))
    node, runs = run_lockstep(
        moe, vllm_v1, prm, rq, Cluster(2, "jsq", np.random.default_rng(0)), node=np.array([0, 1, 1])
    )
    d1 = max(
        _unbalanced(moe, Batch.of(prefill=[(1, 40)]), 50), _unbalanced(moe, Batch.of(prefill=[(1, 10)]), 50)
    )
    d2 = max(
        _padded(moe, Batch.of(decode=[41]), 13), _padded(moe, Batch.of(prefill=[(1, 12)], decode=[11]), 13)
    )
    d3 = max(_padded(moe, Batch.of(decode=[42]), 1), _padded(moe, Batch.of(decode=[13]), 1))
    d4 = max(_padded(moe, Batch.of(decode=[43]), 1), _dummy(moe, 1))
    assert node.tolist() == [0, 1, 1]
    a, bc = runs
    assert np.allclose(a.t_first, [d1], rtol=1e-12, atol=0)
    assert np.allclose(a.t_finish, [d1 + d2 + d3 + d4], rtol=1e-12, atol=0)
    assert np.allclose(bc.t_first, [d1, d1 + d2], rtol=1e-12, atol=0)
    assert np.allclose(bc.t_finish, [d1 + d2, d1 + d2 + d3], rtol=1e-12, atol=0)
    # the padding and the group's experts do change the steps: the hand sums are not the ranks alone
    assert d1 < T_batch(_eager(moe), Batch.of(prefill=[(1, 40)]))
    assert d2 > T_batch(moe, Batch.of(decode=[41]))


def _trace(n: int, seed: int, rate: float):
    rng = np.random.default_rng(seed)
    return Requests(np.cumsum(rng.exponential(1 / rate, n)), rng.integers(5, 400, n), rng.integers(1, 120, n))


@pytest.mark.parametrize("kv_blocks", [None, 60])  # 60 blocks of 16 tokens: preemptions
def test_one_rank_is_the_engine_as_it_runs_alone(dense, kv_blocks):
    opts = {"max_num_batched_tokens": 256, "max_num_seqs": 16, "enable_prefix_caching": False}
    memory = {} if kv_blocks is None else {"kv_blocks": kv_blocks, "max_model_len": kv_blocks * 16}
    prm = vllm_v1.make_params(dense, **opts, **memory)
    rq = _trace(150, 1, 30.0)
    _, (ls,) = run_lockstep(dense, vllm_v1, prm, rq, Cluster(1, "jsq", np.random.default_rng(0)))
    alone = run_gpu(dense, vllm_v1, prm, rq.arrival, rq.L_P, rq.L_D)
    if kv_blocks is not None:
        assert np.nansum(alone.preemptions) > 0
    assert np.array_equal(ls.preemptions, alone.preemptions)
    for key in ("t_start", "t_first", "t_finish"):
        assert np.allclose(getattr(ls, key), getattr(alone, key), rtol=1e-9, atol=0), key


def _batches(run) -> dict:
    """A rank's logged batches by start time: (duration, Batch of its logged iterations)."""
    it, b = run.items, run.batches
    out = {}
    for k, (start, dur) in enumerate(zip(b["start"], b["duration"], strict=True)):
        mine = it["batch"] == k
        chunks = it["c"][mine] > 0
        out[float(start)] = (
            float(dur),
            Batch.of(
                prefill=zip(it["i"][mine][chunks], it["c"][mine][chunks], strict=True),
                decode=it["i"][mine][~chunks],
            ),
        )
    return out


@pytest.mark.parametrize("seed", [2, 3])
def test_every_step_is_the_slowest_rank_padded_and_never_faster_than_its_batch_alone(dense, seed):
    """Two ranks on a random trace (a dense model: no experts to share), each step recomputed from
    the logged batches of both ranks with Eq. 7 (theory.cost.T_batch): its duration is the largest
    of the ranks' passes (padded to the largest token count within the capture sizes, an idle rank's
    dummy pass of one token included), so at least each rank's batch alone."""
    prm = vllm_v1.make_params(dense, max_num_batched_tokens=256, max_num_seqs=16, enable_prefix_caching=False)
    rq = _trace(200, seed, 40.0)
    rec = RunOptions(detail=True, log=True)
    node, runs = run_lockstep(dense, vllm_v1, prm, rq, Cluster(2, "jsq", np.random.default_rng(0)), rec)
    assert set(node.tolist()) == {0, 1}
    ranks = [_batches(run) for run in runs]
    eager = _eager(dense)
    padded = lonely = 0
    for start in sorted(set(ranks[0]) | set(ranks[1])):
        here = [rank.get(start) for rank in ranks]
        top = max(1 if h is None else h[1].tau for h in here)
        if top <= max(SIZES):
            padded += 1
            passes = [_dummy(dense, top) if h is None else _padded(dense, h[1], top) for h in here]
        else:
            passes = [_dummy(eager, 1) if h is None else T_batch(eager, h[1]) for h in here]
        lonely += any(h is None for h in here)
        for h in here:
            if h is not None:
                assert h[0] == pytest.approx(max(passes), rel=1e-9, abs=0)
                assert h[0] >= T_batch(dense, h[1]) * (1 - 1e-12)
    assert padded > 0 and lonely > 0  # both rules were exercised


def test_lockstep_refuses_what_it_does_not_model(moe, dense):
    rq = _trace(5, 0, 10.0)
    cluster = Cluster(2, "jsq", np.random.default_rng(0))
    prm = vllm_v1.make_params(dense, max_num_batched_tokens=256, max_num_seqs=16)
    with pytest.raises(FieldError, match="scheduler"):
        run_lockstep(dense, sarathi, sarathi.make_params(dense, chunk_size=256), rq, cluster)
    with pytest.raises(FieldError, match="planner"):
        run_lockstep(dense, vllm_v1, prm, rq, Cluster(2, "random", np.random.default_rng(0)))
    with pytest.raises(FieldError, match="node"):
        run_lockstep(dense, vllm_v1, prm, rq, cluster, node=np.array([0, 1, 2, 0, 1]))
    with pytest.raises(FieldError, match=r"r \(gpus\)"):
        run_lockstep(
            moe,
            vllm_v1,
            vllm_v1.make_params(moe, memory=False),
            rq,
            Cluster(4, "jsq", np.random.default_rng(0)),
        )
    with pytest.raises(FieldError, match="lockstep"):
        ReplaySpec("llmservingsim_rtxpro6000_qwen3-30b-a3b", lockstep="yes")


def test_only_a_data_parallel_expert_parallel_run_on_vllm_v1_locks_its_ranks():
    moe_run, dense_run = (
        load_run("llmservingsim_rtxpro6000_qwen3-30b-a3b"),
        load_run("llmservingsim_rtx4090_llama-3.1-8b"),
    )
    assert locks_ranks(moe_run, "vllm_v1")
    assert not locks_ranks(moe_run, "sarathi")  # Sarathi-Serve's engine has no data-parallel group
    assert not locks_ranks(dense_run, "vllm_v1")
    assert not replay(ReplaySpec("llmservingsim_rtx4090_llama-3.1-8b")).lockstep


def test_the_moe_run_is_replayed_in_lockstep_unless_asked_otherwise(tmp_path):
    from tests.test_serving_replay import small_run

    folder = str(small_run(tmp_path, "llmservingsim_rtxpro6000_qwen3-30b-a3b", keep=40))
    locked, free = replay(ReplaySpec(folder)), replay(ReplaySpec(folder, lockstep=False))
    assert locked.lockstep and not free.lockstep
    for rep in (locked, free):
        assert set(rep.result.requests["node"].tolist()) == {0, 1}
        assert np.all(np.isfinite(rep.predicted["latency"]))
    assert not np.allclose(locked.predicted["latency"], free.predicted["latency"])
