"""TOML input shared by the GPU and model profiles and the command line.

:func:`read_toml` turns a missing or malformed file into a :class:`theory.errors.ConfigFileError`
naming the file; :func:`read_packaged` reads a TOML file shipped in ``theory/data``;
:func:`inherit` merges user tables into presets, each user table taking the fields of the preset
named by its ``base`` (or of the preset with its own key) and overriding some of them;
:func:`read_bool` reads a switch, which must be a TOML boolean (``true``/``false``): a string such
as ``"false"`` would be truthy in Python, so it is an error naming the key. :func:`check_keys` refuses
keys a table does not define, naming the nearest valid one, and :func:`read_section` reads the one
top-level table (``[models.*]``, ``[prices.*]``) a user file may hold.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from theory.errors import ConfigFileError, FieldError, UnknownNameError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(path: str | Path) -> dict:
    """The contents of the TOML file at ``path``."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigFileError(f"{path}: file not found") from None
    except OSError as exc:  # a directory, no permission
        raise ConfigFileError(f"{path}: cannot read it as a TOML file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: malformed TOML: {exc}") from None


def read_packaged(name: str) -> dict:
    """The contents of ``theory/data/<name>``."""
    return tomllib.loads(resources.files("theory").joinpath("data", name).read_text(encoding="utf-8"))


def check_keys(table: dict, known, where: str) -> None:
    """Refuse a key of ``table`` that is not in ``known``, naming ``where``, the key and the nearest
    known one.

    Raises
    ------
    FieldError
        For the first unknown key (in sorted order).
    """
    unknown = sorted(str(k) for k in set(table) - set(known))
    if unknown:
        raise FieldError(f"{where}.{unknown[0]}", unknown[0],
                         f"one of the keys {', '.join(sorted(known))}{did_you_mean(unknown[0], known)}")


# the top-level tables of a user profile file: one file may serve as --gpu-file, --model-file and
# --price-file (theory.hardware reads gpus, efficiency, tilesets and gemv)
USER_SECTIONS = ("efficiency", "gemv", "gpus", "models", "prices", "tilesets")


def read_section(path: str | Path, section: str, fields) -> dict:
    """The ``[<section>.<key>]`` tables of the user TOML file at ``path``, each giving only names of
    ``fields`` (or ``base``, :func:`inherit`). A top-level key other than :data:`USER_SECTIONS`, or
    another field, is an error naming the file, the key and the nearest valid name: a misspelled one
    would otherwise be ignored."""
    data = read_toml(path)
    check_keys(data, USER_SECTIONS, str(path))
    tables = data.get(section, {})
    if not isinstance(tables, dict):
        raise FieldError(f"{path}: {section}", tables, f"a table of [{section}.<key>] tables")
    for key, table in tables.items():
        if isinstance(table, dict):
            check_keys(table, {*fields, "base"}, f"{path}: {section}.{key}")
    return tables


def inherit(presets: dict, user: dict, kind: str) -> dict:
    """Presets with the user's ``[<kind>s.<key>]`` tables merged in.

    A user table inherits the preset named by its ``base`` field (by default the preset with the
    same key, if any) and overrides the fields it gives; a new key without ``base`` stands alone.
    """
    resolved = {k: dict(v) for k, v in presets.items()}
    for key, table in user.items():
        if not isinstance(table, dict):
            raise FieldError(f"{kind}s.{key}", table, f"a table of {kind} fields")
        base = table.get("base", key if key in presets else None)
        if base is not None and base not in presets:
            raise UnknownNameError(f"base {kind} (in {kind}s.{key}.base)", str(base), list(presets))
        merged = dict(presets[base]) if base else {}
        merged.update({k: v for k, v in table.items() if k != "base"})
        resolved[key] = merged
    return resolved


def read_bool(table: dict, key: str, where: str, default: bool) -> bool:
    """The boolean ``table[key]`` (``default`` if absent); anything but a TOML boolean is an error.

    Raises
    ------
    FieldError
        Naming ``<where>.<key>`` when the value is not ``true`` or ``false`` (e.g. the string
        ``"false"``, or ``0``).
    """
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, bool):
        raise FieldError(f"{where}.{key}", value, "a TOML boolean, true or false (not a string or number)")
    return value
