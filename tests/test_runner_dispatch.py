"""The runner's dynamic dispatch (:meth:`stability.runner.Runner.run_dynamic`): the longest waiting
task first, follow-up tasks as soon as their cause finishes, one run for a task asked twice, and
every result (cached or computed) told to every tag that asked for it."""

from dataclasses import dataclass

import pytest

from stability.runner import Cache, Runner, run_task
from theory.errors import FieldError


@dataclass(frozen=True)
class Toy:
    """A toy task: ``x`` -> ``2 x``."""

    x: int

    def identity(self) -> dict:
        return {"kind": "toy", "x": self.x}

    def run(self) -> dict:
        return {"value": 2 * self.x}


class Recorder:
    """An executor that runs a toy task (:class:`Toy`) when waited for, and records the order in
    which tasks were handed to it."""

    def __init__(self, slots: int):
        self.slots = slots
        self.started: list = []

    def submit(self, task: Toy, priority: float = 0.0):
        self.started.append(task)
        return len(self.started) - 1

    def wait(self, handles: list):
        handle = min(handles)  # the oldest finishes first
        return [(handle, run_task(self.started[handle]))]

    def close(self, abort: bool = False) -> None:
        pass


def toy(x: int) -> Toy:
    return Toy(x)


def sweep(runner: Runner):
    """Tasks x = 1..4; when x = 4 finishes it asks for x = 10 and again for x = 1."""
    told = []

    def then(tag, task, result):
        told.append((tag, result["value"]))
        if tag == "x4":
            return [("x10", toy(10)), ("x1 again", toy(1))]
        return []

    runner.run_dynamic([(f"x{x}", toy(x)) for x in (1, 2, 3, 4)], then, cost=lambda t: t.x)
    return told


def test_longest_first_follow_ups_at_once_and_one_run_per_task(tmp_path):
    ex = Recorder(slots=1)
    runner = Runner(Cache(tmp_path), ex)
    told = sweep(runner)
    # 4 first (the longest); its follow-up 10 outranks 3 and 2; x = 1 runs once for two tags
    assert [t.x for t in ex.started] == [4, 10, 3, 2, 1]
    assert runner.computed == 5 and runner.cached == 0
    assert sorted(told) == sorted([("x1", 2), ("x2", 4), ("x3", 6), ("x4", 8), ("x10", 20),
                                   ("x1 again", 2)])


def test_a_rerun_reads_every_result_from_the_cache_and_tells_every_tag(tmp_path):
    sweep(Runner(Cache(tmp_path), Recorder(slots=2)))
    ex = Recorder(slots=2)
    runner = Runner(Cache(tmp_path), ex)
    told = sweep(runner)
    assert ex.started == [] and runner.computed == 0 and runner.cached == 6
    assert sorted(told) == sorted([("x1", 2), ("x2", 4), ("x3", 6), ("x4", 8), ("x10", 20),
                                   ("x1 again", 2)])


def test_a_task_that_is_not_a_task_is_refused_by_name(tmp_path):
    runner = Runner(Cache(tmp_path), Recorder(slots=1))
    with pytest.raises(FieldError, match="task: expected an object with identity"):
        runner.run([{"kind": "toy", "x": 1}])
    with pytest.raises(FieldError, match="got 'dict'"):
        runner.run_dynamic([("x", {"kind": "toy", "x": 1})], lambda *a: [])
