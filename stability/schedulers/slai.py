"""SLAI, the SLO-aware LLM inference scheduler (Section 6), as the authors' system schedules.

A fork of Sarathi-Serve (:mod:`stability.schedulers.sarathi`) that defers decodes until their TBT
SLO makes them urgent. Each decode-phase request j holds its *last schedulable time* (Eq. 8)

    C_j = e_j + TBT_j - delta * t_bar_batch,

with ``e_j`` the end of the batch that produced its latest token (its previous decode, or its last
prompt chunk), ``TBT_j`` its class's TBT SLO and ``t_bar_batch`` the mean duration of every batch
run so far (cumulative, not windowed: ``SLAIScheduler.set_last_batch_times``). A batch built at
time ``t`` (the end of the previous batch) takes, under a token budget ``tau_budget`` (decodes
count one token, chunks their length):

1. *critical* decodes (``t >= C_j``) in increasing (C_j, arrival), at most ``beta`` of them;
2. the chunks of already admitted prefills, ``min(remaining prompt, budget left)``
   (non-preemptive: a started prefill goes before any new one);
3. new prefills from the waiting queue — FCFS, shortest prefill first (SPF), or SPF with the
   classes in priority order (paying users first, Appendix F.2) — each with the chunk
   ``min(prompt, budget left)``, stopping at the first that cannot allocate its whole prompt's KV
   blocks (plus the 1% watermark) or when ``alpha`` requests hold KV memory;
4. *non-critical* decodes in increasing (C_j, arrival) while budget remains and the batch holds
   fewer than ``beta`` decodes.

After the batch, every request that emitted a token gets a new C_j from the batch's end; a deferred
decode keeps its old C_j, so it turns critical later. ``delta`` is fixed, or *dynamic*: 10 when at
least 96% of the KV blocks are in use after the batch, 5 otherwise (Section 7).

Choices, following the authors' code (agrimUT/SLAI @ 5098a7a,
``sarathi/core/scheduler/slai_scheduler.py``) where the paper is silent:

* ``beta`` caps critical and non-critical decodes together; critical ones are capped at ``beta``
  too, and a critical decode beyond the cap waits for the next batch;
* KV pressure (a decode needs ``free > 0`` blocks, Sarathi-Serve's ``can_append_slot``): a critical
  decode preempts, by recompute, the newest partial prefill, then itself; a non-critical decode
  preempts only itself (the authors' list of partial prefills is empty by step 4). A preempted
  request rejoins the waiting queue at its front (FCFS) or by its new prefill target (SPF), and its
  recompute prefill emits its next token;
* the dynamic delta reads the KV use once per batch, after the batch's completions freed their
  blocks (the authors' post-processing at the start of the next ``schedule``); without the memory
  model the use is 0, so delta is 5;
* the time ``t`` of a decision is the end of the previous batch (the simulator has no scheduling
  overhead), or an arrival after an idle spell; idle spells add no batch to ``t_bar_batch``
  (the authors' engine returns before timing an empty batch);
* ties: C_j ties by arrival index (the authors' heap key (C, arrival)); SPF ties by arrival index
  (the authors' stable sort keeps the queue's order, which differs only for several requests of
  one length preempted in one iteration);
* a prompt longer than ``max_model_len`` or whose blocks never fit is rejected (the authors' loop
  ``continue``\\ s without removing it); arrival, memory and cap checks block the queue as there;
* at most one admitted prefill is partial at any time (only the last admission of a batch can be
  cut by the budget, and a partial prefill runs before any admission), so the order of the
  authors' ``paused_prefills`` list never matters.

Options (the authors' ``default.yml`` and Section 7): ``token_budget`` 512, ``max_num_seqs`` (alpha)
128, ``limit_total_decodes`` (beta) 128, ``order`` ``"spf"`` (or ``"fcfs"``, ``"spf_priority"``),
``dynamic`` True (delta 5 below / 10 at or above ``memory_limit`` 0.96 of the KV blocks), ``delta``
10 when not dynamic, ``tbt_slo`` one SLO per class (0.2 s, the authors' default, for a single
class; :func:`stability.sim.simulate.simulate` passes the scenario's classes), ``max_model_len`` 8192
and the memory options of :func:`stability.sim.memory.kv_config` (on, ``gpu_memory_utilization`` 0.9,
the authors' benchmark default).

A run of decode-only batches is one event when every decode runs in each of them (at most
``min(beta, budget)`` decodes, no partial prefill, a waiting head that cannot be admitted, no
preemption in the run), cut at an arrival when one could be admitted: C_j then does not change
which decodes run, and every decode gets its new C_j from the run's last batch. So is a run of
batches that hold only budget-sized chunks of a long prompt while every decode is deferred
(they start before the smallest C_j; fast mode): no C_j changes, no KV block is taken, and
arrivals cannot join a batch whose budget the chunk spends. So, with one class, is a run of
batches of every decode, all critical, and a budget-filling chunk of the partial prefill (fast
mode), accounted batch by batch: each decode gets the same C_j after each batch.

References
----------
Bari, Hegde, de Veciana (2025), Section 6, Eq. 8, Section 7, Appendix F.2; agrimUT/SLAI
``sarathi/core/scheduler/slai_scheduler.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from stability.sim.engine import BIG, DONE, count_batch, decode_run, idle, log_has_room, running, stop_code
from stability.sim.kernels import ceil_udiv, lin_waste, psa_waste, t_fixed, t_psa
from stability.sim.memory import (
    SARATHI,
    KvConfig,
    ample_blocks,
    append,
    can_append,
    growth,
    kv_config,
    kv_setup,
    min_remaining,
    slack_below,
)
from stability.sim.mixed import (
    add_chunk,
    admission_would_act,
    admit_waiting,
    mixed_arrays,
    preempt_decode,
    preempt_prefill,
    run_mixed,
    w_len,
    w_refresh,
)
from stability.sim.registry import options_record
from theory.cost import CostModel
from theory.errors import FieldError, require_positive_int

NAME = "slai"
ORDERS = ("fcfs", "spf", "spf_priority")  # codes 0, 1, 2 as in stability.sim.mixed


class Record(NamedTuple):
    """What the compiled loop reads, by name."""

    budget: int  # token budget per batch (decodes count one token each)
    alpha: int  # max_num_seqs: requests holding KV memory
    beta: int  # limit_total_decodes: decodes per batch
    order: int  # waiting order: index in ORDERS (the ``spf`` code of stability.sim.mixed)
    limit: int  # max_model_len: longer prompts are rejected
    dynamic: bool  # delta by the KV use (delta_low / delta_high at memory_limit), else delta
    delta: float
    delta_low: float
    delta_high: float
    memory_limit: float
    kv: KvConfig  # KV memory (stability.sim.memory)
    tbt_slo: np.ndarray  # TBT SLO per class, seconds (float64)


@dataclass(frozen=True)
class Params:
    """Budget, caps alpha and beta, prefill order, offset delta (fixed or dynamic), per-class TBT
    SLOs, prompt limit, memory."""

    token_budget: int
    max_num_seqs: int
    limit_total_decodes: int
    order: str
    dynamic: bool
    delta: float
    delta_low: float
    delta_high: float
    memory_limit: float
    tbt_slo: tuple[float, ...]
    max_model_len: int
    kv: KvConfig

    def record(self) -> Record:
        """The compiled loop's options."""
        return Record(int(self.token_budget), int(self.max_num_seqs), int(self.limit_total_decodes),
                      ORDERS.index(self.order), int(self.max_model_len), bool(self.dynamic),
                      float(self.delta), float(self.delta_low), float(self.delta_high),
                      float(self.memory_limit), self.kv, np.array(self.tbt_slo, dtype=np.float64))


