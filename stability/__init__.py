"""Anything that runs requests through time: the batch-execution simulator, its schedulers, the
RAD cycle DTMC, capacity-region sweeps, the planner and the Section 7 study.

The API (the names :mod:`llmq` also gives are marked there):

* :class:`~stability.sim.simulate.Scenario` -> :func:`~stability.sim.simulate.simulate` ->
  :class:`~stability.sim.simulate.SimResult`; :func:`~stability.sim.registry.get_scheduler` and
  :func:`~stability.sim.registry.scheduler_names`: the scheduler registry.
* :class:`~stability.region.SweepSpec` -> :func:`~stability.region.run_sweep` ->
  :func:`~stability.region.boundary_rows`: the empirical stability boundaries (``llmq region``).
* :func:`~stability.dtmc.build_chain` (with :class:`~stability.dtmc.ChainOptions`),
  :func:`~stability.dtmc.empirical_n_min`: RAD's cycle DTMC (``llmq dtmc``).
* :mod:`stability.planner` (``llmq plan``) and :mod:`stability.slai` (``llmq slai``).
* :func:`~stability.serving.score.score_runs`: measured serving runs replayed end to end
  (``llmq validate --serving``).
* :class:`~stability.runner.Runner` over a :class:`~stability.runner.Cache`: the one cached,
  resumable runner every sweep, study and search runs on.

Subpackages and modules
-----------------------
sim         the simulator: engine, kernels, memory, mixed batches, classes, routing, cluster,
            fleets, disaggregation and the scheduler registry; ``Scenario -> SimResult``.
schedulers  one module per policy, each a readable compiled loop over the engine's primitives.
runner      the one cached, resumable runner of sweep points (in process, process pool or Dask).
points      the points of ``llmq region``: one simulation, the empirical n, RAD's saturated DTMC.
kept        results kept on disk across runs (RAD's n for ``n = auto``, certified capacities).
dtmc        RAD's cycle DTMC (Appendix C) built by executing its cycles; drift, stationary law.
region      capacity-region sweeps (tile set x scheduler x r x lambda) and their verdicts.
attain      a policy that attains the certified capacity of :mod:`theory.capacity`, and saturated
            throughput over a fixed window (count and work-weighted).
memory_bound  the KV-memory bound against the memory-enabled simulator where memory binds.
bound_gap   where a logged schedule loses against the certified bound.
plot        the drift, stability-region and two-class figures.
planner     the capacity planner (``llmq plan``).
slai        Section 7 reproduced: SLAI vs Sarathi-Serve vs vLLM (``llmq slai``).
serving     measured serving runs replayed through the simulator configured as their engine was.
"""

import os

from stability import numba_cache as _numba_cache


def _configure_numba_cache() -> None:
    """Key numba's on-disk cache on the source of the whole package.

    numba invalidates a cached function only when its own file changes, not when a compiled
    function it calls (in another module) does; a cache directory named by a hash of every source
    file here (and the numba version) makes any change recompile everything. Inside it, each
    function's cache is found by its file's path in the source tree
    (:class:`stability.numba_cache.SourceTreeLocator`), where numba has the
    ``NUMBA_CACHE_LOCATOR_CLASSES`` setting. A user's ``NUMBA_CACHE_DIR`` (or
    ``NUMBA_CACHE_LOCATOR_CLASSES``) wins.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    import numba

    from theory.io import cache_home
    from theory.version import source_digest

    target = cache_home() / "numba" / f"{numba.__version__}-{source_digest('stability')}"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache home: keep numba's default location
        return
    numba.config.CACHE_DIR = str(target)
    if hasattr(numba.config, "CACHE_LOCATOR_CLASSES") and not os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        from stability.numba_cache import locator_classes

        numba.config.CACHE_LOCATOR_CLASSES = locator_classes()


_configure_numba_cache()
_numba_cache.compile_once()
