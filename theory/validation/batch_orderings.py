"""Equal-token batch pairs whose measured order contradicts Eq. 7's: an error no stack law avoids.

Two batches of one GPU x model x TP and one kind that run the same number of tokens through the
linear layers (prompts of 512 tokens and one prompt of 2,048, say) have the same linear time,
element-wise time and all-reduces under Eq. 7; they differ only in attention (and, with
``lm_head``, in the vocab rows: one per prompt, :func:`theory.cost.T_batch`). The stack law of
:class:`theory.validation.stack_law.StackLaw`, ``T = c + a_compute C + a_allreduce R + a_large L`` with
``a_compute >= 1``, gives both the same ``R`` and ``L`` (they depend on the tokens alone), so
whatever its parameters it orders them as ``C`` (computed, not assumed) orders them. Where the
measurements order them the other way, any one such law errs on one of the two rows by at least

    ``(m_light - m_heavy) / (m_light + m_heavy)``,

``m_light`` being the measured time of the batch Eq. 7 prices lower: the least of
``max(|p_l / m_light - 1|, |p_h / m_heavy - 1|)`` over predictions ``p_l <= p_h`` is reached at
``p_l = p_h = 2 m_light m_heavy / (m_light + m_heavy)``. It bounds the in-sample error (one law per
GPU x model x TP), not the held-out one, where the two rows may fall in different folds.

References
----------
Eq. 5-7 (attention and the vocab rows are the only parts of a batch that depend on how its
tokens split into prompts, attention the only one that depends on the decodes' positions);
:func:`theory.validation.stack_law.fit_stack_law`.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

COLUMNS = {
    "profile, gpu, model, tp, operation": "the rows' profile and group (operation: the batch kind; "
                                          "*_rank: one rank's share)",
    "tokens": "tokens both batches run through the linear layers and each all-reduce",
    "light, heavy": "the shapes (context, generated) of the batch Eq. 7 prices lower (of two it prices "
                    "equal, the one measured slower) and of the other "
                    "(prefill: context is the prompt length; decode: the context the decodes start "
                    "from and the tokens they generate; -1: not applicable)",
    "light_compute_s, heavy_compute_s": "C of each: Eq. 7 without its all-reduces",
    "light_measured_s, heavy_measured_s": "the measured times",
    "inverted": "the batch Eq. 7 prices lower (or equal) measured slower: no stack law orders the "
                "pair as measured",
    "error_floor": "(light_measured_s - heavy_measured_s) / (light_measured_s + heavy_measured_s) "
                   "where inverted, else 0: the least error any one stack law makes on one of the "
                   "two rows",
}


def ordering_pairs(profile: str, rows: np.ndarray, compute, allreduce, large) -> list[dict]:
    """Every pair of batch rows of one GPU x model x TP x operation with equal tokens, equal
    all-reduce time (``allreduce``, ``large``: the two are equal where the tokens are) and
    different shapes, ordered by Eq. 7 (columns :data:`COLUMNS`).

    Parameters
    ----------
    profile : str
        The profile the rows come from (reported).
    rows : numpy structured array
        Whole-batch rows (``gpu, model, tp, operation, tokens, context, generated, seconds``).
    compute, allreduce, large : array_like
        Eq. 7's parts of each row (:func:`theory.validation.batches.batch_parts`); rows with a non-finite
        ``compute`` (not predicted) are left out.

    Returns
    -------
    list of dict
    """
    compute, allreduce, large = (np.asarray(x, dtype=float) for x in (compute, allreduce, large))
    ok = np.isfinite(compute)
    groups: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(ok):
        r = rows[i]
        key = (str(r["gpu"]), str(r["model"]), int(r["tp"]), str(r["operation"]), int(r["tokens"]))
        groups.setdefault(key, []).append(int(i))
    out = []
    for (gpu, model, tp, operation, tokens), members in sorted(groups.items()):
        for i, j in combinations(members, 2):
            same_shape = all(rows[c][i] == rows[c][j] for c in ("context", "generated"))
            if same_shape or not (np.isclose(allreduce[i], allreduce[j], rtol=1e-12, atol=0.0)
                                  and np.isclose(large[i], large[j], rtol=1e-12, atol=0.0)):
                continue
            tie = np.isclose(compute[i], compute[j], rtol=1e-12, atol=0.0)
            if tie:  # Eq. 7 prices them equal: the slower one is the one it prices too low
                light, heavy = (i, j) if rows["seconds"][i] >= rows["seconds"][j] else (j, i)
            else:
                light, heavy = (i, j) if compute[i] < compute[j] else (j, i)
            m_l, m_h = float(rows["seconds"][light]), float(rows["seconds"][heavy])
            inverted = m_l > m_h
            out.append({"profile": profile, "gpu": gpu, "model": model, "tp": tp, "operation": operation,
                        "tokens": tokens,
                        "light": [int(rows["context"][light]), int(rows["generated"][light])],
                        "heavy": [int(rows["context"][heavy]), int(rows["generated"][heavy])],
                        "light_compute_s": float(compute[light]), "heavy_compute_s": float(compute[heavy]),
                        "light_measured_s": m_l, "heavy_measured_s": m_h, "inverted": inverted,
                        "error_floor": (m_l - m_h) / (m_l + m_h) if inverted else 0.0})
    return out


def ordering_summary(pairs: list[dict], limit: float) -> dict[str, dict]:
    """The pairs of one GPU pooled per batch kind: how many, how many inverted, how many whose
    error floor exceeds ``limit`` (each puts one of its two rows past it under any one stack law),
    and the pair with the largest floor (``None`` when none is inverted)."""
    out = {}
    for operation in sorted({p["operation"] for p in pairs}):
        kind = [p for p in pairs if p["operation"] == operation]
        worst = max(kind, key=lambda p: p["error_floor"])
        out[operation] = {
            "pairs": len(kind), "inverted": sum(p["inverted"] for p in kind),
            "over_limit": sum(p["error_floor"] > limit for p in kind), "limit": limit,
            "largest": {k: worst[k] for k in ("model", "tp", "tokens", "light", "heavy", "error_floor")}
            if worst["inverted"] else None}
    return out
