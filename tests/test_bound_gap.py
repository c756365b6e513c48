"""stability.bound_gap: a logged schedule's losses against the certified bound, on a paper-mode case
whose waste is known in closed form (one tile, so Eq. 4 and Eq. 6 are plain ceilings)."""

import math

import pytest

from stability.bound_gap import COMPONENTS, batch_log_gap
from stability.sim.simulate import Scenario, cost_model_of, simulate, workload_of
from theory.errors import FieldError

L_P, L_D, CHUNK = 12, 5, 4


@pytest.fixture(scope="module")
def one_request():
    """One request of 12 prompt tokens and 5 decodes, Sarathi-Serve with a 4-token budget, on
    the A100's t* alone: three prefill batches of 4 tokens, then five decode batches of 1 token."""
    sc = Scenario(gpu="a100", tiles="t*", workload=f"deterministic:{L_P},{L_D}", scheduler="sarathi",
                  options=(("chunk_size", CHUNK), ("memory", False)), n_requests=1, rate=1.0,
                  load=None, detail=True, log=True)
    res = simulate(sc)
    cm = cost_model_of(sc)
    return cm, workload_of(sc, cm), res


def test_losses_match_the_closed_form(one_request):
    cm, w, res = one_request
    assert res.runs[0].batches["tokens"].tolist() == [CHUNK] * (L_P // CHUNK) + [1] * L_D
    g = batch_log_gap(cm, w, res)
    mu = float(cm.mu_Lin[0])  # Eq. 4 on the one tile: G(tau) = ceil(tau / t_col) / mu + tau / mu_nLin
    t_col, t_row, t_red = int(cm.t_col[0]), int(cm.t_row[0]), int(cm.t_red[0])
    n_dec = L_D  # decode iterations DI(R, L_P + k), k = 1..L_D, each in its own batch
    # G(tau) / tau is least at the largest logged size, 4 tokens (one column tile), and the LP's
    # price is 1 / (mu t_col) per token (full tiles), the tau / mu_nLin part cancelling throughout
    assert g["best_tokens"] == CHUNK
    assert g["prices"]["u"] == pytest.approx(1 / (mu * t_col) + 1 / cm.mu_nLin, rel=1e-12)
    assert g["loss_s"]["linear_size"] == pytest.approx(n_dec * (1 / mu - 1 / (CHUNK * mu)), rel=1e-9)
    assert g["loss_s"]["linear_budget"] == pytest.approx(
        (L_P + n_dec) * (1 / (CHUNK * mu) - 1 / (t_col * mu)), rel=1e-9)
    # Eq. 6: a chunk of at most t_row, t_red rows costs N (ceil(d / t_red) + ceil(d / t_row)) tiles
    # wherever it starts in these 12 tokens, so the least chunking is one chunk and three cost 2 more
    assert L_P <= min(t_row, t_red)
    d = cm.d_pre
    one_chunk = cm.N * (math.ceil(d / t_red) + math.ceil(d / t_row)) / (cm.s * float(cm.mu[0]))
    assert g["loss_s"]["prefill_attention"] == pytest.approx(2 * one_chunk, rel=1e-9)
    assert g["time_s"]["prefill_attention"] == pytest.approx(3 * one_chunk, rel=1e-9)
    # the simulator prices every batch by the same law, and the single request never waits
    assert abs(g["loss_s"]["residual"]) <= 1e-12 * g["busy_s"]
    assert abs(g["loss_s"]["idle"]) <= 1e-12 * g["busy_s"]
    assert g["efficiency"] == pytest.approx(1 - sum(g["loss_s"][k] for k in COMPONENTS) / g["span_s"],
                                            rel=1e-12)


def test_window_keeps_whole_prompts_only(one_request):
    cm, w, res = one_request
    start = res.runs[0].batches["start"]
    g = batch_log_gap(cm, w, res, window=(float(start[1]), float("inf")))
    assert g["batches"] == start.size - 1
    assert g["loss_s"]["prefill_attention"] == 0.0  # the prompt's first chunk lies outside


def test_refuses_a_run_without_log(one_request):
    cm, w, res = one_request
    plain = simulate(Scenario(gpu="a100", tiles="t*", workload=f"deterministic:{L_P},{L_D}",
                              n_requests=1, rate=1.0, load=None))
    with pytest.raises(FieldError, match="log=True"):
        batch_log_gap(cm, w, plain)
    with pytest.raises(FieldError, match="window"):
        batch_log_gap(cm, w, res, window=(2.0, 1.0))
