"""The paper's tile-based model and its bounds: pure functions, no simulation.

The API (the names :mod:`llmq` also gives are marked there):

* :class:`~theory.builder.CostSpec` and :func:`~theory.builder.cost_model`: the one way a named
  batch-time model (:class:`~theory.cost.CostModel`, Eq. 2-7) is built; :func:`theory.cost.T_batch`
  of a :class:`~theory.cost.Batch` is T_B (Eq. 7).
* :func:`~theory.hardware.get_gpu`, :func:`~theory.models.get_model`,
  :func:`~theory.workload.get_workload` and their ``*_names``: presets and length laws.
* :func:`~theory.bounds.compute_bounds` (:class:`~theory.bounds.Bounds`): T_bar^R, T^max,
  lambda*, Theorem 2's n, Eq. 25 and Lemma 4; :func:`~theory.capacity.capacity_bound`
  (:class:`~theory.capacity.CapacityBound`): the certified capacity beyond Eq. 2.
* :mod:`theory.errors`: the ``LlmqError`` family every bad input raises.

Modules
-------
hardware    GPU profiles: SM count s, tile sets T_out x T_red, per-tile rates mu(t).
models      Transformer presets (N, d_x, d, heads, KV heads, d_ff, vocab).
terms       Cost terms beyond Eq. 2, switched on in the GPU and model TOML files.
cost        Eq. 2-7, vectorized: T_GeMM, T_GeMV, T_Lin, T^{D,SA}, T^{P,SA}, T_B.
builder     CostSpec -> CostModel, the one builder.
measured    The measured-profile law of the linear GeMMs (real mode on profiled GPUs).
tensor_parallel  Tensor-parallel replicas: degrees, all-reduce laws, a TP group's profile.
symbolic    The same formulas as sympy expressions (twins of cost and bounds).
workload    Joint (L^P, L^D) laws: exact pmf, fitted, empirical trace.
bounds      T_bar^R, T^max, lambda* = r / T_bar^R, t*_lcm, Theorem 2's n, Eq. 25, Lemma 4.
capacity    The certified capacity for any batch-time law the toolkit expresses; the KV bound.
assumptions Which of Assumptions 1-4 hold for a GPU, model and workload.
markov      Finite Markov chains: stationary law (GTH), classes, period.
profiles    Measured public GPU profiles: the schema and its loader.
config, io, stats, errors, defaults, version
            TOML input, CSV and strict-JSON files, Student-t intervals, the error family,
            the shared defaults, source digests.
validation  The model against measured hardware (:mod:`theory.validation`).
"""
