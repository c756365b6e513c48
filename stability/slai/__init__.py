"""Section 7 reproduced: SLAI vs Sarathi-Serve vs vLLM (``llmq slai``).

The API: a :class:`~stability.slai.study.Study` (its panels and policies; ``QUICK`` the CI size)
-> :func:`~stability.slai.report.run_study` (one cached simulation per point) ->
:func:`~stability.slai.analysis.aggregate` and :func:`~stability.slai.analysis.paper_table` (the
paper-vs-llmq table) -> :func:`~stability.slai.report.write_outputs`.

Modules
-------
study     the panels, policies and rate sweep; one cached simulation per point through
          :mod:`stability.runner`.
analysis  capacity, operating point, per-bucket TTFT and the paper-vs-llmq table.
plots     the Fig. 6 and Appendix F analogues.
report    runs the study and writes its files.

References
----------
Bari, Hegde, de Veciana (2025), Sections 6-7 and Appendix F.
"""
