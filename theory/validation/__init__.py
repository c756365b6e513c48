"""The model against measured hardware: public profiles and their converters, calibration, the
roofline screen, scoring per GeMM and per whole batch, and the reports of ``llmq validate``.

The API:

* :func:`theory.validation.validate.validate` of the profiles
  :func:`theory.profiles.shipped_profiles` names (loaded by :func:`theory.profiles.load_profile`):
  predicted against measured, per GeMM, per whole batch and per attention batch
  (``llmq validate``); its report writers are :mod:`theory.validation.report` and
  :mod:`theory.validation.attention_report`.
* :func:`theory.validation.timings.read_timings`, then
  :func:`theory.validation.calibrate.calibrate` (or :func:`~theory.validation.calibrate.fit_gemm`,
  :func:`~theory.validation.calibrate.fit_batch`): a GPU profile fitted to measured timings
  (``llmq calibrate``).
* :func:`theory.validation.steps.score_steps`: Eq. 7 per engine step against the measured steps
  (:mod:`theory.validation.steps_data`), the CUDA-graph padding rule and the time per step.
* :func:`theory.validation.serving_runs.load_run` of the runs
  :func:`theory.validation.serving_runs.shipped_runs` names: measured serving runs and the
  latency metrics benchmark clients define (:mod:`theory.validation.runs_convert` rebuilds them);
  :mod:`stability.serving` replays them through the simulator.

The model itself (:mod:`theory` proper) never imports this package.
"""
