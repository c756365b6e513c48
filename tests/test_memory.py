"""KV capacity known answers and the validation of memory and scheduler options."""

import pytest

from stability.sim.memory import capacity_blocks, kv_config
from stability.sim.registry import get_scheduler
from stability.sim.simulate import Scenario, cost_model_of
from theory.errors import FieldError, UnknownNameError


@pytest.fixture(scope="module")
def a100():
    return cost_model_of(Scenario(gpu="a100", model="mistral-7b"))


def test_capacity_known_answer(a100):
    # Mistral-7B: 32 layers x 8 KV heads x 128 x (K and V) x 2 bytes = 131,072 bytes per token;
    # 7.24e9 parameters x 2 bytes = 14.48 GB of weights; A100: 80 GB; blocks of 16 tokens.
    # vLLM (90%): (72e9 - 14.48e9) / (131072 x 16) = 27,427.6; Sarathi-Serve (80%): 23,612.6.
    assert capacity_blocks(a100, 0.9, 16) == 27427
    assert capacity_blocks(a100, 0.8, 16) == 23612
    kv = kv_config(a100, True, 0.9)
    assert (kv.blocks, kv.watermark_blocks, kv.block_size) == (27427, 274, 16)
    assert get_scheduler("vllm").make_params(a100).kv.blocks == 27427
    assert get_scheduler("sarathi").make_params(a100).kv.blocks == 23612


def test_weights_that_do_not_fit(a100):
    with pytest.raises(FieldError, match="gpu_memory_utilization"):
        kv_config(a100, True, 0.1)  # 8 GB < 14.48 GB of weights


def test_transfer_time_known_answer(a100):
    p = get_scheduler("distserve").make_params(a100, link_bandwidth=1e9)
    assert p.transfer_time([1000]).tolist() == [1000 * 131072 / 1e9]
    assert get_scheduler("distserve").make_params(a100).transfer_time([1000]).tolist() == [0.0]


@pytest.mark.parametrize(("name", "options", "field"), [
    ("sarathi", {"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
    ("sarathi", {"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ("sarathi", {"watermark": 1.0}, "watermark"),
    ("sarathi", {"memory": "yes"}, "memory"),
    ("sarathi", {"block_size": 0}, "block_size"),
    ("sarathi", {"kv_blocks": 0}, "kv_blocks"),
    ("sarathi", {"order": "lifo"}, "order"),
    ("sarathi", {"chunk_size": 0}, "chunk_size"),
    ("sarathi", {"max_num_seqs": -1}, "max_num_seqs"),
    ("sarathi_paper", {"chunk_size": 2.5}, "chunk_size"),
    ("vllm", {"max_num_batched_tokens": 0}, "max_num_batched_tokens"),
    ("vllm", {"max_model_len": 0}, "max_model_len"),
    ("distserve", {"prefill_mode": "eager"}, "prefill_mode"),
    ("distserve", {"decode_cap": -1}, "decode_cap"),
    ("distserve", {"link_bandwidth": -1.0}, "link_bandwidth"),
    ("distserve", {"prefill_nodes": 0}, "prefill_nodes"),
])
def test_bad_options(a100, name, options, field):
    with pytest.raises(FieldError) as err:
        get_scheduler(name).make_params(a100, **options)
    assert err.value.field == field


def test_distserve_needs_a_decode_node():
    from stability.sim.simulate import simulate

    with pytest.raises(FieldError, match="prefill_nodes"):
        simulate(Scenario(scheduler="distserve", r=1, n_requests=10))
    with pytest.raises(FieldError, match="prefill_nodes"):
        simulate(Scenario(scheduler="distserve", r=2, n_requests=10).with_options(prefill_nodes=2))


def test_unknown_scheduler():
    with pytest.raises(UnknownNameError):
        get_scheduler("orca")
