"""The small-operator law (theory.validation.small_ops): S(tau) from a profile's element-wise rows,
and its line of least relative squares."""

import numpy as np
import pytest

from theory.errors import FieldError
from theory.profiles import load_profile
from theory.validation.small_ops import fit_small_ops, small_ops_law, small_ops_seconds

ROWS = np.dtype([("operation", "U20"), ("tokens", "i8"), ("seconds", "f8")])


def rows(table: dict) -> np.ndarray:
    return np.array([(op, t, s) for op, series in table.items() for t, s in series.items()], dtype=ROWS)


def test_s_counts_two_norms_a_rotary_and_an_activation_per_layer_and_one_final_norm():
    table = {
        "layernorm": {1: 3.0, 2: 5.0, 9: 1.0},
        "rotary_emb": {1: 7.0, 2: 11.0},
        "act_fn": {1: 13.0, 2: 17.0},
        "final_layernorm": {1: 19.0, 2: 23.0},
    }
    tau, s = small_ops_seconds(rows(table), n_layers=10)
    assert tau.tolist() == [1, 2]  # the counts every operator was timed at
    assert s.tolist() == [10 * (2 * 3 + 7 + 13) + 19, 10 * (2 * 5 + 11 + 17) + 23]


def test_an_operator_without_rows_is_refused():
    with pytest.raises(FieldError, match="rotary_emb"):
        small_ops_seconds(rows({"layernorm": {1: 1.0}, "act_fn": {1: 1.0}, "final_layernorm": {1: 1.0}}), 2)


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


def test_the_h100_law_comes_from_the_packaged_profile_and_other_gpus_have_none():
    law = small_ops_law("h100", "llama-3.1-70b", 4)
    prof = load_profile("llmservingsim_h100")
    one = {
        op: prof.where(operation=op, tokens=1)["seconds"][0]
        for op in ("layernorm", "rotary_emb", "act_fn", "final_layernorm")
    }
    assert law.profile == "llmservingsim_h100" and law.tokens.tolist() == list(range(1, 2049))
    assert law.measured_s[0] == pytest.approx(
        80 * (2 * one["layernorm"] + one["rotary_emb"] + one["act_fn"]) + one["final_layernorm"], rel=1e-12
    )
    assert law.fixed_s > 0 and law.per_token_s > 0
    fields = law.gpu_fields({"overhead_s": 1e-4})
    assert fields["overhead_s"] == pytest.approx(1e-4 + law.fixed_s)
    assert fields["mu_nLin"] == pytest.approx(1 / law.per_token_s)
    assert small_ops_law("h100", "llama-3.1-70b", 2) is None  # no TP 2 rows
    assert small_ops_law("a100", "llama-2-7b", 2) is None  # no llmservingsim_a100 profile
