"""The planner's candidate grid: families, certified capacities of one replica, pruning.

``llmq plan`` asks for the cheapest fleet (GPU kind, model, layer mode, scheduler with its knobs,
number of GPUs r) that carries a target rate ``lam`` within latency SLOs. What needs no simulation
lives in this package: prices (:mod:`stability.planner.prices`), SLOs
(:mod:`stability.planner.slo`), the schedulers' caps (:mod:`stability.planner.caps`), the
question and the fleet rule (:mod:`stability.planner.spec`), and here the grid:

* **Certified capacity of one GPU** (:func:`theory.capacity.capacity_bound`): the largest rate any
  scheduler can sustain on the GPU's batch-time law with the scheduler's token budget ``b_max``
  and decode cap, and a KV cache of :func:`theory.capacity.kv_capacity_tokens` tokens at the
  scheduler's memory fraction.
* **Pruning** (:func:`build_grid`): a candidate whose certified fleet capacity is below the
  target cannot carry it under any scheduler, so it is pruned without simulation. The rest are
  ordered cheapest first (price per hour, then larger headroom).

* **Tensor parallelism** (:mod:`theory.tensor_parallel`): a replica is one GPU or a TP group of
  k GPUs; the bound and the simulator price the group (its shards and all-reduces), r counts
  replicas, and a fleet of r groups costs r k GPUs.
* **Expert parallelism** of a mixture of experts (:mod:`theory.expert_parallel`, vLLM's
  ``enable_expert_parallel`` over ``data_parallel_size`` replicas): an EP group of e GPUs is e
  replicas of one GPU each (TP 1), each holding ``E / e`` experts and every non-expert weight, whose
  MoE layers dispatch and combine their tokens across the group. Each replica runs on the profile
  ``<gpu>-ep<e>`` (:func:`theory.expert_parallel.ep_table`), the bound and the simulator price
  its batches as :mod:`theory.expert_parallel` does (the group's batches of equal size; the
  simulation runs the replicas behind random routing, not in the lockstep of vLLM's DP ranks that
  the serving replay models, :mod:`stability.serving.lockstep`), and r counts replicas, so r is a
  multiple of e and a fleet of r replicas costs r GPUs. The group's
  GPUs are those of one server of the degrees ``theory/data/tensor_parallel.toml`` lists, and the
  dispatch and combine take that server's fitted all-reduce law
  (:func:`theory.tensor_parallel.allreduce_law`): the bus bandwidth is the links', the same for
  every collective (nccl-tests ``doc/PERFORMANCE.md``). EP degrees are planned where the experts
  divide (``n_experts`` a multiple of e, :func:`theory.expert_parallel.check_ep`) and a fleet of
  at most ``r_max`` GPUs holds a group; a dense model is planned at EP 1 only.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (r GPUs behind a resource planner), Section 4.1 (the
uniformly random planner), Theorem 1 (throughput bound); :mod:`theory.capacity` (the certified
bound with token budget, decode cap and KV memory); vllm-project/vllm @
00193b82b0e2d4faea5d3b4ea4f6c4c2bd9d057a ``vllm/config/parallel.py`` (``data_parallel_size``,
``enable_expert_parallel``: the MoE layers sharded over the product of the TP and DP sizes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from stability.planner.caps import scheduler_caps
from stability.planner.prices import gpu_price, load_prices
from stability.planner.spec import PlanSpec, fleet_capacity
from theory.errors import FieldError, LlmqError


@dataclass(frozen=True)
class Family:
    """A configuration without its fleet size: GPU, model, mode, scheduler and its knobs, the
    tensor-parallel degree ``tp`` (GPUs per replica) and the expert-parallel degree ``ep``
    (replicas per expert-parallel group; ``ep > 1`` only with ``tp = 1``)."""

    gpu: str
    model: str
    mode: str
    scheduler: str
    options: tuple  # ((name, value), ...), sorted
    tp: int = 1
    ep: int = 1

    @property
    def gpu_key(self) -> str:
        """The GPU profile one replica runs on: the GPU, its ``tp``-GPU group
        (:func:`theory.tensor_parallel.variant_key`), or one GPU of its ``ep``-GPU expert-parallel
        group (:func:`theory.expert_parallel.ep_key`)."""
        from theory.expert_parallel import ep_key
        from theory.tensor_parallel import variant_key

        return ep_key(self.gpu, self.ep) if self.ep > 1 else variant_key(self.gpu, self.tp)

    def replicas(self, r_min: int, r_max: int) -> range:
        """The fleet sizes in replicas whose GPUs (``r tp``) lie in ``r_min .. r_max``: every r for
        ``ep = 1``, the multiples of ``ep`` (whole expert-parallel groups) otherwise."""
        unit = self.ep * self.tp  # GPUs of the smallest step of the fleet
        first = max(1, -(-r_min // unit)) * self.ep
        return range(first, r_max // unit * self.ep + 1, self.ep)

    @property
    def label(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in self.options)
        return f"{self.gpu_key}/{self.model}/{self.mode}/{self.scheduler}" + (f"[{knobs}]" if knobs else "")


@dataclass(frozen=True)
class Candidate:
    """One configuration of the grid: a family at fleet size ``r``.

    Attributes
    ----------
    family : Family
    r : int
        Replicas (each of ``family.tp`` GPUs; a multiple of ``family.ep``).
    usd_per_hour : float
        ``r tp`` times the GPU's hourly price.
    certified : float
        Certified fleet capacity, req/s (:func:`stability.planner.spec.fleet_capacity`).
    binds : str
        What binds the certified capacity: ``"compute"`` or ``"kv-memory"``.
    utilisation : float
        Target rate / certified capacity (a lower bound on the load any scheduler runs at).
    """

    family: Family
    r: int
    usd_per_hour: float
    certified: float
    binds: str
    utilisation: float

    @property
    def headroom(self) -> float:
        """``1 - utilisation``: the fraction of the certified capacity left above the target."""
        return 1.0 - self.utilisation

    @property
    def gpus(self) -> int:
        """GPUs of the fleet: replicas times the tensor-parallel degree."""
        return self.r * self.family.tp


@dataclass(frozen=True)
class OneGpu:
    """One GPU's certified capacity under a family's caps (req/s) and what binds it."""

    bound: float
    binds: str
    lam_compute: float
    lam_kv: float
    kv_tokens: float


@cache
def _per_gpu_law(gpu: str, model: str, mode: str, gpu_file, model_file, workload: str, b_max, q
                 ) -> tuple[float, float]:
    """(compute bound, KV bound per KV token) of one GPU: the KV bound
    ``M / E[K]`` is linear in the cache size M, so one evaluation serves every memory fraction."""
    from theory.builder import CostSpec, cost_model
    from theory.capacity import capacity_bound
    from theory.workload import get_workload

    cm = cost_model(CostSpec(gpu, model, mode, None, gpu_file, model_file))
    cap = capacity_bound(cm, get_workload(workload), 1, b_max=b_max, max_decodes=q, kv_tokens=1.0)
    return cap.lam_compute, cap.lam_kv


def one_gpu_capacity(spec: PlanSpec, fam: Family) -> OneGpu:
    """The certified capacity of one GPU of ``fam`` on the spec's workload (cached per process):
    ``min(lam_C, M lam_M(1))`` with M the KV tokens at the scheduler's memory fraction."""
    from theory.builder import CostSpec, cost_model
    from theory.capacity import kv_capacity_tokens

    caps = scheduler_caps(fam.scheduler, dict(fam.options))
    cm = cost_model(CostSpec(fam.gpu_key, fam.model, fam.mode, None, spec.gpu_file, spec.model_file))
    kv = kv_capacity_tokens(cm, caps.kv_utilization)
    if kv <= 0:  # the weights alone do not fit: no request can be served
        return OneGpu(0.0, "kv-memory", math.nan, 0.0, 0.0)
    lam_c, lam_kv1 = _per_gpu_law(fam.gpu_key, fam.model, fam.mode, spec.gpu_file, spec.model_file,
                                  spec.workload, caps.b_max, caps.max_decodes)
    lam_kv = kv * lam_kv1
    return OneGpu(min(lam_c, lam_kv), "compute" if lam_c <= lam_kv else "kv-memory", lam_c, lam_kv, kv)


