"""Equal-token batch pairs against Eq. 7's order (:mod:`theory.validation.batch_orderings`): by hand, and the
error floor against every stack law drawn and the fitted one."""

import numpy as np
import pytest

from theory.profiles import load_profile
from theory.validation.batch_orderings import ordering_pairs, ordering_summary
from theory.validation.batches import batch_cost_model, batch_parts
from theory.validation.errors import abs_rel_error
from theory.validation.stack_law import StackLaw, fit_stack_law


def _batch_rows(shapes):
    """Structured whole-batch rows from ``(operation, tokens, context, generated, seconds)``."""
    dtype = [("gpu", "U8"), ("model", "U16"), ("tp", "i8"), ("operation", "U16"), ("tokens", "i8"),
             ("context", "i8"), ("generated", "i8"), ("seconds", "f8")]
    return np.array([("a100", "llama-2-70b", 4, *s) for s in shapes], dtype=dtype)


def test_ordering_pairs_by_hand():
    """Pairs at equal tokens and all-reduce time, ordered by C: one in Eq. 7's order (floor 0), one
    against it (floor (0.6 - 0.4) / (0.6 + 0.4) = 0.2), one Eq. 7 prices equal (the slower row is
    the light one); a pair with other all-reduce time, or at other tokens, is no pair."""
    rows = _batch_rows([("prefill_batch", 2048, 512, -1, 0.6), ("prefill_batch", 2048, 2048, -1, 0.4),
                        ("prefill_batch", 4096, 512, -1, 0.5), ("prefill_batch", 4096, 4096, -1, 0.9),
                        ("decode_batch", 1, 512, 128, 0.05), ("decode_batch", 1, 576, 2, 0.04),
                        ("prefill_batch", 1024, 512, -1, 0.2)])
    compute = [0.3, 0.35, 0.7, 0.8, 0.03, 0.03, 0.1]
    allreduce = [0.01, 0.01, 0.02, 0.02, 0.0, 0.0, 0.005]
    large = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    pairs = ordering_pairs("toy", rows, compute, allreduce, large)
    got = {(p["operation"], p["tokens"]): p for p in pairs}
    assert set(got) == {("prefill_batch", 2048), ("prefill_batch", 4096), ("decode_batch", 1)}
    inverted = got[("prefill_batch", 2048)]
    assert inverted["inverted"] and inverted["light"] == [512, -1] and inverted["heavy"] == [2048, -1]
    assert inverted["error_floor"] == pytest.approx(0.2, rel=1e-12)
    ordered = got[("prefill_batch", 4096)]
    assert not ordered["inverted"] and ordered["error_floor"] == 0.0 and ordered["light"] == [512, -1]
    tie = got[("decode_batch", 1)]
    assert tie["inverted"] and tie["light"] == [512, 128]
    assert tie["error_floor"] == pytest.approx(0.01 / 0.09, rel=1e-12)
    other = list(allreduce)
    other[1] = 0.02  # the same tokens, another all-reduce time: the law may order them either way
    assert {(p["operation"], p["tokens"]) for p in ordering_pairs("toy", rows, compute, other, large)} == {
        ("prefill_batch", 4096), ("decode_batch", 1)}
    summary = ordering_summary(pairs, 0.12)
    assert summary["prefill_batch"] == {"pairs": 2, "inverted": 1, "over_limit": 1, "limit": 0.12,
                                        "largest": {"model": "llama-2-70b", "tp": 4, "tokens": 2048,
                                                    "light": [512, -1], "heavy": [2048, -1],
                                                    "error_floor": inverted["error_floor"]}}
    assert ordering_summary([ordered], 0.12)["prefill_batch"]["largest"] is None


def test_error_floor_bounds_every_stack_law_and_is_reached():
    """On splitwise's A100, Llama-2-70B at TP 4, 2,048 tokens: four prompts of 512 measured slower
    than one of 2,048. Every stack law (5,000 seeded draws of its parameters, and the law fitted on
    the two rows) errs on one of them by at least the floor; predicting both at the harmonic mean
    of the measurements reaches it."""
    rows = load_profile("splitwise_perf_model").rows
    rows = rows[(rows["gpu"] == "a100") & (rows["model"] == "llama-2-70b") & (rows["tp"] == 4)
                & (rows["operation"] == "prefill_batch") & (rows["tokens"] == 2048)]
    cm, _ = batch_cost_model("a100", "llama-2-70b", 4)
    parts = batch_parts(cm, rows)
    (pair,) = ordering_pairs("splitwise_perf_model", rows, *parts)
    assert pair["inverted"] and pair["error_floor"] > 0.12
    m = rows["seconds"]
    rng = np.random.default_rng(0)
    draws = zip(rng.uniform(0, 0.2, 5000), rng.uniform(1, 3, 5000), rng.uniform(1, 10, 5000),
                rng.uniform(0, 10, 5000), strict=True)
    worst_case = [np.max(abs_rel_error(m, StackLaw(*x).time(*parts))) for x in draws]
    assert min(worst_case) >= pair["error_floor"] - 1e-12
    fitted = fit_stack_law(m, *parts)
    assert np.max(abs_rel_error(m, fitted.time(*parts))) >= pair["error_floor"] - 1e-12
    mean = 2 * m[0] * m[1] / (m[0] + m[1])
    assert np.max(abs_rel_error(m, np.full(2, mean))) == pytest.approx(pair["error_floor"], rel=1e-12)
