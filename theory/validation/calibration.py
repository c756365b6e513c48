"""A calibrated profile as a record: its fitted parameters, its error, the identifiability
rule both fits share, and the profile TOML it writes (:mod:`theory.validation.calibrate`).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7 and Section 3.2.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tomli_w

from theory.io import atomic_write_text

SVD_TOL = 1e-6      # smallest admissible singular value of the unit-norm design columns
LOWER = 1e-9        # lower bound of a time coefficient, relative to its reference value


@dataclass(frozen=True)
class Parameter:
    """One fitted profile quantity.

    Attributes
    ----------
    name, unit : str
    value, base : float
        Fitted and base-profile values.
    identified : bool
        Whether the data determine it; if not, ``value`` is the base value or a bound.
    rel_se : float or None
        Relative standard error of the linearised fit (None when not estimable).
    note : str
    """

    name: str
    unit: str
    value: float
    base: float
    identified: bool
    rel_se: float | None = None
    note: str = ""


@dataclass(frozen=True)
class FitOptions:
    """What a calibration fits, and how (:func:`theory.validation.calibrate.calibrate`,
    :func:`theory.validation.gemm_fit.fit_gemm`).

    Attributes
    ----------
    tiles : str, optional
        Fit only these tiles (see :meth:`theory.hardware.GPU.restrict`); the profile lists them.
        GeMM timings only.
    overhead : bool
        Fit the fixed time: ``c_0`` per GeMM (else 0, as in Eq. 2), or a batch's ``overhead_s``
        (else the base value).
    key : str, optional
        The new profile's key (default ``"<base>-calibrated"``).
    starts, seed : int
        Number of seeded random starting points of the GeMM search, and their seed.
    floor, waves : bool, optional
        Model each GeMM with the ``memory_floor`` and ``waves`` terms (:mod:`theory.terms`);
        default: as the base profile switches them. With the floor, the bandwidth is one more
        rate of the alternating fit (its points are those where the floor binds); its start is the
        base profile's ``eta_mem B``. The written profile switches the terms on as fitted and
        states the bandwidth as ``eta_mem`` (which also sets the GeMV rates of Eq. 3 and 5 that
        the profile does not pin: one achievable DRAM bandwidth per GPU).
    l2 : bool, optional
        Model each tile with the ``l2_bandwidth_gbs`` term (:mod:`theory.terms`): its time is at
        least its operand bytes (:func:`theory.validation.gemm_search.tile_traffic`) over the L2
        bandwidth, one more rate of the alternating fit (its points are those where the traffic
        binds on the fastest tile); start: the base profile's value, else three times its
        ``eta_mem B``. Default: as the base profile switches it.
    keep_t_star : bool, optional
        Bound every tile's FLOP rate by that of the base profile's ``t*`` (Assumption 1;
        :mod:`theory.validation.gemm_fit`, "Bounds"). Default: with the L2 term. Every tile is
        always bounded by the dense FP16 peak.
    """

    tiles: str | None = None
    overhead: bool = True
    key: str | None = None
    starts: int = 8
    seed: int = 0
    floor: bool | None = None
    waves: bool | None = None
    l2: bool | None = None
    keep_t_star: bool | None = None


@dataclass(frozen=True)
class FitError:
    """Error of predicted against measured times: RMSE (s), relative RMSE, max relative error."""

    rmse_s: float
    rel_rmse: float
    max_rel_error: float

    @classmethod
    def of(cls, measured: np.ndarray, predicted: np.ndarray) -> FitError:
        rel = predicted / measured - 1.0
        return cls(float(np.sqrt(np.mean((predicted - measured) ** 2))),
                   float(np.sqrt(np.mean(rel ** 2))), float(np.abs(rel).max()))


@dataclass(frozen=True, eq=False)
class Calibration:
    """A fitted profile with its parameters and its error.

    Attributes
    ----------
    kind : str
        ``"gemm"`` or ``"batch"``.
    key, base_key : str
        The new profile's key and the preset it inherits from.
    parameters : tuple of Parameter
    profile : dict
        The ``[gpus.<key>]`` table, loadable by :func:`theory.hardware.load_gpus`.
    measured, predicted, base_predicted : ndarray
        Measured seconds, and the calibrated and the base profile's predictions.
    labels : tuple of str
        One description per point.
    notes : tuple of str
    """

    kind: str
    key: str
    base_key: str
    parameters: tuple[Parameter, ...]
    profile: dict
    measured: np.ndarray
    predicted: np.ndarray
    base_predicted: np.ndarray
    labels: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def residuals(self) -> np.ndarray:
        """Relative residuals ``predicted / measured - 1``, one per point."""
        return self.predicted / self.measured - 1.0

    @property
    def error(self) -> FitError:
        return FitError.of(self.measured, self.predicted)

    @property
    def base_error(self) -> FitError:
        """The uncalibrated base profile's error on the same data."""
        return FitError.of(self.measured, self.base_predicted)

    def worst(self, k: int = 5) -> np.ndarray:
        """Indices of the ``k`` points with the largest relative error."""
        return np.argsort(-np.abs(self.residuals), kind="stable")[:k]

    def as_dict(self) -> dict:
        return {
            "kind": self.kind, "key": self.key, "base": self.base_key,
            "parameters": [asdict(p) for p in self.parameters],
            "error": asdict(self.error), "base_error": asdict(self.base_error),
            "worst": [{"label": self.labels[i], "measured_s": float(self.measured[i]),
                       "predicted_s": float(self.predicted[i]), "rel_error": float(self.residuals[i])}
                      for i in self.worst()],
            "residuals": self.residuals.tolist(), "notes": list(self.notes),
            "profile": {"gpus": {self.key: self.profile}},
        }


