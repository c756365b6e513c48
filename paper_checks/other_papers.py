"""Other papers: the throughput-optimality claims of Li, Dai and Peng (2025).

(Nie, Si and Zhou's KV-memory threshold: :mod:`paper_checks.other_papers_kv`; the exclusive- versus
mixed-batching crossover of Zhang et al.: :mod:`paper_checks.other_papers_batching`; Ao, Luo,
Simchi-Levi and Wang's fluid region under KV memory and WAIT: :mod:`paper_checks.other_papers_wait`;
Lin, Ding, Han and Zhang's many-GPU fluid LP of prefill and decode: :mod:`paper_checks.other_papers_lp`;
all registered on import of this module.)

(Theorems 1-2 of Bari, Hegde, de Veciana under a per-batch overhead are the library's own
extensions: :mod:`paper_checks.beyond_paper`.)

* ``other.ldp_work_conserving``: Li, Dai, Peng (2025): with a batch-time law
  ``t(b) = c + a ceil(b / b0)`` and token budget ``b``, work-conserving policies are stable up
  to ``lam (m_p + m_d) < b / t_b``. The closed form is set against the certified bound and
  against the saturated throughput of Sarathi-Serve (stall-free batching fills the budget) with
  the law given only in TOML.
* ``other.ldp_unstable_below``: their remark that prefill-first scheduling without chunking
  (vLLM v0) and request-level batching can be unstable below that capacity: their saturated
  throughputs on the same instance, wholly below it, exhibit unstable rates below capacity.

Each check is a judge over numbers it is given (the ``judge_*`` functions) plus the computation
of those numbers; tests feed the judges wrong bounds and see both verdicts.

References
----------
Li, Dai, Peng (2025),
"Throughput-optimal scheduling algorithms for LLM inference and AI agents", arXiv:2504.07347
(the stability condition ``lam (m_p + m_d) < b / t_b``, the staircase batch time, and the
instability of non-work-conserving policies). Agrawal et al. (2024), Sarathi-Serve.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace

from paper_checks import (  # noqa: F401  (register)
    other_papers_batching,
    other_papers_kv,
    other_papers_lp,
    other_papers_wait,
)
from paper_checks.evidence import Points
from paper_checks.margins import EXACT, blind_spot, least_margin, ratio_margin
from paper_checks.registry import Result, Verdict, register
from theory.capacity import capacity_bound
from theory.law_files import StaircaseLawFile

# Li, Dai, Peng's staircase instance
LDP_C, LDP_A, LDP_B0, LDP_BUDGET = 0.003, 0.002, 64, 512
LDP_WORKLOAD = "uniform:64-448,16-256"
LDP = StaircaseLawFile("ldp", "ldp-noattn", c=LDP_C, a=LDP_A, b0=LDP_B0, base_gpu="a100",
                       note="Li, Dai, Peng (2025)'s batch time c + a ceil(tokens / b0), attention off "
                            "(paper_checks)")
LDP_TOML = LDP.toml()
RTOL = 0.01  # attainment tolerance: max(1%, the interval's half-width)


# --- Li, Dai, Peng (2025) ---------------------------------------------------------------------------


def ldp_closed_form(w) -> float:
    """Li, Dai, Peng's capacity ``(b / t_b) / (m_p + m_d)`` in req/s for :data:`LDP_TOML`'s law."""
    t_b = LDP_C + LDP_A * -(-LDP_BUDGET // LDP_B0)
    return LDP_BUDGET / t_b / w.expect(w.L_P + w.L_D)


def _ldp_runs(schedulers: tuple, fast: bool) -> tuple[float, float, dict]:
    """The certified bound with the budget, the closed form, and saturated runs of ``schedulers``
    (``(name, options)``) at 1.5 x the bound: ``{name: (mean, low, high)}`` (req/s)."""
    from stability.attain import SAT_LOAD, saturated_runs
    from stability.sim.simulate import Scenario, cost_model_of, workload_of

    with tempfile.TemporaryDirectory() as tmp:
        path = LDP.write(tmp)
        base = Scenario(gpu=LDP.gpu_key, gpu_file=path, model=LDP.model_key, model_file=path,
                        workload=LDP_WORKLOAD, rate=1.0, load=None, n_requests=3000 if fast else 12000)
        cm = cost_model_of(base)
        w = workload_of(base, cm)
        bound = capacity_bound(cm, w, b_max=LDP_BUDGET).bound
        runs = {name: saturated_runs(replace(base, scheduler=name, options=opts, rate=SAT_LOAD * bound),
                                     3)["count"] for name, opts in schedulers}
    return bound, ldp_closed_form(w), runs


WORK_CONSERVING = (("sarathi", (("chunk_size", LDP_BUDGET), ("max_num_seqs", LDP_BUDGET),
                               ("memory", False))),)
NOT_WORK_CONSERVING = (("vllm", (("max_num_batched_tokens", LDP_BUDGET), ("memory", False))),
                       ("request_level", ()))


def judge_work_conserving(claimed: float, certified: float, measured: dict) -> Result:
    """PASS if ``claimed`` does not exceed the certified bound and every work-conserving policy's
    saturated throughput ``(mean, low, high)`` is within max(RTOL, half-width) of it; else FAIL."""
    case = {"law": f"c + a ceil(tau / b0), c = {LDP_C}, a = {LDP_A}, b0 = {LDP_B0}, attention off",
            "token_budget": LDP_BUDGET, "workload": LDP_WORKLOAD, "claimed req/s": claimed,
            "certified req/s": certified, "saturated req/s (mean, low, high)": measured}
    bad = []
    if claimed > certified * (1 + 1e-9):
        bad.append(f"claimed {claimed:.6g} exceeds the certified bound {certified:.6g}")
    for name, (mean, low, high) in measured.items():
        if abs(mean - claimed) > max(RTOL * claimed, (high - low) / 2):
            bad.append(f"{name} sustains {mean:.6g} [{low:.6g}, {high:.6g}], not {claimed:.6g}")
    if bad:
        return Result(Verdict.FAIL, "; ".join(bad), counterexample=case)
    return Result(Verdict.PASS, f"b / t_b / (m_p + m_d) = {claimed:.6g} req/s = certified bound "
                                f"{certified:.6g}; Sarathi-Serve at the budget sustains it "
                                + ", ".join(f"{m[0]:.6g}" for m in measured.values()),
                  coverage=f"staircase law from TOML, budget {LDP_BUDGET}, {LDP_WORKLOAD}, 3 replicates",
                  evidence=case, margin=EXACT)  # the closed form equals the certified bound


@register("other.ldp_work_conserving", level="sample",
          domain="every batch-time law c + a ceil(b / b0), token budget and workload",
          evaluates=(Points("c = 3 ms, a = 2 ms, b0 = 64, b = 512, uniform lengths, 3 seeded replicates"),),
          section="other",
          location="Other papers: Li, Dai, Peng (2025), throughput "
                                                  "optimality of work-conserving policies",
          items=(),
          claim="With batch time t(b) = c + a ceil(b / b0) and token budget b, work-conserving policies "
                "are stable for lambda (m_p + m_d) < b / t_b: that is the capacity.",
          method="Their closed form against theory.capacity's certified bound (same law, from TOML, "
                 "attention off) and the saturated throughput of Sarathi-Serve with budget b (3 seeded "
                 "runs at 1.5 x capacity, fixed-window estimate, 95% CI); uniform lengths, b = 512, b0 = 64.")
def other_ldp_work_conserving(fast: bool) -> Result:
    bound, closed, runs = _ldp_runs(WORK_CONSERVING, fast)
    return judge_work_conserving(closed, bound, runs)


def judge_unstable_below(capacity: float, measured: dict) -> Result:
    """PASS if every policy's saturated throughput interval lies wholly below ``capacity`` (rates
    between it and the capacity are unstable for that policy); else FAIL."""
    case = {"capacity req/s": capacity, "saturated req/s (mean, low, high)": measured,
            "law": f"c + a ceil(tau / b0), c = {LDP_C}, a = {LDP_A}, b0 = {LDP_B0}, attention off",
            "token_budget": LDP_BUDGET, "workload": LDP_WORKLOAD}
    reach = [n for n, (_, _, high) in measured.items() if high >= capacity]
    if reach:
        return Result(Verdict.FAIL, f"{', '.join(reach)} reach the capacity {capacity:.6g}: no instability "
                                    "below it on this instance", counterexample=case)
    return Result(Verdict.PASS, "unstable below capacity: " + ", ".join(
        f"{n} saturates at {m[0] / capacity:.3f} x capacity (CI up to {m[2]:.4g} req/s: rates from there "
        f"to {capacity:.4g} outgrow it)" for n, m in measured.items()),
                  coverage=f"vLLM v0 (prefill-first, no chunking) and request-level batching, budget "
                           f"{LDP_BUDGET}, {LDP_WORKLOAD}, 3 replicates", evidence=case,
                  margin=(m := least_margin(ratio_margin(hi, capacity) for _, _, hi in measured.values())),
                  blind_spot=blind_spot(m, "how far below the capacity the policies saturate"))


@register("other.ldp_unstable_below", level="sample",
          domain="every instance where the policies are unstable below capacity",
          evaluates=(Points("the instance of other.ldp_work_conserving, 3 seeded replicates per policy"),),
          section="other",
          location="Other papers: Li, Dai, Peng (2025), instability of "
                                                 "non-work-conserving policies",
          items=(),
          claim="Prefill-first scheduling without chunking (vLLM) and request-level batching can be "
                "unstable at rates below the capacity b / t_b / (m_p + m_d).",
          method="Saturated throughput of vLLM v0 (budget b, no chunking) and request-level batching on "
                 "the staircase instance of other.ldp_work_conserving: an interval wholly below the "
                 "capacity exhibits unstable rates below it.")
def other_ldp_unstable_below(fast: bool) -> Result:
    _, closed, runs = _ldp_runs(NOT_WORK_CONSERVING, fast)
    return judge_unstable_below(closed, runs)
