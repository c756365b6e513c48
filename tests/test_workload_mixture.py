"""Two-class mixtures of length laws: weights, specs, and the linearity Theorem 1's line rests on."""

import numpy as np
import pytest

from theory.bounds import T_bar_R
from theory.cost import build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model
from theory.workload import get_workload, mixture, mixture_spec, parse_mixture

CHAT, SUMM = "deterministic:300,200", "uniform:2000-2100,10-20"


def test_mixture_is_the_weighted_law_and_its_spec_round_trips():
    spec = mixture_spec([(0.25, CHAT), (0.75, SUMM)])
    assert parse_mixture(spec) == [(0.25, CHAT), (0.75, SUMM)]
    m = get_workload(spec)
    chat = (m.L_P == 300) & (m.L_D == 200)
    assert m.p[chat].sum() == pytest.approx(0.25)
    lp, _ = m.sample(40000, np.random.default_rng(1))
    assert abs(np.mean(lp == 300) - 0.25) < 0.01  # binomial sd 0.0022
    assert m.mean()[0] == pytest.approx(0.25 * 300 + 0.75 * 2050)


@pytest.mark.parametrize("pad", [False, True])
def test_T_bar_R_of_a_mixture_is_the_weighted_sum_of_the_classes(pad):
    """Theorem 1 on the mixture: lambda T_bar^R(mix) = lambda_1 T_bar_1 + lambda_2 T_bar_2."""
    cm = build_cost_model(get_gpu("a100"), get_model("mistral-7b"))
    a, b = get_workload(CHAT), get_workload(SUMM)
    m = mixture([(0.4, a), (0.6, b)])
    if pad:
        a, b, m = (w.padded(cm.t_lcm) for w in (a, b, m))
    assert T_bar_R(cm, m) == pytest.approx(0.4 * T_bar_R(cm, a) + 0.6 * T_bar_R(cm, b), rel=1e-12)


@pytest.mark.parametrize("spec", ["mix:", "mix:0.5*", "mix:x*table1", "mix:0.5table1"])
def test_bad_mixture_specs(spec):
    with pytest.raises(FieldError, match="mix"):
        get_workload(spec)


def test_bad_mixture_weights():
    with pytest.raises(FieldError, match="weights"):
        mixture([(0.0, get_workload(CHAT)), (-1.0, get_workload(SUMM))])
