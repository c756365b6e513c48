"""The score of measured engine steps (:func:`theory.validation.steps.score_steps`) for the
documentation: a Markdown section (the console lines' sections as lists) and two figures; nothing is
computed here but formatting and plotting."""

from __future__ import annotations

from pathlib import Path

from theory.validation.steps import StepScore, header, sections


def markdown(score: StepScore, figures: dict[str, str] | None = None) -> str:
    """A Markdown section of the score (the docs page includes it), with ``figures``
    (``{caption: path}``) after the tables."""
    out = [f"Scored: {header(score)}.", ""]
    for title, lines in sections(score):
        out += [f"### {title[0].upper()}{title[1:]}", ""] + [f"- {line}" for line in lines] + [""]
    for caption, path in (figures or {}).items():
        out += [f"![{caption}]({path})", "", f"*{caption}*", ""]
    return "\n".join(out)


def plot(score: StepScore, folder: str | Path) -> dict[str, str]:
    """Two figures into ``folder``: measured against Eq. 7 per step, and ``eager - graph`` against
    the step's rows. Returns ``{caption: file name}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for kind, marker in (("decode_step", "o"), ("mixed_step", "s")):
        rows = [r for r in score.rows if r["kind"] == kind]
        ax.scatter([r["measured_s"] * 1e3 for r in rows], [r["predicted_padded_s"] * 1e3 for r in rows],
                   marker=marker, s=14, label=kind)
    lo = min(min(r["measured_s"], r["predicted_padded_s"]) for r in score.rows) * 1e3
    hi = max(max(r["measured_s"], r["predicted_padded_s"]) for r in score.rows) * 1e3
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.set(xscale="log", yscale="log", xlabel="measured step (graph), ms", ylabel="Eq. 7, ms")
    ax.legend()
    fig.tight_layout()
    name = "steps_eq7.png"
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    out["Eq. 7 (with the padding term) against the measured graph steps"] = name
    fig, ax = plt.subplots(figsize=(6, 4.5))
    fx = score.fixed
    for kind, marker in (("decode_step", "o"), ("mixed_step", "s")):
        steps = [q for q in fx.steps if q["kind"] == kind]
        ax.scatter([q["tokens"] for q in steps], [(q["eager_s"] - q["graph_s"]) * 1e3 for q in steps],
                   marker=marker, s=14, label=kind)
    for j, f in enumerate(fx.constant["folds"]):
        ax.axhline(f["c"] * 1e3, color="k", ls="--", lw=0.8, label="one constant" if not j else None)
    ax.set(xlabel="rows of the step", ylabel="eager - graph, ms", xscale="log")
    ax.legend()
    fig.tight_layout()
    name = "steps_eager.png"
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    out["eager - graph per step"] = name
    return out
