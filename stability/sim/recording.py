"""What the engine records of each batch: TBT gaps (per-class log histograms and SLO counts), the
batch log, and the counters (:mod:`stability.sim.engine` describes detail mode).

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1.
"""

from __future__ import annotations

import math

from numba import njit

# --- TBT histogram: log-spaced bins from 1e-6 s to 1e4 s, 100 per decade -------------------------
TBT_LO = -6.0
TBT_PER_DECADE = 100
TBT_BINS = 10 * TBT_PER_DECADE + 2  # plus an underflow and an overflow bin


@njit(cache=True)
def move_decode(st, dst, src):
    """Copy decode entry ``src`` (request, position, tokens left) into slot ``dst``."""
    st.d_id[dst] = st.d_id[src]
    st.d_pos[dst] = st.d_pos[src]
    st.d_rem[dst] = st.d_rem[src]


@njit(cache=True)
def move_decode_forward(st, q, to):
    """Move decode entry ``q`` into slot ``to <= q``, the entries ``to .. q - 1`` one slot back
    (their order kept): how a policy gathers the decodes it runs at the front of the set."""
    j, p, r = st.d_id[q], st.d_pos[q], st.d_rem[q]
    for k2 in range(q, to, -1):
        move_decode(st, k2, k2 - 1)
    st.d_id[to] = j
    st.d_pos[to] = p
    st.d_rem[to] = r


@njit(cache=True)
def record_gap(st, j, t_emit):
    """A token of request j at t_emit: the gap since its previous token updates the request's
    longest gap and, when t_emit >= tbt_from, its count of gaps above its class's TBT SLO and the
    class's TBT record (histogram; count, sum, max)."""
    gap = t_emit - st.last_emit[j]
    st.last_emit[j] = t_emit
    if gap > st.tbt_max[j]:
        st.tbt_max[j] = gap
    if t_emit < st.tbt_from:  # a warm-up token: the request's longest gap only
        return
    k = st.cls[j]
    if gap > st.tbt_slo[k]:
        st.n_viol[j] += 1
    if gap <= 0.0:
        b = 0
    else:
        b = math.floor((math.log10(gap) - TBT_LO) * TBT_PER_DECADE) + 1
        b = min(max(b, 0), TBT_BINS - 1)
    st.tbt_hist[k, b] += 1.0
    st.tbt_stat[k, 0] += 1.0
    st.tbt_stat[k, 1] += gap
    if gap > st.tbt_stat[k, 2]:
        st.tbt_stat[k, 2] = gap


@njit(cache=True)
def log_has_room(st, rows, items):
    """Whether the batch log can take ``rows`` batches and ``items`` iterations (sets NEED_GROW)."""
    if st.log_on == 0:
        return True
    if st.n_log + rows <= st.b_start.size and st.n_item + items <= st.it_req.size:
        return True
    st.need_grow = 1
    return False


@njit(cache=True)
def log_batch(st, start, dur, tau, nd, npre, wasted):
    """One batch-log row: start, duration, tokens, decodes, prefill chunks, time lost to tiling."""
    r = st.n_log
    st.b_start[r] = start
    st.b_dur[r] = dur
    st.b_tau[r] = tau
    st.b_nd[r] = nd
    st.b_np[r] = npre
    st.b_waste[r] = wasted
    st.n_log += 1


@njit(cache=True)
def log_item(st, j, i, c):
    q = st.n_item
    st.it_batch[q] = st.n_log  # the batch being logged next
    st.it_req[q] = j
    st.it_i[q] = i
    st.it_c[q] = c
    st.n_item += 1


@njit(cache=True)
def count_batch(st, tau, n_dec, n_pre, dur, wasted):
    st.n_batch += 1
    st.n_tokens += tau
    st.n_dec_tok += n_dec
    st.n_pre_tok += n_pre
    st.busy += dur
    st.wasted += wasted
    if wasted > 1e-12 * dur:
        st.n_not_opt += 1
