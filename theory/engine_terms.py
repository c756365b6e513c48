"""The costs a serving engine adds to Eq. 7 beyond the GPU's kernels: CUDA-graph padding of a step's
token count and the front end's time per request (the engine's host time per step is the added-time
term ``engine_step_s``, :mod:`theory.added_time`).

CUDA-graph padding (``cudagraph_capture_sizes``). vLLM v1 captures CUDA graphs for the token counts
of ``CompilationConfig.cudagraph_capture_sizes`` and runs a step of ``tau`` tokens, ``tau`` at most
the largest of them, at the least captured size ``pad(tau) >= tau``: in ``FULL_AND_PIECEWISE``
mode (its default) a uniform-decode step replays a full graph and a step with a prefill chunk the
piecewise graphs (attention eager, the rest of the forward pass captured), both keyed by the padded
token count; a step above the largest size runs without graphs, unpadded; ``enforce_eager`` (mode
``NONE``) pads nothing. The term prices the linear GeMMs (Eq. 4's ``T_Lin``) at ``pad(tau)``::

    T_Lin'(tau) = T_Lin(pad(tau)),   pad(tau) = min {s in sizes : s >= tau}  (tau <= max sizes),
                                               tau                          (otherwise).

The attention of Eq. 5-6 and ``tau / mu_nLin`` stay at the real items (the padded rows have no
context). vLLM's default sizes (:func:`default_capture_sizes`) are 1, 2, 4, then multiples of 8
below 256, then multiples of 16 up to ``min(2 max_num_seqs, 512)``.

How it enters the certified capacity (:mod:`theory.capacity`): through ``G(tau)`` alone, since
``T_Lin'`` depends on the token count only and the capacity law reads ``linear_table``. Charging
every batch its padded time is what the engine pays, so the bound stays a bound; it can only fall,
since ``T_Lin' >= T_Lin`` where ``T_Lin`` does not fall with ``tau``. Theorem 1's least rate
``l* = inf T_Lin(tau) / tau`` is unchanged (``T_Lin(pad(tau)) >= l* pad(tau) >= l* tau``) and
``T^max``'s one-token batches take ``T_Lin'(1)``.

Front-end time (``frontend_s``). The API server's time per request outside the engine
(tokenizing the prompt, detokenizing and streaming the output, the HTTP handling) is added once to
the request's TTFT and end-to-end latency: it adds to no batch, so it changes neither the GPU time
of Eq. 7, nor TPOT, nor any capacity bound (it is latency, not work, in the Theorem 1 sense).

References
----------
Bari, Hegde, de Veciana (2025), Eq. 4, Eq. 7, Theorem 1.
vllm-project/vllm @ 0045689 ``docs/design/cuda_graphs.md`` (``CUDAGraphMode``, ``FULL_AND_PIECEWISE``
as the default; ``BatchDescriptor.num_tokens`` the padded token count);
vllm-project/vllm @ 002284d ``vllm/config/compilation.py`` (``cudagraph_capture_sizes``,
``max_cudagraph_capture_size``); vllm-project/vllm ``vllm/config/vllm.py`` ``_set_cudagraph_sizes``
(the default sizes; commit not verified); vllm-project/vllm ``vllm/entrypoints/openai/`` (the API
server that tokenizes and detokenizes outside the engine core; commit not verified).
"""

from __future__ import annotations

import numpy as np

from theory.errors import FieldError

MAX_CAPTURE = 8192  # the largest capture size accepted (every padded count is in the linear tables)


def default_capture_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """vLLM's default ``cudagraph_capture_sizes`` for ``max_num_seqs`` (module docstring): 1, 2, 4,
    the multiples of 8 below 256, then the multiples of 16 up to ``min(2 max_num_seqs, 512)``."""
    if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
        raise FieldError("max_num_seqs", max_num_seqs, "an integer >= 1")
    top = min(2 * max_num_seqs, 512)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
    return tuple(s for s in sizes if s <= top)


def check_capture_sizes(value, where: str) -> tuple[int, ...]:
    """``value`` as capture sizes: a non-empty list of distinct integers in ``1..MAX_CAPTURE``,
    returned ascending (a clear error naming ``where`` otherwise)."""
    expected = f"a non-empty list of distinct integers from 1 to {MAX_CAPTURE} (token counts)"
    if not isinstance(value, (list, tuple)) or not value:
        raise FieldError(where, value, expected)
    for s in value:
        if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_CAPTURE:
            raise FieldError(where, value, f"{expected}; {s!r} is not")
    if len(set(value)) != len(value):
        raise FieldError(where, value, f"{expected}; a size is repeated")
    return tuple(sorted(value))


def pad_tokens(sizes: tuple[int, ...] | None, tau) -> np.ndarray:
    """``pad(tau)``: each token count rounded up to the least capture size at or above it; counts
    above the largest size (and 0) unchanged; ``sizes`` None: no padding."""
    tau = np.asarray(tau, dtype=np.int64)
    if not sizes:
        return tau
    s = np.asarray(sizes, dtype=np.int64)
    k = np.searchsorted(s, tau, side="left")
    inside = (tau > 0) & (tau <= s[-1])
    return np.where(inside, s[np.minimum(k, s.size - 1)], tau)


def frontend_s(cm) -> float:
    """Seconds the front end adds to each request's TTFT and latency (``frontend_s`` of the GPU's
    terms; 0 when off)."""
    return float(cm.gpu.terms.frontend_s)


def with_frontend(cm, ttft, latency) -> tuple[np.ndarray, np.ndarray]:
    """``ttft`` and ``latency`` (seconds, per request) with the front end's time added to each."""
    fe = frontend_s(cm)
    return np.asarray(ttft, dtype=float) + fe, np.asarray(latency, dtype=float) + fe
