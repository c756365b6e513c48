"""``llmq``: the command line of the toolkit (see ``llmq <command> --help``)."""

from __future__ import annotations

import argparse
import sys

from llmq.commands import bounds, calibrate, check, dtmc, plan, region, simulate, slai, validate

COMMANDS = (region, bounds, simulate, dtmc, slai, check, calibrate, validate, plan)


def _version() -> str:
    """The version in the source tree's ``pyproject.toml``, else the installed distribution's."""
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    from theory.config import read_toml

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():  # run from a source tree
        return str(read_toml(pyproject)["project"]["version"])
    try:
        return version("llmq")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The ``llmq`` argument parser with every sub-command of ``COMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="llmq",
        description="Queueing theory of LLM inference scheduling (Bari, Hegde, de Veciana 2025): "
                    "tile-based batch-time model, throughput bounds, simulator, paper checks.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one ``llmq`` command; bad input exits with status 2 and a one-line message, a failing
    file system (a full disk) with status 1 and one line, Ctrl-C with status 130 and one line (how
    many runs are cached where, for a sweep)."""
    from theory.errors import LlmqError

    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except LlmqError as exc:
        print(f"llmq {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not the input: a full disk, a vanished directory
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"llmq {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # a sweep says what it cached; a bare Ctrl-C has no message
        print(f"llmq {args.command}: {str(exc) or 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
