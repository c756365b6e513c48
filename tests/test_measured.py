"""The measured-profile law of the linear GeMMs (theory.measured, the gemm_profile term)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from stability.sim.simulate import Scenario, simulate
from theory.builder import CostSpec, cost_model
from theory.cost import T_P_SA, T_GeMM_terms, T_Lin, linear_per_token
from theory.errors import FieldError
from theory.hardware import get_gpu, gpu_names
from theory.measured import pooled_tables
from theory.models import get_model
from theory.profiles import gemm_shape, load_profile

OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


@pytest.fixture(scope="module")
def vidur():
    return load_profile("vidur_gemm").rows


def _series(rows, gpu, model, op, tp):
    sel = rows[(rows["gpu"] == gpu) & (rows["model"] == model) & (rows["operation"] == op)
               & (rows["tp"] == tp)]
    return sel["tokens"], sel["seconds"]


def test_interpolation_is_the_straight_line_between_two_measured_rows(vidur):
    # internlm-20b's down projection at TP 1 (5120 x 13824) is the only A100 series of its shape
    tok, sec = _series(vidur, "a100", "internlm-20b", "mlp_down_proj", 1)
    (t0, t1), (s0, s1) = tok[4:6], sec[4:6]  # two neighbouring measured token counts
    cm = cost_model(CostSpec("a100-measured", "internlm-20b", "real"))
    d_row, d_red = gemm_shape(get_model("internlm-20b"), "mlp_down_proj", 1)
    assert cm.lin.measured.by_shape[(d_row, d_red)].series == 1
    tau = np.arange(t0, t1 + 1)
    by_hand = s0 + (s1 - s0) * (tau - t0) / (t1 - t0)
    assert T_GeMM_terms(cm, d_row, tau, d_red) == pytest.approx(by_hand, rel=1e-12)


def test_pooled_series_take_the_median_per_token_count():
    tables = pooled_tables([8, 8, 8, 8], [4, 4, 4, 4], [1, 1, 2, 1], [3.0, 1.0, 5.0, 2.0],
                           ["a", "b", "a", "c"])
    table = tables[(8, 4)]
    assert table.tau.tolist() == [1, 2] and table.seconds.tolist() == [2.0, 5.0] and table.series == 3


def test_shapes_match_across_models_mistral_uses_llama_3_8b(vidur):
    """Mistral-7B's layer GeMMs have Llama-3-8B's shapes: on A100 they take its measured times."""
    cm = cost_model(CostSpec("a100-measured", "mistral-7b", "real"))
    for op in OPS:
        tok, sec = _series(vidur, "a100", "llama-3-8b", op, 1)
        shape = gemm_shape(get_model("llama-3-8b"), op, 1)
        assert shape == gemm_shape(get_model("mistral-7b"), op, 1)
        table = cm.lin.measured.by_shape[shape]
        if table.series == 1:  # the shapes Llama-3-8B alone has at TP 1
            assert np.array_equal(table.tau, tok) and np.array_equal(table.seconds, sec)
        predicted = T_GeMM_terms(cm, shape[0], tok[:50], shape[1])
        assert predicted == pytest.approx(table.time(tok[:50]), rel=1e-12)
    assert sum(t is not None for t in cm.lin.measured.tables) == 4  # the LM head is not profiled


def test_fallback_outside_the_range_and_for_unmatched_shapes_is_the_tile_model():
    law = cost_model(CostSpec("h100-measured", "llama-2-7b", "real"))
    tile = cost_model(CostSpec("h100-tile", "llama-2-7b", "real"))
    top = law.lin.measured.tau_max
    past = np.array([top + 1, top + 7, 2 * top, 5 * top])
    assert np.array_equal(T_Lin(law, past), T_Lin(tile, past))
    inside = np.array([1, 100, top])
    assert not np.allclose(T_Lin(law, inside), T_Lin(tile, inside), rtol=1e-3)
    lm_head = next(g for g in law.gemms if g.name == "W_out")
    tau = np.array([1, 64, 1000])
    assert np.array_equal(T_GeMM_terms(law, lm_head.d_row, tau, lm_head.d_red),
                          T_GeMM_terms(tile, lm_head.d_row, tau, lm_head.d_red))
    # qwen2-7b has no profiled shape on H100: every token count is the tile model's
    q_law = cost_model(CostSpec("h100-measured", "qwen2-7b", "real"))
    q_tile = cost_model(CostSpec("h100-tile", "qwen2-7b", "real"))
    assert all(t is None for t in q_law.lin.measured.tables)
    tau = np.arange(1, 3000, 37)
    assert T_Lin(q_law, tau) == pytest.approx(T_Lin(q_tile, tau), rel=1e-12)


def _synthetic(tmp_path, factor: float, tokens=(1, 2, 4, *range(8, 2049, 8))) -> str:
    """A profile of Llama-2-7B's four A100 layer GeMMs at ``factor`` times the tile model's time,
    and a GPU file pricing with it."""
    tile = cost_model(CostSpec("a100-tile", "llama-2-7b", "real"))
    tok = np.array(list(tokens))
    path = tmp_path / f"syn{factor}.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["source", "gpu", "model", "tp", "operation", "tokens", "seconds"])
        for op in OPS:
            d_row, d_red = gemm_shape(get_model("llama-2-7b"), op, 1)
            sec = factor * T_GeMM_terms(tile, d_row, tok, d_red)
            w.writerows(["test", "a100", "llama-2-7b", 1, op, int(t), f"{s:.10g}"]
                        for t, s in zip(tok, sec, strict=True))
    gpu_file = tmp_path / f"g{factor}.toml"
    gpu_file.write_text(f'[gpus.syn]\nbase = "a100"\nmemory_floor = true\nwaves = true\n'
                        f'gemm_profile = "{path}"\n')
    return str(gpu_file)


def _tile_l_star(cm) -> float:
    lt = cm.lin
    return min(lt.per_token_limit(k, int(cm.t_col[k]), float(cm.mu[k]), cm.s)
               for k in range(len(cm.tiles))) + lt.tok_s


def test_l_star_bounds_every_tabulated_and_later_token_count(vidur):
    cm = cost_model(CostSpec("a100-measured", "mistral-7b", "real"))
    l_star = linear_per_token(cm)
    taus = np.unique(np.concatenate([t.tau for t in cm.lin.measured.tables if t is not None]))
    taus = np.concatenate([taus, [taus[-1] + 1, 2 * taus[-1], 10 * taus[-1]]])
    assert np.all(l_star <= T_Lin(cm, taus) / taus * (1 + 1e-12))


@pytest.mark.parametrize("factor", [3.0, 0.2])
def test_l_star_needs_both_the_measured_range_and_the_tile_model_beyond(tmp_path, factor):
    """Slow measured times (x3): the tile model's l* past the table binds, and the range's minimum
    alone would exceed L(tau)/tau past it. Fast ones (x0.2): the range's minimum binds, and the
    tile model's l* alone would exceed L(tau)/tau inside it."""
    cm = cost_model(CostSpec("syn", "llama-2-7b", "real", gpu_file=_synthetic(tmp_path, factor)))
    top = cm.lin.measured.tau_max
    inside = np.arange(1, top + 1)
    beyond = np.arange(top + 1, 20 * top, 97)
    ratio_in, ratio_out = T_Lin(cm, inside) / inside, T_Lin(cm, beyond) / beyond
    l_star = linear_per_token(cm)
    assert l_star <= ratio_in.min() and l_star <= ratio_out.min()
    range_only, tile_only = float(ratio_in.min()), _tile_l_star(cm)
    assert l_star == min(range_only, tile_only)
    if factor > 1:
        assert range_only > ratio_out.min()  # dropping the tile model's l* breaks the bound
    else:
        assert tile_only > ratio_in.min()  # dropping the range's minimum breaks it


