"""The table of cost terms (theory.cost_terms): every declared term is in every twin, a term missing
from one is reported, the records and the TOML keys come from the table, and a toy term added in
the test through the extension points (a declaration plus its formula in each twin) flows through
the numeric cost, the compiled simulator, the symbolic twin and the bounds, each checked against a
computation by hand or against the reference simulator."""

import importlib
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from stability.sim import kernels
from stability.sim.gpu import RunOptions, run_gpu
from stability.sim.metrics import optimal_work
from stability.sim.registry import get_scheduler
from stability.sim.structs import COST_BLOCKS, COST_FIELDS, COSTS
from tests import reference_sim as ref
from tests.toys import solo_cost_model, toy_cost_model
from theory import added_time, bounds, cost, cost_terms, symbolic
from theory.added_time import AddedTime
from theory.builder import CostSpec, cost_model
from theory.capacity import capacity_bound
from theory.cost import Batch, T_batch
from theory.cost_terms import TERMS, CostTerm
from theory.errors import FieldError
from theory.hardware import UNFITTED_TERMS, get_gpu, gpu_names
from theory.terms import GpuTerms, ModelTerms
from theory.validation import term_fits
from theory.workload import get_workload

TWINS = ("numeric", "compiled", "symbolic", "bounds", "fit")


def places(name: str) -> dict[str, bool]:
    """Whether each twin registers the declared term ``name`` (an added-time term is taken by the
    compiled tables and the bounds through its slots, and a latency term adds to no batch and no
    bound; their numeric and symbolic formulas and fits are registered like any term's)."""
    term = TERMS[name]
    return {
        "numeric": name in added_time.FORMULAS if term.added else name in cost.NUMERIC_TERMS,
        "compiled": term.added or term.latency or name in kernels.COMPILED_TERMS,
        "symbolic": name in symbolic.SYMBOLIC_TERMS or (term.added and name in symbolic.SYMBOLIC_ADDED),
        "bounds": term.added or term.latency or name in bounds.BOUNDS_TERMS,
        "fit": name in term_fits.FIT_TERMS,
    }


def missing() -> dict[str, list[str]]:
    """The declared terms each twin lacks."""
    out = {twin: [] for twin in TWINS}
    for name in TERMS:
        for twin, present in places(name).items():
            if not present:
                out[twin].append(name)
    return out


def test_every_declared_term_is_in_every_twin():
    assert missing() == {twin: [] for twin in TWINS}
    registries = {"numeric": cost.NUMERIC_TERMS, "compiled": kernels.COMPILED_TERMS,
                  "symbolic": symbolic.SYMBOLIC_TERMS, "bounds": bounds.BOUNDS_TERMS,
                  "fit": term_fits.FIT_TERMS}
    for twin, registry in registries.items():  # no entry for a term the table does not declare
        assert set(registry) <= set(TERMS), (twin, sorted(set(registry) - set(TERMS)))


def test_what_each_twin_registers_exists():
    """The numeric and bounds entries are code, the compiled entries are fields of the cost tables,
    the symbolic entries are methods of the twin or say why it leaves the term out, and every fit
    named exists."""
    for name, where in {**cost.NUMERIC_TERMS, **bounds.BOUNDS_TERMS}.items():
        assert where and all(callable(f) or isinstance(f, property) for f in where), name
    for name, fields in kernels.COMPILED_TERMS.items():
        assert fields and set(fields) <= set(COST_FIELDS), (name, fields)
    assert set(kernels.ADDED_SLOTS) <= set(COST_FIELDS)
    for name, entry in symbolic.SYMBOLIC_TERMS.items():
        assert isinstance(entry, symbolic.NumericOnly) or all(callable(f) for f in entry), name
    for name, fit in term_fits.FIT_TERMS.items():
        if fit.by is not None:
            module, _, function = fit.by.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), name


