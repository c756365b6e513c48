"""Every public function and class of the library has a docstring (the house style asks each to
name the paper's equation, lemma or section it implements; this test guards the presence)."""

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import llmq
import paper_checks
import stability
import theory
from paper_checks import registry
from paper_checks.registry import Level, Result, Verdict, all_checks, docstring_misses, register
from theory.errors import FieldError


def public_objects():
    for pkg in (theory, stability, paper_checks, llmq):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith(".__main__"):  # running it is the command line itself
                continue
            mod = importlib.import_module(info.name)
            for name, obj in vars(mod).items():
                if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                        and getattr(obj, "__module__", None) == mod.__name__):
                    yield f"{mod.__name__}.{name}", obj


def test_the_walk_finds_the_library():
    names = {name for name, _ in public_objects()}
    assert {"theory.cost.T_batch", "stability.sim.simulate.simulate", "theory.bounds.compute_bounds"} <= names


@pytest.mark.parametrize("package", ["theory", "stability", "paper_checks", "llmq"])
def test_every_public_function_and_class_has_a_docstring(package):
    missing = [name for name, obj in public_objects()
               if name.startswith(package + ".") and not (obj.__doc__ or "").strip()]
    assert not missing, missing


def test_every_check_docstring_names_its_location_claim_method_and_level():
    """``register`` writes the check functions' docstrings, so the presence test above cannot fail
    for them; this one reads what each says."""
    checks = all_checks()
    bad = {c.id: docstring_misses(c) for c in checks if docstring_misses(c)}
    assert checks and not bad, bad


def _fn(fast):
    return Result(Verdict.PASS, "holds", coverage="nothing")


CARD = {"location": "Section 6", "items": ("Eq. 8",), "claim": "a claim", "method": "a method",
        "level": "sample"}


@pytest.mark.parametrize("field", ["claim", "method", "location"])
def test_registering_a_check_with_an_empty_description_fails(field):
    with pytest.raises(FieldError, match=field):
        register(f"test.empty_{field}", **{**CARD, field: "  "})(_fn)
    assert f"test.empty_{field}" not in registry._REGISTRY


def test_registering_a_check_whose_docstring_lacks_the_card_fails(monkeypatch):
    def own_docstring(fast):
        """A docstring of its own that names neither the claim nor the evidence level."""
        return _fn(fast)

    with pytest.raises(FieldError, match="claim, method, evidence level"):
        register("test.own_docstring", **CARD)(own_docstring)
    real = registry.card
    monkeypatch.setattr(registry, "card", lambda c: real(c).replace("Evidence: ", ""))  # drops the label
    with pytest.raises(FieldError, match="evidence level"):
        register("test.card_without_level", **CARD)(lambda fast: _fn(fast))
    assert not {"test.own_docstring", "test.card_without_level"} & set(registry._REGISTRY)


def test_the_docstring_test_flags_a_check_missing_its_level():
    check = next(c for c in all_checks() if c.level is not Level.PROOF)
    proof = registry.Check(**{**vars(check), "level": Level.PROOF})  # same docstring, other level
    assert docstring_misses(proof) == ["evidence level"] and docstring_misses(check) == []


def test_no_tracked_file_points_outside_the_repository():
    """A reader who clones the repository must be able to follow every citation: no file cites a
    note that lives beside the repository instead of its public source."""
    import re
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    outside = re.compile(r"\.\./shared|shared/reference|scheduler_semantics\.md|gpu_model_facts")
    hits = [f"{f}:{k}" for f in files if (root / f).is_file() and not f.startswith("tests/test_docstrings")
            for k, line in enumerate((root / f).read_text(errors="ignore").splitlines(), 1)
            if outside.search(line)]
    assert not hits, hits


