"""A deliberately naive reference simulator: one batch at a time, plain Python lists.

It shares no scheduling code with :mod:`stability`: each policy below is written again from the
paper's pseudo-code, every batch is built explicitly, and its duration is Eq. 7 computed by
:func:`theory.cost.T_batch` on the batch's contents. It is slow (tens of microseconds per batch)
and exists to be obviously right, so the fast engine can be tested against it.
"""

from __future__ import annotations

import math
from collections import deque

from theory.cost import Batch, CostModel, T_batch


class Req:
    def __init__(self, j, arrival, L_P, L_D):
        self.j, self.arrival, self.L_P, self.L_D = j, arrival, L_P, L_D
        self.next_i = 1  # next prompt token to prefill
        self.pos = L_P + 1  # next decode position
        self.rem = L_D  # decode iterations left
        self.first = math.nan
        self.finish = math.nan


class Sim:
    def __init__(self, cm: CostModel, arrival, L_P, L_D):
        self.cm = cm
        self.reqs = [Req(j, float(a), int(p), int(d))
                     for j, (a, p, d) in enumerate(zip(arrival, L_P, L_D, strict=True))]
        self.future = deque(self.reqs)
        self.t = 0.0
        self.batches = []  # (start, duration, prefill [(j, i, c)], decode [(j, i)])

    def arrivals(self):
        """Requests whose arrival time has passed, in order."""
        out = []
        while self.future and self.future[0].arrival <= self.t:
            out.append(self.future.popleft())
        return out

    def wait(self):
        self.t = max(self.t, self.future[0].arrival)

    def run_batch(self, prefill=(), decode=()):
        """Run one batch: prefill [(req, c)] chunks and decode [req] iterations."""
        batch = Batch.of([(r.next_i, c) for r, c in prefill], [r.pos for r in decode])
        dur = T_batch(self.cm, batch)
        self.batches.append((self.t, dur, [(r.j, r.next_i, c) for r, c in prefill],
                             [(r.j, r.pos) for r in decode]))
        self.t += dur
        for r, c in prefill:
            r.next_i += c
            if r.next_i > r.L_P:
                r.first = self.t
        for r in decode:
            r.pos += 1
            r.rem -= 1
            if r.rem == 0:
                r.finish = self.t

    def prefill_alone(self, r, chunk):
        """Chunks min(chunk, L^P - i + 1) from i = 1, each alone in a batch."""
        while r.next_i <= r.L_P:
            self.run_batch(prefill=[(r, min(chunk, r.L_P - r.next_i + 1))])

    def done(self):
        return all(r.rem == 0 for r in self.reqs)


def rad(cm, arrival, L_P, L_D, n, t_col, chunk):
    """Algorithm 1 (line 13 with L^P - i + 1). Returns the Sim and its cycles (start, X)."""
    sim = Sim(cm, arrival, L_P, L_D)
    P, D, rc = deque(), [], 0
    cycles = [(0.0, 0)]
    pending = lambda: sum(1 for r in sim.reqs if r.arrival <= sim.t and r.rem > 0)  # noqa: E731
    cycles[0] = (0.0, pending())
    while not sim.done():
        P.extend(sim.arrivals())
        if not P and not D:
            sim.wait()
        elif len(D) == t_col or not P or rc == n:
            sim.run_batch(decode=list(D))
            D = [r for r in D if r.rem > 0]
            if not D:
                rc = 0
                P.extend(sim.arrivals())
                cycles.append((sim.t, pending()))
        else:
            r = P.popleft()
            sim.prefill_alone(r, chunk)
            D.append(r)
            rc += 1
    return sim, cycles


def alg2(cm, arrival, L_P, L_D, n, t_col, chunk):
    """Algorithm 2 (line 7 with L^P - i + 1); an empty cycle waits for an arrival."""
    sim = Sim(cm, arrival, L_P, L_D)
    P = deque()
    while not sim.done():
        rc = 0
        D = []
        while True:  # prefill mode, waiting for work if the cycle has none yet
            P.extend(sim.arrivals())
            if P and rc < n:
                r = P.popleft()
                sim.prefill_alone(r, chunk)
                D.append(r)
                rc += 1
            elif rc == 0 and sim.future and not P:
                sim.wait()
            else:
                break
        active = D[:t_col]
        D = D[t_col:]
        while active:
            sim.run_batch(decode=list(active))
            active = [r for r in active if r.rem > 0]
            while len(active) < t_col and D:
                active.append(D.pop(0))
    return sim


def request_level(cm, arrival, L_P, L_D, b):
    """Algorithm 3 with line 5 testing mode = Decode; waits when both queues are empty."""
    sim = Sim(cm, arrival, L_P, L_D)
    P, D, mode = deque(), [], "decode"
    while not sim.done():
        P.extend(sim.arrivals())
        if mode == "decode":
            if D:
                sim.run_batch(decode=list(D))
                D = [r for r in D if r.rem > 0]
            else:
                mode = "prefill"
        elif P:
            chosen = [P.popleft() for _ in range(min(b, len(P)))]
            sim.run_batch(prefill=[(r, r.L_P) for r in chosen])
            D.extend(chosen)
            mode = "decode"
        else:
            sim.wait()
    return sim
