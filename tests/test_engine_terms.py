"""The costs a serving engine adds (theory.engine_terms): the host time per step
(``engine_step_s``), CUDA-graph padding (``cudagraph_capture_sizes``) and the front end's time per
request (``frontend_s``), each against a computation by hand, through the compiled simulator
against the reference simulator, and in the certified capacity as the term's docstring says."""

import json
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from stability.serving.fit import fit_engine_step, held_out, replay_error
from stability.serving.replay import EngineCosts, capture_sizes, engine_options
from stability.sim.gpu import run_gpu
from stability.sim.registry import get_scheduler
from stability.sim.simulate import Scenario, simulate
from tests import reference_sim as ref
from tests.test_serving_replay import small_run
from tests.toys import toy_cost_model
from theory import symbolic
from theory.bounds import T_bar_R
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound, lockstep_throughput
from theory.capacity.law import law_from_cost_model
from theory.cost import Batch, T_batch, T_Lin, linear_per_token
from theory.engine_terms import default_capture_sizes, pad_tokens, with_frontend
from theory.errors import FieldError
from theory.hardware import get_gpu
from theory.validation.serving_runs import load_run
from theory.workload import Workload, get_workload

SIZES = (1, 2, 4, 8, 16, 24, 32)


def with_terms(cm, **terms):
    """``cm`` with GPU terms replaced (the numeric cost reads them from ``cm.gpu.terms``)."""
    return replace(cm, gpu=replace(cm.gpu, terms=replace(cm.gpu.terms, **terms)))


# --- padding -------------------------------------------------------------------------------------


def test_pad_tokens_by_hand():
    tau = np.array([0, 1, 3, 4, 5, 8, 9, 17, 25, 32, 33, 100])
    assert pad_tokens(SIZES, tau).tolist() == [0, 1, 4, 4, 8, 8, 16, 24, 32, 32, 33, 100]
    assert pad_tokens(None, tau).tolist() == tau.tolist()


def test_default_capture_sizes_are_the_recorded_ones():
    """vLLM's default sizes for max_num_seqs = 256, against the list the RTX 4090 run's engine
    recorded in its resolved configuration (meta.json)."""
    run = load_run("llmservingsim_rtx4090_llama-3.1-8b")
    recorded = run.resolved_config["compilation_config"]["cudagraph_capture_sizes"]
    assert dict(engine_options(run))["max_num_seqs"] == 256
    assert list(default_capture_sizes(256)) == recorded
    assert capture_sizes(run) == tuple(recorded)
    small = default_capture_sizes(8)
    assert small == (1, 2, 4, 8, 16) and max(default_capture_sizes(128)) == 256


def test_padding_in_the_numeric_cost():
    """T_Lin at tau is T_Lin without the term at pad(tau); a batch of 9 decodes pays
    T_Lin(16) - T_Lin(9) more (toy4's column tiles are 4 and 8 tokens wide: 16 tokens take more
    of them than 9), one of 33 tokens (above the sizes) nothing more."""
    off = toy_cost_model("toy4", "paper")
    on = with_terms(off, cudagraph_capture_sizes=SIZES)
    tau = np.arange(1, 60)
    assert np.allclose(T_Lin(on, tau), T_Lin(off, pad_tokens(SIZES, tau)), rtol=1e-12, atol=0)
    nine = Batch.of(decode=list(range(100, 1000, 100)))
    gap = float(T_Lin(off, 16) - T_Lin(off, 9))
    assert gap > 0
    assert T_batch(on, nine) - T_batch(off, nine) == pytest.approx(gap, rel=1e-9)
    big = Batch.of(prefill=[(1, 30)], decode=[7, 9, 11])
    assert T_batch(on, big) == T_batch(off, big)
    assert linear_per_token(on) == linear_per_token(off)  # Theorem 1's l* is unchanged


def test_padding_in_the_compiled_simulator():
    """Sarathi-Serve's compiled engine against the reference simulator (T_batch per batch) with the
    padding on: identical finish times, and different from those without padding."""
    off = toy_cost_model("toy4", "paper")
    on = with_terms(off, cudagraph_capture_sizes=SIZES)
    sch = get_scheduler("sarathi")
    rng = np.random.default_rng(5)
    m = 30
    L_P, L_D = rng.integers(1, 60, size=m), rng.integers(1, 25, size=m)
    arrival = np.cumsum(rng.exponential(2e-3, size=m))
    sim = ref.sarathi(on, arrival, L_P, L_D, 16, 8)
    run = run_gpu(on, sch, sch.make_params(on, chunk_size=16, max_num_seqs=8), arrival, L_P, L_D)
    assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0)
    without = run_gpu(off, sch, sch.make_params(off, chunk_size=16, max_num_seqs=8), arrival, L_P, L_D)
    assert not np.allclose(without.t_finish, run.t_finish, rtol=1e-6)


