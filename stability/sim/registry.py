"""Schedulers: one module per policy, each a readable compiled loop over the engine's primitives.

The interface
-------------
A scheduler is one module. It defines:

``NAME``
    The name it is registered under (a ``str``).
``Params``
    A frozen dataclass of the policy's validated parameters, with

    * ``record()``: the compiled record its loop reads, an instance of a ``typing.NamedTuple``
      class defined at module level (by convention ``Record``) whose fields are numbers, bools,
      float64 arrays or other such named tuples (``memory.KvConfig`` as ``prm.kv``). The loop
      reads it by name (``prm.budget``, ``prm.kv.blocks``), never by position; build it with
      exact types (``int(...)``, ``float(...)``, ``bool(...)``) so that the loop compiles once,
      and keep the class at module level so that numba's on-disk cache finds it again;
    * optionally ``chunk``: the chunk size of whole prefills run with the engine's
      ``prefill_whole`` (the cost tables' ``ct.chunk``; default t*_lcm);
    * optionally ``tbt_slo``: one TBT SLO per request class (seconds), the scenario's class mix
      when it has none (:func:`stability.sim.simulate.class_mix`).
``make_params(cm, **options) -> Params``
    Validates the options (keyword arguments with defaults, most from the cost model ``cm``);
    :func:`stability.sim.simulate.make_params` refuses names it does not take
    (:func:`option_names`). A scheduler with many options declares them once as a frozen dataclass
    ``Options`` (one documented field per option, with its default) and reads them with
    :func:`options_record`; ``make_params`` then takes ``**options`` alone.
``loop(st, ct, prm, t_stop) -> int``
    The compiled policy (``numba.njit(cache=True)``) over the engine state ``st``
    (:data:`stability.sim.structs.STATE`), the cost tables ``ct`` and ``prm = Params.record()``:
    it schedules batches with the primitives of :mod:`stability.sim.engine` and
    :mod:`stability.sim.mixed` until the clock reaches ``t_stop`` or the batch log needs room
    (returning ``engine.stop_code(st)``), or until nothing is left (``engine.DONE``). It must be
    resumable: called again on the same state, it continues where it stopped (join-shortest-queue
    routing and progress reporting stop it at arbitrary times).

A disaggregated policy (DistServe) sets ``DISAGGREGATED = True`` and defines, instead of
``loop``, ``prefill_loop`` and ``decode_loop`` (same signature) for the prefill and decode nodes,
and on ``Params`` the attributes ``prefill_nodes`` (``int`` or ``None``: half of the GPUs) and
``transfer_time(L_P)`` (seconds of each KV hand-off); :mod:`stability.sim.disaggregated` runs it.

Adding a scheduler is writing its module and one line: an entry in ``_MODULES`` below, or, from
outside the package, ``register(name, "package.module")``.
"""

from __future__ import annotations

import inspect
from dataclasses import fields, is_dataclass
from importlib import import_module
from types import ModuleType

from theory.errors import FieldError, UnknownNameError

_MODULES = {
    "rad": "stability.schedulers.rad",
    "alg2": "stability.schedulers.alg2",
    "request_level": "stability.schedulers.request_level",
    "sarathi_paper": "stability.schedulers.sarathi_paper",
    "sarathi": "stability.schedulers.sarathi",
    "vllm": "stability.schedulers.vllm",
    "vllm_v1": "stability.schedulers.vllm_v1",
    "distserve": "stability.schedulers.distserve",
    "slai": "stability.schedulers.slai",
    "wait": "stability.schedulers.wait",
    "nested_wait": "stability.schedulers.nested_wait",
}

REQUIRED = ("NAME", "Params", "make_params")  # and loop, or prefill_loop and decode_loop


def register(name: str, module: str) -> None:
    """Register the scheduler module ``module`` (a dotted import path) under ``name``; it is
    imported, and checked against the interface, when first asked for."""
    if not isinstance(name, str) or not name or not isinstance(module, str) or not module:
        raise FieldError("scheduler registration", (name, module), "a name and a module path")
    _MODULES[name] = module


def scheduler_names() -> list[str]:
    """Names of every registered scheduler, in registration order."""
    return list(_MODULES)


def missing_names(module: ModuleType) -> list[str]:
    """The names of the interface (see the module docstring) that ``module`` does not define."""
    loops = ("prefill_loop", "decode_loop") if getattr(module, "DISAGGREGATED", False) else ("loop",)
    missing = [key for key in (*REQUIRED, *loops) if not hasattr(module, key)]
    if hasattr(module, "Params") and not callable(getattr(module.Params, "record", None)):
        missing.append("Params.record")
    return missing


def option_names(module: ModuleType) -> list[str]:
    """The options a scheduler module takes, in order: the fields of its ``Options`` record, or
    else the parameters of its ``make_params`` but the cost model."""
    record = getattr(module, "Options", None)
    if record is not None and is_dataclass(record):
        return [f.name for f in fields(record)]
    return [p for p in inspect.signature(module.make_params).parameters if p != "cm"]


def options_record(record: type, options: dict, scheduler: str):
    """``record(**options)``, an unknown name refused with a :class:`theory.errors.FieldError`
    that names it and the options ``scheduler`` takes."""
    names = [f.name for f in fields(record)]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise FieldError(f"options of scheduler {scheduler!r}", unknown, f"names among {', '.join(names)}")
    return record(**options)


def get_scheduler(name: str) -> ModuleType:
    """The scheduler module registered under ``name``."""
    if name not in _MODULES:
        raise UnknownNameError("scheduler", str(name), list(_MODULES))
    module = import_module(_MODULES[name])
    missing = missing_names(module)
    if missing:
        raise FieldError(f"scheduler module {_MODULES[name]}", missing,
                         "none missing: the interface of stability.sim.registry")
    return module
