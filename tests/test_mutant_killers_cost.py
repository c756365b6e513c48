"""Eq. 5 on GeMV tile sets that are not symmetric, counted tile by tile.

Written to kill a mutant of :mod:`theory.cost` (see ``benchmarks/mutation.py``) that the presets
cannot see: their GeMV tiles are every pair of rows and columns from one list, with a rate that
depends on t_row t_col only, so swapping the two dimensions of a decode GeMV changes nothing there.
A user tile set need not be symmetric; on one, the two GeMVs of Eq. 5 (K^T q: an i x d product,
and P V: d x i) must be counted as the equation says.
"""

import math

import pytest

from theory.cost import T_D_SA, build_cost_model
from theory.hardware import load_gpus
from theory.models import get_model

ASYMMETRIC_TOML = """
[gemv]
rows = [{rows}]
cols = [{cols}]

[gpus.asym]
base = "a100"
"""


@pytest.mark.parametrize("rows, cols", [(16, 64), (128, 16)])
def test_decode_attention_counts_eq5_tiles_on_one_asymmetric_gemv_tile(tmp_path, rows, cols):
    path = tmp_path / "asym.toml"
    path.write_text(ASYMMETRIC_TOML.format(rows=rows, cols=cols))
    gpu = load_gpus(path)["asym"]
    assert [(g.t_row, g.t_col) for g in gpu.gemv_tiles] == [(rows, cols)]
    cm = build_cost_model(gpu, get_model("mistral-7b"), "paper")
    d = cm.d_dec
    for i in (1, 15, 16, 17, 63, 64, 65, 129, 1000, 4097):
        # Eq. 5: K^T q is i x d (ceil(i/t_row) ceil(d/t_col) tiles), P V is d x i
        tiles = math.ceil(i / rows) * math.ceil(d / cols) + math.ceil(d / rows) * math.ceil(i / cols)
        expected = tiles / (gpu.s * gpu.mu_gemv[0])
        assert float(T_D_SA(cm, i)) == pytest.approx(expected, rel=1e-12), i
