"""Shared helpers of the checks: preset cost models, exact rationals, JSON-safe evidence."""

from __future__ import annotations

from fractions import Fraction
from functools import cache

import numpy as np

from theory.cost import CostModel, build_cost_model
from theory.hardware import GPU, Tile, get_gpu, gpu_names
from theory.models import get_model, model_names
from theory.workload import Workload, get_workload

PAPER_GPU = "rtx6000ada"  # Section 7: "a single NVIDIA RTX ADA 6000 GPU"
PAPER_MODEL = "mistral-7b"  # Section 7: Mistral-7B
PAPER_WORKLOADS = ("table1", "sharegpt4")  # Table 1 and the openchat_sharegpt4 trace


def gpus() -> list[str]:
    """Keys of every GPU preset."""
    return gpu_names()


def models() -> list[str]:
    """Keys of every model preset."""
    return model_names()


@cache
def cost_model(gpu: str, model: str = PAPER_MODEL, mode: str = "paper") -> CostModel:
    """The preset cost model (cached: cost models are immutable)."""
    return build_cost_model(get_gpu(gpu), get_model(model), mode)


@cache
def t_star_cost_model(gpu: str, model: str = PAPER_MODEL, mode: str = "paper") -> CostModel:
    """The cost model with the GPU restricted to its t*: Eq. 7 with one common tile, t*."""
    g = get_gpu(gpu)
    return build_cost_model(g.restrict(str(g.optimal_tile())), get_model(model), mode)


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
    """``obj`` with numpy scalars/arrays, tuples, Fractions and sets made JSON-serialisable."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Fraction):
        return str(obj) if obj.denominator != 1 else obj.numerator
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)
