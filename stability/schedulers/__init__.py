"""Schedulers: one module per policy, each a readable compiled loop over the engine's primitives.

Every module defines ``NAME``, a frozen ``Params`` dataclass whose ``record()`` returns the
module-level ``typing.NamedTuple`` its compiled loop reads by name (``prm.budget``),
``make_params(cost_model, **options)`` with defaults from the cost model, and the compiled
``loop(st, ct, prm, t_stop)``. Adding a scheduler is adding a module and a line below.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from theory.errors import UnknownNameError

_MODULES = {
    "rad": "stability.schedulers.rad",
    "alg2": "stability.schedulers.alg2",
    "request_level": "stability.schedulers.request_level",
    "sarathi_paper": "stability.schedulers.sarathi_paper",
    "sarathi": "stability.schedulers.sarathi",
    "vllm": "stability.schedulers.vllm",
    "distserve": "stability.schedulers.distserve",
    "slai": "stability.schedulers.slai",
}


def scheduler_names() -> list[str]:
    """Names of every registered scheduler, in registration order."""
    return list(_MODULES)


def get_scheduler(name: str) -> ModuleType:
    """The scheduler module registered under ``name``."""
    if name not in _MODULES:
        raise UnknownNameError("scheduler", str(name), list(_MODULES))
    return import_module(_MODULES[name])
