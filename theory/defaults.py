"""The defaults every command shares, each defined once.

``EPSILON`` is Theorem 2's margin ε: RAD is stable at λ < λ*(1 − ε) when n exceeds Theorem 2's
threshold. It is the default of ``llmq bounds --epsilon`` (Theorem 2's n), ``llmq region
--epsilon`` (Theorem 2's line and RAD's automatic n) and ``llmq dtmc --epsilon`` (the margin of
its n search). 0.05 puts the guaranteed rate within 5% of λ*, and the n it needs (the empirical
n_min is 172-186 for Mistral-7B on the Table-1 workload on an A100, RTX 6000 Ada or L4) keeps the
cycle DTMC small enough for a command-line run.

``RAD_N`` is RAD's requests per cycle n when none is given: ``"auto"``, the empirical smallest n
whose executed cycle drift is negative for every x >= n at λ*(1 − ``EPSILON``) on the padded
workload (:func:`stability.dtmc.empirical_n_min`; Theorem 2's own threshold is 10^5-10^6
requests for the presets). ``llmq region``, ``llmq simulate`` and ``llmq dtmc`` all resolve it
the same way (:func:`stability.points.auto_rad_n`).

References
----------
Bari, Hegde, de Veciana (2025), Theorem 2 and Appendix C.
"""

from __future__ import annotations

EPSILON = 0.05
RAD_N = "auto"