def _nonneg(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise FieldError(name, value, "a number >= 0")
    return float(value)


@dataclass(frozen=True)
class Options:
    """SLAI's options (``--option slai.NAME=VALUE``); defaults are the authors' (``default.yml``)
    and Section 7's.

    Attributes
    ----------
    token_budget : int
        The token budget of a batch.
    max_num_seqs : int
        The most sequences running at once.
    limit_total_decodes : int
        The most decodes in a batch.
    order : str
        The order of the waiting prompts, one of :data:`ORDERS`.
    dynamic : bool
        Whether the offset delta of Eq. 8 follows the KV use (``delta_low``, ``delta_high``
        above ``memory_limit``) or stays ``delta``.
    delta, delta_low, delta_high : float
        The offsets of Eq. 8, in mean batch times.
    memory_limit : float
        The fraction of the KV blocks in use above which the dynamic offset is ``delta_high``.
    tbt_slo : float or tuple of float
        One TBT SLO per request class, seconds.
    max_model_len : int
        The longest request (prompt plus decodes) admitted, tokens.
    memory, gpu_memory_utilization, block_size, watermark, kv_blocks
        The KV memory (:func:`stability.sim.memory.kv_config`).
    """

    token_budget: int = 512
    max_num_seqs: int = 128
    limit_total_decodes: int = 128
    order: str = "spf"
    dynamic: bool = True
    delta: float = 10.0
    delta_low: float = 5.0
    delta_high: float = 10.0
    memory_limit: float = 0.96
    tbt_slo: float | tuple = (0.2,)
    max_model_len: int = 8192
    memory: bool = True
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    watermark: float = 0.01
    kv_blocks: int | None = None


def make_params(cm: CostModel, **options) -> Params:
    """SLAI's parameters; defaults are the authors' (``default.yml``) and Section 7's. The options
    are the fields of :class:`Options`."""
    o = options_record(Options, options, NAME)
    order, dynamic, tbt_slo, memory_limit = o.order, o.dynamic, o.tbt_slo, o.memory_limit
    if order not in ORDERS:
        raise FieldError("order", order, "one of " + ", ".join(ORDERS))
    if not isinstance(dynamic, bool):
        raise FieldError("dynamic", dynamic, "True or False")
    if isinstance(tbt_slo, (int, float)):
        tbt_slo = (tbt_slo,)
    slo = tuple(float(x) for x in tbt_slo)
    if not slo or not all(x > 0 for x in slo):
        raise FieldError("tbt_slo", tbt_slo, "one positive TBT SLO (seconds) per class")
    if not (isinstance(memory_limit, (int, float)) and 0 <= memory_limit <= 1):
        raise FieldError("memory_limit", memory_limit, "a fraction of the KV blocks in [0, 1]")
    return Params(require_positive_int("token_budget", o.token_budget),
                  require_positive_int("max_num_seqs", o.max_num_seqs),
                  require_positive_int("limit_total_decodes", o.limit_total_decodes), order, dynamic,
                  _nonneg("delta", o.delta), _nonneg("delta_low", o.delta_low),
                  _nonneg("delta_high", o.delta_high), float(memory_limit), slo,
                  require_positive_int("max_model_len", o.max_model_len),
                  kv_config(cm, o.memory, o.gpu_memory_utilization, o.block_size, o.watermark, o.kv_blocks))


# --- Eq. 8 and the decode order ------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def offset(st, dynamic, delta, delta_low, delta_high, memory_limit):
    """delta for the decodes of the batch that just ended: fixed, or by the KV use after it."""
    if not dynamic:
        return delta
    used = (st.kv_total - st.kv_free) / st.kv_total if st.kv_on else 0.0
    return delta_high if used >= memory_limit else delta_low


@njit(cache=True)
def last_schedulable_time(e, tbt, delta, t_bar):
    """C = e + TBT - delta * t_bar_batch (Eq. 8).

    Implements Eq. 8.
    """
    return e + tbt - delta * t_bar


@njit(cache=True)
def _before(c_a, a, c_b, b):
    """Whether the decode entry of request a (C = c_a) goes before that of request b (C = c_b):
    by (C, arrival index)."""
    return c_a < c_b or (c_a == c_b and a < b)


@njit(cache=True, error_model="numpy")
def _new_times(st, prm):
    """Post-processing of a batch: every decode whose C is unset (nan: it just emitted a token)
    gets C from the batch's end, then the decode set is put back in increasing (C, arrival
    index) order.

    The entries whose C was already set keep their order (they were sorted after the previous
    batch and removals keep order), so the new ones are set aside (``s_*``), sorted among
    themselves by insertion and merged in from the back: O(|D| + new^2) instead of an insertion
    sort's O(|D| new). Keys are distinct (arrival indices are), so the order is the one any sort
    gives.
    """
    t_bar = st.busy / st.n_batch
    d = offset(st, prm.dynamic, prm.delta, prm.delta_low, prm.delta_high, prm.memory_limit)
    now = st.clock
    nd = st.nd
    # local references: the arrays' addresses stay in registers across the passes
    d_id, d_pos, d_rem, lst, cls = st.d_id, st.d_pos, st.d_rem, st.lst, st.cls
    s_id, s_pos, s_rem, tbt_slo = st.s_id, st.s_pos, st.s_rem, prm.tbt_slo
    n_old = 0
    n_new = 0
    for q in range(nd):
        j = d_id[q]
        pos = d_pos[q]
        rem = d_rem[q]
        if math.isnan(lst[j]):
            c = last_schedulable_time(now, tbt_slo[cls[j]], d, t_bar)
            lst[j] = c
            k = n_new  # insertion into the sorted new entries
            while k > 0 and _before(c, j, lst[s_id[k - 1]], s_id[k - 1]):
                s_id[k] = s_id[k - 1]
                s_pos[k] = s_pos[k - 1]
                s_rem[k] = s_rem[k - 1]
                k -= 1
            s_id[k] = j
            s_pos[k] = pos
            s_rem[k] = rem
            n_new += 1
        else:
            d_id[n_old] = j
            d_pos[n_old] = pos
            d_rem[n_old] = rem
            n_old += 1
    a = n_old - 1  # merge from the back: the larger of the two remaining tails goes last
    w = nd - 1
    for b in range(n_new - 1, -1, -1):
        j = s_id[b]
        c = lst[j]
        while a >= 0 and _before(c, j, lst[d_id[a]], d_id[a]):
            d_id[w] = d_id[a]
            d_pos[w] = d_pos[a]
            d_rem[w] = d_rem[a]
            a -= 1
            w -= 1
        d_id[w] = j
        d_pos[w] = s_pos[b]
        d_rem[w] = s_rem[b]
        w -= 1


@njit(cache=True, error_model="numpy")
def _all_new_times(st, prm):
    """:func:`_new_times` after a run in which every decode entry emitted tokens: each gets C
    from the run's end, and the set is insertion-sorted in place by (C, arrival index) (the
    entries of one class share C, so the order is mostly the arrival order they already have)."""
    t_bar = st.busy / st.n_batch
    d = offset(st, prm.dynamic, prm.delta, prm.delta_low, prm.delta_high, prm.memory_limit)
    now = st.clock
    d_id, d_pos, d_rem, lst, cls, tbt_slo = st.d_id, st.d_pos, st.d_rem, st.lst, st.cls, prm.tbt_slo
    for q in range(st.nd):
        j = d_id[q]
        pos = d_pos[q]
        rem = d_rem[q]
        c = last_schedulable_time(now, tbt_slo[cls[j]], d, t_bar)
        lst[j] = c
        k = q
        while k > 0 and _before(c, j, lst[d_id[k - 1]], d_id[k - 1]):
            d_id[k] = d_id[k - 1]
            d_pos[k] = d_pos[k - 1]
            d_rem[k] = d_rem[k - 1]
            k -= 1
        d_id[k] = j
        d_pos[k] = pos
        d_rem[k] = rem


# --- batch construction --------------------------------------------------------------------------


@njit(cache=True)
def _reserve(st, q, mode, prefill_victims):
    """KV slot for decode entry q: while no block is free, preempt the newest partial prefill
    (if allowed) or else the decode itself. Returns whether the decode keeps its place."""
    j = st.d_id[q]
    p = st.d_pos[q]
    while not can_append(st, j, p):
        if prefill_victims and st.np > 0:
            preempt_prefill(st, st.np - 1, mode)
        else:
            preempt_decode(st, q, mode)
            return False
    append(st, j, p)
    return True


@njit(cache=True)
def _clean_run(st, k_hi):
    """Largest k <= k_hi such that k decode-only batches of every decode preempt nothing whatever
    their order: the blocks they take stay below the free ones."""
    if st.kv_on == 0:
        return k_hi
    k_hi = min_remaining(st, st.nd, k_hi)
    if ample_blocks(st, st.nd, k_hi):
        return k_hi
    counted = slack_below(st, st.nd)
    lo, hi = 0, k_hi
    while lo < hi:
        k = (lo + hi + 1) // 2
        if growth(st, counted, st.nd, k) < st.kv_free:
            lo = k
        else:
            hi = k - 1
    return lo


@njit(cache=True)
def _build_and_run(st, ct, prm, budget, alpha, beta, mode, limit):
    """Steps 1-4 of Section 6 for one batch, then run it. Returns whether anything changed."""
    now = st.clock
    changes = st.n_preempt + st.n_rej
    tokens = 0
    na = 0  # the chosen decodes are the first na entries (the set is sorted by C)
    # A decode's KV slot is had at once when memory is off or a block is free (Sarathi-Serve's
    # can_append_slot), tested in the loops themselves: a compiled helper reading the state's
    # arrays across a branch pays an atomic reference count per call. Else _reserve preempts.
    while na < st.nd and na < beta and tokens < budget and now >= st.lst[st.d_id[na]]:
        if st.kv_on == 0 or st.kv_free > 0:                      # 1. critical decodes
            if st.kv_on and ceil_udiv(st.d_pos[na], st.kv_bs) > st.blk[st.d_id[na]]:
                append(st, st.d_id[na], st.d_pos[na])
        elif not _reserve(st, na, mode, True):
            continue
        na += 1
        tokens += 1
    for b in range(st.np):                                        # 2. started prefills
        if tokens >= budget:
            break
        j = st.p_id[b]
        c = min(st.pl[j] - st.pg[j], budget - tokens)
        add_chunk(st, j, c)
        tokens += c
    first = st.nbp
    tokens = admit_waiting(st, mode, limit, alpha, budget, tokens, True, True)  # 3. new prefills
    for b in range(first, st.nbp):
        st.lst[st.bp_j[b]] = np.nan  # C is set when its prefill emits a token
    while na < st.nd and na < beta and tokens < budget:           # 4. non-critical decodes
        if st.kv_on == 0 or st.kv_free > 0:
            if st.kv_on and ceil_udiv(st.d_pos[na], st.kv_bs) > st.blk[st.d_id[na]]:
                append(st, st.d_id[na], st.d_pos[na])
        elif not _reserve(st, na, mode, False):
            continue
        na += 1
        tokens += 1
    if tokens == 0:
        return st.n_preempt + st.n_rej > changes
    for q in range(na):
        st.lst[st.d_id[q]] = np.nan
    run_mixed(st, ct, na)
    _new_times(st, prm)
    return True


@njit(cache=True)
def _deferred_chunks(st, ct, budget, t_stop):
    """Run, as one event, the batches that each hold only the next ``budget`` tokens of the
    partial prefill (P's first entry) while more than a budget of its prompt is left and every
    decode is deferred: each batch starts before the smallest C (the decode set is sorted by C),
    so step 1 takes no decode, step 2 spends the whole budget on the chunk, and steps 3-4 find
    no budget left (arrivals are only seen after the run; they change nothing it holds, and no
    KV block is taken). No C changes: no decode runs and no prefill ends. Fast mode only (no
    batch-log row). Stops before the first batch starting at or after ``t_stop``.

    Each batch is accounted exactly as :func:`stability.sim.mixed.run_mixed` accounts it (Eq. 7
    with no decode, the clock, busy time and waste added batch by batch, in the same floating
    point order), so the decisions after the run see the same clock and mean batch time
    ``t_bar``. Returns how many batches ran.
    """
    j = st.p_id[0]
    first_c = st.lst[st.d_id[0]] if st.nd > 0 else math.inf
    pl = st.pl[j]
    pg = st.pg[j]
    t = st.clock
    if math.isnan(st.t_start[j]):
        st.t_start[j] = t
    fixed = t_fixed(ct, budget)
    lw = lin_waste(ct, budget)
    memo = st.psa_memo
    k = 0
    while pl - pg > budget and t < first_c and t < t_stop:
        i = pg + 1
        a = memo[i]
        if math.isnan(a):
            a = t_psa(ct, i, budget)
            memo[i] = a
        dur = fixed + a
        wasted = 0.0
        wasted += psa_waste(ct, i, budget, a)
        wasted += lw
        st.busy += dur
        st.wasted += wasted
        if wasted > 1e-12 * dur:
            st.n_not_opt += 1
        t = t + dur
        pg += budget
        k += 1
    if k == 0:
        return 0
    st.n_event += 1
    st.n_batch += k
    st.n_tokens += k * budget
    st.n_pre_tok += k * budget
    st.clock = t
    st.pg[j] = pg
    st.last_done = 0
    return k


@njit(cache=True, error_model="numpy")
def _critical_run(st, ct, prm, budget, t_stop):
    """Run, as one event, the batches that each hold every decode, all critical, and the chunk
    ``budget - |D|`` of the partial prefill (P's only entry), as :func:`_build_and_run` and
    :func:`_new_times` build and account them one at a time (one class: every decode gets the same
    C after each batch, so a set in arrival order keeps it; fast mode). It stops before a batch
    that would start at or after ``t_stop`` or before that C, complete a decode or the prompt, or
    find no free KV block (the free blocks exceed what the run can take, ``ample_blocks``);
    arrivals are seen after it (step 3 finds the budget spent). Returns the batches run."""
    nd, j0, now = st.nd, st.p_id[0], st.clock
    c = budget - nd
    d_id, d_pos, d_rem, lst = st.d_id, st.d_pos, st.d_rem, st.lst
    for q in range(nd):  # all critical, in arrival order
        if lst[d_id[q]] > now or (q > 0 and d_id[q] <= d_id[q - 1]):
            return 0
    k_hi = min(min_remaining(st, nd, BIG) - 1, (st.pl[j0] - st.pg[j0] - 1) // c)
    if k_hi < 1 or (st.kv_on and not ample_blocks(st, nd, k_hi)):
        return 0
    S2, off, kv_on, kv_bs, blk = ct.S2, ct.m_off, st.kv_on, st.kv_bs, st.blk
    tau = nd + c
    fixed, lw = t_fixed(ct, tau), lin_waste(ct, tau)
    pg = st.pg[j0]
    if math.isnan(st.t_start[j0]):
        st.t_start[j0] = now
    t, cs, k = now, now, 0
    while k < k_hi and t < t_stop and t >= cs:
        att = 0.0  # run_mixed's sums, in its order
        for q in range(nd):
            j = d_id[q]
            p = d_pos[q] + k
            if kv_on and ceil_udiv(p, kv_bs) > blk[j]:
                append(st, j, p)
            att += S2[p + off] - S2[p - 1 + off]
        a = t_psa(ct, pg + 1, c)
        dur = fixed + ct.N * att + (0.0 + a)
        count_batch(st, tau, nd, c, dur, (0.0 + psa_waste(ct, pg + 1, c, a)) + lw)
        t = t + dur
        pg += c
        k += 1
        d = offset(st, prm.dynamic, prm.delta, prm.delta_low, prm.delta_high, prm.memory_limit)
        cs = last_schedulable_time(t, prm.tbt_slo[0], d, st.busy / st.n_batch)
    for q in range(nd):
        d_pos[q] += k
        d_rem[q] -= k
        lst[d_id[q]] = cs
    st.pg[j0] = pg
    st.clock = t
    st.n_event += 1
    st.last_done = 0
    return k


@njit(cache=True)
def loop(st, ct, prm, t_stop):
    """SLAI's iteration (Section 6), one batch per decision (decode-only runs as one event)."""
    budget, alpha, beta = prm.budget, prm.alpha, prm.beta
    mode, limit = prm.order, prm.limit
    mixed_arrays(st)
    kv_setup(st, prm.kv, SARATHI)
    if st.lst.size < st.d_id.size:
        st.lst = np.full(st.d_id.size, np.inf)
    if st.s_id.size < st.d_id.size:  # room to set new decodes aside (_new_times)
        st.s_id = np.zeros(st.d_id.size, dtype=np.int64)
        st.s_pos = np.zeros(st.d_id.size, dtype=np.int64)
        st.s_rem = np.zeros(st.d_id.size, dtype=np.int64)
    if st.psa_c != budget or st.psa_memo.size != ct.S.size:  # chunks reach positions < S.size
        st.psa_memo = np.full(ct.S.size, np.nan)
        st.psa_c = budget
    while running(st, t_stop):
        w_refresh(st, mode)
        if st.nd == 0 and st.np == 0 and w_len(st, mode) == 0:
            if not idle(st, t_stop):
                return DONE
            continue
        if (st.np == 0 and 0 < st.nd <= min(beta, budget)
                and not admission_would_act(st, mode, limit, alpha)):
            k = _clean_run(st, BIG)
            if k > 0:
                wake = mode != 0 or w_len(st, mode) == 0
                if decode_run(st, ct, st.nd, wake, t_stop, k) < 0:
                    break
                _all_new_times(st, prm)
                continue
        if (st.np > 0 and st.detail == 0 and st.pl[st.p_id[0]] - st.pg[st.p_id[0]] > budget
                and (st.nd == 0 or st.clock < st.lst[st.d_id[0]])):
            _deferred_chunks(st, ct, budget, t_stop)  # at least one batch: clock < t_stop here
            continue
        if (st.np == 1 and 0 < st.nd <= beta and st.nd < budget and st.detail == 0
                and prm.tbt_slo.size == 1 and st.clock >= st.lst[st.d_id[st.nd - 1]]
                and _critical_run(st, ct, prm, budget, t_stop) > 0):
            continue
        if not log_has_room(st, 1, st.nd + st.np + min(w_len(st, mode), budget)):
            break
        if not _build_and_run(st, ct, prm, budget, alpha, beta, mode, limit):
            raise RuntimeError("slai: nothing could be scheduled (a KV accounting bug)")
    return stop_code(st)
