"""Workload laws: the Table 1 fit, the packaged trace, padding, sampling and bad input."""

from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from theory.errors import ConfigFileError, FieldError, UnknownNameError
from theory.workload import (
    TABLE1,
    Workload,
    check_context,
    check_trace_context,
    deterministic,
    get_workload,
    read_trace,
    sharegpt4,
    table1_marginal,
    uniform,
)


@pytest.mark.parametrize("which", ["prompt", "decode"])
def test_table1_marginals_have_table1s_median_and_p90(which):
    # Each discretized marginal puts mass 0.5 at or below Table 1's median and 0.9 at or below
    # its P90, up to one atom (1/200) of discretization.
    values, probs, _ = table1_marginal(which, atoms=200)
    cdf = lambda x: probs[values <= x].sum()  # noqa: E731
    assert abs(cdf(TABLE1[which]["median"]) - 0.5) <= 1 / 200
    assert abs(cdf(TABLE1[which]["p90"]) - 0.9) <= 1 / 200
    assert np.isclose(probs.sum(), 1)


def test_table1_joint_law_respects_the_total_cap():
    capped = get_workload("table1")
    assert (capped.L_P + capped.L_D).max() <= 8192
    assert any("conditioned on L^P + L^D <= 8192" in n for n in capped.notes)


def test_sharegpt4_matches_its_documented_statistics():
    # theory/data/workloads/README.md (the trace's published summary): prompt median 1730, P90 5696,
    # std 2088.8, max 8141;
    # output median 415, P90 834, std 265.6, max 1024; 30,731 rows.
    w = sharegpt4()
    assert w.quantile("prompt", 0.5) == 1730 and w.quantile("prompt", 0.9) == 5696
    assert w.quantile("decode", 0.5) == 415 and w.quantile("decode", 0.9) == 834
    assert w.std("prompt") == pytest.approx(2088.8, abs=0.1)
    assert w.std("decode") == pytest.approx(265.6, abs=0.1)
    assert (w.l_P_max, w.l_D_max) == (8141, 1024)
    assert np.isclose(w.p.sum(), 1) and round(1 / w.p.min()) == 30731


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 600)), min_size=1, max_size=30),
       st.sampled_from([64, 128, 256]))
def test_padding_meets_assumption3_and_keeps_decode_law(pairs, t):
    lp, ld = zip(*pairs, strict=True)
    w = Workload.from_pairs("x", lp, ld)
    padded = w.padded(t)
    assert padded.assumption3(t) == 1.0
    assert np.all(padded.L_P % t == 0)
    assert padded.expect(padded.L_D) == pytest.approx(w.expect(w.L_D))
    # padding moves each prompt up by less than t
    assert 0 <= padded.expect(padded.L_P) - w.expect(w.L_P) < t


def test_exact_expectation_of_a_small_pmf():
    w = Workload.from_pairs("x", [1, 1, 3], [2, 2, 5], [1, 1, 2])
    assert w.p.tolist() == [0.5, 0.5]
    assert w.mean() == (2.0, 3.5)


