"""The capacity planner (``llmq plan``): prices and SLOs, the candidate grid pruned by certified
bounds, the simulated search over fleets (pure and mixed), and its report.

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
mixed_fleet   two-kind mixes and their certified capacity.
search_mixed  the search over mixes cheaper than the best pure plan (its own runner task).
report        the outputs: console lines, plan.md, plan.csv, plan.json, plan.png.
"""
