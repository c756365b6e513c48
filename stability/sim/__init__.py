"""The batch-execution simulator: a scenario in, a result out.

The API (the names :mod:`llmq` also gives are marked there):
:class:`~stability.sim.simulate.Scenario` -> :func:`~stability.sim.simulate.simulate` ->
:class:`~stability.sim.simulate.SimResult` (``summary()``, ``verdict()``, ``batch_log()``);
:func:`~stability.sim.registry.get_scheduler`, :func:`~stability.sim.registry.scheduler_names` and
:func:`~stability.sim.registry.register`: the scheduler registry;
:func:`~stability.sim.fleet.simulate_fleet`: unequal GPUs behind one router.

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
arrivals       load schedules: stages of Poisson or evenly spaced arrivals at piecewise-constant rates.
closed_loop    closed-loop load: N users each sending a request a think time after the previous one ends.
metrics        TTFT, TBT, latency, queue-length paths, the stability verdict.
fleet          unequal GPUs behind one router (JSQ, shortest expected delay, weighted random).
registry       the scheduler registry: a name -> its policy module (the interface a policy implements).
simulate       the driver: :class:`~stability.sim.simulate.Scenario` in,
               :class:`~stability.sim.simulate.SimResult` out.

The policies themselves live in :mod:`stability.schedulers`; nothing here imports one: the
registry resolves a name to its module, and the driver hands the engine that module.
"""
