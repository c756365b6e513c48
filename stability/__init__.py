"""Anything that runs requests through time: the batch-execution simulator, its schedulers, the
RAD cycle DTMC, capacity-region sweeps and the Section 7 study.

Subpackages and modules
-----------------------
sim         the simulator: engine, kernels, memory, mixed batches, classes, routing, cluster,
            disaggregation; ``Scenario -> SimResult`` (:mod:`stability.sim.simulate`).
schedulers  one module per policy, each a readable compiled loop over the engine's primitives.
runner      the one cached, resumable runner of sweep points (in process, process pool or Dask).
dtmc        RAD's cycle DTMC (Appendix C) built by executing its cycles; drift, stationary law.
region      capacity-region sweeps (tile set x scheduler x r x lambda) and their verdicts.
attain      a policy that attains the certified capacity of :mod:`theory.capacity`, and saturated
            throughput over a fixed window (count and work-weighted).
memory_bound  the KV-memory bound against the memory-enabled simulator where memory binds.
plot        the drift, stability-region and two-class figures.
slai        Section 7 reproduced: SLAI vs Sarathi-Serve vs vLLM (``llmq slai``).
"""

import os
from pathlib import Path


def _configure_numba_cache() -> None:
    """Key numba's on-disk cache on the source of the whole package.

    numba invalidates a cached function only when its own file changes, not when a compiled
    function it calls (in another module) does; a cache directory named by a hash of every source
    file here (and the numba version) makes any change recompile everything. A user's
    ``NUMBA_CACHE_DIR`` wins.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba

    from theory.version import source_digest

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = base / "llmq" / "numba" / f"{numba.__version__}-{source_digest('stability')}"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache home: keep numba's default location
        return
    numba.config.CACHE_DIR = str(target)


_configure_numba_cache()
