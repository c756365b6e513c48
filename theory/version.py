"""What a cached result or a compiled function depends on: a digest of the project's own sources.

The layering (``theory`` <- ``stability`` <- ``paper_checks`` <- ``llmq``) says what a result can
depend on: a package and those below it. :func:`source_digest` hashes every source and data file
(``.py``, ``.toml``, ``.csv``, ``.csv.gz``: the packaged profiles, which the measured-profile law
prices GeMMs from) of the named installed packages, found where Python imports them from, so a
cache keyed on it is invalidated by any change to that code or data.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.util import find_spec
from pathlib import Path

SUFFIXES = (".py", ".toml", ".csv", ".gz")


@cache
def source_digest(*packages: str) -> str:
    """SHA-256 prefix (16 hex digits) of every source and data file of ``packages``, in order."""
    digest = hashlib.sha256()
    for package in packages:
        spec = find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"{package!r} is not an installed package")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*")):
            if path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                digest.update(f"{package}/{path.relative_to(root).as_posix()}".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
