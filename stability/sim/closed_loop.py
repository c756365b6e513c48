"""Closed-loop load: N users, each sends a request, waits for its end, thinks, sends the next.

This is how load generators drive a server at a fixed concurrency:

* vLLM's ``vllm bench serve --max-concurrency N`` (vllm-project/vllm, ``vllm/benchmarks/serve.py``
  at commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, ``benchmark()``; ``benchmarks/benchmark_serving.py``
  before it) creates one task per request as ``get_request`` releases them at ``--request-rate``
  and each task waits on ``asyncio.Semaphore(max_concurrency)`` before it sends
  (``limited_request_func``): a request is sent when fewer than N are in flight. With the default
  rate ``inf`` every request is released at once, so the k-th request of the data set is sent as
  soon as one of the first k - 1 ends, which is the closed loop below with no think time; with a
  finite rate the release times still come from that rate (the semaphore only caps the requests in
  flight), which llmq does not model: a closed loop here has no arrival rate.
* AIPerf's ``--concurrency`` alone (its "load generator options reference", docs.nvidia.com/aiperf,
  v0.13.0: "send requests as fast as possible within concurrency limits") is the same loop.

Semantics implemented (``Closed``):

* ``users`` users all send their first request at time 0;
* a user whose request ends at time t (its last token, or its rejection by a memory model) sends
  its next request at ``t + Z``, with Z the think time: 0, a constant, or exponential with the
  given mean (the k-th request to end draws the k-th think time of the seed's stream);
* the k-th request sent (in time order, ties by the order of the ends that caused them) takes the
  k-th lengths (and class) of the scenario, as vLLM's client takes its data set in order; a run
  sends ``n_requests`` requests in all, after which the users stop and the system drains.

A request's arrival is the time its user sends it; the GPU sees it at its first decision point at
or after that time, as it sees a Poisson arrival (one sent at the instant a rejection is decided
is seen at the next decision). The loop is exact, not sampled: the engine's loops return after
every event in which a request ends (``st.stop_at``, :func:`stability.sim.engine.running`), the
driver below then releases the users' next requests, and a loop never runs past a pending send
time (its ``t_stop``): the resumable loops make the same decisions as with the arrivals known in
advance (the property join-shortest-queue routing uses, :mod:`stability.sim.routing`).

One GPU only (``r = 1``); a policy whose decisions read "no arrival is left" (WAIT's drain rule)
would read it whenever every user is thinking, and is refused by the caller.

References
----------
Bari, Hegde, de Veciana (2025), Section 3.1 (the scheduler framework). Closed queueing networks and
the interactive response time law X = N / (R + Z): E. D. Lazowska, J. Zahorjan, G. S. Graham,
K. C. Sevcik (1984), "Quantitative System Performance", Prentice-Hall, Section 3.3.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np
from numba import njit

from stability.sim import engine
from stability.sim.gpu import GpuRun, RunOptions, collect, tables_for
from stability.sim.prefix_cache import set_prefixes
from theory.cost import CostModel
from theory.errors import FieldError

THINK = ("constant", "exponential")


@dataclass(frozen=True)
class Closed:
    """A closed loop of users (module docstring).

    Attributes
    ----------
    users : int
        N, the users (requests in flight, at most), >= 1.
    think : float
        Seconds a user waits between the end of a request and sending the next: the constant, or
        the mean of the exponential; >= 0 and finite (0: back to back).
    kind : str
        ``"constant"`` or ``"exponential"``.
    """

    users: int
    think: float = 0.0
    kind: str = "constant"

    def think_times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The think times after the first ``n`` requests to end, in that order (``rng`` draws the
        exponential ones; a constant draws nothing)."""
        if self.kind == "exponential" and self.think > 0:
            return rng.exponential(self.think, size=n)
        return np.full(n, float(self.think))


def parse_closed(
    users, think=0.0, kind: str = "constant", field: str = "concurrency", think_field: str = "think_time"
) -> Closed:
    """Validate a closed loop; errors name ``field`` (the users) or ``think_field`` (the think time
    and its law).

    Raises
    ------
    FieldError
        For users that are not an integer >= 1, a think time below 0 or not finite, or an unknown
        think-time law.
    """
    if isinstance(users, bool) or not isinstance(users, (int, np.integer)) or users < 1:
        raise FieldError(field, users, "an integer >= 1 (users with a request in flight or thinking)")
    if (
        isinstance(think, bool)
        or not isinstance(think, (int, float))
        or not (math.isfinite(think) and think >= 0)
    ):
        raise FieldError(think_field, think, "a finite number of seconds >= 0")
    if kind not in THINK:
        raise FieldError(f"{think_field}: law", kind, f"one of {', '.join(THINK)}")
    return Closed(int(users), float(think), kind)


