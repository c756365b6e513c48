"""Sarathi-Serve as the real system schedules (stall-free batching with chunked prefills).

Follows ``sarathi/core/scheduler/sarathi_scheduler.py`` (microsoft/sarathi-serve @ 96f9911,
``SarathiScheduler._schedule``, with the shared machinery of ``base_scheduler.py`` and
``block_space_manager/``). Each batch:

1. (phase 1a) every running request that has finished its prefill gets one decode, oldest arrival
   first, never capped by the token budget; before each, ``can_append_slot`` (a free block must
   exist) and, while it fails, the newest running request not reached yet is preempted by
   recompute, or the request itself when none is left;
2. (phase 1b) partial prefills already admitted (their blocks are held) get chunks
   ``min(remaining prompt, budget - tokens)``, oldest first;
3. (phase 2) waiting requests are admitted from the head, FCFS with head-of-line blocking: stop
   at the first that cannot allocate its whole prompt's blocks (plus the 1% watermark), when
   ``max_num_seqs`` requests are running, or when the budget is spent; each admitted request
   gets the chunk ``min(prompt, budget - tokens)``.

Options: ``chunk_size`` (the token budget, default 512), ``max_num_seqs`` (128), ``max_chunk``
(largest prefill chunk, default the budget: an addition for :mod:`stability.attain`),
``order`` (``"fcfs"``, or ``"spf"``: admission picks the shortest prefill among the arrived
waiting requests, ties by arrival, still blocking at the first that does not fit, as SLAI's
SPF mode does), ``max_model_len`` (prompt limit, 8192 as Table 1's length cap) and the memory
options of :func:`stability.sim.memory.kv_config` (``memory=True``,
``gpu_memory_utilization=0.8`` as Sarathi-Serve's default).

Choices where the real system differs from a model or is silent:

* a chunk ``budget - tokens`` that would be negative (more decodes than the budget) is 0, as in
  Vidur (Sarathi-Serve does not clamp it; with its defaults, 128 sequences and 512 tokens, it
  cannot happen);
* a request whose blocks exceed what an empty GPU admits is rejected (vLLM's NEVER) instead of
  blocking the queue forever as Sarathi-Serve would; one longer than ``max_model_len`` is
  ignored as Sarathi-Serve does;
* pipeline parallelism is 1 (every running request is schedulable each iteration);
* ties in arrival time are broken by arrival index (Sarathi-Serve's stable sort keeps the
  previous iteration's order).

A run of decode-only batches is one event (``decode_run``) while nothing could join it: no
partial prefill with budget left and a waiting head that cannot be admitted (FCFS: that only
changes at a completion, memory only shrinks meanwhile), cut before the first batch that would
preempt (:func:`stability.sim.memory.clean_decode_batches`) and, when an arrival could be admitted,
at the first batch boundary after it. In fast mode, a run of batches in which every decode and
a chunk of the oldest partial prefill spend the whole budget is one event too
(:func:`stability.sim.mixed.chunk_run`): nothing can be admitted during it. Other batches are
built and run one at a time.

References
----------
Agrawal et al. (2024), Sarathi-Serve (OSDI); Bari, Hegde, de Veciana (2025), Section 5,
Appendix E.2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import BIG, DONE, decode_run, idle, log_has_room, running, stop_code
from stability.sim.memory import (
    SARATHI,
    KvConfig,
    clean_decode_batches,
    kv_config,
    kv_setup,
)
from stability.sim.mixed import (
    add_chunk,
    admission_would_act,
    admit_waiting,
    chunk_run,
    mixed_arrays,
    reserve_decodes,
    run_mixed,
    w_len,
    w_refresh,
)
from stability.sim.registry import options_record
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int

NAME = "sarathi"
ORDERS = ("fcfs", "spf")


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    budget: int  # token budget per batch (chunk_size; decodes count one token each)
    max_seqs: int  # max_num_seqs: requests holding KV memory (decoding or admitted)
    spf: bool  # admission order: shortest prefill first, else FCFS
    limit: int  # max_model_len: longer prompts are rejected
    kv: KvConfig  # KV memory (stability.sim.memory)
    max_chunk: int  # largest prefill chunk (the budget when not capped)


@dataclass(frozen=True)
class Params:
    """Token budget (chunk size), running-sequence cap, admission order, prompt limit, memory."""

    chunk_size: int
    max_num_seqs: int
    order: str
    max_model_len: int
    kv: KvConfig
    max_chunk: int | None = None

    def record(self) -> Record:
        """The compiled loop's options."""
        cap = self.chunk_size if self.max_chunk is None else min(self.max_chunk, self.chunk_size)
        return Record(int(self.chunk_size), int(self.max_num_seqs), self.order == "spf",
                      int(self.max_model_len), self.kv, int(cap))


