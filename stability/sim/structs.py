"""Mutable compiled records (numba structrefs) for the engine's state and cost tables.

A numba tuple of arrays pays a reference-count round trip for every member a called function
does not touch (about 9 ns each, per call); a structref is passed as one pointer. Fields are
declared once here with their types; instances are created by cached compiled factories in
:mod:`stability.sim.kernels` and :mod:`stability.sim.engine`, and read back from Python by compiled
exporters, so no per-process compilation is needed.
"""

from __future__ import annotations

from numba import types
from numba.experimental import structref

I64 = types.int64
F64 = types.float64
IA = types.int64[::1]
FA = types.float64[::1]
FA2 = types.float64[:, ::1]
IA2 = types.int64[:, ::1]


@structref.register
class CostsType(types.StructRef):
    """numba type of the cost tables (the structref ``Costs``)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class StateType(types.StructRef):
    """numba type of a GPU's simulation state (the structref ``State``)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Costs(structref.StructRefProxy):
    """Python handle of a compiled cost-table record (see :mod:`stability.sim.kernels`)."""


class State(structref.StructRefProxy):
    """Python handle of a compiled GPU state record (see :mod:`stability.sim.engine`)."""


structref.define_boxing(CostsType, Costs)
structref.define_boxing(StateType, State)

COSTS = CostsType([
    ("t_row", IA), ("t_col", IA), ("t_red", IA),  # GeMM tiles, t* first
    ("mu", FA),  # tile pairs per second per SM (Eq. 2)
    ("inv_mu_lin", FA),  # 1 / mu_Lin(t): linear time of one column block (Eq. 4)
    ("S", FA),  # S(k) = sum_{i<=k} T^{D,SA}(i) (Eq. 5)
    ("lin", FA),  # T_Lin(tau) for small tau (Eq. 4)
    ("pre_time", FA),  # whole-prefill time by L^P in chunks of `chunk` (Algorithm 1)
    ("s", F64), ("N", F64), ("d_pre", I64), ("mu_nLin", F64), ("overhead", F64),
    ("lin_ideal", F64),  # linear time per token at t*, no padding
    ("psa_ideal", F64),  # prefill-attention time per unit of (i + c - 1) c at t*, no padding
    ("chunk", I64),
    # terms beyond Eq. 2 (theory.terms), read only past the `lin` table and by t_psa:
    ("lin_kind", I64),  # 0: Eq. 4; 1: staircase law; 2: LinearTerms
    ("law_c", F64), ("law_a", F64), ("law_b0", I64),
    ("g_count", IA), ("g_rows", IA2), ("g_red", IA2),  # linear GeMMs: count, tiles per tile index
    ("g_wbytes", FA), ("g_abytes", FA), ("floor_bw", F64),  # memory floor (floor_bw 0: off)
    ("tok_s", F64), ("batch_s", F64),  # per-token and per-batch linear additions
    ("waves", I64), ("att", I64),  # wave quantization on; attention priced
    ("lm_out", F64),  # vocab projection per scheduled request row (lm_head)
])

STATE = StateType([
    # requests (this GPU's, in arrival order)
    ("arr", FA), ("lp", IA), ("ld", IA), ("cls", IA),
    ("t_start", FA), ("t_first", FA), ("t_finish", FA), ("last_emit", FA), ("tbt_max", FA),
    # queues: waiting (ring buffer) and decode phase (id, next position, remaining decodes)
    ("wq", IA), ("d_id", IA), ("d_pos", IA), ("d_rem", IA),
    # prefill progress (mixed-batch schedulers): target length (L^P, or prompt + generated
    # tokens after a recompute preemption), tokens prefilled, decodes left after the prefill
    ("pl", IA), ("pg", IA), ("dr", IA),
    # admitted requests in their prefill phase (sorted by arrival index) and the batch being built
    ("p_id", IA), ("bp_j", IA), ("bp_c", IA),
    # shortest-prefill-first waiting heap of keys pl << 32 | j
    ("hq", IA),
    # KV memory per request: blocks held, preemptions, rejection reason (stability.sim.memory)
    ("blk", IA), ("npre", IA), ("rej", IA),
    # TBT record per class: histogram and (count, sum, max); per-class TBT SLO and, per request,
    # the gaps above its class's SLO
    ("tbt_hist", FA2), ("tbt_stat", FA2), ("tbt_slo", FA), ("n_viol", IA),
    # SLO-aware scheduling (stability.schedulers.slai): each decode's last schedulable time C
    ("lst", FA),
    # cycles (Algorithms 1-2): start, end, X[c], started, completed
    ("cyc_start", FA), ("cyc_end", FA), ("cyc_x", IA), ("cyc_started", IA), ("cyc_done", IA),
    # batch log: one row per batch, one item per iteration
    ("b_start", FA), ("b_dur", FA), ("b_tau", IA), ("b_nd", IA), ("b_np", IA), ("b_waste", FA),
    ("it_batch", IA), ("it_req", IA), ("it_i", IA), ("it_c", IA),
    # scalars
    ("clock", F64), ("busy", F64), ("wasted", F64),
    ("n_loaded", I64), ("seen", I64), ("wq_head", I64), ("wq_len", I64),
    ("nd", I64), ("na", I64), ("rc", I64), ("mode", I64),
    ("n_done", I64), ("n_batch", I64), ("n_event", I64), ("n_tokens", I64), ("n_dec_tok", I64),
    ("n_pre_tok", I64), ("n_not_opt", I64), ("n_cyc", I64), ("cyc_open", I64),
    ("n_log", I64), ("n_item", I64), ("need_grow", I64), ("detail", I64), ("log_on", I64),
    ("last_done", I64),  # completions at the end of the latest event (join-shortest-queue)
    ("np", I64), ("nbp", I64), ("hq_len", I64),
    # KV memory (blocks): on, total, free, watermark, block size, append rule, peak use, set up
    ("kv_on", I64), ("kv_total", I64), ("kv_free", I64), ("kv_wm", I64), ("kv_bs", I64),
    ("kv_rule", I64), ("kv_peak", I64), ("kv_ready", I64),
    # preemptions, rejections, tokens whose KV a preemption discarded, recompute prefills done
    ("n_preempt", I64), ("n_rej", I64), ("n_lost", I64), ("n_recomp", I64),
])
