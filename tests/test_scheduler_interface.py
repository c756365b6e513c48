"""The scheduler interface (:mod:`stability.sim.registry`): what a policy module defines, and that
adding one is one module plus one registry line.

A toy policy is written here as a module string, put on ``sys.path``, registered with one line
(``register("toy", "...")``) and run through ``simulate(Scenario(scheduler="toy", ...))``; its
finish times are checked against a direct computation of the same policy with
:func:`theory.cost.T_batch` (Eq. 7) batch by batch. The engine core must not depend on policies,
no loop reads its options by position, and a second process loads every loop from numba's cache.
"""

import ast
import os
import subprocess
import sys
import textwrap
from dataclasses import is_dataclass
from pathlib import Path

import numpy as np
import pytest

import stability.sim.registry as registry
from stability.sim.registry import get_scheduler, missing_names, register, scheduler_names
from stability.sim.simulate import Scenario, cost_model_of, simulate
from theory.cost import Batch, T_batch
from theory.errors import FieldError

ROOT = Path(__file__).resolve().parents[1]

TOY = '''
"""Toy policy: rounds of up to ``b`` waiting requests, FCFS, each prefilled alone (its whole
prompt in chunks of ``chunk``, back to back), then one DI for every started request per batch
until all of them have finished; then the next round."""

from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import (BIG, DONE, decode_run, idle, n_waiting, pop_waiting,
                                  prefill_whole, push_decode, push_waiting_front, running,
                                  see_arrivals, stop_code)
from theory.errors import require_positive_int

NAME = "toy"
PREFILL, DECODE = 0, 1


class Record(NamedTuple):
    b: int


@dataclass(frozen=True)
class Params:
    b: int
    chunk: int

    def record(self):
        return Record(int(self.b))


def make_params(cm, b=1, chunk=None):
    return Params(require_positive_int("b", b), require_positive_int("chunk", chunk or cm.t_lcm))


@njit
def loop(st, ct, prm, t_stop):
    while running(st, t_stop):
        see_arrivals(st)
        if st.mode == PREFILL:
            if st.rc < prm.b and n_waiting(st) > 0:
                j = pop_waiting(st)
                if not prefill_whole(st, ct, j):
                    push_waiting_front(st, j)
                    break
                push_decode(st, j)
                st.rc += 1
            elif st.rc == 0:
                if not idle(st, t_stop):
                    return DONE
            else:
                st.mode = DECODE
        elif st.nd > 0:
            if decode_run(st, ct, st.nd, False, t_stop, BIG) < 0:
                break
        else:
            st.mode = PREFILL
            st.rc = 0
    return stop_code(st)
'''