@dataclass(frozen=True, eq=False)
class UserRequests:
    """What the users send, in the order they send it.

    Attributes
    ----------
    L_P, L_D : numpy.ndarray
        The k-th request's prompt and decode lengths (Section 2.2).
    cls : numpy.ndarray
        Its class, ``0 .. n_class - 1``.
    think : numpy.ndarray
        The think time after the k-th request to end (:meth:`Closed.think_times`), seconds.
    """

    L_P: np.ndarray
    L_D: np.ndarray
    cls: np.ndarray
    think: np.ndarray


@njit(cache=True)
def _stop_after_next_end(st):
    st.stop_at = st.n_done + st.n_rej + 1


@njit(cache=True)
def _ended_and_clock(st):
    return st.n_done + st.n_rej, st.clock


@njit(cache=True)
def _sent(st):
    return st.arr[: st.n_loaded].copy()


def run_closed(
    cm: CostModel,
    scheduler: ModuleType,
    params,
    users: int,
    reqs: UserRequests,
    options: RunOptions | None = None,
) -> GpuRun:
    """Simulate ``scheduler`` with ``params`` on one GPU driven by ``users`` users in a closed loop
    (module docstring) sending ``reqs``; ``options`` as for :func:`stability.sim.gpu.run_gpu` (its
    ``prefix`` indexes the requests in the order they are sent). Returns the run, whose ``arrival``
    are the send times (non-decreasing)."""
    options = RunOptions() if options is None else options
    n = int(reqs.L_P.size)
    ct = options.tables
    if ct is None:
        ct = tables_for(cm, reqs.L_P, reqs.L_D, getattr(params, "chunk", None))
    empty = np.zeros(0)
    st = engine.new_state(
        empty, empty, empty, None, replace(options, tables=None, progress=None, prefix=None), capacity=n
    )
    if options.prefix is not None:
        set_prefixes(st, *(np.asarray(a, dtype=np.int64) for a in options.prefix))
    _drive(scheduler.loop, st, ct, params.record(), users, reqs, options.progress)
    arrival = _sent(st)
    return collect(
        st,
        arrival,
        np.asarray(reqs.L_P),
        np.asarray(reqs.L_D),
        np.asarray(reqs.cls),
        options.log and options.detail,
    )


def _drive(loop, st, ct, prm, users: int, reqs: UserRequests, progress: Callable[[int], None] | None):
    """Run ``loop`` on ``st`` to the end, releasing each user's next request as its previous ends.

    ``pending`` holds the send times not yet given to the GPU. A time at or before the clock is
    given at once (no later end can precede it); a later one bounds the loop (its ``t_stop``), as
    does the next end (``st.stop_at``); with no request in flight (the loop is done) the earliest
    is given, which the GPU idles to.
    """
    n = int(reqs.L_P.size)
    L_P, L_D, cls = (np.asarray(a, dtype=np.int64) for a in (reqs.L_P, reqs.L_D, reqs.cls))
    think = np.asarray(reqs.think, dtype=np.float64)
    pending = [0.0] * min(users, n)
    sent = ended = reported = total = 0

    def send(t: float) -> None:
        nonlocal sent
        engine.append_request(st, t, int(L_P[sent]), int(L_D[sent]), int(cls[sent]))
        sent += 1

    while True:
        now = _ended_and_clock(st)[1]
        while pending and pending[0] <= now:
            send(heapq.heappop(pending))
        _stop_after_next_end(st)
        code = loop(st, ct, prm, pending[0] if pending else math.inf)
        if code == engine.GROW:
            engine.grow_log(st)
        total, now = _ended_and_clock(st)
        for k in range(ended, total):  # each end releases its user's next request
            if sent + len(pending) < n:
                heapq.heappush(pending, now + float(think[k]))
        if progress is not None and total - reported >= 1000:
            progress(total - reported)
            reported = total
        ended = total
        if code == engine.DONE:
            if not pending:
                break
            send(heapq.heappop(pending))  # nothing in flight: no end can precede it
    if progress is not None:
        progress(total - reported)