def test_bad_gemm_profile_names_the_field(tmp_path):
    def build(body: str, mode: str = "real"):
        f = tmp_path / "g.toml"
        f.write_text('[gpus.x]\nbase = "a100"\n' + body)
        return cost_model(CostSpec("x", "llama-2-7b", mode, gpu_file=str(f)))

    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile:.*shipped profile"):
        build('gemm_profile = "no_such_profile"\n')
    bad = tmp_path / "bad.csv"
    bad.write_text("source,gpu,model,operation,tokens,seconds\nvidur,a100,llama-2-7b,mlp_up_proj,1,0.1\n")
    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile:.*'tp'.*missing"):
        build(f'gemm_profile = "{bad}"\n')
    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile_gpu:.*a100, a40, h100.*'h200'"):
        build('gemm_profile = "vidur_gemm"\ngemm_profile_gpu = "h200"\n')
    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile_gpu:.*splitwise"):
        build('gemm_profile = "splitwise_perf_model"\n')  # a profile with no GeMM rows
    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile:.*mode 'real'"):
        build('gemm_profile = "vidur_gemm"\n', mode="paper")
    with pytest.raises(FieldError, match=r"gpus\.x\.gemm_profile:"):
        build("gemm_profile = 3\n")


def test_measured_presets_are_named_but_not_in_all():
    variants = {f"{g}-{kind}" for g in ("a100", "h100", "a40", "rtx4090", "rtxpro6000")
                for kind in ("measured", "tile")}
    assert not variants & set(gpu_names())
    g = get_gpu("a100-measured", calibrated=True)
    assert g.terms.gemm_profile == "vidur_gemm" and g.terms.gemm_profile_gpu == "a100"
    tile = get_gpu("a100-tile", calibrated=True)
    assert g.mu == tile.mu and g.terms.gemm_overhead_s == tile.terms.gemm_overhead_s
    assert tile.terms.gemm_profile is None and "measured profile" not in tile.calibration
    assert tile.calibration and g.calibration.startswith(tile.calibration)
    # real mode's default is the law (measured_gpus.toml: real_mode_default = true), paper mode's not
    assert get_gpu("a100", calibrated=True).terms == g.terms
    assert get_gpu("a100-tile").terms == get_gpu("a100").terms