def standard_errors(design: np.ndarray, residual: np.ndarray) -> np.ndarray | None:
    """Standard errors of linear least-squares coefficients, in the design's units."""
    n, p = design.shape
    if n <= p:
        return None
    cov = float(residual @ residual) / (n - p) * np.linalg.pinv(design.T @ design)
    return np.sqrt(np.clip(np.diag(cov), 0.0, None))


def identifiable_columns(design: np.ndarray, order) -> list[int]:
    """The columns admitted in ``order`` while the admitted columns, each scaled to unit norm, have
    a smallest singular value above 1e-6; zero columns are never admitted."""
    norms = np.linalg.norm(design, axis=0)
    free: list[int] = []
    for j in order:
        cols = [*free, j]
        if norms[j] > 0 and np.linalg.svd(design[:, cols] / norms[cols], compute_uv=False).min() > SVD_TOL:
            free.append(j)
    return free


def profile_toml(cal: Calibration, source: str = "") -> str:
    """The calibrated profile as TOML for :func:`theory.hardware.load_gpus`, after a comment header."""
    err, base = cal.error, cal.base_error
    origin = f" from {source}" if source else ""
    lines = [f"# GPU profile fitted by `llmq calibrate` to {cal.kind} timings{origin}.",
             f"# Use with: --gpu-file <this file> --gpu {cal.key}   (base preset: {cal.base_key})",
             f"# Fit: relative RMSE {err.rel_rmse:.2%}, max relative error {err.max_rel_error:.2%}, "
             f"RMSE {err.rmse_s:.3g} s",
             f"# Base preset on the same data: relative RMSE {base.rel_rmse:.2%}, "
             f"max relative error {base.max_rel_error:.2%}",
             *(f"# {n}" for n in cal.notes)]
    return "\n".join(lines) + "\n\n" + tomli_w.dumps({"gpus": {cal.key: cal.profile}})


def write_profile(cal: Calibration, path: str | Path, source: str = "") -> Path:
    """Write :func:`profile_toml` atomically (:func:`theory.io.atomic_write_text`)."""
    return atomic_write_text(path, profile_toml(cal, source))


__all__ = [
    "LOWER",
    "SVD_TOL",
    "Calibration",
    "FitError",
    "FitOptions",
    "Parameter",
    "identifiable_columns",
    "profile_toml",
    "standard_errors",
    "write_profile",
]