# --- no figure measured by llmq in a docstring ----------------------------------------------------
#
# Docstrings define and cite; a figure llmq measured (an error, a speed, a ratio, a time, a count of
# runs) goes stale the day the code or the data change, so it belongs in a generated report, a
# benchmark or CHANGES.md. The detector reads every module, class and function docstring of the
# four packages (whitespace normalised) and flags:
#
# * a percentage (``4.9%``, ``-0.9 %``, ``3-22%``);
# * a time in s, ms, us, µs, ns or min (``0.50 s``, ``17 ms``);
# * a ratio: a number of times or ``x`` before a comparative (``30x longer``, ``16 times slower``),
#   or any decimal multiple (``1.39 times``); a product of dimensions (``256 x 128``) is not one;
# * a rate in requests or tokens per second or FLOP/s (``24.694 req/s``);
# * a count of outcomes (``6 of 8``, ``7 to 9 of 16``).
#
# Not flagged: a confidence level (68, 80, 90, 95, 97.5, 99 or 99.9 percent) within a few words of
# "interval", "confidence", "Student", "chi-square", "CI" or "two-sided": a chosen level, not a
# result. Everything else a docstring may hold is definitional, and is allowed below phrase by
# phrase, under the object whose docstring holds it, with the reason: a figure of the paper or of
# a cited public source, a default or setting of the code or of a cited system, a threshold or
# tolerance the code defines, a unit or a symbol that looks like one, or arithmetic on those. An
# allowed phrase that no longer occurs, or covers no flagged figure, fails the test, so the list
# cannot outlive what it excuses.

_NUM = r"[+-]?\d+(?:[.,]\d+)?(?:\s?-\s?\d+(?:\.\d+)?)?"
_COMPARATIVE = (r"(?:longer|shorter|slower|faster|more|less|larger|smaller|higher|lower|above|below|"
                r"wider|narrower|as)")
FIGURE = re.compile("|".join((
    rf"(?<![\w.]){_NUM}\s?%",
    rf"(?<![\w.]){_NUM}\s?(?:s|ms|us|µs|ns|min)\b(?![/-])",
    rf"(?<![\w.]){_NUM}\s?(?:x|times)\s+{_COMPARATIVE}\b",
    r"(?<![\w.])\d+\.\d+\s?(?:x|times)\b",
    rf"(?<![\w.]){_NUM}\s?(?:million\s+)?(?:req/s|requests/s|requests per second|tokens/s|"
    r"tokens per second|[TGP]?FLOP/s)",
    r"(?<![\w.])\d+(?:\s?(?:to|-)\s?\d+)? (?:out )?of (?:the |its )?\d[\d,]*\b",
)))
CONFIDENCE_LEVEL = re.compile(r"(?:68|80|90|95|97\.5|99|99\.9)\s?%")
CONFIDENCE_WORDS = re.compile(r"interval|confidence|Student|chi-square|\bCI\b|two-sided")