def test_padding_in_the_certified_capacity():
    """The capacity law's token-count time is the padded T_Lin; the bound with padding is at most
    the bound without, and above the throughput of a saturated simulated run and of lock-step
    groups, each timed with the padding (sparse sizes, so that every batch of 5 to 12 tokens is
    padded to 16 and the bound must fall)."""
    off = toy_cost_model("toy4", "paper")
    on = with_terms(off, cudagraph_capture_sizes=(1, 2, 4, 16, 32))
    law = law_from_cost_model(on)
    tau = np.arange(1, 40)
    assert np.allclose(np.asarray(law.token_time(39))[1:] - np.asarray(
        law_from_cost_model(off).token_time(39))[1:], T_Lin(on, tau) - T_Lin(off, tau), rtol=1e-9, atol=1e-15)
    w = Workload.from_pairs("one", [40], [12])
    caps = {"b_max": 12, "max_decodes": 6}
    b_on, b_off = (capacity_bound(cm, w, **caps).bound for cm in (on, off))
    assert b_on < b_off
    n = 120
    sch = get_scheduler("sarathi")
    run = run_gpu(on, sch, sch.make_params(on, chunk_size=12, max_num_seqs=6), np.zeros(n),
                  np.full(n, 40), np.full(n, 12))
    assert n / float(np.max(run.t_finish)) <= b_on
    lock = lockstep_throughput(on, w, group=6, chunk=2, **caps)
    assert 0 < lock <= b_on


def test_an_eager_run_is_not_padded(tmp_path):
    """A run whose resolved configuration says enforce_eager (or cudagraph_mode NONE) has no
    capture sizes; one that records none gets vLLM's default for its max_num_seqs."""
    folder = small_run(tmp_path, keep=5)
    meta = json.loads((folder / "meta.json").read_text())
    meta["resolved_config"]["model_config"]["enforce_eager"] = True
    (folder / "meta.json").write_text(json.dumps(meta))
    assert capture_sizes(load_run(folder)) is None
    meta["resolved_config"]["model_config"]["enforce_eager"] = False
    meta["resolved_config"]["compilation_config"]["cudagraph_mode"] = 0
    (folder / "meta.json").write_text(json.dumps(meta))
    assert capture_sizes(load_run(folder)) is None
    run = load_run("llmservingsim_rtxpro6000_llama-3.1-8b")  # no resolved configuration recorded
    assert capture_sizes(run) == default_capture_sizes(run.engine_kwargs["max_num_seqs"])


# --- engine_step_s -------------------------------------------------------------------------------


def test_engine_step_by_hand_and_in_the_bounds():
    """A non-empty batch pays v more, an empty one nothing; the capacity law's fixed time gains v;
    Theorem 1's least work is unchanged (a per-batch time is amortized); the exact twin agrees."""
    off = toy_cost_model("toy4", "paper")
    v = 3e-4
    on = replace(off, added=(("engine_step_s", v),))
    for b in (Batch.of(decode=[5]), Batch.of(prefill=[(1, 30)], decode=[7, 9])):
        assert T_batch(on, b) - T_batch(off, b) == pytest.approx(v, rel=1e-9)
    assert T_batch(on, Batch.of()) == 0.0
    assert law_from_cost_model(on).fixed_s == pytest.approx(law_from_cost_model(off).fixed_s + v, rel=1e-12)
    w = get_workload("table1")
    assert T_bar_R(on, w) == pytest.approx(T_bar_R(off, w), rel=1e-12)
    scm, scm_off = (symbolic.SymbolicCostModel.from_cost_model(c) for c in (on, off))
    assert scm.T_batch([(1, 30)], [7]) - scm_off.T_batch([(1, 30)], [7]) == sp.Rational(v)


