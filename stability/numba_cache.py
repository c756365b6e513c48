"""numba's cache, found by a compiled function's place in this source tree.

numba names the cache folder of a compiled function by a hash of its file's absolute path
(``numba.core.caching._CacheLocator.get_suitable_cache_subpath``, numba 0.68), so the same source
imported from two places compiles twice: the checkout (the tests, the documentation build) and its
installed copy in ``site-packages`` (the commands, the notebooks). :class:`SourceTreeLocator` names
it by the file's path inside the tree (``stability/sim`` -> ``stability_sim``) instead. Each cached
function is still checked against a hash of its file's content (numba's source stamp), and
:func:`stability._configure_numba_cache` keys the whole cache folder on the source of the package.

Processes that share the cache compile each function once (:func:`compile_once`): the pool workers
of a sweep that starts on an empty cache need the same kernels at the same time, and without it
each compiles all of them.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from numba.core.caching import CacheImpl, UserProvidedCacheLocator

try:
    import fcntl
except ImportError:  # not POSIX: no compilation is shared (each process compiles what it needs)
    fcntl = None

ROOT = Path(__file__).resolve().parent.parent  # the folder holding the packages (checkout or site-packages)
PACKAGES = ("stability", "theory", "paper_checks")  # the packages whose compiled functions it locates


def tree_path(py_file: str) -> tuple[str, ...] | None:
    """The parts of ``py_file``'s folder inside :data:`ROOT` when it lies in one of
    :data:`PACKAGES`, else None."""
    try:
        parts = Path(py_file).resolve().parent.relative_to(ROOT).parts
    except ValueError:
        return None
    return parts if parts and parts[0] in PACKAGES else None


class SourceTreeLocator(UserProvidedCacheLocator):
    """numba's locator under ``numba.config.CACHE_DIR``, for the functions of :data:`PACKAGES`
    only, whose folder is named by the file's path inside the tree."""

    @classmethod
    def get_suitable_cache_subpath(cls, py_file: str) -> str:
        return "_".join(tree_path(py_file))

    @classmethod
    def from_function(cls, py_func, py_file: str):
        return super().from_function(py_func, py_file) if tree_path(py_file) else None


def locator_classes() -> str:
    """The value of numba's ``CACHE_LOCATOR_CLASSES`` setting: :class:`SourceTreeLocator` first,
    then numba's own locators in their order."""
    return ",".join([f"{__name__}.SourceTreeLocator", *(c.__name__ for c in CacheImpl._locator_classes)])


# --- one compilation per function and signature across processes --------------------------------

LOCK_WAIT_S = 600.0  # longest wait for another process's compilation before compiling anyway
_held: set = set()  # lock files this process holds (a nested compilation never waits on its own)


def _lock_path(dispatcher, args: tuple) -> Path | None:
    """The lock file of one compilation (``dispatcher`` at argument types ``args``), beside the
    function's cache in its cache folder; None for a function that is not cached (``cache=False``)
    or not of :data:`PACKAGES`."""
    folder = dispatcher._cache.cache_path
    code = dispatcher.py_func.__code__
    if folder is None or tree_path(code.co_filename) is None:
        return None
    digest = hashlib.sha256(repr(args).encode()).hexdigest()[:16]
    return Path(folder) / f"{code.co_name}-{code.co_firstlineno}-{digest}.lock"


@contextmanager
def _compile_lock(path: Path | None) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (``fcntl.flock``, released by the kernel if the process
    dies), waiting at most :data:`LOCK_WAIT_S`; no lock for None, for a lock this process already
    holds, or where the folder cannot be written."""
    if path is None or path in _held or fcntl is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break  # compile anyway: never wait for ever on a stopped process
                time.sleep(0.02)
        _held.add(path)
        try:
            yield
        finally:
            _held.discard(path)
    finally:
        os.close(fd)  # releases the lock


def compile_once() -> None:
    """Make processes that share a numba cache compile each function of :data:`PACKAGES` once per
    signature: the first to need a compilation holds a lock file (:func:`_compile_lock`) while
    it loads or compiles and saves it; another process that needs it meanwhile waits, then loads
    it from the cache instead of compiling it a second time (two pool workers starting a sweep on
    an empty cache would otherwise both compile every kernel they run).

    numba (0.68) has no hook between a cache miss and the compilation, so
    ``numba.core.dispatcher.Dispatcher.compile`` is wrapped (once): it takes numba's own compiler
    lock and the file lock, then runs as before; an already compiled signature takes no lock.
    Waits cannot deadlock: a process holds the locks of one chain of callers and waits for a
    callee, and calls do not form cycles. Compiled code and results are unchanged.
    """
    from numba.core import sigutils
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.dispatcher import Dispatcher

    original = Dispatcher.compile
    if getattr(original, "compile_once", False):
        return

    def compile(self, sig):
        args, _ = sigutils.normalize_signature(sig)
        if tuple(args) in self.overloads:
            return original(self, sig)
        with global_compiler_lock, _compile_lock(_lock_path(self, tuple(args))):
            return original(self, sig)

    compile.compile_once = True
    compile.__doc__ = original.__doc__
    Dispatcher.compile = compile
