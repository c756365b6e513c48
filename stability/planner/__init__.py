"""The capacity planner (``llmq plan``): prices and SLOs, the candidate grid pruned by certified
bounds, the simulated search over fleets (pure and mixed), and its report.

The API (the names :mod:`llmq` also gives are marked there):

* :class:`~stability.planner.spec.PlanSpec` (the question: a rate, a workload, an
  :class:`~stability.planner.slo.SloSpec` from :func:`~stability.planner.slo.parse_slo`, the GPUs,
  models and schedulers to try) -> :func:`~stability.planner.grid.build_grid` (candidates, pruned
  by certified capacity without simulation) -> :func:`~stability.planner.search.search` on a
  :class:`stability.runner.Runner`, sized by :class:`~stability.planner.search.SearchOptions`
  (:class:`~stability.planner.search.PlanResult`: the cheapest feasible plan and the Pareto front)
  -> :func:`~stability.planner.search.verify` (re-simulated);
* :func:`~stability.planner.search_mixed.search_mixes`: fleets of two GPU kinds;
* :func:`~stability.planner.report.write_outputs`: ``plan.md``, ``.csv``, ``.json``, ``.png``.

Modules
-------
spec          the question (PlanSpec: a target rate, SLOs, the configurations to try) and the
              fleet rule of the random planner.
prices        the hourly price of one GPU (theory/data/prices.toml and a user file).
slo           latency SLOs per metric and request class, parsed from text.
caps          what each planned scheduler promises: token budget, decode cap, KV fraction.
grid          the candidates with their certified capacities, pruned and cheapest first.
runs          one candidate's replicated runs, measured against the SLO metrics (the runner's task).
search        the cheapest-first search with adaptive replication, and the verification.
mixed_fleet   two-kind mixes behind a capacity-proportional random router, their certified capacity.
search_mixed  the search over mixes cheaper than the best pure plan (its own runner task).
report        what ``llmq plan`` prints and writes.
"""
