"""Figures: the RAD cycle-DTMC drift, the stability region per GPU tile set, the two-class region.

Every function takes plain results (a :class:`stability.dtmc.CycleChain`, or rows of
``region.csv`` as dicts) and writes one PNG with matplotlib's Agg backend, so ``llmq region
--plot-only out/region.csv`` redraws from the CSV alone.

References
----------
Bari, Hegde, de Veciana (2025), Theorem 1 (lambda*), Theorem 2 (lambda* (1 - eps)), Lemma 3;
the certified capacity of :mod:`theory.capacity`.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from stability.points import G_MIN
from theory.io import atomic_write_bytes

COLORS = {"rad": "tab:blue", "sarathi": "tab:orange", "sarathi_paper": "tab:brown",
          "request_level": "tab:green", "vllm": "tab:purple", "distserve": "tab:red",
          "alg2": "tab:cyan"}
MARKERS = {"stable": "o", "unstable": "x", "inconclusive": "s"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _color(name: str) -> str:
    return COLORS.get(name, "tab:gray")


def plot_drift(chain, path: str | Path, lemma3: float | None = None,
               lemma3_printed: float | None = None, title: str = "") -> Path:
    """Executed drift E[X[c+1] - X[c] | X[c] = x] with its CI band, Lemma 3's bounds for x >= n,
    and the stationary law of the truncated chain on a second axis."""
    plt = _pyplot()
    tb = chain.table
    x = tb["x"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.fill_between(x, tb["drift_lo"], tb["drift_hi"], color="tab:blue", alpha=0.25,
                    label=f"{chain.confidence:.0%} CI")
    ax.plot(x, tb["drift"], color="tab:blue", lw=1.2, label="executed drift")
    ax.axhline(0, color="black", lw=0.8)
    ax.axvline(chain.n, color="gray", ls=":", lw=1, label=f"n = {chain.n}")
    above = x >= chain.n
    lo, hi = float(np.nanmin(tb["drift_lo"])), float(np.nanmax(tb["drift_hi"]))
    pad = 0.15 * (hi - lo or 1.0)
    ax.set_ylim(min(lo, 0) - pad, max(hi, 0) + pad)
    for value, style, label in ((lemma3, ("tab:red", "--"), "Lemma 3 bound (lambda / r)"),
                                (lemma3_printed, ("tab:orange", ":"), "Lemma 3 as printed")):
        if value is None or (label.endswith("printed") and value == lemma3):
            continue
        if min(lo, 0) - pad <= value <= max(hi, 0) + pad:
            ax.plot(x[above], np.full(above.sum(), value), color=style[0], ls=style[1], label=label)
        else:  # far off the drift's scale: name it in the legend only
            ax.plot([], [], color=style[0], ls=style[1], label=f"{label} = {value:.3g} (off scale)")
    ax.set_xlabel("X[c]: pending requests at the cycle start")
    ax.set_ylabel("E[X[c+1] - X[c] | X[c] = x]")
    ax2 = ax.twinx()
    pi = chain.stationary().pi
    ax2.bar(x, pi, color="tab:gray", alpha=0.3, width=1.0, label="stationary law")
    ax2.set_ylabel("stationary probability")
    ax2.set_ylim(0, max(pi.max() * 3, 1e-12))
    lines = ax.get_legend_handles_labels()
    bars = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + bars[0], lines[1] + bars[1], fontsize=8, loc="best")
    ax.set_title(title or f"RAD cycle DTMC: lambda = {chain.lam:.4g} req/s, r = {chain.r}")
    return _save(fig, path)


def _save(fig, path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    fig.clf()
    _pyplot().close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def plot_region(rows: list[dict], boundaries: list[dict], path: str | Path) -> Path:
    """Stability region per tile set: one row of panels per (tile set, r), lambda on the x-axis
    (left: every run; right: zoomed on the boundaries), one lane per (scheduler, workload variant)
    with each run's verdict, the boundary with its CI, RAD's DTMC prediction, lambda* (Theorem 1),
    lambda* (1 - eps) (Theorem 2) and the certified bound of :mod:`theory.capacity` (rows with a
    ``certified_bound``) marked."""
    plt = _pyplot()
    panels = sorted({(b["tileset"], int(b["r"])) for b in boundaries})
    height = 1.6 + 0.55 * _lanes(boundaries, panels)
    fig, axes = plt.subplots(len(panels), 2, figsize=(13, height), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for row, (tileset, r) in zip(axes, panels, strict=True):
        series = [b for b in boundaries if b["tileset"] == tileset and int(b["r"]) == r]
        series.sort(key=lambda b: (b["workload_variant"], b["scheduler"]))
        for ax in row:
            _region_panel(ax, rows, series)
        lo = min(min(_num(b["ci_low"]), _num(b["theorem2"]) if b["workload_variant"] == "pad"
                     else np.inf) for b in series)
        hi = max(max(_num(b["lambda_star"]), _num(b["ci_high"]) if np.isfinite(_num(b["ci_high"]))
                     else 0, np.nan_to_num(_num(b.get("certified_bound")))) for b in series)
        if np.isfinite(lo) and hi > lo:
            row[1].set_xlim(lo - 0.15 * (hi - lo), hi + 0.15 * (hi - lo))
        row[1].set_yticklabels([])
        row[0].set_title(f"{tileset}, r = {r}", fontsize=9, loc="left")
        row[1].set_title("zoom on the boundaries", fontsize=9, loc="left")
    handles = [plt.Line2D([], [], marker=m, ls="", color="black", label=f"run: {v}")
               for v, m in MARKERS.items()]
    handles += [plt.Line2D([], [], lw=6, alpha=0.45, color="gray", label="boundary CI"),
                plt.Line2D([], [], marker="|", ms=12, ls="", color="black", label="boundary"),
                plt.Line2D([], [], marker="D", ms=5, ls="", color="black", mfc="none",
                           label="cycle DTMC (RAD)"),
                plt.Line2D([], [], color="black", label="lambda* pad (Thm 1)"),
                plt.Line2D([], [], color="black", ls="--", label="lambda* raw (Thm 1)"),
                plt.Line2D([], [], color="tab:red", ls=":", label="lambda*(1-eps) (Thm 2)"),
                plt.Line2D([], [], color="tab:olive", ls="-.", label="certified bound pad"),
                plt.Line2D([], [], color="tab:olive", ls=(0, (1, 3)), label="certified bound raw")]
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=5, bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(_region_title(boundaries), fontsize=10)
    fig.text(0.5, 0.0, CAPTION, ha="center", va="top", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.75 / height, 1, 1))
    return _save(fig, path)


CAPTION = ("run verdicts: stable / unstable / inconclusive (the growth interval of the work in system "
           f"neither excludes nor exceeds the {G_MIN:.1%} threshold). '!' after a lane: its boundary CI lies "
           "above lambda* (a violation of Theorem 1); '?': the CI misses the bisection bracket; "
           "a boundary without its bar: the CI is open above (a saturation run's queue emptied).")


def _region_title(boundaries: list[dict]) -> str:
    """GPU tile sets, model, workload and schedulers of a region figure."""
    def names(key: str) -> str:
        return ", ".join(sorted({str(b.get(key) or "?") for b in boundaries}))

    return (f"Stability region: {names('tileset')}; {names('model')}; workload {names('workload')}; "
            f"schedulers {names('scheduler')}")


def _region_panel(ax, rows, series) -> None:
    labels = []
    for lane, b in enumerate(series):
        color = _color(b["scheduler"])
        pts = [p for p in rows if p["series"] == b["series"]]
        for verdict, marker in MARKERS.items():
            lam = [_num(p["rate"]) for p in pts if p["verdict"] == verdict]
            ax.scatter(lam, [lane] * len(lam), marker=marker, color=color, s=22, zorder=3)
        lo, hi, est = _num(b["ci_low"]), _num(b["ci_high"]), _num(b["boundary"])
        if np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [lane, lane], color=color, lw=7, alpha=0.45, solid_capstyle="butt")
        if np.isfinite(est):
            ax.plot([est], [lane], marker="|", color="black", ms=14, zorder=4)
        dtmc = _num(b.get("dtmc_boundary"))
        if np.isfinite(dtmc):
            ax.plot([dtmc], [lane + 0.25], marker="D", ms=5, mfc="none", color="black")
            ax.plot([_num(b["dtmc_low"]), _num(b["dtmc_high"])], [lane + 0.25] * 2, color="black",
                    lw=1)
        opts = f" [{b['options']}]" if b.get("options") else ""
        flags = ("!" if _flag(b.get("exceeds_lambda_star")) else "") \
            + ("?" if not _flag(b.get("consistent", True)) else "")
        labels.append(f"{b['scheduler']}{opts} ({b['workload_variant']}){' ' + flags if flags else ''}")
        ax.axvline(_num(b["lambda_star"]), color="black", ls="-" if b["workload_variant"] == "pad"
                   else "--", lw=0.9)
        if b["workload_variant"] == "pad":
            ax.axvline(_num(b["theorem2"]), color="tab:red", ls=":", lw=0.9)
        cert = _num(b.get("certified_bound"))
        if np.isfinite(cert):
            ax.axvline(cert, color="tab:olive", ls="-." if b["workload_variant"] == "pad" else (0, (1, 3)),
                       lw=1.1)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.set_xlabel("arrival rate lambda (requests/s)", fontsize=8)


def _flag(value) -> bool:
    """A boolean from region.csv (``"True"``/``"False"``) or from memory."""
    return value is True or str(value).strip().lower() == "true"


def _lanes(boundaries, panels) -> int:
    per = defaultdict(int)
    for b in boundaries:
        per[(b["tileset"], int(b["r"]))] += 1
    return sum(max(per[p], 1) + 1 for p in panels)


def plot_two_class(boundaries: list[dict], path: str | Path) -> Path:
    """The two-class region in the (lambda_1, lambda_2) plane: per tile set and scheduler, the
    empirical boundary along each ray (with its CI as a segment) against Theorem 1's line
    ``lambda_1 T_bar_1 + lambda_2 T_bar_2 = r``."""
    plt = _pyplot()
    panels = sorted({(b["tileset"], int(b["r"]), b["workload_variant"]) for b in boundaries})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4.4), squeeze=False)
    for ax, (tileset, r, variant) in zip(axes[0], panels, strict=True):
        series = [b for b in boundaries if (b["tileset"], int(b["r"]), b["workload_variant"])
                  == (tileset, r, variant)]
        t1, t2 = _num(series[0]["T_bar_1"]), _num(series[0]["T_bar_2"])
        ax.plot([r / t1, 0], [0, r / t2], color="black", lw=1, label="Theorem 1: λ1 T̄1 + λ2 T̄2 = r")
        for name in sorted({b["scheduler"] for b in series}):
            pts = sorted((b for b in series if b["scheduler"] == name), key=lambda b: _num(b["share_1"]))
            color = _color(name)
            xs = [_num(b["boundary"]) * _num(b["share_1"]) for b in pts]
            ys = [_num(b["boundary"]) * (1 - _num(b["share_1"])) for b in pts]
            ax.plot(xs, ys, marker="o", color=color, label=name, lw=1)
            for b in pts:
                s = _num(b["share_1"])
                lo, hi = _num(b["ci_low"]), _num(b["ci_high"])
                ax.plot([lo * s, hi * s], [lo * (1 - s), hi * (1 - s)], color=color, lw=4, alpha=0.4)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(f"λ1 ({series[0]['class_1']}) req/s")
        ax.set_ylabel(f"λ2 ({series[0]['class_2']}) req/s")
        ax.set_title(f"{tileset}, r = {r}, {variant}, {series[0].get('model') or '?'}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)
