"""``llmq validate`` on worker processes: the calibrations and figures spread over a pool
(theory.validation.fan_out) give the report and the files of one process; the GeMM search's kept
least squares give the fit of the search that solves every assignment afresh."""

from __future__ import annotations

import pytest

from llmq.cli import main
from theory.errors import FieldError, LlmqError
from theory.hardware import get_gpu
from theory.profiles import load_profile
from theory.validation import fan_out, gemm_search, kept
from theory.validation.gemm import fit_gpu, gemm_rows, token_split
from theory.validation.report import to_json, write_outputs
from theory.validation.results import Settings
from theory.validation.validate import validate

SETTINGS = Settings(quick=True, gpus=("a40",), max_train=1500)


def _files(out) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_two_workers_give_the_report_and_the_files_of_one_process(tmp_path):
    profiles = {"vidur_gemm": load_profile("vidur_gemm")}
    one = validate(profiles, SETTINGS, workers=1)
    two = validate(profiles, SETTINGS, workers=2)
    assert len(one.fits) >= 3  # the held-out-token fit and one per left-out model
    assert to_json(one, [], None) == to_json(two, [], None)
    written = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        files = write_outputs(one, out, elapsed_s=None, workers=workers)
        assert [f.replace(str(out), "") for f in files] == [
            f.replace(str(tmp_path / "w1"), "") for f in written.get("files", files)
        ]
        written.setdefault("files", files)
        body = _files(out)
        assert any(n.endswith(".png") for n in body)
        written[workers] = {n: b.replace(str(out).encode(), b"OUT") for n, b in body.items()}
    assert written[1] == written[2]


class _Square:
    def __init__(self, x: int):
        self.x, self.cost = x, float(x % 3)

    def run(self) -> int:
        return self.x * self.x


def test_results_come_back_in_the_order_of_the_jobs_whatever_their_cost():
    jobs = [_Square(x) for x in range(7)]
    for workers in (1, 3):
        assert fan_out.start(jobs, workers).results() == [x * x for x in range(7)]


class _Bad:
    cost = 1.0

    def run(self):
        raise FieldError("rows", 0, "at least one")


def test_an_error_in_a_worker_comes_back_with_its_message():
    for workers in (1, 2):
        with pytest.raises(LlmqError, match=r"rows: expected at least one, got 0"):
            fan_out.start([_Square(2), _Bad()], workers).results()


def test_profiles_load_alike_on_two_workers():
    names = {"a": "splitwise_perf_model", "b": "vidur_all_reduce"}
    one, two = fan_out.load_profiles(names, 1), fan_out.load_profiles(names, 2)
    assert list(two) == ["a", "b"]
    assert all((one[k].rows == two[k].rows).all() and one[k].rows.size for k in names)


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2"])
def test_a_bad_worker_count_is_refused(workers):
    with pytest.raises(FieldError, match="workers"):
        fan_out.start([_Square(1)], workers)


def test_the_command_refuses_bad_workers_before_any_work(tmp_path, capsys):
    code = main(["validate", "--workers", "0", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--workers" in err and ">= 1" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    code = main(["validate", "--serving", "--workers", "2", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and "--workers" in err and "--serving" in err


def test_kept_least_squares_give_the_fit_of_a_search_that_solves_every_assignment(monkeypatch):
    data = gemm_rows(load_profile("vidur_gemm").rows)
    data = data.take((data.gpu == "a40") & (data.model == "llama-2-7b"))
    train = data.take(~token_split(data.tokens, 4))
    once = fit_gpu(get_gpu("a40"), train, max_train=1500)
    solved = []
    original = gemm_search.GemmProblem._solve

    def afresh(self, key, arg, tile, active):
        self._solved.clear()  # nothing kept: every assignment's least squares solved again
        solved.append(key)
        return original(self, key, arg, tile, active)

    monkeypatch.setattr(gemm_search.GemmProblem, "_solve", afresh)
    fresh = fit_gpu(get_gpu("a40"), train, max_train=1500)
    assert len(solved) > len(set(solved))  # the search does meet assignments again
    assert fresh.calibration.profile == once.calibration.profile
    assert repr(fresh.calibration.parameters) == repr(once.calibration.parameters)  # NaN-safe, exact
    assert (fresh.calibration.predicted == once.calibration.predicted).all() and fresh.c0 == once.c0


def test_the_kept_report_is_named_without_the_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    profiles = {"vidur_gemm": load_profile("vidur_gemm")}
    first = kept.kept_validate(profiles, SETTINGS, workers=2)

    def refuse(*_args, **_kwargs):
        raise AssertionError("validate ran although the report was kept")

    monkeypatch.setattr(kept, "validate", refuse)
    again = kept.kept_validate(profiles, SETTINGS, workers=1)  # read back, not refitted
    assert to_json(first, [], None) == to_json(again, [], None)