def test_simulated_single_request_batch_is_the_profile_rows(vidur):
    """A prefill batch of one 128-token prompt on a100-measured (Llama-3-8B, TP 1): its linear time
    is N times the four measured rows at 128 tokens plus the LM head on the tile model."""
    sc = Scenario(gpu="a100-measured", model="llama-3-8b", mode="real", workload="deterministic:128,2",
                  scheduler="request_level", rate=0.5, n_requests=3, detail=True, log=True)
    res = simulate(sc)
    log = res.batch_log()
    k = next(j for j in range(log["start"].size) if log["prefill_chunks"][j].count(":") == 2
             and not log["decode_positions"][j] and log["tokens"][j] == 128)
    model = get_model("llama-3-8b")
    a100 = vidur[(vidur["gpu"] == "a100") & (vidur["tokens"] == 128)]
    shape_of = {(m, op, tp): gemm_shape(get_model(str(m)), str(op), int(tp))
                for m, op, tp in set(zip(a100["model"], a100["operation"], a100["tp"], strict=True))}
    rows = 0.0
    for op in OPS:  # every A100 row at 128 tokens of this GeMM's shape, by its median
        same = [shape_of[key] == gemm_shape(model, op, 1)
                for key in zip(a100["model"], a100["operation"], a100["tp"], strict=True)]
        rows += float(np.median(a100["seconds"][np.array(same)]))
    cm = cost_model(CostSpec("a100-measured", "llama-3-8b", "real"))
    tile = cost_model(CostSpec("a100-tile", "llama-3-8b", "real"))
    head = T_GeMM_terms(tile, model.d_out, 128, model.d_x)  # the LM head: not profiled, tile model
    expected = (model.N * rows + head + 128 / cm.mu_nLin + cm.overhead_s
                + float(T_P_SA(cm, 1, 128)))
    assert log["duration"][k] == pytest.approx(float(expected), rel=1e-9)


def test_real_mode_default_switch_prices_the_base_presets_with_the_profile(monkeypatch):
    import theory.hardware as hw

    gpus = hw.load_gpus(None, calibrated=True)
    profiles = {"a100": "vidur_gemm", "h100": "vidur_gemm", "a40": "vidur_gemm",
                "rtx4090": "llmservingsim_rtx4090", "rtxpro6000": "llmservingsim_rtxpro6000",
                "h200": "llmq_h200"}
    for key, name in profiles.items():
        assert gpus[key].terms.gemm_profile == name and gpus[key].terms.gemm_profile_gpu == key
    assert gpus["l40s"].terms.gemm_profile is None  # no profile, no law
    assert hw.load_gpus(None, calibrated=False)["a100"].terms.gemm_profile is None  # paper mode
    off = {**hw._measured_data(), "real_mode_default": False}
    monkeypatch.setattr(hw, "_measured_data", lambda: off)
    gpus = hw.load_gpus(None, calibrated=True)
    assert all(gpus[key].terms.gemm_profile is None for key in profiles)  # switched off: tile model


