"""The planner's question (:class:`PlanSpec`) and the fleet rule.

* **The fleet rule** (:func:`fleet_capacity`). Under the uniformly random planner (Section 4.1)
  each of r identical GPUs receives a thinned Poisson stream of rate ``lam / r`` with the same
  length law, independently of the others, so the fleet is stable iff every node is, iff
  ``lam / r`` is below one GPU's capacity: the capacity of the fleet is exactly r times one GPU's,
  and r times the certified bound of one GPU is a certified bound for the fleet (it is also
  ``capacity_bound(..., r)`` of the theorem, which holds for every planner). The planner claims
  the attained r-fold capacity for random routing only; a state-dependent planner such as JSQ is
  not claimed (:func:`fleet_capacity` refuses it).

References
----------
Bari, Hegde, de Veciana (2025), Section 3 (r GPUs behind a resource planner), Section 4.1 (the
uniformly random planner), Theorem 1 (throughput bound); :mod:`theory.capacity` (the certified
bound with token budget, decode cap and KV memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stability.planner.caps import PLAN_SCHEDULERS, scheduler_caps
from stability.planner.slo import SloSpec
from theory.errors import FieldError, UnknownNameError, require_positive


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
    ep : tuple of int
        Expert-parallel degrees tried (:mod:`theory.expert_parallel`, EP groups of TP-1 replicas,
        :func:`stability.planner.grid.ep_degrees`); empty: EP 1 and, for a mixture of experts,
        every degree the GPU's servers offer where the experts divide.
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
        (:func:`stability.planner.slo.with_class_slos`); SLO keys ``<metric>@<class>`` must name a class.
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
    ep: tuple = ()
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
        self.validate_ep()
        names = [str(c[0]) for c in self.classes]
        for s in self.slo.limits:
            if s.cls != "all" and s.cls not in names:
                raise UnknownNameError(f"request class of slo {s.key}", s.cls,
                                       names or ["(none: give --classes)"])
        if self.trace is not None and self.workload != self.trace:
            raise FieldError("workload", self.workload, f"the trace {self.trace} itself when a trace is "
                                                        "the load (its lengths are the workload)")

    def validate_ep(self, name: str = "ep") -> None:
        """Raise a FieldError naming ``name`` (the field ``ep``, or the option that gave it) for a
        degree that is not an integer >= 1, a degree > 1 asked of a dense model, or a group larger
        than ``r_max`` GPUs."""
        from theory.models import get_model

        for e in self.ep:
            if isinstance(e, bool) or not isinstance(e, int) or e < 1:
                raise FieldError(name, e, "expert-parallel degrees, integers >= 1")
        big = max(self.ep, default=1)
        if big == 1:
            return
        dense = [m for m in self.models if get_model(m, self.model_file).moe is None]
        if dense:
            raise FieldError(name, big, f"1 for the dense model {dense[0]} (expert parallelism splits the "
                                        "experts of a mixture of experts; the default, auto, plans EP 1 "
                                        "for dense models and the EP degrees of each mixture)")
        if big > self.r_max:
            raise FieldError(name, big, f"at most the {self.r_max} GPUs of the largest fleet (r_max, "
                                        f"--max-gpus): an expert-parallel group of {big} GPUs does not fit")


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


__all__ = [
    "PlanSpec",
    "fleet_capacity",
]
