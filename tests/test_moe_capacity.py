"""Tests of the certified capacity bound (theory.capacity) on mixture-of-experts models: the MoE
term in every batch size's ``G(tau)``, the tail slope as a true lower bound of ``G(tau) / tau``
far past the tabulated sizes, the KV bound on the attention dimensions, and the LP's best batch
size under a token budget against a brute-force minimum.

Every expected value is computed independently: ``T_Lin`` evaluated directly at each token count,
the experts' time of :meth:`theory.moe.MoETerms.time`, the KV bytes from the public config's
numbers, and ``min F(tau) / tau`` by enumeration.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound, kv_capacity_tokens, law_from_cost_model
from theory.cost import T_Lin
from theory.workload import get_workload

# (gpu, model, mode): the MoE presets on GPUs that hold their weights, real and paper mode
CASES = (("h100", "qwen3-30b-a3b", "real"), ("rtxpro6000", "qwen3-30b-a3b", "real"),
         ("h200", "mixtral-8x7b", "real"), ("a100", "mixtral-8x7b", "paper"))


def _cm(gpu, model, mode):
    return cost_model(CostSpec(gpu, model, mode=mode))


@pytest.mark.parametrize(("gpu", "model", "mode"), CASES)
def test_tail_slope_is_below_g_over_tau_far_beyond_the_table(gpu, model, mode):
    cm = _cm(gpu, model, mode)
    law = law_from_cost_model(cm)
    H = 8192
    table = law.token_time(H)[1:] / np.arange(1, H + 1)
    tau = np.unique(np.geomspace(H + 1, 2_000_000, 60).astype(np.int64))
    tau = np.concatenate([tau, H + 1 + np.arange(0, 4000, 37)])  # odd sizes just past the table
    direct = (T_Lin(cm, tau) + tau / cm.mu_nLin) / tau  # the numeric model, token count by token count
    assert law.tail_slope <= table.min() * (1 + 1e-12)
    assert law.tail_slope <= direct.min() * (1 + 1e-12)
    if cm.lin is not None:  # the experts' own time per token never drops below its limit either
        moe = cm.lin.moe
        assert np.all(moe.time(tau) / tau >= moe.per_token_limit() * (1 - 1e-12))


@pytest.mark.parametrize(("gpu", "model", "mode"), CASES[:3])
def test_moe_term_enters_g_at_every_batch_size(gpu, model, mode):
    cm = _cm(gpu, model, mode)
    dense = replace(cm, lin=replace(cm.lin, moe=None))
    H = 4096
    tau = np.arange(1, H + 1)
    diff = law_from_cost_model(cm).token_time(H)[1:] - law_from_cost_model(dense).token_time(H)[1:]
    np.testing.assert_allclose(diff, cm.lin.moe.time(tau), rtol=1e-9, atol=0.0)
    assert np.all(diff > 0)


def test_kv_bound_uses_the_attention_dimensions():
    cm = _cm("h100", "qwen3-30b-a3b", "real")
    # Qwen/Qwen3-30B-A3B config.json: 48 layers, 4 KV heads of 128; every expert's weights resident
    kv_bytes = 2 * 48 * 4 * 128 * 2
    expect = (0.9 * cm.gpu.memory_bytes - 2 * cm.model.params) / kv_bytes
    assert kv_capacity_tokens(cm) == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("b_max", [96, 700, 3000])
def test_lp_takes_the_best_batch_under_the_budget(b_max):
    """Without a decode cap, Phi = E[L_P + L_D] min_{tau <= b_max} F(tau) / tau: the experts' cost
    per token falls with the batch, so the LP's size is the budget's best, found by enumeration."""
    cm = _cm("h100", "qwen3-30b-a3b", "real")
    w = get_workload("deterministic:512,64")
    law = law_from_cost_model(cm)
    tau = np.arange(1, b_max + 1)
    per_token = (law.token_time(b_max)[1:] + law.fixed_s) / tau
    cb = capacity_bound(cm, w, b_max=b_max)
    assert cb.pieces_s["linear+fixed"] == pytest.approx(576 * per_token.min(), rel=1e-12)
    assert per_token[cb.best_batch_tokens - 1] == pytest.approx(per_token.min(), rel=1e-12)
    assert per_token[-1] < per_token[0] / 10  # one token streams the experts it touches for itself