@dataclass(frozen=True)
class Grid:
    """Every candidate of a spec, split into those kept (cheapest first) and those pruned.

    Attributes
    ----------
    families : tuple of Family
    one_gpu : dict
        ``{Family: OneGpu}``.
    kept : tuple of Candidate
        Candidates whose certified capacity reaches the target, cheapest first.
    pruned : tuple of Candidate
        Candidates whose certified capacity is below the target.
    prices : dict
        ``{gpu: Price}`` of the GPUs in the grid.
    gpu_file : str or None
        The GPU file every run of the grid uses: the spec's, with the TP and EP groups' profiles
        added (:func:`group_file`).
    """

    families: tuple
    one_gpu: dict
    kept: tuple
    pruned: tuple
    prices: dict
    gpu_file: str | None = None

    @property
    def considered(self) -> int:
        return len(self.kept) + len(self.pruned)


def tp_degrees(spec: PlanSpec, gpu, model, mode: str, utilization: float) -> tuple[int, ...]:
    """The TP degrees planned for ``model`` on ``gpu`` in ``mode``: those of ``spec.tp`` the GPU
    offers and the model splits into, or (``spec.tp`` empty) the smallest degree whose weight shard
    leaves room for KV cache in the scheduler's memory fraction ``utilization``
    (:func:`theory.tensor_parallel.auto_degree`)."""
    from theory.tensor_parallel import auto_degree, degrees, splits

    if not spec.tp:
        return (auto_degree(gpu, model, mode, utilization),)
    return tuple(k for k in spec.tp if k in degrees(gpu.key) and splits(model, k, mode))


