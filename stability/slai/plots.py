"""Figures of the Section 7 study: analogues of the paper's Fig. 6 (9, 10), Fig. 7b-c and Fig. 8.

Every function takes the aggregated rows of :func:`stability.slai.analysis.aggregate` (means and
95% intervals over replicates) and returns a matplotlib figure; error bars are those intervals.

References
----------
Bari, Hegde, de Veciana (2025), Fig. 6, Appendix F (Figs. 7-10).
"""

from __future__ import annotations

import numpy as np

from stability.sim.classes import FREE_SLO, PAYING_SLO
from stability.slai.study import BUCKET_EDGES, GPU, MODEL, POLICIES, POLICY, TTFT_TARGET

SETUP = f"{MODEL} on {GPU}"  # every Section 7 figure names the model and the GPU

MARKERS = "osD^v<>"
STYLE = {p.key: {"color": f"C{k}", "marker": MARKERS[k]} for k, p in enumerate(POLICIES)}  # per policy


def _series(agg, panel: str, policy: str, field: str):
    pts = sorted((a for a in agg if a["panel"] == panel and a["policy"] == policy and not a["op"]),
                 key=lambda a: a["rate"])
    x = np.array([a["rate"] for a in pts])
    y = np.array([a[field] for a in pts])
    err = np.array([[a[field] - a[f"{field}_lo"] for a in pts], [a[f"{field}_hi"] - a[field] for a in pts]])
    return x, y, np.nan_to_num(err)


def _lines(ax, agg, panel, field, policies, logy=False):
    for p in policies:
        x, y, err = _series(agg, panel, p, field)
        if logy:  # an interval reaching below 0 is drawn down to a tenth of the mean
            err[0] = np.minimum(err[0], 0.9 * np.abs(y))
        if x.size:
            ax.errorbar(x, y, yerr=err, ms=3, lw=1, capsize=2, label=POLICY[p].label, **STYLE[p])
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("request rate [req/s]")
    ax.grid(alpha=0.3)


def fig6(agg, panel, lambda_star: float | None = None):
    """P99 TBT of paying and free users and median TTFT of all users against the rate (Fig. 6)."""
    import matplotlib.pyplot as plt

    keys = [p.key for p in POLICIES if p.key != "slai_priority_dynamic"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, field, slo, title in ((axes[0], "paying_tbt_p99", PAYING_SLO, "(a) P99 TBT, paying users"),
                                  (axes[1], "free_tbt_p99", FREE_SLO, "(b) P99 TBT, free-tier users")):
        _lines(ax, agg, panel.key, field, keys, logy=True)
        ax.axhline(slo, color="k", ls="--", lw=1, label=f"SLO {slo} s")
        ax.set_ylabel("P99 TBT [s]")
        ax.set_title(title)
    _lines(axes[2], agg, panel.key, "ttft_p50", keys, logy=True)
    axes[2].axhline(TTFT_TARGET, color="k", ls="--", lw=1, label="0.5 s")
    axes[2].set_ylabel("median TTFT [s]")
    axes[2].set_title("(c) median TTFT, all users")
    if lambda_star:
        for ax in axes:
            ax.axvline(lambda_star, color="grey", ls=":", lw=1)
    axes[2].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Section 7, Fig. 6 analogue, {SETUP}: {panel.label} (dotted: lambda*)")
    fig.tight_layout()
    return fig


def fig7_buckets(per_policy: dict, panel):
    """Requests served within the arrival window, and mean TTFT, by prompt length at the operating
    point (Fig. 7b-c). ``per_policy`` maps a policy key to :func:`stability.slai.analysis.buckets`."""
    import matplotlib.pyplot as plt

    edges = np.asarray(BUCKET_EDGES)
    mids = (edges[:-1] + edges[1:]) / 2
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    keys = [k for k in per_policy if per_policy[k]]
    width = (edges[1] - edges[0]) / (len(keys) + 1)
    rate = next((per_policy[k]["rate"] for k in keys), float("nan"))
    for n, k in enumerate(keys):
        d = per_policy[k]
        a.bar(edges[:-1] + (n + 0.5) * width, d["served"], width=width, label=POLICY[k].label,
              color=STYLE[k]["color"])
        b.plot(mids, d["ttft_mean"], ms=3, label=POLICY[k].label, **STYLE[k])
    if keys:
        a.step(edges, [*per_policy[keys[0]]["arrived"], per_policy[keys[0]]["arrived"][-1]],
               where="post", color="k", lw=1, label="arrived")
    a.set_xlabel("prompt length [tokens]")
    a.set_ylabel("requests served within the arrival window")
    a.set_title(f"(b) requests served at {rate:.2f} req/s")
    b.set_xlabel("prompt length [tokens]")
    b.set_ylabel("mean TTFT [s]")
    b.set_yscale("log")
    b.set_title(f"(c) mean TTFT at {rate:.2f} req/s")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    a.legend(fontsize=7)
    fig.suptitle(f"Appendix F.1, Fig. 7 analogue, {SETUP}: {panel.label}")
    fig.tight_layout()
    return fig


def fig8_priority(agg, panel):
    """Mean TTFT of paying and of free-tier users against the rate, with the paying-first
    variant (Appendix F.2, Fig. 8)."""
    import matplotlib.pyplot as plt

    keys = ["sarathi_fcfs", "sarathi_spf", "slai_spf_dynamic", "slai_priority_dynamic"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, field, title in ((axes[0], "paying_ttft_mean", "(a) mean TTFT, paying users"),
                             (axes[1], "free_ttft_mean", "(b) mean TTFT, free-tier users")):
        _lines(ax, agg, panel.key, field, keys, logy=True)
        ax.set_ylabel("mean TTFT [s]")
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Appendix F.2, Fig. 8 analogue, {SETUP}: {panel.label}")
    fig.tight_layout()
    return fig


def fig_lengths():
    """The two length laws: CDFs of L^P and L^D of the Table-1 fit and of the sharegpt4 trace
    (both conditioned on L^P + L^D <= 8192)."""
    import matplotlib.pyplot as plt

    from stability.slai.study import TOTAL_CAP
    from theory.workload import get_workload

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name in ("table1", "sharegpt4"):
        w = get_workload(name).truncated(TOTAL_CAP)
        for ax, x in ((axes[0], w.L_P), (axes[1], w.L_D)):
            order = np.argsort(x)
            ax.plot(x[order], np.cumsum(w.p[order]), label=name)
    axes[0].set_xlabel("prompt length L^P [tokens]")
    axes[1].set_xlabel("output length L^D [tokens]")
    for ax in axes:
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Length laws of Section 7: Table-1 lognormal fit vs the real sharegpt4 trace")
    fig.tight_layout()
    return fig
