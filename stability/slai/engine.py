"""The serving engine's own costs in Section 7 (``llmq slai --engine``).

The paper's engine. SLAI and its Sarathi-Serve and vLLM baselines run in the authors' fork of
Sarathi-Serve (Section 7, "Implementation"; agrimUT/SLAI). Its public source fixes the engine terms
of :mod:`theory.engine_terms` as follows.

* **CUDA graphs: none.** The model runner calls the model eagerly on every step
  (``ModelRunner.run``), so there are no capture sizes.
* **Token padding: to a multiple of 8.** ``_prepare_inputs`` pads a step's tokens with
  ``pad_to_alignment(..., multiple_of=8)``, so the linear GeMMs run at ``pad(tau) = 8 ceil(tau / 8)``.
  This is the padding law of :func:`theory.engine_terms.pad_tokens` with the sizes 8, 16, ...,
  8192 (``pad_multiple = 8``). Attention and the non-linear operations stay at the real tokens.
* **Chunked prefill: Sarathi-Serve's own** (token budget 512), not vLLM v1's. The vLLM baseline is
  the fork's v0-style prefill-first scheduler, so the ``vllm_v1`` scheduler plays no part here.
* **Front end: none** (``frontend_s = 0``). The benchmark hands token ids to the engine
  (``add_request(prompt_token_ids=...)``) without an API server.
* **Host time per step** (``engine_step_s``). No public figure measures it alone. The one public
  per-batch time of this model on this GPU is the paper's Fig. 5a (``data/fig5a_batch_times.csv``).
  It times a batch from the start of the engine's step, scheduling included, to the end of output
  processing, so it holds the host time of a step. On the chunks whose modelled linear time is
  the weight streaming alone (``T_Lin(c)`` within :data:`FLOOR_BOUND` of ``T_Lin(1)``: the memory
  floor binds and the roofline's compute rate plays no part), the residual (measured minus
  Eq. 7) estimates the host time. :func:`fit_engine_step` takes its mean and reports each chunk
  held out. Fig. 5a is a Section 6 measurement: no Section 7 figure enters the value. The
  residuals of the larger chunks (:func:`fig5a_residuals`) hold the roofline's compute error,
  which is no engine term.

:class:`EngineCosts` is the options record and :func:`paper_engine` the values above.
:func:`read_engine` reads ``sarathi`` (the paper's engine) or a TOML file with an ``[engine]`` table.
:func:`engine_gpu_file` writes the RTX 6000 Ada's real-mode profile with the terms on.

References
----------
Bari, Hegde, de Veciana (2025), Section 6.1.1 (Fig. 5a), Section 7. agrimUT/SLAI @ 5098a7a (Apache
License 2.0): ``sarathi/model_executor/model_runner.py`` (``ModelRunner.run``, ``_prepare_inputs``;
no CUDA-graph capture anywhere in the repository), ``sarathi/engine/base_llm_engine.py``
(``step``, ``_on_step_completed``, ``add_request``), ``sarathi/metrics/metrics_store.py``
(``on_batch_end``: ``batch_end_time - batch_start_time``), ``scripts/plot1_results.csv`` and
``scripts/run_plot1.sh`` (Fig. 5a's data and runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from theory.errors import ConfigFileError, FieldError, require_nonneg
from theory.io import atomic_write_text

GPU = "rtx6000ada"
MODEL = "mistral-7b"
FIG5A_FILE = Path(__file__).with_name("data") / "fig5a_batch_times.csv"
FIG5A_PROMPT = 2048  # Fig. 5a: every request has a 2048-token prompt (scripts/run_plot1.sh)
FLOOR_BOUND = 0.05  # a chunk is floor-bound when T_Lin(c) <= (1 + FLOOR_BOUND) T_Lin(1)
MAX_PAD = 512  # the largest pad multiple accepted (a step pads to at most pad_multiple - 1 tokens)
PAD_TOP = 8192  # the padded sizes reach the vLLM policy's token budget (max_num_batched_tokens)
FIELDS = ("engine_step_s", "pad_multiple", "frontend_s")


@dataclass(frozen=True)
class EngineCosts:
    """The engine's costs beyond Eq. 7's kernels, as :mod:`theory.engine_terms` prices them.

    Attributes
    ----------
    engine_step_s : float
        Host time per non-empty step (scheduling, input preparation, sampling, output
        processing), seconds; added to every batch.
    pad_multiple : int
        A step's tokens are padded to a multiple of this for the linear GeMMs (1: no padding).
    frontend_s : float
        Front-end time per request, seconds, added to its TTFT and latency (in no batch).
    """

    engine_step_s: float = 0.0
    pad_multiple: int = 1
    frontend_s: float = 0.0

    def __post_init__(self):
        for name in ("engine_step_s", "frontend_s"):
            object.__setattr__(self, name, require_nonneg(f"engine.{name}", getattr(self, name), "seconds"))
        p = self.pad_multiple
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= MAX_PAD:
            raise FieldError("engine.pad_multiple", p, f"an integer from 1 (no padding) to {MAX_PAD}")

    @property
    def slug(self) -> str:
        """A short name of the values, for panel and GPU keys (microseconds, whole)."""
        out = f"engine{round(self.engine_step_s * 1e6)}us"
        out += f"_pad{self.pad_multiple}" if self.pad_multiple > 1 else ""
        return out + (f"_fe{round(self.frontend_s * 1e6)}us" if self.frontend_s else "")

    @property
    def label(self) -> str:
        """The values in words."""
        parts = [f"host {self.engine_step_s * 1e3:.3g} ms/step"]
        parts += [f"tokens padded to {self.pad_multiple}"] if self.pad_multiple > 1 else []
        parts += [f"front end {self.frontend_s * 1e3:.3g} ms"] if self.frontend_s else []
        return ", ".join(parts)

    def capture_sizes(self) -> list[int] | None:
        """The padded token counts (multiples of ``pad_multiple`` up to 8192); None: no padding."""
        if self.pad_multiple == 1:
            return None
        return list(range(self.pad_multiple, PAD_TOP + 1, self.pad_multiple))


def engine_gpu_key(engine: EngineCosts) -> str:
    """The GPU key of the RTX 6000 Ada with ``engine``'s costs."""
    return f"{GPU}_{engine.slug}"


