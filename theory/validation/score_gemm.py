"""Scoring the GeMM rows: every scheme's prediction of each row, its errors per group, the
series for the plots, the fits, and the per-GPU verdicts and pooled statistics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from theory.builder import CostSpec, cost_model
from theory.cost import CostModel, build_cost_model
from theory.hardware import GPU, get_gpu, gpu_names
from theory.models import get_model
from theory.validation.errors import abs_rel_error
from theory.validation.gemm import (
    NO_PAPER_COUNTERPART,
    NOT_PAPER_DIVISIBLE,
    GemmRows,
    GpuFit,
    fit_gpu,
    measured_predictions,
    model_folds,
    paper_shapes,
    predict_paper,
    predict_rows,
    token_split,
)
from theory.validation.results import SCHEMES, Report, Settings, stats_row
from theory.validation.targets import LAWS, default_law, target_checks

TOKEN_BANDS = ((1, 16), (17, 128), (129, 1024), (1025, None))  # inclusive; None: no upper end


@dataclass(frozen=True, eq=False)
class FitJob:
    """One calibration of a validation run: :func:`theory.validation.gemm.fit_gpu` of ``base`` on
    the rows ``train`` under the settings ``s`` (a job of :mod:`theory.validation.fan_out`)."""

    base: GPU
    train: GemmRows
    s: Settings

    @property
    def cost(self) -> float:
        return float(min(len(self.train), self.s.max_train) * len(self.base.tiles))

    def run(self) -> GpuFit:
        s = self.s
        return fit_gpu(self.base, self.train, max_train=s.max_train, seed=s.seed, model_file=s.model_file,
                       floor=s.floor, waves=s.waves, l2=s.l2)


def fit_jobs(data: GemmRows, s: Settings) -> list[tuple[str, FitJob]]:
    """The calibrations :func:`score_gemm` needs for the GeMM rows ``data``, by the name of their
    fit in :attr:`theory.validation.results.Report.fits`: per GPU the held-out-token fit
    (``"<gpu> tokens"``) and one per left-out model (``"<gpu> without <model>"``)."""
    jobs = []
    for g in sorted(set(data.gpu.tolist())):
        rows = data.take(data.gpu == g)
        base = get_gpu(g, s.gpu_file)
        jobs.append((f"{g} tokens", FitJob(base, rows.take(~token_split(rows.tokens, s.every)), s)))
        jobs += [(f"{g} without {m}", FitJob(base, rows.take(~mask), s))
                 for m, mask in model_folds(rows.model)]
    return jobs


def score_gemm(report: Report, profile: str, data: GemmRows, s: Settings,
               fits: Callable[[str], GpuFit] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Errors of every scheme for the GeMM rows ``data``, and where the calibrated tile model (the
    token-split fit at every row) predicts less than measured; fills groups, series and fits.
    ``fits`` gives the calibration of each name of :func:`fit_jobs` (computed here when None)."""
    if fits is None:
        fits = dict((name, job.run()) for name, job in fit_jobs(data, s)).__getitem__
    pred = {k: np.full(len(data), np.nan) for k in SCHEMES}
    calibrated = np.full(len(data), np.nan)  # the token-split fit on every row, for plots and steps
    for g in sorted(set(data.gpu.tolist())):
        on = data.gpu == g
        rows = data.take(on)
        base = get_gpu(g, s.gpu_file)

        def shipped(m, mode="real", g=g):
            return cost_model(CostSpec(g, m, mode, None, s.gpu_file, s.model_file))

        idx = np.flatnonzero(on)
        pred["roofline"][idx] = predict_rows(
            rows, lambda m, base=base: build_cost_model(base, get_model(m, s.model_file), "real"))
        pred["shipped"][idx] = predict_rows(rows, shipped)
        pred["paper"][idx] = predict_paper(rows, lambda m: shipped(m, "paper"), s.model_file)
        held = token_split(rows.tokens, s.every)
        fit = fits(f"{g} tokens")
        report.fits[f"{g} tokens"] = _fit_summary(fit)
        calibrated[idx] = predict_rows(rows, _fitted(fit, s))
        pred["tokens"][idx[held]] = calibrated[idx[held]]
        for m, mask in model_folds(rows.model):
            fit = fits(f"{g} without {m}")
            report.fits[f"{g} without {m}"] = _fit_summary(fit)
            pred["models"][idx[mask]] = predict_rows(rows.take(mask), _fitted(fit, s))
        _measured_schemes(report, g, rows, idx, held, pred)
    errors = {k: abs_rel_error(data.seconds, v) for k, v in pred.items()}
    below = calibrated < data.seconds
    keys = sorted(set(zip(data.gpu.tolist(), data.model.tolist(), data.tp.tolist(), data.operation.tolist(),
                          strict=True)))
    for g, m, tp, op in keys:
        sel = (data.gpu == g) & (data.model == m) & (data.tp == tp) & (data.operation == op)
        row = {"profile": profile, "gpu": g, "model": m, "tp": tp, "operation": op, "n": int(sel.sum()),
               **stats_row(errors, sel)}
        notes = []
        if not row["paper_n"]:
            counterpart = paper_shapes(get_model(m, s.model_file), op, tp)
            notes.append(f"paper: {NOT_PAPER_DIVISIBLE if counterpart else NO_PAPER_COUNTERPART}")
        if not row["models_n"]:
            notes.append(f"models: no other model of {g} in the data to calibrate on")
        row["note"] = "; ".join(notes)
        report.groups.append(row)
        order = np.argsort(data.tokens[sel], kind="stable")
        report.series[(g, m, tp, op)] = {"token_count": data.tokens[sel][order],
                                         "measured": data.seconds[sel][order],
                                         **{k: pred[k][sel][order] for k in SCHEMES},
                                         "calibrated": calibrated[sel][order]}
    return errors, below