def toy_finish_times(cm, arrival, L_P, L_D, b: int, chunk: int) -> np.ndarray:
    """The toy policy computed directly: every batch's duration is Eq. 7 of its contents."""
    n = len(arrival)
    finish = np.full(n, np.nan)
    t, nxt = 0.0, 0  # clock; next request not started (FCFS)
    while nxt < n:
        started = []
        while len(started) < b:
            if nxt < n and arrival[nxt] <= t:
                L = int(L_P[nxt])
                for i in range(1, L + 1, chunk):  # the whole prompt alone, chunk by chunk
                    t += T_batch(cm, Batch.of([(i, min(chunk, L - i + 1))]))
                started.append(nxt)
                nxt += 1
            elif not started:
                t = max(t, float(arrival[nxt]))  # idle until the next arrival
            else:
                break
        pos = {j: int(L_P[j]) + 1 for j in started}
        rem = {j: int(L_D[j]) for j in started}
        while pos:  # one DI for each started request per batch until all have finished
            t += T_batch(cm, Batch.of(decode=list(pos.values())))
            for j in list(pos):
                pos[j] += 1
                rem[j] -= 1
                if rem[j] == 0:
                    finish[j] = t
                    del pos[j], rem[j]
    return finish


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module on sys.path, and a registry to which it can be added and then forgotten."""
    (tmp_path / "llmq_toy_policy.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_MODULES", dict(registry._MODULES))
    yield "llmq_toy_policy"
    sys.modules.pop("llmq_toy_policy", None)


@pytest.mark.parametrize(("b", "chunk"), [(1, None), (3, 64)])
def test_a_toy_scheduler_is_one_module_and_one_line(toy, b, chunk):
    register("toy", toy)  # the one registry line
    assert "toy" in scheduler_names()
    options = (("b", b),) + ((("chunk", chunk),) if chunk else ())
    sc = Scenario(workload="uniform:1-700,1-30", scheduler="toy", options=options, n_requests=40,
                  load=0.9, seed=b)
    res = simulate(sc)
    req = res.requests
    cm = cost_model_of(sc)
    expected = toy_finish_times(cm, req["arrival"], req["L_P"], req["L_D"], b,
                                chunk or cm.t_lcm)
    assert np.all(np.isfinite(expected))
    assert np.allclose(req["t_finish"], expected, rtol=1e-9, atol=0)


def test_a_module_missing_part_of_the_interface_is_refused(tmp_path, monkeypatch):
    (tmp_path / "llmq_toy_broken.py").write_text("NAME = 'broken'\n\nclass Params:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_MODULES", dict(registry._MODULES))
    register("broken", "llmq_toy_broken")
    with pytest.raises(FieldError) as err:
        get_scheduler("broken")
    assert err.value.value == ["make_params", "loop", "Params.record"]
    sys.modules.pop("llmq_toy_broken", None)


@pytest.mark.parametrize("name", scheduler_names())
def test_every_scheduler_defines_the_interface(name):
    """Each registered module: no missing name, a frozen Params whose record() is an instance of
    a NamedTuple class defined at module level, and nothing beyond the documented interface."""
    from stability.sim.simulate import make_params

    sch = get_scheduler(name)
    assert missing_names(sch) == []
    assert not hasattr(sch, "USES_CYCLES")
    assert is_dataclass(sch.Params) and sch.Params.__dataclass_params__.frozen
    cm = cost_model_of(Scenario())
    rec = make_params(sch, cm, {}).record()
    cls = type(rec)
    assert issubclass(cls, tuple) and hasattr(cls, "_fields")
    assert getattr(sys.modules[cls.__module__], cls.__qualname__) is cls  # module level
    loops = ("prefill_loop", "decode_loop") if getattr(sch, "DISAGGREGATED", False) else ("loop",)
    for loop in loops:
        assert hasattr(getattr(sch, loop), "py_func")  # compiled


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


@pytest.mark.parametrize("core", ["engine", "kernels", "structs"])
def test_the_engine_core_imports_no_policy(core):
    imports = _imports(ROOT / "stability" / "sim" / f"{core}.py")
    assert imports, core
    assert not any(m.startswith("stability.schedulers") for m in imports), imports
    assert not any(m in ("stability.sim.mixed", "stability.sim.memory") for m in imports), imports


def test_no_option_is_read_by_position():
    """Options are read by name: no subscript of ``prm`` in the simulator or the schedulers."""
    positional = "prm" + "["  # spelled in two parts so that this file does not match itself
    sources = [*(ROOT / "stability").rglob("*.py"), ROOT / "docs" / "howto" / "add-scheduler.md"]
    assert len(sources) > 10
    hits = [f"{p.relative_to(ROOT)}:{k + 1}" for p in sources
            for k, line in enumerate(p.read_text().splitlines()) if positional in line]
    assert hits == []


CACHED = """
from stability.sim.registry import get_scheduler, scheduler_names
from stability.sim.simulate import Scenario, simulate
misses = 0
for name in scheduler_names():
    simulate(Scenario(pad=True, n_requests=50, scheduler=name, r=2 if name == "distserve" else 1))
    sch = get_scheduler(name)
    for loop in ("loop", "prefill_loop", "decode_loop"):
        if hasattr(sch, loop):
            misses += sum(getattr(sch, loop).stats.cache_misses.values())
print(misses)
"""


def test_a_second_process_loads_every_loop_from_the_cache():
    """The records are module-level NamedTuple classes, so numba's on-disk cache keeps working:
    after one process has run every scheduler, another compiles none of their loops."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", CACHED], capture_output=True, text=True,
                           cwd=ROOT, env=env, check=True) for _ in range(2)]
    misses = [int(r.stdout.strip().splitlines()[-1]) for r in runs]
    assert misses[1] == 0, misses
