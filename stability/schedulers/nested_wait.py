"""Nested WAIT, Ao, Luo, Simchi-Levi and Wang's policy for unknown output lengths.

The scheduler never reads a request's output length: a prompt reveals it only by finishing. Decode
progress is cut into ``m`` segments by boundaries ``l'_1 < ... < l'_m`` (``l'_0 = 0``): segment 1
holds the prefill and decodes ``1..l'_1``, segment ``k >= 2`` decodes ``l'_{k-1} + 1..l'_k``. A
resident prompt that has run ``g`` decodes holds ``L^P + g`` KV tokens and its next decode
``g + 1`` belongs to the segment that covers it. Each segment has an entry queue: segment 1's is
the external queue of prompts not yet prefilled (no KV); segment ``k >= 2``'s is the *boundary
queue* of resident prompts that have run exactly ``l'_{k-1}`` decodes without finishing (they keep
their KV). The other resident prompts of a segment are its interior. Each segment ``k`` has a
threshold ``n_k``. Their Algorithm Nested WAIT, at each decision with the server idle:

1. find the largest ``K`` such that every segment ``k <= K`` has at least ``n_k`` prompts in its
   entry queue; if there is none (segment 1 has fewer than ``n_1`` waiting), the server waits for
   more arrivals (resident prompts keep their KV);
2. otherwise one *prefix batch* advances segments ``1..K``: ``min(n_k, Q)`` prompts of each entry
   queue (the oldest waiting of segment 1, prefilled whole; the boundary prompts of the earliest
   arrival for ``k >= 2``, each running its first decode of the segment) and every interior prompt
   of those segments (one decode each). Segments after ``K`` are paused.

Every interior stage of segment ``k`` then holds at most ``n_k`` prompts (each is filled by one
batch's ``min(n_k, Q)`` entries and advanced whole), so the threshold-sized segment batches hold at
most ``M^pi = sum_k n_k sum_{s in segment k} (l + s)`` KV tokens (:func:`threshold_memory`; their
Eq. nested_wait_memory), and the boundary queues hold the rest: their Theorem
nested_wait_heavy_traffic asks the cache for a safety buffer logarithmic in the horizon on top of
``M^pi`` (:mod:`paper_checks.other_papers_wait`).

Options (:class:`Options`): ``boundaries`` ``(l'_1, ..., l'_m)`` and ``thresholds`` ``(n_1, ...,
n_m)`` (or ``"16,64"`` and ``"10,6"`` on the command line); the memory options of
:func:`stability.sim.memory.kv_config` (``memory``, ``block_size=1``, ``kv_blocks``,
``gpu_memory_utilization=0.9``; no watermark). Without them (the default) there is one segment of
threshold 1 and the memory is off; ``memory`` defaults to on exactly when boundaries are given.

Where the library decides what the paper leaves open:

* memory: the policy is the theorem's *no-overflow dynamics*. It never evicts and never holds a
  batch back for memory; with the memory on, its KV is counted against the cache, and a batch
  that needs more blocks than are free runs anyway: the run's KV peak (``kv["peak"]`` of its GPU
  run) then exceeds the cache's blocks, the overflow whose probability the theorem bounds by
  ``delta``;
* the stages of a segment ``k >= 2``: the pseudo-code lists ``S_k = {l'_{k-1}, ..., l'_k}`` (the
  boundary stage and ``delta_k`` interior ones) and moves a prompt on after each; read as one decode
  per listed stage, a prompt would run ``delta_k + 1`` decodes in the segment and one more than its
  output. The library follows Eq. nested_wait_memory, whose segment ``k`` has ``delta_k = l'_k -
  l'_{k-1}`` stages ``s = l'_{k-1} + 1..l'_k``: a boundary prompt chosen runs decode ``l'_{k-1} + 1``
  (the paper charges it "to the first interior stage"), and the interior prompts the decodes after;
* the last segment is open: a prompt that has run ``l'_m`` decodes without finishing keeps
  decoding in segment ``m`` (the paper's outputs are at most ``l'_m``; ``M^pi`` assumes so);
* the paper's arrivals never end; once the last request has arrived (``st.seen`` has reached the
  requests loaded), every segment with a prompt in its entry queue or interior is advanced (its
  entries ``min(n_k, Q)``), so that a finite run drains. Under join-shortest-queue routing requests
  are loaded one arrival at a time, so that rule applies between arrivals too: use random or
  round-robin routing;
* a batch lasts Eq. 7 of its contents (their ``d_0 + d_1 sum (l + s)`` is the cost model's business,
  as for :mod:`stability.schedulers.wait`).

References
----------
Ao, Luo, Simchi-Levi, Wang, "Optimizing LLM Inference: Fluid-Guided Online Scheduling with Memory
Constraints", arXiv:2504.11320, Section 5 "Scheduling with Unknown Output Lengths: The Nested WAIT
Algorithm" (Algorithm Nested WAIT, Eqs. nested_wait_thresholds, nested_wait_memory,
nested_wait_memory_total, Theorem nested_wait_heavy_traffic); the authors' LaTeX source, repository
Luoxiaogan/vidur_or, ``papers/unknown_type.tex`` at commit
1ebb920a5fd0bbc025db1d531b8193b0afddd804.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.schedulers.wait import sort_decodes
from stability.sim.engine import DONE, idle, log_has_room, pop_waiting, running, see_arrivals, stop_code
from stability.sim.memory import VLLM, KvConfig, append, kv_config, kv_setup
from stability.sim.mixed import add_chunk, admit, mixed_arrays, run_mixed
from stability.sim.recording import move_decode_forward
from stability.sim.registry import options_record
from theory.cost import CostModel
from theory.errors import FieldError

NAME = "nested_wait"


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    b: np.ndarray  # l'_k per segment (float64, integral; the last segment is open)
    n: np.ndarray  # n_k per segment
    kv: KvConfig  # KV memory (stability.sim.memory), counted, never enforced


@dataclass(frozen=True)
class Options:
    """Nested WAIT's options (module docstring).

    Attributes
    ----------
    boundaries
        ``(l'_1, ..., l'_m)``: the segment boundaries in decodes, strictly increasing positive
        integers, or ``"16,64"``; None: one open segment.
    thresholds
        ``(n_1, ..., n_m)``: one positive integer per segment, or ``"10,6"``; None with
        ``boundaries`` None.
    memory
        Count the KV memory (None: on exactly when boundaries are given).
    gpu_memory_utilization, block_size, kv_blocks
        As :func:`stability.sim.memory.kv_config`.
    """

    boundaries: object = None
    thresholds: object = None
    memory: bool | None = None
    gpu_memory_utilization: float = 0.9
    block_size: int = 1
    kv_blocks: int | None = None


@dataclass(frozen=True)
class Params:
    """The segment boundaries and thresholds (none: one open segment of threshold 1) and the KV
    memory."""

    boundaries: tuple
    thresholds: tuple
    kv: KvConfig

    def record(self) -> Record:
        """The compiled loop's options."""
        b = np.array(self.boundaries or (np.inf,), dtype=np.float64)
        n = np.array(self.thresholds or (1,), dtype=np.float64)
        return Record(b, n, self.kv)


