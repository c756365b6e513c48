"""One option language: every command's options, walked from the ``llmq`` parser, mean the same
thing wherever their name appears (:data:`llmq.options.MEANINGS`), every command takes ``--config``
and ``--json``, every option can come from the config file, and old spellings are errors that
name the new one."""

from __future__ import annotations

import argparse

import pytest

from llmq.cli import COMMANDS, build_parser
from llmq.options import MEANINGS, Meaning, _Renamed, command, dest_of

ALL_COMMANDS = {"bounds", "simulate", "region", "dtmc", "check", "slai", "calibrate", "validate", "plan"}


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers of ``parser`` by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The options of one command by flag (help and old spellings aside)."""
    return {flag: a for a in p._actions for flag in a.option_strings
            if not isinstance(a, (argparse._HelpAction, _Renamed))}


def kind_of(action: argparse.Action) -> str:
    """The kind of value (:data:`llmq.options.KINDS`) an argparse action takes."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "flag"
    if isinstance(action, argparse._AppendAction):
        return "repeat"
    return {int: "int", float: "float", None: "text", str: "text"}.get(action.type, repr(action.type))


def conflicts(parsers: dict[str, argparse.ArgumentParser], meanings: dict[str, Meaning]) -> list[str]:
    """Every way an option name has two meanings: a name shared by commands but not declared in
    ``meanings``, or a command whose option of a declared name has another key, kind of value or
    help than the declared meaning."""
    by_flag: dict[str, list[str]] = {}
    for name, p in parsers.items():
        for flag in options(p):
            by_flag.setdefault(flag, []).append(name)
    out = [f"{flag} is shared by {', '.join(names)} but has no declared meaning"
           for flag, names in by_flag.items() if len(names) > 1 and flag not in meanings]
    for name, p in parsers.items():
        for flag, action in options(p).items():
            m = meanings.get(flag)
            if m is None:
                continue
            if action.dest != dest_of(flag):
                out.append(f"{name} {flag}: key {action.dest!r}, not {dest_of(flag)!r}")
            if kind_of(action) != m.kind:
                out.append(f"{name} {flag}: a {kind_of(action)} value, not a {m.kind}")
            if not (action.help or "").startswith(m.text):
                out.append(f"{name} {flag}: help {action.help!r} does not begin with its meaning {m.text!r}")
    return out


def test_every_command_is_walked():
    assert set(commands(build_parser())) == ALL_COMMANDS == {c.add_parser.__module__.rsplit(".", 1)[1]
                                                             for c in COMMANDS}


def test_a_shared_option_name_has_one_meaning_everywhere():
    assert conflicts(commands(build_parser()), MEANINGS) == []


def test_the_walk_finds_a_name_with_two_meanings():
    """The check can fail: two commands giving ``--requests`` other meanings, or a shared name not
    declared, are reported."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    a, b = command(sub, "a", "a"), command(sub, "b", "b")
    for p, help_ in ((a, MEANINGS["--requests"].text), (b, "requests per node in total")):
        p.add_argument("--requests", type=int, help=help_)
        p.add_argument("--colour", help="a colour")
    b.add_argument("--seed", help="random seed")  # text, where a seed is an int
    found = conflicts(commands(parser), MEANINGS)
    assert any(f.startswith("b --requests: help") for f in found)
    assert any("--colour is shared" in f for f in found)
    assert any(f.startswith("b --seed: a text value") for f in found)
    assert not any(f.startswith("a --requests") for f in found)


def test_requests_count_all_nodes_and_region_says_per_node():
    """``--requests`` counts a run's requests over all its nodes wherever it is offered; region,
    whose runs grow with r, takes ``--requests-per-node`` and refuses the old spelling by name."""
    parsers = commands(build_parser())
    offered = [n for n, p in parsers.items() if "--requests" in options(p)]
    assert "simulate" in offered and "region" not in offered
    assert "all nodes together" in MEANINGS["--requests"].text
    assert "--requests-per-node" in options(parsers["region"])
    with pytest.raises(SystemExit):
        parsers["region"].parse_args(["--requests", "600"])


def test_shared_names_of_the_issue_mean_one_thing():
    """``--gpu`` and ``--scheduler`` take one or a list everywhere, ``--option`` carries scheduler
    options, ``--gpus-r`` counts replicas: each offered by several commands, each declared."""
    offered = {flag: [n for n, p in commands(build_parser()).items() if flag in options(p)]
               for flag in ("--gpu", "--scheduler", "--option", "--gpus-r")}
    assert all(len(names) >= 2 for names in offered.values()), offered
    assert "one or a comma-separated list" in MEANINGS["--gpu"].text
    assert "one or a comma-separated list" in MEANINGS["--scheduler"].text
    assert MEANINGS["--option"].text.startswith("scheduler option")
    assert "replicas" in MEANINGS["--gpus-r"].text


@pytest.mark.parametrize("name", sorted(ALL_COMMANDS))
def test_every_command_takes_config_and_json_and_every_option_has_a_config_key(name):
    p = commands(build_parser())[name]
    flags = options(p)
    assert "--config" in flags and "--json" in flags
    defaults = p.get_default("_defaults")
    assert set(defaults) == {a.dest for flag, a in flags.items() if flag != "--config"}
    for flag, action in flags.items():  # --no-NAME sets NAME, true by default, false
        if flag.startswith("--no-"):
            assert isinstance(action, argparse._StoreFalseAction) and defaults[action.dest] is True, flag


def test_old_spellings_name_their_new_option():
    for name, p in commands(build_parser()).items():
        for action in p._actions:
            if isinstance(action, _Renamed):
                assert action.new in options(p), (name, action.option_strings, action.new)


@pytest.mark.parametrize("argv, new", [
    (["plan", "--gpus", "a100"], "--gpu"),
    (["plan", "--schedulers", "rad"], "--scheduler"),
    (["plan", "--knob", "sarathi.chunk_size=256|512"], "--option"),
    (["check", "--fast"], "--quick"),
])
def test_an_old_spelling_is_an_error_naming_the_new_one(capsys, argv, new):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert f"{argv[1]} was renamed {new}" in capsys.readouterr().err


def test_no_abbreviation_is_read_as_another_option(capsys):
    """``--gpus`` is not taken for ``--gpus-r``, nor ``--sched`` for ``--scheduler``."""
    for argv in (["simulate", "--gpus", "2"], ["region", "--sched", "rad"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        assert f"unrecognized arguments: {argv[1]}" in capsys.readouterr().err
