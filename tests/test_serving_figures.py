"""The figures of ``llmq validate --serving`` and the data they plot (stability.serving.figures): the
files read back strictly, the queue series against counts made request by request, the logger's
clock offset recovered on a synthetic log, and the file dictionary against the files written."""

import csv
import json
import re

import numpy as np
import pytest

from stability.serving import figures
from stability.serving.replay import ReplaySpec
from stability.serving.report import FILES, to_json, write_outputs
from stability.serving.score import score_run
from tests.test_serving_replay import small_run
from theory.errors import FieldError
from theory.validation.serving_runs import load_run


def count(t: float, since: np.ndarray, until: np.ndarray) -> int:
    """#{j : since_j <= t < until_j}, one request at a time."""
    return sum(1 for a, b in zip(since.tolist(), until.tolist(), strict=True) if a <= t < b)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = small_run(tmp_path_factory.mktemp("runs"), keep=120)
    s = score_run(ReplaySpec(str(folder)))
    out = tmp_path_factory.mktemp("out")
    return s, out, write_outputs([s], "vllm_v1", out)


def test_the_queue_series_are_counts_of_the_per_request_times(written):
    s, out, _ = written
    q = figures.read_queues(out / f"serving_{s.run}_queues.csv")
    got, rq = s.replay.result.requests, load_run(s.replay.run.path).requests
    a, st, f = rq.arrival - rq.arrival[0], rq.scheduled - rq.arrival[0], rq.last_token - rq.arrival[0]
    assert q.t[-1] >= max(np.max(got["t_finish"]), np.max(f))  # the series covers both runs to their end
    for k, t in enumerate(q.t.tolist()):
        assert q.counts["llmq_running"][k] == count(t, got["t_start"], got["t_finish"])
        assert q.counts["llmq_waiting"][k] == count(t, got["arrival"], got["t_start"])
        assert q.counts["measured_running"][k] == count(t, st, f)
        assert q.counts["measured_waiting"][k] == count(t, a, st)
    assert q.counts["llmq_running"][-1] == q.counts["llmq_waiting"][-1] == 0


def test_the_logged_queues_are_the_runs_timeseries_on_the_requests_clock(written):
    s, out, _ = written
    q = figures.read_queues(out / f"serving_{s.run}_queues.csv")
    offset = json.loads((out / "serving.json").read_text())["runs"][0]["logger_offset_s"]
    with open(s.replay.run.path + "/timeseries.csv", newline="") as fh:
        log = list(csv.DictReader(fh))
    n = len(log)
    assert np.allclose(q.t[:n], [float(r["t"]) - offset for r in log], rtol=0, atol=1e-9)
    assert q.counts["vllm_running"][:n].tolist() == [int(r["running"]) for r in log]
    assert q.counts["vllm_waiting"][:n].tolist() == [int(r["waiting"]) for r in log]
    assert np.isnan(q.counts["vllm_running"][n:]).all()  # past the log's last tick: empty


def test_the_figure_plots_those_series(written):
    import matplotlib.pyplot as plt

    s, _, _ = written
    q = figures.queues(s.replay)
    fig = figures.figure(s.replay, q)
    try:
        got = s.replay.result.requests
        panels = {ax.get_title(): ax for ax in fig.axes}
        for name, since, until in (("running", got["t_start"], got["t_finish"]),
                                   ("waiting", got["arrival"], got["t_start"])):
            (line,) = [ln for ln in panels[name].get_lines() if ln.get_label() == "llmq"]
            x = line.get_xdata()
            assert line.get_ydata().tolist() == [count(t, since, until) for t in x.tolist()]
        for m in figures.METRICS:
            (line,) = [ln for ln in panels[f"{m} CDF"].get_lines() if ln.get_label() == "llmq"]
            v = s.replay.predicted[m][np.isfinite(s.replay.predicted[m])]
            x, y = line.get_xdata(), line.get_ydata()
            assert np.array_equal(x, np.sort(v))
            last = np.append(x[1:] != x[:-1], True)  # the last point of each run of ties
            assert np.allclose(y[last], [np.mean(v <= xi) for xi in x[last].tolist()], rtol=0, atol=1e-15)
    finally:
        plt.close(fig)


