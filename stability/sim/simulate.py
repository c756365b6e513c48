"""Simulate a scenario: requests arrive, are routed to r GPUs, scheduled, and finish.

A :class:`Scenario` is a frozen description (GPU, model, workload, scheduler and its options,
r, planner, arrival rate or load, number of requests, seed, request classes); :func:`simulate`
turns it into a :class:`SimResult` whose methods compute metrics and the stability verdict.
The arrivals are a Poisson process of the rate (or load), a replayed trace's (``trace``), a
load schedule of piecewise-constant rates (``stages``, :mod:`stability.sim.arrivals`), or the sends
of ``concurrency`` users in a closed loop, each thinking ``think_time`` seconds (constant or
exponential, ``think``) between the end of a request and the next (:mod:`stability.sim.closed_loop`;
with a trace, its lengths in order and not its arrival times).

Randomness: one ``numpy.random.SeedSequence(seed)`` spawns independent streams for the arrival
times, the lengths, the routing and the request classes, so a result depends on the scenario
only, and adding classes changes neither arrivals nor lengths.

Request classes (:mod:`stability.sim.classes`): ``classes`` lists ``(name, probability, TBT SLO)``;
each request draws its class; a scheduler that takes per-class TBT SLOs (SLAI's ``tbt_slo``) gets
them from the classes, and :meth:`SimResult.class_summary` reports TTFT, TBT and SLO attainment
per class. ``total_cap`` conditions the length law on L^P + L^D <= cap (Section 7 caps requests
at 8192 tokens).

References
----------
Bari, Hegde, de Veciana (2025), Sections 3-4 (Poisson arrivals of rate lambda, i.i.d. lengths),
Section 6 (request classes), Section 7 (the 8192-token cap).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property

import numpy as np

from stability.sim import metrics
from stability.sim.arrivals import parse_stages, stage_arrivals
from stability.sim.classes import RequestClass, draw_classes, p99_met, parse_classes
from stability.sim.closed_loop import UserRequests, parse_closed, run_closed
from stability.sim.cluster import run_cluster
from stability.sim.gpu import GpuRun, RunOptions
from stability.sim.registry import get_scheduler, option_names
from stability.sim.routing import PLANNERS, Cluster, Requests
from theory.bounds import T_bar_R
from theory.builder import CostSpec, cost_model
from theory.cost import CostModel
from theory.engine_terms import with_frontend
from theory.errors import FieldError, UnknownNameError, require_positive, require_positive_int
from theory.expert_parallel import check_group
from theory.workload import Workload, get_workload, read_trace


@dataclass(frozen=True)
class Scenario:
    """Everything a simulation depends on."""

    gpu: str = "a100"
    model: str = "mistral-7b"
    mode: str = "paper"
    workload: str = "table1"
    pad: bool = False
    tiles: str | None = None
    gpu_file: str | None = None
    model_file: str | None = None
    scheduler: str = "rad"
    options: tuple = ()  # scheduler parameters as ((name, value), ...)
    r: int = 1
    planner: str = "random"
    rate: float | None = None  # requests per second into the whole system
    load: float | None = 0.9  # fraction of lambda* (used when rate is None)
    n_requests: int = 20000
    seed: int = 0
    detail: bool = False  # record every TBT gap (histograms) and enable the batch log
    log: bool = False  # keep every batch's contents (needs detail)
    trace: str | None = None  # CSV with arrival_time (and lengths) instead of Poisson arrivals
    stages: tuple = ()  # a load schedule ((duration s, rate req/s, kind), ...) instead of one rate
    classes: tuple = ()  # request classes ((name, probability, TBT SLO), ...); () is one class
    total_cap: int | None = None  # condition the lengths on L^P + L^D <= total_cap
    warmup: float = 0.0  # fraction of the arrival window whose tokens the TBT histograms leave out
    concurrency: int | None = None  # users in a closed loop instead of an arrival rate (one GPU)
    think_time: float = 0.0  # a closed loop's think time (its mean if exponential), seconds
    think: str = "constant"  # the think time's law: constant or exponential

    @property
    def cost_spec(self) -> CostSpec:
        """The scenario's GPU, tile restriction, model and mode, for :func:`theory.builder.cost_model`."""
        return CostSpec(self.gpu, self.model, self.mode, self.tiles, self.gpu_file, self.model_file)

    def to_dict(self) -> dict:
        """The scenario as a JSON-able dict (tuples as lists); :meth:`from_dict` inverts it.

        Fields added since runs were first keyed by this dict (:data:`_LATER_FIELDS`) are left out
        at their defaults, so the identities and derived seeds of existing runs stay the same.
        """
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)
                if not (f.name in _LATER_FIELDS and getattr(self, f.name) == f.default)}

    @classmethod
    def from_dict(cls, values: dict) -> Scenario:
        """The scenario :meth:`to_dict` wrote (option pairs and class triples back to tuples)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise FieldError("scenario", unknown, f"only the fields {', '.join(sorted(known))}")
        return cls(**{k: tuple(map(tuple, v)) if k in ("options", "classes", "stages") else v
                      for k, v in values.items()})

    def with_options(self, **options) -> Scenario:
        merged = dict(self.options)
        merged.update(options)
        return replace(self, options=tuple(sorted(merged.items())))


_LATER_FIELDS = ("stages", "concurrency", "think_time", "think")


def _jsonable(value):
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


def cost_model_of(sc: Scenario) -> CostModel:
    """The scenario's batch-time model (Eq. 2-7): its GPU (tile set restricted if asked) and model."""
    return cost_model(sc.cost_spec)


