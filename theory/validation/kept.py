"""A validation report kept across processes, named by everything it is computed from.

:func:`kept_validate` is :func:`theory.validation.validate.validate` whose report is kept under
``cache_home()/validate/<theory digest>-<input digest>.pickle``: the same profiles and settings
validated again by the same code (``llmq validate`` after its notebook, or run twice) read the
report back instead of refitting every GPU. The name holds :func:`theory.version.source_digest` of
:mod:`theory` (every source and data file of the package that computes the report), the versions of
numpy and scipy (whose solvers fit the calibrations), each profile's name, column layout and rows,
the settings, and the bytes of the user GPU and model files the settings name; any change to one of
them computes the report again. A kept file that cannot be
read is computed again too.

The report is kept with :mod:`pickle`, which runs code when it loads: the file lives in the user's
own cache directory beside the compiled simulator, written atomically by this process.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import astuple
from pathlib import Path

from theory.io import atomic_write_bytes, theory_kept_path
from theory.profiles import Profile
from theory.validation.results import Report, Settings
from theory.validation.validate import validate


def input_digest(profiles: dict[str, Profile], settings: Settings) -> str:
    """SHA-256 prefix (32 hex digits) of numpy's and scipy's versions, the profiles' names, dtypes and
    rows, the settings and the bytes of the user files they name."""
    from importlib.metadata import version

    h = hashlib.sha256(f"numpy {version('numpy')}, scipy {version('scipy')}".encode())
    h.update(repr(astuple(settings)).encode())
    for path in (settings.gpu_file, settings.model_file):
        h.update(b"\0" if path is None else Path(path).read_bytes())
    for name in sorted(profiles):
        rows = profiles[name].rows
        h.update(name.encode() + b"\0" + str(rows.dtype.descr).encode())
        h.update(rows.tobytes())
    return h.hexdigest()[:32]


def kept_path(profiles: dict[str, Profile], settings: Settings) -> Path:
    """Where the report of ``profiles`` under ``settings`` is kept."""
    return theory_kept_path("validate", input_digest(profiles, settings), ".pickle")


def kept_validate(profiles: dict[str, Profile], settings: Settings | None = None, workers: int = 1) -> Report:
    """:func:`theory.validation.validate.validate` (its calibrations on ``workers`` processes), read
    back when this code has already validated the same profiles under the same settings (module
    docstring; the report does not depend on ``workers``, which is no part of its name)."""
    settings = settings or Settings()
    if any(p.rows.dtype.hasobject for p in profiles.values()):
        return validate(profiles, settings, workers)  # rows of Python objects: no stable bytes to name them
    path = kept_path(profiles, settings)
    try:
        with open(path, "rb") as fh:
            report = pickle.load(fh)
        if isinstance(report, Report):
            return report
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    report = validate(profiles, settings, workers)
    try:
        atomic_write_bytes(path, pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # a cache home that cannot be written: nothing kept
    return report
