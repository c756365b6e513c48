"""The model against measured hardware: public profiles and their converters, calibration, the
roofline screen, scoring per GeMM and per whole batch, and the reports of ``llmq validate``.

The API:

* :func:`theory.validation.validate.validate` of the profiles
  :func:`theory.profiles.shipped_profiles` names (loaded by :func:`theory.profiles.load_profile`),
  with :class:`theory.validation.results.Settings`: predicted against measured, per GeMM, per whole
  batch and per attention batch (``llmq validate``); its report writers are
  :mod:`theory.validation.report` and :mod:`theory.validation.attention_report`.
* :func:`theory.validation.timings.read_timings`, then
  :func:`theory.validation.calibrate.calibrate` (or :func:`~theory.validation.gemm_fit.fit_gemm`,
  :func:`~theory.validation.batch_fit.fit_batch`), with
  :class:`theory.validation.calibration.FitOptions`: a GPU profile fitted to measured timings
  (``llmq calibrate``).
* :func:`theory.validation.steps.score_steps`: Eq. 7 per engine step against the measured steps
  (:mod:`theory.validation.steps_data`), the CUDA-graph padding rule and the time per step.
* :func:`theory.validation.serving_runs.load_run` of the runs
  :func:`theory.validation.serving_runs.shipped_runs` names: measured serving runs, and the
  latency metrics benchmark clients define (:mod:`theory.validation.serving_metrics`;
  :mod:`theory.validation.runs_convert` rebuilds the runs);
  :mod:`stability.serving` replays them through the simulator.

The model itself (:mod:`theory` proper) never imports this package.

Modules
-------
validate          the driver: every row of the shipped profiles predicted and scored (llmq validate).
kept              the driver's report kept across processes, named by the code, profiles and settings.
results           what a run did and found: Settings, Report, the schemes and the group columns.
errors            absolute relative errors and their median / 90th percentile (ErrorStats); the spread
                  of a set of values (Summary) and a set's accuracy (Accuracy).
gemm              the per-GeMM predictor, GeMM rows and their held-out splits, the tile model fitted
                  on rows, the measured-profile law built from rows.
score_gemm        every scheme's prediction of the GeMM rows, per group and pooled per GPU.
batches           whole batches under Eq. 7: TP cost model, batch time, its parts, folds.
stack_law         the serving stack's law on top of Eq. 7 and its bounded least-squares fit.
score_batches     whole batches under Eq. 7 and the stack law, held out by folds; per-GPU verdicts.
stack_law_reach   whether any one stack law per group reaches the targets in sample (a MILP).
batch_orderings   equal-token batch pairs whose measured order Eq. 7 cannot give.
allreduce         the all-reduce law and its scores against measured collectives.
attention         measured self-attention batches against Eq. 5-6 (and its report: attention_report).
staircase         the step heights of GeMM times over the token count, and their verdict.
targets           the acceptance targets and the law each GPU is judged under.
plausibility      the roofline screen: rows faster than their shape's lower bound.
steps             Eq. 7 per engine step against measured steps (data: steps_data; report: steps_report;
                  the fixed time per step: steps_fixed).
serving_runs      measured serving runs, loaded and checked (converters: runs_convert; files:
                  serving_io; published figures: serving_published).
serving_metrics   the latency metrics of benchmark clients: TTFT, TPOT, latency, ITL, statistics.
small_ops         a layer's small operators (norms, rotary embedding, activation) as one affine time per
                  batch, fitted on vidur's element-wise rows of the same layer shape (the TP serving replay).
calibrate         fit a GPU profile to timings (llmq calibrate): gemm_fit (Eq. 2 per tile, its search
                  gemm_search), batch_fit (Eq. 7), calibration (the fitted record and its TOML).
term_fits         how a number of each cost term is fitted, or why it has none.
timings           reading measured GeMM or batch timings (CSV).
presets_fit       refitting the shipped calibrated presets from the public profiles.
profiles_convert  converting the public profiles' raw files into llmq's profile CSVs (LLMServingSim's:
                  profiles_llmservingsim; the rows and their writer: profiles_rows).
report            the outputs of llmq validate: console, Markdown, CSV, JSON, figures.
"""
