"""What a capacity-region sweep is (:mod:`stability.region`): its description (:class:`SweepSpec`)
and its series, each one tile set, scheduler, r and workload variant with the theory it is set
against (lambda*, Theorem 2's line, the certified capacity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from stability.points import N_MAX, workload
from theory.builder import CostSpec, cost_model
from theory.defaults import EPSILON
from theory.errors import FieldError, UnknownNameError

DEFAULT_SCHEDULERS = ("rad", "sarathi", "request_level")
DEFAULT_LOADS = (0.5, 0.8, 0.9, 0.95, 1.0, 1.05, 1.2)


# --- the sweep's description -------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep depends on.

    Attributes
    ----------
    tilesets : tuple of str
        GPU names, optionally restricted (``"a100:128x128"``).
    schedulers : tuple of str
    options : tuple
        ``((scheduler, ((name, value), ...)), ...)``; RAD's ``n`` may be ``"auto"``.
    rs : tuple of int
        Numbers of nodes r.
    variants : tuple of str
        ``"pad"`` (Assumption 3 enforced) and/or ``"raw"``.
    loads : tuple of float
        Grid of rates as fractions of each series' lambda*.
    bisect : int
        Bisection steps after the grid; ``tol`` stops earlier (relative bracket width).
    saturation, replicates, sat_requests, confidence
        The saturation runs that give the boundary's CI: ``replicates`` runs of ``sat_requests``
        requests (per node) at ``saturation`` x lambda*, a t-interval at ``confidence``.
    two_class : tuple
        ``()`` or ``(class_1_spec, class_2_spec, (share_1, ...))``.
    """

    tilesets: tuple = ("a100", "rtx6000ada")
    model: str = "mistral-7b"
    mode: str = "paper"
    workload: str = "table1"
    gpu_file: str | None = None
    model_file: str | None = None
    schedulers: tuple = ("rad", "request_level")
    options: tuple = (("rad", (("n", "auto"),)),)
    rs: tuple = (1,)
    variants: tuple = ("pad", "raw")
    loads: tuple = DEFAULT_LOADS
    bisect: int = 4
    tol: float = 0.004
    n_requests: int = 100000
    saturation: float = 1.5
    replicates: int = 4
    sat_requests: int = 300000
    confidence: float = 0.95
    epsilon: float = EPSILON
    dtmc_samples: int = 100
    two_class: tuple = ()
    seed: int = 0

    def cost_spec(self, tileset: str) -> CostSpec:
        """The batch-time model of one of the sweep's tile sets."""
        return CostSpec(tileset, self.model, self.mode, gpu_file=self.gpu_file, model_file=self.model_file)

    def validate(self) -> None:
        """Raise a :class:`theory.errors.LlmqError` naming the first bad field."""
        from stability.sim.registry import scheduler_names

        if not self.loads:
            raise FieldError("loads (lambda grid)", list(self.loads), "at least one load > 0")
        for v in self.loads:
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise FieldError("loads (lambda grid)", list(self.loads), "loads > 0 (fractions of lambda*)")
        if not self.rs:
            raise FieldError("r (gpus)", list(self.rs), "at least one integer >= 1")
        for r in self.rs:
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise FieldError("r (gpus)", r, "an integer >= 1")
        if not self.tilesets:
            raise FieldError("gpu", "", "at least one GPU tile set")
        if not self.schedulers:
            raise FieldError("scheduler", "", "at least one scheduler")
        for name in self.schedulers:
            if name not in scheduler_names():
                raise UnknownNameError("scheduler", name, scheduler_names())
        if not self.variants or any(v not in ("pad", "raw") for v in self.variants):
            raise FieldError("variants", list(self.variants), "'pad' and/or 'raw'")
        if isinstance(self.n_requests, bool) or not isinstance(self.n_requests, int) or self.n_requests < 200:
            raise FieldError("requests", self.n_requests, "an integer >= 200")
        if isinstance(self.sat_requests, bool) or not isinstance(self.sat_requests, int) \
                or self.sat_requests < 200:
            raise FieldError("sat_requests", self.sat_requests, "an integer >= 200")
        if isinstance(self.bisect, bool) or not isinstance(self.bisect, int) or self.bisect < 0:
            raise FieldError("bisect", self.bisect, "an integer >= 0")
        if isinstance(self.replicates, bool) or not isinstance(self.replicates, int) or self.replicates < 2:
            raise FieldError("replicates", self.replicates, "an integer >= 2")
        if not self.saturation > 1:
            raise FieldError("saturation", self.saturation, "a load > 1 (a multiple of lambda*)")
        if not 0 < self.confidence < 1:
            raise FieldError("confidence", self.confidence, "a number in (0, 1)")
        if not 0 < self.epsilon < 1:
            raise FieldError("epsilon", self.epsilon, "a number in (0, 1)")
        if self.two_class:
            shares = self.two_class[2]
            if not shares or any(not 0 <= s <= 1 for s in shares):
                raise FieldError("shares", list(shares), "class-1 shares in [0, 1]")
        rad_n = dict(dict(self.options).get("rad", ())).get("n", "auto")
        if rad_n != "auto" and (isinstance(rad_n, bool) or not isinstance(rad_n, int)
                                or not 1 <= rad_n <= N_MAX):
            raise FieldError("--option rad.n", rad_n, f"'auto' or an integer in [1, {N_MAX}] (the "
                                                      "largest n the auto search tries; a cycle of "
                                                      "n requests is simulated per DTMC sample)")
        for tileset in self.tilesets:
            cost_model(self.cost_spec(tileset))  # unknown GPU, model or tile


