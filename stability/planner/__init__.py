"""The capacity planner (``llmq plan``): prices and SLOs, the candidate grid pruned by certified
bounds, the simulated search over fleets (pure and mixed), and its report."""
