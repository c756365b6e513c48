"""Partial tiles: real mode prices a dimension that a tile does not divide by Eq. 2-3's ceilings,
paper mode refuses it (Section 3.2.1). Each expected time is an explicit count of tiles, computed
here with integer ceilings from the model's fields, independently of theory.models' GeMM shapes."""

from fractions import Fraction

import pytest

from theory.cost import T_D_SA, T_P_SA, Batch, T_batch, build_cost_model
from theory.errors import TileDivisibilityError
from theory.hardware import get_gpu
from theory.models import get_model, load_models


def ceil(a: int, b: int) -> int:
    return -(-a // b)


# d_x 2,880 (gpt-oss's width) and d_ff 9,000: neither is a multiple of 256 or 128 rows, and
# 9,000 is no multiple of a 64-deep reduction; 40 heads of 72 give a prefill width of 2,880 and
# 8 KV heads a decode width of 576, neither a multiple of the 128-wide GeMV tiles.
ODD = """[models.odd]
base = "mistral-7b"
d_model = 2880
n_heads = 40
n_kv_heads = 8
head_dim = 72
d_ff = 9000
"""


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    path = tmp_path_factory.mktemp("odd") / "m.toml"
    path.write_text(ODD)
    return load_models(path)["odd"]


def shapes(f: dict) -> list[tuple[int, int, int]]:
    """(count, rows, reduction) of the real-mode layer of Section 3.2.1 as served: fused QKV,
    O, fused gate/up, down, LM head, from the model's fields."""
    n, dx, hd = f["n_layers"], f["d_model"], f["head_dim"]
    return [
        (n, (f["n_heads"] + 2 * f["n_kv_heads"]) * hd, dx),
        (n, dx, f["n_heads"] * hd),
        (n, 2 * f["d_ff"], dx),
        (n, dx, f["d_ff"]),
        (1, f["vocab"], dx),
    ]


FIELDS = {
    "n_layers": 32,
    "d_model": 2880,
    "n_heads": 40,
    "n_kv_heads": 8,
    "head_dim": 72,
    "d_ff": 9000,
    "vocab": 32000,
}


def test_paper_mode_refuses_partial_tiles(odd):
    with pytest.raises(TileDivisibilityError, match="does not divide odd"):
        build_cost_model(get_gpu("a100"), odd, "paper")
    with pytest.raises(TileDivisibilityError, match=r"d_row = 201088 .*Section 3\.2\.1"):
        build_cost_model(get_gpu("h200"), get_model("gpt-oss-20b"), "paper")


def test_real_mode_prices_partial_tiles_by_explicit_ceilings(odd):
    assert (odd.N, odd.d_x, odd.d_ff, odd.n_heads, odd.head_dim) == (32, 2880, 9000, 40, 72)
    gpu = get_gpu("a100")
    cm = build_cost_model(gpu, odd, "real")
    assert cm.plain
    for k, t in enumerate(cm.tiles):
        pairs = sum(c * ceil(r, t.t_row) * ceil(d, t.t_red) for c, r, d in shapes(FIELDS))
        assert cm.lin_pairs[k] == pairs
    assert cm.lin_pairs[0] > sum(
        Fraction(c * r * d, cm.t_star.t_row * cm.t_star.t_red) for c, r, d in shapes(FIELDS)
    )  # padding priced
    s = gpu.s
    rates = {t: gpu.mu[gpu.tiles.index(t)] for t in cm.tiles}
    gemv = dict(zip(gpu.gemv_tiles, gpu.mu_gemv, strict=True))
    d_pre, d_dec = 40 * 72, 8 * 72

    def decode(i):  # Eq. 5: the two Eq. 3 GeMVs, each on its fastest tile
        first = min(ceil(i, g.t_row) * ceil(d_dec, g.t_col) / (s * m) for g, m in gemv.items())
        second = min(ceil(d_dec, g.t_row) * ceil(i, g.t_col) / (s * m) for g, m in gemv.items())
        return first + second

    def prefill(i, c):  # Eq. 6: K^T Q and V P, each on its fastest tile
        e = i + c - 1
        qk = min(
            ceil(e, t.t_row) * ceil(c, t.t_col) * ceil(d_pre, t.t_red) / (s * m) for t, m in rates.items()
        )
        pv = min(
            ceil(d_pre, t.t_row) * ceil(c, t.t_col) * ceil(e, t.t_red) / (s * m) for t, m in rates.items()
        )
        return 32 * (qk + pv)

    for i in (1, 77, 4096):
        assert float(T_D_SA(cm, i)) == pytest.approx(decode(i), rel=1e-12)
    for i, c in ((1, 512), (300, 77)):
        assert float(T_P_SA(cm, i, c)) == pytest.approx(prefill(i, c), rel=1e-12)
    tau = 512 + 77 + 2
    linear = min(ceil(tau, t.t_col) * cm.lin_pairs[k] / (s * rates[t]) for k, t in enumerate(cm.tiles))
    batch = Batch.of(prefill=[(1, 512), (300, 77)], decode=[5, 900])
    expect = (
        linear
        + tau / cm.mu_nLin
        + 32 * (decode(5) + decode(900))
        + prefill(1, 512)
        + prefill(300, 77)
        + cm.fixed_s
    )
    assert T_batch(cm, batch) == pytest.approx(expect, rel=1e-12)


def test_divisible_dense_preset_is_the_unpadded_count():
    """For a preset every tile divides, the ceilings are exact quotients: the tile pairs are
    Section 3.2.1's ``sum count d_row d_red / (t_row t_red)``, as before partial tiles were priced
    (the vocabulary, 32,000, is padded in real mode; it is left out of the exact part)."""
    fields = {
        "n_layers": 32,
        "d_model": 4096,
        "n_heads": 32,
        "n_kv_heads": 8,
        "head_dim": 128,
        "d_ff": 14336,
        "vocab": 32000,
    }
    for mode in ("paper", "real"):
        cm = build_cost_model(get_gpu("h200"), get_model("mistral-7b"), mode)
        for k, t in enumerate(cm.tiles):
            body = (
                shapes(fields)[:-1]
                if mode == "real"
                else [(96, 4096, 4096), (32, 14336, 4096), (32, 4096, 14336)]
            )
            exact = sum(Fraction(c * r * d, t.t_row * t.t_red) for c, r, d in body)
            assert exact.denominator == 1
            head = ceil(32000, t.t_row) * ceil(4096, t.t_red)
            assert cm.lin_pairs[k] == exact + head


def test_gpt_oss_expert_gemms_take_ceilings():
    """gpt-oss-20b in real mode: its experts' gate/up (5,760 rows) and down (2,880 rows) GeMMs,
    partial in the 256-row tiles, are counted by ceilings."""
    cm = build_cost_model(get_gpu("h200"), get_model("gpt-oss-20b"), "real")
    moe = cm.lin.moe
    for k, t in enumerate(cm.tiles):
        assert moe.rows[k].tolist() == [ceil(2 * 2880, t.t_row), ceil(2880, t.t_row)]
        assert moe.red[k].tolist() == [ceil(2880, t.t_red), ceil(2880, t.t_red)]
    assert (moe.E, moe.k, moe.count) == (32, 4, 24)


def test_cli_bounds_of_gpt_oss_in_real_mode_and_the_refusal_in_paper_mode(capsys):
    import json

    from llmq.cli import main

    assert main(["bounds", "--gpu", "h200", "--model", "gpt-oss-20b", "--mode", "real", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lambda_star"] > 0 and out["T_bar_R_s"] > 0
    assert main(["bounds", "--gpu", "h200", "--model", "gpt-oss-20b", "--mode", "paper"]) == 2
    err = capsys.readouterr().err
    assert "does not divide gpt-oss-20b W_out: d_row = 201088" in err and "Traceback" not in err