@dataclass(frozen=True)
class Series:
    """One (tile set, scheduler, r, workload variant) sweep, with the theory it is set against."""

    tileset: str
    scheduler: str
    options: tuple
    r: int
    variant: str
    workload: str
    lambda_star: float
    theorem2: float  # lambda* (1 - eps) (pad variant; nan for raw: Assumption 3 fails)
    epsilon: float
    n_threshold: int | None
    class_1: str = ""
    class_2: str = ""
    share_1: float = float("nan")
    T_bar_1: float = float("nan")
    T_bar_2: float = float("nan")
    certified: float = float("nan")  # theory.capacity's bound for the series' cost model and KV memory
    certified_binds: str = ""  # "compute" or "kv-memory": which of the two bounds is the smaller

    @property
    def name(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options)
        share = "" if math.isnan(self.share_1) else f" share_1={self.share_1:g}"
        return f"{self.tileset} {self.scheduler}[{opts}] r={self.r} {self.variant} {self.workload}{share}"


def _theory(spec: SweepSpec, tileset: str, law: str, variant: str, r: int, scheduler: str,
            options: tuple) -> dict:
    from theory.bounds import T_bar_R, T_max, n_threshold

    cm = cost_model(spec.cost_spec(tileset))
    kv = _kv_tokens(cm, scheduler, options)
    certified, binds = _certified(spec.cost_spec(tileset), law, variant, r, kv)
    w = workload(law, cm.t_lcm if variant == "pad" else None)
    tbar = T_bar_R(cm, w)
    lam_star = r / tbar
    pad = variant == "pad"
    n_thr = n_threshold(cm.t_star.t_col, T_max(cm, w.l_P_max, w.l_D_max), tbar, spec.epsilon)
    return {"lambda_star": lam_star, "theorem2": lam_star * (1 - spec.epsilon) if pad else float("nan"),
            "epsilon": spec.epsilon, "n_threshold": n_thr if pad else None,
            "certified": certified, "certified_binds": binds}


def _kv_tokens(cm, scheduler: str, options: tuple) -> int | None:
    """The KV cache of one GPU as the scheduler models it, in tokens (its blocks times the block
    size: every token of a resident request holds a slot), or None when it models no KV memory."""
    from stability.sim.registry import get_scheduler
    from stability.sim.simulate import make_params

    kv = getattr(make_params(get_scheduler(scheduler), cm, dict(options)), "kv", None)
    return int(kv.blocks) * int(kv.block_size) if kv is not None and kv.on else None


@cache
def _certified(cost_spec: CostSpec, law: str, variant: str, r: int,
               kv_tokens: int | None = None) -> tuple[float, str]:
    """The certified capacity of :mod:`theory.capacity` and which bound binds: without a token budget
    (a bound on every scheduler and planner of the sweep, with the cost model's per-batch overhead)
    and, for a scheduler that models KV memory, ``min(compute, KV)`` with its cache of ``kv_tokens``
    per GPU (the KV-memory bound by Little's law). Kept on disk across runs
    (:func:`stability.kept.kept`: its tables take seconds)."""
    from stability.kept import kept
    from theory.capacity import capacity_bound

    cm = cost_model(cost_spec)
    w = workload(law, cm.t_lcm if variant == "pad" else None)
    kv = None if kv_tokens is None else float(kv_tokens)

    def compute() -> dict:
        b = capacity_bound(cm, w, r, kv_tokens=kv)
        return {"bound": b.bound, "binds": b.binds}

    got = kept("certified", (cm, w.L_P, w.L_D, w.p, int(r), kv), compute)
    return got["bound"], got["binds"]


def _groups(spec: SweepSpec) -> list[tuple[str, str]]:
    """The sweep's (tile set, scheduler) pairs, in the order of its series."""
    return [(tileset, name) for tileset in spec.tilesets for name in spec.schedulers]


def _series_for(spec: SweepSpec, tileset: str, name: str, rad_n: dict) -> list[Series]:
    """The series of one tile set and scheduler; ``rad_n[tileset]`` resolves RAD's ``n = auto``."""
    from theory.bounds import T_bar_R
    from theory.workload import mixture_spec

    out = []
    options = tuple(sorted(dict(dict(spec.options).get(name, ())).items()))
    if name == "rad" and dict(options).get("n", "auto") == "auto":
        options = tuple(sorted({**dict(options), "n": rad_n[tileset]}.items()))
    for r in spec.rs:
        for variant in spec.variants:
            if not spec.two_class:
                out.append(Series(tileset, name, options, r, variant, spec.workload,
                                  **_theory(spec, tileset, spec.workload, variant, r, name, options)))
                continue
            c1, c2, shares = spec.two_class
            cm = cost_model(spec.cost_spec(tileset))
            pad_to = cm.t_lcm if variant == "pad" else None
            t1, t2 = T_bar_R(cm, workload(c1, pad_to)), T_bar_R(cm, workload(c2, pad_to))
            for s in shares:
                wl = mixture_spec([(s, c1), (1 - s, c2)])
                out.append(Series(tileset, name, options, r, variant, wl,
                                  **_theory(spec, tileset, wl, variant, r, name, options), class_1=c1,
                                  class_2=c2, share_1=float(s), T_bar_1=t1, T_bar_2=t2))
    return out


def build_series(spec: SweepSpec, rad_n: dict) -> list[Series]:
    """Every series of the sweep; ``rad_n[tileset]`` resolves RAD's ``n = auto``."""
    return [s for tileset, name in _groups(spec) for s in _series_for(spec, tileset, name, rad_n)]
