"""Simulated requests per second of every scheduler, and the engine's speed-up over the naive
reference simulator, measured side by side in one run.

Scenario: Table-1 workload (prompts padded to t*_lcm), Mistral-7B on an A100, Poisson
arrivals at 90% of lambda*, one GPU. Figures printed:

* requests/s of each scheduler in fast mode (event skipping, no per-token record) and, for RAD,
  in detail mode (every TBT gap recorded);
* engine events and batches per request;
* the naive reference (tests/reference_sim.py: plain Python, one batch at a time) on the same
  20,000 requests (RAD), and the ratio engine / reference;
* the time to the first result in a fresh process with an empty numba cache (compilation) and
  with a warm cache;
* DistServe's decode nodes under overload (``--overload``): seconds per run by number of
  requests at 1.5 x lambda* with ``decode_cap=64`` on r = 2 (one prefill, one decode GPU), where
  the decode node's backlog grows with the requests (a cost per batch that grew with the backlog
  would show as time growing faster than the requests);
* peak resident memory of a 1,000,000-request RAD run (per-token data is summarised in
  histograms, so memory grows with requests, not tokens);
* a scaling table: RAD's requests/s and peak resident memory (fresh process each) by number of
  requests and of GPUs r (load 0.9 of r lambda*, random routing): 10^4 and 10^5 requests on
  r = 1, 8, 64 by default, 10^4 ... 10^7 on r = 1, 4, 16, 64 with ``--scaling``. Cost is linear in
  requests (not tokens) and memory grows by a fixed number of bytes per request.

Times are CPU seconds of the simulating process (``time.process_time``: the simulator is
single-threaded, and a loaded machine distorts wall time), best of two.

Run from the repository root: ``python benchmarks/bench_simulator.py [--quick] [--scaling]``;
``--schedulers rad,slai`` measures those schedulers' rows only (the rest is skipped), e.g. to time
two source trees back to back on a loaded machine; ``--overload`` prints the DistServe overload
table only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST_RESULT = """
import time; t = time.time()
from stability.sim.simulate import Scenario, simulate
simulate(Scenario(pad=True, n_requests=2000, scheduler="{scheduler}"))
print(time.time() - t)
"""

# Peak resident memory of the child itself: Linux's VmHWM (ru_maxrss would include the parent's
# peak, which a forked child inherits), in MB.
PEAK_MB = """
def peak_mb():
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

PEAK_RSS = PEAK_MB + """
from stability.sim.simulate import Scenario, simulate
res = simulate(Scenario(pad=True, n_requests={n}, options=(("n", 2000),)))
assert res.counters()["n_done"] == {n}
print(peak_mb())
"""


SCALE = PEAK_MB + """
import time
from stability.sim.simulate import Scenario, simulate
sc = Scenario(pad=True, load=0.9, r={r}, n_requests={n}, options=(("n", 2000),))
simulate(Scenario(pad=True, load=0.9, r={r}, n_requests=500, options=(("n", 2000),)))
t = time.process_time()
res = simulate(sc)
seconds = time.process_time() - t
assert res.counters()["n_done"] == {n}
print(seconds, peak_mb())
"""


