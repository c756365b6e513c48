"""Other papers: the many-GPU fluid LP of Lin, Ding, Han and Zhang against llmq's disaggregated engine.

``other.ldhz_pd_lp``. Lin, Ding, Han, Zhang (arXiv:2602.02987) model a cluster of ``n`` GPUs
serving request classes ``i`` (prompt ``P_i`` tokens, output ``D_i`` tokens). A GPU is in *mixed*
mode (one prefill, advanced a chunk of ``C`` tokens per iteration, beside up to ``B - 1`` decodes;
an iteration lasts ``tau_mix(C) = alpha + beta C``) or in *solo* mode (up to ``B`` decodes; an
iteration lasts ``tau_solo = c``). The class rates follow: prefill ``mu_p,i = C / (P_i
tau_mix)``, decode on a mixed GPU ``mu_m,i = 1 / (D_i tau_mix)``, decode on a solo GPU ``mu_s,i
= 1 / (D_i tau_solo)``; with ``x_i`` prefills, ``y_m,i`` mixed and ``y_s,i`` solo decodes in
service the capacity constraints are ``sum x_i <= n``, ``sum y_m,i <= (B - 1) sum x_i`` and ``sum
y_s,i <= B (n - sum x_i)`` (a GPU holding a prefill is mixed, the others solo). Their many-GPU
fluid limit is solved by steady-state linear programs (abstract). What is read from where: the
abstract from arXiv; the model above (modes, iteration times, rates, capacity constraints) from a
public summary of the paper (themoonlight.io, "Literature Review" of arXiv:2602.02987), not from
its body, which we could not read. The program here (:func:`fluid_lp`) is that fluid's steady state at
capacity along a class mix ``p``: maximize the throughput ``Lam`` subject to the flow balances
``x_i mu_p,i = Lam p_i`` (every arrival is prefilled) and ``y_m,i mu_m,i + y_s,i mu_s,i = Lam
p_i`` (every prefilled request decodes), the capacity constraints, and ``x, y >= 0``. Their
revenue objective, abandonment (rate ``theta_i``) and SLI constraints do not enter: at capacity no
request abandons and the objective is the throughput, which is what a stability boundary measures.

Mapping to llmq. llmq's disaggregated engine (:mod:`stability.sim.disaggregated`, DistServe's
Algorithm 5, what ``llmq region --gpus-r`` simulates for ``distserve``) runs ``r_p`` prefill nodes
and ``r - r_p`` decode nodes. A prefill node in ``prefill_mode = "chunked"`` advances one request
at a time in chunks of ``C`` tokens: a mixed GPU that carries no decodes. A decode node with
``decode_cap = B`` runs batches of up to ``B`` decodes, refilled as requests finish: a solo GPU.
So a split is the LP with the mixed GPUs' decode slots set to 0 (``mixed_slots = 0`` in place of
``B - 1``) and ``sum x_i <= r_p``, ``sum y_s,i <= B (r - r_p)``; its optimum is the closed form
``min(r_p / sum_i p_i P_i tau_mix / C, B (r - r_p) / sum_i p_i D_i tau_solo)``, and leaving the
number of mixed GPUs free gives the LP's optimal split ``sum x_i`` (fractional). The decode node
runs ``L^D`` decode iterations per request (the prefill node emits the first token, and llmq's
``L^D`` counts the decodes after it), so ``D_i = L^D``; were the paper's ``D_i`` to count the first
token too, its decode rates would be ``L^D / (L^D + 1)`` of these (the summary does not say).

The batch-time law is the one the simulator runs: Li, Dai and Peng's staircase ``c + a ceil(tau /
b0)`` stated in TOML (:data:`LAW_TOML`), attention off. A chunk of ``C = 2 b0`` tokens then lasts
``c + 2 a``: the paper's ``alpha + beta C`` with ``alpha = c``, ``beta = a / b0``; a batch of up to
``B <= b0`` decodes lasts ``c + a`` at any position: the paper's constant ``tau_solo``. Both are
read from the cost model (:func:`law_times`), which refuses a law that does not have that form on
the workload. Prompts are multiples of ``C``, so that a prefill takes ``P_i / C`` chunks as the
fluid assumes.

The check: on :data:`GPUS` GPUs and the two-class :data:`WORKLOAD`, the LP's capacity of every
split ``r_p = 1 .. r - 1`` against the saturated throughput of the disaggregated engine with that
split (:data:`SAT_LOAD` times the LP's capacity offered; completions per second over the window
of :func:`stability.attain.window_throughput`, as ``llmq region`` estimates a boundary; seeded
replicates, a Student-t interval): each within max(:data:`RTOL`, the
interval's half-width), and the LP's best integer split is the engine's best. The mixed-mode
optimum of the same LP (``mixed_slots = B - 1``, ``tau_mix`` of a chunk beside ``B - 1`` decodes
under llmq's law) is reported beside it, not simulated: llmq's disaggregated engine has no mixed
GPUs.

References
----------
Lin, Ding, Han, Zhang (2026), "Large-Scale LLM Inference with Heterogeneous Workloads:
Prefill-Decode Contention and Asymptotically Optimal Control", arXiv:2602.02987 (the model: modes,
iteration times, class rates, capacity constraints; the abstract: the fluid approximation solved by
steady-state linear programs); the model's equations as themoonlight.io's review of it states
them. Li, Dai, Peng (2025), arXiv:2504.07347 (the staircase law). Bari,
Hegde, de Veciana (2025), Algorithm 5 (DistServe); Zhong et al. (2024), DistServe.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

from paper_checks.evidence import Points
from paper_checks.margins import least_margin, ratio_margin
from paper_checks.registry import Result, Verdict, register
from theory.errors import FieldError
from theory.law_files import StaircaseLawFile

LAW_C, LAW_A, LAW_B0 = 0.004, 0.001, 4096  # the staircase c + a ceil(tau / b0), seconds and tokens
LAW_TOML = StaircaseLawFile("ldhz", "ldhz-noattn", c=LAW_C, a=LAW_A, b0=LAW_B0, overhead_s=0.0,
                            note="Li, Dai, Peng's staircase law c + a ceil(tau / b0), attention off "
                                 "(other_papers_lp.py)").toml()
CHUNK = 2 * LAW_B0  # C: a prefill chunk lasts c + 2 a (alpha + beta C)
BATCH = 64  # B: decodes per solo GPU (the decode nodes' decode_cap)
GPUS = 4  # r
WORKLOAD = "mix:0.5*deterministic:16384,64+0.5*deterministic:8192,512"  # prompts multiples of C
RTOL = 0.01  # least tolerance: max(1%, the interval's half-width)
SAT_LOAD = 1.5  # offered load, times the LP's capacity of the split


@dataclass(frozen=True)
class FluidModel:
    """The paper's per-class data and iteration times.

    Attributes
    ----------
    tau_mix, tau_solo : float
        Seconds of one iteration of a mixed GPU (a chunk of ``chunk`` tokens) and of a solo GPU.
    chunk, batch : int
        ``C`` and ``B``.
    mixed_slots : int
        Decodes a mixed GPU carries beside its prefill: ``B - 1`` in the paper, 0 on a prefill
        node of a disaggregated cluster.
    prompts, outputs, shares : tuple of float
        ``P_i``, ``D_i`` and the class mix ``p_i`` (summing to 1).
    """

    tau_mix: float
    tau_solo: float
    chunk: int
    batch: int
    mixed_slots: int
    prompts: tuple
    outputs: tuple
    shares: tuple

    def rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mu_p, mu_m, mu_s)`` per class, per second (module docstring)."""
        P, D = np.asarray(self.prompts, dtype=float), np.asarray(self.outputs, dtype=float)
        return self.chunk / (P * self.tau_mix), 1 / (D * self.tau_mix), 1 / (D * self.tau_solo)


