"""Results kept on disk across runs: what a command computes again and again from the same inputs
(RAD's n for ``n = auto``, the certified capacity of a sweep's series) and that takes seconds.

An entry is ``$XDG_CACHE_HOME/llmq/<name>/<digest>.json`` (default ``~/.cache``, beside the
compiled simulator), strict JSON written atomically, named by a SHA-256 digest of the inputs
(pickled: numpy arrays and the frozen cost model pickle to the same bytes for the same content)
and of the code (:func:`stability.runner.code_version`), so a change to either computes it anew.
An entry that cannot be read, or has other fields, is computed again; a cache home that cannot be
written is computed around. The value is the computation's, bit for bit (floats are written
exactly), so keeping it changes no result.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable

from theory.io import cache_home


def kept(name: str, inputs: tuple, compute: Callable[[], dict]) -> dict:
    """``compute()`` (a dict of JSON values), read from ``cache_home()/name`` when it was computed
    before from the same ``inputs`` and code, else computed and written there."""
    from stability.runner import code_version
    from theory.io import atomic_write_text, json_load_exact, json_text

    digest = hashlib.sha256(pickle.dumps((code_version(), *inputs), protocol=5)).hexdigest()[:24]
    path = cache_home() / name / f"{digest}.json"
    try:
        entry = json_load_exact(path.read_text(encoding="utf-8"))
        if isinstance(entry, dict) and isinstance(entry.get("value"), dict):
            return entry["value"]
    except (OSError, UnicodeDecodeError, ValueError):  # not there yet, or unreadable: compute it
        pass
    value = compute()
    try:
        atomic_write_text(path, json_text({"value": value}, indent=None, exact=True))
    except OSError:  # no writable cache home
        pass
    return value
