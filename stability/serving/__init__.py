"""Measured serving runs replayed end to end: a shipped run (:mod:`theory.validation.serving_runs`)
through the simulator configured as its engine was, and the error of every latency statistic.

Modules
-------
replay   the run's engine configuration as a scheduler's options, its requests as a trace, the
         simulated per-request times (:func:`replay`).
lockstep the data-parallel ranks of an MoE stepped together as vLLM runs them, for a replay on
         vLLM v1's scheduler (:func:`run_lockstep`).
score    measured against predicted TTFT, TPOT and latency (mean and percentiles), beside the
         simulator the source publishes (:func:`score_run`, :func:`score_runs`).
fit      the engine's host time per step fitted on some runs and scored on the others
         (:func:`fit_engine_step`, :func:`held_out`).
report   console lines, strict JSON, CSV and Markdown with a column dictionary, and the CDF and
         queue figures of ``llmq validate --serving``.
"""