def workload_of(sc: Scenario, cm: CostModel) -> Workload:
    """The scenario's length law: its trace or named workload, capped at ``total_cap`` tokens if
    given (Section 7), padded to t*_lcm if asked (Assumption 3)."""
    w = read_trace(sc.trace).workload("trace") if sc.trace else get_workload(sc.workload)
    if sc.total_cap is not None:
        w = w.truncated(require_positive_int("total_cap", sc.total_cap))
    return w.padded(cm.t_lcm) if sc.pad else w


def validate_scenario(sc: Scenario) -> None:
    """Check a scenario's fields before any work; errors name the field."""
    require_positive_int("r (gpus)", sc.r)
    require_positive_int("n_requests", sc.n_requests)
    if sc.planner not in PLANNERS:
        raise UnknownNameError("planner", sc.planner, PLANNERS)
    if sc.concurrency is not None:
        _validate_closed(sc)
    elif sc.think_time != 0.0 or sc.think != "constant":
        raise FieldError("think_time", sc.think_time, "a concurrency as well (think time is a closed "
                                                      "loop's)")
    elif sc.stages:
        if sc.trace is not None:
            raise FieldError("stages", sc.stages, "no trace as well (a trace's arrival times are the load)")
        if sc.rate is not None:
            raise FieldError("rate", sc.rate, "no rate with stages (the stages' rates are the load)")
        parse_stages(sc.stages)
    elif sc.trace is None:
        if sc.rate is None and sc.load is None:
            raise FieldError("rate/load", None, "an arrival rate (req/s) or a load (fraction of lambda*)")
        if sc.rate is not None:
            require_positive("rate", sc.rate)
        else:
            require_positive("load", sc.load)
    if sc.log and not sc.detail:
        raise FieldError("log", True, "detail=True as well (the batch log is a detail-mode record)")
    if isinstance(sc.warmup, bool) or not isinstance(sc.warmup, (int, float)) or not 0 <= sc.warmup < 1:
        raise FieldError("warmup", sc.warmup, "a fraction of the arrival window in [0, 1)")


