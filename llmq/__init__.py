"""llmq's front door: ``import llmq`` gives the documented API, and ``llmq`` on the command line
runs it (``llmq --help``).

Every name below is imported from the package that owns it on first use, so ``import llmq`` itself
loads nothing (no numpy, no numba); ``dir(llmq)`` lists them.

The paper's model and its bounds, :mod:`theory`
    ``CostSpec``, ``cost_model``: the one builder of a batch-time model (a GPU preset, optionally
    restricted to some tiles, a model preset, ``mode="paper"`` or ``"real"``).
    ``CostModel``, ``Batch``, ``T_batch``: the model and the batch execution time T_B.
    ``get_gpu``, ``gpu_names``, ``get_model``, ``model_names``, ``get_workload``, ``workload_names``,
    ``Workload``: presets and length laws.
    ``compute_bounds``, ``Bounds``, ``T_bar_R``, ``T_max``, ``lambda_star``, ``n_threshold``:
    lambda* = r / T_bar^R, T^max, RAD's smallest n and its cycle-time bounds.
    ``capacity_bound``, ``CapacityBound``: the certified capacity for any batch-time law the
    toolkit expresses (:mod:`theory.capacity`).
The simulator, :mod:`stability.sim`
    ``Scenario``, ``simulate``, ``SimResult``: a scenario in, a result out.
    ``get_scheduler``, ``scheduler_names``: the scheduler registry.
Stability analysis, :mod:`stability`
    ``SweepSpec``, ``run_sweep``, ``boundary_rows``: capacity-region sweeps (``llmq region``).
    ``build_chain``, ``ChainOptions``, ``empirical_n_min``: RAD's cycle DTMC (``llmq dtmc``).
The planner, :mod:`stability.planner`
    ``PlanSpec``, ``SloSpec``, ``parse_slo``, ``build_grid``, ``search``, ``SearchOptions``: the
    cheapest fleet for a target load within SLOs (``llmq plan``); ``Runner``, ``Cache``, ``LocalExecutor``
    (:mod:`stability.runner`): the cached, resumable runner the search runs its simulations on.
The paper checks, :mod:`paper_checks`
    ``run_checks``: every claim of the paper as an executable check (``llmq check``).
Errors, :mod:`theory.errors`
    ``LlmqError`` (a ``ValueError``) and its family ``FieldError``, ``UnknownNameError``,
    ``ConfigFileError``, ``TileDivisibilityError``: bad input named by its field.

Examples
--------
>>> import llmq
>>> cm = llmq.cost_model(llmq.CostSpec(gpu="a100", model="mistral-7b"))
>>> b = llmq.compute_bounds(cm, llmq.get_workload("table1"))
>>> b.t_star
'256x128x32'
"""

from __future__ import annotations

from importlib import import_module

_HOMES = {
    "theory.builder": ("CostSpec", "cost_model"),
    "theory.cost": ("CostModel", "Batch", "T_batch"),
    "theory.hardware": ("get_gpu", "gpu_names"),
    "theory.models": ("get_model", "model_names"),
    "theory.workload": ("Workload", "get_workload", "workload_names"),
    "theory.bounds": ("Bounds", "compute_bounds", "T_bar_R", "T_max", "lambda_star", "n_threshold"),
    "theory.capacity": ("CapacityBound", "capacity_bound"),
    "stability.sim.simulate": ("Scenario", "SimResult", "simulate"),
    "stability.sim.registry": ("get_scheduler", "scheduler_names"),
    "stability.region": ("SweepSpec", "run_sweep", "boundary_rows"),
    "stability.dtmc": ("build_chain", "ChainOptions", "empirical_n_min"),
    "stability.planner.spec": ("PlanSpec",),
    "stability.planner.slo": ("SloSpec", "parse_slo"),
    "stability.planner.grid": ("build_grid",),
    "stability.planner.search": ("search", "SearchOptions"),
    "stability.runner": ("Runner", "Cache", "LocalExecutor"),
    "paper_checks.runner": ("run_checks",),
    "theory.errors": ("LlmqError", "FieldError", "UnknownNameError", "ConfigFileError",
                      "TileDivisibilityError"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str):
    """Import a front-door name from its home package on first use (PEP 562)."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'llmq' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """The module's own names and the front door's, without importing any."""
    return sorted(set(globals()) | set(__all__))
