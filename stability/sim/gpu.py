"""Run one scheduler on one GPU: build the tables and state, call the compiled loop, collect.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from weakref import WeakKeyDictionary

import numpy as np

from stability.sim import engine
from stability.sim.engine import Recording
from stability.sim.kernels import build_tables
from stability.sim.prefix_cache import set_prefixes
from stability.sim.structs import Costs
from theory.cost import CostModel

PROGRESS_SLICES = 200  # a progress-reporting run stops this many times in simulated time


@dataclass(frozen=True, eq=False)
class GpuRun:
    """What one GPU's simulation produced (per-request arrays in its arrival order)."""

    arrival: np.ndarray
    L_P: np.ndarray
    L_D: np.ndarray
    cls: np.ndarray
    t_start: np.ndarray
    t_first: np.ndarray
    t_finish: np.ndarray
    tbt_max: np.ndarray  # longest TBT gap per request (NaN unless detail)
    counters: dict
    clock: float
    busy: float
    wasted: float
    tbt_hist: np.ndarray
    tbt_stat: np.ndarray
    cycles: dict
    batches: dict | None
    items: dict | None
    tbt_viol: np.ndarray | None = None  # TBT gaps above the class's SLO, per request (NaN unless detail)
    reject: np.ndarray | None = None  # rejection reason per request (stability.sim.memory.REJ_*)
    preemptions: np.ndarray | None = None  # recompute preemptions per request
    kv: dict | None = None  # KV memory: on, blocks, free_end, peak, block_size
    rows: np.ndarray | None = None  # global request index of the items' request numbers, if not
    #                                 the requests with node == g (disaggregated prefill nodes)


# Cost tables built in this process, per cost model (held weakly) and prefill chunk: (positions, tables)
_KEPT_TABLES: WeakKeyDictionary[CostModel, dict[int | None, tuple[int, Costs]]] = WeakKeyDictionary()


def tables_for(cm: CostModel, L_P, L_D, chunk: int | None = None) -> Costs:
    """Cost tables covering every position the requests can reach.

    Tables are kept per cost model and chunk for the life of the process, and kept tables that
    cover at least the positions needed serve again: no entry of a table depends on how many
    positions it covers (``tests/test_kept_tables.py``), and the engine only reads them.
    """
    max_pos = int(np.max(np.asarray(L_P) + np.asarray(L_D), initial=1)) + 1
    kept = _KEPT_TABLES.setdefault(cm, {})
    covered, ct = kept.get(chunk, (-1, None))
    if covered < max_pos:
        ct = build_tables(cm, max_pos, chunk)
        kept[chunk] = (max_pos, ct)
    return ct


@dataclass(frozen=True)
class RunOptions(Recording):
    """How one GPU's run is set up: what it records (the fields of
    :class:`stability.sim.engine.Recording`), cost tables built beforehand (``tables``; None: built
    for the requests) and a progress callback (``progress(k)``, told of the requests completed
    since its previous call; the loop then runs in slices of simulated time, which costs nothing
    measurable: it is resumable) and the requests' prefix relation (``prefix``: each request's
    prefix parent, its index among this GPU's requests or -1, and the prompt tokens it shares with
    it; None: no request shares a prefix), which a prefix-caching policy reads
    (:mod:`stability.sim.prefix_cache`)."""

    tables: Costs | None = None
    progress: Callable[[int], None] | None = None
    prefix: tuple[np.ndarray, np.ndarray] | None = None


def run_gpu(cm: CostModel, scheduler: ModuleType, params, arrival, L_P, L_D, cls=None,
            options: RunOptions = RunOptions()) -> GpuRun:
    """Simulate ``scheduler`` with ``params`` on one GPU for requests arriving at ``arrival`` with
    lengths ``L_P, L_D`` and classes ``cls`` (default 0), set up as ``options`` says."""
    arrival = np.asarray(arrival, dtype=np.float64)
    if arrival.size and np.any(np.diff(arrival) < 0):
        raise ValueError("arrival times must be sorted")
    ct = options.tables
    if ct is None:
        ct = tables_for(cm, L_P, L_D, getattr(params, "chunk", None))
    st = engine.new_state(arrival, L_P, L_D, cls, options)
    if options.prefix is not None:
        parent, shared = (np.asarray(a, dtype=np.int64) for a in options.prefix)
        set_prefixes(st, parent, shared)
    prm = params.record()
    progress, detail, log = options.progress, options.detail, options.log
    if progress is None or arrival.size == 0:
        engine.run_loop(scheduler.loop, st, ct, prm, math.inf)
    else:
        step = max(arrival[-1], 1e-9) / PROGRESS_SLICES
        t_stop, reported = step, 0
        while True:
            finished = engine.run_loop(scheduler.loop, st, ct, prm, t_stop) == engine.DONE
            done = int(engine.export_counters(st)[1][-1])
            progress(done - reported)
            reported = done
            if finished:
                break
            if t_stop > arrival[-1]:  # draining after the last arrival: widen the slices
                step *= 2
            t_stop += step
    cls = np.zeros(arrival.size, dtype=np.int64) if cls is None else np.asarray(cls)
    return collect(st, arrival, np.asarray(L_P), np.asarray(L_D), cls, log and detail)


def collect(st, arrival, L_P, L_D, cls, with_log: bool) -> GpuRun:
    """Read a finished state back into a :class:`GpuRun` (its first ``len(arrival)`` requests)."""
    m = arrival.size
    t_start, t_first, t_finish, tbt_max = (a[:m].copy() for a in engine.export_requests(st))
    n_viol, detail = engine.export_violations(st)
    tbt_viol = n_viol[:m].copy()
    if not detail:  # no gap was recorded: say so rather than report zeros
        tbt_max, tbt_viol = np.full(m, np.nan), np.full(m, np.nan)
    floats, ints = engine.export_counters(st)
    start, end, x, started, done = engine.export_cycles(st)
    hist, stat = engine.export_tbt(st)
    rej, npre, kv_counts, kv = engine.export_kv(st)
    batches = items = None
    if with_log:
        (b_start, b_dur, b_tau, b_nd, b_np, b_waste), (i_b, i_r, i_i, i_c) = engine.export_log(st)
        batches = {"start": b_start, "duration": b_dur, "tokens": b_tau, "decodes": b_nd,
                   "prefills": b_np, "optimal": b_waste <= 1e-12 * b_dur,
                   "wasted_fraction": b_waste / b_dur}
        items = {"batch": i_b, "request": i_r, "i": i_i, "c": i_c}
    return GpuRun(arrival=arrival, L_P=L_P, L_D=L_D, cls=cls,
                  t_start=t_start, t_first=t_first, t_finish=t_finish, tbt_max=tbt_max,
                  counters={**dict(zip(engine.COUNTERS, map(int, ints), strict=True)),
                            **dict(zip(engine.KV_COUNTERS, map(int, kv_counts), strict=True))},
                  clock=float(floats[0]), busy=float(floats[1]), wasted=float(floats[2]),
                  tbt_hist=hist.copy(), tbt_stat=stat.copy(),
                  tbt_viol=tbt_viol,
                  cycles={"start": start, "end": end, "x": x, "started": started, "done": done},
                  batches=batches, items=items, reject=rej[:m].copy(), preemptions=npre[:m].copy(),
                  kv=dict(zip(("on", "blocks", "free_end", "peak", "block_size"), map(int, kv),
                              strict=True)))