def test_sampling_follows_the_pmf():
    w = Workload.from_pairs("x", [10, 20, 30], [1, 2, 3], [0.2, 0.5, 0.3])
    lp, ld = w.sample(20000, np.random.default_rng(0))
    counts = np.array([(lp == v).sum() for v in (10, 20, 30)])
    assert stats.chisquare(counts, 20000 * w.p).pvalue > 1e-3
    assert np.array_equal(ld, lp // 10)  # pairs stay together


def test_same_seed_same_sample():
    w = get_workload("table1")
    a = w.sample(100, np.random.default_rng(5))
    b = w.sample(100, np.random.default_rng(5))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_sampling_draws_what_inversion_by_searchsorted_draws():
    """The guide-table search returns numpy's ``searchsorted(cdf, u, side="right")`` index for
    every uniform: the same pairs for a seed as plain inversion, on Table 1's 39,373-pair law
    and at the exact bucket edges, the cdf's own values (ties) and zero-probability jumps."""
    from theory.workload import GUIDE, _search_right

    w = get_workload("table1")
    lp, ld = w.sample(50000, np.random.default_rng(9))
    u = np.random.default_rng(9).random(50000) * (1 - 1e-15)
    idx = np.minimum(np.searchsorted(np.cumsum(w.p), u, side="right"), w.p.size - 1)
    assert np.array_equal(lp, w.L_P[idx]) and np.array_equal(ld, w.L_D[idx])
    cdf = np.cumsum(np.array([0.0, 0.25, 0.0, 0.0, 0.5, 1e-9, 0.25 - 1e-9]))
    edges = np.arange(GUIDE) / GUIDE
    x = np.concatenate([edges, np.nextafter(edges[1:], 0), cdf[cdf < 1], [1 - 2.0**-53]])
    assert np.array_equal(_search_right(cdf, x), np.searchsorted(cdf, x, side="right"))


def test_specs():
    assert get_workload("deterministic:2048,256").mean() == (2048, 256)
    u = get_workload("uniform:10-20,1-3")
    assert u.mean() == (15, 2) and u.p.size == 33
    assert deterministic(5, 6).l_P_max == 5
    assert uniform(1, 2, 1, 1).p.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("call, field", [
    (lambda: Workload.from_pairs("x", [-5], [3]), "L_P"),
    (lambda: Workload.from_pairs("x", [5], [0]), "L_D"),
    (lambda: Workload.from_pairs("x", [], []), "pmf"),
    (lambda: Workload.from_pairs("x", [1, 2], [1, 2], [0, 0]), "probabilities"),
    (lambda: Workload.from_pairs("x", [1.5], [2]), "L_P"),
    (lambda: uniform(5, 1, 1, 2), "uniform"),
    (lambda: get_workload("deterministic:a,b"), "workload"),
])
def test_bad_laws(call, field):
    with pytest.raises(FieldError, match=field):
        call()


def test_unknown_workload():
    with pytest.raises(UnknownNameError, match="unknown workload"):
        get_workload("chatbot-arena")


def test_csv_trace(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_len,output_len,arrival_time,class\n100,10,0.5,paying\n200,20,1.0,free\n")
    tr = read_trace(f)
    assert tr.L_P.tolist() == [100, 200] and tr.arrival_time.tolist() == [0.5, 1.0]
    assert tr.request_class.tolist() == ["paying", "free"]
    assert get_workload(str(f)).mean() == (150, 15)


@pytest.mark.parametrize("body, message", [
    ("prompt_len\n100\n", "missing column 'output_len'"),
    ("prompt_len,output_len\n100,x\n", "row 2"),
    ("prompt_len,output_len\n100,1.5\n", "not an integer"),
    ("prompt_len,output_len\n", "no data rows"),
    ("prompt_len,output_len,arrival_time\n1,1,2.0\n1,1,1.0\n", "strictly increasing"),
    ("prompt_len,output_len,arrival_time\n1,1,1.0\n1,1,1.0\n", "strictly increasing"),
])
def test_malformed_csv(tmp_path, body, message):
    f = tmp_path / "t.csv"
    f.write_text(body)
    with pytest.raises(ConfigFileError, match=message):
        read_trace(f)


def test_csv_trace_with_its_prefix_relation(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_len,output_len,prefix_parent,shared_prefix_tokens\n"
                 "100,10,,0\n200,20,0,64\n50,5,1,50\n")
    parent, shared = read_trace(f).prefix
    assert parent.tolist() == [-1, 0, 1] and shared.tolist() == [0, 64, 50]
    assert read_trace(f).L_P.tolist() == [100, 200, 50]


@pytest.mark.parametrize("rows, message", [
    ("100,10,1,5\n200,20,,0\n", "row 2, column 'prefix_parent': 1, not an earlier"),  # arrives later
    ("100,10,,0\n200,20,7,5\n", "row 3, column 'prefix_parent': 7, not an earlier"),  # no such row
    ("100,10,,0\n200,20,0,101\n", "row 3, column 'shared_prefix_tokens': 101 exceeds"),  # parent's prompt
    ("300,10,,0\n200,20,0,201\n", "row 3, column 'shared_prefix_tokens': 201 exceeds"),  # own prompt
    ("100,10,,0\n200,20,0,0\n", "row 3: shared_prefix_tokens 0 with prefix_parent 0"),
    ("100,10,,5\n", "row 2: shared_prefix_tokens 5 with prefix_parent -1"),
    ("100,10,,x\n", "column 'shared_prefix_tokens', row 2"),
])
def test_a_bad_prefix_relation_is_refused(tmp_path, rows, message):
    f = tmp_path / "t.csv"
    f.write_text("prompt_len,output_len,prefix_parent,shared_prefix_tokens\n" + rows)
    with pytest.raises(ConfigFileError, match=message):
        read_trace(f)
    f.write_text("prompt_len,output_len,prefix_parent\n100,10,\n")
    with pytest.raises(ConfigFileError, match="missing column 'shared_prefix_tokens'"):
        read_trace(f)


def test_negative_length_in_csv(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("prompt_len,output_len\n-4,3\n")
    with pytest.raises(FieldError, match="prompt_len"):
        read_trace(f)


def test_the_context_rule_accepts_exactly_the_limit_and_rejects_one_token_more():
    check_context(deterministic(4000, 96), 4096, "m")  # 4000 + 96 = 4096: fits
    with pytest.raises(FieldError, match=r"4097 tokens \(1 of the law") as err:
        check_context(deterministic(4000, 97), 4096, "m")
    assert "L^P + L^D <= 4096 tokens, the context length of m" in str(err.value)
    check_context(deterministic(10**6, 1), None, "m")  # no recorded context: MAX_TOKENS alone


def test_the_context_rule_names_the_longest_request_and_the_mass_beyond():
    law = Workload.from_pairs("w", [100, 3000, 5000], [10, 100, 50], [0.5, 0.3, 0.2])
    with pytest.raises(FieldError, match=r"L\^P 5000 \+ L\^D 50 = 5050 tokens \(0.2 of the law"):
        check_context(law, 4096, "m")


def test_the_context_rule_names_the_first_trace_row_past_the_limit(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("prompt_len,output_len\n10,5\n4000,96\n4000,97\n9000,10\n")
    with pytest.raises(FieldError, match="row 4") as err:  # header = row 1
        check_trace_context(path, 4096, "m", "--workload")
    assert "prompt_len 4000 + output_len 97 = 4097" in str(err.value)
    check_trace_context(path, 4096, "m", "--workload", total_cap=4096)  # the cap drops rows 4 and 5


def test_shipped_defaults_fit_their_models_context():
    """Table 1 and sharegpt4 on Mistral-7B (padded too, on the default tile sets), and every
    panel of the Section 7 study (capped at 8192 tokens) fit its 32768-token context."""
    from stability.points import workload
    from stability.slai.study import FULL, MODEL, QUICK, TOTAL_CAP
    from theory.builder import CostSpec, cost_model
    from theory.models import get_model

    m = get_model("mistral-7b")
    assert m.context_length == 32768 and get_model(MODEL) == m
    for spec in ("table1", "sharegpt4"):
        for gpu in ("a100", "rtx6000ada"):
            check_context(workload(spec, cost_model(CostSpec(gpu)).t_lcm), m.context_length, m.key)
    for panel in {*FULL.panels, *QUICK.panels}:
        check_context(get_workload(panel.workload).truncated(TOTAL_CAP), m.context_length, m.key)
    llama = get_model("llama-2-7b")  # a finding: a quarter of Table 1 exceeds Llama 2's 4096 tokens
    with pytest.raises(FieldError, match="context length of llama-2-7b"):
        check_context(get_workload("table1"), llama.context_length, llama.key)


@pytest.mark.parametrize("name, rows", [("azure-code-2023", 8819), ("azure-conv-2023", 19366)])
def test_packaged_azure_traces_keep_every_row_of_an_hour_of_bursty_arrivals(name, rows, tmp_path,
                                                                           monkeypatch):
    tr = read_trace(name)
    assert tr.L_P.size == tr.L_D.size == tr.arrival_time.size == rows  # every row of the source file
    t = tr.arrival_time
    assert t[0] == 0.0 and np.all(np.diff(t) > 0) and t[-1] < 3600.0  # one hour, from its first request
    assert tr.L_P.min() >= 1 and tr.L_D.min() >= 1
    # bursty: counts per 10 s window are over-dispersed against Poisson arrivals (index of
    # dispersion 1), beyond what a Poisson sample of this size shows (its 99.9% quantile)
    counts = np.bincount((t // 10).astype(int))
    windows = counts.size
    poisson_max = stats.chi2.ppf(0.999, windows - 1) / (windows - 1)
    assert counts.var(ddof=1) / counts.mean() > poisson_max
    licence = Path(str(resources.files("theory").joinpath("data", "workloads",
                                                           "LICENSE-azure_llm_inference_2023.txt")))
    assert "Attribution 4.0 International" in licence.read_text(encoding="utf-8-sig")
    law = get_workload(name)  # the name is also a workload: the trace's empirical law
    assert law.mean() == pytest.approx((tr.L_P.mean(), tr.L_D.mean()), rel=1e-12)
    # a file of that name in the working directory is read instead of the packaged trace
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text("prompt_len,output_len\n7,3\n")
    assert read_trace(name).L_P.tolist() == [7]
