"""Small GPU profiles whose optimal tile has a tiny t_col, so that a few requests fill a batch
and every branch of the schedulers runs in small test scenarios."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from theory.cost import CostModel, build_cost_model
from theory.hardware import load_gpus
from theory.models import get_model

TOY_TOML = """
[gpus.toy2]
base = "a100"
tiles = [[8, 2, 8], [4, 2, 4], [4, 4, 8]]
t_star = [8, 2, 8]
[gpus.toy4]
base = "l4"
tiles = [[16, 4, 16], [8, 4, 8], [8, 8, 8]]
t_star = [16, 4, 16]
[gpus.toy8]
base = "h100"
tiles = [[16, 8, 32], [16, 16, 32], [8, 8, 8]]
t_star = [16, 8, 32]
"""


@cache
def toy_gpus() -> dict:
    path = Path(tempfile.mkdtemp()) / "toy_gpus.toml"
    path.write_text(TOY_TOML)
    return load_gpus(path)


@cache
def toy_cost_model(key: str = "toy4", mode: str = "paper") -> CostModel:
    return build_cost_model(toy_gpus()[key], get_model("mistral-7b"), mode)


SOLO_TOML = """
[gpus.solo2]
base = "a100"
tiles = [[8, 2, 8]]
[gpus.solo4]
base = "l4"
tiles = [[16, 4, 16]]
"""


@cache
def solo_cost_model(key: str = "solo2", mode: str = "paper") -> CostModel:
    """A toy GPU with a single tile, so t* is optimal (Assumption 1 holds) and t*_col is tiny."""
    path = Path(tempfile.mkdtemp()) / "solo_gpus.toml"
    path.write_text(SOLO_TOML)
    return build_cost_model(load_gpus(path)[key], get_model("mistral-7b"), mode)


FLAT_TOML = """[gpus.flat]
base = "a100"
overhead_s = 0.0
[gpus.flat.linear_law]
kind = "staircase"
c = 0.3
a = 0.2
b0 = 4096
[models.flat]
base = "mistral-7b"
attention = false
"""


def flat_cost_model() -> CostModel:
    """Every batch of at most 4,096 tokens lasts c + a = 0.5 s (a staircase law, attention off):
    the GPU and model ``flat`` of :data:`FLAT_TOML`, through the simulator's scenario reader."""
    from stability.sim.simulate import Scenario, cost_model_of

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flat.toml"
        path.write_text(FLAT_TOML)
        return cost_model_of(Scenario(gpu="flat", gpu_file=str(path), model="flat", model_file=str(path)))
