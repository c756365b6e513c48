"""theory.validation.steps and steps_data: the step table's loader and converter, Eq. 7 of an engine
step, and the three scores (Eq. 7, the CUDA-graph padding rule, the fixed time per step) on hand-made
tables timed by known laws, where the answer is known; the packaged table loads and is the run's
conversion. No test here needs a GPU: the packaged table is a file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from theory.cost import T_D_SA, T_P_SA, T_Lin
from theory.errors import ConfigFileError, FieldError
from theory.profiles import shipped_profiles
from theory.validation.batches import batch_cost_model, batch_time
from theory.validation.steps import (
    EAGER_NOTE,
    SUMMED_PARTS,
    StepOptions,
    console_lines,
    predict_step,
    score_steps,
    step_parts,
    to_json,
)
from theory.validation.steps_data import COLUMNS, SHIPPED, StepRow, convert_run, load_steps
from theory.validation.steps_fixed import fit_constant, fit_overlap, rank_correlation
from theory.validation.steps_report import markdown, plot

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "device" / "runs" / "2026-11-27-h200-steps"
IDENT = {"source": "test", "gpu": "h200", "setup": "hand-made", "model": "llama-3.1-8b", "tp": 1}
CAPTURE = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)  # vLLM's first capture sizes (measure_steps.py)


@pytest.fixture(scope="module")
def cm():
    model, reason = batch_cost_model("h200", "llama-3.1-8b", 1)
    assert model is not None, reason
    return model


def eq7(cm, decodes: int, context: int, chunk: int = 0, prior: int = 0, rows: int | None = None) -> float:
    """Eq. 7 assembled term by term, independently of theory.validation.steps: linear and
    element-wise terms on ``rows`` (padding included), Eq. 5 for each decode at position ``context +
    1``, Eq. 6 for the chunk starting at position ``prior + 1``."""
    tau = decodes + chunk if rows is None else rows
    t = float(T_Lin(cm, tau)) + tau / cm.mu_nLin + cm.fixed_s
    if decodes:
        t += cm.N * decodes * float(T_D_SA(cm, context + 1))
    if chunk:
        t += float(T_P_SA(cm, prior + 1, chunk))
    return t


def row(kind="decode_step", mode="graph", decodes=1, decode_context=512, chunk_tokens=0, chunk_context="",
        padded_to="", seconds=0.01, **ident) -> dict:
    return {**IDENT, **ident, "kind": kind, "mode": mode, "decodes": decodes,
            "decode_context": decode_context if decodes else "", "chunk_tokens": chunk_tokens,
            "chunk_context": chunk_context, "padded_to": padded_to, "seconds": repr(seconds),
            "seconds_p10": repr(seconds), "seconds_p90": repr(seconds), "reps": 5}


def write(path: Path, rows: list[dict], columns=COLUMNS) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def synthetic(cm, graph_time, eager_time) -> list[dict]:
    """A step table on a small grid (decode-only steps at two cache lengths, on and off the capture
    sizes; mixed steps at two chunk contexts), ``graph`` rows timed by ``graph_time(decodes, context,
    chunk, prior, rows)`` and ``eager`` rows by ``eager_time(graph seconds)``."""
    out = []
    for c in (512, 2048):
        for b in (1, 3, 4, 8, 12, 16, 64):
            pad = next(s for s in CAPTURE if s >= b)
            g = graph_time(b, c, 0, 0, b)
            out.append(row(decodes=b, decode_context=c, padded_to=pad, seconds=graph_time(b, c, 0, 0, pad)))
            if pad != b:
                out.append(row(decodes=b, decode_context=c, seconds=g))
            out.append(row(mode="eager", decodes=b, decode_context=c, seconds=eager_time(g)))
    for p in (0, 2048):
        for n in (64, 512):
            for d in (0, 8, 64):
                g = graph_time(d, 1024, n, p, d + n)
                out += [row("mixed_step", "graph", d, 1024, n, p, seconds=g),
                        row("mixed_step", "eager", d, 1024, n, p, seconds=eager_time(g))]
    return out


# --- the loader ---------------------------------------------------------------------------------


def test_the_shipped_table_loads_and_is_the_runs_conversion():
    table = load_steps()
    assert (table.gpu, table.model, table.tp, table.source) == ("h200", "llama-3.1-8b", 1, "llmq")
    assert {r.kind for r in table.rows} == {"decode_step", "mixed_step"}
    assert {r.mode for r in table.rows} == {"graph", "eager"}
    assert SHIPPED.read_text() == convert_run(RUN)  # the packaged rows are the run's, unchanged
    with open(RUN / "steps.csv", newline="") as fh:
        raw = list(csv.DictReader(fh))
    assert len(table) == len(raw)
    assert [r.seconds for r in table.rows] == [float(x["seconds"]) for x in raw]
    assert [r.tokens for r in table.rows] == [int(x["tokens"]) for x in raw]  # the dropped column, rebuilt


def test_the_step_table_is_not_listed_as_a_profile():
    assert SHIPPED.exists()
    assert SHIPPED.name.removesuffix(".csv") not in shipped_profiles()


def test_a_hand_made_table_round_trips(tmp_path, cm):
    table = load_steps(write(tmp_path / "t.csv", synthetic(cm, lambda *a: 0.01, lambda g: g + 0.02)))
    first = table.rows[0]
    assert first == StepRow("decode_step", "graph", 1, 512, 0, None, 1, 0.01, 0.01, 0.01, 5, line=2)
    assert first.tokens == 1 and first.lm_rows == 1 and first.unpadded
    mixed = table.select("mixed_step", "graph")[0]
    assert (mixed.tokens, mixed.lm_rows, mixed.chunk_context) == (64, 1, 0)


@pytest.mark.parametrize(("edit", "field", "expected"), [
    (lambda h, r: (h[:-1], r), "reps", "missing"),
    (lambda h, r: ([*h, "reps"], r), "reps", "each column once"),
    (lambda h, r: ([*h, "latency"], r), "latency", "a schema column"),
    (lambda h, r: (h, [{**r[0], "seconds": "-0.004"}]), "seconds", "a finite time > 0"),
    (lambda h, r: (h, [{**r[0], "seconds_p90": "nan"}]), "seconds_p90", "a finite time > 0"),
    (lambda h, r: (h, [{**r[0], "seconds_p10": "0.02"}]), "seconds", "between seconds_p10"),
    (lambda h, r: (h, [{**r[0], "kind": "prefill_step"}]), "kind", "one of decode_step, mixed_step"),
    (lambda h, r: (h, [{**r[0], "mode": "cuda"}]), "mode", "one of graph, eager"),
    (lambda h, r: (h, [{**r[0], "decodes": "2.5"}]), "decodes", "an integer >= 1"),
    (lambda h, r: (h, [{**r[0], "decode_context": ""}]), "decode_context", "an integer >= 0"),
    (lambda h, r: (h, [{**r[0], "chunk_tokens": "16"}]), "chunk_tokens", "0 and empty for a decode_step"),
    (lambda h, r: (h, [{**r[0], "padded_to": "0"}]), "padded_to", "an integer >= 1"),
    (lambda h, r: (h, [{**r[0], "mode": "eager"}]), "padded_to", "only a decode_step's graph is padded"),
    (lambda h, r: (h, [r[0], {**r[0], "gpu": "h100"}]), "gpu", "one gpu per table"),
    (lambda h, r: (h, [{**r[0], "model": "gpt-9"}]), "model", "a model preset"),
    (lambda h, r: (h, [{**r[0], "tp": "3"}]), "tp", "a divisor of n_heads"),
])
def test_bad_tables_are_refused_naming_file_row_and_column(tmp_path, edit, field, expected):
    header, rows = edit(list(COLUMNS), [row(padded_to=1)])
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(FieldError) as err:
        load_steps(path)
    text = str(err.value)
    assert str(path) in text and f"column {field!r}" in text and expected in text
    assert "row " in text


def test_a_step_timed_twice_is_refused_naming_both_rows(tmp_path):
    path = write(tmp_path / "twice.csv", [row(padded_to=1), row(padded_to=1, seconds=0.02)])
    with pytest.raises(FieldError, match=r"row 3.*row 2 times the same"):
        load_steps(path)


def test_a_missing_or_empty_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigFileError, match="file not found"):
        load_steps(tmp_path / "none.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ConfigFileError, match="empty file"):
        load_steps(tmp_path / "empty.csv")


def test_the_converter_refuses_a_tiny_run_and_a_wrong_tokens_cell(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"gpu_key": "h200", "model": "llama-3.1-8b", "tiny": True}))
    (run / "steps.csv").write_text((RUN / "steps.csv").read_text())
    with pytest.raises(FieldError, match="tiny"):
        convert_run(run)
    (run / "meta.json").write_text(json.dumps({"gpu_key": "h200", "model": "llama-3.1-8b", "tiny": False}))
    lines = (RUN / "steps.csv").read_text().splitlines()
    cells = lines[1].split(",")
    cells[6] = str(int(cells[6]) + 1)  # tokens
    (run / "steps.csv").write_text("\n".join([lines[0], ",".join(cells)]) + "\n")
    with pytest.raises(FieldError, match=r"row 2, column 'tokens'"):
        convert_run(run)


# --- Eq. 7 of a step --------------------------------------------------------------------------


def test_a_decode_step_is_the_decode_batch_validate_prices(cm):
    table = load_steps()
    for r in table.select("decode_step", "graph"):
        want = batch_time(cm, "decode_batch", r.decodes, r.decode_context, 2)
        assert predict_step(cm, r) == pytest.approx(want, rel=1e-12)


def test_the_parts_sum_to_eq7_with_the_padding_term(cm):
    for r in load_steps().select(mode="graph"):
        parts = step_parts(cm, r)
        total = sum(parts[k] for k in SUMMED_PARTS)
        assert total == pytest.approx(predict_step(cm, r, padded=True), rel=1e-12)
        rows = r.padded_to or r.decodes + r.chunk_tokens
        want = eq7(cm, r.decodes, r.decode_context or 0, r.chunk_tokens, r.chunk_context or 0, rows)
        assert predict_step(cm, r, padded=True) == pytest.approx(want, rel=1e-12)
        if r.tokens == r.lm_rows:  # the LM head ran on every row: Eq. 4 charges no more than that
            assert parts["lm_head_excess"] == 0.0
        elif r.chunk_tokens >= 512:
            assert parts["lm_head_excess"] > 0.0


# --- the scores on hand-made tables with known answers ----------------------------------------


def test_a_table_timed_by_eq7_scores_zero_error(tmp_path, cm):
    table = write(tmp_path / "eq7.csv", synthetic(cm, lambda d, c, n, p, rows: eq7(cm, d, c, n, p, rows),
                                                  lambda g: g + 0.02))
    score = score_steps(table)
    for name in ("decode_padded", "mixed"):
        acc = score.accuracy[name]
        assert acc.errors.n > 0 and acc.errors.p90 == pytest.approx(0.0, abs=1e-12)
        assert acc.ratio_median == pytest.approx(1.0)
    # Eq. 7 at the real size misses exactly the padding rows' linear and element-wise time
    padded = [r for r in score.rows if r["padded_to"] and r["padded_to"] > r["decodes"]]
    assert padded
    for r in padded:
        b, pad = r["decodes"], r["padded_to"]
        want = float(T_Lin(cm, pad)) - float(T_Lin(cm, b)) + (pad - b) / cm.mu_nLin
        assert r["measured_s"] - r["predicted_s"] == pytest.approx(want, rel=1e-9)
    parts = score.parts
    assert parts.decode_attention["ratio"].low == pytest.approx(1.0)
    assert parts.decode_attention["ratio"].high == pytest.approx(1.0)
    assert parts.chunk_attention["ratio"].median == pytest.approx(1.0)
    assert parts.chunk_attention["measured_tflops"].median == pytest.approx(
        parts.chunk_attention["predicted_tflops"].median)
    assert parts.smallest["measured_rest_s"] == pytest.approx(parts.smallest["predicted_rest_s"])


def test_the_diagnosis_recovers_known_multipliers_and_fixed_time(tmp_path, cm):
    """Steps timed as their GeMMs (as run) + 3 ms + 4 x element-wise + 1.5 x decode attention + 2 x
    chunk attention: the diagnosis fit returns those numbers."""
    probe = {}

    def law(d, c, n, p, rows):
        r = StepRow("mixed_step" if n else "decode_step", "graph", d, c if d else None, n, p if n else None,
                    rows if not n else None, 1.0, 1.0, 1.0, 1)
        q = step_parts(cm, r)
        probe[(d, c, n, p, rows)] = q
        return (q["gemms"] - q["lm_head_excess"] + 0.003 + 4 * q["elementwise"] + 1.5 * q["decode_attention"]
                + 2 * q["chunk_attention"])

    score = score_steps(write(tmp_path / "law.csv", synthetic(cm, law, lambda g: g + 0.02)))
    m = score.parts.multipliers
    assert m["fixed_s"] == pytest.approx(0.003, rel=1e-6)
    got = [m[k] for k in ("elementwise", "decode_attention", "chunk_attention")]
    assert got == pytest.approx([4, 1.5, 2], rel=1e-6)
    assert m["in_sample"].errors.p90 == pytest.approx(0.0, abs=1e-9)


def test_a_padded_step_equal_to_the_capture_step_has_no_capture_rule_error(tmp_path, cm):
    def graph(d, c, n, p, rows):
        return 0.005 + 1e-4 * rows + 1e-7 * d * c  # rows: the capture size for a padded graph

    score = score_steps(write(tmp_path / "pad.csv", synthetic(cm, graph, lambda g: g + 0.02)))
    pad = score.padding
    assert {(q["decodes"], q["padded_to"]) for q in pad.points} == {(3, 4), (12, 16)}
    assert pad.capture_rule.n == 4
    # the capture step also attends for its extra sequences: padded and capture differ by that alone
    for q in pad.points:
        want = 1e-7 * (q["padded_to"] - q["decodes"]) * q["decode_context"]
        assert q["capture_s"] - q["padded_s"] == pytest.approx(want)
        assert q["cost"] == pytest.approx(1e-4 * (q["padded_to"] - q["decodes"]) / q["unpadded_s"])


def test_a_padded_row_timed_as_its_capture_row_gives_zero_capture_error(tmp_path, cm):
    rows = [row(decodes=3, padded_to=4, seconds=0.0071), row(decodes=3, seconds=0.007),
            row(decodes=4, padded_to=4, seconds=0.0071), row("mixed_step", decodes=0, chunk_tokens=64,
                                                                chunk_context=0, seconds=0.008),
            row(mode="eager", decodes=3, seconds=0.03), row(mode="eager", decodes=4, seconds=0.03)]
    score = score_steps(write(tmp_path / "cap.csv", rows))
    pad = score.padding
    assert pad.capture_rule.n == 1 and pad.capture_rule.high == 0.0
    assert pad.cost.median == pytest.approx(0.0071 / 0.007 - 1)
    assert pad.no_padding.median == pytest.approx(1 - 0.007 / 0.0071)


def test_a_constant_launch_cost_is_recovered_and_predicts_the_held_out_half(tmp_path, cm):
    table = synthetic(cm, lambda d, c, n, p, rows: 0.004 + 2e-5 * rows, lambda g: g + 0.0125)
    score = score_steps(write(tmp_path / "const.csv", table))
    fx = score.fixed
    assert [f["c"] for f in fx.constant["folds"]] == pytest.approx([0.0125, 0.0125])
    assert fx.constant["held_out"].errors.p90 == pytest.approx(0.0, abs=1e-12)
    assert fx.overhead.low == pytest.approx(0.0125) and fx.overhead.high == pytest.approx(0.0125)
    assert {f["fold"] for f in fx.steps} == {0, 1}
    assert len(fx.steps) == len([r for r in load_steps(tmp_path / "const.csv").rows if r.mode == "eager"])


def test_the_overlap_law_is_recovered_where_the_host_or_the_gpu_binds(tmp_path, cm):
    def eager(g):
        return max(0.02, g + 0.0015)

    score = score_steps(write(tmp_path / "overlap.csv", synthetic(
        cm, lambda d, c, n, p, rows: 0.004 + 4e-5 * rows, eager)))
    fx = score.fixed
    for f in fx.overlap["folds"]:
        assert (f["h"], f["c"]) == pytest.approx((0.02, 0.0015))
    assert fx.overlap["held_out"].errors.p90 == pytest.approx(0.0, abs=1e-12)
    assert fx.constant["held_out"].errors.median > 0.05  # one constant cannot describe it
    assert fx.rank_correlation < 0  # the launch cost shrinks as the GPU's share grows


def test_the_fits_refuse_no_data():
    with pytest.raises(FieldError):
        fit_constant([], [])
    with pytest.raises(FieldError):
        fit_overlap([], [])
    assert fit_constant([1.0, 2.0], [1.5, 2.5]) == pytest.approx(0.5)
    assert fit_overlap(np.array([1.0, 3.0]), np.array([2.0, 3.5])) == pytest.approx((2.0, 0.5))


def test_a_table_without_mixed_steps_or_without_eager_rows_is_refused(tmp_path):
    only_decode = write(tmp_path / "d.csv", [row(padded_to=1), row(mode="eager")])
    with pytest.raises(FieldError, match="mixed_step graph rows"):
        score_steps(only_decode)
    no_eager = write(tmp_path / "g.csv", [row(padded_to=1), row("mixed_step", decodes=0, chunk_tokens=64,
                                                                   chunk_context=0)])
    with pytest.raises(FieldError, match="timed both graph"):
        score_steps(no_eager)


def test_a_preset_that_cannot_run_the_table_is_refused_by_name(tmp_path, cm):
    path = write(tmp_path / "t.csv", synthetic(cm, lambda *a: 0.01, lambda g: g + 0.02))
    with pytest.raises(Exception, match="nonexistent-gpu"):
        score_steps(path, StepOptions(gpu="nonexistent-gpu"))


# --- the shipped table's score and its forms ----------------------------------------------------


def test_the_shipped_score_counts_every_graph_step_and_prints_its_forms(tmp_path):
    with open(SHIPPED, newline="") as fh:
        raw = [r for r in csv.DictReader(fh) if r["mode"] == "graph"]
    score = score_steps()
    n_decode = sum(1 for r in raw if r["kind"] == "decode_step" and r["padded_to"])
    n_mixed = sum(1 for r in raw if r["kind"] == "mixed_step")
    assert score.accuracy["decode_real"].errors.n == n_decode == score.accuracy["decode_padded"].errors.n
    assert score.accuracy["mixed"].errors.n == n_mixed
    assert len(score.rows) == n_decode + n_mixed
    off_grid = {(r["decodes"], r["decode_context"]) for r in raw if r["kind"] == "decode_step"
                and r["padded_to"] and r["padded_to"] != r["decodes"]}
    assert len(score.padding.points) == len(off_grid)
    lines = console_lines(score)
    assert lines[0].startswith(SHIPPED.name) and EAGER_NOTE in "\n".join(lines)
    data = json.loads(to_json(score))
    assert set(data) >= {"accuracy", "parts", "padding", "fixed", "rows"}
    figures = plot(score, tmp_path)
    assert all((tmp_path / name).stat().st_size > 0 for name in figures.values())
    text = markdown(score, figures)
    assert all(f"]({name})" in text for name in figures.values())


def test_the_rank_correlation_is_spearmans_with_mean_ranks_for_ties():
    assert rank_correlation([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    # ranks (0, 1.5, 1.5, 3) and (0, 1, 2, 3): covariance 4.5 over sqrt(4.5 x 5)
    assert rank_correlation([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9 ** 0.5)
    assert rank_correlation([1, 1, 1], [1, 2, 3]) is None
