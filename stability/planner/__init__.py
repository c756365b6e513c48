"""The capacity planner (``llmq plan``): prices and SLOs, the candidate grid pruned by certified
bounds, the simulated search over fleets (pure and mixed), and its report.

The API (the names :mod:`llmq` also gives are marked there):

* :class:`~stability.planner.grid.PlanSpec` (the question: a rate, a workload, an
  :class:`~stability.planner.grid.SloSpec` from :func:`~stability.planner.grid.parse_slo`, the GPUs,
  models and schedulers to try) -> :func:`~stability.planner.grid.build_grid` (candidates, pruned
  by certified capacity without simulation) -> :func:`~stability.planner.search.search` on a
  :class:`stability.runner.Runner` (:class:`~stability.planner.search.PlanResult`: the cheapest
  feasible plan and the Pareto front) -> :func:`~stability.planner.search.verify` (re-simulated);
* :func:`~stability.planner.search_mixed.search_mixes`: fleets of two GPU kinds;
* :func:`~stability.planner.report.write_outputs`: ``plan.md``, ``.csv``, ``.json``, ``.png``.

Modules
-------
grid          prices, SLOs, the candidate grid, certified fleet capacities, pruning.
search        the cheapest-first simulated search, adaptive replication, verification.
mixed_fleet   mixed fleets behind a capacity-proportional random router.
search_mixed  the two-kind mixes cheaper than the best pure plan, simulated.
report        what ``llmq plan`` prints and writes.
"""
