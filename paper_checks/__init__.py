"""Every claim of the paper as an executable check (``llmq check``).

The API (the names :mod:`llmq` also gives are marked there):
:func:`~paper_checks.runner.run_checks` (all, the CI subset with ``fast=True``, or some ids) ->
:class:`~paper_checks.runner.Outcome` per check -> :func:`~paper_checks.report.write_reports`
(``paper_checks.md`` and ``.json``); :func:`~paper_checks.registry.all_checks` and
:func:`~paper_checks.registry.get_check`: the registered checks with their cards;
:func:`~paper_checks.runner.mismatches` against ``verdicts.json`` (``llmq check --expect``).

Modules, in paper order: ``section3_model`` (Eq. 2-7, Definitions 1-2), ``section3_assumptions``
(Assumptions 1-4), ``appendix_b`` (Eq. 9-12, the chunk set I_j), ``appendix_b_bounds`` (Eq. 13-16,
Propositions 1-2, Lemma 1), ``section4_theorems`` (Theorems 1-2, RAD's principles), ``appendix_c``
(Eq. 17-25, Lemma 2), ``appendix_c_recurrence`` (Lemmas 3-4, regeneration), ``algorithms``
(Algorithms 1-5, run by the literal interpreters of ``pseudocode``), ``section5_claims``,
``section67_data`` (Table 1, Eq. 8, SLAI's parameters and reported numbers), ``slai_steps`` (SLAI's
batch construction, Section 6, replayed on the simulator's batch log), ``nodes_and_defaults``
(Theorems 1-2 and Lemmas 3-4 at r > 1 nodes, Algorithms 1-3 with their default parameters, added by
mutation testing), ``proofs`` (sympy and z3: the relaxed chunking bound, Assumption 2 for every
d_col, Eq. 7 for symbolic batches, Theorem 2's drift with the corrected Eq. 25), ``compiled_rad``
(the simulator's RAD, in its logged and its default event-skipping mode, replayed through the
literal Algorithm 1), ``statements`` (unnumbered statements: Section 3.2.1's common tile, Appendix
D, Fig. 5c, measurements), ``beyond_paper`` (the library's own extensions of Theorems 1-2 to a
per-batch overhead and a token budget: verdicts on the extension, not on the paper),
``beyond_planner`` (the planner's price of a fleet against an independent count of GPUs and prices,
and its plan among fleets of equal price), ``default_mode`` (every scheduler's default
event-skipping mode against its logged mode), ``other_papers`` (other papers' results).
``chunking`` holds the exact dynamic programme over chunk boundaries; ``evidence`` what a check
evaluates and the evidence level it gives; ``registry``, ``runner`` and ``report`` the machinery;
``verdicts.json`` the reviewed verdicts CI compares against.

References
----------
Bari, Hegde, de Veciana (2025), Optimal Scheduling Algorithms for LLM Inference: Theory and Practice.
"""