PAPER = "a figure of the paper (Bari, Hegde, de Veciana 2025), cited where it stands"
OTHER_PAPER = "a figure of another paper, the claim a check tests, cited where it stands"
SOURCE_DEFAULT = "a default of the cited system's own configuration"
SETTING = "a setting or threshold the code defines (a named constant or option)"
ALLOWED: dict[str, dict[str, str]] = {
    "theory.defaults": {"within 5% of λ*": "what epsilon = 0.05 means (arithmetic)"},
    "theory.hardware.GPU.flop_rate": {"2 s mu(t)": "s is the SM count of Eq. 2, not seconds"},
    "theory.capacity": {"c_fix = 5 ms": "a parameter of the worked example"},
    "theory.tp_split.shard_memory": {"under 0.01 % of the weights": "arithmetic on the architecture: a "
                                  "layer's norm weights are 2 d_x against its d_x^2-sized matrices"},
    "theory.validation.report.plot": {"jumps > 10%": SETTING},
    "stability.attain.attain_cell": {"max(1%, its half-width)": SETTING},
    "stability.memory_bound": {"1% watermark": SOURCE_DEFAULT},
    "stability.memory_bound.memory_check": {"1.5 x the bound": SETTING},
    "paper_checks.other_papers._ldp_runs": {"1.5 x the bound": SETTING},
    "paper_checks.other_papers_batching": {
        "about 80% on an H200": OTHER_PAPER, "about 20% on an RTX PRO 6000": OTHER_PAPER,
        "the 80% and 20% decode shares": OTHER_PAPER},
    "paper_checks.section4_theorems.tiling_verdict": {"< 5% of batches": SETTING},
    "stability.planner.caps.scheduler_caps": {
        "sequences, 80 %": SOURCE_DEFAULT, "decodes, 90 %": SOURCE_DEFAULT, "(128), 90 %": SOURCE_DEFAULT},
    "stability.planner.runs": {
        "the first 10 % of the arrival window": SETTING + " (stability.sim.metrics.WARMUP)"},
    "stability.planner.search": {
        "probability at most 2.5 %": "arithmetic on the chosen 95% level (one side of the interval)",
        "at most 7.5 % at the defaults": "arithmetic on the chosen level (a union bound over looks)",
        "22.5 %": "arithmetic on the chosen level (a union bound over looks)"},
    "stability.region": {"= 0.2%": SETTING + " (stability.runner.G_MIN)",
                         "the 20% arrival": SETTING + " (the saturation window)"},
    "stability.schedulers.sarathi": {"the 1% watermark": SOURCE_DEFAULT},
    "stability.schedulers.sarathi.make_params": {"80% of the GPU memory": SOURCE_DEFAULT,
                                                 "1% watermark": SOURCE_DEFAULT},
    "stability.schedulers.vllm": {">= 1% watermark": SOURCE_DEFAULT},
    "stability.schedulers.vllm.make_params": {"90% of the GPU memory": SOURCE_DEFAULT,
                                              "1% watermark": SOURCE_DEFAULT},
    "stability.schedulers.slai": {"the 1% watermark": SOURCE_DEFAULT,
                                  "at least 96% of the KV": SOURCE_DEFAULT,
                                  "(0.2 s, the authors' default": SOURCE_DEFAULT},
    "stability.sim.classes": {"(TBT SLO 0.1 s) and *free-tier* users (0.5 s)": PAPER},
    "stability.sim.classes.paying_free": {"(TBT SLO 0.1 s), else free-tier (0.5 s)": PAPER},
    "stability.sim.fleet": {"at 75 req/s (TBT P99 limit 150 ms)": "the parameters of the cited test's "
                            "scenario (tests/test_mixed_fleet.py)"},
    "stability.sim.metrics": {"a relative error below 2.3%": "arithmetic on the histogram's bins "
                              "(10^(1/TBT_PER_DECADE) - 1)"},
    "stability.slai.analysis": {
        "median TTFT <= 0.5 s": PAPER + " (its capacity criterion)",
        "median TTFT linearly to 0.5 s": PAPER + " (its capacity criterion)",
        "1.5 s (2 s at 95% paying), at 1.6 req/s = 1.39 times its capacity": PAPER + " (and its ratio)",
        "The paper's absolute 1.6 req/s": PAPER,
        "Section 7 (53% lower median TTFT, 26% more capacity at 5% paying), Appendix F.3 (50% and 95% "
        "paying)": PAPER},
    "stability.slai.analysis.claims": {"a tie within 1%": SETTING, "exceeds 0.1 s": PAPER,
                                       "median TTFT <= 2 s": PAPER},
    "stability.slai.analysis.paper_ttft_base": {"(1.5 s; 2 s at 95% paying)": PAPER},
    "stability.slai.study": {
        "(90% of the memory": SOURCE_DEFAULT + " (vLLM's gpu_memory_utilization)",
        "(TBT SLO 0.1 s) with probability 5%, 50% or 95%, else free (0.5 s)": PAPER,
        "(5 below 96% KV use": SOURCE_DEFAULT + " (SLAI's dynamic offset)",
        "(0.2-1.6 req/s)": PAPER,
        "median TTFT <= 0.5 s": PAPER + " (its capacity criterion)",
        "the paper's 1.5 s, or 2 s at 95% paying": PAPER},
}