def _validate_closed(sc: Scenario) -> None:
    """A closed loop's fields: the users and think time, one GPU, no arrival rate, load schedule or
    warm-up (whose window is known only after the run) beside them; a policy whose decisions do not
    read whether arrivals are left."""
    parse_closed(sc.concurrency, sc.think_time, sc.think)
    if sc.rate is not None:
        raise FieldError("rate", sc.rate, "no rate with concurrency (the users' sends are the load)")
    if sc.load not in (None, Scenario.load):
        raise FieldError("load", sc.load, "no load with concurrency (the users' sends are the load)")
    if sc.stages:
        raise FieldError("stages", sc.stages, "no stages with concurrency (the users' sends are the load)")
    if sc.r != 1:
        raise FieldError("r (gpus)", sc.r, "1 with concurrency (a closed loop drives one GPU)")
    if sc.warmup:
        raise FieldError("warmup", sc.warmup, "0 with concurrency (the arrival window is known only "
                                              "after the run)")
    if sc.scheduler in CLOSED_REFUSED:
        raise FieldError("scheduler", sc.scheduler, f"another scheduler with concurrency ({sc.scheduler}: "
                                                    f"{CLOSED_REFUSED[sc.scheduler]})")


# the policies a closed loop cannot drive, and why
CLOSED_REFUSED = {"wait": "its decisions read whether arrivals are left",
                  "nested_wait": "its decisions read whether arrivals are left",
                  "distserve": "it runs on prefill and decode nodes, a closed loop on one GPU"}


