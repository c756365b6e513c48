"""How a number of each cost term (:mod:`theory.cost_terms`) is fitted to measured hardware, or why
the term has none to fit: the fit twin of the table.

Each entry names the function that fits the term's number (as ``"module:function"``, so that this
table imports nothing it names) and what it fits; a switch, a law stated by the user and a measured
profile have no number to fit, and say so. ``tests/test_cost_term_table.py`` checks that every
declared term has an entry and that every named function exists.

References
----------
The fitting methods are those of :mod:`theory.validation.calibrate` and
:mod:`theory.validation.presets_fit`.
"""

from __future__ import annotations

from dataclasses import dataclass

from theory.cost_terms import TERMS
from theory.errors import FieldError


@dataclass(frozen=True)
class Fit:
    """How a term's number is fitted.

    Attributes
    ----------
    by : str or None
        ``"module:function"`` of the fit; ``None`` when there is no number to fit.
    what : str
        What is fitted, or why nothing is.
    """

    by: str | None
    what: str


_GEMM = "theory.validation.gemm_fit:fit_gemm"

FIT_TERMS: dict[str, Fit] = {
    "memory_floor": Fit(_GEMM, "eta_mem, the achievable DRAM bandwidth, with the floor on"),
    "waves": Fit(_GEMM, "the tile rates mu(t) with the output tiles counted in waves"),
    "attention_waves": Fit(None, "a switch, written off: no profile times attention kernels alone"),
    "l2_bandwidth_gbs": Fit(_GEMM, "the L2 bandwidth, with the rates"),
    "overhead_s": Fit("theory.validation.batch_fit:fit_batch", "the fixed time per batch of Eq. 7"),
    "gemm_overhead_s": Fit(_GEMM, "c_0, the intercept per GeMM"),
    "attention_call_s": Fit("theory.validation.presets_fit:fit_attention_call_s",
                            "the time per attention call, on the training attention batches"),
    "mixed_decode_eta": Fit("theory.validation.presets_fit:fit_mixed_eta_preset",
                            "eta, on the training mixed batches"),
    "linear_law": Fit(None, "a literature law stated with its constants"),
    "gemm_profile": Fit(None, "measured GeMM times, used as measured"),
    "tp": Fit("theory.tp_split:fit_allreduce_law", "the all-reduce latency and bus bandwidth"),
    "attention": Fit(None, "a model switch"),
    "lm_head": Fit(None, "a model switch"),
    "moe": Fit(None, "structural: the expert count, experts per token and widths are the model's "
                     "config.json; the routing law is uniform until a measured skew is shipped"),
    "ep": Fit("theory.tp_split:fit_allreduce_law", "the interconnect's latency and bus bandwidth, as the "
                                                   "all-reduce law's"),
    "engine_step_s": Fit("stability.serving.fit:fit_engine_step",
                         "the engine's host time per step, on the serving runs other than the one scored"),
    "cudagraph_capture_sizes": Fit(None, "read from the run's resolved vLLM configuration "
                                         "(or vLLM's default)"),
    "frontend_s": Fit(None, "stated per deployment; the shipped runs measure TTFT from the engine's queue"),
}


def register(name: str, fit: Fit) -> None:
    """State how the declared term ``name`` is fitted (a new term's entry)."""
    if name not in TERMS:
        raise FieldError("cost term", name, "a term declared in theory.cost_terms")
    if not isinstance(fit, Fit):
        raise FieldError(f"fit of {name}", type(fit).__name__, "a theory.validation.term_fits.Fit")
    FIT_TERMS[name] = fit