def fluid_lp(m: FluidModel, gpus: float, prefill_gpus: float | None = None) -> dict:
    """The steady-state fluid LP at capacity (module docstring), solved by ``scipy.optimize.linprog``.

    Parameters
    ----------
    m : FluidModel
    gpus : float
        ``n``.
    prefill_gpus : float, optional
        A fixed split: at most this many mixed GPUs and ``n`` minus it solo GPUs. None: the split is
        free (a GPU is mixed when it holds a prefill).

    Returns
    -------
    dict
        ``Lam`` (req/s), ``x``, ``y_m``, ``y_s`` (per class), ``mixed_gpus`` (``sum x_i``).
    """
    mu_p, mu_m, mu_s = m.rates()
    p = np.asarray(m.shares, dtype=float)
    k = p.size
    one, zero = np.ones(k), np.zeros(k)
    # variables: x (k), y_m (k), y_s (k), Lam
    a_eq = np.block(
        [
            [np.diag(mu_p), np.zeros((k, 2 * k)), -p[:, None]],
            [np.zeros((k, k)), np.diag(mu_m), np.diag(mu_s), -p[:, None]],
        ]
    )
    rows = [np.concatenate([-m.mixed_slots * one, one, zero, [0.0]])]  # sum y_m <= slots sum x
    if prefill_gpus is None:
        rows += [
            np.concatenate([one, zero, zero, [0.0]]),  # sum x <= n
            np.concatenate([m.batch * one, zero, one, [0.0]]),
        ]  # sum y_s <= B (n - sum x)
        b_ub = [0.0, gpus, m.batch * gpus]
    else:
        rows += [np.concatenate([one, zero, zero, [0.0]]), np.concatenate([zero, zero, one, [0.0]])]
        b_ub = [0.0, prefill_gpus, m.batch * (gpus - prefill_gpus)]
    res = linprog(
        np.concatenate([np.zeros(3 * k), [-1.0]]),
        A_ub=np.array(rows),
        b_ub=b_ub,
        A_eq=a_eq,
        b_eq=np.zeros(2 * k),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"the fluid LP did not solve: {res.message}")
    x, y_m, y_s = res.x[:k], res.x[k : 2 * k], res.x[2 * k : 3 * k]
    return {
        "Lam": float(res.x[-1]),
        "x": x.tolist(),
        "y_m": y_m.tolist(),
        "y_s": y_s.tolist(),
        "mixed_gpus": float(x.sum()),
    }