def test_a_declared_term_missing_from_a_twin_is_reported():
    """Two-sided: a term declared and registered nowhere is missing from all five twins, and from
    the fewer the more of them register it; the table itself refuses a name declared twice."""
    term = CostTerm("probe_floor", "gpu", "switch", False, False, "a test term", "nothing")
    cost_terms.declare(term)
    try:
        assert {twin for twin, names in missing().items() if "probe_floor" in names} == set(TWINS)
        kernels.COMPILED_TERMS["probe_floor"] = ("lin",)
        term_fits.register("probe_floor", term_fits.Fit(None, "a switch"))
        try:
            assert {twin for twin, names in missing().items() if "probe_floor" in names} == \
                {"numeric", "symbolic", "bounds"}
        finally:
            del kernels.COMPILED_TERMS["probe_floor"], term_fits.FIT_TERMS["probe_floor"]
        with pytest.raises(FieldError, match="probe_floor"):
            cost_terms.declare(term)
    finally:
        cost_terms.withdraw("probe_floor")
    assert "probe_floor" not in TERMS and missing() == {twin: [] for twin in TWINS}


def test_records_defaults_and_paper_values_are_the_tables():
    """The terms records' defaults are the declared defaults (the term off), every preset in
    paper mode holds each term at its declared paper value, and real mode's unfitted terms are
    the table's GPU switches."""
    gpu_defaults, model_defaults = GpuTerms(), ModelTerms()
    for term in TERMS.values():
        if term.record == "terms":
            record = model_defaults if term.side == "model" else gpu_defaults
            value = (dict(record.added).get(term.name, term.default) if term.added
                     else getattr(record, term.attr))
            assert value == term.default, term.name
    for key in gpu_names():
        cm = cost_model(CostSpec(key, "mistral-7b", "paper"))
        assert {t.name: t.value_of(cm) for t in TERMS.values()} == {t.name: t.paper for t in TERMS.values()}
    assert UNFITTED_TERMS == ("memory_floor", "waves", "attention_waves")


