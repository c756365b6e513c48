"""Shared helpers of the checks: preset names, exact rationals, JSON-safe evidence.

Cost models come from the one builder, :func:`theory.builder.cost_model`; ``tiles="t*"`` gives
Eq. 7 with one common tile, t*.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

from theory.hardware import GPU, Tile, gpu_names
from theory.models import model_names
from theory.workload import Workload, get_workload

PAPER_GPU = "rtx6000ada"  # Section 7: "a single NVIDIA RTX ADA 6000 GPU"
PAPER_MODEL = "mistral-7b"  # Section 7: Mistral-7B
PAPER_WORKLOADS = ("table1", "sharegpt4")  # Table 1 and the openchat_sharegpt4 trace


def gpus() -> list[str]:
    """Keys of every GPU preset."""
    return gpu_names()


@cache
def models() -> list[str]:
    """Keys of the model presets whose dimensions the tiles of every GPU preset divide in paper
    mode: Section 3.2.1's hypothesis ("model dimensions divisible by tiles"), which the claims
    checked over presets assume. A preset outside it (Qwen3-32B: its vocabulary of 151,936 is not
    a multiple of 256) is a real-mode model, where the vocabulary is padded (``theory.models``).
    A mixture of experts (``theory.moe``) is left out too: the claims are the paper's, about its
    dense layer."""
    from theory.cost import build_cost_model
    from theory.errors import TileDivisibilityError
    from theory.hardware import get_gpu
    from theory.models import get_model

    def divisible(m: str) -> bool:
        try:
            for g in gpus():
                build_cost_model(get_gpu(g), get_model(m), "paper")
        except TileDivisibilityError:
            return False
        return True

    return [m for m in model_names() if get_model(m).moe is None and divisible(m)]


def t_star_first(gpu: GPU) -> tuple[Tile, ...]:
    """The GPU's tiles with t* first."""
    t = gpu.optimal_tile()
    return (t, *(u for u in gpu.tiles if u != t))


@cache
def workload(name: str) -> Workload:
    """A preset workload (cached)."""
    return get_workload(name)


def frac(x) -> Fraction:
    """The exact rational value of a number (a float's binary value)."""
    return Fraction(x) if not isinstance(x, np.generic) else Fraction(x.item())


def jsonable(obj):
    """``obj`` with numpy scalars/arrays, tuples, Fractions and sets made strict-JSON-serialisable
    (a NaN or infinite float becomes None)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Fraction):
        return str(obj) if obj.denominator != 1 else obj.numerator
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def bound_test(samples, bound: float, confidence: float = 0.99, effect: float = 0.1,
               scale: float | None = None) -> dict:
    """A one-sided test that the mean of ``samples`` is at most ``bound``: it rejects (the bound
    fails) when the lower end of the two-sided ``confidence`` t-interval exceeds it. Returns the
    test, its error rate ``alpha`` (one-sided: half of 1 - ``confidence``), the interval and its power
    against a mean ``effect`` x ``scale`` above the bound (``scale`` is |bound| unless given; normal
    approximation, ``Phi(effect scale / se - z)``), the evidence a ``statistical`` check reports.

    References
    ----------
    The t-interval is :func:`theory.stats.t_interval`; the power formula is the standard one for a
    one-sided z-test (e.g. Casella and Berger, Statistical Inference, Section 8.3).
    """
    from scipy.stats import norm

    from theory.stats import t_interval

    x = np.asarray(samples, dtype=float)
    mean, lo, hi = t_interval(x, confidence)
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.inf
    z = float(norm.ppf(0.5 + confidence / 2))
    delta = effect * (abs(bound) if scale is None else scale)
    power = float(norm.cdf(delta / se - z)) if se > 0 else 1.0
    return {"test": f"one-sided: reject 'mean <= bound' when the lower end of the {confidence:.0%} "
                    f"t-interval exceeds the bound ({x.size} samples)",
            "alpha": (1 - confidence) / 2, "ci": [lo, hi], "mean": mean, "bound": bound,
            "rejected": bool(lo > bound),
            "power": {"against a mean above the bound by": delta, "probability of rejecting": power}}