def law_times(cm, w, chunk: int, batch: int) -> tuple[float, float, float]:
    """``(tau_mix, tau_solo, tau_mix beside batch - 1 decodes)`` of llmq's law (:func:`theory.cost.T_batch`).

    Raises :class:`theory.errors.FieldError` where the law has not the paper's form on workload
    ``w``: a chunk's time depending on its offset in the prompt, or a decode batch's on its size (1
    to ``batch``) or its positions, or a prompt not a multiple of ``chunk``.
    """
    from theory.cost import Batch, T_batch

    if np.any(w.L_P % chunk):
        raise FieldError("L_P", w.L_P.tolist(), f"prompt lengths that are multiples of the chunk {chunk}")
    chunks = {T_batch(cm, Batch.of(prefill=[(i, chunk)])) for P in w.L_P for i in range(1, int(P), chunk)}
    lo, hi = int(w.L_P.min()) + 1, int((w.L_P + w.L_D).max())
    solo = {T_batch(cm, Batch.of(decode=[pos] * n)) for pos in (lo, hi) for n in (1, batch)}
    if len(chunks) != 1 or len(solo) != 1:
        times = {"chunk times": sorted(chunks), "decode batch times": sorted(solo)}
        expected = f"one time per chunk of {chunk} tokens and one per batch of 1 to {batch} decodes"
        raise FieldError("batch-time law", times, expected)
    mixed = T_batch(cm, Batch.of(prefill=[(1, chunk)], decode=[hi] * (batch - 1)))
    return chunks.pop(), solo.pop(), mixed