def engine_gpu_file(directory: str | Path, engine: EngineCosts) -> tuple[str, str]:
    """Write the RTX 6000 Ada's real-mode profile (its roofline with the ``[real_mode]`` terms of
    ``theory/data/gpus.toml``) with ``engine``'s costs on into ``directory``; (GPU key, path)."""
    from theory.hardware import gpu_table, real_mode_terms

    key = engine_gpu_key(engine)
    lines = [
        f"# {GPU} as real mode prices it, with the serving engine's costs "
        f"(stability/slai/engine.py): {engine.label}",
        f"[gpus.{key}]",
        f'base = "{GPU}"',
    ]
    lines += [
        f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}"
        for k, v in real_mode_terms(str(gpu_table(GPU)["tileset"])).items()
    ]
    lines += [f"engine_step_s = {engine.engine_step_s!r}", f"frontend_s = {engine.frontend_s!r}"]
    sizes = engine.capture_sizes()
    if sizes:
        lines.append(f"cudagraph_capture_sizes = {sizes!r}")
    path = Path(directory) / f"gpus_{engine.slug}.toml"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return key, str(path)


def read_engine(spec: str) -> EngineCosts:
    """``sarathi`` (:func:`paper_engine`) or a TOML file whose ``[engine]`` table sets any of
    ``engine_step_s`` (s), ``pad_multiple`` and ``frontend_s`` (s); others refused."""
    from theory.config import read_toml

    if not isinstance(spec, str) or not spec.strip():
        raise FieldError("--engine", spec, "'sarathi' or a TOML file with an [engine] table")
    if spec.strip() == "sarathi":
        return paper_engine()
    table = read_toml(spec).get("engine")
    if not isinstance(table, dict):
        raise ConfigFileError(f"{spec}: expected an [engine] table with any of {', '.join(FIELDS)}")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise FieldError(
            f"engine.{unknown[0]}",
            table[unknown[0]],
            f"no such field; the [engine] fields are {', '.join(FIELDS)}",
        )
    return EngineCosts(**table)


# --- the paper's engine: Fig. 5a --------------------------------------------------------------------


def fig5a_rows() -> list[tuple[int, float]]:
    """Fig. 5a's measured (chunk size, mean batch time in seconds)."""
    from theory.io import read_csv_table

    _, rows = read_csv_table(FIG5A_FILE, "chunk,ttft_ms,batch_ms")
    return [(int(r["chunk"]), float(r["batch_ms"]) / 1e3) for r in rows]


def fig5a_model_s(cm, chunk: int, prompt: int = FIG5A_PROMPT) -> float:
    """Eq. 7's mean batch time of Fig. 5a's batches: one ``prompt``-token prompt prefilled alone in
    chunks of ``chunk`` tokens (the last one the remainder), one chunk per batch."""
    from theory.cost import Batch, T_batch

    starts = np.arange(1, prompt + 1, chunk)
    sizes = np.minimum(chunk, prompt + 1 - starts)
    return float(
        np.mean(
            [T_batch(cm, Batch.of(prefill=[(int(i), int(c))])) for i, c in zip(starts, sizes, strict=True)]
        )
    )


@cache
def fig5a_residuals() -> tuple[dict, ...]:
    """Per Fig. 5a chunk: measured and modelled batch time (real mode, no engine costs; every
    chunk there is a multiple of 8, so the padding changes nothing), their difference and whether
    the memory floor binds the chunk's linear time (``floor_bound``)."""
    from theory.builder import CostSpec, cost_model
    from theory.cost import T_Lin

    cm = cost_model(CostSpec(GPU, MODEL, "real"))
    one = float(T_Lin(cm, 1))
    out = []
    for chunk, measured in fig5a_rows():
        model = fig5a_model_s(cm, chunk)
        out.append(
            {
                "chunk": chunk,
                "measured_s": measured,
                "model_s": model,
                "residual_s": measured - model,
                "floor_bound": float(T_Lin(cm, chunk)) <= (1 + FLOOR_BOUND) * one,
            }
        )
    return tuple(out)


def fit_engine_step() -> tuple[float, list[dict]]:
    """``engine_step_s`` from Fig. 5a: the mean residual of the floor-bound chunks, and for each
    of them held out, the value fitted on the others and its error on the held-out batch time."""
    rows = [r for r in fig5a_residuals() if r["floor_bound"]]
    if len(rows) < 2:
        raise FieldError("fig5a floor-bound chunks", len(rows), "at least 2 (a fit and a held-out one)")
    held = []
    for k, r in enumerate(rows):
        fit = float(np.mean([o["residual_s"] for j, o in enumerate(rows) if j != k]))
        predicted = r["model_s"] + fit
        held.append(
            {
                "chunk": r["chunk"],
                "fit_s": fit,
                "predicted_s": predicted,
                "measured_s": r["measured_s"],
                "relative_error": predicted / r["measured_s"] - 1,
            }
        )
    return float(np.mean([r["residual_s"] for r in rows])), held


@cache
def paper_engine() -> EngineCosts:
    """The paper's engine (module docstring): host time from Fig. 5a, tokens padded to 8, no
    front end."""
    return EngineCosts(engine_step_s=fit_engine_step()[0], pad_multiple=8, frontend_s=0.0)