def test_the_per_request_file_holds_the_plotted_metrics(written):
    s, out, _ = written
    c = figures.read_requests(out / f"serving_{s.run}_requests.csv")
    assert np.array_equal(c["request_id"], s.replay.run.requests.request_id)
    for m in figures.METRICS:
        for src, values in (("measured", s.replay.measured[m]), ("llmq", s.replay.predicted[m])):
            finite = np.isfinite(values)
            assert np.array_equal(np.isfinite(c[f"{src}_{m}"]), finite)
            assert np.allclose(c[f"{src}_{m}"][finite], values[finite], rtol=1e-15, atol=0)
    assert int(c["llmq_preemptions"].sum()) == s.preemptions


def test_every_file_written_is_in_the_file_dictionary(written):
    s, out, paths = written
    doc = to_json([s], "vllm_v1")
    assert doc["files"] == FILES
    names = {p.name for p in out.iterdir()}
    assert {p.name for p in paths} <= names
    patterns = [re.escape(k).replace(re.escape("<run>"), re.escape(s.run)) for k in FILES]
    described = " ".join(FILES.values()).replace("<run>", s.run)
    for name in names:
        assert any(re.fullmatch(p, name) for p in patterns) or name in described, name
    for key in FILES:
        assert key.replace("<run>", s.run) in names, key


def test_the_logger_offset_is_recovered_from_a_synthetic_log():
    rng = np.random.default_rng(7)
    n, true = 300, 1.437
    a = np.sort(rng.uniform(0.0, 60.0, n))
    s = a + rng.exponential(2.0, n)
    f = s + rng.uniform(1.0, 30.0, n)
    ticks = np.arange(1.0, 100.0)  # logger clock = requests' clock + true
    log = {"t": ticks, "running": [count(t - true, s, f) for t in ticks],
           "waiting": [count(t - true, a, s) for t in ticks],
           "prompt_throughput": [float(count(t - true, a, f + 1e9) > 0) for t in ticks]}
    got = figures.logger_offset(log, a, f)
    assert abs(got - true) <= 0.01
    in_system = [count(t - got, a, f) for t in ticks]
    assert in_system == [r + w for r, w in zip(log["running"], log["waiting"], strict=True)]


def test_counts_at_matches_a_loop_with_ties():
    arrival = np.array([0.0, 0.0, 1.0, 2.0])
    start = np.array([0.0, 1.0, 1.0, 3.0])
    finish = np.array([1.0, 2.0, 2.0, 3.0])
    t = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
    running, waiting = figures.counts_at(t, arrival, start, finish)
    assert running.tolist() == [count(x, start, finish) for x in t.tolist()]
    assert waiting.tolist() == [count(x, arrival, start) for x in t.tolist()]


@pytest.mark.parametrize("edit, field", [
    (lambda rows: [r[:1] + r[2:] for r in rows], "vllm_running"),  # a column missing
    (lambda rows: [rows[0], [rows[1][0], *rows[1][1:-1], "-1"], *rows[2:]], "llmq_waiting"),
    (lambda rows: [rows[0], rows[2], rows[1], *rows[3:]], "'t'"),  # times out of order
    (lambda rows: [rows[0], [rows[1][0], *rows[1][1:-1], "2.5"], *rows[2:]], "llmq_waiting"),
])
def test_the_queues_reader_is_strict(written, tmp_path, edit, field):
    s, out, _ = written
    with open(out / f"serving_{s.run}_queues.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    bad = tmp_path / "queues.csv"
    with open(bad, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(edit(rows))
    with pytest.raises(FieldError, match=re.escape(field)) as err:
        figures.read_queues(bad)
    assert str(bad) in str(err.value)


def test_a_run_without_a_log_gets_empty_log_columns(tmp_path):
    folder = small_run(tmp_path, keep=40)
    (folder / "timeseries.csv").unlink()
    s = score_run(ReplaySpec(str(folder)))
    write_outputs([s], "vllm_v1", tmp_path / "out")
    assert to_json([s], "vllm_v1")["runs"][0]["logger_offset_s"] is None
    q = figures.read_queues(tmp_path / "out" / f"serving_{s.run}_queues.csv")
    assert np.isnan(q.counts["vllm_running"]).all() and np.isnan(q.counts["vllm_waiting"]).all()
    got = s.replay.result.requests
    expected = [count(t, got["t_start"], got["t_finish"]) for t in q.t.tolist()]
    assert q.counts["llmq_running"].tolist() == expected
