"""Expert parallelism (theory.expert_parallel): the experts of a balanced group against a hand
computation, the dispatch and combine bytes, the memory of one GPU, ep = 1 unchanged, the capacity
term, and the replay wiring of the measured DP 2 + EP run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from theory.builder import CostSpec, cost_model
from theory.errors import FieldError
from theory.expert_parallel import bus_bytes_per_token, expert_weight_elements
from theory.models import get_model
from theory.tp_split import shard_memory

MODEL = "qwen3-30b-a3b"
LINK = "allreduce_latency_s = 2e-5\nallreduce_bandwidth_gbs = 16.0\n"
ON = "memory_floor = true\nwaves = true\ngemm_overhead_s = 4e-6\n"
OFF = "memory_floor = false\nwaves = false\ngemm_overhead_s = 0.0\n"  # Eq. 2 alone, for the hand sums


def _gpu_file(tmp_path, body: str, name: str = "gpus.toml") -> str:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def _cm(gpu: str, gpu_file: str | None, mode: str = "real", model: str = MODEL):
    return cost_model(CostSpec(gpu, model, mode, None, gpu_file, None))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ep")
    text = (
        f'[gpus.a100-ep2]\nbase = "a100"\nep = 2\n{LINK}{OFF}'
        f'[gpus.a100-ep2-a2a]\nbase = "a100"\nep = 2\nall2all_backend = "all_to_all"\n{LINK}{OFF}'
        f'[gpus.a100-ep1]\nbase = "a100"\nep = 1\n{OFF}'
        f'[gpus.a100-off]\nbase = "a100"\n{OFF}'
        f'[gpus.a100-floor]\nbase = "a100"\n{ON}'
        f'[gpus.a100-floor-ep1]\nbase = "a100"\nep = 1\n{ON}'
    )
    return _gpu_file(d, text)


def _hand_local_time(cm, tau: int, ep: int) -> float:
    """One GPU's routed-expert time of one MoE layer, Eq. 2 per tile (terms off), for a balanced
    group: each of its E/ep experts receives Binomial(ep tau, k/E) tokens, summed by hand."""
    model, gpu = cm.model, cm.gpu
    E, k = model.moe.n_experts, model.moe.experts_per_token
    n = np.arange(ep * tau + 1)
    pmf = binom.pmf(n, ep * tau, k / E)
    total = 0.0
    for g in model.expert_gemms(cm.mode):
        best = np.inf
        for t, mu in zip(gpu.tiles, gpu.mu, strict=True):
            blocks = E // ep * float(np.sum(pmf * np.ceil(n / t.t_col)))
            tiles = np.ceil(g.d_row / t.t_row) * blocks
            best = min(best, tiles * np.ceil(g.d_red / t.t_red) / (gpu.s * mu))
        total += best
    return total


@pytest.mark.parametrize("tau", [1, 7, 64, 300])
def test_a_gpu_of_the_group_runs_its_experts_and_two_collectives_per_layer(files, tau):
    cm = _cm("a100-ep2", files)
    moe = cm.lin.moe
    per_layer = _hand_local_time(cm, tau, 2)
    d_x, b = cm.model.d_x, cm.gpu.terms.bytes_per_element
    comm = 2 * (2e-5 + tau * (2 - 1) * d_x * b / 16e9)  # all-gather + reduce-scatter of tau rows
    assert moe.time(tau)[0] == pytest.approx(cm.model.n_moe_layers * (per_layer + comm), rel=1e-9)


def test_the_all_to_all_backend_moves_the_slots():
    assert bus_bytes_per_token("all_to_all", 2, 8, 2048, 2) == 8 * 2048 * 2 / 2
    assert bus_bytes_per_token("all_to_all", 4, 8, 2048, 2) == 8 * 2048 * 2 * 3 / 4
    assert bus_bytes_per_token("allgather_reducescatter", 4, 8, 2048, 2) == 3 * 2048 * 2
    assert bus_bytes_per_token("allgather_reducescatter", 1, 8, 2048, 2) == 0.0


def test_the_backend_sets_the_dispatch_time(files):
    ag, a2a = _cm("a100-ep2", files).lin.moe, _cm("a100-ep2-a2a", files).lin.moe
    d_x, b, k = 2048, 2, 8
    assert ag.comm_tok_s == pytest.approx(2 * d_x * b / 16e9)
    assert a2a.comm_tok_s == pytest.approx(2 * k * d_x * b / 2 / 16e9)
    assert ag.comm_batch_s == a2a.comm_batch_s == pytest.approx(4e-5)
    tau = np.array([5, 50])
    assert np.allclose(a2a.time(tau) - ag.time(tau), ag.count * tau * (a2a.comm_tok_s - ag.comm_tok_s))


def test_ep_1_is_the_model_without_the_field(files):
    tau = np.array([1, 3, 64, 1000])
    for plain, ep1 in (("a100-off", "a100-ep1"), ("a100-floor", "a100-floor-ep1")):
        plain, ep1 = _cm(plain, files), _cm(ep1, files)
        assert np.array_equal(plain.lin.moe.time(tau), ep1.lin.moe.time(tau))
        assert plain.lin.moe.per_token_limit() == ep1.lin.moe.per_token_limit()
        assert ep1.lin.moe.ep == 1 and ep1.lin.moe.comm_tok_s == 0.0


def test_the_capacity_term_gains_the_collectives_bytes_per_token(files):
    """T_bar^R's expert part (the per-token limit): the compute per slot is unchanged by ep, the
    collectives add their bus bytes per token per MoE layer."""
    one = _cm("a100-off", files).lin.moe
    two = _cm("a100-ep2", files).lin.moe
    assert two.per_token_limit() == pytest.approx(
        one.per_token_limit() + one.count * two.comm_tok_s, rel=1e-12
    )
    tau = np.array([10_000])
    assert two.time(tau)[0] / tau[0] >= two.per_token_limit()


def test_a_gpu_of_the_group_holds_its_share_of_the_experts():
    model = get_model(MODEL)
    experts = 128 * 48 * 3 * 768 * 2048  # E x MoE layers x (gate, up, down) x d_ff_expert x d_x
    assert expert_weight_elements(model) == experts
    w1, kv1 = shard_memory(model, 1)
    w2, kv2 = shard_memory(model, 1, ep=2)
    assert w1 - w2 == pytest.approx(experts * 2 / 2)
    assert kv1 == kv2


@pytest.mark.parametrize(
    ("body", "model", "field"),
    [
        (f'[gpus.x]\nbase = "a100"\nep = 3\n{LINK}', MODEL, "gpus.x.ep"),  # 128 experts over 3
        (f'[gpus.x]\nbase = "a100"\nep = 2\n{LINK}', "mistral-7b", "gpus.x.ep"),  # dense
        ('[gpus.x]\nbase = "a100"\nep = 2\n', MODEL, "gpus.x.allreduce_bandwidth_gbs"),
        (
            f'[gpus.x]\nbase = "a100"\nep = 2\nall2all_backend = "pplx"\n{LINK}',
            MODEL,
            "gpus.x.all2all_backend",
        ),
        ('[gpus.x]\nbase = "a100"\nep = 0\n', MODEL, "gpus.x.ep"),
        (f'[gpus.x]\nbase = "a100"\nep = 2\ntp = 2\n{LINK}', MODEL, "gpus.x.tp"),
    ],
)
def test_a_group_that_cannot_split_the_experts_is_refused_naming_the_field(tmp_path, body, model, field):
    with pytest.raises(FieldError) as err:
        _cm("x", _gpu_file(tmp_path, body), "real", model)
    assert field in str(err.value)


def test_an_expert_width_that_does_not_split_over_tp_is_named(tmp_path):
    models = tmp_path / "models.toml"
    models.write_text('[models.odd]\nbase = "qwen3-30b-a3b"\nd_ff_expert = 770\n', encoding="utf-8")
    gpus = _gpu_file(tmp_path, f'[gpus.x]\nbase = "a100"\ntp = 4\n{LINK}')
    with pytest.raises(FieldError, match=r"models\.odd\.d_ff_expert"):
        cost_model(CostSpec("x", "odd", "real", None, gpus, str(models)))


def test_a_group_larger_than_the_replicas_is_refused(files):
    from stability.sim.simulate import Scenario, simulate

    sc = Scenario(
        gpu="a100-ep2", gpu_file=files, model=MODEL, mode="real", scheduler="sarathi", r=1, n_requests=10
    )
    with pytest.raises(FieldError, match=r"a100-ep2\.ep"):
        simulate(sc)


# --- the measured DP 2 + EP run ------------------------------------------------------------------

RUN = "llmservingsim_rtxpro6000_qwen3-30b-a3b"


def test_the_moe_run_is_replayed_as_two_replicas_of_one_expert_parallel_group():
    from stability.serving.ep_replay import data_parallel, ep_gpu_table, expert_parallel, link
    from stability.serving.replay import unsupported
    from theory.validation.serving_runs import load_run

    run = load_run(RUN)
    assert unsupported(run) is None
    assert (data_parallel(run), expert_parallel(run)) == (2, 2)
    assert link(run) == (20000e-9, 16e9)  # the run's llmservingsim_config.json: 20000 ns, 16 GB/s
    key, table = ep_gpu_table(run)
    assert (key, table["ep"], table["all2all_backend"]) == ("rtxpro6000-ep2", 2, "allgather_reducescatter")
    with pytest.raises(FieldError, match="at most the 1 GPU"):
        ep_gpu_table(replace(run, gpus=1))
    dense_dp = replace(run, model="qwen3-32b")
    assert "dense" in unsupported(dense_dp)