def law_scenario(path: Path, workload: str = WORKLOAD, **fields):
    """A scenario on the staircase law of the TOML file ``path`` (GPU ``ldhz``, model
    ``ldhz-noattn``), at rate 1 unless ``fields`` say otherwise."""
    from stability.sim.simulate import Scenario

    return Scenario(**{"gpu": "ldhz", "gpu_file": str(path), "model": "ldhz-noattn",
                       "model_file": str(path), "workload": workload, "rate": 1.0, "load": None,
                       **fields})


def lp_instance(transform=None) -> tuple[FluidModel, dict]:
    """The fluid model of :data:`WORKLOAD` on :data:`LAW_TOML`'s law (``transform(model)``, if
    given, changes it first: how tests misstate it) and the LP's answers: ``splits`` ({r_p: Lam}),
    ``optimum`` (free split), ``best`` (the best integer split), ``mixed`` (the paper's LP with
    ``B - 1`` decodes beside each chunk)."""
    from stability.sim.simulate import cost_model_of, workload_of

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ldhz.toml"
        path.write_text(LAW_TOML)
        sc = law_scenario(path)
        cm = cost_model_of(sc)
        w = workload_of(sc, cm)
        tau_mix, tau_solo, tau_mixed_batch = law_times(cm, w, CHUNK, BATCH)
    m = FluidModel(
        tau_mix, tau_solo, CHUNK, BATCH, 0, tuple(w.L_P.tolist()), tuple(w.L_D.tolist()), tuple(w.p.tolist())
    )
    if transform is not None:
        m = transform(m)
    splits = {rp: fluid_lp(m, GPUS, rp)["Lam"] for rp in range(1, GPUS)}
    full = replace(m, tau_mix=tau_mixed_batch, mixed_slots=BATCH - 1)
    return m, {
        "splits": splits,
        "optimum": fluid_lp(m, GPUS),
        "best": max(splits, key=splits.get),
        "mixed": fluid_lp(full, GPUS),
    }


def simulate_splits(claimed: dict, fast: bool, law: str = LAW_TOML) -> dict:
    """Saturated throughput ``(mean, low, high)`` req/s of the disaggregated engine for every split
    of ``claimed`` ({r_p: capacity}), offered :data:`SAT_LOAD` times its claimed capacity, on the
    batch-time law of the TOML text ``law`` (its GPU ``ldhz`` and model ``ldhz-noattn``; another
    text than :data:`LAW_TOML` is how tests perturb the engine under check)."""
    from stability.attain import window_throughput
    from stability.sim.disaggregated import completing_nodes
    from stability.sim.simulate import simulate
    from theory.stats import t_interval

    replicates, n = (4, 12000) if fast else (6, 40000)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ldhz.toml"
        path.write_text(law)
        for rp, lam in claimed.items():
            opts = (
                ("chunk", CHUNK),
                ("decode_cap", BATCH),
                ("prefill_mode", "chunked"),
                ("prefill_nodes", rp),
            )
            rates = []
            for k in range(replicates):
                sc = law_scenario(
                    path,
                    rate=SAT_LOAD * lam,
                    n_requests=n,
                    seed=k,
                    scheduler="distserve",
                    r=GPUS,
                    options=opts,
                )
                res = simulate(sc)
                rq = res.requests
                m = window_throughput(rq["arrival"], rq["t_finish"], rq["node"], completing_nodes(res.runs))
                rates.append(m["rate"])
            out[rp] = tuple(t_interval(rates, 0.95))
    return {"measured": out, "replicates": replicates, "requests": n}


