"""``--option SCHED.NAME=VALUE``: scheduler options on the command line and in a config file, read
with one syntax by every command (:func:`scheduler_options`) and checked against the scheduler
registry before any run (:func:`check_scheduler_options`): a name the scheduler does not take is an
error naming the nearest one it does, a value its ``make_params`` refuses an error naming the option.
"""

from __future__ import annotations

from llmq.options import parse_value
from theory.errors import FieldError, did_you_mean


def option_items(value) -> list[str]:
    """``--option`` items from the command line (a list of ``SCHED.NAME=VALUE``) or a config file: a
    list of such strings, or a table ``{SCHED = {NAME = VALUE}}`` (``{NAME = VALUE}`` for one
    scheduler)."""
    if isinstance(value, dict):
        out = []
        for key, v in value.items():
            pairs = v.items() if isinstance(v, dict) else [(None, v)]
            out += [f"{key}.{k}={x}" if k is not None else f"{key}={x}" for k, x in pairs]
        return out
    return [str(v) for v in (value or [])]


def scheduler_options(value, schedulers, *, alternatives: bool = False,
                      field: str = "--option") -> dict[str, dict[str, list]]:
    """``--option`` items as ``{scheduler: {name: [value, ...]}}`` (one value each, or with
    ``alternatives`` the ``V1|V2`` values to try).

    ``SCHED.`` may be left out when ``schedulers`` holds one; a scheduler not among ``schedulers``, an
    option given twice or an empty value is an error naming the item.
    """
    schedulers = list(schedulers)
    syntax = "SCHEDULER.NAME=VALUE, e.g. rad.n=2000" + (" or sarathi.chunk_size=256|512" if alternatives
                                                         else "")
    out: dict[str, dict[str, list]] = {}
    for item in option_items(value):
        name, eq, text = item.partition("=")
        sched, dot, opt = name.strip().rpartition(".")
        if not dot and len(schedulers) == 1:
            sched = schedulers[0]
        if not (eq and sched and opt.strip() and text.strip()):
            raise FieldError(field, item, syntax + ("" if len(schedulers) == 1 else
                                                    " (SCHEDULER. may be left out with one scheduler)"))
        if sched not in schedulers:
            among = f"a scheduler among --scheduler ({', '.join(schedulers)})"
            raise FieldError(f"{field} {item}", sched, among + did_you_mean(sched, schedulers))
        if "|" in text and not alternatives:
            raise FieldError(field, item, "one value per option (V1|V2 gives values to try in llmq plan)")
        parts = [v.strip() for v in text.split("|")]
        if any(not v for v in parts):
            raise FieldError(field, item, syntax)
        opts = out.setdefault(sched, {})
        if opt.strip() in opts:
            raise FieldError(field, item, f"each option once ({sched}.{opt.strip()} is given twice)")
        opts[opt.strip()] = [parse_value(v) for v in parts]
    return out


def check_scheduler_options(options: dict, cost_model, *, auto: tuple = (), classes: tuple = (),
                            field: str = "--option") -> None:
    """Every option a name its scheduler takes (else the error names the nearest), and every value,
    or combination of the values to try, one its ``make_params`` accepts on the cost model that
    ``cost_model()`` builds (called only when there are values to check); ``(scheduler, name)`` pairs
    in ``auto`` may also be ``"auto"`` (resolved later)."""
    from itertools import product

    from stability.sim.registry import get_scheduler, option_names
    from stability.sim.simulate import make_params
    from theory.errors import LlmqError

    for sched, opts in options.items():
        module = get_scheduler(sched)
        accepted = option_names(module)
        for name in opts:
            if name not in accepted:
                raise FieldError(f"{field} {sched}.{name}", name,
                                 f"an option of {sched}: {', '.join(accepted) or '(none)'}"
                                 + did_you_mean(name, accepted))
        if not opts:
            continue
        cm = cost_model()
        for combo in product(*opts.values()):
            given = {k: v for k, v in zip(opts, combo, strict=True)
                     if not ((sched, k) in auto and str(v).strip().lower() == "auto")}
            try:
                make_params(module, cm, given, classes)
            except FieldError as exc:
                raise FieldError(f"{field} {sched}.{exc.field}", exc.value, exc.expected) from None
            except (LlmqError, TypeError, ValueError) as exc:
                raise FieldError(f"{field} {sched}", given, f"values {sched} accepts ({exc})") from None