def test_validate_scheme_interpolates_training_counts_only_and_falls_back_elsewhere():
    from theory.validation.gemm import GemmRows, measured_predictions

    def rows(d_row, tokens, seconds):
        n = len(tokens)
        return GemmRows(np.full(n, "a100"), np.full(n, "m"), np.ones(n, dtype=np.int64),
                        np.full(n, "mlp_up_proj"), np.array(tokens), np.array(seconds, dtype=float),
                        np.full(n, d_row), np.full(n, 64))

    train = rows(128, [1, 3, 9], [1.0, 3.0, 6.0])
    test = GemmRows(**{k: np.concatenate([getattr(rows(128, [2, 6, 12], [50.0, 50.0, 50.0]), k),
                                          getattr(rows(256, [2], [50.0]), k)])
                       for k in GemmRows.__dataclass_fields__})
    fallback = np.array([7.0, 8.0, 9.0, 10.0])
    pred, covered = measured_predictions(train, test, fallback)
    # 2 and 6 lie between training counts (the held-out times, 50, never enter); 12 is past the
    # table and the 256-row shape has no training series: both take the fallback
    assert pred.tolist() == [2.0, 4.5, 9.0, 10.0] and covered.tolist() == [True, True, False, False]


def test_llmq_bounds_names_the_law_that_priced_the_linear_gemms(capsys):
    import json

    from llmq.cli import main

    assert main(["bounds", "--gpu", "a100-measured", "--mode", "real", "--json"]) == 0
    law = json.loads(capsys.readouterr().out)
    assert law["linear_law"].startswith("measured profile vidur_gemm (a100 rows): 4 of 5")
    assert main(["bounds", "--gpu", "a100-tile", "--mode", "real", "--json"]) == 0
    tile = json.loads(capsys.readouterr().out)
    assert tile["linear_law"].startswith("tile model")
    assert law["T_max_s"] < tile["T_max_s"]  # Eq. 13 takes the measured one-token times
    assert main(["bounds", "--gpu", "a100", "--mode", "real", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["linear_law"] == law["linear_law"]  # real mode's default
    assert main(["bounds", "--gpu", "a100-measured", "--mode", "real"]) == 0
    assert "a100-measured linear GeMMs: measured profile vidur_gemm" in capsys.readouterr().out
    assert main(["bounds", "--gpu", "a100-measured"]) == 2  # paper mode: refused, the field named
    assert "gpus.a100-measured.gemm_profile: expected no measured profile in mode 'paper'" in \
        capsys.readouterr().err


def test_the_symbolic_twin_refuses_the_measured_law():
    from theory.symbolic import SymbolicCostModel

    measured = cost_model(CostSpec("a100-measured", "llama-2-7b", "real"))
    with pytest.raises(FieldError, match="gemm_profile"):
        SymbolicCostModel.from_cost_model(measured)


def test_a_measured_preset_costs_what_its_card_costs_unless_priced_itself(tmp_path):
    """The measured-profile presets are the same cards: llmq plan prices them by their base
    preset's entry, an entry of their own wins, and an unknown GPU is still an error."""
    from stability.planner.prices import gpu_price, load_prices
    from theory.errors import FieldError

    prices = load_prices()
    got = gpu_price(prices, "a100-measured")
    assert got.gpu == "a100-measured" and got.usd_per_gpu_hour == prices["a100"].usd_per_gpu_hour
    assert got.source == prices["a100"].source
    own = tmp_path / "p.toml"
    own.write_text('[prices.a100-measured]\nusd_per_gpu_hour = 1.25\n')
    assert gpu_price(load_prices(own), "a100-measured").usd_per_gpu_hour == 1.25
    with pytest.raises(FieldError, match="price of GPU 'a100-unknown'"):
        gpu_price(prices, "a100-unknown")
