"""Beyond the paper: the planner's fleets, priced by their GPUs, and the plan it picks among ties.

``llmq plan`` sizes fleets of r replicas behind the uniformly random planner (Section 4.1), each
certified at r times one replica's bound (Theorem 1 with r nodes); the price of a fleet and the
choice among fleets of equal price are the library's own, so these checks belong to the
beyond-the-paper section and extend Theorem 1.

* ``beyond.planner_prices``: every candidate of a planner grid with tensor-parallel groups costs
  its GPUs times the price of one GPU-hour. Both factors are counted without the planner: the GPUs
  of a replica are the tensor-parallel degree of the profile its simulation runs on (the grid's GPU
  file, :class:`theory.hardware.GpuTerms` ``tp``), and the price of a GPU-hour is read from the
  packaged price table (``theory/data/prices.toml``, ``instance_usd_per_hour /
  gpus_per_instance``) with :mod:`tomllib`, not through :mod:`stability.planner.prices`.
* ``beyond.planner_tie_break``: where several families' cheapest fleets cost the same, the search
  returns the one with the larger headroom (:mod:`stability.planner.grid`'s order: "price per hour
  ascending, then headroom descending, then the family's label"; :mod:`stability.planner.search`
  visits the families in that order and gives ties to the family first in it). The search runs on
  the same grid with a runner whose every replicate meets the SLO, so every fleet is feasible and
  the plan is decided by the order alone; the expected plan is computed from the candidates'
  prices and utilisations (headroom = 1 - utilisation) by the rule as stated.

Each check is a judge over numbers it is given (the ``judge_*`` functions) plus the computation of
those numbers; tests feed the judges a changed price or order and see both verdicts.

References
----------
Bari, Hegde, de Veciana (2025), Section 4.1 (the uniformly random planner), Theorem 1 (lambda* =
r / T_bar^R for r nodes).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import tomllib

from paper_checks.evidence import Points
from paper_checks.margins import EXACT, NOT_APPLICABLE
from paper_checks.registry import Result, Verdict, register

if TYPE_CHECKING:
    from stability.planner.grid import Candidate, Grid
    from stability.planner.spec import PlanSpec

# the instance: a model that needs a TP group on one GPU type, two schedulers (equal prices at equal
# fleet sizes, different certified capacities) and two TP degrees (equal prices across degrees)
PLAN_GPU, PLAN_MODEL, PLAN_TP, PLAN_SCHEDULERS = "h100", "llama-2-70b", (2, 4), ("vllm", "sarathi")
PLAN_RATE, PLAN_WORKLOAD, PLAN_R_MAX = 5.0, "table1", 16
PRICE_TABLE = Path(__file__).resolve().parents[1] / "theory" / "data" / "prices.toml"
REL = 1e-12  # two products of the same floats in another order differ by round-off at most


def plan_spec() -> PlanSpec:
    """The planner's question of both checks (:data:`PLAN_GPU`, :data:`PLAN_MODEL`, ...)."""
    from stability.planner.slo import parse_slo
    from stability.planner.spec import PlanSpec

    return PlanSpec(
        rate=PLAN_RATE,
        workload=PLAN_WORKLOAD,
        slo=parse_slo("ttft_p50=1"),
        gpus=(PLAN_GPU,),
        models=(PLAN_MODEL,),
        schedulers=PLAN_SCHEDULERS,
        tp=PLAN_TP,
        r_max=PLAN_R_MAX,
    )


@cache
def plan_grid() -> Grid:
    """The planner's grid for :func:`plan_spec` (its TP groups' GPU file in a temporary directory)."""
    from stability.planner.grid import build_grid

    return build_grid(plan_spec(), tp_dir=Path(tempfile.gettempdir()) / "llmq-check-plan")


