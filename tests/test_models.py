"""Model presets against the published configs, and the GeMM shapes of both modes."""

import pytest

from theory.cost import build_cost_model
from theory.errors import FieldError, TileDivisibilityError, UnknownNameError
from theory.hardware import get_gpu
from theory.models import get_model, load_models, model_names

# KV bytes/token (fp16) and per-token linear GFLOP from each model's public config.json (real layout,
# all layers plus LM head), computed there from the HF configs.
KV_BYTES = {"mistral-7b": 131072, "llama-2-7b": 524288, "llama-3-8b": 131072,
            "llama-2-70b": 327680, "qwen2-7b": 57344}
LINEAR_GFLOP = {"mistral-7b": 14.22, "llama-2-7b": 13.21, "llama-3-8b": 15.01,
                "llama-2-70b": 137.43, "qwen2-7b": 14.14}


def test_presets():
    assert set(KV_BYTES) <= set(model_names())


@pytest.mark.parametrize("key", sorted(KV_BYTES))
def test_kv_bytes_per_token(key):
    assert get_model(key).kv_bytes_per_token() == KV_BYTES[key]


@pytest.mark.parametrize("key", sorted(LINEAR_GFLOP))
def test_real_mode_linear_flops_match_the_reference(key):
    assert get_model(key).linear_flops_per_token("real") / 1e9 == pytest.approx(
        LINEAR_GFLOP[key], abs=0.006)


def test_paper_mode_is_section_3_2_1():
    m = get_model("mistral-7b")
    shapes = {g.name: (g.count, g.d_row, g.d_red) for g in m.linear_gemms("paper")}
    assert shapes == {"W_Q, W_K, W_V": (96, 4096, 4096), "W_F1": (32, 14336, 4096),
                      "W_F2": (32, 4096, 14336), "W_out": (1, 32000, 4096)}
    assert m.attention_widths("paper") == (4096, 4096)
    assert m.attention_widths("real") == (4096, 1024)


def test_bad_mode_and_unknown_model():
    with pytest.raises(FieldError, match="mode"):
        get_model("mistral-7b").linear_gemms("fancy")
    with pytest.raises(UnknownNameError, match="unknown model 'gpt-5'"):
        get_model("gpt-5")


def test_tile_that_does_not_divide_a_dimension_is_refused(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('[models.odd]\nbase = "mistral-7b"\nd_ff = 14400\n')
    model = load_models(f)["odd"]
    with pytest.raises(TileDivisibilityError, match=r"d_ff|W_F1|W_F2") as exc:
        build_cost_model(get_gpu("a100"), model)
    assert "14400" in str(exc.value) and "does not divide" in str(exc.value)


def test_bad_model_fields(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('[models.x]\nbase = "mistral-7b"\nn_kv_heads = 5\n')
    with pytest.raises(FieldError, match="n_kv_heads"):
        load_models(f)
    f.write_text('[models.x]\nbase = "mistral-7b"\nn_layers = -3\n')
    with pytest.raises(FieldError, match="n_layers"):
        load_models(f)
