"""The one option layer of the ``llmq`` commands: what each option name means, how a command
declares its options, and how the command line and a ``--config`` file merge.

Every command is made by :func:`command` and declares each option with :func:`add`, which records
its default. An option name means the same thing in every command that offers it: its meaning is
declared once in :data:`MEANINGS` (the first words of its help, and its kind of value), and
``tests/test_option_names.py`` fails on a shared name with two meanings. A name that takes "one
or a list" (``--gpu``, ``--model``, ``--mode``, ``--scheduler``, ``--gpus-r``, ``--epsilon``)
has the same syntax everywhere, a comma-separated list (:func:`parse_names`), and a command that
runs one says so when given several (:func:`one`).

Every option can come from the command line or from ``--config scenario.toml``, whose top-level
keys are the option names with underscores (``gpu = "a100"``, ``gpus_r = 2``). The command line
wins over the file, and the file over the built-in defaults; a key the command does not offer is
an error naming the nearest one (:func:`resolve`). Old spellings (``plan --gpus``) are errors
naming the new one (:func:`renamed`), never reinterpreted. Scheduler options (``--option
SCHED.NAME=VALUE``) are read and checked by :mod:`llmq.scheduler_options`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from theory.config import read_toml
from theory.errors import FieldError, UnknownNameError, did_you_mean, require_seed

KINDS = ("flag", "int", "float", "text", "repeat")


@dataclass(frozen=True)
class Meaning:
    """What an option name means in every command that offers it.

    Attributes
    ----------
    text : str
        The first words of the option's help in every command (a command adds its details after).
    kind : str
        One of :data:`KINDS`: ``flag`` (no value), ``int``, ``float``, ``text`` (a name, a path,
        or one-or-a-list of names or numbers, parsed by the command) or ``repeat`` (repeatable).
    """

    text: str
    kind: str


MEANINGS = {
    "--config": Meaning("TOML scenario file with any of these options", "text"),
    "--json": Meaning("print JSON", "flag"),
    "--out": Meaning("output directory", "text"),
    "--seed": Meaning("random seed", "int"),
    "--workers": Meaning("local worker processes", "int"),
    "--dask": Meaning("run on this Dask scheduler", "text"),
    "--no-progress": Meaning("no progress bar", "flag"),
    "--cache": Meaning("result cache directory", "text"),
    "--quick": Meaning("a small, quick version", "flag"),
    "--gpu": Meaning("GPU preset(s): name, alias or key of --gpu-file, NAME:TILES restricts the tiles; "
                     "one or a comma-separated list", "text"),
    "--gpu-file": Meaning("TOML file adding or overriding GPU profiles", "text"),
    "--tiles": Meaning("restrict the GPU's tiles, e.g. '128x128' or '256x128x32'", "text"),
    "--model": Meaning("model preset(s) or key(s) of --model-file; one or a comma-separated list", "text"),
    "--model-file": Meaning("TOML file adding or overriding model profiles", "text"),
    "--price-file": Meaning("TOML file adding or overriding GPU prices ([prices.<gpu>], base =)", "text"),
    "--precision": Meaning("precision of the weights and KV cache: bf16 (the paper's) or fp8 (one byte per "
                           "element, the GPU's FP8 tensor rates; not on Ampere); default: the model's own, "
                           "as MODEL:PRECISION spells it", "text"),
    "--mode": Meaning("layer model: paper (the paper's single-head 2-matrix-FFN layer) or real "
                      "(GQA + SwiGLU); one or a comma-separated list", "text"),
    "--workload": Meaning("length law of the requests: table1, sharegpt4, deterministic:LP,LD, "
                          "uniform:a-b,c-d, mix:W1*SPEC1+W2*SPEC2 or a CSV path", "text"),
    "--pad": Meaning("pad prompts up to multiples of t*_lcm (Assumption 3)", "flag"),
    "--raw": Meaning("raw prompts only, not padded", "flag"),
    "--gpus-r": Meaning("number of inference nodes (replicas) r", "text"),
    "--scheduler": Meaning("scheduler(s): one or a comma-separated list", "text"),
    "--option": Meaning("scheduler option SCHED.NAME=VALUE (repeatable; SCHED. may be left out with one "
                        "scheduler)", "repeat"),
    "--rate": Meaning("arrival rate into the system, requests/s", "float"),
    "--load": Meaning("arrival rate as a fraction of lambda*", "float"),
    "--requests": Meaning("requests per simulation run, all nodes together", "int"),
    "--seeds": Meaning("replicates (seeds) per point", "int"),
    "--trace": Meaning("CSV trace replayed as the arrivals (columns arrival_time, prompt_len, "
                       "output_len), or a packaged one: azure-code-2023, azure-conv-2023", "text"),
    "--stages": Meaning("a load schedule DURATION:RATE[:KIND],... (seconds, req/s, poisson or "
                        "deterministic), e.g. 60:2,60:4 (stability.sim.arrivals)", "text"),
    "--classes": Meaning("request classes with TBT SLOs NAME:PROB:TBT,..., e.g. "
                         "paying:0.05:0.1,free:0.95:0.5 (Section 7)", "text"),
    "--epsilon": Meaning("Theorem 2's margin eps in (0, 1)", "text"),
    "--confidence": Meaning("confidence level of the intervals", "float"),
}

_ACTIONS = {"flag": {"action": "store_true"}, "int": {"type": int}, "float": {"type": float}, "text": {},
            "repeat": {"action": "append"}}


def dest_of(flag: str) -> str:
    """The option's key in a config file and in the resolved values: ``--gpus-r`` -> ``gpus_r``;
    ``--no-progress`` -> ``progress`` (a ``--no-NAME`` flag sets ``NAME`` false)."""
    return flag.removeprefix("--").removeprefix("no-").replace("-", "_")


def command(sub, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """A command's parser on the sub-command parser ``sub``, with ``--config``; abbreviated option
    names are not accepted (``--gpus`` would otherwise be read as ``--gpus-r``)."""
    p = sub.add_parser(name, help=help, description=description or help, allow_abbrev=False)
    p.set_defaults(_defaults={})
    p.add_argument("--config", help=MEANINGS["--config"].text + "; keys are the option names with "
                                                               "underscores (gpus_r = 2)")
    return p


def add(p: argparse.ArgumentParser, flag: str, default=None, detail: str = "", *, to=None,
        **kwargs) -> None:
    """Declare the option ``flag`` of the command ``p`` with its ``default`` (what :func:`resolve`
    gives when neither the command line nor the config file sets it).

    A name of :data:`MEANINGS` takes its kind of value from there and its help begins with its
    meaning, ``detail`` following; any other name's help is ``detail``. ``to`` is a group of ``p``
    (mutually exclusive options); ``kwargs`` go to :meth:`argparse.ArgumentParser.add_argument`.
    """
    meaning = MEANINGS.get(flag)
    dest = dest_of(flag)
    if meaning is not None:
        kwargs = {**_ACTIONS[meaning.kind], **kwargs}
        detail = meaning.text + (f"; {detail}" if detail else "")
    if flag.startswith("--no-"):  # sets NAME false (its default true)
        kwargs["action"] = "store_false"
    (to or p).add_argument(flag, dest=dest, default=None, help=detail, **kwargs)
    p.get_default("_defaults")[dest] = default


class _Renamed(argparse.Action):
    """An old spelling: using it is an error naming the new one."""

    def __init__(self, option_strings, dest, new: str, why: str = "", **kwargs):
        self.new, self.why = new, why
        super().__init__(option_strings, dest, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} was renamed {self.new}" + (f" ({self.why})" if self.why else ""))


def renamed(p: argparse.ArgumentParser, old: str, new: str, why: str = "") -> None:
    """Refuse the old spelling ``old`` of the option now called ``new`` (exit status 2, one line)."""
    p.add_argument(old, dest=f"renamed_{dest_of(old)}", action=_Renamed, new=new, why=why)


# the options most commands share, with their usual defaults and details
COMMON_DEFAULTS = {
    "gpu": "a100",
    "gpu_file": None,
    "tiles": None,
    "model": "mistral-7b",
    "model_file": None,
    "precision": None,
    "mode": "paper",
    "workload": "table1",
    "pad": False,
    "gpus_r": 1,
    "seed": 0,
    "out": "out",
    "json": False,
}


def add_common(p: argparse.ArgumentParser, names, defaults: dict | None = None,
               details: dict | None = None) -> None:
    """Declare the shared options ``names`` (keys of :data:`COMMON_DEFAULTS`) of the command ``p``;
    ``defaults`` and ``details`` (by name) change a command's default or add to its help."""
    d = {**COMMON_DEFAULTS, **(defaults or {})}
    more = details or {}
    usual = {"gpu": f"default {d['gpu']}", "model": f"default {d['model']}", "mode": f"default {d['mode']}",
             "gpus_r": f"default {d['gpus_r']}", "out": f"default {d['out']}"}
    for name in names:
        flag = "--" + name.replace("_", "-")
        kwargs = {"metavar": "DIR"} if name == "out" else {}
        add(p, flag, d[name], more.get(name, usual.get(name, "")), **kwargs)