def child(code: str, env: dict | None = None) -> list[float]:
    """Run ``code`` in a fresh interpreter; the numbers on its last output line."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, **(env or {})})
    return [float(x) for x in out.stdout.strip().splitlines()[-1].split()]


def timed(fn, repeat: int = 3) -> float:
    """Least CPU time of ``repeat`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def scaling_table(sizes: tuple[int, ...], gpus: tuple[int, ...]) -> None:
    """RAD's requests/s and peak memory by requests and GPUs, each run in a fresh process; the
    memory per request is the growth over the smallest run on the same r."""
    print("\nScaling (RAD, n = 2000, load 0.9, random routing; fresh process per run)")
    print(f"{'requests':>12}{'r':>5}{'req/s':>14}{'peak MB':>10}{'bytes/req':>11}")
    for r in gpus:
        base = None
        for n in sizes:
            seconds, rss = child(SCALE.format(n=n, r=r))
            per = "" if base is None else f"{(rss - base[1]) * 2**20 / (n - base[0]):,.0f}"
            base = base or (n, rss)
            print(f"{n:>12,}{r:>5}{n / seconds:>14,.0f}{rss:>10,.0f}{per:>11}", flush=True)


def overload_table(sizes: tuple[int, ...]) -> None:
    """DistServe with a decode cap offered more than it serves: CPU seconds per run (best of two)
    by number of requests; the decode node's backlog grows with the requests."""
    from stability.sim.simulate import Scenario, simulate

    def scenario(n: int) -> Scenario:
        return Scenario(pad=True, load=1.5, scheduler="distserve", r=2, n_requests=n,
                        options=(("decode_cap", 64),))

    simulate(scenario(500))  # compile / load from cache
    print("\nDistServe under overload (load 1.5, decode_cap = 64, r = 2: one prefill, one decode GPU)")
    print(f"{'requests':>10}{'seconds':>10}{'req/s':>12}{'s / 10k req':>13}")
    for n in sizes:
        holder = {}
        seconds = timed(lambda n=n, holder=holder: holder.update(res=simulate(scenario(n))), repeat=2)
        assert holder["res"].counters()["n_done"] == n
        print(f"{n:>10,}{seconds:>10.2f}{n / seconds:>12,.0f}{1e4 * seconds / n:>13.3f}", flush=True)


def main() -> None:
    from stability.sim.cluster import run_cluster
    from stability.sim.registry import get_scheduler, scheduler_names
    from stability.sim.routing import Cluster, Requests
    from stability.sim.simulate import Scenario, cost_model_of, simulate, workload_of
    from tests import reference_sim
    from theory.bounds import T_bar_R

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--scaling", action="store_true",
                        help="scaling table up to 10^7 requests and 64 GPUs (minutes, < 8 GB)")
    parser.add_argument("--overload", action="store_true",
                        help="the DistServe overload table only (20k, 40k, 80k requests)")
    parser.add_argument("--schedulers", metavar="NAMES",
                        help="comma-separated schedulers: their rows only, nothing else (default: all)")
    args = parser.parse_args()
    overload_sizes = (5_000, 10_000, 20_000) if args.quick else (20_000, 40_000, 80_000)
    if args.overload:
        overload_table(overload_sizes)
        return
    names = scheduler_names()
    if args.schedulers is not None:
        asked = [x.strip() for x in args.schedulers.split(",") if x.strip()]
        unknown = [x for x in asked if x not in names]
        if not asked or unknown:
            parser.error(f"--schedulers: expected names among {', '.join(names)}, got {args.schedulers!r}")
        names = asked
    n_fast = 20_000 if args.quick else 200_000
    n_ref = 2_000 if args.quick else 20_000
    n_rss = 100_000 if args.quick else 1_000_000

    base = Scenario(pad=True, load=0.9)
    cm = cost_model_of(base)
    print(f"Scenario: {cm.describe()}, Table-1 workload padded to t*_lcm = {cm.t_lcm}, "
          f"load 0.9 x lambda*, one GPU\n")
    print(f"{'scheduler':<18}{'mode':<8}{'requests':>10}{'seconds':>10}{'req/s':>12}"
          f"{'events/req':>12}{'batches/req':>13}")
    for name in names:
        options = (("n", 2000),) if name in ("rad", "alg2") else ()
        r = 2 if name == "distserve" else 1  # one prefill and one decode GPU
        modes = (False, True) if name == "rad" else (False,)
        for detail in modes:
            n = n_fast // 5 if detail else n_fast
            sc = Scenario(pad=True, load=0.9, scheduler=name, options=options, n_requests=n,
                          detail=detail, r=r)
            simulate(Scenario(pad=True, load=0.9, scheduler=name, options=options, n_requests=500,
                              detail=detail, r=r))  # compile / load from cache
            holder = {}
            seconds = timed(lambda sc=sc, holder=holder: holder.update(res=simulate(sc)), repeat=2)
            c = holder["res"].counters()
            label = f"{name} (r=2)" if r > 1 else name
            print(f"{label:<18}{'detail' if detail else 'fast':<8}{n:>10}{seconds:>10.2f}"
                  f"{n / seconds:>12,.0f}{c['n_event'] / n:>12.2f}{c['n_batch'] / n:>13.1f}")
    if args.schedulers is not None:
        return

    # engine vs the naive reference on the same requests (RAD, n = 2000)
    sc = Scenario(pad=True, load=0.9, n_requests=n_ref, options=(("n", 2000),))
    w = workload_of(sc, cm)
    rng = np.random.default_rng(0)
    lam = 0.9 * sc.r / T_bar_R(cm, w)
    arrival = np.cumsum(rng.exponential(1 / lam, n_ref))
    L_P, L_D = w.sample(n_ref, rng)
    rad = get_scheduler("rad")
    params = rad.make_params(cm, n=2000)
    requests = Requests(arrival, L_P, L_D, np.zeros(n_ref, dtype=np.int64))
    engine_s = timed(lambda: run_cluster(cm, rad, params, requests, Cluster(1, "random", rng)))
    holder = {}
    ref_s = timed(lambda: holder.update(sim=reference_sim.rad(cm, arrival, L_P, L_D, params.n,
                                                              params.t_col, params.chunk)), repeat=1)
    _, runs = run_cluster(cm, rad, params, requests, Cluster(1, "random", rng))
    same = np.allclose(runs[0].t_finish, [r.finish for r in holder["sim"][0].reqs], rtol=1e-9)
    print(f"\nRAD on the same {n_ref} requests: engine {n_ref / engine_s:,.0f} req/s, naive reference "
          f"{n_ref / ref_s:,.0f} req/s ({len(holder['sim'][0].batches) / n_ref:.1f} batches/req): "
          f"engine / reference = {ref_s / engine_s:,.0f}x; identical finish times: {same}")

    overload_table(overload_sizes)

    with tempfile.TemporaryDirectory() as cache:
        cold = child(FIRST_RESULT.format(scheduler="rad"), {"NUMBA_CACHE_DIR": cache})[0]
        warm = child(FIRST_RESULT.format(scheduler="rad"), {"NUMBA_CACHE_DIR": cache})[0]
    print(f"first RAD result in a fresh process: {cold:.1f} s with an empty numba cache "
          f"(compilation), {warm:.1f} s with the cache warm")

    rss = child(PEAK_RSS.format(n=n_rss))[0]
    print(f"peak RSS of a {n_rss:,}-request RAD run (fast mode): {rss:,.0f} MB")

    if args.scaling:
        scaling_table((10_000, 100_000, 1_000_000, 10_000_000), (1, 4, 16, 64))
    else:
        scaling_table((10_000, 100_000), (1, 8, 64))


if __name__ == "__main__":
    main()