@dataclass(frozen=True)
class Options:
    """Sarathi-Serve's options (``--option sarathi.NAME=VALUE``), with their defaults.

    Attributes
    ----------
    chunk_size : int
        The token budget of a batch (Sarathi-Serve's ``chunk_size``).
    max_num_seqs : int
        The most sequences running at once.
    order : str
        The order of the waiting queue, one of :data:`ORDERS`.
    max_model_len : int
        The longest request (prompt plus decodes) admitted, tokens.
    memory, gpu_memory_utilization, block_size, watermark, kv_blocks
        The KV memory (:func:`stability.sim.memory.kv_config`).
    max_chunk : int or None
        Not a Sarathi-Serve option: a cap on each prefill chunk while batches still fill to the
        budget (None: the budget).
    """

    chunk_size: int = 512
    max_num_seqs: int = 128
    order: str = "fcfs"
    max_model_len: int = 8192
    memory: bool = True
    gpu_memory_utilization: float = 0.8
    block_size: int = 16
    watermark: float = 0.01
    kv_blocks: int | None = None
    max_chunk: int | None = None


def make_params(cm: CostModel, **options) -> Params:
    """Sarathi-Serve's defaults (``sarathi/config/config.py``): chunk 512, 128 sequences, 80% of
    the GPU memory, blocks of 16 tokens, 1% watermark; ``max_chunk`` (not a Sarathi-Serve option,
    default: the budget) caps each prefill chunk while batches still fill to the budget, which the
    capacity-attaining policy of :mod:`stability.attain` needs when the budget is large. The
    options are the fields of :class:`Options`."""
    o = options_record(Options, options, NAME)
    if o.order not in ORDERS:
        raise FieldError("order", o.order, "one of " + ", ".join(ORDERS))
    return Params(require_positive_int("chunk_size", o.chunk_size),
                  require_positive_int("max_num_seqs", o.max_num_seqs), o.order,
                  require_positive_int("max_model_len", o.max_model_len),
                  kv_config(cm, o.memory, o.gpu_memory_utilization, o.block_size, o.watermark, o.kv_blocks),
                  None if o.max_chunk is None else require_positive_int("max_chunk", o.max_chunk))


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """Sarathi-Serve's iteration, one batch per decision (decode-only runs as one event)."""
    budget, max_seqs, spf, limit, cap = prm.budget, prm.max_seqs, prm.spf, prm.limit, prm.max_chunk
    mixed_arrays(st)
    kv_setup(st, prm.kv, SARATHI)
    while running(st, t_stop):
        w_refresh(st, spf)
        if st.nd == 0 and st.np == 0 and w_len(st, spf) == 0:
            if not idle(st, t_stop):
                return DONE
            continue
        if st.nd > 0 and (st.nd >= budget
                          or (st.np == 0 and not admission_would_act(st, spf, limit, max_seqs))):
            k = clean_decode_batches(st, st.nd, BIG)
            if k > 0:
                wake = st.nd < budget and (spf or w_len(st, spf) == 0)
                if decode_run(st, ct, st.nd, wake, t_stop, k) < 0:
                    break
                continue
        if (st.np > 0 and st.detail == 0 and st.nd < budget and budget - st.nd <= cap
                and st.pl[st.p_id[0]] - st.pg[st.p_id[0]] >= 2 * (budget - st.nd)):
            # a prompt whose next two chunks or more (not capped below the budget left) fill the
            # budget (a run is at least two batches)
            if chunk_run(st, ct, st.p_id[0], budget - st.nd, t_stop) >= 0:
                continue
        if not log_has_room(st, 1, st.nd + st.np + min(w_len(st, spf), budget)):
            break
        reserve_decodes(st, spf)                                  # phase 1a: decodes, preemption
        tokens = st.nd
        for q in range(st.np):                                    # phase 1b: partial prefills
            j = st.p_id[q]
            c = min(st.pl[j] - st.pg[j], budget - tokens)
            c = min(c, cap)
            if c > 0:
                add_chunk(st, j, c)
                tokens += c
        # phase 2: new prefills, chunk min(prompt, budget left)
        if cap >= budget:
            tokens = admit_waiting(st, spf, limit, max_seqs, budget, tokens, True, False)
        else:  # one admission per call, each chunk at most cap, until the budget is spent
            while True:
                spent = admit_waiting(st, spf, limit, max_seqs, min(budget, tokens + cap), tokens,
                                      True, False)
                if spent == tokens:
                    break
                tokens = spent
        if tokens > 0:
            run_mixed(st, ct, st.nd)
        elif w_len(st, spf) > 0:  # an empty GPU that cannot admit its head: a KV accounting bug
            raise RuntimeError("sarathi: the waiting head can never be admitted")
    return stop_code(st)
