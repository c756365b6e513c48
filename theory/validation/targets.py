"""The acceptance targets on the pooled errors of one GPU, the law each GPU is judged under,
and the checks of the targets."""

from __future__ import annotations

from theory.hardware import get_gpu

TARGETS = {  # acceptance targets on the pooled absolute relative errors of one GPU
    "tokens_median": 0.05,
    "tokens_p90": 0.12,
    "models_median": 0.10,
}
LAWS = {  # the schemes that score a law on held-out token counts and on held-out models
    "measured profile": {"tokens": "measured_law", "models": "measured_law_models"},
    "tile model": {"tokens": "tokens", "models": "models"},
}


def default_law(gpu: str, gpu_file: str | None = None) -> str:
    """The law real mode prices ``gpu``'s linear GeMMs with: ``"measured profile"`` where its
    preset states a ``gemm_profile`` (``theory/data/measured_gpus.toml``, ``real_mode_default``),
    else ``"tile model"`` (a key of :data:`LAWS`)."""
    profiled = get_gpu(gpu, gpu_file, calibrated=True).terms.gemm_profile is not None
    return "measured profile" if profiled else "tile model"


def target_checks(row: dict, law: str) -> dict[str, dict]:
    """The acceptance targets (:data:`TARGETS`) checked on the pooled statistics ``row`` of one GPU
    under ``law`` (a key of :data:`LAWS`): per target its limit, value, scheme and whether it holds
    (None when the scheme scored no row)."""
    checks = {}
    for name, limit in TARGETS.items():
        split, stat = name.split("_")
        scheme = LAWS[law][split]
        checks[name] = target_check(limit, row[f"{scheme}_{stat}"], scheme)
    return checks


def target_check(limit: float, value: float | None, scheme: str) -> dict:
    """One acceptance target: its limit, the value ``scheme`` reached and whether it holds (None
    when the scheme scored no row)."""
    return {"target": limit, "value": value, "scheme": scheme,
            "holds": None if value is None else bool(value <= limit)}


__all__ = [
    "LAWS",
    "TARGETS",
    "default_law",
    "target_check",
    "target_checks",
]
