"""A naive reference of Nested WAIT (Ao, Luo, Simchi-Levi, Wang, arXiv:2504.11320, Section 5,
Algorithm Nested WAIT), written from the paper's queues, for tests/test_nested_wait.py.

It shares no scheduling code with :mod:`stability.schedulers.nested_wait`: segment ``k`` keeps an
entry queue (segment 1: the external queue; ``k >= 2``: the resident boundary queue) and one list
per interior stage, named by the decode its prompts run next; a prefix batch takes ``min(n_k, Q)``
of each chosen entry queue and ``min(n_k, Q)`` of each chosen interior stage, and afterwards moves
every prompt it ran to its next stage, the next boundary queue, or out (finished). Batches are timed
by :class:`tests.reference_sim.MSim` (Eq. 7 via :func:`theory.cost.T_batch`).
"""

from __future__ import annotations

from tests.reference_sim import Blocks, MSim


class CountedBlocks(Blocks):
    """The block manager of :mod:`tests.reference_sim` with no capacity check: Nested WAIT's
    no-overflow dynamics run anyway, and ``peak`` may exceed ``total``."""

    def take(self, r, k):
        self.table[r.j] = self.table.get(r.j, 0) + k
        self.free -= k
        self.peak = max(self.peak, self.total - self.free)


def nested_wait(cm, arrival, L_P, L_D, boundaries=None, thresholds=None, mem=None):
    """Nested WAIT batch by batch. ``boundaries`` ``l'_1 < ... < l'_m`` and ``thresholds`` ``n_k``
    (None: one open segment of threshold 1); ``mem``: a :class:`CountedBlocks` or None. Once no
    arrival is left, every segment with a prompt advances."""
    b = list(boundaries) if boundaries is not None else [10**12]
    n = list(thresholds) if thresholds is not None else [1]
    m = len(b)
    sim = MSim(cm, arrival, L_P, L_D)
    entry = [[] for _ in range(m)]  # entry[0]: not prefilled; entry[k]: ran exactly b[k - 1] decodes
    interior = [{} for _ in range(m)]  # interior[k][d]: resident prompts whose next decode is d

    def place(r):
        """Put a resident, unfinished prompt where its next decode ``d = out`` belongs."""
        d = r.out
        for k in range(1, m):
            if d == b[k - 1] + 1:
                entry[k].append(r)
                return
        k = next((k for k in range(m) if d <= b[k]), m - 1)
        interior[k].setdefault(d, []).append(r)

    while not sim.resolved():
        entry[0].extend(sim.arrivals())
        busy = [bool(entry[k]) or any(interior[k].values()) for k in range(m)]
        if not sim.future:  # drain: every segment with work
            chosen = [k for k in range(m) if busy[k]]
        else:
            chosen = []
            for k in range(m):
                if len(entry[k]) < n[k]:
                    break
                chosen.append(k)
        if not chosen:
            if not sim.future:
                break
            sim.wait()
            continue
        prefill, decode = [], []
        for k in chosen:
            queue = sorted(entry[k], key=lambda r: r.j)
            picked = queue[: n[k]]
            entry[k] = [r for r in entry[k] if r not in picked]
            (prefill if k == 0 else decode).extend(picked)
            for d in sorted(interior[k]):
                stage = interior[k][d]
                assert len(stage) <= n[k], "an interior stage over its threshold"
                decode.extend(stage[: n[k]])
                interior[k][d] = stage[n[k] :]
        if mem is not None:
            for r in prefill:
                mem.allocate(r)
            for r in decode:
                mem.append_slot(r)
        sim.run_batch(prefill=[(r, r.L_P) for r in prefill], decode=decode)
        for r in prefill + decode:
            if r.finished:
                if mem is not None:
                    mem.release(r)
            else:
                place(r)
    return sim
