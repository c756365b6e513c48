"""The one way a named batch-time model is built: a :class:`CostSpec` in, a
:class:`~theory.cost.CostModel` out.

A spec names a GPU (a preset key or alias, or a key of a user ``gpu_file``), optionally restricted
to some of its tiles, a model (a preset, or a key of a user ``model_file``) and the layer ``mode``.
The tile restriction has one field, ``tiles``; the command-line spelling ``"a100:128x128"`` is
split into ``gpu="a100"`` and ``tiles="128x128"`` when the spec is made. Every command, study,
sweep point and paper check resolves names through :func:`cost_model`; only code that constructs
a synthetic GPU or model object of its own calls :func:`theory.cost.build_cost_model` directly.

In ``real`` mode a GPU preset with a shipped calibration (:mod:`theory.validation.presets_fit`, fitted to
public measured profiles) is used calibrated, and any other preset is its roofline with the cost
terms that need no fit (``[real_mode]`` of ``gpus.toml``: :func:`theory.hardware.real_mode_terms`);
``paper`` mode always uses the roofline presets, so the paper's numbers stay exact.

Cost terms beyond Eq. 2 (:mod:`theory.terms`) are not spec fields: they are stated in the GPU
and model TOML files the spec names (the tensor-parallel degree ``tp`` with the interconnect in the
GPU file), so the file digests that key the cache here and in the runner already cover them.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.2 (the model a GPU and a layer determine).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from theory.cost import CostModel, build_cost_model
from theory.errors import FieldError


@dataclass(frozen=True)
class CostSpec:
    """What a batch-time model is built from.

    Attributes
    ----------
    gpu : str
        GPU preset key or alias, or a key of ``gpu_file``; ``"key:tiles"`` also restricts the tiles.
    model : str
        Model preset, or a key of ``model_file``.
    mode : str
        ``"paper"`` (the paper's layer) or ``"real"`` (the served architecture).
    tiles : str or None
        Restrict the GPU to these tiles, e.g. ``"128x128"`` or ``"256x128x32,128x64"``; ``"t*"``
        keeps Assumption 1's optimal tile alone (Eq. 7 with one common tile, t*).
    gpu_file, model_file : str or None
        User TOML files adding or overriding GPU or model profiles (``base =`` inheritance).
    """

    gpu: str = "a100"
    model: str = "mistral-7b"
    mode: str = "paper"
    tiles: str | None = None
    gpu_file: str | None = None
    model_file: str | None = None

    def __post_init__(self):
        if not isinstance(self.gpu, str) or not self.gpu.strip():
            raise FieldError("gpu", self.gpu, "a GPU name such as 'a100'")
        base, sep, restriction = self.gpu.strip().partition(":")
        if sep:
            if self.tiles and self.tiles != restriction:
                raise FieldError("tiles", self.tiles,
                                 f"no second tile restriction: the GPU name {self.gpu!r} already has one")
            object.__setattr__(self, "gpu", base)
            object.__setattr__(self, "tiles", restriction or None)

    @property
    def tileset(self) -> str:
        """The GPU with its restriction in the command-line spelling (``"a100:128x128"``)."""
        return f"{self.gpu}:{self.tiles}" if self.tiles else self.gpu


def file_digest(path: str | Path) -> str:
    """SHA-256 prefix of a file's bytes: names a user file by its content, not its path."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def cost_model(spec: CostSpec) -> CostModel:
    """The batch-time model (Eq. 2-7) a spec describes, cached per process by the spec and the
    content of its files."""
    digests = tuple(file_digest(p) if p else None for p in (spec.gpu_file, spec.model_file))
    return _cost_model(spec, digests)


@cache
def _cost_model(spec: CostSpec, _digests: tuple) -> CostModel:
    from theory.hardware import get_gpu
    from theory.models import get_model

    gpu = get_gpu(spec.gpu, spec.gpu_file, calibrated=spec.mode == "real")
    if spec.tiles:
        gpu = gpu.restrict(str(gpu.optimal_tile()) if spec.tiles == "t*" else spec.tiles)
    return build_cost_model(gpu, get_model(spec.model, spec.model_file), spec.mode)