def _counts(name: str, value, expected: str) -> tuple:
    if isinstance(value, str):
        try:
            value = [int(x) for x in value.split(",")]
        except ValueError:
            raise FieldError(name, value, expected) from None
    try:
        items = tuple(value)
    except TypeError:
        raise FieldError(name, value, expected) from None
    ok = bool(items) and all(
        isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1 for x in items
    )
    if not ok:
        raise FieldError(name, value, expected)
    return tuple(int(x) for x in items)


def segments(boundaries, thresholds) -> tuple[tuple, tuple]:
    """Validate the boundaries ``l'_k`` and thresholds ``n_k`` (module docstring): two equally long
    tuples of positive integers, the boundaries strictly increasing."""
    b = _counts(
        "boundaries",
        boundaries,
        "a non-empty tuple of strictly increasing positive integers "
        "l'_1 < ... < l'_m, or the string '16,64' "
        "(--option nested_wait.boundaries=16,64)",
    )
    if any(x >= y for x, y in pairwise(b)):
        raise FieldError("boundaries", boundaries, "strictly increasing decode counts l'_1 < ... < l'_m")
    n = _counts(
        "thresholds",
        thresholds,
        f"{len(b)} positive integers n_1, ..., n_m, one per segment, "
        "or the string '10,6' (--option nested_wait.thresholds=10,6)",
    )
    if len(n) != len(b):
        raise FieldError("thresholds", thresholds, f"{len(b)} thresholds, one per segment of boundaries {b}")
    return b, n