@dataclass(frozen=True, eq=False)
class SimResult:
    """A finished simulation: per-request arrays in arrival order and the per-node runs."""

    scenario: Scenario
    cost_model: CostModel
    workload: Workload
    lam: float
    lambda_star: float
    params: object
    node: np.ndarray
    runs: list[GpuRun]
    requests: dict = field(repr=False)
    classes: tuple[RequestClass, ...] = (RequestClass("all", 1.0, float("inf")),)
    tbt_from: float = 0.0  # the TBT histograms count the tokens emitted at or after this time

    @cached_property
    def work(self) -> np.ndarray:
        """T*_R(j) (Eq. 12) of every request."""
        return metrics.optimal_work(self.cost_model, self.requests["L_P"], self.requests["L_D"])

    def verdict(self, test: metrics.DriftTest | None = None) -> metrics.Verdict:
        """Stability verdict from the drift of the work in system (see :mod:`stability.sim.metrics`),
        by the drift test ``test`` (:class:`stability.sim.metrics.DriftTest`; None: its defaults).

        Rejected requests (a memory model refused them at arrival) never enter the system and are
        left out; the verdict is about the work that was admitted.
        """
        rq = self.requests
        kept = ~(rq["reject"] > 0)
        return metrics.stability_verdict(rq["arrival"][kept], rq["t_finish"][kept], self.work[kept],
                                         metrics.DriftTest() if test is None else test)

    def counters(self) -> dict:
        out: dict = {}
        for run in self.runs:
            for k, v in run.counters.items():
                out[k] = out.get(k, 0) + v
        return out

    def summary(self) -> dict:
        """Latency percentiles, TBT (detail mode), throughput, tiling, KV memory (``kv``: blocks, peak,
        whether a policy that never evicts overflowed; only when the KV model is on), verdict."""
        rq = self.requests
        done = np.isfinite(rq["t_finish"])
        horizon = float(np.nanmax(rq["t_finish"]) - rq["arrival"].min()) if done.any() else float("nan")
        c = self.counters()
        busy = sum(run.busy for run in self.runs)
        wasted = sum(run.wasted for run in self.runs)
        ttft, latency = with_frontend(self.cost_model, rq["t_first"] - rq["arrival"],
                                      rq["t_finish"] - rq["arrival"])  # the front end's time per request
        out = {
            "scheduler": self.scenario.scheduler, "gpu": self.cost_model.gpu.key,
            "model": self.cost_model.model.spec_name, "workload": self.workload.name, "r": self.scenario.r,
            "rate": self.lam, "lambda_star": self.lambda_star, "load": self.lam / self.lambda_star,
            "requests": int(rq["arrival"].size), "completed": int(done.sum()),
            "rejected": int(np.sum(rq["reject"] > 0)),
            "preemptions": int(np.nansum(rq["preemptions"])),
            "throughput": float(done.sum() / horizon) if horizon > 0 else float("nan"),
            "ttft": metrics.summarize_latency(ttft),
            "latency": metrics.summarize_latency(latency),
            "utilization": busy / (horizon * self.scenario.r) if horizon > 0 else float("nan"),
            "batches": c["n_batch"], "events": c["n_event"],
            "not_optimally_tiled": c["n_not_opt"] / max(c["n_batch"], 1),
            "wasted_fraction": wasted / busy if busy > 0 else 0.0,
            "decode_tokens": c["n_dec_tok"], "prefill_tokens": c["n_pre_tok"],
            "verdict": self.verdict().as_dict(),
        }
        sc = self.scenario
        if sc.concurrency is not None:  # added keys only: open-loop summaries stay as they were
            out["closed_loop"] = {"users": sc.concurrency, "think_time": sc.think_time, "think": sc.think}
            out["tpot"] = metrics.summarize_latency(tpot(rq["t_first"], rq["t_finish"], rq["L_D"]))
        if any(run.kv["on"] for run in self.runs):  # added keys only: runs without KV memory unchanged
            blocks, peak = (max(run.kv[k] for run in self.runs) for k in ("blocks", "peak"))
            out["kv"] = {"blocks": blocks, "peak_blocks": peak, "block_size": self.runs[0].kv["block_size"],
                         "overflowed": any(run.kv["peak"] > run.kv["blocks"] for run in self.runs)}
        if self.scenario.detail:
            hist, stat = self._tbt_record()
            out["tbt"] = [metrics.summarize_tbt(hist[k], stat[k]) for k in range(hist.shape[0])]
        out["classes"] = self.class_summary()
        return out

    def _tbt_record(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-class TBT histograms and (count, sum, max) over every node."""
        hist = sum(run.tbt_hist for run in self.runs)
        stat = np.zeros_like(self.runs[0].tbt_stat)
        for run in self.runs:
            stat[:, :2] += run.tbt_stat[:, :2]
            stat[:, 2] = np.maximum(stat[:, 2], run.tbt_stat[:, 2])
        return hist, stat

    def class_summary(self) -> list[dict]:
        """Per class: requests, completions, TTFT; in detail mode also TBT and SLO attainment
        (gap attainment, whether the class's P99 TBT is within the SLO, and the fractions of
        finished requests whose own P99 TBT, or every gap, is within it; see
        :mod:`stability.sim.classes`). With a ``warmup`` the TBT figures take the tokens emitted
        after it, and the request fractions the requests arriving after it (all of whose gaps
        are recorded)."""
        rq = self.requests
        done = np.isfinite(rq["t_finish"])
        ttft, _ = with_frontend(self.cost_model, rq["t_first"] - rq["arrival"],
                                rq["t_finish"] - rq["arrival"])
        out = []
        hist, stat = self._tbt_record() if self.scenario.detail else (None, None)
        for k, c in enumerate(self.classes):
            mine = rq["cls"] == k
            d = {"name": c.name, "prob": c.prob, "tbt_slo": c.tbt_slo, "requests": int(mine.sum()),
                 "completed": int((mine & done).sum()), "rejected": int(np.sum(rq["reject"][mine] > 0)),
                 "ttft": metrics.summarize_latency(ttft[mine])}
            if hist is not None:
                gaps = int(stat[k, 0])
                above = int(np.nansum(rq["tbt_viol"][mine]))
                fin = mine & done & (rq["arrival"] >= self.tbt_from)
                per_req = p99_met(rq["L_D"][fin], rq["tbt_viol"][fin].astype(np.int64))
                d["tbt"] = metrics.summarize_tbt(hist[k], stat[k])
                d["slo"] = {
                    "gaps_within": 1.0 - above / gaps if gaps else float("nan"),
                    "p99_met": bool(p99_met(gaps, above)) if gaps else True,
                    "requests_p99_within": float(per_req.mean()) if fin.any() else float("nan"),
                    "requests_max_within": (float(np.mean(rq["tbt_viol"][fin] == 0)) if fin.any()
                                            else float("nan")),
                }
            out.append(d)
        return out

    def batch_log(self) -> dict | None:
        """Every batch of every node (needs ``log``): columns of equal length, with a node column."""
        if not self.scenario.log:
            return None
        cols: dict = {"node": []}
        for g, run in enumerate(self.runs):
            cols["node"].append(np.full(run.batches["start"].size, g))
            for k, v in run.batches.items():
                cols.setdefault(k, []).append(v)
        out = {k: np.concatenate(v) for k, v in cols.items()}
        prefill, decode = [], []
        for g, run in enumerate(self.runs):
            # node-local request index -> global index (DistServe's prefill nodes record theirs)
            ids = run.rows if run.rows is not None else np.flatnonzero(self.node == g)
            it = run.items
            pre: list[list[str]] = [[] for _ in range(run.batches["start"].size)]
            dec: list[list[str]] = [[] for _ in range(run.batches["start"].size)]
            for b, j, i, c in zip(it["batch"], ids[it["request"]], it["i"], it["c"], strict=True):
                (pre[b].append(f"{j}:{i}:{c}") if c else dec[b].append(f"{j}:{i}"))
            prefill += [" ".join(x) for x in pre]
            decode += [" ".join(x) for x in dec]
        out["prefill_chunks"] = np.array(prefill, dtype=object)  # request:i:c (PI(R, i, c))
        out["decode_positions"] = np.array(decode, dtype=object)  # request:i (DI(R, i))
        return out


def make_params(scheduler, cm: CostModel, options: dict, classes: tuple[RequestClass, ...] = ()):
    """The scheduler's parameters from ``options``, refusing names it does not take. A scheduler
    with per-class TBT SLOs (option ``tbt_slo``) gets those of ``classes`` when they are given."""
    accepted = option_names(scheduler)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise FieldError(f"options of scheduler {scheduler.NAME!r}", unknown,
                         f"names among {', '.join(accepted) or '(none)'}")
    if "tbt_slo" in accepted and classes:
        if "tbt_slo" in options:
            raise FieldError(f"options of scheduler {scheduler.NAME!r}: tbt_slo", options["tbt_slo"],
                             "no value when the scenario has request classes (they give the SLOs)")
        options = {**options, "tbt_slo": tuple(c.tbt_slo for c in classes)}
    return scheduler.make_params(cm, **options)


def class_mix(sc: Scenario, params) -> tuple[RequestClass, ...]:
    """The scenario's classes; without any, one class whose SLO is the scheduler's (if it has
    one) or none."""
    if sc.classes:
        return parse_classes(sc.classes)
    slo = getattr(params, "tbt_slo", (float("inf"),))
    if len(slo) != 1:
        raise FieldError("options: tbt_slo", slo, "one value, for a scenario without classes")
    return (RequestClass("all", 1.0, float(slo[0])),)


def simulate(sc: Scenario, workers: int = 1, progress=None, runner=None) -> SimResult:
    """Run the scenario (see :class:`Scenario`); ``workers`` processes simulate nodes in parallel,
    and ``progress(k)`` (optional) is told of completed requests. ``runner`` (optional) runs the
    open-loop nodes in place of :func:`stability.sim.cluster.run_cluster`, with its signature (the
    replicas of a data-parallel group stepped in lockstep)."""
    validate_scenario(sc)
    cm = cost_model_of(sc)
    if cm.gpu.terms.ep > 1:  # the replicas form expert-parallel groups of ep GPUs (theory.expert_parallel)
        check_group(cm.gpu.terms.ep, sc.r, f"gpus.{cm.gpu.key}.ep")
    w = workload_of(sc, cm)
    scheduler = get_scheduler(sc.scheduler)
    classes = parse_classes(sc.classes) if sc.classes else ()
    params = make_params(scheduler, cm, dict(sc.options), classes)
    classes = class_mix(sc, params)
    lam_star = sc.r / T_bar_R(cm, w)
    ss_arrival, ss_lengths, ss_route, ss_class = np.random.SeedSequence(sc.seed).spawn(4)
    n = sc.n_requests
    closed = sc.concurrency is not None
    if sc.trace:
        tr = read_trace(sc.trace)
        if tr.arrival_time is None and not closed:
            raise FieldError(f"{sc.trace}: arrival_time", None, "a column of arrival times")
        n = min(n, tr.L_P.size)
        L_P, L_D = tr.L_P[:n], tr.L_D[:n]
        prefix = None if tr.prefix is None else tuple(a[:n] for a in tr.prefix)
        if sc.pad:
            L_P = -(-L_P // cm.t_lcm) * cm.t_lcm
        if not closed:
            arrival = tr.arrival_time[:n] - tr.arrival_time[0]
            lam = (n - 1) / arrival[-1] if n > 1 and arrival[-1] > 0 else float("nan")
    elif closed:
        L_P, L_D = w.sample(n, np.random.default_rng(ss_lengths))
        prefix = None
    elif sc.stages:
        arrival = staged_arrivals(sc)
        n = min(n, arrival.size)
        if n < 2:
            raise FieldError("stages", sc.stages, f"a schedule with at least 2 arrivals (it made {n})")
        arrival = arrival[:n]
        L_P, L_D = w.sample(n, np.random.default_rng(ss_lengths))
        lam = (n - 1) / (arrival[-1] - arrival[0])
        prefix = None
    else:
        lam = sc.rate if sc.rate is not None else sc.load * lam_star
        arrival = np.cumsum(np.random.default_rng(ss_arrival).exponential(1.0 / lam, size=n))
        L_P, L_D = w.sample(n, np.random.default_rng(ss_lengths))
        prefix = None
    cls = draw_classes(classes, n, np.random.default_rng(ss_class))
    slo = np.array([c.tbt_slo for c in classes])
    tbt_from = 0.0 if closed else tbt_start(arrival, sc.warmup)
    options = RunOptions(n_class=len(classes), detail=sc.detail, log=sc.log, tbt_slo=slo, tbt_from=tbt_from,
                         progress=progress, prefix=prefix)
    if closed:
        loop = parse_closed(sc.concurrency, sc.think_time, sc.think)
        think = loop.think_times(n, np.random.default_rng(ss_arrival))
        runs = [run_closed(cm, scheduler, params, loop.users, UserRequests(L_P, L_D, cls, think), options)]
        node, arrival = np.zeros(n, dtype=np.int64), runs[0].arrival
        lam = (n - 1) / arrival[-1] if n > 1 and arrival[-1] > 0 else float("nan")
    else:
        cluster = Cluster(sc.r, sc.planner, np.random.default_rng(ss_route), workers)
        node, runs = (runner or run_cluster)(cm, scheduler, params, Requests(arrival, L_P, L_D, cls), cluster,
                                             options)
    requests = {"arrival": arrival, "L_P": L_P, "L_D": L_D, "cls": cls, "node": node}
    for key in ("t_start", "t_first", "t_finish", "tbt_max", "tbt_viol", "reject", "preemptions"):
        values = np.full(n, np.nan)
        for g, run in enumerate(runs):
            values[node == g] = getattr(run, key)
        requests[key] = values
    return SimResult(sc, cm, w, float(lam), float(lam_star), params, node, runs, requests, classes,
                     tbt_from)


def tpot(t_first, t_finish, L_D) -> np.ndarray:
    """Time per output token of each request, its first token left out:
    ``(t_finish - t_first) / L^D`` (its ``L^D`` decodes follow the prefill's token); NaN where
    ``L^D = 0``, which vLLM's client leaves out of its TPOT (vllm-project/vllm,
    ``vllm/benchmarks/serve.py``, ``calculate_metrics``: ``latency_minus_ttft / (output_len - 1)``
    when ``output_len > 1``, commit def9ce85ba1079af970a58ed3d42dd861ae35d58)."""
    d = np.asarray(L_D, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, (np.asarray(t_finish) - np.asarray(t_first)) / d, np.nan)


def staged_arrivals(sc: Scenario) -> np.ndarray:
    """Every arrival time of the scenario's load schedule (``stages``), drawn from its arrival
    stream (the first of the seed's four), as :func:`simulate` draws them."""
    ss_arrival = np.random.SeedSequence(sc.seed).spawn(4)[0]
    return stage_arrivals(parse_stages(sc.stages), np.random.default_rng(ss_arrival))


def tbt_start(arrival, warmup: float) -> float:
    """The time from which the TBT histograms count tokens: the end of a ``warmup`` fraction of the
    arrival window (:func:`stability.sim.metrics.warmup_end`), or 0 (every token) without one."""
    return metrics.warmup_end(arrival, warmup) if warmup > 0 else 0.0
