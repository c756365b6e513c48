"""Tests written for generated mutants that the module tests left alive
(benchmarks/generated_mutants.py; the mutant's id is named in each test).

Each compares against an independent statement of what the code must do.
"""

import numpy as np
from numba import njit

from stability.sim import engine


@njit
def log_sizes(st):
    """(rows, iteration rows) of a state's batch log."""
    return st.b_start.size, st.it_req.size


def test_grow_log_doubles_both_logs_past_their_floors():
    """``grow_log`` doubles the batch log's rows and its iteration rows; the floors (1,024 rows,
    4,096 iterations) only lift a smaller log. A log already past a floor that did not double
    could not take the next batch, and ``run_loop`` would ask it to grow forever.

    Kills ``stability/sim/engine.py:87:63:ReplaceBinaryOperator_Mul_BitAnd:2``
    (``2 * st.it_req.size`` -> ``2 & st.it_req.size``), which no engine test reached: their logs
    never grew past 4,096 iterations."""
    rec = engine.Recording(detail=True, log=True, log_rows=2048)
    st = engine.new_state(np.array([0.0]), np.array([4]), np.array([2]), recording=rec)
    rows, items = log_sizes(st)
    assert rows >= 1024 and items >= 4096  # both past their floors
    engine.grow_log(st)
    assert log_sizes(st) == (2 * rows, 2 * items)


def test_early_stop_skips_only_families_that_cannot_win(monkeypatch):
    """Early stopping drops a family only when its cheapest kept candidate costs at least the best
    plan so far; a family whose candidates straddle the best's price must still be searched. With
    every simulation replaced by a stipulated feasibility (a family's candidates feasible from a
    chosen r on), the search's best must be brute force's cheapest feasible candidate.

    Kills ``stability/planner/search.py:404:25:NumberReplacer:53`` (``cands[0]`` -> ``cands[-1]``:
    the test of the family's most expensive candidate), which stopped the search before a family
    holding a cheaper plan; the planner's tests never had such a family."""
    from stability.planner import search as plan_search
    from stability.planner.grid import build_grid
    from stability.planner.slo import parse_slo
    from stability.planner.spec import PlanSpec

    spec = PlanSpec(
        rate=1.0,
        workload="uniform:64-320,8-40",
        slo=parse_slo("ttft_p50=0.1,tbt_p99=0.1"),
        gpus=("l40s",),
        schedulers=("sarathi", "rad"),
        r_min=1,
        r_max=4,
    )
    grid = build_grid(spec)
    by_family: dict = {}
    for c in grid.kept:
        by_family.setdefault(c.family, []).append(c)
    first = min(by_family, key=lambda f: (min(c.usd_per_hour for c in by_family[f]), f.label))
    need = {f: max(c.r for c in cs) if f == first else min(c.r for c in cs) for f, cs in by_family.items()}
    feasible = [c for c in grid.kept if c.r >= need[c.family]]
    cheapest = min(c.usd_per_hour for c in feasible)
    first_best = max(c.usd_per_hour for c in by_family[first])
    # the case under test: a later family whose cheapest beats the first family's plan while its
    # dearest does not
    assert any(
        min(c.usd_per_hour for c in cs) < first_best <= max(c.usd_per_hour for c in cs)
        for f, cs in by_family.items()
        if f != first
    )

    def replicate(runner, tasks, slo, max_seeds):
        result = {"replicates": [], "shorter_runs": 0, "lengthened": 0}
        return [(result, plan_search.Judgement(r >= need[fam], (), True)) for fam, r in tasks]

    monkeypatch.setattr(plan_search, "plan_task", lambda spec, fam, r, *args, **kwargs: (fam, r))
    monkeypatch.setattr(plan_search, "replicate", replicate)
    res = plan_search.search(spec, None, plan_search.SearchOptions(parallel=1), grid)
    assert res.best.candidate.usd_per_hour == cheapest