def _measured_schemes(report: Report, g: str, rows: GemmRows, idx: np.ndarray, held: np.ndarray,
                      pred: dict[str, np.ndarray]) -> None:
    """The ``measured`` and ``measured_law_models`` predictions of GPU ``g``'s rows, and their coverage."""
    values, covered = measured_predictions(rows.take(~held), rows.take(held), pred["tokens"][idx[held]])
    pred["measured_law"][idx[held]] = values
    n_models, c_models = 0, 0
    for _, mask in model_folds(rows.model):
        values, cov = measured_predictions(rows.take(~mask), rows.take(mask), pred["models"][idx[mask]])
        pred["measured_law_models"][idx[mask]] = values
        n_models, c_models = n_models + int(mask.sum()), c_models + int(cov.sum())
    for scheme, n, c in (("measured_law", int(held.sum()), int(covered.sum())),
                         ("measured_law_models", n_models, c_models)):
        report.measured_coverage.append({"gpu": g, "scheme": scheme, "n": n, "interpolated": c,
                                         "fallback": n - c})


def _fitted(fit: GpuFit, s: Settings) -> Callable[[str], CostModel]:
    return lambda m: build_cost_model(fit.gpu, get_model(m, s.model_file), "real")


def _fit_summary(fit: GpuFit) -> dict:
    err = fit.calibration.error
    won = [p.name for p in fit.calibration.parameters if p.note.startswith("fastest tile")]
    return {"n_train": fit.n_train, "c0_s": fit.c0, "train_rel_rmse": err.rel_rmse,
            "memory_floor": fit.gpu.terms.memory_floor, "waves": fit.gpu.terms.waves,
            "l2_bandwidth_gbs": (None if fit.gpu.terms.l2_bandwidth is None
                                 else fit.gpu.terms.l2_bandwidth / 1e9),
            "eta_mem": fit.gpu.eta_mem,
            "winning_tiles": won,
            "mu": {str(t): float(m) for t, m in zip(fit.gpu.tiles, fit.gpu.mu, strict=True)}}


def pool_gpus(report: Report, errors: dict[str, np.ndarray], data: GemmRows, tile_below: np.ndarray) -> None:
    """Per-GPU verdicts, per GPU x TP and per GPU x token band statistics of the GeMM rows;
    ``tile_below`` marks the rows the calibrated tile model under-predicts."""
    for g in report.settings.gpus or gpu_names():
        on = data.gpu == g
        if not on.any():
            report.gpus.append({"gpu": g, "status": "roofline, uncalibrated (no public data)", "n": 0,
                                **stats_row(errors, on), "targets": {}, "targets_hold": None})
            continue
        row = {"gpu": g, "status": "measured (public GeMM profiles)", "n": int(on.sum()),
               **stats_row(errors, on), "law": default_law(g, report.settings.gpu_file)}
        row["targets"] = target_checks(row, row["law"])
        row["other_law"] = next(law for law in LAWS if law != row["law"])
        row["other_targets"] = target_checks(row, row["other_law"])
        verdicts = [c["holds"] for c in row["targets"].values()]
        row["targets_hold"] = None if None in verdicts else all(verdicts)
        report.gpus.append(row)
        for tp in sorted(set(data.tp[on].tolist())):
            sel = on & (data.tp == tp)
            report.summary.append({"gpu": g, "tp": tp, "n": int(sel.sum()), **stats_row(errors, sel)})
        for lo, hi in TOKEN_BANDS:
            sel = on & (data.tokens >= lo) & (data.tokens <= (hi if hi is not None else np.inf))
            if sel.any():
                band = f"{lo}-{hi}" if hi is not None else f">= {lo}"
                below = float(np.mean(tile_below[sel]))
                report.bands.append({"gpu": g, "tokens": band, "n": int(sel.sum()),
                                     **stats_row(errors, sel), "tile_below": below})


__all__ = [
    "TOKEN_BANDS",
    "FitJob",
    "fit_jobs",
    "pool_gpus",
    "score_gemm",
]