class Values(dict):
    """The resolved option values by key; ``given`` names those the command line or the config
    file set (the others are the defaults)."""

    given: frozenset = frozenset()


def _typed(where: str, value, default):
    """A config-file value checked against the type of the option's default (a string where a
    boolean is expected is an error, never a silent true)."""
    if isinstance(default, bool):
        ok, expected = isinstance(value, bool), "true or false (a TOML boolean)"
    elif isinstance(default, int):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif isinstance(default, str):
        ok, expected = isinstance(value, str), "a string"
    elif isinstance(default, list):
        ok = isinstance(value, (list, dict, str, int, float)) and not isinstance(value, bool)
        expected = "a list (or a comma-separated string)"
    else:  # no default: a name, a path or a number
        ok, expected = isinstance(value, (str, int, float)) and not isinstance(value, bool), \
            "a string or a number"
    if not ok:
        raise FieldError(where, value, expected)
    return value


def resolve(args: argparse.Namespace) -> Values:
    """Merge defaults < config file < command line into one :class:`Values`; a config key the
    command does not offer is an error naming the nearest one it does."""
    values = Values(args._defaults)
    given = set()
    if getattr(args, "config", None):
        path = Path(args.config)
        config = read_toml(path)
        unknown = sorted(set(config) - set(values))
        if unknown:
            raise FieldError(f"{path}: {unknown[0]}", unknown[0], f"only the keys {', '.join(sorted(values))}"
                                                                  f"{did_you_mean(unknown[0], values)}")
        for key, value in config.items():
            values[key] = _typed(f"{path}: {key}", value, values[key])
        given |= set(config)
    for key in values:
        cli = getattr(args, key, None)
        if cli is not None:
            values[key] = cli
            given.add(key)
    values.given = frozenset(given)
    if values.get("precision") is not None:
        _apply_precision(values)
    if "seed" in values:
        require_seed("--seed", values["seed"])
    return values


