"""The planner's pure part: prices, SLOs, the candidate grid, certified fleet capacities, pruning.

``llmq plan`` asks for the cheapest fleet (GPU kind, model, layer mode, scheduler with its knobs,
number of GPUs r) that carries a target rate ``lam`` within latency SLOs. This module holds what
needs no simulation:

* **Prices** (``theory/data/prices.toml``): the hourly price of one GPU is the public on-demand
  price of an instance divided by its GPU count; a user TOML overrides or adds entries
  (``base =`` inheritance, as for GPU files).
* **SLOs** (:func:`parse_slo`): ``ttft_p50``, ``ttft_p99``, ``tbt_p99`` limits in seconds, over
  all requests or one class (``tbt_p99@paying=0.1``), or ``stable`` alone.
* **Certified capacity of one GPU** (:func:`theory.capacity.capacity_bound`): the largest rate any
  scheduler can sustain on the GPU's batch-time law with the scheduler's token budget ``b_max``
  and decode cap, and a KV cache of :func:`theory.capacity.kv_capacity_tokens` tokens at the
  scheduler's memory fraction.
* **The fleet rule** (:func:`fleet_capacity`). Under the uniformly random planner (Section 4.1)
  each of r identical GPUs receives a thinned Poisson stream of rate ``lam / r`` with the same
  length law, independently of the others, so the fleet is stable iff every node is, iff
  ``lam / r`` is below one GPU's capacity: the capacity of the fleet is exactly r times one GPU's,
  and r times the certified bound of one GPU is a certified bound for the fleet (it is also
  ``capacity_bound(..., r)`` of the theorem, which holds for every planner). The planner claims
  the attained r-fold capacity for random routing only; a state-dependent planner such as JSQ is
  not claimed (:func:`fleet_capacity` refuses it).
* **Pruning** (:func:`build_grid`): a candidate whose certified fleet capacity is below the
  target cannot carry it under any scheduler, so it is pruned without simulation. The rest are
  ordered cheapest first (price per hour, then larger headroom).

* **Tensor parallelism** (:mod:`theory.tensor_parallel`): a replica is one GPU or a TP group of
  k GPUs; the bound and the simulator price the group (its shards and all-reduces), r counts
  replicas, and a fleet of r groups costs r k GPUs.

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (r GPUs behind a resource planner), Section 4.1 (the
uniformly random planner), Theorem 1 (throughput bound); :mod:`theory.capacity` (the certified
bound with token budget, decode cap and KV memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from theory.config import inherit, read_packaged, read_section
from theory.errors import FieldError, LlmqError, UnknownNameError, require_positive

PRICE_FILE = "theory/data/prices.toml"
SLO_NAMES = ("ttft_p50", "ttft_p99", "tbt_p99")
PLAN_SCHEDULERS = ("rad", "sarathi", "vllm", "slai")
PRICE_FIELDS = ("usd_per_gpu_hour", "instance_usd_per_hour", "gpus_per_instance", "source", "instance",
                "provider", "as_of", "checked")  # what a [prices.<gpu>] table may give (besides base)
KV_UTILIZATION_UNMODELLED = 0.9  # vLLM's default gpu_memory_utilization, for schedulers without one


# --- prices -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """The hourly price of one GPU and where it comes from.

    Attributes
    ----------
    gpu : str
        GPU preset key.
    usd_per_gpu_hour : float
        ``instance_usd_per_hour / gpus_per_instance`` (or a user's direct figure).
    source, instance, provider, as_of : str
        The public price list, the instance type priced there, its provider and date.
    checked : bool or None
        Whether the figure was read off the cited page when the file was written (None: not said).
    """

    gpu: str
    usd_per_gpu_hour: float
    source: str = ""
    instance: str = ""
    provider: str = ""
    as_of: str = ""
    checked: bool | None = None


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """Every GPU price: the packaged table, overridden or extended by the user TOML at ``path``.

    Raises
    ------
    FieldError
        For an entry without a usable price, or a key the table does not define (naming
        ``prices.<key>`` and the file).
    """
    presets = read_packaged("prices.toml")["prices"]
    user = read_section(path, "prices", PRICE_FIELDS) if path is not None else {}
    tables = inherit(presets, user, "price")
    return {key: _price(key, table, str(path) if key in user else PRICE_FILE)
            for key, table in tables.items()}


def _price(key: str, t: dict, where: str) -> Price:
    if "usd_per_gpu_hour" in t:
        usd = t["usd_per_gpu_hour"]
    elif "instance_usd_per_hour" in t and "gpus_per_instance" in t:
        gpus = t["gpus_per_instance"]
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise FieldError(f"{where}: prices.{key}.gpus_per_instance", gpus, "an integer >= 1")
        usd = require_positive(f"{where}: prices.{key}.instance_usd_per_hour",
                               t["instance_usd_per_hour"]) / gpus
    else:
        raise FieldError(f"{where}: prices.{key}", sorted(t),
                         "usd_per_gpu_hour, or instance_usd_per_hour with gpus_per_instance")
    require_positive(f"{where}: prices.{key} (USD per GPU-hour)", usd)
    return Price(key, float(usd), str(t.get("source", "")), str(t.get("instance", "")),
                 str(t.get("provider", "")), str(t.get("as_of", "")),
                 t["checked"] if isinstance(t.get("checked"), bool) else None)


def gpu_price(prices: dict[str, Price], gpu: str, price_file: str | None = None) -> Price:
    """The price of ``gpu`` (a preset key); a measured-profile preset without an entry of its own
    costs what the card it is built on costs (:func:`theory.hardware.measured_base`); a GPU the
    table lacks is an error naming it and the file."""
    from theory.hardware import measured_base

    base = measured_base(gpu)
    if gpu not in prices and base in prices:
        return replace(prices[base], gpu=gpu)
    if gpu not in prices:
        files = PRICE_FILE + (f" and {price_file}" if price_file else "")
        raise FieldError(f"price of GPU {gpu!r}", None,
                         f"a [prices.{gpu}] entry in {files} (known: {', '.join(sorted(prices))})")
    return prices[gpu]


# --- SLOs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slo:
    """One latency limit: ``metric`` (one of ``SLO_NAMES``) of class ``cls`` (``"all"``: every
    request) at most ``limit`` seconds."""

    metric: str
    cls: str
    limit: float

    @property
    def key(self) -> str:
        return self.metric if self.cls == "all" else f"{self.metric}@{self.cls}"


@dataclass(frozen=True)
class SloSpec:
    """The SLOs a plan must meet; every plan must also be stable with no request rejected."""

    limits: tuple[Slo, ...] = ()

    @property
    def text(self) -> str:
        return ",".join(f"{s.key}={s.limit:g}" for s in self.limits) or "stable"

    @property
    def tail_metric(self) -> str | None:
        """The key of the SLO the Pareto front trades against cost: a P99 (TBT first), else the
        first limit."""
        for name in ("tbt_p99", "ttft_p99"):
            for s in self.limits:
                if s.metric == name:
                    return s.key
        return self.limits[0].key if self.limits else None


def parse_slo(text: str) -> SloSpec:
    """``"ttft_p50=0.5,tbt_p99=0.1"`` (or ``"tbt_p99@paying=0.1"``, or ``"stable"``) -> SloSpec.

    Raises
    ------
    UnknownNameError
        For a metric outside ``SLO_NAMES``.
    FieldError
        For a malformed item, a limit that is not a positive number, or one metric given twice.
    """
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise FieldError("slo", text, "NAME=SECONDS items (ttft_p50, ttft_p99, tbt_p99) or 'stable'")
    out: dict[str, Slo] = {}
    for item in items:
        if item == "stable":
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise FieldError("slo", item, "NAME=SECONDS, e.g. tbt_p99=0.1, or 'stable'")
        metric, _, cls = name.strip().partition("@")
        if metric not in SLO_NAMES:
            raise UnknownNameError("SLO", metric, SLO_NAMES)
        try:
            limit = float(value)
        except ValueError:
            raise FieldError(f"slo {name.strip()}", value, "a number of seconds > 0") from None
        require_positive(f"slo {name.strip()}", limit)
        s = Slo(metric, cls.strip() or "all", limit)
        if s.key in out and out[s.key].limit != limit:
            raise FieldError(f"slo {s.key}", (out[s.key].limit, limit), "one limit per metric and class")
        out[s.key] = s
    return SloSpec(tuple(out.values()))


# --- schedulers' caps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    """What a scheduler configuration promises about every batch and its memory.

    Attributes
    ----------
    b_max : int or None
        Tokens per batch at most (None: no budget).
    max_decodes : int or None
        Decodes per batch at most.
    kv_utilization : float
        Fraction of GPU memory for weights and KV cache (the KV bound's ``M``).
    memory_modelled : bool
        Whether the simulator models this scheduler's KV memory (else only the bound accounts
        for it).
    """

    b_max: int | None
    max_decodes: int | None
    kv_utilization: float
    memory_modelled: bool


def scheduler_caps(name: str, options: dict) -> Caps:
    """The token budget, decode cap and KV fraction of a scheduler configuration, with the
    defaults of the schedulers' ``make_params`` (checked against them in tests/test_plan.py).

    * ``rad``: no budget (whole prefills), memory not modelled (Assumption 4);
    * ``sarathi``: budget ``chunk_size`` (512), at most ``max_num_seqs`` (128) sequences, 80 %;
    * ``vllm``: a prefill batch holds at most ``max_num_batched_tokens`` (``max(max_model_len,
      2048)``) tokens, a decode batch at most ``max_num_seqs`` (256) decodes, 90 %;
    * ``slai``: budget ``token_budget`` (512), ``max_num_seqs`` (128), 90 %.

    Options the planner does not read (``order``, ``delta``) leave the caps unchanged.
    """
    o = dict(options)
    if name == "rad":
        return Caps(None, None, KV_UTILIZATION_UNMODELLED, False)
    if name == "sarathi":
        return Caps(int(o.get("chunk_size", 512)), int(o.get("max_num_seqs", 128)),
                    float(o.get("gpu_memory_utilization", 0.8)), bool(o.get("memory", True)))
    if name == "vllm":
        seqs = int(o.get("max_num_seqs", 256))
        budget = int(o.get("max_num_batched_tokens") or max(int(o.get("max_model_len", 8192)), 2048))
        return Caps(max(budget, seqs), seqs, float(o.get("gpu_memory_utilization", 0.9)),
                    bool(o.get("memory", True)))
    if name == "slai":
        return Caps(int(o.get("token_budget", 512)), int(o.get("max_num_seqs", 128)),
                    float(o.get("gpu_memory_utilization", 0.9)), bool(o.get("memory", True)))
    raise UnknownNameError("scheduler of llmq plan", name, PLAN_SCHEDULERS)


# --- the grid -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """A configuration without its fleet size: GPU, model, mode, scheduler and its knobs."""

    gpu: str
    model: str
    mode: str
    scheduler: str
    options: tuple  # ((name, value), ...), sorted
    tp: int = 1

    @property
    def gpu_key(self) -> str:
        """The GPU profile one replica runs on: the GPU, or its ``tp``-GPU group
        (:func:`theory.tensor_parallel.variant_key`)."""
        from theory.tensor_parallel import variant_key

        return variant_key(self.gpu, self.tp)

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
        Replicas (each of ``family.tp`` GPUs).
    usd_per_hour : float
        ``r tp`` times the GPU's hourly price.
    certified : float
        Certified fleet capacity, req/s (:func:`fleet_capacity`).
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
class PlanSpec:
    """The question: carry ``rate`` req/s of ``workload`` within ``slo`` at the lowest price.

    Attributes
    ----------
    rate : float
    workload : str
    slo : SloSpec
    gpus, models, modes, schedulers : tuple of str
        ``gpus`` empty: every GPU preset.
    tp : tuple of int
        Tensor-parallel degrees tried where a GPU offers them (:mod:`theory.tensor_parallel`);
        empty: per GPU and model the smallest degree whose weight shard leaves room for KV cache.
    knobs : dict
        ``{scheduler: ({option: value}, ...)}``: the knob settings tried per scheduler (a
        scheduler not named runs with its defaults).
    r_min, r_max : int
        Fleet sizes tried, in GPUs (a fleet of r replicas of TP degree k has r k GPUs).
    planner : str
        Only ``"random"`` (the fleet rule is proven for it).
    price_file, gpu_file, model_file : str or None
    classes : tuple
        Request classes ``((name, probability, TBT SLO s), ...)`` as :class:`stability.sim.simulate.Scenario`
        takes them (empty: one class). Each class's TBT SLO joins ``slo`` as ``tbt_p99@<name>``
        (:func:`with_class_slos`); SLO keys ``<metric>@<class>`` must name a class.
    trace : str or None
        A CSV trace with ``arrival_time`` replayed whole as the load; ``rate`` is then its mean rate
        and ``workload`` its path (the length law of the bound).
    """

    rate: float
    workload: str = "table1"
    slo: SloSpec = field(default_factory=SloSpec)
    gpus: tuple = ()
    models: tuple = ("mistral-7b",)
    modes: tuple = ("real",)
    schedulers: tuple = PLAN_SCHEDULERS
    tp: tuple = ()
    knobs: dict = field(default_factory=dict)
    r_min: int = 1
    r_max: int = 16
    planner: str = "random"
    price_file: str | None = None
    gpu_file: str | None = None
    model_file: str | None = None
    classes: tuple = ()
    trace: str | None = None

    @property
    def gpu_list(self) -> tuple:
        """The GPUs to try: ``gpus``, or every preset when empty."""
        from theory.hardware import gpu_names

        return tuple(self.gpus) or tuple(gpu_names())

    def validate(self) -> None:
        """Raise a FieldError naming the first contradictory or out-of-range field."""
        require_positive("rate", self.rate)
        for name in ("r_min", "r_max"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise FieldError(name, v, "an integer >= 1")
        if self.r_min > self.r_max:
            raise FieldError("r_min", self.r_min, f"at most r_max = {self.r_max}")
        if self.planner != "random":
            fleet_capacity(1.0, 1, self.planner)
        for key in ("models", "modes", "schedulers"):
            if not getattr(self, key):
                raise FieldError(key, getattr(self, key), "at least one name")
        for mode in self.modes:
            if mode not in ("paper", "real"):
                raise UnknownNameError("mode", mode, ("paper", "real"))
        for s in self.schedulers:
            scheduler_caps(s, {})
        for k in self.tp:
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise FieldError("tp", k, "tensor-parallel degrees, integers >= 1")
        names = [str(c[0]) for c in self.classes]
        for s in self.slo.limits:
            if s.cls != "all" and s.cls not in names:
                raise UnknownNameError(f"request class of slo {s.key}", s.cls,
                                       names or ["(none: give --classes)"])
        if self.trace is not None and self.workload != self.trace:
            raise FieldError("workload", self.workload, f"the trace {self.trace} itself when a trace is "
                                                        "the load (its lengths are the workload)")


def with_class_slos(slo: SloSpec, classes) -> SloSpec:
    """``slo`` with each class's TBT SLO as a ``tbt_p99@<class>`` limit (a finite one), so that a
    plan meets every class's own target.

    Raises
    ------
    FieldError
        If ``slo`` already limits ``tbt_p99@<class>`` to another value (contradictory limits).
    """
    limits = {s.key: s for s in slo.limits}
    for name, _, tbt in classes:
        key = f"tbt_p99@{name}"
        if not math.isfinite(float(tbt)):
            continue
        if key in limits and limits[key].limit != float(tbt):
            raise FieldError(f"slo {key}", limits[key].limit,
                             f"the class's own TBT SLO {float(tbt):g} s (--classes), or no {key} limit")
        limits.setdefault(key, Slo("tbt_p99", str(name), float(tbt)))
    return SloSpec(tuple(limits.values()))


def fleet_capacity(one_gpu: float, r: int, planner: str = "random") -> float:
    """Capacity of r identical GPUs from one GPU's: ``r * one_gpu`` under random routing.

    Each node of a uniformly random planner sees a Poisson stream of rate ``lam / r`` (thinning),
    independent of the other nodes', with the same lengths, so the fleet is stable iff
    ``lam / r < one_gpu``.

    Raises
    ------
    FieldError
        For any planner but ``"random"``: a state-dependent planner (JSQ) couples the nodes and its
        capacity is not claimed.

    References
    ----------
    Section 4.1 (the random planner); Poisson thinning.
    """
    if planner != "random":
        raise FieldError("planner", planner, "'random': the r-fold fleet capacity is proven for uniformly "
                                             "random routing only (JSQ's is not claimed)")
    return r * one_gpu


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
        The GPU file every run of the grid uses: the spec's, with the TP groups' profiles added.
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


def families_of(spec: PlanSpec) -> list[Family]:
    """Every GPU x model x mode x TP degree x scheduler x knob setting of the spec."""
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
                        for tp in tp_degrees(spec, gpu, m, mode, u):
                            out.append(Family(gpu.key, model, mode, s, tuple(sorted(dict(knobs).items())),
                                              tp))
    return out


def build_grid(spec: PlanSpec, capacity=one_gpu_capacity, tp_dir: str | Path | None = None) -> Grid:
    """The candidates of ``spec`` with their certified capacities and prices, pruned and ordered.

    Pruning rule: drop ``(family, r)`` when ``fleet_capacity(one replica's bound, r) < rate``; no
    scheduler, chunking or batching carries the target there (:mod:`theory.capacity`).
    Fleets of r replicas of TP degree k hold ``r k`` GPUs, between ``r_min`` and ``r_max``.
    Order: price per hour ascending, then headroom descending, then the family's label.
    ``capacity(spec, family) -> OneGpu`` computes one replica's bound (a caller may cache it on
    disk); the GPU file of the TP groups (:func:`theory.tensor_parallel.variant_file`) is written
    into ``tp_dir`` (default: a directory under the system's temporary directory).

    Raises
    ------
    FieldError
        If the spec is contradictory, a GPU has no price, or no candidate's certified capacity
        reaches the target (naming the best reachable rate, its configuration and what binds).
    """
    import tempfile
    from dataclasses import replace

    from theory.hardware import get_gpu
    from theory.tensor_parallel import variant_file

    spec.validate()
    prices = load_prices(spec.price_file)
    keys = {g: get_gpu(g, spec.gpu_file).key for g in spec.gpu_list}
    gpu_prices = {keys[g]: gpu_price(prices, keys[g], spec.price_file) for g in spec.gpu_list}
    fams = families_of(spec)
    gpu_file = variant_file({(f.gpu, f.tp) for f in fams}, spec.gpu_file,
                            tp_dir or Path(tempfile.gettempdir()) / "llmq-plan")
    one = {f: capacity(replace(spec, gpu_file=gpu_file), f) for f in fams}
    kept, pruned = [], []
    for f in fams:
        for r in range(max(1, -(-spec.r_min // f.tp)), spec.r_max // f.tp + 1):
            cert = fleet_capacity(one[f].bound, r, spec.planner)
            c = Candidate(f, r, r * f.tp * gpu_prices[f.gpu].usd_per_gpu_hour, cert, one[f].binds,
                          spec.rate / cert if cert > 0 else math.inf)
            (kept if cert >= spec.rate else pruned).append(c)
    if not kept:
        best = max(fams, key=lambda f: fleet_capacity(one[f].bound, spec.r_max // f.tp, spec.planner))
        raise InfeasibleTargetError(spec, best, one[best])
    kept.sort(key=lambda c: (c.usd_per_hour, -c.headroom, c.family.label))
    return Grid(tuple(fams), one, tuple(kept), tuple(pruned), gpu_prices, gpu_file)


class InfeasibleTargetError(FieldError):
    """No candidate's certified capacity reaches the target rate."""

    def __init__(self, spec: PlanSpec, best: Family, one: OneGpu):
        replicas = spec.r_max // best.tp
        self.best_rate = fleet_capacity(one.bound, replicas, spec.planner)
        self.best_family = best
        advice = "raise --max-gpus or lower --rate"
        if one.kv_tokens <= 0:
            why = "KV memory: the model's weights leave no room for KV cache on any planned GPU or TP group"
            advice = "plan GPUs that hold the model, alone or in a TP group (--gpus, --tp)"
        elif one.binds == "compute":
            why = "compute"
        else:
            why = f"KV memory ({one.kv_tokens:.0f} tokens per replica)"
        LlmqError.__init__(self, (
            f"rate: expected a target some configuration can carry, got {spec.rate:g} req/s; the best "
            f"reachable certified rate is {self.best_rate:.4g} req/s with {replicas} x {best.label} "
            f"({one.bound:.4g} req/s per replica, bound by {why}); {advice}"))
        self.field, self.value, self.expected = "rate", spec.rate, "a reachable target"


__all__ = ["KV_UTILIZATION_UNMODELLED", "PLAN_SCHEDULERS", "PRICE_FILE", "SLO_NAMES", "Candidate", "Caps",
           "Family", "Grid", "InfeasibleTargetError", "OneGpu", "PlanSpec", "Price", "Slo", "SloSpec",
           "build_grid", "families_of", "fleet_capacity", "gpu_price", "load_prices", "one_gpu_capacity",
           "parse_slo", "scheduler_caps", "tp_degrees", "with_class_slos"]
