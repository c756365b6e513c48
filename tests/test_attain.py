"""Tests of stability.attain and stability.memory_bound: the window estimator against closed forms,
the certified charge against theory.capacity's pieces, Sarathi-Serve's chunk cap, and small
versions of the capacity table and of the memory-bound check (including a wrong bound caught).

The full table is ``benchmarks/capacity_table.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stability.attain import (
    CellOptions,
    attain_cell,
    attaining_policy,
    best_fixed_chunk,
    fixed_chunk_attention,
    request_charge,
    window_throughput,
)
from stability.memory_bound import CASES, KV_TOKENS, memory_check
from stability.sim.simulate import Scenario, cost_model_of, simulate, workload_of
from theory.capacity import capacity_bound, law_from_cost_model, min_prefill_attention, staircase_law
from theory.cost import T_P_SA
from theory.errors import FieldError


def test_window_throughput_counts_a_fixed_window():
    # arrivals at 0..99 s, each done 0.5 s later: the window (19, 99] holds the 80 completions
    # 19.5..98.5, one per second
    arrival = np.arange(100.0)
    m = window_throughput(arrival, arrival + 0.5, np.zeros(100, dtype=int), 1)
    assert m["completions"] == 80
    assert m["rate"] == pytest.approx(1.0)


def test_window_throughput_is_not_moved_by_a_clump():
    # 50 completions in one instant at the window's end: (k - 1) / span would count them over the
    # first-to-last span; the window divides by its own length
    arrival = np.linspace(0.0, 100.0, 200)
    finish = np.concatenate([np.linspace(30.0, 60.0, 150), np.full(50, 99.0)])
    m = window_throughput(arrival, finish, np.zeros(200, dtype=int), 1, warmup=0.2)
    t0 = arrival[int(0.2 * 199)]
    assert m["rate"] == pytest.approx(np.sum(finish > t0) / (100.0 - t0))


def test_window_throughput_rejects_a_bad_warmup():
    with pytest.raises(FieldError, match="warmup"):
        window_throughput(np.arange(3.0), np.arange(3.0), np.zeros(3, dtype=int), 1, warmup=1.0)


@pytest.mark.parametrize("gpu", ["a100", "l4"])
def test_request_charge_averages_to_the_bounds_work(gpu):
    sc = Scenario(gpu=gpu, pad=True)
    cm = cost_model_of(sc)
    w = workload_of(sc, cm)
    charge = request_charge(cm, w)
    assert w.expect(charge(w.L_P, w.L_D)) == pytest.approx(capacity_bound(cm, w).work_per_request_s,
                                                            rel=1e-9)


def test_attaining_budget_closes_the_gap_it_states(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('[gpus.a100_c]\nbase = "a100"\noverhead_s = 0.005\n')
    sc = Scenario(gpu="a100_c", gpu_file=str(path), pad=True)
    cm = cost_model_of(sc)
    w = workload_of(sc, cm)
    pol = attaining_policy(cm, w)
    assert pol.epsilon <= 0.005
    assert pol.epsilon == pytest.approx(1 - capacity_bound(cm, w, b_max=pol.budget).bound
                                        / capacity_bound(cm, w).bound)
    # one doubling less leaves more than eps: the budget is the smallest of the doubling sequence
    assert 1 - capacity_bound(cm, w, b_max=pol.budget // 2).bound / pol.bound > 0.005


def test_attaining_budget_when_the_bound_names_no_batch_size():
    """The calibrated A100's tile model (``a100-tile``: real mode without the measured law)
    charges a fixed time per GeMM: min F(tau)/tau is only approached as batches grow, so the
    doubling starts at Sarathi-Serve's default budget and stops at eps; the budget is then a size
    attaining the capped LP's best F(tau)/tau (waves make F(tau)/tau far from monotone), and the
    chunk the split period, or without one the fixed size with the least mean attention."""
    sc = Scenario(gpu="a100-tile", mode="real", pad=True)
    cm = cost_model_of(sc)
    w = workload_of(sc, cm)
    assert capacity_bound(cm, w, overhead_s=0.0).best_batch_tokens is None
    pol = attaining_policy(cm, w)
    cap = 512
    while 1 - capacity_bound(cm, w, b_max=cap).bound / pol.bound > 0.005 and 2 * cap <= 1 << 16:
        cap *= 2
    law = law_from_cost_model(cm)
    per_tok = (law.token_time(cap)[1:] + law.fixed_s) / np.arange(1, cap + 1)
    assert pol.budget <= cap
    assert per_tok[pol.budget - 1] == pytest.approx(per_tok.min(), rel=1e-12)
    assert per_tok[cap - 1] > per_tok.min() * 1.01  # the full doubled budget would cost more
    assert pol.epsilon == pytest.approx(1 - capacity_bound(cm, w, b_max=pol.budget).bound
                                        / capacity_bound(cm, w).bound)
    assert pol.epsilon <= 0.005
    assert pol.max_chunk == (min(pol.budget, law.split_period) if law.split_period is not None
                             else best_fixed_chunk(law, w, pol.budget))


def test_fixed_chunk_attention_against_a_loop():
    """Eq. 6 summed chunk by chunk in plain Python, on the calibrated A100 with waves on Eq. 6 (no
    split period: the chunk size matters far from monotonically)."""
    sc = Scenario(gpu="a100", mode="real", workload="uniform:100-700,1-2")
    cm = replace(cost_model_of(sc), attention_waves=True)
    w = workload_of(sc, cm)
    law = law_from_cost_model(cm)
    assert law.split_period is None

    def by_loop(chunk):
        total = 0.0
        for lp, p in zip(w.L_P.tolist(), w.p.tolist(), strict=True):
            start = 0
            while start < lp:
                c = min(chunk, lp - start)
                total += p * float(T_P_SA(cm, start + 1, c))
                start += c
        return total

    sizes = (64, 128, 192, 320, 640)
    costs = [by_loop(c) for c in sizes]
    for c, x in zip(sizes, costs, strict=True):
        assert fixed_chunk_attention(law, w, c) == pytest.approx(x, rel=1e-9)
    best = best_fixed_chunk(law, w, 640)
    assert fixed_chunk_attention(law, w, best) <= min(costs) * (1 + 1e-12)
    # no chunking beats the chunking DP's minimum
    f = min_prefill_attention(law, w.l_P_max)
    assert w.expect(f[w.L_P]) <= fixed_chunk_attention(law, w, best) * (1 + 1e-12)
    # without attention nothing is gained by chunking: chunks stay whole
    flat = staircase_law(0.004, 0.002, 64)
    assert fixed_chunk_attention(flat, w, 128) == 0.0
    assert best_fixed_chunk(flat, w, 640) == 640


def test_sarathi_chunk_cap_caps_chunks_and_fills_the_budget():
    sc = Scenario(gpu="a100", scheduler="sarathi", pad=True, load=4.0, n_requests=300, detail=True,
                  log=True, options=(("chunk_size", 2048), ("max_chunk", 256), ("max_num_seqs", 2048),
                                     ("memory", False)))
    detailed = simulate(sc)
    log = detailed.batch_log()
    # fast mode (runs of identical batches as one event) builds the same capped batches
    fast = simulate(replace(sc, detail=False, log=False))
    np.testing.assert_allclose(fast.requests["t_finish"], detailed.requests["t_finish"], rtol=1e-9)
    chunks = np.array([int(x.split(":")[2]) for cell in log["prefill_chunks"] if cell
                       for x in cell.split()])
    assert chunks.size > 0 and chunks.max() <= 256
    # under backlog a batch takes several capped chunks and fills to the budget
    assert log["prefills"].max() >= 8 and np.sum(log["tokens"] == 2048) >= 100
    base = replace(sc, options=(("chunk_size", 512),), detail=False, log=False, load=0.9)
    same = replace(base, options=(("chunk_size", 512), ("max_chunk", 512)))
    assert np.array_equal(simulate(base).requests["t_finish"], simulate(same).requests["t_finish"])


def test_small_capacity_table_cell():
    """A100, paper mode, padded: no scheduler above the bound, the policy within max(1%, CI)."""
    cell = attain_cell("a100", "paper", "pad",
                       CellOptions(replicates=2, n_requests=6000, schedulers=(("rad", (("n", 2000),)),)))
    assert cell["saturated"]
    assert cell["none_exceeds"] and cell["attains"], cell["runs"]
    assert cell["runs"]["rad"]["work"][0] <= cell["bound"] * 1.01


def test_memory_bound_is_met_and_a_wrong_bound_is_caught(tmp_path):
    ok = memory_check(tmp_path, replicates=3, n_requests=4000, cases=CASES[:1])
    assert ok["binds"] == "kv-memory"
    assert ok["met"] and ok["never_exceeded"], ok["cases"]
    wrong = memory_check(tmp_path, replicates=2, n_requests=2000, kv_tokens=KV_TOKENS // 2,
                         cases=CASES[:1])
    assert not wrong["never_exceeded"]
