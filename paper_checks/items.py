"""The numbered items of the paper that the report must account for, each with a verdict.

Equations 2-25, Assumptions 1-4, Propositions 1-2, Lemmas 1-4, Theorems 1-2, Definitions 1-2
and Algorithms 1-5 of Bari, Hegde, de Veciana (2025). Eq. 1 (the attention formula itself) is the
definition of the model, not a claim.
"""

from __future__ import annotations

PAPER_ITEMS: tuple[str, ...] = (
    *(f"Eq. {k}" for k in range(2, 26)),
    *(f"Assumption {k}" for k in range(1, 5)),
    *(f"Proposition {k}" for k in range(1, 3)),
    *(f"Lemma {k}" for k in range(1, 5)),
    *(f"Theorem {k}" for k in range(1, 3)),
    *(f"Definition {k}" for k in range(1, 3)),
    *(f"Algorithm {k}" for k in range(1, 6)),
)
