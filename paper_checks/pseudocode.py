"""Deliberately literal interpreters of the paper's pseudo-code, Algorithms 1-5.

Each function follows its algorithm line by line (the line numbers are in the comments) and
records the batches it schedules. Where the printed pseudo-code is wrong, the correction is
applied unless its key is passed in ``printed``; that way a check can run the algorithm exactly
as printed and exactly as corrected, and nothing else differs. Keys:

* Algorithm 1 (RAD): ``"line13"`` -- ``c = min{t*_lcm, L^P(R) - i}`` (corrected ``L^P(R) - i + 1``).
* Algorithm 2: ``"line7"`` (same off-by-one), ``"no_arrivals"`` (P is never updated with arrivals;
  corrected: "Update P based on new arrivals" before each test of line 4).
* Algorithm 3: ``"line5"`` -- ``if mode = Prefill`` (corrected ``mode = Decode``).
* Algorithm 4 (Sarathi-Serve): ``"line12"`` (off-by-one), ``"line11"`` -- ``while tau < tau_budget``
  (corrected: ``... and the prefill of R is incomplete``).
* Algorithm 5 (DistServe): nothing to correct.

Conventions (Section 2.2, Definitions 1-2). A request R has prompt tokens ``1..L^P``; a prefill
iteration ``PI(R, i, c)`` computes tokens ``i..i+c-1``; the iteration that computes token ``L^P``
also produces the first output token. Its ``L^D`` decode iterations are ``DI(R, i)`` at
``i = L^P + 1, ..., L^P + L^D``; the last one samples the stop token. "Prefill incomplete" means
token ``L^P`` has not been computed. Time: every batch takes ``batch_time(iterations)`` (1 by
default); "update P based on new arrivals" admits the requests with arrival time ``<= now``;
when a loop has nothing to do and both P and D are empty, time jumps to the next arrival (the
interpreter returns when no arrival is left). Every loop iteration, inner or outer, counts as a
step; a run that exceeds ``max_steps`` raises :class:`NonTerminationError`.

References
----------
Bari, Hegde, de Veciana (2025), Algorithms 1-5 (Section 4.2, Appendices D and E), Definitions 1-2.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Iteration = tuple  # ("PI", rid, i, c) or ("DI", rid, i)


@dataclass(frozen=True)
class Req:
    """A request: id, prompt length L^P, output length L^D, arrival time."""

    rid: int
    L_P: int
    L_D: int
    arrival: float = 0.0


class NonTerminationError(Exception):
    """A loop of the pseudo-code ran past the step limit."""

    def __init__(self, where: str, steps: int, run: Run):
        self.where, self.steps, self.run = where, steps, run
        super().__init__(f"no termination after {steps} steps (stuck at {where}); "
                         f"{len(run.batches)} batches scheduled, last: "
                         f"{run.batches[-1][2] if run.batches else None}")


@dataclass
class Run:
    """What an interpreter did.

    Attributes
    ----------
    requests : dict
        ``rid -> Req``.
    batches : list
        ``(start, end, iterations)`` in order.
    states : list of dict
        Algorithm state after each batch (e.g. ``|D|``, requests_in_cycle).
    cycles : list of dict
        Algorithms 1-2: ``{"start", "end", "started"}`` per cycle (started = request ids).
    done : dict
        ``rid -> completion time`` (when its stop token was sampled).
    """

    requests: dict
    batch_time: Callable[[tuple], float]
    max_steps: int
    batches: list = field(default_factory=list)
    states: list = field(default_factory=list)
    cycles: list = field(default_factory=list)
    done: dict = field(default_factory=dict)
    now: float = 0.0
    steps: int = 0
    prefilled: dict = field(default_factory=dict)  # rid -> last prompt token computed
    decoded: dict = field(default_factory=dict)  # rid -> decode iterations run
    _next: int = 0
    _order: list = field(default_factory=list)

    @classmethod
    def start(cls, requests: Iterable[Req], batch_time, max_steps) -> Run:
        reqs = {r.rid: r for r in requests}
        run = cls(reqs, batch_time or (lambda its: 1.0), max_steps)
        run._order = sorted(reqs.values(), key=lambda r: (r.arrival, r.rid))
        run.prefilled = dict.fromkeys(reqs, 0)
        run.decoded = dict.fromkeys(reqs, 0)
        return run

    def step(self, where: str) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise NonTerminationError(where, self.steps, self)

    def arrivals(self) -> list[Req]:
        """Requests arrived by ``now`` and not yet handed out ("update P based on arrivals")."""
        out = []
        while self._next < len(self._order) and self._order[self._next].arrival <= self.now:
            out.append(self._order[self._next])
            self._next += 1
        return out

    def idle(self) -> bool:
        """Jump to the next arrival; False when none is left (the run is over)."""
        if self._next >= len(self._order):
            return False
        self.now = max(self.now, self._order[self._next].arrival)
        return True

    def prefill_incomplete(self, r: Req) -> bool:
        return self.prefilled[r.rid] < r.L_P

    def next_decode(self, r: Req) -> int:
        """The token index of R's next decode iteration (Definition 2)."""
        return r.L_P + self.decoded[r.rid] + 1

    def sampled_stop(self, r: Req) -> bool:
        return self.decoded[r.rid] >= r.L_D

    def schedule(self, iterations: list, **state) -> None:
        """Run one batch: advance time, update prefill/decode progress, record the state."""
        its = tuple(iterations)
        start, self.now = self.now, self.now + self.batch_time(its)
        for it in its:
            if it[0] == "PI":
                _, rid, i, c = it
                self.prefilled[rid] = max(self.prefilled[rid], i + c - 1)
            else:
                rid = it[1]
                self.decoded[rid] += 1
                if self.decoded[rid] == self.requests[rid].L_D:
                    self.done[rid] = self.now
        self.batches.append((start, self.now, its))
        self.states.append(state)


