"""The one cost-model builder: spellings of the tile restriction, t*, user files named by content."""

import pytest

from theory.builder import CostSpec, cost_model
from theory.cost import build_cost_model
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.models import get_model


def test_colon_spelling_is_the_tiles_field():
    spec = CostSpec("a100:128x128")
    assert (spec.gpu, spec.tiles, spec.tileset) == ("a100", "128x128", "a100:128x128")
    assert spec == CostSpec("a100", tiles="128x128")
    assert {str(t) for t in cost_model(spec).tiles} == {"128x128x32", "128x128x64"}


def test_two_restrictions_are_an_error():
    with pytest.raises(FieldError, match="tiles"):
        CostSpec("a100:128x128", tiles="256x128")


def test_t_star_keeps_the_optimal_tile_alone():
    gpu = get_gpu("h100")
    want = build_cost_model(gpu.restrict(str(gpu.optimal_tile())), get_model("mistral-7b"), "paper")
    got = cost_model(CostSpec("h100", tiles="t*"))
    assert got.tiles == want.tiles and got.t_star == want.t_star


def test_a_user_file_is_read_again_when_its_content_changes(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[gpus.mine]\nbase = "a100"\noverhead_s = 0.001\n')
    first = cost_model(CostSpec("mine", gpu_file=str(f)))
    f.write_text('[gpus.mine]\nbase = "a100"\noverhead_s = 0.002\n')
    second = cost_model(CostSpec("mine", gpu_file=str(f)))
    assert (first.gpu.overhead_s, second.gpu.overhead_s) == (0.001, 0.002)


def test_a_model_file_defines_a_model(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('[models.half]\nbase = "mistral-7b"\nn_layers = 16\n')
    cm = cost_model(CostSpec("a100", "half", model_file=str(f)))
    assert cm.N == 16 and cost_model(CostSpec("a100")).N == 32
