"""Scoring whole batches: Eq. 7 and the stack law fitted per GPU x model x TP (held-out shapes
by folds), the per-GPU verdicts, and whether any one law per group reaches the targets in sample."""

from __future__ import annotations

import numpy as np

from theory.validation.batch_orderings import ordering_pairs, ordering_summary
from theory.validation.batches import (
    BATCH_OPERATIONS,
    RANK_OPERATIONS,
    batch_cost_model,
    batch_folds,
    batch_parts,
)
from theory.validation.errors import ErrorStats, abs_rel_error
from theory.validation.results import SCHEMES, Report, Settings, not_predicted, stats_row
from theory.validation.stack_law import StackLaw, fit_stack_law
from theory.validation.stack_law_reach import reach_in_sample
from theory.validation.targets import TARGETS, target_check

BATCH_NOTE = ("whole batches: 'tokens' is the shipped preset under the stack law T = c + a_compute C + "
              "a_allreduce R + a_large L (C: Eq. 7 without its all-reduces, R: their time, L: the "
              "bandwidth time of their bytes beyond 32 MiB per message), fitted per GPU x model x TP "
              "on the other batch shapes: k folds, each holding out every k-th interior shape of a "
              "series (theory.validation.batches.batch_folds, theory.validation.stack_law.fit_stack_law); "
              "the first and "
              "last shape of each series are trained on only")


def score_batches(report: Report, profile: str, rows: np.ndarray, s: Settings) -> None:
    """Whole batches, and ranks' shares of them (:data:`theory.validation.batches.RANK_OPERATIONS`: scored
    against Eq. 7 without its all-reduces, which the rank did not run), under Eq. 7 and the stack law
    fitted per GPU x model x TP x kind (whole or rank), each interior shape predicted by the fold that
    holds it out (:func:`theory.validation.batches.batch_folds`); and the law fitted on every shape
    (reported, and scored in sample), and whether any one law per group of the form meets the targets in
    sample (:func:`theory.validation.stack_law_reach.reach_in_sample`)."""
    ops = (*BATCH_OPERATIONS, *RANK_OPERATIONS)
    rows = rows[np.isin(rows["operation"], ops)]
    rank = np.isin(rows["operation"], tuple(RANK_OPERATIONS))
    compute, allreduce, large = (np.full(rows.size, np.nan) for _ in range(3))
    keys = sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(), rows["tp"].tolist(), strict=True)))
    for g, m, tp in keys:
        sel = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp)
        cm, reason = batch_cost_model(g, m, tp, gpu_file=s.gpu_file, model_file=s.model_file)
        if cm is None:
            not_predicted(report, profile, rows[sel], reason)
            continue
        compute[sel], allreduce[sel], large[sel] = batch_parts(cm, rows[sel])
    allreduce[rank], large[rank] = 0.0, 0.0
    pairs = ordering_pairs(profile, rows, compute, allreduce, large)
    report.batch_orderings += pairs
    pred = compute + allreduce
    stacked, in_sample = np.full(rows.size, np.nan), np.full(rows.size, np.nan)
    seconds = rows["seconds"]
    law_groups: dict[str, list] = {}  # per GPU: (parts, measured) of each group one law is fitted on
    for g, m, tp, is_rank in sorted(set(zip(rows["gpu"].tolist(), rows["model"].tolist(),
                                            rows["tp"].tolist(), rank.tolist(), strict=True))):
        on = ((rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rank == is_rank)
              & np.isfinite(pred))
        if not on.any():
            continue
        folds = np.full(rows.size, -1)
        folds[on] = batch_folds(rows[on], s.every)
        for j in sorted(set(folds[on].tolist()) - {-1}):
            held, train = folds == j, on & (folds != j)
            law = fit_stack_law(seconds[train], compute[train], allreduce[train], large[train])
            stacked[held] = law.time(compute[held], allreduce[held], large[held])
        law = fit_stack_law(seconds[on], compute[on], allreduce[on], large[on])
        in_sample[on] = law.time(compute[on], allreduce[on], large[on])
        law_groups.setdefault(g, []).append((np.column_stack([compute[on], allreduce[on], large[on]]),
                                             seconds[on]))
        for op in ops:
            part = on & (folds >= 0) & (rows["operation"] == op)
            if not part.any():
                continue
            before = ErrorStats.of(abs_rel_error(seconds[part], pred[part]))
            after = ErrorStats.of(abs_rel_error(seconds[part], stacked[part]))
            report.batch_stack.append({
                "profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                "overhead_s": law.overhead_s, "a_compute": law.a_compute, "a_allreduce": law.a_allreduce,
                "a_large": law.a_large, "n": int(on.sum()), "folds": s.every,
                "n_held_out": int(part.sum()), "before_median": before.median, "before_p90": before.p90,
                "after_median": after.median, "after_p90": after.p90})
    errors = {**{k: np.full(rows.size, np.nan) for k in SCHEMES},
              "shipped": abs_rel_error(seconds, pred),
              "tokens": abs_rel_error(seconds, stacked)}
    ceiling = abs_rel_error(seconds, in_sample)
    for g in sorted(set(rows["gpu"].tolist())):  # the held-out rows of every model and TP, pooled per GPU
        on = rows["gpu"] == g
        st = ErrorStats.of(errors["tokens"][on & np.isfinite(stacked)])
        if st.n:
            checks = {name: target_check(TARGETS[name], value, "tokens")
                      for name, value in (("tokens_median", st.median), ("tokens_p90", st.p90))}
            fit_all = ErrorStats.of(ceiling[on & np.isfinite(in_sample)])
            report.batch_verdicts.append({
                "gpu": g, "profile": profile, "n": st.n, "targets": checks,
                "holds": all(c["holds"] for c in checks.values()),
                "kinds": sorted(set(rows["operation"][on & np.isfinite(stacked)].tolist())),
                "in_sample": {"n": fit_all.n, "median": fit_all.median, "p90": fit_all.p90},
                "in_sample_reach": _reach(law_groups[g], fit_all),
                "orderings": ordering_summary([p for p in pairs if p["gpu"] == g], TARGETS["tokens_p90"])})
    for g, m, tp in keys:
        for op in ops:
            part = (rows["gpu"] == g) & (rows["model"] == m) & (rows["tp"] == tp) & (rows["operation"] == op)
            if not part.any() or not np.isfinite(pred[part]).any():
                continue
            report.groups.append({"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op,
                                  "n": int(part.sum()), **stats_row(errors, part), "note": BATCH_NOTE})


def _reach(groups: list, least_squares: ErrorStats) -> dict:
    """Whether one stack law per group meets both held-out-token targets on every row: the
    least-squares laws where they do (their figures), else
    :func:`theory.validation.stack_law_reach.reach_in_sample`."""
    median, p90 = TARGETS["tokens_median"], TARGETS["tokens_p90"]
    if least_squares.median <= median and least_squares.p90 <= p90:
        return {"verdict": "reachable", "n": least_squares.n, "median": least_squares.median,
                "p90": least_squares.p90,
                "solver": "least squares (theory.validation.stack_law.fit_stack_law)"}
    return reach_in_sample(groups, median, p90, StackLaw.LOWER)


__all__ = [
    "BATCH_NOTE",
    "score_batches",
]