# --- Algorithm 1: RAD ---------------------------------------------------------------------


def rad(requests: Iterable[Req], *, n: int, t_col: int, t_lcm: int, printed=(), batch_time=None,
        max_steps: int = 10_000) -> Run:
    """Algorithm 1 (RAD), literally. See the module docstring for ``printed``."""
    run = Run.start(requests, batch_time, max_steps)
    P, D = [], []                                                         # line 1
    ric = 0                                                               # line 2
    cycle_start, started = 0.0, []
    while True:                                                           # line 3
        run.step("Algorithm 1, line 3")
        P += run.arrivals()                                               # line 4
        if not P and not D:                                               # line 5
            if not run.idle():
                return run
            continue
        elif len(D) == t_col or not P or ric == n:                        # line 6
            run.schedule([("DI", r.rid, run.next_decode(r)) for r in D],  # line 7
                         kind="decode", D=len(D), ric=ric)
            D = [r for r in D if not run.sampled_stop(r)]                 # line 8
            if not D:                                                     # line 9
                ric = 0
                run.cycles.append({"start": cycle_start, "end": run.now, "started": started})
                cycle_start, started = run.now, []
        else:
            R = P[0]                                                      # line 11
            i = 1
            while run.prefill_incomplete(R):                              # line 12
                run.step("Algorithm 1, line 12")
                c = min(t_lcm, R.L_P - i + (0 if "line13" in printed else 1))  # line 13
                run.schedule([("PI", R.rid, i, c)], kind="prefill", D=len(D), ric=ric)  # line 14
                i += c                                                    # line 15
            P.pop(0)                                                      # line 17
            D.append(R)
            ric += 1                                                      # line 18
            started.append(R.rid)


# --- Algorithm 2 --------------------------------------------------------------------------


def alg2(requests: Iterable[Req], *, n: int, t_col: int, t_lcm: int, printed=(), batch_time=None,
         max_steps: int = 10_000) -> Run:
    """Algorithm 2 (Appendix D), literally. See the module docstring for ``printed``."""
    run = Run.start(requests, batch_time, max_steps)
    P, D = [], []                                                         # line 1
    update = "no_arrivals" not in printed
    while True:                                                           # line 2
        run.step("Algorithm 2, line 2")
        cycle_start, started = run.now, []
        ric = 0                                                           # line 3
        while True:                                                       # line 4
            if update:
                P += run.arrivals()
            if not (P and ric < n):
                break
            run.step("Algorithm 2, line 4")
            R = P[0]                                                      # line 5
            i = 1
            while run.prefill_incomplete(R):                              # line 6
                run.step("Algorithm 2, line 6")
                c = min(t_lcm, R.L_P - i + (0 if "line7" in printed else 1))  # line 7
                run.schedule([("PI", R.rid, i, c)], kind="prefill", active=0, ric=ric)  # line 8
                i += c                                                    # line 9
            P.pop(0)                                                      # line 11
            D.append(R)
            ric += 1                                                      # line 12
            started.append(R.rid)
        active = D[:min(t_col, len(D))]                                   # lines 14-15
        D = D[len(active):]
        while active:                                                     # line 16
            run.step("Algorithm 2, line 16")
            run.schedule([("DI", r.rid, run.next_decode(r)) for r in active],  # line 17
                         kind="decode", active=len(active), ric=ric)
            active = [r for r in active if not run.sampled_stop(r)]       # line 18
            k = min(t_col - len(active), len(D))                          # line 19
            active, D = active + D[:k], D[k:]
        if started:
            run.cycles.append({"start": cycle_start, "end": run.now, "started": started})
        elif not P and not D and update and not run.idle():
            return run


