"""The latency metrics of a serving run, as vLLM's benchmark client defines them.

Times in seconds, per request: :func:`ttft` from arrival to the first token; :func:`tpot` per
output token after the first; :func:`latency` from arrival to the last token; :func:`itl` every gap
between consecutive tokens after the first; :func:`statistics` their mean and percentiles
(:data:`STATISTICS`). The runs that carry them: :mod:`theory.validation.serving_runs`.

References
----------
vllm-project/vllm ``vllm/benchmarks/serve.py`` (``calculate_metrics``: TPOT = (latency - TTFT) /
(output_len - 1) for output_len > 1; ``np.mean``, ``np.percentile``) at commit
def9ce85ba1079af970a58ed3d42dd861ae35d58; ``vllm/benchmarks/lib/endpoint_request_func.py``
(``async_request_openai_completions``: ``ttft`` = first chunk - start, ``itl`` = the gaps after
it, ``latency`` = last chunk - start) at commit 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602;
casys-kaist/LLMServingSim ``bench/core/validate.py`` (``_bench_latencies``: the same three
definitions) at commit 5daddb21a545658d5150b535712d0494584b5278.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

STATISTICS = ("mean", "p50", "p90", "p95", "p99")


def ttft(arrival: np.ndarray, first_token: np.ndarray) -> np.ndarray:
    """Time to first token of each request: ``first_token - arrival`` (seconds).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.ttft =
    time.perf_counter() - st`` at the first streamed chunk) at commit
    3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602.
    """
    return np.asarray(first_token, dtype=float) - np.asarray(arrival, dtype=float)


def tpot(first_token: np.ndarray, last_token: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """Time per output token of each request, the first token excluded:
    ``(last_token - first_token) / (output_tokens - 1)``; NaN where ``output_tokens <= 1`` (vLLM
    leaves those requests out of its TPOT statistics).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/serve.py`` (``calculate_metrics``: ``latency_minus_ttft /
    (output_len - 1)`` when ``output_len > 1``) at commit def9ce85ba1079af970a58ed3d42dd861ae35d58.
    """
    out = np.asarray(output_tokens, dtype=float)
    gap = np.asarray(last_token, dtype=float) - np.asarray(first_token, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(out > 1, gap / (out - 1), np.nan)


def latency(arrival: np.ndarray, last_token: np.ndarray) -> np.ndarray:
    """End-to-end latency of each request: ``last_token - arrival`` (vLLM's E2EL, seconds).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.latency =
    most_recent_timestamp - st``) at commit 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602.
    """
    return np.asarray(last_token, dtype=float) - np.asarray(arrival, dtype=float)


def itl(token_times: Sequence[np.ndarray]) -> np.ndarray:
    """Inter-token latencies: every gap between consecutive tokens of a request after its first,
    all requests' gaps concatenated (seconds).

    Parameters
    ----------
    token_times : sequence of arrays
        Per request, the times its output tokens arrived, in order (the first is the first token).

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.itl.append(
    timestamp - most_recent_timestamp)`` for every chunk after the first) and
    ``vllm/benchmarks/serve.py`` (``itls += outputs[i].itl``), commits as in the module docstring.
    """
    gaps = [np.diff(np.asarray(t, dtype=float)) for t in token_times]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def statistics(values: np.ndarray) -> dict[str, float]:
    """Mean and the 50th, 90th, 95th and 99th percentiles of ``values``, NaN entries left out.

    Percentiles interpolate linearly between order statistics (``numpy.percentile``'s default),
    as vLLM's benchmark client and LLMServingSim's bench summary compute them.

    References
    ----------
    vllm-project/vllm ``vllm/benchmarks/serve.py`` (``np.mean``, ``np.percentile``) at commit
    def9ce85ba1079af970a58ed3d42dd861ae35d58; casys-kaist/LLMServingSim ``bench/core/plots.py``
    (``_percentile``) at commit 5daddb21a545658d5150b535712d0494584b5278.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if not x.size:
        return dict.fromkeys(STATISTICS, math.nan)
    return {"mean": float(x.mean()), **{f"p{q}": float(np.percentile(x, q)) for q in (50, 90, 95, 99)}}