def test_engine_step_read_from_a_gpu_file(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('[gpus.x]\nbase = "a100"\nengine_step_s = 2.5e-4\nfrontend_s = 0.01\n'
                    'cudagraph_capture_sizes = [8, 1, 4, 2]\n')
    gpu = get_gpu("x", str(path))
    assert gpu.terms.added == (("engine_step_s", 2.5e-4),)
    assert gpu.terms.frontend_s == 0.01 and gpu.terms.cudagraph_capture_sizes == (1, 2, 4, 8)
    cm = cost_model(CostSpec("x", "mistral-7b", "paper", gpu_file=str(path)))
    assert not cm.plain


def test_engine_step_fit_is_the_least_replay_error(tmp_path):
    """The fit's training error at each grid value is the replay's, and it picks the least; leave
    one out fits each run on the others only."""
    runs = tuple(str(small_run(tmp_path, name, keep=40)) for name in (
        "llmservingsim_rtx4090_llama-3.1-8b", "llmservingsim_rtxpro6000_llama-3.1-8b"))
    grid = (0.0, 2e-3)
    fit = fit_engine_step(runs[:1], grid)
    assert fit.errors == {g: pytest.approx(replay_error(runs[0], g), rel=1e-12) for g in grid}
    assert fit.errors[fit.engine_step_s] == min(fit.errors.values())
    assert held_out(runs, grid) == {runs[0]: fit_engine_step(runs[1:], grid).engine_step_s,
                                    runs[1]: fit.engine_step_s}
    with pytest.raises(FieldError, match="runs"):
        held_out(runs[:1], grid)
    with pytest.raises(FieldError, match="grid"):
        fit_engine_step(runs[:1], (-1.0,))


def test_the_example_file_spells_the_engine_terms():
    """The packaged example's engine profile: vLLM's default sizes for 256 sequences and the two
    times, read from the file as written."""
    from importlib import resources

    path = str(resources.files("theory").joinpath("data", "cost_terms_example.toml"))
    cm = cost_model(CostSpec("a100-vllm-engine", "mistral-7b", "real", gpu_file=path))
    assert cm.gpu.terms.cudagraph_capture_sizes == default_capture_sizes(256)
    assert cm.added == (("engine_step_s", 2.0e-4),) and cm.gpu.terms.frontend_s == 5.0e-3


# --- frontend_s ----------------------------------------------------------------------------------


def test_frontend_adds_latency_only():
    """TTFT and latency gain the front end's time, exactly; batch times, TPOT and the certified
    capacity do not change."""
    off = toy_cost_model("toy4", "paper")
    on = with_terms(off, frontend_s=0.02)
    t, lat = with_frontend(on, [0.1, 0.2], [1.0, 2.0])
    assert t.tolist() == pytest.approx([0.12, 0.22]) and lat.tolist() == pytest.approx([1.02, 2.02])
    assert [x.tolist() for x in with_frontend(off, [0.1], [1.0])] == [[0.1], [1.0]]
    b = Batch.of(prefill=[(1, 30)], decode=[7, 9])
    assert T_batch(on, b) == T_batch(off, b)
    w = Workload.from_pairs("one", [40], [12])
    assert capacity_bound(on, w, b_max=16).bound == capacity_bound(off, w, b_max=16).bound


def test_frontend_in_the_simulators_summary(tmp_path):
    """A simulated run's summary: TTFT and latency percentiles shifted by the front end's time
    exactly, the throughput and the batches unchanged."""
    path = tmp_path / "g.toml"
    path.write_text('[gpus.fe]\nbase = "a100"\nfrontend_s = 0.05\n[gpus.plain]\nbase = "a100"\n')
    runs = {key: simulate(Scenario(gpu=key, gpu_file=str(path), scheduler="sarathi", n_requests=300,
                                   load=0.5, seed=4)).summary() for key in ("fe", "plain")}
    on, off = runs["fe"], runs["plain"]
    assert on["batches"] == off["batches"] and on["throughput"] == off["throughput"]
    for metric in ("ttft", "latency"):
        for stat, value in off[metric].items():
            assert on[metric][stat] == pytest.approx(value + 0.05, rel=1e-12), (metric, stat)


# --- bad inputs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "match"), [
    ("cudagraph_capture_sizes = []", "cudagraph_capture_sizes"),
    ("cudagraph_capture_sizes = [0, 8]", "0 is not"),
    ("cudagraph_capture_sizes = [8, 8]", "repeated"),
    ("cudagraph_capture_sizes = [1.5]", "1.5 is not"),
    ("cudagraph_capture_sizes = 512", "cudagraph_capture_sizes"),
    ("cudagraph_capture_sizes = [true]", "True is not"),
    ("cudagraph_capture_sizes = [100000]", "100000 is not"),
    ("engine_step_s = -1.0", "engine_step_s"),
    ("engine_step_s = true", "engine_step_s"),
    ("frontend_s = -0.5", "frontend_s"),
    ('frontend_s = "1 ms"', "frontend_s"),
])
def test_bad_engine_terms_are_refused_by_name(tmp_path, line, match):
    path = tmp_path / "g.toml"
    path.write_text(f'[gpus.x]\nbase = "a100"\n{line}\n')
    with pytest.raises(FieldError, match=match) as err:
        get_gpu("x", str(path))
    assert "gpus.x" in str(err.value)


@pytest.mark.parametrize("kwargs", [{"engine_step_s": -1e-3}, {"frontend_s": float("nan")},
                                    {"engine_step_s": True}, {"cudagraphs": "yes"}])
def test_bad_engine_costs_of_a_replay(kwargs):
    with pytest.raises(FieldError, match=r"engine\."):
        EngineCosts(**kwargs)