# --- Algorithm 3: request-level batching ---------------------------------------------------


def alg3(requests: Iterable[Req], *, b: int, printed=(), batch_time=None,
         max_steps: int = 10_000) -> Run:
    """Algorithm 3 (Appendix E.1), literally. All PIs of line 16 form one batch (the b requests
    are prefilled together, as request-level batching does)."""
    run = Run.start(requests, batch_time, max_steps)
    P, D = [], []                                                         # line 1
    mode = "Decode"                                                       # line 2
    first = "Prefill" if "line5" in printed else "Decode"
    while True:                                                           # line 3
        run.step("Algorithm 3, line 3")
        P += run.arrivals()                                               # line 4
        if not P and not D and not run.idle():
            return run
        if mode == first:                                                 # line 5
            if D:                                                         # line 6
                run.schedule([("DI", r.rid, run.next_decode(r)) for r in D],  # line 7
                             kind="decode", D=len(D))
                D = [r for r in D if not run.sampled_stop(r)]             # line 8
            else:
                mode = "Prefill"                                          # line 10
        elif mode == "Prefill":                                           # line 12
            if P:                                                         # line 13
                chosen, P = P[:b], P[b:]                                  # line 14
                run.schedule([("PI", r.rid, 1, r.L_P) for r in chosen],  # lines 15-16
                             kind="prefill", D=len(D))
                D += chosen                                               # line 17
            mode = "Decode"                                               # line 20


# --- Algorithm 4: Sarathi-Serve ------------------------------------------------------------


def alg4(requests: Iterable[Req], *, budget: int, printed=(), batch_time=None,
         max_steps: int = 10_000) -> Run:
    """Algorithm 4 (Appendix E.2), literally. ``i`` of line 12 is R's next prompt token."""
    run = Run.start(requests, batch_time, max_steps)
    P, D = [], []                                                         # line 1
    nxt = {}
    while True:                                                           # line 2
        run.step("Algorithm 4, line 2")
        P += run.arrivals()                                               # line 3
        if not P and not D:
            if not run.idle():
                return run
            continue
        B = [("DI", r.rid, run.next_decode(r)) for r in D]               # lines 4-8
        tau = len(D)                                                      # line 9
        for R in P:                                                       # line 10
            i = nxt.setdefault(R.rid, 1)
            while tau < budget and ("line11" in printed or i <= R.L_P):   # line 11
                run.step("Algorithm 4, line 11")
                c = min(budget - tau, R.L_P - i + (0 if "line12" in printed else 1))  # line 12
                B.append(("PI", R.rid, i, c))                             # line 13
                tau += c                                                  # line 14
                i = nxt[R.rid] = i + c                                    # line 15
        run.schedule(B, kind="mixed", D=len(D), tau=tau)                  # line 18
        done_prefill = [r for r in P if not run.prefill_incomplete(r)]    # lines 19-23
        P = [r for r in P if run.prefill_incomplete(r)]
        D = [r for r in D if not run.sampled_stop(r)] + done_prefill      # lines 24-28


# --- Algorithm 5: DistServe ----------------------------------------------------------------


