"""The console table of ``llmq region``: one row per series, ``-`` where a value does not apply,
and a legend under it that explains every column and every flag the table shows.

RAD's row shows its n (``auto``: searched) and the rate that n was tuned for, Theorem 2's
``lambda* (1 - eps)`` on the padded workload (:func:`stability.points.auto_rad_n`): RAD at
``n = auto`` is stable up to that target by construction, not up to lambda*, which is why its
boundary can lie below another scheduler's.
"""

from __future__ import annotations

import math
import textwrap

from theory.defaults import RAD_N

NA = "-"  # a value that does not apply to the row
WIDTH = 110  # of the legend's lines

FLAGS = {
    "ABOVE lambda*": "the boundary's whole CI lies above lambda* = r / T_bar^R, which Theorem 1 says no "
                     "scheduler is stable above: a finding to report",
    "bisection bracket disagrees": "the boundary's CI (from the saturation runs) misses the bracket that "
                                   "bisecting on the stability verdict found, [highest stable-looking rate "
                                   "less its growth, lowest unstable rate]: the two estimates of the "
                                   "boundary disagree (more --requests-per-node or --bisect steps narrow the "
                                   "bracket)",
    "not saturated": "a saturation run's queue emptied: the boundary is a lower bound and its CI is "
                     "open above (inf)",
}


def _num(x, spec: str = ".4g") -> str:
    """``x`` formatted, or :data:`NA` when it does not apply (None, empty, NaN)."""
    if x is None or x == "" or (isinstance(x, float) and math.isnan(x)):
        return NA
    return format(x, spec)


def _options(text: str) -> dict[str, str]:
    """``"n=183 t_col=8"`` (the ``options`` column) as ``{"n": "183", "t_col": "8"}``."""
    return dict(item.split("=", 1) for item in str(text).split())


def flags(b: dict) -> list[str]:
    """The flags (keys of :data:`FLAGS`) of one boundary row."""
    out = []
    if b["exceeds_lambda_star"]:
        out.append("ABOVE lambda*")
    if not b["consistent"]:
        out.append("bisection bracket disagrees")
    if not b["saturated"]:
        out.append("not saturated")
    return out


def _n_target(b: dict, table: list[dict], auto: bool, two_class: bool):
    """The rate RAD's n = auto was tuned for: lambda* (1 - eps) of the padded workload of the row's
    tile set and r (the ``theorem2`` of its pad row); None when n was given, or the sweep has two
    classes (n is then tuned on class 1 alone), or no pad row was swept."""
    if b["scheduler"] != "rad" or not auto or two_class:
        return None
    pad = [p for p in table if p["scheduler"] == "rad" and p["workload_variant"] == "pad"
           and (p["tileset"], p["r"], p["workload"]) == (b["tileset"], b["r"], b["workload"])]
    return pad[0]["theorem2"] if pad else None


def table_lines(table: list[dict], spec) -> list[str]:
    """The table of the boundary rows ``table`` (:func:`stability.region.boundary_rows`) of the sweep
    ``spec``, with its legend."""
    auto = dict(dict(spec.options).get("rad", ())).get("n") == RAD_N
    rows = []
    for b in table:
        opts = _options(b["options"])
        n = opts.pop("n", None) if b["scheduler"] == "rad" else None
        extra = ",".join(f"{k}={v}" for k, v in opts.items())
        rows.append([b["tileset"], b["scheduler"] + (f"[{extra}]" if extra else ""), str(b["r"]),
                     b["workload_variant"], NA if b["class_1"] == "" else _num(b["share_1"], ".2f"),
                     _num(b["boundary"]), f"[{_num(b['ci_low'])}, {_num(b['ci_high'])}]",
                     _num(b["lambda_star"]), _num(b["ratio"], ".4f"), _num(b["theorem2"]),
                     NA if n is None else (f"{n} auto" if auto else n),
                     _num(_n_target(b, table, auto, bool(spec.two_class))), _num(b["dtmc_boundary"]),
                     "; ".join(flags(b))])
    head = ["tile set", "scheduler", "r", "var", "share", "boundary", f"{spec.confidence:.0%} CI", "lambda*",
            "ratio", "lam*(1-e)", "RAD n", "n target", "DTMC (RAD)", "flags"]
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    left = {0, 1, 3, 13}

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if k in left else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    header = line(head)
    out = [header, "-" * len(header), *(line(r) for r in rows)]
    return out + legend(table, spec, auto)


def legend(table: list[dict], spec, auto: bool) -> list[str]:
    """The legend under the table: every column, and every flag the table shows."""
    rad = any(b["scheduler"] == "rad" for b in table)
    terms = [
        (NA, "does not apply to the row (Theorem 2 to raw prompts, RAD's n and the DTMC to other "
             "schedulers, shares to one-class sweeps)"),
        ("var", "pad: prompts padded to multiples of t*_lcm (Assumption 3); raw: as drawn"),
        ("boundary", "req/s; mean throughput of the saturation runs: the stability boundary"),
        ("lambda*", "req/s; Theorem 1's bound r / T_bar^R: no scheduler is stable above it"),
        ("ratio", "boundary / lambda*"),
        ("lam*(1-e)", f"req/s; Theorem 2's guarantee lambda* (1 - eps), eps = {spec.epsilon:g} (padded "
                      "prompts)"),
        ("RAD n", "RAD's requests per cycle" + ("; auto: the smallest n whose executed cycle drift is "
                                                "negative at the n target" if auto else " (--option rad.n)")),
    ]
    if auto and rad:
        terms.append(("n target", "req/s; lambda* (1 - eps) of the padded workload, the rate RAD's n = auto "
                                  "is tuned to be stable at. RAD is tuned to that target, not to lambda*: "
                                  "its boundary lies near it and can lie below another scheduler's "
                                  "(Sarathi-Serve's); a larger n (--option rad.n=N) brings it closer to "
                                  "lambda* (Theorem 2)"))
    terms.append(("DTMC (RAD)", "req/s; RAD's cycle-DTMC prediction r E[K]/E[T] at its n"))
    out = ["", "legend:", *(_wrap(term, text, 14) for term, text in terms)]
    shown = [f for f in FLAGS if any(f in flags(b) for b in table)]
    if shown:
        out += ["flags:", *(_wrap(f + ":", FLAGS[f], 4, inline=True) for f in shown)]
    return out


def _wrap(term: str, text: str, indent: int, inline: bool = False) -> str:
    """``term`` and its explanation ``text``, wrapped at :data:`WIDTH` with continuation lines
    indented by ``indent``; the text starts after the term (``inline``) or at column ``indent``."""
    first = f"  {term} " if inline else f"  {term:<{indent - 2}}"
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=" " * indent)
