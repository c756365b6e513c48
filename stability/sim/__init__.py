"""The batch-execution simulator: a scenario in, a result out.

Modules
-------
structs        numba struct types of the engine state and the cost tables.
kernels        compiled twins of theory.cost (Eq. 4-7) used inside the engine's hot loop.
engine         the event-skipping batch-execution core of one GPU, shared by all schedulers.
mixed          batches mixing prefill chunks of several requests with decodes; recompute preemption.
memory         KV-cache capacity, block accounting, admission checks and rejection reasons.
gpu            one GPU's run: cost tables, the scheduler's loop, the collected per-request record.
routing        the resource planner: uniform random, round robin, join-shortest-queue.
cluster        r GPUs behind a planner.
disaggregated  DistServe's prefill nodes feeding decode nodes through a KV hand-off.
classes        request classes (paying / free users) with TBT SLOs; SLO attainment.
metrics        TTFT, TBT, latency, queue-length paths, the stability verdict.
simulate       the driver: :class:`~stability.sim.simulate.Scenario` in,
               :class:`~stability.sim.simulate.SimResult` out.

The policies themselves live in :mod:`stability.schedulers`; nothing here imports one by name:
the driver hands the engine the scheduler module it was given.
"""