def judge_splits(lp: dict, sim: dict, model: FluidModel) -> Result:
    """PASS if the LP's capacity of every split is within max(:data:`RTOL`, half-width) of the
    engine's saturated throughput and the LP's best integer split is the engine's; else FAIL."""
    claimed, measured = lp["splits"], sim["measured"]
    case = {
        "law": f"c + a ceil(tau / b0), c = {LAW_C} s, a = {LAW_A} s, b0 = {LAW_B0}, attention off",
        "tau_mix s": model.tau_mix,
        "tau_solo s": model.tau_solo,
        "C": model.chunk,
        "B": model.batch,
        "r": GPUS,
        "workload": WORKLOAD,
        "LP capacity by prefill GPUs req/s": claimed,
        "engine saturated req/s (mean, low, high)": measured,
        "LP optimum (free split)": lp["optimum"],
        "LP best integer split": lp["best"],
        "paper's LP with B - 1 decodes beside each chunk (not simulated)": lp["mixed"],
        "replicates": sim["replicates"],
        "requests": sim["requests"],
    }
    bad, margins = [], []
    for rp, lam in claimed.items():
        mean, low, high = measured[rp]
        tol = max(RTOL * lam, (high - low) / 2)
        if abs(mean - lam) > tol:
            bad.append(
                f"{rp} prefill + {GPUS - rp} decode GPUs: engine {mean:.6g} [{low:.6g}, {high:.6g}] "
                f"req/s, LP {lam:.6g}"
            )
        else:
            margins += [ratio_margin(lam, mean + tol), ratio_margin(lam, mean - tol)]
    engine_best = max(measured, key=lambda rp: measured[rp][0])
    if engine_best != lp["best"]:
        bad.append(f"the engine's best split is {engine_best} prefill GPUs, the LP's {lp['best']}")
    if bad:
        return Result(Verdict.FAIL, "; ".join(bad), counterexample=case)
    text = ", ".join(f"r_p = {rp}: LP {lam:.4g}, engine {measured[rp][0]:.4g}" for rp, lam in claimed.items())
    return Result(
        Verdict.PASS,
        f"{text} req/s; best split {lp['best']} of {GPUS} both ways (LP optimum "
        f"{lp['optimum']['mixed_gpus']:.3g} prefill GPUs, {lp['optimum']['Lam']:.4g} "
        "req/s)",
        coverage=f"{WORKLOAD} on {GPUS} GPUs, every split, C = {model.chunk}, B = {model.batch}, "
        f"staircase law; {sim['replicates']} seeded replicates of {sim['requests']} "
        "requests per split",
        evidence=case,
        margin=least_margin(margins),
    )


@register(
    "other.ldhz_pd_lp",
    level="sample",
    domain="every cluster size, class mix (P_i, D_i, p_i), chunk C, batch B and iteration law "
    "tau_mix = alpha + beta C, tau_solo = c",
    evaluates=(
        Points(
            "4 GPUs, splits 1..3 prefill GPUs, half (16384, 64) and half (8192, 512), "
            "C = 8192, B = 64, staircase law c = 4 ms, a = 1 ms, b0 = 4096; 3 seeded "
            "replicates per split (5 without --quick)"
        ),
    ),
    section="other",
    location="Other papers: Lin, Ding, Han, Zhang (arXiv:2602.02987), the many-GPU fluid LP of "
    "prefill and decode",
    items=(),
    claim="In the many-GPU fluid limit the throughput and the allocation of GPUs to prefill "
    "(mixed) and decode-only (solo) work are those of a steady-state LP over prefills and "
    "decodes in service, with rates mu_p = C / (P tau_mix), mu_s = 1 / (D tau_solo) and "
    "capacities sum x <= n, sum y_s <= B (n - sum x).",
    method="scipy linprog of the LP with no decodes on prefill GPUs (llmq's disaggregated engine) "
    "on llmq's staircase law, for every split of 4 GPUs and free, against the disaggregated "
    "engine's saturated throughput per split (1.5 x the LP's capacity offered, fixed-window "
    "estimate, 95% CI): within max(1%, half-width), and the same best split.",
)
def other_ldhz_pd_lp(fast: bool) -> Result:
    model, lp = lp_instance()
    return judge_splits(lp, simulate_splits(lp["splits"], fast), model)