def docstrings() -> list[tuple[str, str]]:
    """``(qualified owner, docstring with whitespace normalised)`` of every module, class and function
    (methods included) of the four packages, read from the source (nothing is imported)."""
    root = Path(__file__).resolve().parents[1]
    out = []
    for pkg in ("theory", "stability", "paper_checks", "llmq"):
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            stack = [(ast.parse(path.read_text(encoding="utf-8")), module)]
            while stack:
                node, name = stack.pop()
                doc = ast.get_docstring(node)
                if doc:
                    out.append((name, " ".join(doc.split())))
                stack += [(child, f"{name}.{child.name}") for child in ast.iter_child_nodes(node)
                          if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return out


def flagged(text: str) -> list[re.Match]:
    """The measured-looking figures of ``text`` (see the comment above), confidence levels left out."""
    return [m for m in FIGURE.finditer(text)
            if not (CONFIDENCE_LEVEL.fullmatch(m.group())
                    and CONFIDENCE_WORDS.search(text[max(0, m.start() - 40):m.end() + 40]))]


def allowed_spans(owner: str, text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for phrase in ALLOWED.get(owner, {})
            for m in re.finditer(re.escape(phrase), text)]


def measured_figures(package: str) -> list[str]:
    out = []
    for owner, text in docstrings():
        if owner.split(".")[0] != package:
            continue
        spans = allowed_spans(owner, text)
        for m in flagged(text):
            if not any(a <= m.start() and m.end() <= b for a, b in spans):
                out.append(f"{owner}: {m.group()!r} in ...{text[max(0, m.start() - 60):m.end() + 30]}...")
    return out


@pytest.mark.parametrize("package", ["theory", "stability", "paper_checks", "llmq"])
def test_no_docstring_holds_a_figure_llmq_measured(package):
    found = measured_figures(package)
    assert not found, ("figures measured by llmq belong in a generated report, a benchmark or "
                       "CHANGES.md, not a docstring:\n" + "\n".join(found))


def test_every_allowed_phrase_still_excuses_a_figure():
    texts = dict(docstrings())
    stale = []
    for owner, phrases in ALLOWED.items():
        text = texts.get(owner, "")
        for phrase in phrases:
            spans = [(m.start(), m.end()) for m in re.finditer(re.escape(phrase), text)]
            if not any(a <= f.start() and f.end() <= b for a, b in spans for f in flagged(text)):
                stale.append(f"{owner}: {phrase!r}")
    assert not stale, stale


@pytest.mark.parametrize("text", [
    "held out, the A100 reaches 4.9% / 14.0% (TP 1: 3.5% / 11.0%)",
    "the dot products took 30x longer with the default threads",
    "collectives about 16 times slower than NCCL's",
    "median TTFT 0.50 s over 8 runs of 6,000 requests",
    "RAD simulates about 2.4 million requests per second",
    "lam* = 24.694 req/s",
    "6 of 8 replicates unstable",
    "covering the true drift in 7 to 9 of 16 seeds",
    "a 95% interval of about +-4%",
    "at 1.6 req/s = 1.39 times its capacity",
    "the described schedule takes 3-22% longer",
])
def test_the_detector_flags_measured_figures(text):
    assert flagged(text), text


@pytest.mark.parametrize("text", [
    "A100 gives 256 x 128 x 32 as the paper states",
    "a Student-t 95% interval over replicates",
    "chi-square (1 degree of freedom, 95%) margin",
    "Eq. 7 on t* alone; Theorem 2's n; 2 x (weights touched per token)",
    "the first and last shape of a series",
])
def test_the_detector_leaves_definitions_alone(text):
    assert not flagged(text), [m.group() for m in flagged(text)]
