"""Schedulers: one module per policy, each a readable compiled loop over the engine's primitives.

The interface a policy module implements, and the registry that resolves a scheduler's name to its
module, are :mod:`stability.sim.registry`: the engine and the simulator reach a policy only
through it, never by importing a policy module.
"""