def ep_degrees(spec: PlanSpec, gpu, model) -> tuple[int, ...]:
    """The expert-parallel degrees greater than 1 planned for ``model`` on ``gpu`` (module
    docstring): those of ``spec.ep`` (every degree of ``gpu``'s servers, ``spec.ep`` empty) that
    the GPU's servers offer (:func:`theory.tensor_parallel.degrees`), the experts divide
    (:func:`theory.expert_parallel.splits_experts`) and a fleet of ``r_min .. r_max`` GPUs holds
    a whole number of (``r_max // e * e >= r_min``); none for a dense model. EP groups run at TP 1,
    so none where ``spec.tp`` names degrees without 1."""
    from theory.expert_parallel import splits_experts
    from theory.tensor_parallel import degrees

    if model.moe is None or (spec.tp and 1 not in spec.tp):
        return ()
    return tuple(e for e in (spec.ep or degrees(gpu.key)) if e > 1 and e in degrees(gpu.key)
                 and splits_experts(model, e) and spec.r_max // e * e >= spec.r_min)


def families_of(spec: PlanSpec) -> list[Family]:
    """Every GPU x model x mode x TP degree x EP degree x scheduler x knob setting of the spec: the
    TP degrees of :func:`tp_degrees` at EP 1 (where ``spec.ep`` is empty or names 1), then the
    EP degrees of :func:`ep_degrees` at TP 1."""
    from theory.hardware import get_gpu
    from theory.models import get_model

    out = []
    for name in spec.gpu_list:
        gpu = get_gpu(name, spec.gpu_file)
        for model in spec.models:
            m = get_model(model, spec.model_file)
            for mode in spec.modes:
                for s in spec.schedulers:
                    for knobs in spec.knobs.get(s, ({},)):
                        u = scheduler_caps(s, dict(knobs)).kv_utilization
                        opts = tuple(sorted(dict(knobs).items()))
                        if not spec.ep or 1 in spec.ep:
                            out += [Family(gpu.key, model, mode, s, opts, tp)
                                    for tp in tp_degrees(spec, gpu, m, mode, u)]
                        out += [Family(gpu.key, model, mode, s, opts, 1, e) for e in ep_degrees(spec, gpu, m)]
    return out


def group_file(fams, gpu_file: str | None, directory: str | Path) -> str | None:
    """The GPU file of a grid's families: ``gpu_file`` with a profile per TP group
    (:func:`theory.tensor_parallel.variant_file`, exactly as without EP when no family has
    ``ep > 1``) and one per expert-parallel group, ``<gpu>-ep<e>``
    (:func:`theory.expert_parallel.ep_table` of the GPU's resolved real-mode table, with its
    server's all-reduce law of :func:`theory.tensor_parallel.allreduce_law` and vLLM's default
    ``all2all_backend``), written into ``directory`` named by its content."""
    import hashlib

    import tomli_w

    from theory.expert_parallel import ep_key, ep_table
    from theory.hardware import gpu_table
    from theory.io import atomic_write_text
    from theory.tensor_parallel import allreduce_law, variant_file, variant_text

    tp_groups = {(f.gpu, f.tp) for f in fams}
    ep_groups = sorted({(f.gpu, f.ep) for f in fams if f.ep > 1})
    if not ep_groups:
        return variant_file(tp_groups, gpu_file, directory)
    tables = {ep_key(g, e): ep_table(g, gpu_table(g, gpu_file, calibrated=True), e, allreduce_law(g, e))
              for g, e in ep_groups}
    text = (variant_text(tp_groups, gpu_file) + "# Expert-parallel groups written by llmq plan "
            "(theory.expert_parallel; the server's all-reduce law).\n" + tomli_w.dumps({"gpus": tables}))
    path = Path(directory) / f"gpus-ep-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"
    if not path.exists():
        atomic_write_text(path, text)
    return str(path)


def build_grid(spec: PlanSpec, capacity=one_gpu_capacity, tp_dir: str | Path | None = None) -> Grid:
    """The candidates of ``spec`` with their certified capacities and prices, pruned and ordered.

    Pruning rule: drop ``(family, r)`` when ``fleet_capacity(one replica's bound, r) < rate``; no
    scheduler, chunking or batching carries the target there (:mod:`theory.capacity`).
    Fleets of r replicas of TP degree k hold ``r k`` GPUs, between ``r_min`` and ``r_max``; those
    of EP degree e hold r GPUs, r a multiple of e (:meth:`Family.replicas`).
    Order: price per hour ascending, then headroom descending, then the family's label.
    ``capacity(spec, family) -> OneGpu`` computes one replica's bound (a caller may cache it on
    disk); the GPU file of the TP and EP groups (:func:`group_file`) is written into ``tp_dir``
    (default: a directory under the system's temporary directory).

    Raises
    ------
    FieldError
        If the spec is contradictory, a GPU has no price, or no candidate's certified capacity
        reaches the target (naming the best reachable rate, its configuration and what binds).
    """
    import tempfile
    from dataclasses import replace

    from theory.hardware import get_gpu

    spec.validate()
    prices = load_prices(spec.price_file)
    keys = {g: get_gpu(g, spec.gpu_file).key for g in spec.gpu_list}
    gpu_prices = {keys[g]: gpu_price(prices, keys[g], spec.price_file) for g in spec.gpu_list}
    fams = families_of(spec)
    gpu_file = group_file(fams, spec.gpu_file, tp_dir or Path(tempfile.gettempdir()) / "llmq-plan")
    one = {f: capacity(replace(spec, gpu_file=gpu_file), f) for f in fams}
    kept, pruned = [], []
    for f in fams:
        for r in f.replicas(spec.r_min, spec.r_max):
            cert = fleet_capacity(one[f].bound, r, spec.planner)
            c = Candidate(f, r, r * f.tp * gpu_prices[f.gpu].usd_per_gpu_hour, cert, one[f].binds,
                          spec.rate / cert if cert > 0 else math.inf)
            (kept if cert >= spec.rate else pruned).append(c)
    if not kept:
        best = max(fams, key=lambda f: fleet_capacity(one[f].bound, max_replicas(f, spec), spec.planner))
        raise InfeasibleTargetError(spec, best, one[best])
    kept.sort(key=lambda c: (c.usd_per_hour, -c.headroom, c.family.label))
    return Grid(tuple(fams), one, tuple(kept), tuple(pruned), gpu_prices, gpu_file)


def max_replicas(fam: Family, spec: PlanSpec) -> int:
    """The largest fleet of ``fam`` in replicas within ``spec.r_max`` GPUs (0 for none)."""
    sizes = fam.replicas(spec.r_min, spec.r_max)
    return sizes[-1] if sizes else 0


class InfeasibleTargetError(FieldError):
    """No candidate's certified capacity reaches the target rate."""

    def __init__(self, spec: PlanSpec, best: Family, one: OneGpu):
        replicas = max_replicas(best, spec)
        self.best_rate = fleet_capacity(one.bound, replicas, spec.planner)
        self.best_family = best
        advice = "raise --max-gpus or lower --rate"
        if one.kv_tokens <= 0:
            why = "KV memory: the model's weights leave no room for KV cache on any planned GPU or TP group"
            advice = "plan GPUs that hold the model, alone or in a TP or EP group (--gpus, --tp, --ep)"
        elif one.binds == "compute":
            why = "compute"
        else:
            why = f"KV memory ({one.kv_tokens:.0f} tokens per replica)"
        LlmqError.__init__(self, (
            f"rate: expected a target some configuration can carry, got {spec.rate:g} req/s; the best "
            f"reachable certified rate is {self.best_rate:.4g} req/s with {replicas} x {best.label} "
            f"({one.bound:.4g} req/s per replica, bound by {why}); {advice}"))
        self.field, self.value, self.expected = "rate", spec.rate, "a reachable target"


__all__ = [
    "Candidate",
    "Family",
    "Grid",
    "InfeasibleTargetError",
    "OneGpu",
    "build_grid",
    "ep_degrees",
    "families_of",
    "group_file",
    "max_replicas",
    "one_gpu_capacity",
    "tp_degrees",
]
