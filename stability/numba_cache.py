"""numba's cache, found by a compiled function's place in this source tree.

numba names the cache folder of a compiled function by a hash of its file's absolute path
(``numba.core.caching._CacheLocator.get_suitable_cache_subpath``, numba 0.68), so the same source
imported from two places compiles twice: the checkout (the tests, the documentation build) and its
installed copy in ``site-packages`` (the commands, the notebooks). :class:`SourceTreeLocator` names
it by the file's path inside the tree (``stability/sim`` -> ``stability_sim``) instead. Each cached
function is still checked against a hash of its file's content (numba's source stamp), and
:func:`stability._configure_numba_cache` keys the whole cache folder on the source of the package.
"""

from __future__ import annotations

from pathlib import Path

from numba.core.caching import CacheImpl, UserProvidedCacheLocator

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
