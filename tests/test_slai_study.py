"""The Section 7 study's machinery: capacity and operating point on known curves, intervals, and a
tiny study end to end (outputs written, points cached so that a second run simulates nothing)."""

import math

import numpy as np
import pytest
from scipy import stats

from stability.slai import study as slai_study
from stability.slai.analysis import capacity, ci, operating_rate, paper_table
from stability.slai.report import run_study, write_outputs
from stability.slai.study import Panel, Study
from theory.errors import FieldError
from theory.workload import get_workload


def test_capacity_walks_up_and_interpolates_the_ttft_crossing():
    r = [0.5, 1.0, 1.5, 2.0]
    assert capacity(r, [0.2, 0.3, 0.4, 0.45], [True] * 4) == 2.0
    # TTFT crosses 0.5 between 1.0 (0.3) and 1.5 (0.7): 1.0 + 0.2 / 0.4 * 0.5
    assert capacity(r, [0.2, 0.3, 0.7, 5.0], [True] * 4) == pytest.approx(1.25)
    # a TBT violation stops the walk at the last good rate, without interpolation
    assert capacity(r, [0.2, 0.3, 0.7, 5.0], [True, True, False, True]) == 1.0
    assert capacity(r, [0.2, 0.3, 0.4, 0.45], [False, True, True, True]) == 0.0
    assert capacity(r[::-1], [0.45, 0.4, 0.3, 0.2], [True] * 4) == 2.0  # order does not matter


def test_operating_rate_interpolates_log_ttft():
    rows = [{"panel": "p", "policy": "sarathi_fcfs", "op": False, "rate": x, "seed": s, "ttft_p50": y}
            for s in (0, 1) for x, y in ((1.0, 0.3), (2.0, 3.0), (3.0, 30.0))]
    # log TTFT linear between (1, ln 0.3) and (2, ln 3): reaches 1.5 at 1 + ln 5 / ln 10
    assert operating_rate(rows, "p", 1.5) == pytest.approx(1 + math.log(5) / math.log(10))
    assert operating_rate(rows, "p", 100.0) == 3.0 and operating_rate(rows, "p", 0.1) == 1.0


def test_ci_is_the_student_t_interval():
    x = [1.0, 2.0, 4.0]
    m, lo, hi = ci(x)
    half = stats.t.ppf(0.975, 2) * np.std(x, ddof=1) / np.sqrt(3)
    assert (m, lo, hi) == pytest.approx((7 / 3, 7 / 3 - half, 7 / 3 + half))
    assert math.isnan(ci([1.0])[1]) and math.isnan(ci([])[0])


def test_tiny_study_end_to_end_and_resumes(tmp_path, monkeypatch):
    study = Study((Panel("real", "table1", 0.05, floor=True),), seeds=2, n_requests=80,
                  rel_rates=(0.9,), paper_rates=(0.6,))
    rows = run_study(study, tmp_path)
    assert len(rows) == 2 * len(slai_study.POLICIES) * 2 + len(slai_study.POLICIES) * 2
    assert all(r["completed"] == 80 for r in rows)
    assert all(r["t_bar_batch"] > 0.015 for r in rows)  # the floor profile: 15 ms on every batch
    paths = write_outputs(study, rows, tmp_path, figures=False)
    for name in ("points", "table_csv", "table_md", "claims"):
        assert (tmp_path / paths[name].split("/")[-1]).exists()
    table = paper_table(rows, study.panels)
    assert {t["quantity"] for t in table} >= {"capacity gain [%]",
                                              "median TTFT reduction at the operating point [%]"}
    md = (tmp_path / "paper_vs_llmq.md").read_text()
    assert "| capacity gain [%] | 26.1 |" in md
    # the length-law row of table1: its mean prompt, by a sum independent of Workload.expect
    w = get_workload("table1").truncated(8192)
    assert f"| table1 | {sum(float(p) * int(x) for p, x in zip(w.p, w.L_P, strict=True)):.0f} |" in md

    def no_simulation(sc):
        raise AssertionError("a cached point was simulated again")

    monkeypatch.setattr(slai_study, "run_point", no_simulation)
    again = run_study(study, tmp_path)
    assert [r["ttft_p50"] for r in again] == [r["ttft_p50"] for r in rows]


def test_select_panels_keeps_the_named_panels_in_study_order():
    full = slai_study.FULL
    keys = [p.key for p in full.panels]
    picked = slai_study.select_panels(full, f"{keys[3]}, {keys[0]}")
    assert [p.key for p in picked.panels] == [keys[0], keys[3]]
    assert (picked.seeds, picked.n_requests, picked.rel_rates) == (full.seeds, full.n_requests,
                                                                   full.rel_rates)
    assert slai_study.select_panels(full, [keys[1]]).panels == (full.panels[1],)
    for bad in ("real_table1_7pct", " , "):
        with pytest.raises(FieldError) as exc:
            slai_study.select_panels(full, bad)
        assert exc.value.field == "panels" and keys[0] in str(exc.value)

