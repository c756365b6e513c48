"""The mixture-of-experts part of ``llmq validate``: the MoE block of the measured profile scored
(:func:`theory.validation.moe_profile.score_moe_profile`) as rows of the report, and their console
lines, JSON and Markdown. Nothing is fitted here."""

from __future__ import annotations

from dataclasses import dataclass

from theory.validation.moe_profile import MOE_PROFILE, MoEScore, score_moe_profile
from theory.validation.results import Report, Settings

# the acceptance targets of the MoE block (issue: per-layer MoE times within 10% median, 20% p90)
TARGETS = {"median": 0.10, "p90": 0.20}
PREDICTIONS = {
    "gemms": "router GeMM + grouped expert GeMMs of one layer at the forced loads (theory.moe)",
    "block": "gemms + the block's element-wise work at Eq. 7's non-linear rate "
    "(Model.moe_elements_per_token)",
}
COLUMNS = {
    "profile": "the profile file",
    "gpu, model": "the presets that predict (real mode)",
    "prediction": "gemms or block (PREDICTIONS)",
    "rows": "all: every row (nothing is fitted on them); held_out: the held-out token counts of the dense "
    "scores (every 4th distinct count)",
    "n, median, p90": "rows and |predicted/measured - 1| statistics",
    "met": "median <= 10% and p90 <= 20%",
}


def moe_rows(score: MoEScore) -> list[dict]:
    """One report row per prediction and row set of ``score``."""
    out = []
    for prediction in PREDICTIONS:
        for held in (False, True):
            st = score.stats(prediction, held_out_only=held)
            met = st.n > 0 and st.median <= TARGETS["median"] and st.p90 <= TARGETS["p90"]
            out.append(
                {
                    "profile": MOE_PROFILE.name,
                    "gpu": score.gpu,
                    "model": score.model,
                    "prediction": prediction,
                    "rows": "held_out" if held else "all",
                    "n": st.n,
                    "median": st.median,
                    "p90": st.p90,
                    "met": bool(met),
                }
            )
    return out


@dataclass(frozen=True)
class MoEJob:
    """The MoE profile scored on ``gpu`` (:func:`moe_rows`): a job of :mod:`theory.validation.fan_out`."""

    gpu: str
    cost: float = 1.0

    def run(self) -> list[dict]:
        return moe_rows(score_moe_profile(self.gpu))


def job(settings: Settings) -> MoEJob | None:
    """The MoE scoring of a run under ``settings``, or None when the GPU or model filters leave
    its GPU or model out, or a user file replaces the presets."""
    s = settings
    score_gpu, score_model = "rtxpro6000", "qwen3-30b-a3b"
    if (s.gpus and score_gpu not in s.gpus) or (s.models and score_model not in s.models):
        return None
    if s.gpu_file or s.model_file:
        return None
    return MoEJob(score_gpu)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def console_lines(report: Report) -> list[str]:
    """Lines for the console table (empty when the MoE profile was not scored)."""
    if not report.moe:
        return []
    out = [
        "",
        "mixture of experts, one MoE block per layer (median/p90 of |predicted/measured - 1|; "
        "targets 10%/20%):",
    ]
    out += [
        f"{r['gpu']:<11}{r['model']:<15}{r['prediction']:<7}{r['rows']:<9}{r['n']:>4}  "
        f"{_pct(r['median'])}/{_pct(r['p90'])}  {'met' if r['met'] else 'MISSED'}"
        for r in report.moe
    ]
    return out


def json_part(report: Report) -> dict:
    """The report's ``moe`` keys for the JSON document."""
    return {"moe": report.moe, "moe_predictions": PREDICTIONS, "moe_columns": COLUMNS, "moe_targets": TARGETS}


def markdown_lines(report: Report) -> list[str]:
    """A Markdown section (empty when the MoE profile was not scored)."""
    if not report.moe:
        return []
    out = [
        "",
        "## Mixture of experts: the MoE block per layer",
        "",
        f"`{MOE_PROFILE.name}`, every `moe` row predicted with nothing fitted on it "
        "(theory.validation.moe_profile). Predictions:",
        "",
    ]
    out += [f"- `{k}`: {v}" for k, v in PREDICTIONS.items()]
    out += [
        "",
        "| GPU | model | prediction | rows | n | median | p90 | targets 10%/20% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {r['gpu']} | {r['model']} | {r['prediction']} | {r['rows']} | {r['n']} | "
        f"{_pct(r['median'])} | {_pct(r['p90'])} | {'met' if r['met'] else 'missed'} |"
        for r in report.moe
    ]
    return out