def threshold_memory(boundaries, thresholds, prompt: int, block_size: int = 1) -> int:
    """``M^pi`` of their Eq. nested_wait_memory in blocks: ``sum_k n_k sum_{s in segment k}
    ceil((l + s) / block_size)`` with ``s = 0..l'_1`` in segment 1 (the prefill holds ``l``) and
    ``s = l'_{k-1} + 1..l'_k`` in segment ``k``, for a common prompt length ``l``; with one-token
    blocks ``sum_k n_k (l + s_bar_k) delta_k``."""
    b, n = segments(boundaries, thresholds)
    lows = (0, *(x + 1 for x in b[:-1]))
    return int(
        sum(
            k * sum(-(-(prompt + s) // block_size) for s in range(lo, hi + 1))
            for k, lo, hi in zip(n, lows, b, strict=True)
        )
    )


def make_params(cm: CostModel, **options) -> Params:
    """Validate the options (:class:`Options`); the memory is counted, never enforced (module
    docstring)."""
    o = options_record(Options, options, NAME)
    if (o.boundaries is None) != (o.thresholds is None):
        given = "boundaries" if o.thresholds is None else "thresholds"
        raise FieldError(
            given,
            getattr(o, given),
            "given together with "
            f"{'thresholds' if given == 'boundaries' else 'boundaries'} (one n_k per segment "
            "l'_k), or neither",
        )
    if o.boundaries is None:
        if o.memory:
            raise FieldError(
                "memory",
                o.memory,
                "False or None without boundaries (one open segment has "
                "no threshold memory M^pi; pass boundaries and thresholds)",
            )
        return Params((), (), kv_config(cm, False, o.gpu_memory_utilization, o.block_size, 0.0, o.kv_blocks))
    b, n = segments(o.boundaries, o.thresholds)
    kv = kv_config(
        cm, True if o.memory is None else o.memory, o.gpu_memory_utilization, o.block_size, 0.0, o.kv_blocks
    )
    return Params(b, n, kv)


@njit(cache=True)
def _segment(b, s):
    """The segment (0-based) of decode ``s >= 1``: the first whose boundary covers it, the last
    (open) one beyond every boundary."""
    m = b.size
    for k in range(m):
        if s <= b[k]:
            return k
    return m - 1


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm Nested WAIT, one prefix batch per decision (module docstring)."""
    mixed_arrays(st)
    kv_setup(st, prm.kv, VLLM)
    m = prm.n.size
    while running(st, t_stop):
        see_arrivals(st)
        nd = st.nd
        seg = np.empty(nd, dtype=np.int64)
        entry = np.zeros(nd, dtype=np.bool_)
        queue = np.zeros(m, dtype=np.int64)  # entry queues: segment 0's is the waiting queue
        work = np.zeros(m, dtype=np.int64)
        queue[0] = st.wq_len
        work[0] = st.wq_len
        for q in range(nd):
            g = st.d_pos[q] - st.pl[st.d_id[q]] - 1  # decodes run: the output length stays unread
            k = _segment(prm.b, g + 1)
            seg[q] = k
            if k > 0 and g == prm.b[k - 1]:
                entry[q] = True
                queue[k] += 1
            work[k] += 1
        drain = st.seen >= st.n_loaded  # no arrival left: every segment with work advances
        chosen = np.zeros(m, dtype=np.bool_)
        for k in range(m):
            if drain:
                chosen[k] = work[k] > 0
            elif queue[k] >= prm.n[k]:
                chosen[k] = True
            else:
                break
        any_segment = False
        for k in range(m):
            any_segment = any_segment or chosen[k]
        if not any_segment:  # drained (nothing left), or waiting for an arrival
            if idle(st, t_stop):
                continue
            return DONE
        take = min(int(prm.n[0]), st.wq_len) if chosen[0] else 0
        if not log_has_room(st, 1, nd + take):
            break
        for _ in range(take):  # the oldest waiting prompts are prefilled whole
            j = pop_waiting(st)
            admit(st, j)
            add_chunk(st, j, st.pl[j])
        # the decodes: every interior prompt of a chosen segment and the n_k boundary prompts of
        # the earliest arrival (the decode set is in request order), moved to the front
        left = prm.n.copy()
        na = 0
        for q in range(nd):
            k = seg[q]
            if not chosen[k]:
                continue
            if entry[q]:
                if left[k] < 1:
                    continue
                left[k] -= 1
            move_decode_forward(st, q, na)
            na += 1
        for q in range(na):
            append(st, st.d_id[q], st.d_pos[q])  # counted, never refused: the peak shows overflow
        run_mixed(st, ct, na)
        sort_decodes(st)
    return stop_code(st)
