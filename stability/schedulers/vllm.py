"""vLLM v0's default scheduler: prefill first, whole prompts, batches never mixed.

Follows ``vllm/core/scheduler.py`` ``Scheduler._schedule_default`` (vllm-project/vllm, v0 line,
e.g. commit 0dce2b2; chunked prefill off) and ``vllm/core/block_manager.py``. Each iteration:

1. waiting requests are admitted from the head, FCFS with head-of-line blocking, while the
   whole prompt's blocks can be allocated (``can_allocate``: free - blocks >= 1% watermark),
   the prompts admitted so far plus this one stay within ``max_num_batched_tokens`` and the
   running requests plus this one stay within ``max_num_seqs``; a request longer than the prompt
   limit ``min(max_model_len, max_num_batched_tokens)``, or whose blocks exceed what an empty GPU
   admits (``AllocStatus.NEVER``), is ignored (rejected with its reason);
2. if anything was admitted, the batch holds exactly those full prompts ``PI(R, 1, len)``;
3. otherwise the batch holds one decode for every running request, oldest first; a decode whose
   next token needs a new block when none is free preempts the newest running request not
   reached yet by recompute (to the front of the waiting queue), or itself.

Options: ``max_num_batched_tokens`` (vLLM: ``max(max_model_len, 2048)``; default 8192, Table 1's
cap on prompt + output), ``max_num_seqs`` (256), ``max_model_len`` (8192) and the memory options
of :func:`stability.sim.memory.kv_config` (``memory=True``, ``gpu_memory_utilization=0.9``).

Not modelled: swap preemption (vLLM uses it only for groups of several sequences, e.g. beam
search), ``delay_factor`` (0 by default), the priority policy. A recompute prompt (prompt +
generated tokens) is admitted like a new one.

A run of decode-only batches is one event while no waiting request can be admitted (FCFS: that
only changes at a completion), cut before the first batch that would preempt and, when the
queue is empty, at the first batch boundary after an arrival (which starts a prefill batch).

References
----------
Kwon et al. (2023), vLLM / PagedAttention; vllm-project/vllm ``vllm/core/scheduler.py`` (v0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from numba import njit

from stability.sim.engine import BIG, DONE, decode_run, idle, log_has_room, running, stop_code
from stability.sim.memory import VLLM, KvConfig, clean_decode_batches, kv_config, kv_setup
from stability.sim.mixed import admit_waiting, mixed_arrays, reserve_decodes, run_mixed, w_len, w_refresh
from stability.sim.registry import options_record
from theory.cost import CostModel
from theory.errors import require_positive_int

NAME = "vllm"


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    budget: int  # max_num_batched_tokens: prompt tokens of one prefill batch
    max_seqs: int  # max_num_seqs: requests holding KV memory
    max_model_len: int  # the prompt limit is min(max_model_len, budget)
    kv: KvConfig  # KV memory (stability.sim.memory)


@dataclass(frozen=True)
class Params:
    """Token budget of a prefill batch, running-sequence cap, model length, memory."""

    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    kv: KvConfig

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.max_num_batched_tokens), int(self.max_num_seqs),
                      int(self.max_model_len), self.kv)


@dataclass(frozen=True)
class Options:
    """vLLM v0's options (``--option vllm.NAME=VALUE``), with their defaults.

    Attributes
    ----------
    max_num_batched_tokens : int or None
        The token budget of a prefill batch (None: ``max(max_model_len, 2048)``).
    max_num_seqs : int
        The most sequences running at once.
    max_model_len : int
        The longest request (prompt plus decodes) admitted, tokens.
    memory, gpu_memory_utilization, block_size, watermark, kv_blocks
        The KV memory (:func:`stability.sim.memory.kv_config`).
    """

    max_num_batched_tokens: int | None = None
    max_num_seqs: int = 256
    max_model_len: int = 8192
    memory: bool = True
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    watermark: float = 0.01
    kv_blocks: int | None = None


def make_params(cm: CostModel, **options) -> Params:
    """vLLM v0's defaults (``EngineArgs``, ``SchedulerConfig``): 256 sequences, a token budget of
    ``max(max_model_len, 2048)``, 90% of the GPU memory, blocks of 16 tokens, 1% watermark. The
    options are the fields of :class:`Options`."""
    o = options_record(Options, options, NAME)
    max_model_len = require_positive_int("max_model_len", o.max_model_len)
    budget = max(max_model_len, 2048) if o.max_num_batched_tokens is None else o.max_num_batched_tokens
    return Params(require_positive_int("max_num_batched_tokens", budget),
                  require_positive_int("max_num_seqs", o.max_num_seqs), max_model_len,
                  kv_config(cm, o.memory, o.gpu_memory_utilization, o.block_size, o.watermark, o.kv_blocks))


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """vLLM v0 ``_schedule_default``, one batch per decision (decode-only runs as one event)."""
    budget, max_seqs = prm.budget, prm.max_seqs
    limit = min(prm.max_model_len, budget)
    mixed_arrays(st)
    kv_setup(st, prm.kv, VLLM)
    while running(st, t_stop):
        w_refresh(st, False)
        if w_len(st, False) > 0:                                  # 1. _schedule_prefills
            if not log_has_room(st, 1, min(w_len(st, False), max_seqs)):
                break
            # whole prompts while their tokens fit in the budget
            tokens = admit_waiting(st, False, limit, max_seqs, budget, 0, False, False)
            if tokens > 0:                                        # 2. a prefill-only batch
                run_mixed(st, ct, 0)
                continue
        if st.nd == 0:
            if w_len(st, False) > 0:  # an empty GPU that cannot admit its head: an accounting bug
                raise RuntimeError("vllm: the waiting head can never be admitted")
            if not idle(st, t_stop):
                return DONE
            continue
        k = clean_decode_batches(st, st.nd, BIG)                  # 3. _schedule_running
        if k > 0:
            if decode_run(st, ct, st.nd, w_len(st, False) == 0, t_stop, k) < 0:
                break
            continue
        if not log_has_room(st, 1, st.nd):
            break
        reserve_decodes(st, False)
        if st.nd > 0:
            run_mixed(st, ct, st.nd)
    return stop_code(st)
