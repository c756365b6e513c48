"""Measured serving runs replayed end to end: a shipped run (:mod:`theory.validation.serving_runs`)
through the simulator configured as its engine was, and the error of every latency statistic.

The API: :func:`~stability.serving.score.score_runs` (or :func:`~stability.serving.score.score_run`
of a :class:`~stability.serving.replay.ReplaySpec`) -> :class:`~stability.serving.score.RunScore`
(its rows, and the :class:`~stability.serving.replay.Replay` behind them) ->
:func:`~stability.serving.figures.queues` and :func:`~stability.serving.figures.figure` (the CDFs
and the queues over time) and :func:`~stability.serving.report.write_outputs` (what
``llmq validate --serving --out`` writes).

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
figures  the measured and simulated CDFs and the running and waiting requests over time against
         the engine's log: the figure, its data files and their strict readers.
report   console lines, strict JSON, CSV and Markdown with column and file dictionaries (what
         ``llmq validate --serving`` prints and writes).
"""
