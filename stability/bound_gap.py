"""Where a schedule loses against the certified bound: its busy time split into the bound's charges.

The certified bound of :mod:`theory.capacity` charges a batch of ``tau`` tokens with ``n_D``
decodes at least ``u tau + v n_D`` for its token-count time ``F(tau) = G(tau) + c_fix`` (the LP's
dual prices), every decode its attention ``A_D(i)`` and every request its least prefill attention
``f(L_P)`` (the chunking DP). A simulated schedule's batch log gives the time it actually spent;
the difference, per component, is what keeps its throughput below the bound:

* ``linear``: ``sum_B F(tau_B) - (u tau_B + v n_D,B)``, split into ``linear_size`` (batches whose
  token count is not a best one: ``tau_B (F(tau_B) / tau_B - min_{tau <= tau_top} F(tau) / tau)``,
  ``tau_top`` the largest batch of the log) and ``linear_budget`` (the rest: the best size up to
  ``tau_top`` against the LP's price, what a larger budget could still gain);
* ``prefill_attention``: per request whose prompt finished in the log, the attention of its chunks
  ``sum A_P(i, c)`` minus ``f(L_P)`` (recomputed prompts count in full beyond ``f(L_P)``);
* ``decode_attention``: 0 by the bound's construction (a decode's attention is forced); the log's
  decode attention is reported so the shares add up;
* ``residual``: the logged batch durations minus ``F + sum A_D + sum A_P`` of their contents: 0
  when the simulator prices batches by the same law as the bound (a check of both);
* ``idle``: time between batches while the node was not busy.

Dividing each loss by the nodes' span (first batch start to last batch end) gives the fraction of
the capacity it costs: a saturated schedule's throughput over the bound is about ``1 - sum of the
loss shares`` (the charges of requests cut by the window's ends aside).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4-7; :mod:`theory.capacity` (proof of the compute bound).
"""

from __future__ import annotations

import numpy as np

from theory.capacity import BatchLaw, law_from_cost_model, linear_fixed_cost, min_prefill_attention
from theory.cost import CostModel
from theory.errors import FieldError
from theory.workload import Workload

COMPONENTS = ("linear_size", "linear_budget", "prefill_attention", "residual", "idle")


def _table(fn, top: int) -> np.ndarray:
    out = np.zeros(top + 1)
    if fn is not None and top:
        out[1:] = np.asarray(fn(np.arange(1, top + 1)), dtype=float)
    return out