def alg5(requests: Iterable[Req], *, batch_time=None, max_steps: int = 10_000) -> Run:
    """Algorithm 5 (Appendix E.3), literally, with one prefill node and one decode node.

    The prefill node runs first (it never waits for the decode node); its transfers are the
    arrivals of the decode node ("Update D received from a Prefill Node"). Returns the decode
    node's run with the prefill batches merged in, in time order.
    """
    pre = Run.start(requests, batch_time, max_steps)
    P, handed = [], []                                                    # line 1
    while True:                                                           # line 2
        pre.step("Algorithm 5, line 2")
        P += pre.arrivals()                                               # line 3
        if not P:                                                         # line 4
            if not pre.idle():
                break
            continue                                                      # line 5
        R = P.pop(0)                                                      # lines 7, 10
        pre.schedule([("PI", R.rid, 1, R.L_P)], kind="prefill", node="prefill")  # line 8
        handed.append(Req(R.rid, R.L_P, R.L_D, pre.now))                  # line 9
    dec = Run.start(handed, batch_time, max_steps)
    dec.prefilled = dict(pre.prefilled)
    D = []                                                                # line 12
    while True:                                                           # line 13
        dec.step("Algorithm 5, line 13")
        D += dec.arrivals()                                               # line 14
        if not D:                                                         # line 15
            if not dec.idle():
                break
            continue                                                      # line 16
        dec.schedule([("DI", r.rid, dec.next_decode(r)) for r in D], kind="decode",  # line 18
                     node="decode", D=len(D))
        D = [r for r in D if not dec.sampled_stop(r)]                     # line 19
    merged = sorted(pre.batches + dec.batches, key=lambda b: (b[0], b[2][0][0] != "PI"))
    dec.batches = merged
    dec.requests = pre.requests
    return dec


def instances(max_requests: int, L_P_set, L_D_set, staggers=(0.0, 1.0)):
    """Every request list with up to ``max_requests`` requests (lengths from the sets), arriving at
    0, g, 2 g, ... (in id order) for each gap g in ``staggers``; fewer requests first."""
    for k in range(1, max_requests + 1):
        for lens in itertools.product(itertools.product(L_P_set, L_D_set), repeat=k):
            for gap in staggers:
                yield [Req(j, lp, ld, j * gap) for j, (lp, ld) in enumerate(lens)]


# --- Definitions 1-2 as a validator ----------------------------------------------------------


def violations(run: Run, complete: bool = True) -> list[str]:
    """Every way ``run`` breaks Definitions 1-2 (empty list: none).

    Per request: its prefill iterations have ``c >= 1``, start right after the last computed
    token (KV of ``1..i-1`` cached) and end at or before ``L^P``, so together they cover
    ``1..L^P`` exactly once; a decode iteration comes after the prefill is complete, in a later
    batch, at index ``L^P + k + 1`` for its k-th predecessor, never past ``L^P + L^D``; a batch
    holds at most one iteration per request. With ``complete``, every request has finished.
    """
    out = []
    covered = dict.fromkeys(run.requests, 0)
    decoded = dict.fromkeys(run.requests, 0)
    prefill_done_before = set()
    for _, _, its in sorted(run.batches, key=lambda b: b[0]):
        seen = set()
        for it in its:
            rid = it[1]
            r = run.requests[rid]
            if rid in seen:
                out.append(f"two iterations of request {rid} in one batch: {its}")
            seen.add(rid)
            if it[0] == "PI":
                _, _, i, c = it
                if c < 1:
                    out.append(f"PI({rid}, {i}, {c}): chunk size < 1")
                if i != covered[rid] + 1:
                    out.append(f"PI({rid}, {i}, {c}): tokens 1..{covered[rid]} cached, expected "
                               f"i = {covered[rid] + 1}")
                if i + c - 1 > r.L_P:
                    out.append(f"PI({rid}, {i}, {c}): ends past L^P = {r.L_P}")
                covered[rid] = max(covered[rid], i + c - 1)
            else:
                i = it[2]
                if rid not in prefill_done_before:
                    out.append(f"DI({rid}, {i}) before the prefill of request {rid} completed")
                if i != r.L_P + decoded[rid] + 1:
                    out.append(f"DI({rid}, {i}): expected index {r.L_P + decoded[rid] + 1}")
                if i > r.L_P + r.L_D:
                    out.append(f"DI({rid}, {i}): after the stop token (L^P + L^D = {r.L_P + r.L_D})")
                decoded[rid] += 1
        prefill_done_before |= {rid for rid in run.requests if covered[rid] >= run.requests[rid].L_P}
    if complete:
        for rid, r in run.requests.items():
            if covered[rid] != r.L_P or decoded[rid] != r.L_D:
                out.append(f"request {rid} unfinished: {covered[rid]}/{r.L_P} prompt tokens, "
                           f"{decoded[rid]}/{r.L_D} decodes")
    return out
