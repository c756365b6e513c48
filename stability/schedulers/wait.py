"""WAIT (Waiting for Accumulated Inference Threshold), Ao, Luo, Simchi-Levi and Wang's policy for
known output lengths.

Prompts belong to types ``j`` with prefill length ``l_j`` and ``l'_j`` decode iterations; each type
has a threshold ``n_j``. A prompt waiting outside the GPU is at stage 0 (no KV); a resident one at
decode stage ``s`` holds ``l_j + s`` KV tokens. Their Algorithm WAIT, at each decision with the
server idle:

1. type ``j`` is *eligible* when at least ``n_j`` of its prompts wait at stage 0;
2. if no type is eligible, the server waits for more arrivals (resident prompts keep their KV);
3. otherwise one batch advances, for every eligible type and every stage ``s``, ``min(n_j,
   n_js)`` of its prompts: ``n_j`` new prompts (the oldest waiting of the type) are prefilled
   whole and every resident prompt of the type decodes once. Prompts of types not eligible do not
   advance.

Every stage of type ``j`` then holds at most ``n_j`` prompts (each is filled by one batch's
``n_j`` admissions), so the KV in use never exceeds ``M^pi = sum_j n_j sum_{s=0}^{l'_j} (l_j + s)``
(in blocks: ``sum_j n_j sum_s ceil((l_j + s) / block)``): :func:`make_params` refuses thresholds
whose ``M^pi`` exceeds the KV cache, and WAIT never evicts. Thresholds from the fluid model:
:func:`theory.fluid_kv.wait_thresholds`.

Options: ``thresholds``, ``((l_j, l'_j, n_j), ...)`` (or ``"l:l':n,..."`` on the command line): one
triple per type, matched to a request by its ``(L^P, L^D)``; the memory options of
:func:`stability.sim.memory.kv_config` (``memory``, ``block_size=1``, ``kv_blocks``,
``gpu_memory_utilization=0.9``; no watermark: WAIT's memory bound is exact). Without thresholds
(the default) every ``(L^P, L^D)`` is a type of threshold 1 and the memory is off (nothing bounds
the KV of types not declared); ``memory`` defaults to on exactly when thresholds are given.

Where the library decides what the paper leaves open:

* a request whose ``(L^P, L^D)`` is none of the types is rejected at arrival (reason
  ``REJ_NO_TYPE`` of :mod:`stability.sim.memory`);
* the paper's arrivals never end; once the last request has arrived (``st.seen`` has reached the
  requests loaded), every type with a prompt waiting or resident is eligible and admits ``min(n_j,
  waiting)``, so that a finite run drains. Under join-shortest-queue routing requests are loaded
  one arrival at a time, so that rule applies between arrivals too: use random or round-robin
  routing for WAIT;
* a batch lasts Eq. 7 of its contents (the paper's ``d_0 + d_1 sum (l + s)`` is the cost model's
  business: :mod:`paper_checks.other_papers_wait` maps one onto the other).

Every batch is built and run on its own (no event skipping): the paper's policy changes only at
arrivals and batch ends, and a full-threshold batch is the unit of its analysis.

References
----------
Ao, Luo, Simchi-Levi, Wang, "Optimizing LLM Inference: Fluid-Guided Online Scheduling with Memory
Constraints", arXiv:2504.11320, Section 4 (Algorithm WAIT, Eq. wait_thresholds); the authors'
LaTeX source, repository Luoxiaogan/vidur_or, ``papers/known_type.tex`` at commit
1ebb920a5fd0bbc025db1d531b8193b0afddd804.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.sim.engine import (
    DONE,
    idle,
    log_has_room,
    pop_waiting,
    push_waiting_front,
    running,
    see_arrivals,
    stop_code,
)
from stability.sim.memory import REJ_NO_TYPE, VLLM, KvConfig, append, can_append, kv_config, kv_setup, reject
from stability.sim.mixed import add_chunk, admit, mixed_arrays, run_mixed
from stability.sim.recording import move_decode, move_decode_forward
from theory.cost import CostModel
from theory.errors import FieldError

NAME = "wait"


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    lp: np.ndarray  # l_j per type (float64, integral); empty: one type per (L^P, L^D) seen
    ld: np.ndarray  # l'_j per type
    n: np.ndarray  # n_j per type
    kv: KvConfig  # KV memory (stability.sim.memory)


@dataclass(frozen=True)
class Params:
    """The types ``(l_j, l'_j, n_j)`` (none: one type per ``(L^P, L^D)``, threshold 1) and the KV
    memory."""

    thresholds: tuple
    kv: KvConfig

    def record(self) -> Record:
        """The compiled loop's options."""
        t = np.array(self.thresholds, dtype=np.float64).reshape(-1, 3)
        return Record(t[:, 0].copy(), t[:, 1].copy(), t[:, 2].copy(), self.kv)


def threshold_memory(thresholds, block_size: int) -> int:
    """``M^pi`` in blocks: ``sum_j n_j sum_{s=0}^{l'_j} ceil((l_j + s) / block_size)``."""
    return int(sum(n * sum(-(-(lp + s) // block_size) for s in range(ld + 1)) for lp, ld, n in thresholds))


def _triples(thresholds) -> tuple:
    expected = ("a non-empty tuple of (L_P, L_D, n) triples of positive integers, distinct (L_P, L_D), "
                "or the string 'L_P:L_D:n,L_P:L_D:n' (--option wait.thresholds=16:64:6)")
    if isinstance(thresholds, str):
        try:
            thresholds = [tuple(int(x) for x in item.split(":")) for item in thresholds.split(",")]
        except ValueError:
            raise FieldError("thresholds", thresholds, expected) from None
    try:
        triples = tuple(tuple(t) for t in thresholds)
    except TypeError:
        raise FieldError("thresholds", thresholds, expected) from None

    def count(x) -> bool:
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1

    ok = bool(triples) and all(len(t) == 3 and all(count(x) for x in t) for t in triples)
    if not ok or len({t[:2] for t in triples}) != len(triples):
        raise FieldError("thresholds", thresholds, expected)
    return tuple(tuple(int(x) for x in t) for t in triples)


def make_params(cm: CostModel, thresholds=None, memory: bool | None = None,
                gpu_memory_utilization: float = 0.9, block_size: int = 1,
                kv_blocks: int | None = None) -> Params:
    """Validate the types and thresholds (the fluid model's for the arrival rates at hand) and the
    KV memory, whose ``M^pi`` they must fit (module docstring). Without thresholds every
    ``(L^P, L^D)`` is a type of threshold 1 and the memory is off (``memory=None``: on exactly
    when thresholds are given; no ``M^pi`` bounds the memory of unknown types)."""
    if thresholds is None:
        if memory:
            raise FieldError("memory", memory, "False or None without thresholds (no M^pi bounds the KV "
                             "of types not given; pass (L_P, L_D, n) triples, e.g. from "
                             "theory.fluid_kv.wait_thresholds)")
        return Params((), kv_config(cm, False, gpu_memory_utilization, block_size, 0.0, kv_blocks))
    triples = _triples(thresholds)
    kv = kv_config(cm, True if memory is None else memory, gpu_memory_utilization, block_size, 0.0, kv_blocks)
    need = threshold_memory(triples, kv.block_size)
    if kv.on and need > kv.blocks:
        raise FieldError("thresholds", thresholds,
                         f"thresholds whose memory M^pi fits the KV cache: they need {need} blocks of "
                         f"{kv.block_size} tokens, the cache holds {kv.blocks}")
    return Params(triples, kv)


@njit(cache=True)
def _class_of(prm, keys, n_keys, lp, ld):
    """The type of a request of lengths ``(lp, ld)``: an index into ``keys`` (rows ``l, l', n``),
    -1 if it has none. Without types (``prm.n`` empty) a new ``(lp, ld)`` becomes a type of
    threshold 1; ``n_keys[0]`` counts the rows."""
    for t in range(n_keys[0]):
        if keys[t, 0] == lp and keys[t, 1] == ld:
            return t
    if prm.n.size > 0:
        return -1
    t = n_keys[0]
    keys[t, 0], keys[t, 1], keys[t, 2] = lp, ld, 1
    n_keys[0] = t + 1
    return t


@njit(cache=True)
def sort_decodes(st):
    """Insertion sort of the decode set by request index (the order the engine keeps)."""
    for q in range(1, st.nd):
        j, p, r = st.d_id[q], st.d_pos[q], st.d_rem[q]
        k = q
        while k > 0 and st.d_id[k - 1] > j:
            move_decode(st, k, k - 1)
            k -= 1
        st.d_id[k] = j
        st.d_pos[k] = p
        st.d_rem[k] = r


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Algorithm WAIT, one batch per decision (module docstring)."""
    mixed_arrays(st)
    kv_setup(st, prm.kv, VLLM)
    while running(st, t_stop):
        see_arrivals(st)
        k = st.wq_len
        rows = prm.n.size if prm.n.size > 0 else k + st.nd
        keys = np.zeros((max(rows, 1), 3), dtype=np.int64)
        n_keys = np.zeros(1, dtype=np.int64)
        for t in range(prm.n.size):
            keys[t, 0], keys[t, 1], keys[t, 2] = int(prm.lp[t]), int(prm.ld[t]), int(prm.n[t])
        n_keys[0] = prm.n.size
        # the waiting queue, oldest first: reject prompts of no type, count the rest per type
        kept = np.empty(k, dtype=np.int64)
        kept_t = np.empty(k, dtype=np.int64)
        nk = 0
        for _ in range(k):
            j = pop_waiting(st)
            t = _class_of(prm, keys, n_keys, st.lp[j], st.ld[j])
            if t < 0:
                reject(st, j, REJ_NO_TYPE)
                continue
            kept[nk] = j
            kept_t[nk] = t
            nk += 1
        d_t = np.empty(st.nd, dtype=np.int64)
        for q in range(st.nd):
            d_t[q] = _class_of(prm, keys, n_keys, st.lp[st.d_id[q]], st.ld[st.d_id[q]])
        m = n_keys[0]
        waiting = np.zeros(m, dtype=np.int64)
        resident = np.zeros(m, dtype=np.int64)
        for q in range(nk):
            waiting[kept_t[q]] += 1
        for q in range(st.nd):
            resident[d_t[q]] += 1
        drain = st.seen >= st.n_loaded  # no arrival left: every type with work is eligible
        eligible = np.zeros(m, dtype=np.bool_)
        take = np.zeros(m, dtype=np.int64)
        any_type = False
        for t in range(m):
            eligible[t] = waiting[t] >= keys[t, 2] or (drain and (waiting[t] > 0 or resident[t] > 0))
            take[t] = min(keys[t, 2], waiting[t]) if eligible[t] else 0
            any_type = any_type or eligible[t]
        if not any_type or not log_has_room(st, 1, st.nd + nk):
            for q in range(nk - 1, -1, -1):
                push_waiting_front(st, kept[q])
            if not any_type and nk == 0 and st.nd == 0 and drain:
                return DONE
            if not any_type and idle(st, t_stop):
                continue
            if not any_type:
                return DONE
            break
        # the oldest take[t] waiting prompts of each eligible type are prefilled whole
        rest = 0
        for q in range(nk):
            j, t = kept[q], kept_t[q]
            if take[t] > 0:
                take[t] -= 1
                admit(st, j)
                add_chunk(st, j, st.pl[j])
            else:
                kept[rest] = j
                rest += 1
        for q in range(rest - 1, -1, -1):
            push_waiting_front(st, kept[q])
        # every resident prompt of an eligible type decodes: those first, in request order
        na = 0
        for q in range(st.nd):
            if eligible[d_t[q]]:
                move_decode_forward(st, q, na)
                na += 1
        for q in range(na):
            if not can_append(st, st.d_id[q], st.d_pos[q]):  # M^pi fits (make_params): a bug
                raise RuntimeError("wait: KV memory over capacity under thresholds that fit it")
            append(st, st.d_id[q], st.d_pos[q])
        run_mixed(st, ct, na)
        sort_decodes(st)
    return stop_code(st)