def batch_log_gap(cm: CostModel, w: Workload, result, window: tuple[float, float] | None = None) -> dict:
    """Split a logged simulation's busy time into the certified bound's charges and its losses.

    Parameters
    ----------
    cm : CostModel
        The cost model the simulation ran (its ``overhead_s`` is ``c_fix``).
    w : Workload
        The length law whose means set the LP's dual prices ``u, v`` (:func:`linear_fixed_cost`).
    result : stability.sim.simulate.SimResult
        A run with ``detail=True, log=True``.
    window : (float, float), optional
        Only batches starting in ``[t0, t1)`` count, and only prompts whose every chunk ran in them
        (e.g. the saturated window of :func:`stability.attain.window_throughput`, leaving out the
        fill at the start and the drain after the last arrival); default the whole log.

    Returns
    -------
    dict
        ``busy_s`` (sum of batch durations), ``span_s`` (first batch start to last batch end, summed
        over nodes), ``batches``, ``time_s`` (the log's time per component: ``linear``,
        ``decode_attention``, ``prefill_attention``), ``charge_s`` (the bound's charge for the same
        work: ``linear`` at ``u, v``, ``decode_attention``, ``prefill_attention`` at ``f(L_P)`` for
        the prompts run wholly in the window, as spent for the others), ``loss_s`` and
        ``loss_share`` (loss / span) per :data:`COMPONENTS`, ``efficiency`` (``1 - sum of the
        loss shares``), ``prices`` (``u``, ``v``), ``best_tokens`` (a batch size attaining
        ``min F(tau) / tau`` up to the largest logged batch) and ``top_sizes`` (the most used batch
        sizes, their share of the batches and their per-token excess over the LP price).

    Raises
    ------
    FieldError
        If the result carries no batch log.
    """
    runs = getattr(result, "runs", None)
    if not runs or any(run.batches is None for run in runs):
        raise FieldError("result", "a simulation without a batch log",
                         "a SimResult of a scenario with detail=True and log=True")
    law: BatchLaw = law_from_cost_model(cm)
    lin = linear_fixed_cost(law, w.expect(w.L_P + w.L_D), w.expect(w.L_D))
    u, v = lin.u_s_per_token, lin.v_s_per_decode
    t0, t1 = (-np.inf, np.inf) if window is None else (float(window[0]), float(window[1]))
    if not t1 > t0:
        raise FieldError("window", window, "(t0, t1) with t1 > t0")
    keep = [(run.batches["start"] >= t0) & (run.batches["start"] < t1) for run in runs]

    def column(name: str) -> np.ndarray:
        return np.concatenate([run.batches[name][k] for run, k in zip(runs, keep, strict=True)])

    tau, n_dec = column("tokens").astype(np.int64), column("decodes").astype(np.int64)
    dur = column("duration")
    if tau.size == 0:
        raise FieldError("window", window, "a window holding at least one batch of the log")
    top_tau = int(tau.max())
    F = np.asarray(law.token_time(top_tau), dtype=float) + law.fixed_s
    F[0] = 0.0
    per_tok = F[1:] / np.arange(1, top_tau + 1)
    best = int(np.argmin(per_tok)) + 1
    t_lin = F[tau]
    loss = dict.fromkeys(COMPONENTS, 0.0)
    loss["linear_size"] = float(np.sum(t_lin - tau * per_tok[best - 1]))
    loss["linear_budget"] = float(np.sum(tau * per_tok[best - 1] - (u * tau + v * n_dec)))

    dec_t = pre_t = pre_charge = span = 0.0
    for run, k in zip(runs, keep, strict=True):
        if not np.any(k):
            continue
        it = run.items
        in_b = k[it["batch"]]
        dec = (it["c"] == 0) & in_b
        pos = it["i"][dec]
        a_d = _table(law.decode_attention, int(pos.max()) if pos.size else 0)
        dec_t += float(a_d[pos].sum())
        pre = (it["c"] > 0) & in_b
        if law.prefill_attention is not None and np.any(pre):
            a_p = np.asarray(law.prefill_attention(it["i"][pre], it["c"][pre]), dtype=float)
        else:
            a_p = np.zeros(int(pre.sum()))
        pre_t += float(a_p.sum())
        m = run.L_P.size
        req = it["request"][pre]
        spent = np.bincount(req, weights=a_p, minlength=m)
        tokens = np.bincount(req, weights=it["c"][pre], minlength=m)
        outside = np.bincount(it["request"][(it["c"] > 0) & ~in_b], minlength=m) > 0
        done = (tokens >= run.L_P) & ~outside  # every chunk of the prompt ran inside the window
        f = min_prefill_attention(law, int(run.L_P[done].max()) if np.any(done) else 0)
        pre_charge += float(f[run.L_P[done]].sum())
        # prompts cut by the window: their chunks' attention is charged as spent (neither lost nor
        # gained), so the loss counts whole prompts only
        pre_charge += float(a_p.sum() - spent[done].sum())
        loss["prefill_attention"] += float(spent[done].sum() - f[run.L_P[done]].sum())
        st, du = run.batches["start"][k], run.batches["duration"][k]
        span += float(st[-1] + du[-1] - st[0])
        loss["idle"] += float(st[-1] + du[-1] - st[0] - du.sum())
    busy = float(dur.sum())
    loss["residual"] = busy - float(t_lin.sum()) - dec_t - pre_t
    share = {k: x / span for k, x in loss.items()}
    sizes, counts = np.unique(tau, return_counts=True)
    order = np.argsort(counts)[::-1][:5]
    top = [{"tokens": int(sizes[k]), "share_of_batches": float(counts[k] / tau.size),
            "excess_per_token": float(per_tok[sizes[k] - 1] / u - 1) if u > 0 else None}
           for k in order]
    return {"busy_s": busy, "span_s": span, "batches": int(tau.size),
            "time_s": {"linear": float(t_lin.sum()), "decode_attention": dec_t, "prefill_attention": pre_t},
            "charge_s": {"linear": float(np.sum(u * tau + v * n_dec)), "decode_attention": dec_t,
                         "prefill_attention": pre_charge},
            "loss_s": loss, "loss_share": share, "efficiency": 1.0 - sum(share.values()),
            "prices": {"u": u, "v": v}, "best_tokens": best, "top_sizes": top}


__all__ = ["COMPONENTS", "batch_log_gap"]