def table_price(gpu: str, path: Path = PRICE_TABLE) -> float:
    """USD per GPU-hour of ``gpu`` read from the price table at ``path``: its
    ``usd_per_gpu_hour``, or ``instance_usd_per_hour / gpus_per_instance``."""
    entry = tomllib.loads(path.read_text())["prices"][gpu]
    if "usd_per_gpu_hour" in entry:
        return float(entry["usd_per_gpu_hour"])
    return entry["instance_usd_per_hour"] / entry["gpus_per_instance"]


def replica_gpus(candidate: Candidate, gpu_file: str | None) -> int:
    """GPUs of one replica: the tensor-parallel degree of the GPU profile its runs use."""
    from theory.hardware import get_gpu

    return int(get_gpu(candidate.family.gpu_key, gpu_file).terms.tp)


def judge_prices(rows: list[dict]) -> Result:
    """PASS if every row's ``planner`` price equals its ``count`` (GPUs x USD per GPU-hour) to
    round-off, else FAIL with the first row that differs."""
    bad = next((r for r in rows if not math.isclose(r["planner USD/h"], r["count USD/h"], rel_tol=REL)), None)
    if bad is not None:
        return Result(
            Verdict.FAIL,
            f"the planner prices {bad['fleet']} at {bad['planner USD/h']:.6g} USD/h, "
            f"its {bad['GPUs']} GPUs cost {bad['count USD/h']:.6g} USD/h",
            counterexample=bad,
        )
    tp = sorted({r["GPUs per replica"] for r in rows})
    return Result(
        Verdict.PASS,
        f"every one of {len(rows)} fleets costs its GPUs times the table's price of a GPU-hour",
        coverage=f"{len(rows)} candidates (kept and pruned) of the planner's "
        f"grid for {PLAN_MODEL} on {PLAN_GPU} with TP groups of {tp} GPUs, {' and '.join(PLAN_SCHEDULERS)}, "
        f"1..{PLAN_R_MAX} GPUs",
        evidence={"fleets": rows[:6]},
        margin=EXACT,
    )


def price_rows(grid: Grid) -> list[dict]:
    """Each candidate of ``grid``: the planner's price and the independent count."""
    rows = []
    for c in (*grid.kept, *grid.pruned):
        per = replica_gpus(c, grid.gpu_file)
        rows.append(
            {
                "fleet": f"{c.r} x {c.family.label}",
                "GPUs per replica": per,
                "GPUs": c.r * per,
                "planner USD/h": c.usd_per_hour,
                "count USD/h": c.r * per * table_price(c.family.gpu),
            }
        )
    return rows


@register(
    "beyond.planner_prices",
    level="sample",
    location="Beyond the paper: the planner's price of a fleet (llmq plan)",
    items=(),
    section="beyond",
    extends=("Theorem 1",),
    domain="every fleet the planner considers: every GPU, model, TP or EP group and fleet size",
    evaluates=(
        Points(
            "the planner's grid for Llama-2-70B on the H100 with TP groups of 2 and 4 "
            "GPUs, vLLM and Sarathi-Serve, 1..16 GPUs: every candidate, kept and pruned"
        ),
    ),
    claim="A fleet of r replicas costs r times the GPUs of a replica times the hourly price of one "
    "GPU (the instance's price over its GPU count).",
    method="Build the planner's grid (stability.planner.grid.build_grid); for every candidate count "
    "its GPUs as r times the tensor-parallel degree of the GPU profile its runs use (the "
    "grid's GPU file) and price them with the table theory/data/prices.toml read with "
    "tomllib (instance_usd_per_hour / gpus_per_instance); FAIL where the planner's price "
    "differs beyond round-off.",
)
def beyond_planner_prices(fast: bool) -> Result:
    return judge_prices(price_rows(plan_grid()))


