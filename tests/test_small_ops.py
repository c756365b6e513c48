"""The small-operator law (theory.validation.small_ops): S(tau) from a profile's element-wise rows,
its line of least relative squares, and which profile's rows price a run."""

import numpy as np
import pytest

from stability.serving.replay import tensor_parallel
from theory.errors import FieldError
from theory.profiles import load_profile
from theory.validation.serving_runs import load_run, shipped_runs
from theory.validation.small_ops import (
    LLMSERVINGSIM_H100,
    KernelSource,
    fit_small_ops,
    profile_law,
    small_ops_law,
    small_ops_seconds,
)

ROWS = np.dtype([("model", "U20"), ("operation", "U30"), ("tokens", "i8"), ("seconds", "f8")])
SOURCE = KernelSource("made-up", layer_ops={"norm": 2, "act": 1}, pass_ops={"emb": 1, "norm": 1})


def rows(table: dict, model: str = "m") -> np.ndarray:
    return np.array(
        [(model, op, t, s) for op, series in table.items() for t, s in series.items()], dtype=ROWS
    )


def test_s_counts_the_layer_operators_n_times_and_the_pass_operators_once():
    table = {"norm": {1: 3.0, 2: 5.0, 9: 1.0}, "act": {1: 7.0, 2: 11.0}, "emb": {1: 13.0, 2: 17.0}}
    tau, s = small_ops_seconds(rows(table), n_layers=10, source=SOURCE)
    assert tau.tolist() == [1, 2]  # the counts every operator was timed at
    # per layer two norms and an activation; per pass the embedding and the final norm
    assert s.tolist() == [10 * (2 * 3 + 7) + 13 + 3, 10 * (2 * 5 + 11) + 17 + 5]


def test_rows_of_several_models_are_pooled_by_their_median():
    one = rows({"norm": {1: 1.0, 2: 1.0}, "act": {1: 2.0, 2: 2.0}, "emb": {1: 4.0, 2: 4.0}}, "a")
    two = rows({"norm": {1: 3.0, 2: 3.0}, "act": {1: 2.0, 2: 6.0}, "emb": {1: 4.0, 2: 8.0}}, "b")
    three = rows({"norm": {1: 8.0, 2: 2.0}, "act": {1: 9.0, 2: 1.0}, "emb": {1: 0.0, 2: 0.0}}, "c")
    _, s = small_ops_seconds(np.concatenate([one, two, three]), n_layers=1, source=SOURCE)
    # medians at tau = 1: norm 3, act 2, emb 4; at tau = 2: norm 2, act 2, emb 4
    assert s.tolist() == [2 * 3 + 2 + 4 + 3, 2 * 2 + 2 + 4 + 2]


def test_an_operator_without_rows_is_refused():
    with pytest.raises(FieldError, match="act"):
        small_ops_seconds(rows({"norm": {1: 1.0, 2: 1.0}, "emb": {1: 1.0, 2: 1.0}}), 2, SOURCE)


def test_the_fit_recovers_an_exact_line_and_is_the_least_relative_squares():
    tau = np.arange(1, 50)
    law = fit_small_ops(tau, 3e-3 + 2e-5 * tau, "exact")
    assert law.fixed_s == pytest.approx(3e-3, rel=1e-9) and law.per_token_s == pytest.approx(2e-5, rel=1e-9)
    s = 5e-3 + 1e-5 * tau + 1e-3 * np.sin(tau)  # not a line: the unconstrained optimum is interior
    law = fit_small_ops(tau, s, "curved")
    a, b = np.linalg.lstsq(np.stack([1 / s, tau / s], axis=1), np.ones_like(s), rcond=None)[0]
    assert (law.fixed_s, law.per_token_s) == pytest.approx((a, b), rel=1e-9)
    assert np.allclose(law.relative_error(), (a + b * tau) / s - 1)


def test_times_that_do_not_grow_are_refused():
    with pytest.raises(FieldError, match="time per token > 0"):
        fit_small_ops(np.arange(1, 10), 1.0 / np.arange(1, 10), "falling")


def first_seconds(profile: str, gpu: str, model: str, tp: int, op: str) -> float:
    """The profile's time of ``op`` at one token, read from its rows."""
    (t,) = load_profile(profile).where(gpu=gpu, model=model, tp=tp, operation=op, tokens=1)["seconds"]
    return float(t)


def test_llama_3_1_70b_at_tp4_on_the_h100_is_priced_on_vidurs_llama_2_70b_rows():
    # the same layer (d_x 8192, 64 heads, 8 KV heads of 128, d_ff 28672) under another name
    law = small_ops_law("h100", "llama-3.1-70b", 4)
    assert law.profile == "vidur_kernels" and law.models == ("llama-2-70b",)
    one = {
        op: first_seconds("vidur_kernels", "h100", "llama-2-70b", 4, op)
        for op in ("input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add", "emb")
    }
    per_layer = sum(v for op, v in one.items() if op != "emb")
    assert law.tokens[0] == 1 and law.tokens[-1] == 4096
    assert law.measured_s[0] == pytest.approx(80 * per_layer + one["emb"] + one["input_layernorm"], rel=1e-12)
    assert law.fixed_s > 0 and law.per_token_s > 0
    fields = law.gpu_fields({"overhead_s": 1e-4})
    assert fields["overhead_s"] == pytest.approx(1e-4 + law.fixed_s)
    assert fields["mu_nLin"] == pytest.approx(1 / law.per_token_s)


def test_the_selection_compares_layer_shapes_not_names():
    # llama-2-7b shares llama-3.1-8b's width but not its KV heads or FFN: no H100 rows fit
    assert small_ops_law("h100", "llama-3.1-8b", 1) is None
    # on the A100, llama-3-8b is llama-3.1-8b's layer; both 70B layers are pooled
    assert small_ops_law("a100", "llama-3.1-8b", 1).models == ("llama-3-8b",)
    pooled = small_ops_law("a100", "llama-3.1-70b", 4)
    assert pooled.models == ("llama-2-70b", "llama-3-70b")
    mlp = [first_seconds("vidur_kernels", "a100", m, 4, "mlp_act") for m in pooled.models]
    one = profile_law(KernelSource("vidur_kernels", layer_ops={"mlp_act": 1}), "a100", "llama-3.1-70b", 4)
    assert one.measured_s[0] == pytest.approx(80 * np.median(mlp), rel=1e-12)
    assert small_ops_law("h100", "llama-3.1-70b", 3) is None  # no TP 3 rows


def test_no_rtx_run_has_a_law_and_keeps_the_streaming_rate():
    runs = [load_run(name) for name in shipped_runs()]
    rtx = [run for run in runs if run.gpu.startswith("rtx")]
    assert rtx
    for run in rtx:
        assert small_ops_law(run.gpu, run.model, tensor_parallel(run)) is None, run.name


def test_llmservingsims_eager_h100_profile_is_composed_as_its_own_layers():
    # kept for comparison, never used by the replay: two norms, a rotary embedding and an
    # activation per layer, the final norm once
    law = profile_law(LLMSERVINGSIM_H100, "h100", "llama-3.1-70b", 4)
    one = {
        op: first_seconds("llmservingsim_h100", "h100", "llama-3.1-70b", 4, op)
        for op in ("layernorm", "rotary_emb", "act_fn", "final_layernorm")
    }
    assert law.models == ("llama-3.1-70b",) and law.tokens.tolist() == list(range(1, 2049))
    assert law.measured_s[0] == pytest.approx(
        80 * (2 * one["layernorm"] + one["rotary_emb"] + one["act_fn"]) + one["final_layernorm"], rel=1e-12
    )