def test_the_count_of_batches_not_optimally_tiled_does_not_depend_on_the_unit_of_time():
    """A batch is counted as not optimally tiled when its tiling waste exceeds a tolerance relative
    to its time, so the count is a property of the schedule, not of the unit of time: the same run
    on a GPU 10^12 times faster (every rate times 10^12, arrivals 10^12 times closer) makes the same
    batches and counts the same ones, in the fast path and with every batch recorded.

    Kills ``stability/sim/batches.py:258:21:ReplaceBinaryOperator_Mul_Mod:15``
    (``1e-12 * t_lin(ct, na)`` -> ``1e-12 % t_lin(ct, na)``: an absolute tolerance of 10^-12 s),
    under which the faster GPU's decode batches, whose waste is below 10^-12 s, stop counting."""
    import dataclasses

    from stability.sim.gpu import RunOptions, run_gpu
    from stability.sim.registry import get_scheduler
    from tests.toys import toy_cost_model

    cm = toy_cost_model("toy4", "paper")
    assert (cm.overhead_s, cm.lm_out_s, cm.attention_call_s) == (0.0, 0.0, 0.0)  # only rates set time
    rng = np.random.default_rng(3)
    gaps, L_P, L_D = rng.exponential(2e-3, 60), rng.integers(1, 60, 60), rng.integers(1, 20, 60)
    sch = get_scheduler("rad")

    def counters(k, detail):
        fast = dataclasses.replace(cm, mu=cm.mu * k, mu_gemv=cm.mu_gemv * k, mu_nLin=cm.mu_nLin * k)
        run = run_gpu(
            fast,
            sch,
            sch.make_params(fast, n=3),
            np.cumsum(gaps) / k,
            L_P,
            L_D,
            options=RunOptions(detail=detail),
        )
        return run.counters["n_batch"], run.counters["n_not_opt"]

    for detail in (False, True):
        n_batch, n_not_opt = counters(1.0, detail)
        assert 0 < n_not_opt < n_batch
        assert counters(1e12, detail) == (n_batch, n_not_opt)


def test_plan_json_restates_the_parallel_degrees_searched():
    """``plan.json``'s ``spec`` restates the tensor- and expert-parallel degrees the search was
    given, or "auto" where none was given (the planner then chooses them).

    Kills ``stability/planner/report.py:302:34:ReplaceOrWithAnd:2`` (``list(s.ep) or "auto"`` ->
    ``list(s.ep) and "auto"``: ``[]`` without degrees, "auto" with them), which no planner test
    read back."""
    from types import SimpleNamespace

    from stability.planner.report import to_json
    from stability.planner.slo import parse_slo
    from stability.planner.spec import PlanSpec

    def spec_json(**given):
        spec = PlanSpec(
            rate=1.0, workload="uniform:64-320,8-40", slo=parse_slo("ttft_p50=0.1"), gpus=("l40s",), **given
        )
        options = SimpleNamespace(n_requests=1, seeds=2, max_seeds=8)
        grid = SimpleNamespace(prices={}, one_gpu={})
        res = SimpleNamespace(spec=spec, options=options, counts={}, grid=grid, below_best=lambda: None)
        return to_json(res, 0.0, [])["spec"]

    assert (spec_json()["tp"], spec_json()["ep"]) == ("auto", "auto")
    given = spec_json(models=("qwen3-30b-a3b",), tp=(1, 2), ep=(1, 2))
    assert (given["tp"], given["ep"]) == ([1, 2], [1, 2])


def test_expert_parallel_degrees_naming_1_keep_the_tensor_parallel_families():
    """``families_of`` gives a mixture of experts its TP families at EP 1 where ``spec.ep`` is
    empty or names 1, and its EP families at TP 1 for the degrees above 1; so EP (1, 2) is the
    union of EP (1,) and EP (2,).

    Kills ``stability/planner/grid.py:251:42:NumberReplacer:29`` (``1 in spec.ep`` ->
    ``0 in spec.ep``), which dropped the EP 1 families whenever degrees were given."""
    from stability.planner.grid import families_of
    from stability.planner.slo import parse_slo
    from stability.planner.spec import PlanSpec

    def pairs(ep):
        spec = PlanSpec(
            rate=1.0,
            workload="uniform:64-320,8-40",
            slo=parse_slo("ttft_p50=0.1"),
            gpus=("h100",),
            models=("qwen3-30b-a3b",),
            tp=(1, 2),
            ep=ep,
            r_max=8,
        )
        return {(f.tp, f.ep) for f in families_of(spec)}

    one, two, both = pairs((1,)), pairs((2,)), pairs((1, 2))
    assert one and all(e == 1 for _, e in one) and two and all(e == 2 for _, e in two)
    assert both == one | two