def _apply_precision(values: Values) -> None:
    """``--precision P`` as the models' field: each name of ``--model`` becomes ``NAME:P``
    (:func:`theory.models.get_model`); a name that already states a precision is an error."""
    from theory.precision import check_precision

    precision = check_precision(values["precision"], "--precision")
    names = parse_names("--model", values["model"])
    stated = [n for n in names if ":" in n]
    if stated:
        raise FieldError("--model", stated[0], f"a model name without ':PRECISION' when --precision "
                                               f"{precision} is given")
    values["model"] = ",".join(f"{n}:{precision}" for n in names)


# --- values ----------------------------------------------------------------------------------------


def parse_value(text: str):
    """An option value from the command line: ``true``/``false`` (any case) as booleans, integers and
    floats as numbers, anything else as the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return text


def _items(field: str, value) -> list[str]:
    """The items of a TOML list or of a comma-separated string, stripped; an empty one is an error."""
    raw = list(value) if isinstance(value, (list, tuple)) else str(value).split(",")
    out = [str(v).strip() for v in raw]
    if not out or any(not v for v in out):
        raise FieldError(field, value, "comma-separated items, none of them empty")
    return out


def parse_floats(field: str, value, expected: str = "comma-separated numbers") -> list[float]:
    """Numbers from a TOML list or a comma-separated string; an error names ``field``."""
    try:
        return [float(v) for v in _items(field, value)]
    except (TypeError, ValueError):
        raise FieldError(field, value, expected) from None


def parse_ints(field: str, value, expected: str = "comma-separated integers >= 1, e.g. 1,2,4") -> list[int]:
    """Integers from a TOML list or a comma-separated string; an error names ``field``."""
    try:
        return [int(v) for v in _items(field, value)]
    except (TypeError, ValueError):
        raise FieldError(field, value, expected) from None


def parse_names(field: str, value) -> list[str]:
    """Names from a TOML list or a comma-separated string, stripped; an empty or repeated name is an
    error naming ``field`` (a repeated one would run twice, or be dropped without a word)."""
    names = _items(field, value)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise FieldError(field, value, f"each name once ({twice[0]!r} is given twice)")
    return names


def parse_gpus(field: str, value) -> list[str]:
    """GPU names (:func:`parse_names`); ``NAME:TILES`` must give tiles after the colon."""
    names = parse_names(field, value)
    for name in names:
        base, colon, tiles = name.partition(":")
        if colon and not (base.strip() and tiles.strip()):
            raise FieldError(field, name, "a GPU name, or NAME:TILES such as a100:128x128 (tiles after "
                                          "the colon)")
    return names


def one(field: str, value, what: str, command: str) -> str:
    """The one name ``value`` of an option that takes one or a list, where ``command`` runs one."""
    names = parse_names(field, value)
    if len(names) != 1:
        raise FieldError(field, value, f"one {what} (llmq {command} runs one at a time)")
    return names[0]


def one_int(field: str, value, command: str) -> int:
    """The one integer >= 1 ``value`` (an int from a config file, or the text of one)."""
    if isinstance(value, bool):
        raise FieldError(field, value, "an integer >= 1")
    text = one(field, value, "integer", command) if not isinstance(value, int) else value
    try:
        n = int(text)
    except ValueError:
        raise FieldError(field, value, "an integer >= 1") from None
    if n < 1:
        raise FieldError(field, value, "an integer >= 1")
    return n


def one_float(field: str, value, expected: str, command: str) -> float:
    """The one number ``value`` (a number from a config file, or the text of one)."""
    if isinstance(value, bool):
        raise FieldError(field, value, expected)
    text = value if isinstance(value, (int, float)) else one(field, value, "number", command)
    try:
        return float(text)
    except ValueError:
        raise FieldError(field, value, expected) from None


def parse_modes(field: str, value) -> list[str]:
    """Layer modes: ``paper`` and/or ``real``."""
    modes = parse_names(field, value)
    for m in modes:
        if m not in ("paper", "real"):
            raise UnknownNameError(f"layer mode ({field})", m, ("paper", "real"))
    return modes


def single(values: Values, command: str, *keys: str) -> Values:
    """``values`` with each of ``keys`` (``gpu``, ``model``, ``mode``, ``gpus_r``, ``epsilon``) checked
    and reduced to its one value, for a command that runs one (a list is an error naming the option)."""
    out = Values(values)
    out.given = values.given
    for key in keys:
        field, v = "--" + key.replace("_", "-"), values[key]
        if key == "gpu":
            out[key] = one(field, parse_gpus(field, v), "GPU", command)
        elif key == "model":
            out[key] = one(field, v, "model", command)
        elif key == "mode":
            out[key] = one(field, parse_modes(field, v), "layer mode", command)
        elif key == "gpus_r":
            out[key] = one_int(field, v, command)
        elif key == "epsilon":
            out[key] = one_float(field, v, "a number in (0, 1)", command)
            if not 0 < out[key] < 1:
                raise FieldError(field, v, "a number in (0, 1)")
        else:
            raise ValueError(f"single: no rule for {key!r}")
    return out


def trace_rate(path: str, field: str = "--trace", n: int | None = None) -> float:
    """The mean arrival rate of the trace at ``path`` (of its first ``n`` requests),
    ``(n - 1) / (last - first arrival)``, as the simulator measures a replayed trace's rate; a
    trace without arrival times, or with fewer than two, is an error naming ``field``."""
    import numpy as np

    from theory.workload import read_trace

    t = read_trace(path).arrival_time
    if t is None:
        raise FieldError(f"{field} {path}: arrival_time", None, "a column of arrival times (seconds)")
    t = np.asarray(t, dtype=float)[:n]
    if t.size < 2 or not np.all(np.diff(t) >= 0) or t[-1] <= t[0]:
        raise FieldError(f"{field} {path}: arrival_time", int(t.size),
                         "at least two non-decreasing arrival times spanning some time (its rate is "
                         "(n - 1) / (last - first))")
    return float((t.size - 1) / (t[-1] - t[0]))


# --- the model the options describe ------------------------------------------------------------------


def cost_spec_from(values: dict, gpu_name: str | None = None):
    """The :class:`theory.builder.CostSpec` the options describe (GPU, tiles, model, mode, files)."""
    from theory.builder import CostSpec

    return CostSpec(gpu_name or values["gpu"], values["model"], values["mode"], values.get("tiles"),
                    values.get("gpu_file"), values.get("model_file"))


def build_cost_model_from(values: dict, gpu_name: str | None = None):
    """The :class:`theory.cost.CostModel` the options describe, from the one builder."""
    from theory.builder import cost_model

    return cost_model(cost_spec_from(values, gpu_name))


def build_workload_from(values: dict, cm=None):
    """The workload the options describe, padded to t*_lcm when ``pad`` is set (Assumption 3), and
    checked against the model's context window (:func:`check_fits_context`)."""
    from theory.workload import get_workload

    if cm is None:
        cm = build_cost_model_from(values)
    w = get_workload(values["workload"])
    if values.get("pad"):
        w = w.padded(cm.t_lcm)
    check_fits_context(cm.model, w, spec=values["workload"])
    return w


def check_fits_context(model, law, *, spec: str | None = None, trace: str | None = None,
                       total_cap: int | None = None, field: str = "--workload") -> None:
    """The context-window rule at the edge of every command that takes a model and lengths: every
    request must have ``L^P + L^D <= model.context_length`` (:func:`theory.workload.check_context`).

    The rows of each CSV trace read (``trace``, or CSVs in the workload ``spec``) are checked first,
    so a bad row is named; then the law as the command runs it (capped at ``total_cap``, padded),
    which also catches padding that pushes a request past the limit. Nothing is capped silently.
    """
    from theory.workload import check_context, check_trace_context, csv_paths

    paths = [(trace, "--trace")] if trace else []
    paths += [(p, field) for p in csv_paths(spec)] if spec else []
    for path, name in paths:
        check_trace_context(path, model.context_length, model.key, name, total_cap)
    check_context(law, model.context_length, model.key, "--trace" if trace else field)