class FeasibleRunner:
    """A planner runner whose every replicate is stable and meets every SLO (each metric 0): the
    search's plan is then decided by its order alone. Records how many tasks it was asked."""

    def __init__(self, keys: tuple[str, ...]):
        self.keys, self.asked = keys, 0

    def run(self, tasks: list) -> list[dict]:
        self.asked += len(tasks)
        return [
            {
                "replicates": [
                    {**dict.fromkeys(self.keys, 0.0), "verdict": "stable", "rejected": 0, "requests": 10}
                    for _ in t.replicates()
                ],
                "r": 1,
                "rate": 1.0,
                "elapsed_s": 0.0,
            }
            for t in tasks
        ]


def expected_plan(candidates: Sequence[Candidate]) -> tuple:
    """The stated rule's plan among feasible ``candidates``: the least price, then the least
    utilisation (the largest headroom, 1 - utilisation), then the family's label."""
    c = min(candidates, key=lambda c: (c.usd_per_hour, c.utilisation, c.family.label))
    return c.family.label, c.r


def judge_tie_break(candidates: Sequence[Candidate], got: tuple) -> Result:
    """PASS if the search's plan ``got`` (family label, r) is :func:`expected_plan`'s, else FAIL;
    an instance without a tie of distinct headrooms at the least price cannot tell (ValueError)."""
    least = min(c.usd_per_hour for c in candidates)
    tied = sorted((c for c in candidates if c.usd_per_hour == least), key=lambda c: c.utilisation)
    if len({c.utilisation for c in tied}) < 2:
        raise ValueError(
            "no two families of distinct headroom share the least price: the tie-break is unseen"
        )
    want = expected_plan(candidates)
    case = {
        "least USD/h": least,
        "tied fleets (headroom)": {f"{c.r} x {c.family.label}": 1 - c.utilisation for c in tied},
        "search's plan": f"{got[1]} x {got[0]}",
        "stated rule's plan": f"{want[1]} x {want[0]}",
    }
    if got != want:
        return Result(
            Verdict.FAIL,
            f"among {len(tied)} fleets of {least:.6g} USD/h the search returns "
            f"{got[1]} x {got[0]}, not the one of largest headroom, {want[1]} x {want[0]}",
            counterexample=case,
        )
    return Result(
        Verdict.PASS,
        f"among {len(tied)} fleets of {least:.6g} USD/h the search returns the one of "
        f"largest headroom, {want[1]} x {want[0]}",
        coverage=f"the planner's grid for {PLAN_MODEL} on {PLAN_GPU} (TP {PLAN_TP}, "
        f"{' and '.join(PLAN_SCHEDULERS)}): {len(tied)} fleets tied at the least price, "
        "every fleet feasible",
        evidence=case,
        margin=NOT_APPLICABLE,
    )


@register(
    "beyond.planner_tie_break",
    level="sample",
    location="Beyond the paper: the plan llmq plan returns among fleets of equal price",
    items=(),
    section="beyond",
    extends=("Theorem 1",),
    domain="every planner grid whose cheapest feasible fleets tie on price",
    evaluates=(
        Points(
            "the planner's grid for Llama-2-70B on the H100 (TP 2 and 4, vLLM and "
            "Sarathi-Serve): fleets of 8 GPUs tied at the least price"
        ),
    ),
    claim="Among feasible fleets of equal price the planner returns the one with the larger headroom "
    "(then the family's label), as its docstrings state.",
    method="Run stability.planner.search.search on the grid of beyond.planner_prices with a runner "
    "whose every replicate is stable and meets the SLO (every fleet feasible), and compare its "
    "plan with the rule applied to the candidates' prices and utilisations: least price, then "
    "least utilisation, then label.",
)
def beyond_planner_tie_break(fast: bool) -> Result:
    from stability.planner.search import SearchOptions, search

    grid = plan_grid()
    spec = plan_spec()
    res = search(
        spec,
        FeasibleRunner(tuple(s.key for s in spec.slo.limits)),
        SearchOptions(n_requests=10, seeds=2, max_seeds=2),
        grid,
    )
    return judge_tie_break(grid.kept, (res.best.candidate.family.label, res.best.candidate.r))
