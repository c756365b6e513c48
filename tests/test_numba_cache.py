"""numba's cache folder of a compiled function is named by its file's place in the source tree, so
the checkout and an installed copy of the same source share one compiled cache; processes sharing it
compile each function once."""

import os
import subprocess
import sys
from pathlib import Path

from stability.numba_cache import ROOT, SourceTreeLocator, locator_classes, tree_path

PROBE = """
import numba, stability.sim.batches as b
loc = b.push_decode._cache._impl.locator
print(type(loc).__name__, loc.get_cache_path(), numba.config.CACHE_DIR, sep="\\n")
"""


def test_the_folder_is_the_path_in_the_tree_not_the_absolute_path(tmp_path):
    assert (
        SourceTreeLocator.get_suitable_cache_subpath(str(ROOT / "stability" / "sim" / "engine.py"))
        == "stability_sim"
    )
    assert tree_path(str(ROOT / "theory" / "markov.py")) == ("theory",)
    assert tree_path(str(tmp_path / "stability" / "sim" / "engine.py")) is None  # outside the tree
    assert tree_path(str(ROOT / "tests" / "conftest.py")) is None  # not one of the packages
    assert locator_classes().split(",")[:2] == [
        "stability.numba_cache.SourceTreeLocator",
        "UserProvidedCacheLocator",
    ]


def test_the_package_installs_the_locator_under_its_own_cache_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split("\n")
    name, path, cache_dir = out[:3]
    assert name == "SourceTreeLocator"
    assert Path(cache_dir).parent == tmp_path / "llmq" / "numba"
    assert Path(path) == Path(cache_dir) / "stability_sim"


def test_a_user_cache_dir_keeps_numbas_own_locator(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "mine"), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split("\n")
    assert out[0] == "UserProvidedCacheLocator" and out[2] == str(tmp_path / "mine")


HOLDER = """
import sys, time
from numba import types
from stability.numba_cache import _compile_lock, _lock_path
from stability.sim.kernels import ceil_div
with _compile_lock(_lock_path(ceil_div, (types.int64, types.int64))):
    print("locked", flush=True)
    sys.stdin.readline()  # the other process is about to call ceil_div
    time.sleep(0.5)
    print(ceil_div(7, 2), dict(ceil_div.stats.cache_misses), flush=True)
"""

WAITER = """
from stability.sim.kernels import ceil_div
print("calling", flush=True)
print(ceil_div(7, 2), dict(ceil_div.stats.cache_hits), dict(ceil_div.stats.cache_misses), flush=True)
"""


def test_a_compilation_under_way_in_another_process_is_waited_for_and_loaded(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    run = {"env": env, "text": True, "cwd": tmp_path, "stdout": subprocess.PIPE}
    with subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, **run) as holder:
        assert holder.stdout.readline().strip() == "locked"
        with subprocess.Popen([sys.executable, "-c", WAITER], **run) as waiter:
            assert waiter.stdout.readline().strip() == "calling"
            holder.stdin.write("go\n")
            holder.stdin.flush()
            compiled = holder.stdout.readline().split(" ", 1)
            loaded = waiter.stdout.readline().split(" ", 1)
    assert compiled[0] == loaded[0] == "4"
    assert "(int64, int64)" in compiled[1]  # the holder compiled it (a miss in its empty cache) ...
    hits, misses = loaded[1].split("} {")
    assert "(int64, int64): 1" in hits and misses.strip() == "}"  # ... the other loaded it, compiling nothing
