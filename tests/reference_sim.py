"""A deliberately naive reference simulator: one batch at a time, plain Python lists.

It shares no scheduling code with :mod:`stability`: each policy below is written again from the
paper's pseudo-code, every batch is built explicitly, and its duration is Eq. 7 computed by
:func:`theory.cost.T_batch` on the batch's contents. It is slow (tens of microseconds per batch)
and exists to be obviously right, so the fast engine can be tested against it.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque

from theory.cost import Batch, CostModel, T_batch


class Req:
    def __init__(self, j, arrival, L_P, L_D):
        self.j, self.arrival, self.L_P, self.L_D = j, arrival, L_P, L_D
        self.next_i = 1  # next prompt token to prefill
        self.pos = L_P + 1  # next decode position
        self.rem = L_D  # decode iterations left
        self.first = math.nan
        self.finish = math.nan


class Clock:
    """Requests of class ``REQUEST`` arriving at sorted times, released to a simulator as its
    clock ``t`` passes their arrival."""

    REQUEST: type

    def __init__(self, cm: CostModel, arrival, L_P, L_D):
        self.cm = cm
        self.reqs = [self.REQUEST(j, float(a), int(p), int(d))
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


class Sim(Clock):
    REQUEST = Req

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
    """Algorithm 1 (line 13 with L^P - i + 1). Returns the Sim and its cycles (start, X).
    ``arrival`` may be :class:`Users` (a closed loop)."""
    sim = make_sim(Sim, cm, arrival, L_P, L_D)
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


# --- schedulers with mixed batches, KV memory and preemption ------------------------------------
# Written from the real systems' scheduler code (microsoft/sarathi-serve @ 96f9911
# sarathi/core/scheduler/, vllm-project/vllm v0 vllm/core/scheduler.py and v1
# vllm/v1/core/sched/scheduler.py, LLMServe/DistServe @ 82831f1)
# and from Algorithms 4-5, with
# a request modelled by the tokens it has emitted (not by the engine's positions and counters).

REJ_PROMPT_LIMIT, REJ_KV_NEVER = 1, 2  # the reasons, as numbered in stability.sim.memory


class MReq:
    """A request that can be preempted: it has emitted ``out`` tokens; its prefill target is the
    prompt plus every token emitted before its latest admission."""

    def __init__(self, j, arrival, L_P, L_D):
        self.j, self.arrival, self.L_P, self.L_D = j, arrival, L_P, L_D
        self.out = 0  # tokens emitted (the first comes from the prefill)
        self.target = L_P  # tokens the current prefill must cover
        self.computed = 0  # of those, prefilled so far
        self.emits = []  # emission times
        self.preemptions = 0
        self.rejected = 0
        self.start = math.nan

    @property
    def seq_len(self):
        return self.L_P + self.out

    @property
    def in_prefill(self):
        return self.computed < self.target

    @property
    def finished(self):
        return self.out == self.L_D + 1

    @property
    def first(self):
        return self.emits[0] if self.emits else math.nan

    @property
    def finish(self):
        return self.emits[-1] if self.finished else math.nan

    @property
    def tbt_max(self):
        gaps = [b - a for a, b in zip(self.emits, self.emits[1:], strict=False)]
        return max(gaps, default=0.0)


class Blocks:
    """The paged KV block manager, counted by hand: free blocks and a block count per request."""

    def __init__(self, total, block_size, watermark_blocks, rule):
        self.total, self.size, self.wm, self.rule = total, block_size, watermark_blocks, rule
        self.free = total
        self.table = {}
        self.peak = 0

    def n(self, tokens):
        return math.ceil(tokens / self.size)

    def never(self, tokens):
        return self.total - self.n(tokens) < self.wm

    def can_allocate(self, tokens):
        return self.free - self.n(tokens) >= self.wm

    def take(self, r, k):
        assert k <= self.free, "KV memory over capacity"
        self.table[r.j] = self.table.get(r.j, 0) + k
        self.free -= k
        self.peak = max(self.peak, self.total - self.free)

    def allocate(self, r):
        assert r.j not in self.table
        self.take(r, self.n(r.target))

    def needs_block(self, r):
        return self.n(r.seq_len) > self.table[r.j]

    def can_append_slot(self, r):
        if self.rule == "sarathi":
            return self.free > 0
        return not self.needs_block(r) or self.free > 0

    def append_slot(self, r):
        if self.needs_block(r):
            self.take(r, 1)

    def release(self, r):
        self.free += self.table.pop(r.j, 0)


class PrefixPool:
    """vLLM v1's block pool with prefix caching, by hand (vllm-project/vllm
    ``vllm/v1/core/block_pool.py``, ``kv_cache_manager.py``), for :func:`vllm_v1`.

    ``queue`` is every free block, least recently freed first (an ``OrderedDict`` whose keys are
    ``("plain", n)`` for a block with no identity or ``("cached", identity)``); ``cache`` maps an
    identity to its holders; ``table[j]`` is request j's blocks in order, each ``("hit", identity)``
    (taken from the cache at admission), ``("own", identity)`` (j cached it) or None (a block that
    caches nothing). Block b of request j has identity ``(r, b)``, r found by following the prefix
    parent while b is below its shared tokens over the block size. An identity is cached once: a
    block j fills whose identity is cached already is a plain one. Prompt blocks are cached as
    their tokens are scheduled, decode blocks when their request frees them."""

    def __init__(self, total, block_size, parent=None, shared=None):
        self.total, self.size = total, block_size
        self.parent, self.shared = parent, shared
        self.queue = OrderedDict((("plain", n), None) for n in range(total))
        self.plain = total
        self.cache = {}
        self.table = {}
        self.done = {}
        self.peak = 0
        self.hits = self.recompute_hits = 0  # blocks taken from the cache (by preempted requests)

    @property
    def free(self):
        return len(self.queue)

    def n(self, tokens):
        return math.ceil(tokens / self.size)

    def identity(self, j, b):
        while self.parent is not None and self.parent[j] >= 0 and b < self.shared[j] // self.size:
            j = self.parent[j]
        return (j, b)

    def _used(self):
        self.peak = max(self.peak, self.total - self.free)

    def take(self, r, k):
        """k new blocks for r from the queue's head; a cached one leaves the cache."""
        assert k <= self.free, "KV memory over capacity"
        for _ in range(k):
            (kind, key), _ = self.queue.popitem(last=False)
            if kind == "cached":
                del self.cache[key]
            self.table.setdefault(r.j, []).append(None)
        self._used()

    def hit(self, r, tokens):
        """(cached blocks from r's first, at most (tokens - 1) // size; how many of them are free)."""
        hits = []
        for b in range((tokens - 1) // self.size):
            key = self.identity(r.j, b)
            if key not in self.cache:
                break
            hits.append(key)
        return hits, sum(1 for key in hits if self.cache[key] == 0)

    def touch(self, r, hits):
        self.hits += len(hits)
        self.recompute_hits += len(hits) if r.preemptions else 0
        for key in hits:
            if self.cache[key] == 0:
                del self.queue[("cached", key)]
            self.cache[key] += 1
        self.table[r.j] = [("hit", key) for key in hits]
        self.done[r.j] = len(hits)
        self._used()

    def register(self, r, tokens):
        """Cache r's full blocks of its first ``tokens`` tokens not seen yet."""
        blocks = self.table[r.j]
        for b in range(self.done.get(r.j, 0), tokens // self.size):
            key = self.identity(r.j, b)
            if key not in self.cache:
                self.cache[key] = 1
                blocks[b] = ("own", key)
        self.done[r.j] = max(self.done.get(r.j, 0), tokens // self.size)

    def release(self, r, computed):
        """Free r's blocks (its KV covering ``computed`` tokens), last first, into the queue."""
        self.register(r, computed)
        for block in reversed(self.table.pop(r.j)):
            if block is None:
                self.queue[("plain", self.plain)] = None
                self.plain += 1
                continue
            key = block[1]
            self.cache[key] -= 1
            if self.cache[key] == 0:
                self.queue[("cached", key)] = None
        self.done.pop(r.j)


class MSim(Clock):
    """One GPU: requests arrive, batches of chunks and decodes run one at a time (Eq. 7)."""

    REQUEST = MReq

    def __init__(self, cm, arrival, L_P, L_D):
        super().__init__(cm, arrival, L_P, L_D)
        self.decode_tokens = 0
        self.prefill_tokens = 0
        self.lost_tokens = 0

    def resolved(self):
        return all(r.finished or r.rejected for r in self.reqs)

    def run_batch(self, prefill=(), decode=()):
        """prefill [(req, c)] chunks PI(R, computed + 1, c); decode [req] iterations DI(R, seq_len)."""
        batch = Batch.of([(r.computed + 1, c) for r, c in prefill], [r.seq_len for r in decode])
        dur = T_batch(self.cm, batch)
        self.batches.append((self.t, dur, [(r.j, r.computed + 1, c) for r, c in prefill],
                             [(r.j, r.seq_len) for r in decode]))
        for r, _ in prefill:
            if math.isnan(r.start):
                r.start = self.t
        self.t += dur
        for r, c in prefill:
            r.computed += c
            self.prefill_tokens += c
            if r.computed == r.target:
                r.out += 1
                r.emits.append(self.t)
        for r in decode:
            r.out += 1
            r.emits.append(self.t)
            self.decode_tokens += 1

    def preempt(self, r, mem):
        """Recompute preemption: free r's blocks (unless freed by the caller: ``mem`` None); its
        next prefill covers all its tokens so far."""
        if mem is not None:
            mem.release(r)
        self.lost_tokens += r.computed if r.in_prefill else r.seq_len - 1
        r.target = r.seq_len
        r.computed = 0
        r.preemptions += 1


def sarathi(cm, arrival, L_P, L_D, chunk, max_seqs, order="fcfs", max_model_len=10**9, mem=None):
    """Sarathi-Serve's ``SarathiScheduler._schedule`` (microsoft/sarathi-serve @ 96f9911,
    sarathi_scheduler.py) step by step.
    ``mem``: a :class:`Blocks` with rule "sarathi", or None for unlimited memory; ``arrival`` may
    be :class:`Users` (a closed loop, without rejections)."""
    sim = make_sim(MSim, cm, arrival, L_P, L_D)
    waiting, running = [], []
    while not sim.resolved():
        waiting.extend(sim.arrivals())
        if not waiting and not running:
            sim.wait()
            continue
        running.sort(key=lambda r: (r.arrival, r.j))
        tokens, new_running, running_prefills = 0, [], []
        decode, prefill = [], []
        queue = list(running)
        while queue:  # phase 1a
            r = queue.pop(0)
            if r.in_prefill:
                running_prefills.append(r)
                continue
            preempted_self = False
            while mem is not None and not mem.can_append_slot(r):
                victim = queue.pop(-1) if queue else r
                sim.preempt(victim, mem)
                waiting.insert(0, victim)
                if victim is r:
                    preempted_self = True
                    break
            if not preempted_self:
                if mem is not None:
                    mem.append_slot(r)
                new_running.append(r)
                decode.append(r)
                tokens += 1
        for r in running_prefills:  # phase 1b
            c = max(0, min(r.target - r.computed, chunk - tokens))
            new_running.append(r)
            if c:
                prefill.append((r, c))
                tokens += c
        if order == "spf":
            waiting.sort(key=lambda r: (r.target, r.j))
        while waiting:  # phase 2
            r = waiting[0]
            if r.target > max_model_len or (mem is not None and mem.never(r.target)):
                waiting.pop(0)
                r.rejected = REJ_PROMPT_LIMIT if r.target > max_model_len else REJ_KV_NEVER
                continue
            if mem is not None and not mem.can_allocate(r.target):
                break
            if len(new_running) >= max_seqs:
                break
            c = min(r.target, chunk - tokens)
            if c <= 0:
                break
            waiting.pop(0)
            if mem is not None:
                mem.allocate(r)
            prefill.append((r, c))
            new_running.append(r)
            tokens += c
        if prefill or decode:
            sim.run_batch(prefill, decode)
        running = []
        for r in new_running:
            if r.finished:
                if mem is not None:
                    mem.release(r)
            else:
                running.append(r)
    return sim


def sarathi_paper(cm, arrival, L_P, L_D, budget):
    """Algorithm 4 with line 12's chunk min{budget - tau, L^P - i + 1} and the inner loop ending
    when the prefill is complete."""
    sim = MSim(cm, arrival, L_P, L_D)
    P, D = [], []
    while not sim.resolved():
        P.extend(sim.arrivals())  # line 3
        if not P and not D:
            sim.wait()
            continue
        decode = list(D)  # lines 5-8
        tau = len(D)  # line 9
        prefill = []
        for R in P:  # line 10
            i = R.computed + 1
            while tau < budget and i <= R.L_P:  # line 11
                c = min(budget - tau, R.L_P - i + 1)  # line 12
                prefill.append((R, c))  # line 13
                tau += c  # line 14
                i += c  # line 15
        sim.run_batch(prefill, decode)  # line 18
        D = [R for R in D if not R.finished] + [R for R in P if not R.in_prefill and not R.finished]
        P = [R for R in P if R.in_prefill]  # lines 19-28
    return sim


def vllm(cm, arrival, L_P, L_D, budget, max_seqs, max_model_len=10**9, mem=None):
    """vLLM v0 ``_schedule_default`` (vllm-project/vllm v0, vllm/core/scheduler.py): prefill first,
    no chunking."""
    sim = MSim(cm, arrival, L_P, L_D)
    waiting, running = deque(), deque()
    limit = min(max_model_len, budget)
    while not sim.resolved():
        waiting.extend(sim.arrivals())
        if not waiting and not running:
            sim.wait()
            continue
        admitted, tokens = [], 0
        while waiting:
            r = waiting[0]
            if r.target > limit:
                waiting.popleft()
                r.rejected = REJ_PROMPT_LIMIT
                continue
            if mem is not None and mem.never(r.target):
                waiting.popleft()
                r.rejected = REJ_KV_NEVER
                continue
            if mem is not None and not mem.can_allocate(r.target):
                break
            if tokens + r.target > budget or len(running) + len(admitted) + 1 > max_seqs:
                break
            waiting.popleft()
            if mem is not None:
                mem.allocate(r)
            admitted.append(r)
            tokens += r.target
        if admitted:
            sim.run_batch(prefill=[(r, r.target) for r in admitted])
            running.extend(admitted)
        elif running:
            queue, scheduled, preempted = deque(running), [], []
            while queue:
                r = queue.popleft()
                ok = True
                while mem is not None and not mem.can_append_slot(r):
                    victim = queue.pop() if queue else r
                    sim.preempt(victim, mem)
                    preempted.append(victim)
                    if victim is r:
                        ok = False
                        break
                if ok:
                    if mem is not None:
                        mem.append_slot(r)
                    scheduled.append(r)
            waiting.extendleft(preempted)
            if scheduled:
                sim.run_batch(decode=scheduled)
            running = deque(scheduled)
        for r in [r for r in running if r.finished]:
            running.remove(r)
            if mem is not None:
                mem.release(r)
    return sim


REJ_NO_TYPE = 3  # a request of none of WAIT's types, as numbered in stability.sim.memory


def wait(cm, arrival, L_P, L_D, thresholds, mem=None):
    """WAIT (Ao, Luo, Simchi-Levi, Wang, arXiv:2504.11320, Algorithm WAIT) from its inventory
    ``n_js``: type j, stage s = 0 waiting, s >= 1 resident with s - 1 decodes done. A type is
    eligible when ``n_j0 >= n_j`` (or, once no arrival is left, when it has any prompt); a batch
    advances ``min(n_j, n_js)`` of the oldest prompts of every stage of every eligible type.
    ``thresholds=None``: every ``(L^P, L^D)`` is a type of threshold 1."""
    sim = MSim(cm, arrival, L_P, L_D)
    types = {(lp, ld): n for lp, ld, n in thresholds or ()}
    stages = {key: [[] for _ in range(key[1] + 1)] for key in types}
    while not sim.resolved():
        for r in sim.arrivals():
            key = (r.L_P, r.L_D)
            if thresholds is None and key not in types:  # no types given: each (L^P, L^D), n = 1
                types[key] = 1
                stages[key] = [[] for _ in range(key[1] + 1)]
            if key in types:
                stages[key][0].append(r)
            else:
                r.rejected = REJ_NO_TYPE
        drain = not sim.future
        chosen = {key: [inv[s][: types[key]] for s in range(len(inv))] for key, inv in stages.items()
                  if len(inv[0]) >= types[key] or (drain and any(inv))}
        if not chosen:
            if drain:
                break
            sim.wait()
            continue
        prefill = [r for key in chosen for r in chosen[key][0]]
        decode = [r for key in chosen for group in chosen[key][1:] for r in group]
        for r in prefill:
            if mem is not None:
                mem.allocate(r)
        for r in decode:
            if mem is not None:
                assert mem.can_append_slot(r), "WAIT over its memory M^pi"
                mem.append_slot(r)
        sim.run_batch(prefill=[(r, r.L_P) for r in prefill], decode=decode)
        for key, picked in chosen.items():
            inv = stages[key]
            for s in range(len(inv) - 1, -1, -1):
                moved = picked[s]
                inv[s] = inv[s][len(moved):]
                if s + 1 < len(inv):
                    inv[s + 1] = inv[s + 1] + moved
                else:
                    for r in moved:
                        assert r.finished
                        if mem is not None:
                            mem.release(r)
    return sim


def vllm_v1(cm, arrival, L_P, L_D, budget, max_seqs, threshold=0, max_model_len=10**9, mem=None):
    """vLLM v1 ``Scheduler.schedule`` (vllm-project/vllm @ 00024d3, vllm/v1/core/sched/scheduler.py)
    step by step, with ``KVCacheManager.allocate_slots`` (kv_cache_manager.py) counted by hand.

    ``running`` is a list in admission order and ``waiting`` a deque (preempted requests
    ``appendleft``); a request's computed tokens are its prefill progress, or all its tokens but
    the latest once it decodes, and its known tokens ``num_tokens`` its prompt plus outputs. A
    request whose prompt plus ``L^D + 1`` outputs exceed ``max_model_len`` is rejected on arrival.
    ``mem``: a :class:`Blocks` (its watermark and rule unused), a :class:`PrefixPool` (prefix
    caching: a waiting request starts from its cache hit; requests finishing in a step free their
    blocks decodes first, then those finishing with their prefill), or None for unlimited memory.
    ``sim.left_out`` counts the running requests a step's running pass did not reach (budget
    spent before them)."""
    sim = MSim(cm, arrival, L_P, L_D)
    sim.left_out = 0
    waiting, running = deque(), []
    caching = isinstance(mem, PrefixPool)

    def computed(r):
        return r.computed if r.in_prefill else r.seq_len - 1

    def allocate_slots(r, n):
        if mem is None:
            return True
        held = len(mem.table.get(r.j, [])) if caching else mem.table.get(r.j, 0)
        need = mem.n(computed(r) + n) - held
        if need > mem.free:
            return False
        mem.take(r, need)
        if caching and r.in_prefill:
            mem.register(r, computed(r) + n)
        return True

    def admit(r, left):
        """The head's first chunk, its blocks taken (after its cache hit), or None if they are
        not free."""
        if not caching:
            n = tokens_for(r, r.seq_len - computed(r), left)
            return n if allocate_slots(r, n) else None
        hits, free = mem.hit(r, r.seq_len)
        start = len(hits) * mem.size
        n = tokens_for(r, r.seq_len - start, left)
        if mem.n(start + n) - len(hits) + free > mem.free:
            return None
        mem.touch(r, hits)
        r.computed = start
        mem.take(r, mem.n(start + n) - len(hits))
        mem.register(r, start + n)
        return n

    def tokens_for(r, n, left):
        if 0 < threshold < n:
            n = threshold
        return min(n, left)

    while not sim.resolved():
        for r in sim.arrivals():
            if r.L_P + r.L_D + 1 > max_model_len:
                r.rejected = REJ_PROMPT_LIMIT
            else:
                waiting.append(r)
        if not waiting and not running:
            if not sim.resolved():
                sim.wait()
            continue
        left, scheduled, preempted = budget, [], []
        i = 0
        while i < len(running) and left > 0:  # RUNNING requests
            r = running[i]
            n = tokens_for(r, r.seq_len - computed(r), left)
            while not allocate_slots(r, n):
                victim = running.pop()
                assert victim not in [s for s, _ in scheduled], "FCFS preempts only unscheduled requests"
                if caching:
                    mem.release(victim, computed(victim))
                sim.preempt(victim, None if caching else mem)
                waiting.appendleft(victim)
                preempted.append(victim)
                if victim is r:
                    break
            if r in preempted:
                break
            scheduled.append((r, n))
            left -= n
            i += 1
        sim.left_out += len(running) - i
        if not preempted:  # WAITING requests
            while waiting and left > 0:
                if len(running) == max_seqs:
                    break
                r = waiting[0]
                n = admit(r, left)
                if n is None:
                    break
                running.append(waiting.popleft())
                scheduled.append((r, n))
                left -= n
        assert scheduled, "vLLM v1 reference: a step scheduled nothing"
        prefills = [(r, n) for r, n in scheduled if r.in_prefill]
        decodes = [r for r, _ in scheduled if not r.in_prefill]
        sim.run_batch(prefills, decodes)
        if caching:
            for r in decodes:
                if r.finished:
                    mem.release(r, r.seq_len - 1)
            for r, _ in prefills:
                if r.finished:
                    mem.release(r, r.target)
        for r in running:
            if r.finished and mem is not None and not caching:
                mem.release(r)
        running = [r for r in running if not r.finished]
    return sim


class PrefillNode:
    """A DistServe prefill node (Algorithm 5, lines 1-11): FCFS prompts, first token, hand-off."""

    def __init__(self, cm, mode, chunk, max_tokens, max_batch):
        self.cm, self.mode, self.chunk = cm, mode, chunk
        self.max_tokens, self.max_batch = max_tokens, max_batch
        self.incoming = deque()  # (time, req) in arrival order
        self.waiting = deque()
        self.t = 0.0
        self.done = {}  # j -> hand-off start (prefill end)
        self.batches = 0

    def add(self, t, r):
        self.incoming.append((t, r))

    def _batch(self, items):
        self.t += T_batch(self.cm, Batch.of(items))
        self.batches += 1

    def advance(self, t_stop=math.inf):
        while self.t < t_stop:
            while self.incoming and self.incoming[0][0] <= self.t:
                self.waiting.append(self.incoming.popleft()[1])
            if not self.waiting:
                if not self.incoming or self.incoming[0][0] >= t_stop:
                    return
                self.t = self.incoming[0][0]
                continue
            group = [self.waiting.popleft()]
            if self.mode == "batched":
                while (self.waiting and len(group) < self.max_batch
                       and sum(r.L_P for r in group) + self.waiting[0].L_P <= self.max_tokens):
                    group.append(self.waiting.popleft())
            start = self.t
            if self.mode == "chunked":
                r = group[0]
                for i in range(1, r.L_P + 1, self.chunk):
                    self._batch([(i, min(self.chunk, r.L_P - i + 1))])
            else:
                self._batch([(1, r.L_P) for r in group])
            for r in group:
                r.start = start
                r.emits.append(self.t)
                r.out = 1
                self.done[r.j] = self.t

    def pending(self, t):
        routed = len(self.done) + len(self.waiting) + len(self.incoming)
        return routed - sum(1 for v in self.done.values() if v <= t)


class DecodeNode:
    """A DistServe decode node (Algorithm 5, lines 12-20): continuous batching of decodes."""

    def __init__(self, cm, cap):
        self.cm, self.cap = cm, cap
        self.incoming = deque()
        self.D = []
        self.t = 0.0
        self.finished = {}
        self.batches = 0

    def add(self, t, r):
        self.incoming.append((t, r))

    def advance(self, t_stop=math.inf):
        while self.t < t_stop:
            while self.incoming and self.incoming[0][0] <= self.t:
                self.D.append(self.incoming.popleft()[1])
            if not self.D:
                if not self.incoming or self.incoming[0][0] >= t_stop:
                    return
                self.t = self.incoming[0][0]
                continue
            active = self.D if self.cap == 0 else self.D[: self.cap]
            self.t += T_batch(self.cm, Batch.of(decode=[r.seq_len for r in active]))
            self.batches += 1
            for r in active:
                r.out += 1
                r.emits.append(self.t)
                if r.finished:
                    self.finished[r.j] = self.t
            self.D = [r for r in self.D if not r.finished]

    def pending(self, t):
        routed = len(self.finished) + len(self.D) + len(self.incoming)
        return routed - sum(1 for v in self.finished.values() if v <= t)


def _route(nodes, items, planner):
    """Send (time, req) items (sorted by time) to nodes: round robin, or join the node with the
    fewest pending requests at that time (ties to the lowest index)."""
    for k, (t, r) in enumerate(items):
        if planner == "round_robin":
            g = k % len(nodes)
        else:
            for node in nodes:
                node.advance(t)
            load = [node.pending(t) for node in nodes]
            g = load.index(min(load))
        nodes[g].add(t, r)
        r.node = g
    for node in nodes:
        node.advance()


def distserve(cm, arrival, L_P, L_D, r_p, r_d, planner="round_robin", mode="whole", chunk=1,
              max_tokens=4096, max_batch=256, cap=0, transfer=lambda L: 0.0):
    """Algorithm 5 on r_p prefill and r_d decode nodes; the hand-off takes ``transfer(L^P)``."""
    reqs = [MReq(j, float(a), int(p), int(d))
            for j, (a, p, d) in enumerate(zip(arrival, L_P, L_D, strict=True))]
    pre = [PrefillNode(cm, mode, chunk, max_tokens, max_batch) for _ in range(r_p)]
    _route(pre, [(r.arrival, r) for r in reqs], planner)
    for r in reqs:
        r.prefill_node = r.node
    handoffs = sorted(((r.emits[0] + transfer(r.L_P), r) for r in reqs), key=lambda x: (x[0], x[1].j))
    dec = [DecodeNode(cm, cap) for _ in range(r_d)]
    _route(dec, handoffs, planner)
    return reqs, pre, dec


def slai(cm, arrival, L_P, L_D, cls, tbt_slo, budget, alpha, beta, order="spf", dynamic=True,
         delta=10.0, delta_low=5.0, delta_high=10.0, memory_limit=0.96, max_model_len=10**9,
         mem=None):
    """SLAI as agrimUT/SLAI's ``SLAIScheduler`` schedules (agrimUT/SLAI @ 5098a7a, slai_scheduler.py), step by
    step: a min-heap of (C, arrival, j) for decodes, a FIFO list of paused prefills, a waiting
    list with preempted requests inserted at its front and its arrived part re-sorted each step
    (SPF by (prompt, j); priority by (class, prompt, j)). ``mem``: a :class:`Blocks` with rule
    "sarathi", or None. Returns the MSim; each request also gets ``cls`` and ``viol`` (gaps above
    its class's SLO); ``sim.deltas`` lists the offset used after each batch and ``sim.deferred``
    counts the decodes left out of batches."""
    sim = MSim(cm, arrival, L_P, L_D)
    for r in sim.reqs:
        r.cls = int(cls[r.j])
    waiting, paused, heap, active, previous = [], [], [], set(), []
    n_batches, total = 0, 0.0
    sim.deltas, sim.deferred = [], 0

    def preempt(r):
        sim.preempt(r, mem)
        active.discard(r.j)
        waiting.insert(0, r)

    def slot(r, victims_allowed):
        """can_append_slot loop: preempt the newest paused prefill, else r itself."""
        while mem is not None and not mem.can_append_slot(r):
            if victims_allowed and paused:
                preempt(paused.pop(-1))
            else:
                preempt(r)
                return False
        if mem is not None:
            mem.append_slot(r)
        return True

    while not sim.resolved():
        if previous:  # _post_batch_processing
            used = (mem.total - mem.free) / mem.total if mem is not None else 0.0
            d = (delta_high if used >= memory_limit else delta_low) if dynamic else delta
            sim.deltas.append(d)
            for r in previous:
                if r.finished:
                    continue
                if r.in_prefill:
                    if r not in paused:
                        paused.append(r)
                else:
                    if r in paused:
                        paused.remove(r)
                    r.lst = sim.t + tbt_slo[r.cls] - d * (total / n_batches)
                    heapq.heappush(heap, (r.lst, r.arrival, r.j, r))
            previous = []
        waiting.extend(sim.arrivals())
        if not waiting and not paused and not heap:
            sim.wait()
            continue
        now = sim.t
        tokens, n_crit, n_non = 0, 0, 0
        decode, prefill = [], []
        while heap and tokens < budget and n_crit < beta and now >= heap[0][0]:  # 1. critical
            r = heapq.heappop(heap)[-1]
            n_crit += 1
            if slot(r, True):
                decode.append(r)
                tokens += 1
            else:
                n_crit -= 1
        while paused and tokens < budget:  # 2. paused prefills
            r = paused.pop(0)
            c = min(r.target - r.computed, budget - tokens)
            assert c > 0
            prefill.append((r, c))
            tokens += c
        if order == "spf":  # 3. new prefills
            waiting.sort(key=lambda r: (r.target, r.j))
        elif order == "spf_priority":
            waiting.sort(key=lambda r: (r.cls, r.target, r.j))
        while waiting and tokens < budget:
            r = waiting[0]
            if r.target > max_model_len or (mem is not None and mem.never(r.target)):
                waiting.pop(0)
                r.rejected = REJ_PROMPT_LIMIT if r.target > max_model_len else REJ_KV_NEVER
                continue
            if (mem is not None and not mem.can_allocate(r.target)) or len(active) >= alpha:
                break
            c = min(r.target, budget - tokens)
            waiting.pop(0)
            if mem is not None:
                mem.allocate(r)
            active.add(r.j)
            prefill.append((r, c))
            tokens += c
        while heap and tokens < budget and n_crit + n_non < beta:  # 4. non-critical
            r = heapq.heappop(heap)[-1]
            n_non += 1
            if slot(r, True):
                decode.append(r)
                tokens += 1
            else:
                n_non -= 1
        sim.deferred += len(heap)  # decodes left out of this batch
        if not prefill and not decode:
            assert any(r.preemptions or r.rejected for r in sim.reqs), "SLAI reference stuck"
            continue
        sim.run_batch(prefill, decode)
        n_batches += 1
        total += sim.batches[-1][1]
        previous = [r for r, _ in prefill] + decode
        for r in previous:
            if r.finished:
                active.discard(r.j)
                if mem is not None:
                    mem.release(r)
    for r in sim.reqs:
        gaps = [b - a for a, b in zip(r.emits, r.emits[1:], strict=False)]
        r.viol = sum(g > tbt_slo[r.cls] for g in gaps)
    return sim


class Users:
    """A closed loop: ``users`` users send their first requests at 0; the k-th request to end makes
    its user send the next ``think[k]`` seconds later; the k-th request sent takes the k-th
    lengths."""

    def __init__(self, users, think):
        self.users, self.think = int(users), [float(z) for z in think]


def make_sim(base, cm, arrival, L_P, L_D):
    """A ``base`` simulator (:class:`Sim` or :class:`MSim`) of requests arriving at ``arrival``, or
    sent by the closed loop ``arrival`` (:class:`Users`)."""
    if not isinstance(arrival, Users):
        return base(cm, arrival, L_P, L_D)

    class ClosedSim(base):
        def __init__(self):
            super().__init__(cm, [], [], [])
            self.lengths = list(zip((int(x) for x in L_P), (int(x) for x in L_D), strict=True))
            self.sends = [0.0] * min(arrival.users, len(self.lengths))  # send times not yet sent
            self.n_ended = 0

        def arrivals(self):
            out = []
            while self.sends and self.sends[0] <= self.t:
                k = len(self.reqs)
                r = self.REQUEST(k, heapq.heappop(self.sends), *self.lengths[k])
                self.reqs.append(r)
                out.append(r)
            return out

        def wait(self):
            self.t = max(self.t, self.sends[0])

        def run_batch(self, prefill=(), decode=()):
            super().run_batch(prefill, decode)
            for r in list(decode) + [r for r, _ in prefill]:
                if r.finish == self.t:  # ended in this batch: its user thinks, then sends
                    if len(self.reqs) + len(self.sends) < len(self.lengths):
                        heapq.heappush(self.sends, self.t + arrival.think[self.n_ended])
                    self.n_ended += 1

        def done(self):
            return not self.sends and super().done()

        def resolved(self):
            return not self.sends and super().resolved()

    return ClosedSim()
