"""Options shared by the ``llmq`` commands, and their merge with a TOML scenario file.

Every option can come from the command line or from ``--config scenario.toml``, whose top-level
keys are the option names with underscores (``gpu = "a100"``, ``gpus_r = 2``). The command line
wins over the file, and the file over the built-in defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from theory.config import read_toml
from theory.errors import FieldError, require_seed

COMMON_DEFAULTS = {
    "gpu": "a100",
    "gpu_file": None,
    "model": "mistral-7b",
    "model_file": None,
    "mode": "paper",
    "workload": "table1",
    "pad": False,
    "tiles": None,
    "gpus_r": 1,
    "seed": 0,
    "out": "out",
    "json": False,
}


def add_common(parser: argparse.ArgumentParser, *, defaults: dict | None = None,
               overrides: dict | None = None, omit: tuple[str, ...] = ()) -> None:
    """Add the options every command shares; their defaults live in ``defaults``.

    ``overrides`` maps an option's name (``"gpus_r"``) to the ``add_argument`` keywords a command
    changes (e.g. ``{"type": str, "help": "..."}`` where ``--gpus-r`` takes a list); ``omit`` names
    the shared options a command has no use for, which it then does not offer (nor accept in a
    config file).
    """
    d = {k: v for k, v in {**COMMON_DEFAULTS, **(defaults or {})}.items() if k not in omit}
    over = overrides or {}
    parser.set_defaults(_defaults=d)

    def add(flag: str, **kwargs) -> None:
        name = flag[2:].replace("-", "_")
        if name not in omit:
            parser.add_argument(flag, **{**kwargs, **over.get(name, {})})

    parser.add_argument("--config", help="TOML scenario file with any of these options")
    add("--gpu", help=f"GPU preset, alias or key of --gpu-file (default {d['gpu']})")
    add("--gpu-file", help="TOML file adding or overriding GPU profiles")
    add("--tiles", help="restrict the GPU's tiles, e.g. '128x128' or '256x128x32'")
    add("--model", help=f"model preset or key of --model-file (default {d['model']})")
    add("--model-file", help="TOML file adding or overriding model profiles")
    add("--mode", choices=["paper", "real"],
                        help="paper: the paper's single-head 2-matrix-FFN layer; real: GQA + SwiGLU")
    add("--workload",
                        help="table1, sharegpt4, deterministic:LP,LD, uniform:a-b,c-d or a CSV path")
    add("--pad", action="store_true", default=None,
                        help="pad prompts up to multiples of t*_lcm (Assumption 3)")
    add("--gpus-r", type=int, help="number of inference nodes r")
    add("--seed", type=int, help="random seed")
    add("--out", help="output directory")
    add("--json", action="store_true", default=None, help="print JSON")


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


def parse_options(items) -> tuple:
    """``["n=2000", "order=spf", "memory=false"]`` -> ``(("memory", False), ("n", 2000), ("order",
    "spf"))``; a TOML table's values keep their TOML types."""
    if isinstance(items, dict):
        return tuple(sorted(items.items()))
    out = {}
    for item in items or []:
        name, sep, value = str(item).partition("=")
        if not sep or not name.strip():
            raise FieldError("--option", item, "NAME=VALUE")
        out[name.strip()] = parse_value(value)
    return tuple(sorted(out.items()))


def _items(value) -> list:
    """A list from a config file, or the comma-separated items of a command-line string."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [v for v in items if str(v).strip()]


def parse_floats(field: str, value, expected: str = "comma-separated numbers") -> list[float]:
    """Numbers from a TOML list or a comma-separated string; an error names ``field``."""
    try:
        return [float(v) for v in _items(value)]
    except (TypeError, ValueError):
        raise FieldError(field, value, expected) from None


def parse_ints(field: str, value, expected: str = "comma-separated integers >= 1, e.g. 1,2,4") -> list[int]:
    """Integers from a TOML list or a comma-separated string; an error names ``field``."""
    try:
        return [int(v) for v in _items(value)]
    except (TypeError, ValueError):
        raise FieldError(field, value, expected) from None


def parse_names(value) -> list[str]:
    """Names from a TOML list or a comma-separated string, stripped."""
    return [str(v).strip() for v in _items(value)]


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


def resolve(args: argparse.Namespace) -> dict:
    """Merge defaults < config file < command line into one dict of option values."""
    values = dict(args._defaults)
    if getattr(args, "config", None):
        path = Path(args.config)
        config = read_toml(path)
        unknown = set(config) - set(values)
        if unknown:
            raise FieldError(f"{path}", sorted(unknown), f"only the keys {', '.join(sorted(values))}")
        for key, value in config.items():
            values[key] = _typed(f"{path}: {key}", value, values[key])
    for key in values:
        cli = getattr(args, key, None)
        if cli is not None:
            values[key] = cli
    if "seed" in values:
        require_seed("seed", values["seed"])
    return values


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
