"""Pure functions of the paper's tile-based model: no simulation.

Modules
-------
hardware   GPU profiles: SM count s, tile sets T_out x T_red, per-tile rates mu(t).
models     Transformer presets (N, d_x, d, heads, KV heads, d_ff, vocab).
cost       Eq. 2-7, vectorized: T_GeMM, T_GeMV, T_Lin, T^{D,SA}, T^{P,SA}, T_B.
symbolic   The same formulas as sympy expressions (twins of cost and bounds).
workload   Joint (L^P, L^D) laws: exact pmf, fitted, empirical trace.
bounds     T_bar^R, T^max, lambda* = r / T_bar^R, t*_lcm, Theorem 2's n, Eq. 25, Lemma 4.
assumptions  Which of Assumptions 1-4 hold for a GPU, model and workload.
timings    Reading measured GeMM or batch timings (CSV).
calibrate  Least-squares fits of a GPU profile's rates to measured timings.
config     TOML input: reading files, merging user tables into the presets.
"""
