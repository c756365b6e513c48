"""``llmq calibrate``: fit a GPU profile's rates to measured GeMM or batch timings (Eq. 2-7)."""

from __future__ import annotations

from llmq.options import add, add_common, command, resolve, single
from llmq.output import out_dir, print_json

HELP = "fit a GPU profile's tile rates, GeMV rates, mu_nLin and overhead to measured timings (CSV)"


def add_parser(sub) -> None:
    """Register ``llmq calibrate`` and its options on the sub-command parser ``sub``."""
    p = command(sub, "calibrate", HELP, HELP + ". GeMM timings have columns "
                "d_row,d_col,d_red,seconds[,count]; batch timings prefill_tokens|tokens, decode_count, "
                "decode_positions|decode_context_sum, [prefill_start,] seconds.")
    add(p, "--timings", "vidur-a100-llama2-7b", "timings CSV, or a packaged example (default vidur-a100-"
                                                "llama2-7b: vidur's A100 Llama-2-7B linear-layer GeMMs)")
    add_common(p, ("gpu", "model", "mode", "tiles", "seed", "out", "json"),
               defaults={"model": "llama-2-7b", "mode": "real"},
               details={"gpu": "the base preset whose rates are fitted (default a100)",
                        "tiles": "before fitting, e.g. '256x128x32,128x64'",
                        "seed": "of the random starts of the GeMM fit (default 0)",
                        "out": "the profile is written to OUT/<key>.toml (default out)"})
    add(p, "--no-overhead", True, "fit no fixed time per GeMM / per batch (the paper's Eq. 2 and Eq. 7)",
        action="store_false")
    add(p, "--floor", False, "GeMM timings: fit the memory floor's achievable DRAM bandwidth with the rates "
                             "(the profile gets memory_floor = true and the fitted eta_mem; theory.terms)",
        action="store_true")
    add(p, "--waves", False, "GeMM timings: fit with wave quantization (the profile gets waves = true)",
        action="store_true")
    add(p, "--l2", False, "GeMM timings: fit the L2 bandwidth of the tiles' operand traffic with the rates, "
                          "every tile at most t*'s FLOP rate (the profile gets l2_bandwidth_gbs; "
                          "theory.terms)",
        action="store_true")
    add(p, "--key", None, "key of the fitted profile (default <gpu>-calibrated)")
    add(p, "--steps", None, "GeMM timings: print the jumps after these d_col, e.g. '128,256,384'")
    p.set_defaults(run=run)


def _steps(text: str | None) -> tuple[int, ...]:
    from theory.errors import FieldError

    if not text:
        return ()
    try:
        return tuple(int(s) for s in str(text).split(","))
    except ValueError:
        raise FieldError("--steps", text, "comma-separated integers, e.g. '128,256,384'") from None


def _print(cal, values: dict, source: str, jumps: list[dict], path) -> None:
    n = len(cal.measured)
    print(f"{cal.kind} timings {source} ({n} points); base {cal.base_key}, {values['model']} "
          f"({values['mode']} mode) -> profile {cal.key}")
    print(f"\n{'parameter':<24}{'base':>12}{'fitted':>12}{'ratio':>8}  {'ident.':<7}{'rel. SE':>8}  note")
    for p in cal.parameters:
        ratio = f"{p.value / p.base:8.3f}" if p.base else f"{'-':>8}"
        se = f"{p.rel_se:8.2%}" if p.rel_se is not None else f"{'-':>8}"
        print(f"{p.name:<24}{p.base:>12.4g}{p.value:>12.4g}{ratio}  {'yes' if p.identified else 'no':<7}"
              f"{se}  {p.note}")
    print(f"\n{'fit error':<22}{'rel. RMSE':>10}{'max rel.':>10}{'RMSE (s)':>11}")
    for name, e in (("calibrated", cal.error), (f"base {cal.base_key}", cal.base_error)):
        print(f"{name:<22}{e.rel_rmse:>10.2%}{e.max_rel_error:>10.2%}{e.rmse_s:>11.3g}")
    print("\nworst points (relative error):")
    for i in cal.worst():
        print(f"  {cal.labels[i]:<48} measured {cal.measured[i]:.4g} s, model {cal.predicted[i]:.4g} s, "
              f"{cal.residuals[i]:+.1%}")
    if jumps:
        print(f"\nsteps: T(next d_col) / T(d_col) - 1\n{'d_row x d_red':<16}{'d_col':>6}{'next':>6}"
              f"{'measured':>10}{'model':>9}{'base':>9}")
        for j in jumps:
            print(f"{j['d_row']}x{j['d_red']:<{15 - len(str(j['d_row']))}}{j['at']:>6}{j['next']:>6}"
                  f"{j['measured']:>10.1%}{j['model']:>9.1%}{j['base']:>9.1%}")
    for note in cal.notes:
        print(f"note: {note}")
    print(f"\nwrote {path}; use it with --gpu-file {path} --gpu {cal.key}")


def run(args) -> int:
    """Run ``llmq calibrate`` on the parsed ``args``; the exit code."""
    from theory.errors import FieldError
    from theory.hardware import get_gpu, gpu_names
    from theory.models import get_model
    from theory.validation.calibrate import calibrate, staircase_jumps
    from theory.validation.calibration import FitOptions, write_profile
    from theory.validation.timings import GemmTimings, read_timings, timings_path

    values = single(resolve(args), "calibrate", "gpu", "model", "mode")
    out = out_dir(values["out"])
    steps = _steps(values["steps"])
    if ":" in str(values["gpu"]):
        raise FieldError("--gpu", values["gpu"], "a GPU preset (choose a tile subset with --tiles)")
    base = get_gpu(values["gpu"])
    if base.key not in gpu_names():
        raise FieldError("--gpu", values["gpu"], "a GPU preset (choose a tile subset with --tiles)")
    source = str(values["timings"])
    timings = read_timings(timings_path(source))
    cal = calibrate(timings, base, get_model(values["model"]), values["mode"],
                    FitOptions(tiles=values["tiles"], overhead=values["overhead"], key=values["key"],
                               seed=values["seed"], floor=bool(values["floor"]), waves=bool(values["waves"]),
                               l2=bool(values["l2"])))
    jumps = []
    if steps and isinstance(timings, GemmTimings):
        jumps = staircase_jumps(timings, {"model": cal.predicted, "base": cal.base_predicted}, steps)
    path = write_profile(cal, out / f"{cal.key}.toml", source)
    if values["json"]:
        print_json({**cal.as_dict(), "timings": source, "steps": jumps, "written": str(path)})
    else:
        _print(cal, values, source, jumps, path)
    return 0
