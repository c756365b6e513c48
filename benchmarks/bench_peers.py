"""llmq and serQ on the same RAD scenario: simulated requests per second and mean TTFT, one run.

Scenario: serQ's model of RAD (servingQ/serQ, ``examples/papers/bari_rad.sq``; Bari, Hegde,
de Veciana 2025, Algorithm 1 with the cycle parameter n infinite): one GPU, a single
128 x 128 x 128 tile, attention off, a batch of tau tokens lasting ``4000 ceil(tau / 128) + 5 tau``
microseconds, prompts ``128 U{1..8}``, ``min(floor(Exp(mean 200)) + 1, 512)`` decode iterations
after the prefill, Poisson arrivals at 50%, 90% and 99% of the capacity lambda* = 1 / T_bar^R
(Theorem 1).

* llmq expresses the batch time as TOML cost terms (``benchmarks/data/serq_rad.toml``), checked
  against the formula before anything runs, and the workload as an exact pmf; RAD runs with n
  larger than the number of requests (never reached: n infinite).
* serQ (``pyserq``, the ``bench`` extra) runs a program written for it here: in Decode Mode
  (``b_col`` requests decoding, or nothing left to prefill) every running request decodes, else
  only the prefilling ones advance (a 128-token chunk of the oldest) and, with budget left, one
  waiting request is admitted. Its requests generate ``1 +`` the decode iterations tokens (the
  first comes from the prefill).

Printed per load: requests and simulated requests/s of each (CPU seconds of the simulation call,
this process; llmq's on a long run), their ratio, and the mean TTFT of the same number of
requests in each, with a 95% batch-means half-width over 20 windows (serQ's own; llmq's over
requests in arrival order), and whether the two agree (their difference within the root sum of
squares of the half-widths). Both start empty, with no warm-up, so near capacity the mean TTFT
of a finite run depends on its length: it is compared between runs of equal length.

Run from the repository root: ``python benchmarks/bench_peers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOML = ROOT / "benchmarks" / "data" / "serq_rad.toml"
B_COL = 128  # the tile: b_col = b_row = b_red = b_lcm
T_BLOCK_US = 4000  # microseconds per pass over a 128-column block
T_TOKEN_US = 5  # microseconds per token (non-linear operations)
VP_MAX = 8  # prompts are 1 .. VP_MAX blocks of 128 tokens
MEAN_OUT = 200  # mean of the exponential output draw
VD_MAX = 512  # the largest number of decode iterations
WINDOWS = 20  # batch means

# serQ 0.1.6 program (deployment) and workload, rate in requests per microsecond
SERQ_PROGRAM = f"""
let bcol = {B_COL};
fn main() {{
  device gpu {{ }}
  engine E on gpu {{
    tokens cap bcol;
    scheduler {{
      if (running.decoding >= bcol || (waiting.count == 0 && running.count == running.decoding)) {{
        advance running;
      }} else {{
        advance running only (!decoding);
        admit waiting;
      }}
    }}
    worker {{ forward ({T_BLOCK_US} * ceil(batch.tokens / bcol) + {T_TOKEN_US} * batch.tokens); }}
  }}
  server (input, output) {{
    E (input, output);
  }}
}}
"""
SERQ_WORKLOAD = """
workload {{
  arrive poisson({rate!r});
  init {{
    set n = {bcol} * floor(~uniform(1, {vp_end}));
    set o = min(floor(~exp({mean})) + 1, {vd_max}) + 1;
  }}
  send (input: n, output: o);
}}
"""


def cost_model():
    """The scenario's llmq cost model, refused unless its batch times are the formula's."""
    from theory.builder import CostSpec
    from theory.builder import cost_model as build
    from theory.cost import Batch, T_batch

    cm = build(CostSpec("serq_rad", "serq_rad", "paper", gpu_file=str(TOML), model_file=str(TOML)))
    for tau in (1, 127, 128, 129, 1000, 4096):
        want = (T_BLOCK_US * math.ceil(tau / B_COL) + T_TOKEN_US * tau) * 1e-6
        got = T_batch(cm, Batch.of(prefill=[(1, tau)], decode=[]))
        if not math.isclose(got, want, rel_tol=1e-12):
            raise SystemExit(f"{TOML}: a batch of {tau} tokens lasts {got} s, expected {want} s")
    if cm.t_star.t_col != B_COL or cm.t_lcm != B_COL:
        raise SystemExit(f"{TOML}: expected the one tile {B_COL}x{B_COL}x{B_COL}, got {cm.tiles}")
    return cm


def workload():
    """The exact length law: L^P = 128 U{1..8}, L^D = min(floor(Exp(200)) + 1, 512)."""
    from theory.workload import Workload

    q = math.exp(-1.0 / MEAN_OUT)  # P(floor(Exp) >= k + 1 | >= k)
    d = np.arange(1, VD_MAX + 1)
    p_d = (1 - q) * q ** (d - 1)
    p_d[-1] = q ** (VD_MAX - 1)  # every draw of VD_MAX - 1 or more is capped
    lp = B_COL * np.arange(1, VP_MAX + 1)
    LP, LD = np.meshgrid(lp, d, indexing="ij")
    W = np.outer(np.full(VP_MAX, 1.0 / VP_MAX), p_d)
    return Workload.from_pairs("serq_rad", LP.ravel(), LD.ravel(), W.ravel(),
                               notes=("serQ bari_rad.sq lengths",))


def batch_means(x: np.ndarray) -> tuple[float, float]:
    """Mean and 95% batch-means half-width over ``WINDOWS`` equal windows."""
    m = np.array([w.mean() for w in np.array_split(x, WINDOWS)])
    half = stats.t.ppf(0.975, WINDOWS - 1) * m.std(ddof=1) / math.sqrt(WINDOWS)
    return float(x.mean()), float(half)


def run_llmq(cm, w, lam: float, n: int, seed: int) -> tuple[float, float, float]:
    """RAD (n infinite) on ``n`` Poisson arrivals: (req/s, mean TTFT s, half-width s)."""
    from stability.sim.gpu import run_gpu
    from stability.sim.registry import get_scheduler

    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / lam, n))
    L_P, L_D = w.sample(n, rng)
    rad = get_scheduler("rad")
    params = rad.make_params(cm, n=n + 1)
    t = time.process_time()
    run = run_gpu(cm, rad, params, arrival, L_P, L_D)
    seconds = time.process_time() - t
    mean, half = batch_means(run.t_first - arrival)
    return n / seconds, mean, half


def run_serq(lam: float, n: int, seed: int) -> tuple[int, float, float, float]:
    """serQ on Poisson arrivals for ``n / lam`` seconds: (arrivals, req/s, mean TTFT s, half s)."""
    import pyserq

    rate_us = lam * 1e-6
    source = SERQ_WORKLOAD.format(rate=rate_us, bcol=B_COL, vp_end=VP_MAX + 1, mean=MEAN_OUT,
                                  vd_max=VD_MAX)
    program = pyserq.compile(source=SERQ_PROGRAM, workload_source=source, horizon=n / rate_us,
                             warmup=0, seed=seed)
    t = time.process_time()
    report = json.loads(pyserq.run(program).json())
    seconds = time.process_time() - t
    ttft = report["client"]["ttft"]
    return report["arrivals"], report["arrivals"] / seconds, ttft["mean"] * 1e-6, ttft["ci"] * 1e-6


def main() -> None:
    from stability.sim.gpu import run_gpu  # noqa: F401  (compile / load the engine first)
    from theory.bounds import T_bar_R

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke test)")
    args = parser.parse_args()
    try:
        import pyserq
    except ImportError:
        raise SystemExit("bench_peers needs serQ: pip install '.[bench]' (the pyserq package)") from None

    cm, w = cost_model(), workload()
    lam_star = 1.0 / T_bar_R(cm, w)
    loads = (0.5, 0.9, 0.99)
    n_llmq = 20_000 if args.quick else 1_000_000
    n_serq = 2_000 if args.quick else 20_000
    run_llmq(cm, w, 0.5 * lam_star, 1000, 0)  # compile / load from the numba cache
    print(f"Scenario: serQ's RAD model, lambda* = {lam_star:.4f} req/s (Theorem 1), "
          f"llmq {cm.describe()}, serQ {pyserq.__version__}\n")
    print(f"{'load':>5}{'llmq req':>11}{'llmq req/s':>13}{'serQ req':>10}{'serQ req/s':>12}"
          f"{'ratio':>9}{'llmq TTFT ms':>20}{'serQ TTFT ms':>20}{'agree':>7}")
    for i, load in enumerate(loads):
        lam = load * lam_star
        rate_l = run_llmq(cm, w, lam, n_llmq, seed=i + 1)[0]
        n_s, rate_s, mean_s, half_s = run_serq(lam, n_serq, seed=i + 1)
        mean_l, half_l = run_llmq(cm, w, lam, n_s, seed=100 + i)[1:]
        agree = abs(mean_l - mean_s) <= math.hypot(half_l, half_s)
        print(f"{load:>5.2f}{n_llmq:>11,}{rate_l:>13,.0f}{n_s:>10,}{rate_s:>12,.0f}"
              f"{rate_l / rate_s:>9,.0f}{f'{mean_l * 1e3:.1f} +- {half_l * 1e3:.1f}':>20}"
              f"{f'{mean_s * 1e3:.1f} +- {half_s * 1e3:.1f}':>20}{'yes' if agree else 'NO':>7}",
              flush=True)


if __name__ == "__main__":
    main()
