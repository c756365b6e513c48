"""Options shared by the ``llmq`` commands, and their merge with a TOML scenario file.

Every option can come from the command line or from ``--config scenario.toml``, whose top-level
keys are the option names with underscores (``gpu = "a100"``, ``gpus_r = 2``). The command line
wins over the file, and the file over the built-in defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from theory.config import read_toml
from theory.errors import FieldError

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


def add_common(parser: argparse.ArgumentParser, *, defaults: dict | None = None) -> None:
    """Add the options every command shares; their defaults live in ``defaults``."""
    d = {**COMMON_DEFAULTS, **(defaults or {})}
    parser.set_defaults(_defaults=d)
    parser.add_argument("--config", help="TOML scenario file with any of these options")
    parser.add_argument("--gpu", help=f"GPU preset, alias or key of --gpu-file (default {d['gpu']})")
    parser.add_argument("--gpu-file", help="TOML file adding or overriding GPU profiles")
    parser.add_argument("--tiles", help="restrict the GPU's tiles, e.g. '128x128' or '256x128x32'")
    parser.add_argument("--model", help=f"model preset or key of --model-file (default {d['model']})")
    parser.add_argument("--model-file", help="TOML file adding or overriding model profiles")
    parser.add_argument("--mode", choices=["paper", "real"],
                        help="paper: the paper's single-head 2-matrix-FFN layer; real: GQA + SwiGLU")
    parser.add_argument("--workload",
                        help="table1, sharegpt4, deterministic:LP,LD, uniform:a-b,c-d or a CSV path")
    parser.add_argument("--pad", action="store_true", default=None,
                        help="pad prompts up to multiples of t*_lcm (Assumption 3)")
    parser.add_argument("--gpus-r", type=int, help="number of inference nodes r")
    parser.add_argument("--seed", type=int, help="random seed")
    parser.add_argument("--out", help="output directory")
    parser.add_argument("--json", action="store_true", default=None, help="print JSON")


def resolve(args: argparse.Namespace) -> dict:
    """Merge defaults < config file < command line into one dict of option values."""
    values = dict(args._defaults)
    if getattr(args, "config", None):
        path = Path(args.config)
        config = read_toml(path)
        unknown = set(config) - set(values)
        if unknown:
            raise FieldError(f"{path}", sorted(unknown), f"only the keys {', '.join(sorted(values))}")
        values.update(config)
    for key in values:
        cli = getattr(args, key, None)
        if cli is not None:
            values[key] = cli
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
    """The workload the options describe, padded to t*_lcm when ``pad`` is set (Assumption 3)."""
    from theory.workload import get_workload

    w = get_workload(values["workload"])
    if values.get("pad"):
        if cm is None:
            cm = build_cost_model_from(values)
        w = w.padded(cm.t_lcm)
    return w
