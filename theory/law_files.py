"""A GPU and model file whose batch time is Li, Dai and Peng's staircase law, as TOML text.

The checks and examples that run the simulator on a stated law (rather than on a GPU preset) write
it in the user's own file format (``[gpus.<key>.linear_law]``, :class:`theory.terms.LinearLaw`)
and load it as a user would. :class:`StaircaseLawFile` is that file: one GPU whose linear time is
``c + a ceil(tau / b0)`` for a batch of ``tau >= 1`` tokens, and one model with attention off, so
that the law is the whole batch time.

References
----------
Li, Dai, Peng (2025), arXiv:2504.07347, Fig. 4 (staircase batch times).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from theory.io import atomic_write_text


@dataclass(frozen=True)
class StaircaseLawFile:
    """The TOML file of a staircase-law GPU and an attention-free model.

    Attributes
    ----------
    gpu_key, model_key : str
        The keys the file defines (``[gpus.<gpu_key>]``, ``[models.<model_key>]``).
    c, a : float
        The law's fixed and per-step seconds.
    b0 : int
        The step width in tokens.
    base_gpu, base_model : str
        The presets the two tables inherit everything else from.
    overhead_s : float or None
        The GPU's fixed time per batch, written only when given (the base preset's otherwise).
    note : str
        The comment the file opens with (one ``#`` line per line).
    """

    gpu_key: str
    model_key: str
    c: float
    a: float
    b0: int
    base_gpu: str = "l4"
    base_model: str = "mistral-7b"
    overhead_s: float | None = None
    note: str = ""

    def toml(self) -> str:
        """The file's text."""
        lines = [f"# {line}" for line in self.note.splitlines()]
        lines += [f"[gpus.{self.gpu_key}]", f'base = "{self.base_gpu}"']
        if self.overhead_s is not None:
            lines.append(f"overhead_s = {self.overhead_s}")
        lines += [f"[gpus.{self.gpu_key}.linear_law]", 'kind = "staircase"', f"c = {self.c}", f"a = {self.a}",
                  f"b0 = {self.b0}", "", f"[models.{self.model_key}]", f'base = "{self.base_model}"',
                  "attention = false", ""]
        return "\n".join(lines)

    def write(self, directory: str | Path) -> str:
        """Write the file as ``<gpu_key>.toml`` in ``directory``; its path."""
        path = Path(directory) / f"{self.gpu_key}.toml"
        atomic_write_text(path, self.toml())
        return str(path)
