"""Anything that runs requests through time: the batch-execution simulator, its schedulers, the
RAD cycle DTMC and capacity-region sweeps.

Modules
-------
kernels     compiled twins of theory.cost (Eq. 4-7) used inside the engine's hot loop.
engine      the event-skipping batch-execution core of one GPU, shared by all schedulers.
mixed       batches mixing prefill chunks of several requests with decodes; recompute preemption.
memory      KV-cache capacity, block accounting, admission checks and rejection reasons.
schedulers  one module per policy, each a readable loop over the engine's primitives.
cluster     r GPUs and the resource planner (uniform random, round robin, join-shortest-queue).
disaggregated  DistServe's prefill nodes feeding decode nodes through a KV hand-off.
metrics     TTFT, TBT, latency, queue-length paths, the stability verdict.
classes     request classes (paying / free users) with TBT SLOs; SLO attainment.
simulate    the driver: scenario in, results out.
markov      finite chains: GTH stationary law, communicating classes, periods.
dtmc        RAD's cycle DTMC (Appendix C) built by executing its cycles; drift, stationary law.
region      capacity-region sweeps (tile set x scheduler x r x lambda), cached and resumable.
slai_study, slai_analysis, slai_plots, slai_report
            Section 7 reproduced: SLAI vs Sarathi-Serve vs vLLM (``llmq slai``).
plot        the drift, stability-region and two-class figures.
io          atomic file output.
"""

import hashlib
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

    digest = hashlib.sha256(numba.__version__.encode())
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = base / "llmq" / "numba" / digest.hexdigest()[:16]
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache home: keep numba's default location
        return
    numba.config.CACHE_DIR = str(target)


_configure_numba_cache()