def test_term_keys_are_accepted_and_others_refused_by_name(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('[gpus.x]\nbase = "a100"\nwaves = true\nwavez = true\n')
    with pytest.raises(FieldError, match="wavez") as err:
        get_gpu("x", str(path))
    assert "waves" in str(err.value) and "attention_call_s" in str(err.value)


def test_the_cost_record_is_generated_from_its_blocks():
    """The compiled record's fields are the blocks' in order, and the tables of a cost model with
    terms on fill every one of them (build_tables refuses a block left unfilled)."""
    assert list(COSTS.field_dict) == list(COST_FIELDS)
    assert list(COST_FIELDS) == [name for block in COST_BLOCKS.values() for name, _ in block]
    assert set(kernels.COST_VALUES) == set(COST_BLOCKS)
    cm = toy_cost_model("toy4", "real")
    kernels.build_tables(cm, 64)
    shifts = kernels.COST_VALUES["shifts"]
    kernels.COST_VALUES["shifts"] = lambda cm: {k: v for k, v in shifts(cm).items() if k != "pow2"}
    try:
        with pytest.raises(ValueError, match="pow2"):
            kernels.build_tables(cm, 64)
    finally:
        kernels.COST_VALUES["shifts"] = shifts


# --- a toy term added through the extension points -------------------------------------------------

TOY = "toy_kv_read_s"
V = 2.0e-7  # seconds per cached token a decode reads
C_BATCH = 50  # the toy's per-batch time: C_BATCH V per layer


@pytest.fixture()
def toy():
    """Declare the toy term and register its formula in each twin; withdraw it afterwards.

    A decode at position i reads its i - 1 cached tokens and its own, ``V i`` seconds; every
    non-empty batch pays ``C_BATCH V`` per layer."""
    cost_terms.declare(CostTerm(
        TOY, "gpu", "s per cached token read by a decode", 0.0, 0.0,
        "a test term: a decode's cache read at a fixed time per token",
        "each decode pays V per token of its position; each batch C_BATCH V per layer", added=True))
    added_time.register(TOY, AddedTime(per_batch=lambda cm, v: cm.N * C_BATCH * v,
                                       per_decode=lambda cm, v, i: v * np.asarray(i, dtype=float)))
    symbolic.register_added_time(TOY, AddedTime(per_batch=lambda scm, v: scm.N * C_BATCH * v,
                                                per_decode=lambda scm, v, i: v * i))
    term_fits.register(TOY, term_fits.Fit(None, "a test term"))
    try:
        yield
    finally:
        for registry in (added_time.FORMULAS, symbolic.SYMBOLIC_ADDED, term_fits.FIT_TERMS):
            registry.pop(TOY, None)
        cost_terms.withdraw(TOY)


def toy_on(mode: str = "paper"):
    base = toy_cost_model("toy4", mode)
    return base, replace(base, added=((TOY, V),))


def test_toy_term_is_in_every_twin(toy):
    assert missing() == {twin: [] for twin in TWINS}
    added_time.FORMULAS.pop(TOY)
    assert missing()["numeric"] == [TOY]


def test_toy_term_is_read_from_the_gpu_file_only_while_declared(toy, tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(f'[gpus.x]\nbase = "a100"\n{TOY} = {V}\n')
    assert get_gpu("x", str(path)).terms.added == ((TOY, V),)
    cm = cost_model(CostSpec("x", "mistral-7b", "paper", gpu_file=str(path)))
    assert cm.added == ((TOY, V),) and not cm.plain
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[gpus.x]\nbase = "a100"\n{TOY} = -1.0\n')
    with pytest.raises(FieldError, match=TOY):
        get_gpu("x", str(bad))
    term = cost_terms.withdraw(TOY)
    try:
        with pytest.raises(FieldError, match=TOY):
            get_gpu("x", str(path))
    finally:
        cost_terms.declare(term)


def test_toy_term_in_the_numeric_cost(toy):
    """T_batch gains N C_BATCH V per non-empty batch and V i per decode at position i, whatever
    else the batch holds; nothing for an empty batch."""
    off, on = toy_on()
    rng = np.random.default_rng(3)
    for _ in range(40):
        pre = [(int(i), int(c)) for i, c in rng.integers(1, 300, size=(rng.integers(0, 3), 2))]
        dec = rng.integers(1, 900, size=rng.integers(0 if pre else 1, 5)).tolist()
        b = Batch.of(prefill=pre, decode=dec)
        assert T_batch(on, b) - T_batch(off, b) == pytest.approx(off.N * C_BATCH * V + V * sum(dec), rel=1e-9)
    assert T_batch(on, Batch.of()) == 0.0
    assert on.fixed_s == pytest.approx(off.fixed_s + off.N * C_BATCH * V, rel=1e-12)


@pytest.mark.parametrize("scheduler", ["rad", "request_level", "sarathi"])
def test_toy_term_in_the_compiled_simulator(toy, scheduler):
    """The compiled engine against the reference simulator (theory.cost.T_batch per batch) with the
    toy on: identical finish times (decode runs, whole prefills and mixed batches), and different
    from those without it."""
    off, on = toy_on()
    sch = get_scheduler(scheduler)
    knob = {"rad": {"n": 4}, "request_level": {"b": 4}, "sarathi": {"chunk_size": 16, "max_num_seqs": 8}}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        m = 25
        L_P, L_D = rng.integers(1, 80, size=m), rng.integers(1, 20, size=m)
        arrival = np.cumsum(rng.exponential(2e-3, size=m))
        p = sch.make_params(on, **knob[scheduler])
        if scheduler == "rad":
            sim, _ = ref.rad(on, arrival, L_P, L_D, p.n, p.t_col, p.chunk)
        elif scheduler == "request_level":
            sim = ref.request_level(on, arrival, L_P, L_D, 4)
        else:
            sim = ref.sarathi(on, arrival, L_P, L_D, 16, 8)
        for detail in (False, True):
            run = run_gpu(on, sch, p, arrival, L_P, L_D, options=RunOptions(detail=detail))
            assert np.allclose(run.t_finish, [r.finish for r in sim.reqs], rtol=1e-9, atol=0)
        without = run_gpu(off, sch, sch.make_params(off, **knob[scheduler]), arrival, L_P, L_D)
        assert not np.allclose(without.t_finish, run.t_finish, rtol=1e-6)


def test_toy_term_in_the_symbolic_twin(toy):
    """The exact twin prices the toy by its own formula and agrees with the numeric cost; without
    its symbolic formula the twin refuses a cost model that has the toy on, naming it."""
    off, on = toy_on()
    scm = symbolic.SymbolicCostModel.from_cost_model(on)
    scm_off = symbolic.SymbolicCostModel.from_cost_model(off)
    pre, dec = [(1, 40), (129, 7)], [5, 300]
    v = sp.Rational(V)
    assert scm.T_batch(pre, dec) - scm_off.T_batch(pre, dec) == on.N * C_BATCH * v + v * 305
    assert float(scm.T_batch(pre, dec)) == pytest.approx(T_batch(on, Batch.of(pre, dec)), rel=1e-12)
    assert float(scm.T_max(30, 6)) == pytest.approx(bounds.T_max(on, 30, 6), rel=1e-12)
    symbolic.SYMBOLIC_ADDED.pop(TOY)
    with pytest.raises(FieldError, match=TOY):
        symbolic.SymbolicCostModel.from_cost_model(on)


def test_toy_term_in_the_bounds(toy):
    """Theorem 1's least work gains each decode's V i (the per-batch time is amortized), T^max
    gains l N C_BATCH V and V l (l + 1) / 2 (every token a decode batch alone), the described
    schedule V times its decode positions, the certified capacity's decode attention the same as
    T_bar^R, and the corrected T_bar^R stays below a saturated run's busy time per request."""
    off, on = toy_on()
    l_P, l_D = 40, 10
    ell = l_P + l_D
    w = get_workload(f"deterministic:{l_P},{l_D}")
    decode_sum = V * sum(l_P + k for k in range(1, l_D + 1))
    assert bounds.T_bar_R(on, w) - bounds.T_bar_R(off, w) == pytest.approx(decode_sum, rel=1e-9)
    assert bounds.T_bar_R_terms(on, w)["added"] == pytest.approx(decode_sum, rel=1e-12)
    assert bounds.T_max(on, l_P, l_D) - bounds.T_max(off, l_P, l_D) == \
        pytest.approx(ell * off.N * C_BATCH * V + V * ell * (ell + 1) / 2, rel=1e-9)
    described = bounds.T_max_described(on, l_P, l_D)[0] - bounds.T_max_described(off, l_P, l_D)[0]
    assert described == pytest.approx(ell * off.N * C_BATCH * V + decode_sum, rel=1e-9)
    pieces = [capacity_bound(cm, w).pieces_s["decode_attention"] for cm in (on, off)]
    gap = pieces[0] - pieces[1]
    assert gap == pytest.approx(decode_sum, rel=1e-9)
    assert optimal_work(on, [l_P], [l_D])[0] == pytest.approx(bounds.T_bar_R(on, w), rel=1e-12)
    # a lower bound on the work per request: a saturated run on one tile (Assumption 1 holds) does
    # no less than the corrected T_bar^R with the toy on; not a vacuous one: the bound with 40 times
    # the toy's time is above the run
    solo = replace(solo_cost_model("solo4", "paper"), added=((TOY, V),))
    sch = get_scheduler("request_level")
    m = 200
    run = run_gpu(solo, sch, sch.make_params(solo), np.zeros(m), np.full(m, l_P), np.full(m, l_D))
    assert bounds.T_bar_R(solo, w, corrected=True) <= run.busy / m
    assert bounds.T_bar_R(replace(solo, added=((TOY, 40 * V),)), w, corrected=True) > run.busy / m
