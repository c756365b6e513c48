"""Mutable compiled records (numba structrefs) for the engine's state and cost tables.

A numba tuple of arrays pays a reference-count round trip for every member a called function
does not touch, per call; a structref is passed as one pointer. Reference
counts are atomic and still cost a pair of atomic operations where they survive numba's pruning, which
removes a pair only within one basic block: a compiled function that reads a record's array in
a branch or loop header of its own, or hands a record to a callee that is not inlined, pays one
pair per call. So does one with an exception exit: under numba's default error model a
division or modulo checks its divisor for zero and raises, so hot helpers wrap a ring index by a
subtraction and divide by a divisor that cannot be zero under ``error_model="numpy"`` (found
with ``perf`` on JIT code built with frame pointers). Per-decode and per-batch code therefore
reads arrays in straight-line code or through one-line helpers and tests the common case inline
(``perf`` on the simulator found these pairs to be most of Sarathi-Serve's and SLAI's time).
Fields are
declared once here with their types; instances are created by cached compiled factories in
:mod:`stability.sim.kernels` and :mod:`stability.sim.engine`, and read back from Python by compiled
exporters, so no per-process compilation is needed.

The cost tables' fields come from one table, :data:`COST_BLOCKS`, which generates the record type
:data:`COSTS` and its factory :func:`make_costs` (:mod:`stability.sim.kernels` fills the blocks from
a cost model). The state's fields come from one table, :data:`STATE_BLOCKS`: each field's name,
numba type and initial value, in blocks by who uses them (the engine core, KV memory, mixed
batches, cycles and modes, SLAI, prefix caching). The state type :data:`STATE`, its initialiser
:func:`init_state` and the batch log's growth (:func:`resize_log`) are generated from it, so a
field is added in one place. Reading and writing fields in the hot loop is unchanged: plain
structref attribute access (the generated code runs only when a record is created or the log
grows).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref
from numba.typed import Dict

I64 = types.int64
F64 = types.float64
IA = types.int64[::1]
FA = types.float64[::1]
FA2 = types.float64[:, ::1]
IA2 = types.int64[:, ::1]
DICT = types.DictType(types.int64, types.int64)


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

# The cost tables' fields (the record the compiled twins of theory.cost read), in blocks by what they
# price. The record type COSTS and its factory make_costs are generated from this table, and
# stability.sim.kernels fills each block from a cost model (kernels.COST_VALUES) and says which
# fields carry each cost term of theory.cost_terms (kernels.COMPILED_TERMS).
COST_BLOCKS: dict[str, list] = {
    "core": [
        ("t_row", IA), ("t_col", IA), ("t_red", IA),  # GeMM tiles, t* first
        ("mu", FA),  # tile pairs per second per SM (Eq. 2)
        ("inv_mu_lin", FA),  # 1 / mu_Lin(t): linear time of one column block (Eq. 4)
        ("S", FA),  # S(k) = sum_{i<=k} T^{D,SA}(i) (Eq. 5)
        ("S2", FA),  # S, then at offset m_off the same sums for a decode in a batch with a prefill
        ("m_off", I64),  # chunk (equal to S unless mixed_decode_eta is on): one array, so a batch
        #                  picks its table by an offset, not by a branch between two arrays
        ("lin", FA),  # T_Lin(tau) for small tau (Eq. 4)
        ("pre_time", FA),  # whole-prefill time by L^P in chunks of `chunk` (Algorithm 1)
        ("pre_waste", FA),  # its time lost to tiling, and its batches not optimally tiled
        ("pre_not_opt", IA),
        ("s", F64), ("N", F64), ("d_pre", I64), ("mu_nLin", F64),
        ("overhead", F64),  # the fixed time of every non-empty batch (CostModel.fixed_s)
        ("lin_ideal", F64),  # linear time per token at t*, no padding
        ("psa_ideal", F64),  # prefill-attention time per unit of (i + c - 1) c at t*, no padding
        ("chunk", I64),
    ],
    # terms beyond Eq. 2 (theory.terms) of the linear time, read only past the `lin` table:
    "linear": [
        ("lin_kind", I64),  # 0: Eq. 4; 1: staircase law; 2: LinearTerms
        ("law_c", F64), ("law_a", F64), ("law_b0", I64),
        ("g_count", IA), ("g_rows", IA2), ("g_red", IA2),  # linear GeMMs: count, tiles per tile index
        ("g_wbytes", FA), ("g_abytes", FA), ("floor_bw", F64),  # memory floor (floor_bw 0: off)
        ("g_traffic", FA2), ("l2_bw", F64),  # operand bytes per output tile through L2 (l2_bw 0: off)
        ("tok_s", F64), ("batch_s", F64),  # per-token and per-batch linear additions
        ("waves", I64),  # wave quantization of the linear GeMMs
    ],
    # prefill attention (t_psa): priced at all, in waves (attention_waves), the vocab projection per
    # scheduled request row (lm_head), and ceil(d / t_red) / (s mu) and ceil(d / t_row) / (s mu),
    # Eq. 6's factors that do not depend on the chunk, of the tiles t_psa tries without waves
    # (kernels._psa_candidates)
    "attention": [
        ("att", I64), ("att_waves", I64), ("lm_out", F64), ("psa_qk", FA), ("psa_pv", FA),
    ],
    # the rows and columns of the tiles t_psa tries for Q K^T (t_row, t_col) and P V (t_red, t_col):
    # log2 when every tile dimension is a power of two (pow2 1), so that its ceilings are shifts;
    # else the dimensions (pow2 0)
    "shifts": [("qk_row", IA), ("qk_col", IA), ("pv_red", IA), ("pv_col", IA), ("pow2", I64)],
}

COST_FIELDS = tuple(name for block in COST_BLOCKS.values() for name, _ in block)
COSTS = CostsType([field for block in COST_BLOCKS.values() for field in block])


class Zeros:
    """Initial value of an array field: zeros of the field's dtype, ``size`` an expression over
    the initialiser's arguments (e.g. ``"m + 1"``; ``m`` is the state's capacity in requests)."""

    def __init__(self, size: str):
        self.size = size

    def code(self, typ) -> str:
        dtype = "np.int64" if typ.dtype == I64 else "np.float64"
        return f"np.zeros({self.size}, dtype={dtype})"


# Each field: (name, numba type, initial value: an expression over the arguments of init_state,
# or Zeros(size)). The batch log's arrays are sized by ``rows`` (one per batch) and ``items``
# (one per iteration) and grow; everything else is sized by the capacity m once.
STATE_BLOCKS: dict[str, list] = {
    # --- engine core (stability.sim.engine): requests, this GPU's, in arrival order ---------------
    "requests": [
        ("arr", FA, "arr"), ("lp", IA, "lp"), ("ld", IA, "ld"), ("cls", IA, "cls"),
        ("t_start", FA, "t_start"), ("t_first", FA, "t_first"),
        ("t_finish", FA, "np.full(m, np.nan)"), ("last_emit", FA, "t_first.copy()"),
        ("tbt_max", FA, Zeros("m if detail else 0")),  # written only in detail mode
        ("n_loaded", I64, "n_loaded"),  # requests loaded (append_request adds more)
    ],
    # --- engine core: the waiting queue (FCFS ring buffer) and the decode set D (id, next
    # position, remaining decodes), both in order ------------------------------------------------
    "queues": [
        ("wq", IA, Zeros("m + 1")), ("wq_head", I64, "0"), ("wq_len", I64, "0"),
        ("seen", I64, "0"),  # requests whose arrival has been seen
        ("d_id", IA, Zeros("m")), ("d_pos", IA, Zeros("m")), ("d_rem", IA, Zeros("m")),
        ("nd", I64, "0"),
    ],
    # --- engine core: clock and counters ----------------------------------------------------------
    "counters": [
        ("clock", F64, "0.0"), ("busy", F64, "0.0"), ("wasted", F64, "0.0"),
        ("n_done", I64, "0"), ("n_batch", I64, "0"), ("n_event", I64, "0"), ("n_tokens", I64, "0"),
        ("n_dec_tok", I64, "0"), ("n_pre_tok", I64, "0"), ("n_not_opt", I64, "0"),
        ("last_done", I64, "0"),  # completions at the end of the latest event (join-shortest-queue)
        # a loop returns once n_done + n_rej reaches it (closed-loop users, stability.sim.closed_loop)
        ("stop_at", I64, "1 << 62"),
    ],
    # --- engine core: TBT record per class (histogram; count, sum, max), per-class TBT SLO and, per
    # request, the gaps above its class's SLO, of the tokens emitted at or after tbt_from; recorded
    # in detail mode only (the per-request arrays are empty otherwise) ------------------------------
    "tbt": [
        ("tbt_hist", FA2, "np.zeros((tbt_slo.size, bins))"), ("tbt_stat", FA2, "np.zeros((tbt_slo.size, 3))"),
        ("tbt_slo", FA, "tbt_slo"), ("n_viol", IA, Zeros("m if detail else 0")),
        ("detail", I64, "detail"), ("tbt_from", F64, "tbt_from"),
    ],
    # --- engine core: batch log, one row per batch, one item per iteration -----------------------
    "log": [
        ("log_on", I64, "log_on"), ("n_log", I64, "0"), ("n_item", I64, "0"),
        ("need_grow", I64, "0"),
        ("b_start", FA, Zeros("rows")), ("b_dur", FA, Zeros("rows")), ("b_tau", IA, Zeros("rows")),
        ("b_nd", IA, Zeros("rows")), ("b_np", IA, Zeros("rows")), ("b_waste", FA, Zeros("rows")),
        ("it_batch", IA, Zeros("items")), ("it_req", IA, Zeros("items")), ("it_i", IA, Zeros("items")),
        ("it_c", IA, Zeros("items")),
    ],
    # --- KV memory (stability.sim.memory): per request blocks held, preemptions, rejection reason;
    # on, total, free, watermark, block size, append rule, peak use, set up; preemptions,
    # rejections, tokens whose KV a preemption discarded, recompute prefills done ----------------
    "kv": [
        ("blk", IA, Zeros("m")), ("npre", IA, Zeros("m")), ("rej", IA, Zeros("m")),
        ("kv_on", I64, "0"), ("kv_total", I64, "0"), ("kv_free", I64, "0"), ("kv_wm", I64, "0"),
        ("kv_bs", I64, "1"), ("kv_rule", I64, "0"), ("kv_peak", I64, "0"), ("kv_ready", I64, "0"),
        ("n_preempt", I64, "0"), ("n_rej", I64, "0"), ("n_lost", I64, "0"), ("n_recomp", I64, "0"),
        ("kv_below", IA, Zeros("1")),  # scratch: slack counts of the decode entries (memory.slack_below)
    ],
    # --- mixed batches (stability.sim.mixed): prefill target (L^P, or prompt + generated tokens
    # after a recompute preemption), tokens prefilled, decodes left after the prefill; admitted
    # requests in their prefill phase P (by arrival index); the batch being built; the
    # shortest-prefill-first waiting heap of keys pl << 32 | j. The arrays are empty until a
    # mixed-batch loop first runs (stability.sim.mixed.mixed_arrays sizes them) ---------------------
    "mixed": [
        ("pl", IA, Zeros("0")), ("pg", IA, Zeros("0")), ("dr", IA, Zeros("0")),
        ("p_id", IA, Zeros("0")), ("np", I64, "0"),
        ("bp_j", IA, Zeros("0")), ("bp_c", IA, Zeros("0")), ("nbp", I64, "0"),
        ("hq", IA, Zeros("0")), ("hq_len", I64, "0"),
    ],
    # --- cycles (Algorithms 1-2, Appendix C.1: start, end, X[c], started, completed) and the modes
    # of Algorithms 2-3: requests started in the cycle, mode, active decodes. The cycle arrays are
    # empty until the first cycle opens (stability.sim.engine.begin_cycle sizes them) -------------
    "cycles": [
        ("cyc_start", FA, Zeros("0")), ("cyc_end", FA, Zeros("0")),
        ("cyc_x", IA, Zeros("0")), ("cyc_started", IA, Zeros("0")),
        ("cyc_done", IA, Zeros("0")), ("n_cyc", I64, "0"), ("cyc_open", I64, "0"),
        ("rc", I64, "0"), ("mode", I64, "0"), ("na", I64, "0"),
    ],
    # --- SLO-aware scheduling (stability.schedulers.slai): each decode's last schedulable time C;
    # scratch for the decode entries whose C is new (these arrays sized by SLAI's loop on entry);
    # T^{P,SA} of a budget-sized chunk PI(R, i, psa_c) by i, computed on first use (nan until then)
    "slai": [
        ("lst", FA, Zeros("0")),
        ("s_id", IA, Zeros("1")), ("s_pos", IA, Zeros("1")), ("s_rem", IA, Zeros("1")),
        ("psa_memo", FA, Zeros("0")), ("psa_c", I64, "0"),
    ],
    # --- prefix caching (stability.sim.prefix_cache): on; per request its prefix parent, the
    # tokens it shares with it (empty: no request shares), whether it is a parent, blocks it holds
    # by a cache hit, full blocks it has registered or hit; the cache (block identity -> entry
    # slot) and per entry slot its identity, holders, free-queue position (-1: held), registering
    # request and its life; free slots; the free-block queue (entry slots, -k a run of k blocks
    # with no identity), its head, tail, live blocks. The per-request and per-slot arrays are
    # empty until prefix_cache.pc_setup sizes them
    "prefix": [
        ("pc_on", I64, "0"), ("pfx_par", IA, Zeros("0")), ("pfx_len", IA, Zeros("0")),
        ("pfx_kid", IA, Zeros("0")),
        ("pc_hit", IA, Zeros("0")), ("pc_done", IA, Zeros("0")),
        ("pc_map", DICT, "Dict.empty(key_type=types.int64, value_type=types.int64)"),
        ("e_key", IA, Zeros("0")), ("e_ref", IA, Zeros("0")), ("e_seq", IA, Zeros("0")),
        ("e_owner", IA, Zeros("0")), ("e_life", IA, Zeros("0")),
        ("e_free", IA, Zeros("0")), ("e_nfree", I64, "0"),
        ("fq", IA, Zeros("0")), ("fq_head", I64, "0"), ("fq_tail", I64, "0"), ("fq_live", I64, "0"),
    ],
}

STATE = StateType([(name, typ) for block in STATE_BLOCKS.values() for name, typ, _ in block])

INIT_ARGS = ("st", "arr", "lp", "ld", "cls", "t_start", "t_first", "n_loaded", "tbt_slo", "detail",
             "tbt_from", "log_on", "rows", "items", "bins")


def _generate(name: str, args, body: list[str], doc: str):
    """Compile ``def name(*args): body`` (not cached itself: the cached factories calling it
    hold its machine code)."""
    src = f"def {name}({', '.join(args)}):\n" + "".join(f"    {line}\n" for line in body)
    namespace = {"np": np, "structref": structref, "COSTS": COSTS, "Dict": Dict, "types": types}
    exec(compile(src, f"<stability.sim.structs.{name}>", "exec"), namespace)
    fn = namespace[name]
    fn.__doc__ = doc
    return njit(fn)


def _init_code(value, typ) -> str:
    return value.code(typ) if isinstance(value, Zeros) else value


init_state = _generate(
    "init_state", INIT_ARGS,
    ["m = arr.size"] + [f"st.{name} = {_init_code(value, typ)}" for block in STATE_BLOCKS.values()
                        for name, typ, value in block],
    "Set every field of a new state ``st`` to its initial value in :data:`STATE_BLOCKS`.")

LOG_ARRAYS = [(name, typ, value) for name, typ, value in STATE_BLOCKS["log"]
              if isinstance(value, Zeros) and value.size in ("rows", "items")]

resize_log = _generate(
    "resize_log", ("st", "rows", "items"),
    [line for name, typ, value in LOG_ARRAYS
     for line in (f"old_{name} = st.{name}", f"st.{name} = {value.code(typ)}",
                  f"st.{name}[: old_{name}.size] = old_{name}")],
    "Reallocate the batch log for ``rows`` batches and ``items`` iterations, keeping its entries.")

make_costs = _generate(
    "make_costs", ("values",),
    ["ct = structref.new(COSTS)"] + [f"ct.{name} = values[{k}]" for k, name in enumerate(COST_FIELDS)]
    + ["return ct"],
    "A new cost-table record whose fields take ``values``, a tuple in the order of :data:`COST_FIELDS`.")