def test_distserve_long_set_completing_between_sparse_hand_offs():
    """A DistServe decode node whose set holds ``LONG_SET`` entries or more while a request
    completes before the next hand-off, several batches away, gives the reference's results
    (``tests/reference_sim.py``, Algorithm 5 batch by batch). There a run of the engine's long-set
    path ends at the first completion, as every run of one decode per entry does.

    Kills ``stability/sim/batches.py:275:20:ReplaceComparisonOperator_Lt_Is:8``
    (``d_rem[q] < k`` -> ``d_rem[q] is k``, which numba takes as ``==``: the run's k stays at its
    cap), which the engine tests left alive: their long sets met a hand-off before any completion."""
    from stability.sim.cluster import run_cluster
    from stability.sim.engine import LONG_SET
    from stability.sim.gpu import RunOptions
    from stability.sim.registry import get_scheduler
    from stability.sim.routing import Cluster, Requests
    from tests import reference_sim as ref
    from tests.test_schedulers_vs_reference import assert_close
    from tests.toys import toy_cost_model

    cm = toy_cost_model("toy4", "paper")
    rng = np.random.default_rng(2)
    m = 400
    L_P, L_D = rng.integers(1, 17, size=m + 4), rng.integers(20, 61, size=m + 4)
    burst, _, _ = ref.distserve(cm, np.zeros(m), L_P[:m], L_D[:m], 1, 1)
    span = max(r.finish for r in burst)
    arrival = np.concatenate([np.zeros(m), span * np.array([0.2, 0.4, 0.6, 0.8])])  # sparse hand-offs
    sch = get_scheduler("distserve")
    p = sch.make_params(cm, prefill_nodes=1, prefill_mode="whole")
    cls = np.zeros(arrival.size, dtype=np.int64)
    _, runs = run_cluster(
        cm,
        sch,
        p,
        Requests(arrival, L_P, L_D, cls),
        Cluster(2, "round_robin", np.random.default_rng(0)),
        RunOptions(),
    )
    reqs, _, dec = ref.distserve(cm, arrival, L_P, L_D, 1, 1, "round_robin", "whole", p.chunk)
    last = max(r.first for r in reqs)  # the last hand-off (instantaneous transfers)
    early = [r.finish for r in reqs if r.finish < last]
    assert any(sum(r.first <= c < r.finish for r in reqs) >= LONG_SET for c in early)  # the path is reached
    run = runs[1]
    assert_close(run.t_finish, [r.finish for r in reqs])
    assert_close(run.t_first, [r.first for r in reqs])
    assert run.counters["n_batch"] == dec[0].batches


def test_sarathi_batch_log_is_the_reference_whatever_its_first_size():
    """Sarathi-Serve's batch log, started at any size (it grows when a batch would not fit), holds
    each batch's decodes and prefill chunks as the reference runs them (``tests/reference_sim.py``,
    ``SarathiScheduler._schedule``). A batch may be written only after the log has room for
    every item it can hold: one a decode, one a partial prefill's chunk, one a new admission.

    Kills ``stability/schedulers/sarathi.py:191:41:ReplaceBinaryOperator_Add_Sub:1``
    (``st.nd + st.np`` -> ``st.nd - st.np`` in that room check: a batch with partial prefills
    could overrun the log, its last items lost when the log grows), which the scheduler tests
    left alive: none started a log small enough to fill while a prompt was half prefilled."""
    from stability.sim.gpu import RunOptions, run_gpu
    from stability.sim.registry import get_scheduler
    from tests import reference_sim as ref
    from tests.toys import toy_cost_model

    cm = toy_cost_model("toy4", "paper")
    rng = np.random.default_rng(3)
    m, chunk, seqs = 40, 64, 8
    arrival = np.cumsum(rng.exponential(0.02, size=m))
    L_P, L_D = rng.integers(100, 400, size=m), rng.integers(5, 30, size=m)
    sim = ref.sarathi(cm, arrival, L_P, L_D, chunk, seqs)
    want = [sorted([(j, c) for j, _, c in pre] + [(j, 0) for j, _ in dec]) for _, _, pre, dec in sim.batches]
    sch = get_scheduler("sarathi")
    p = sch.make_params(cm, chunk_size=chunk, max_num_seqs=seqs)
    for rows in range(2, 2 + sum(len(b) for b in want) // 4):
        run = run_gpu(cm, sch, p, arrival, L_P, L_D, options=RunOptions(detail=True, log=True, log_rows=rows))
        got = [[] for _ in want]
        for k, j, c in zip(run.items["batch"], run.items["request"], run.items["c"], strict=True):
            got[k].append((int(j), int(c)))
        assert [sorted(g) for g in got] == want, rows
