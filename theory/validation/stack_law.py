"""The serving stack's law for a whole batch on top of Eq. 7 (:class:`StackLaw`) and its bounded
least-squares fit.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 7; :mod:`theory.terms` (the all-reduce law).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from theory.errors import FieldError

LARGE_MESSAGE_BYTES = 32 * 2**20
"""All-reduce message size per GPU above which :class:`StackLaw` prices the bytes apart (32 MiB:
2,048 tokens of Llama-2-70B's ``d_x = 8192`` in fp16). Up to this size what splitwise's H100 stack
adds to one rank's kernels is NCCL's own all-reduce time (vidur's DGX H100 profile); at 64 MiB it
is 3.2 times that (the ``llmq_h100`` rank rows, profiles README). The boundary was read off those
measurements, which share the H100 batch shapes; on the A100 it is out of sample."""


@dataclass(frozen=True)
class StackLaw:
    """A serving stack's time for a whole batch on top of Eq. 7, fitted per GPU x model x TP.

    ``T = overhead_s + a_compute C + a_allreduce R + a_large L`` where ``R`` is the time Eq. 7
    gives the batch's all-reduces (:func:`theory.terms.allreduce_time`, the law fitted on vidur's
    NCCL profile), ``L`` the part of ``R``'s bandwidth time spent on the bytes of each message
    beyond :data:`LARGE_MESSAGE_BYTES`, and ``C`` the rest of Eq. 7 (GeMMs, attention, element-wise
    work). ``overhead_s >= 0`` is a fixed time per batch (launches, scheduling, sampling),
    ``a_compute >= 1`` the stack's efficiency on the modelled kernels, ``a_allreduce >= 1`` how much
    slower its collectives run than NCCL's own benchmark (an all-reduce the stack does not overlap,
    a slower algorithm) and ``a_large >= 0`` how much more a byte beyond the large-message boundary
    costs (``a_allreduce + a_large`` times NCCL's). ``StackLaw(0, 1, 1)`` is Eq. 7.

    The law is fitted per served configuration, not per GPU x TP: what a stack adds per step
    depends on the model it runs. On splitwise's A100s at TP 8, Eq. 7 puts a BLOOM-176B decode step
    well above a Llama-2-70B one (its larger weight shard alone takes longer to stream at the
    datasheet bandwidth), and splitwise measures a far smaller gap: one law for both would need
    ``a_compute < 1``, or collectives many times slower than NCCL's (``llmq validate`` lists the law
    fitted per model, ``batch_stack``).

    References
    ----------
    Eq. 7; :mod:`theory.terms` (the all-reduce law, nccl-tests ``doc/PERFORMANCE.md``).
    """

    overhead_s: float
    a_compute: float
    a_allreduce: float
    a_large: float = 0.0
    LOWER: ClassVar[tuple[float, ...]] = (0.0, 1.0, 1.0, 0.0)  # the bounds the fields are fitted under

    def time(self, compute, allreduce, large=0.0) -> np.ndarray:
        """Seconds of batches whose Eq. 7 parts are ``compute``, ``allreduce`` and ``large``."""
        return (self.overhead_s + self.a_compute * np.asarray(compute, dtype=float)
                + self.a_allreduce * np.asarray(allreduce, dtype=float)
                + self.a_large * np.asarray(large, dtype=float))


def fit_stack_law(measured, compute, allreduce, large=None) -> StackLaw:
    """The :class:`StackLaw` minimising the squared relative error ``sum_i (T_i / m_i - 1)^2``
    over batches with measured times ``m_i`` and Eq. 7 parts ``compute``, ``allreduce`` and
    ``large`` (``None``: no message beyond the boundary), subject to ``overhead_s >= 0``,
    ``a_compute >= 1``, ``a_allreduce >= 1``, ``a_large >= 0`` (bounded linear least squares,
    :func:`scipy.optimize.lsq_linear`). Without all-reduce time (TP 1) ``a_allreduce`` is 1, and
    without large messages ``a_large`` is 0.

    References
    ----------
    Eq. 7 with the profile's fixed time per batch (:mod:`theory.terms`, ``overhead_s``).
    """
    from scipy.optimize import lsq_linear

    m, c, r = (np.asarray(x, dtype=float) for x in (measured, compute, allreduce))
    big = np.zeros(m.shape) if large is None else np.asarray(large, dtype=float)
    if not m.size or not m.shape == c.shape == r.shape == big.shape:
        raise FieldError("measured", m.size, "one or more (measured, compute, allreduce, large) "
                                             "tuples of equal length")
    has_r, has_big = bool(np.any(r > 0)), bool(np.any(big > 0))
    c0, a_c, a_r, a_l = StackLaw.LOWER
    cols = [np.ones(m.size), c] + ([r] if has_r else []) + ([big] if has_big else [])
    lower = [c0, a_c] + ([a_r] if has_r else []) + ([a_l] if has_big else [])
    x = list(lsq_linear(np.column_stack(cols) / m[:, None], np.ones(m.size),
                        bounds=(lower, np.inf), method="bvls").x)
    return StackLaw(float(x[0]), float(x[1]), float(x[2]) if has_r else 1.0,
                    float(x[-1]) if has_big else 0.0)


__all__ = [
    "LARGE_MESSAGE_BYTES",
    "StackLaw",
    "fit_stack_law",
]
