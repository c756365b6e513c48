"""Bad and unusual input across the command line: each case exits with a clear, specific error
(status 2, one message naming the field) and no traceback, or is accepted where accepting it is
right (a UTF-8 byte-order mark). ``benchmarks/bad_inputs.py`` prints the same cases as a table.

Each case runs ``llmq.cli.main`` in this process; an exception that escapes it is what a user
would see as a traceback.
"""

from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

# name -> (argv, expected exit status, text the message must contain); "{d}" is the data directory
CASES: dict[str, tuple[list[str], int, str]] = {}
CLASS: dict[str, str] = {}  # name -> the class of fault it belongs to (the section below)
_SECTION = [""]


def section(name: str) -> None:
    """The cases that follow belong to the fault class ``name``."""
    _SECTION[0] = name


def case(name: str, argv: list[str], message: str, rc: int = 2) -> None:
    CASES[name] = (argv, rc, message)
    CLASS[name] = _SECTION[0]


# --- seeds ------------------------------------------------------------------------------------
section("seeds")
for cmd in ("simulate", "dtmc", "region", "calibrate", "validate", "plan"):
    out = [] if cmd == "simulate" else ["--out", "{d}/o"]
    case(f"{cmd} negative seed", [cmd, "--seed", "-1", *out], "seed: expected an integer >= 0")
    case(f"{cmd} fractional seed", [cmd, "--seed", "1.5", *out], "--seed: invalid int value")
case("config fractional seed", ["simulate", "--config", "{d}/seed_frac.toml"], "seed: expected an integer")
case("config negative seed", ["simulate", "--config", "{d}/seed_neg.toml"], "seed: expected an integer >= 0")
case("config string seed", ["dtmc", "--config", "{d}/seed_str.toml"], "seed: expected an integer")
# --- options a command does not use are not offered ----------------------------------------------
section("options not offered")
case("bounds --seed", ["bounds", "--seed", "1"], "unrecognized arguments: --seed")
case("bounds --out", ["bounds", "--out", "x"], "unrecognized arguments: --out")
case("simulate --out", ["simulate", "--out", "x"], "unrecognized arguments: --out")
case("bounds config seed", ["bounds", "--config", "{d}/seed_neg.toml"], "expected only the keys")
# --- token lengths and traces -------------------------------------------------------------------
section("token lengths and traces")
MAX = "lengths <= 1,048,576"
for cmd in ("bounds", "simulate"):
    case(f"{cmd} 1e12 prompt in a CSV", [cmd, "--workload", "{d}/huge.csv"], MAX)
    case(f"{cmd} 1e8 prompt in a CSV", [cmd, "--workload", "{d}/big.csv"], MAX)
    case(f"{cmd} 1e30 prompt in a CSV", [cmd, "--workload", "{d}/vast.csv"], MAX)
    case(f"{cmd} zero length in a CSV", [cmd, "--workload", "{d}/zero.csv"], "lengths >= 1")
    case(f"{cmd} negative length in a CSV", [cmd, "--workload", "{d}/negative.csv"], "lengths >= 1")
    case(f"{cmd} fractional length in a CSV", [cmd, "--workload", "{d}/fraction.csv"], "not an integer")
    case(f"{cmd} text length in a CSV", [cmd, "--workload", "{d}/text.csv"], "is not a number")
    case(f"{cmd} nan length in a CSV", [cmd, "--workload", "{d}/nan.csv"], "'nan' is not an integer")
    case(f"{cmd} CSV missing a column", [cmd, "--workload", "{d}/nocol.csv"], "missing column 'output_len'")
    case(f"{cmd} empty CSV", [cmd, "--workload", "{d}/empty.csv"], "no data rows")
    case(f"{cmd} header-only CSV", [cmd, "--workload", "{d}/header.csv"], "no data rows")
    case(f"{cmd} missing CSV", [cmd, "--workload", "{d}/absent.csv"], "file not found")
    case(f"{cmd} a directory as CSV", [cmd, "--workload", "{d}/dir.csv"], "cannot read it as a CSV file")
    case(f"{cmd} binary CSV", [cmd, "--workload", "{d}/binary.csv"], "malformed CSV")
    case(f"{cmd} huge uniform law", [cmd, "--workload", "uniform:1-1000000000000,1-2"], "support pairs")
    case(f"{cmd} uniform law of 1e8 pairs", [cmd, "--workload", "uniform:1-100000,1-1000"], "support pairs")
    case(f"{cmd} huge deterministic law", [cmd, "--workload", "deterministic:100000000,5"], MAX)
    case(f"{cmd} malformed uniform", [cmd, "--workload", "uniform:5-1,1-2"], "uniform prompt range")
    case(f"{cmd} malformed deterministic", [cmd, "--workload", "deterministic:a,b"], "deterministic:LP,LD")
    case(f"{cmd} unknown workload", [cmd, "--workload", "chat"], "unknown workload")
    case(f"{cmd} BOM in a CSV (accepted)", [cmd, "--workload", "{d}/bom.csv", "--json"], "", rc=0)
case("simulate trace with 1e12 prompt", ["simulate", "--trace", "{d}/huge_trace.csv"], MAX)
case("simulate trace decreasing times", ["simulate", "--trace", "{d}/backwards.csv"], "strictly increasing")
case("simulate trace negative time", ["simulate", "--trace", "{d}/negtime.csv"], "finite and >= 0")
# --- prompt + output longer than the model's context (theory.workload.check_context) ---------------
section("longer than the model's context")
CTX = "the context length of llama-2-7b"
case("bounds Table 1 on Llama-2-7B", ["bounds", "--model", "llama-2-7b"], "4096 tokens, " + CTX)
case("bounds one token past the context", ["bounds", "--model", "llama-2-7b", "--workload",
                                           "deterministic:4000,97"], "4097 tokens")
case("bounds exactly the context (accepted)", ["bounds", "--model", "llama-2-7b", "--workload",
                                               "deterministic:4000,96", "--json"], "", rc=0)
case("bounds padding past the context", ["bounds", "--model", "llama-2-7b", "--workload",
                                         "deterministic:3990,100", "--pad"], "+pad")
case("bounds uniform law past the context", ["bounds", "--model", "phi-2", "--workload",
                                             "uniform:1-2000,1-100"], "the context length of phi-2")
case("bounds mixture past the context", ["bounds", "--model", "llama-3-8b", "--workload",
                                         "mix:0.5*table1+0.5*deterministic:9000,10"], "llama-3-8b")
case("bounds CSV row past the context", ["bounds", "--model", "llama-2-7b", "--workload",
                                         "{d}/long.csv"], "long.csv, row 3")
case("bounds model file lowers the context", ["bounds", "--model-file", "{d}/short_ctx.toml",
                                              "--model", "short"], "the context length of short")
case("bounds model file context 'long'", ["bounds", "--model-file", "{d}/bad_ctx.toml", "--model",
                                          "badctx"], "context_length: expected an integer")
case("simulate trace row past the context", ["simulate", "--model", "llama-2-7b", "--trace",
                                             "{d}/long_trace.csv"], "--trace")
case("simulate CSV row past the context", ["simulate", "--model", "llama-2-7b", "--workload",
                                           "{d}/long.csv"], "row 3")
case("simulate Table 1 on Llama-2-70B", ["simulate", "--model", "llama-2-70b"], "llama-2-70b")
case("dtmc Table 1 on Llama-2-7B", ["dtmc", "--model", "llama-2-7b", "--out", "{d}/o"], CTX)
case("region Table 1 on Llama-2-7B", ["region", "--model", "llama-2-7b", "--out", "{d}/o"], CTX)
case("region class 2 past the context", ["region", "--model", "llama-2-7b", "--two-class", "--class1",
                                         "deterministic:100,10", "--out", "{d}/o"], "--class2")
case("plan Table 1 on Llama-2-70B", ["plan", "--model", "llama-2-70b", "--out", "{d}/o"],
     "the context length of llama-2-70b")
case("plan trace row past the context", ["plan", "--model", "llama-2-7b", "--trace",
                                         "{d}/long_trace.csv", "--out", "{d}/o"], "long_trace.csv, row 3")
# --- RAD n, epsilon, DTMC sizes ------------------------------------------------------------------
section("RAD n, epsilon, DTMC sizes")
case("dtmc n = 1e8", ["dtmc", "--n", "100000000", "--out", "{d}/o"], "RAD's n below 4,000")
case("dtmc n = 4000", ["dtmc", "--n", "4000", "--out", "{d}/o"], "RAD's n below 4,000")
case("dtmc n = 0", ["dtmc", "--n", "0", "--out", "{d}/o"], "n: expected")
case("dtmc n = -5", ["dtmc", "--n", "-5", "--out", "{d}/o"], "n: expected")
case("dtmc truncate 1e5", ["dtmc", "--n", "4", "--truncate", "100000", "--out", "{d}/o"], "fits in 2 GiB")
case("dtmc truncate below n", ["dtmc", "--n", "8", "--truncate", "4", "--out", "{d}/o"], "an integer >= n")
case("dtmc epsilon text", ["dtmc", "--n-min", "--epsilon", "a,b", "--out", "{d}/o"], "epsilon")
case("region rad.n = 1e9", ["region", "--option", "rad.n=1000000000", "--out", "{d}/o"], "rad.n")
case("region rad.n = 0", ["region", "--option", "rad.n=0", "--out", "{d}/o"], "rad.n")
case("region rad.n = 2.5", ["region", "--option", "rad.n=2.5", "--out", "{d}/o"], "rad.n")
case("region rad.n = many", ["region", "--option", "rad.n=many", "--out", "{d}/o"], "rad.n")
case("region epsilon 0", ["region", "--epsilon", "0", "--out", "{d}/o"], "epsilon")
case("region epsilon 1.5", ["region", "--epsilon", "1.5", "--out", "{d}/o"], "epsilon")
case("bounds epsilon 0", ["bounds", "--epsilon", "0"], "epsilon")
case("bounds epsilon -0.1", ["bounds", "--epsilon", "-0.1"], "epsilon")
case("bounds epsilon text", ["bounds", "--epsilon", "small"], "--epsilon: expected a number in (0, 1)")
# --- output locations ----------------------------------------------------------------------------
section("output locations and other runs' outputs")
for cmd in ("region", "dtmc", "calibrate", "validate", "plan"):
    case(f"{cmd} --out is a file", [cmd, "--out", "{d}/afile"], "this is an existing file")
    case(f"{cmd} --out on a missing parent", [cmd, "--out", "{d}/no/such/dir"], "does not exist")
    case(f"{cmd} --out under a file", [cmd, "--out", "{d}/afile/sub"], "afile is a file")
case("slai --out is a file", ["slai", "--out", "{d}/afile"], "this is an existing file")
case("slai --out on a missing parent", ["slai", "--out", "{d}/no/such/dir"], "does not exist")
case("simulate --log is a directory", ["simulate", "--log", "{d}"], "this is a directory")
case("simulate --log on a missing parent", ["simulate", "--log", "{d}/no/such/log.csv"], "does not exist")
case("region --cache is a file", ["region", "--cache", "{d}/afile", "--out", "{d}/o"], "--cache")
DIFFERS = "records a run that differs in"
case("region into another sweep's outputs", ["region", "--out", "{d}/other"], DIFFERS)
case("region into a broken manifest", ["region", "--out", "{d}/broken"], "not a readable run manifest")
case("slai into another study's outputs", ["slai", "--quick", "--out", "{d}/other"], DIFFERS)
case("slai into a broken manifest", ["slai", "--out", "{d}/broken"], "not a readable run manifest")
case("validate into another run's outputs", ["validate", "--quick", "--out", "{d}/other"], DIFFERS)
case("plan into another plan's outputs", ["plan", "--out", "{d}/other"], DIFFERS)
# --- Dask addresses ------------------------------------------------------------------------------
section("Dask addresses")
for address in ("localhost", "tcp://", "tcp://host", "tcp://host:port", "http://host:8786",
                "tcp://host:99999", "tcp://:8786", "8786"):
    case(f"region --dask {address}", ["region", "--dask", address, "--out", "{d}/o"],
         "--dask: expected a scheduler address")
case("region --dask unreachable", ["region", "--dask", "tcp://127.0.0.1:9", "--out", "{d}/o"],
     "cannot reach the scheduler")
# --- config files and typed values ---------------------------------------------------------------
section("config files and typed values")
case("config pad = 'false'", ["bounds", "--config", "{d}/pad_str.toml"], "pad: expected true or false")
case("config json = 'no'", ["bounds", "--config", "{d}/json_str.toml"], "json: expected true or false")
case("config unknown key", ["bounds", "--config", "{d}/unknown.toml"], "expected only the keys")
case("config not TOML", ["bounds", "--config", "{d}/bad.toml"], "bad.toml")
case("config missing", ["bounds", "--config", "{d}/absent.toml"], "absent.toml")
case("config is a directory", ["bounds", "--config", "{d}"], "cannot read it as a TOML file")
case("simulate mu = 'fast'", ["simulate", "--gpu-file", "{d}/mu.toml", "--gpu", "fastgpu"], "'fast'")
# --- names and numbers ---------------------------------------------------------------------------
section("names and numbers")
case("bounds unknown GPU", ["bounds", "--gpu", "b300"], "unknown GPU")
case("bounds unknown model", ["bounds", "--model", "gpt-9"], "unknown model")
case("bounds bad tiles", ["bounds", "--tiles", "96x96"], "tiles")
case("bounds r = 0", ["bounds", "--gpus-r", "0"], "r")
case("bounds token budget 0", ["bounds", "--token-budget", "0"], "--token-budget: expected")
case("simulate unknown scheduler", ["simulate", "--scheduler", "fifo"], "unknown scheduler")
case("simulate load 0", ["simulate", "--load", "0"], "load")
case("simulate load -1", ["simulate", "--load", "-1"], "load")
case("simulate rate nan", ["simulate", "--rate", "nan"], "rate")
case("simulate rate inf", ["simulate", "--rate", "inf"], "rate")
case("simulate requests 0", ["simulate", "--requests", "0"], "requests")
case("simulate workers 0", ["simulate", "--workers", "0"], "--workers: expected an integer >= 1")
case("simulate bad option", ["simulate", "--option", "n"], "NAME=VALUE")
case("simulate unknown option", ["simulate", "--option", "zeta=3"], "zeta")
case("simulate option n=-3", ["simulate", "--option", "n=-3"], "n")
case("simulate bad classes", ["simulate", "--classes", "paying:x:0.1"], "class")
case("simulate total cap 0", ["simulate", "--total-cap", "0"], "total")
case("region requests 10", ["region", "--requests-per-node", "10", "--out", "{d}/o"], "requests")
case("region old --requests", ["region", "--requests", "600", "--out", "{d}/o"], "requests-per-node")
case("region replicates 1", ["region", "--replicates", "1", "--out", "{d}/o"], "replicates")
case("region confidence 1", ["region", "--confidence", "1", "--out", "{d}/o"], "confidence")
case("region saturation 0.5", ["region", "--saturation", "0.5", "--out", "{d}/o"], "saturation")
case("region shares 1.5", ["region", "--two-class", "--shares", "0.5,1.5", "--out", "{d}/o"], "shares")
case("region workers 0", ["region", "--workers", "0", "--out", "{d}/o"], "workers")
case("region plot-only missing", ["region", "--plot-only", "{d}/absent.csv", "--out", "{d}/o"], "region.csv")
case("slai seeds 0", ["slai", "--seeds", "0", "--out", "{d}/o"], "seeds")
case("slai requests -1", ["slai", "--requests", "-1", "--out", "{d}/o"], "requests")
case("slai workers 0", ["slai", "--workers", "0", "--out", "{d}/o"], "workers")
case("calibrate missing timings", ["calibrate", "--timings", "{d}/absent.csv", "--out", "{d}/o"],
     "absent.csv")
case("calibrate bad steps", ["calibrate", "--steps", "a,b", "--out", "{d}/o"], "steps")
case("calibrate tile subset as GPU", ["calibrate", "--gpu", "a100:128x128", "--out", "{d}/o"], "--tiles")
case("validate max-train 5", ["validate", "--max-train", "5", "--out", "{d}/o"], "--max-train")
case("validate with a workload", ["validate", "--workload", "sharegpt4", "--out", "{d}/o"], "--workload")
case("plan rate 0", ["plan", "--rate", "0", "--out", "{d}/o"], "--rate")
case("plan bad option", ["plan", "--option", "chunk=3", "--out", "{d}/o"], "--option")
case("plan requests 0", ["plan", "--requests", "0", "--out", "{d}/o"], "--requests")
# --- scheduler options: names and values checked before any run (with the nearest name) ------------
section("scheduler options")
case("region unknown rad option", ["region", "--option", "rad.bogus=1", "--out", "{d}/o"],
     "--option rad.bogus")
case("region misspelled rad option", ["region", "--option", "rad.nn=500", "--out", "{d}/o"],
     "did you mean 'n'")
case("region option of a scheduler not swept",
     ["region", "--option", "vllm.max_num_seqs=8", "--out", "{d}/o"], "a scheduler among --scheduler")
case("region option alternatives", ["region", "--option", "sarathi.chunk_size=256|512", "--out", "{d}/o"],
     "--option")
case("region option given twice", ["region", "--option", "rad.n=100", "--option", "rad.n=200", "--out",
                                   "{d}/o"], "rad.n is given twice")
case("region bare option with three schedulers", ["region", "--option", "n=5", "--out", "{d}/o"],
     "SCHEDULER.NAME=VALUE")
case("plan unknown rad option", ["plan", "--option", "rad.bogus=1", "--out", "{d}/o"], "--option rad.bogus")
case("plan rad n = abc", ["plan", "--option", "rad.n=abc", "--out", "{d}/o"], "--option rad.n")
case("plan misspelled sarathi option", ["plan", "--option", "sarathi.chunk_sise=256|512", "--out", "{d}/o"],
     "did you mean 'chunk_size'")
case("plan one bad alternative", ["plan", "--option", "sarathi.chunk_size=256|-1", "--out", "{d}/o"],
     "--option sarathi.chunk_size")
case("plan option of a scheduler not planned", ["plan", "--scheduler", "rad", "--option",
                                                "sarathi.chunk_size=256", "--out", "{d}/o"], "--option")
case("simulate rad n = abc", ["simulate", "--option", "n=abc"], "--option rad.n")
case("simulate misspelled option", ["simulate", "--scheduler", "sarathi", "--option", "chunk_sise=256"],
     "did you mean 'chunk_size'")
case("simulate option of another scheduler", ["simulate", "--option", "sarathi.chunk_size=256"],
     "a scheduler among --scheduler (rad)")
# --- profile and price files: every key one the file may hold -----------------------------------------
section("profile and price files")
case("model file unknown field", ["bounds", "--model-file", "{d}/model_typo.toml", "--model", "typo"],
     "models.typo.n_layer")
case("model file misspelled field", ["bounds", "--model-file", "{d}/model_typo.toml", "--model", "typo"],
     "did you mean 'n_layers'")
case("model file misspelled section", ["bounds", "--model-file", "{d}/model_section.toml", "--model", "x"],
     "did you mean 'models'")
case("price file unknown field", ["plan", "--price-file", "{d}/price_typo.toml", "--out", "{d}/o"],
     "prices.a100.usd_per_gpu_hr")
case("price file misspelled section", ["plan", "--price-file", "{d}/price_section.toml", "--out", "{d}/o"],
     "did you mean 'prices'")
case("config misspelled key", ["bounds", "--config", "{d}/typo.toml"], "did you mean 'epsilon'")
case("region config pad and raw", ["region", "--config", "{d}/pad_raw.toml", "--out", "{d}/o"],
     "no --raw with --pad")
# --- traces and CSV files ---------------------------------------------------------------------------
section("traces and CSV columns")
case("simulate trace with a rate", ["simulate", "--trace", "{d}/trace.csv", "--rate", "3"],
     "--rate: expected no --rate or --load with --trace")
case("simulate trace with a load", ["simulate", "--trace", "{d}/trace.csv", "--load", "0.5"],
     "--load: expected no --rate or --load with --trace")
case("simulate one-row trace", ["simulate", "--trace", "{d}/one_row.csv"], "at least two")
case("simulate trace cut to one request", ["simulate", "--trace", "{d}/trace.csv", "--requests", "1"],
     "at least two")
case("simulate more requests than the trace", ["simulate", "--trace", "{d}/trace.csv", "--requests", "50"],
     "--requests: expected at most the trace's 4 requests")
case("simulate trace without arrival times", ["simulate", "--trace", "{d}/long.csv"], "arrival_time")
case("plan one-row trace", ["plan", "--trace", "{d}/one_row.csv", "--out", "{d}/o"], "at least two")
case("bounds CSV with a column twice", ["bounds", "--workload", "{d}/dup_col.csv"],
     "column 'output_len' appears more than once")
case("bounds CSV row with an extra cell", ["bounds", "--workload", "{d}/extra_cell.csv"], "row 3 has 3 cells")
case("bounds CSV row with a missing cell", ["bounds", "--workload", "{d}/short_row.csv"], "row 2 has 1 cells")
case("simulate trace with a column twice", ["simulate", "--trace", "{d}/dup_trace.csv"],
     "appears more than once")
case("bounds mixture weights sum to 1.1", ["bounds", "--workload", "mix:0.6*table1+0.5*deterministic:100,10"],
     "mixture weights: expected weights summing to 1")
case("bounds mixture weights sum to 0.9", ["bounds", "--workload", "mix:0.4*table1+0.5*deterministic:100,10"],
     "mixture weights")
# --- names and lists ----------------------------------------------------------------------------------
section("names and lists")
case("bounds GPU with an empty tile list", ["bounds", "--gpu", "a100:"],
     "--gpu: expected a GPU name, or NAME:TILES")
case("region GPU with an empty tile list", ["region", "--gpu", "a100:", "--out", "{d}/o"], "--gpu")
case("region GPU twice", ["region", "--gpu", "a100,a100", "--out", "{d}/o"], "'a100' is given twice")
case("region empty GPU in the list", ["region", "--gpu", "a100,", "--out", "{d}/o"], "--gpu: expected")
case("region scheduler twice", ["region", "--scheduler", "rad,rad", "--out", "{d}/o"], "'rad' is given twice")
case("region r twice", ["region", "--gpus-r", "1,1", "--out", "{d}/o"], "r")
case("plan GPU twice", ["plan", "--gpu", "a100,a100", "--out", "{d}/o"], "'a100' is given twice")
case("bounds GPU twice", ["bounds", "--gpu", "a100,a100"], "'a100' is given twice")
case("simulate two GPUs", ["simulate", "--gpu", "a100,h100"], "--gpu: expected one GPU")
case("simulate two schedulers", ["simulate", "--scheduler", "rad,sarathi"],
     "--scheduler: expected one scheduler")
case("simulate two r", ["simulate", "--gpus-r", "1,2"], "--gpus-r: expected one integer")
case("simulate misspelled scheduler", ["simulate", "--scheduler", "sarath"], "did you mean 'sarathi'")
case("bounds misspelled model", ["bounds", "--model", "mistral-7bb"], "did you mean 'mistral-7b'")
case("bounds misspelled mode", ["bounds", "--mode", "papr"], "did you mean 'paper'")
case("plan misspelled mode", ["plan", "--mode", "real,papr", "--out", "{d}/o"], "did you mean 'paper'")
case("plan tp 3", ["plan", "--tp", "3", "--out", "{d}/o"],
     "--tp: expected a degree that a planned GPU offers")
case("plan tp 1,3", ["plan", "--tp", "1,3", "--out", "{d}/o"], "--tp: expected a degree")
case("region pad and raw", ["region", "--pad", "--raw", "--out", "{d}/o"], "not allowed with argument --pad")
# --- old spellings: an error naming the new one, never reinterpreted ------------------------------------
section("old spellings")
case("plan --gpus", ["plan", "--gpus", "a100", "--out", "{d}/o"], "--gpus was renamed --gpu")
case("plan --schedulers", ["plan", "--schedulers", "rad", "--out", "{d}/o"],
     "--schedulers was renamed --scheduler")
case("plan --knob", ["plan", "--knob", "sarathi.chunk_size=256|512", "--out", "{d}/o"],
     "--knob was renamed --option")
case("check --fast", ["check", "--fast", "--out", "{d}/o"], "--fast was renamed --quick")
case("simulate --gpus is no abbreviation", ["simulate", "--gpus", "2"], "unrecognized arguments: --gpus")
case("region --sched is no abbreviation", ["region", "--sched", "rad", "--out", "{d}/o"],
     "unrecognized arguments: --sched")
# --- mixture of experts and expert parallelism --------------------------------------------------------
section("mixture of experts")
case("bounds MoE k > E", ["bounds", "--model-file", "{d}/moe_k.toml", "--model", "moek"],
     "models.moek.experts_per_token")
case("bounds EP not dividing the experts", ["bounds", "--gpu-file", "{d}/ep.toml", "--gpu", "ep3",
                                            "--model", "qwen3-30b-a3b", "--mode", "real"], "gpus.ep3.ep")
case("bounds EP on a dense model", ["bounds", "--gpu-file", "{d}/ep.toml", "--gpu", "ep2", "--model",
                                    "mistral-7b", "--mode", "real"], "gpus.ep2.ep")
case("bounds EP without a bus bandwidth", ["bounds", "--gpu-file", "{d}/ep_nobw.toml", "--gpu", "epnobw",
                                           "--model", "qwen3-30b-a3b", "--mode", "real"],
     "gpus.epnobw.allreduce_bandwidth_gbs")
case("bounds expert width not split by tp", ["bounds", "--gpu-file", "{d}/ep.toml", "--gpu", "tp4",
                                             "--model-file", "{d}/moe_width.toml", "--model", "moewidth",
                                             "--mode", "real"], "models.moewidth.d_ff_expert")
case("simulate EP beyond the GPU count", ["simulate", "--gpu-file", "{d}/ep.toml", "--gpu", "ep2", "--model",
                                          "qwen3-30b-a3b", "--mode", "real", "--scheduler", "sarathi",
                                          "--gpus-r", "1"], "gpus.ep2.ep")
case("bounds FP8 MoE on Ampere", ["bounds", "--gpu", "a100", "--model", "qwen3-30b-a3b", "--precision",
                                  "fp8"], "a100")
# --- refused before the work they would start (RAD's n search, validation) ------------------------------
section("refused before the work")
COLD = "deterministic:517,33"  # a workload no RAD n search has cached: the search would take minutes
case("simulate rate 0 before RAD's n", ["simulate", "--rate", "0", "--workload", COLD], "rate")
case("simulate load 0 before RAD's n", ["simulate", "--load", "0", "--workload", COLD], "load")
case("simulate requests 0 before RAD's n", ["simulate", "--requests", "0", "--workload", COLD], "--requests")
case("simulate planner before RAD's n", ["simulate", "--planner", "jsqq", "--workload", COLD],
     "did you mean 'jsq'")
case("dtmc rate 0 before RAD's n", ["dtmc", "--rate", "0", "--workload", COLD, "--out", "{d}/o"], "--rate")
case("dtmc confidence 1 before RAD's n", ["dtmc", "--confidence", "1", "--workload", COLD, "--out", "{d}/o"],
     "--confidence")
case("validate every 0", ["validate", "--every", "0", "--out", "{d}/o"], "--every: expected an integer >= 2")
case("validate every 1", ["validate", "--every", "1", "--out", "{d}/o"], "--every")
case("validate GPU twice", ["validate", "--gpu", "a100,a100", "--out", "{d}/o"], "given twice")
case("check unknown check before any", ["check", "--only", "no.such.check", "--out", "{d}/o"],
     "no.such.check")
case("check --record into a directory", ["check", "--record", "{d}", "--out", "{d}/o"], "--record")
case("no command", [], "required: command")
case("unknown command", ["frobnicate"], "invalid choice")


FILES = {
    "huge.csv": "prompt_len,output_len\n1000000000000,5\n",
    "big.csv": "prompt_len,output_len\n100000000,5\n",
    "vast.csv": "prompt_len,output_len\n1e30,5\n",
    "zero.csv": "prompt_len,output_len\n0,5\n",
    "negative.csv": "prompt_len,output_len\n-4,5\n",
    "fraction.csv": "prompt_len,output_len\n10.5,5\n",
    "text.csv": "prompt_len,output_len\nten,5\n",
    "nan.csv": "prompt_len,output_len\nnan,5\n",
    "nocol.csv": "prompt_len,out\n10,5\n",
    "empty.csv": "",
    "header.csv": "prompt_len,output_len\n",
    "bom.csv": "\ufeffprompt_len,output_len\n100,5\n200,7\n",
    "huge_trace.csv": "arrival_time,prompt_len,output_len\n0.1,1000000000000,5\n",
    "backwards.csv": "arrival_time,prompt_len,output_len\n0.5,10,5\n0.2,10,5\n",
    "negtime.csv": "arrival_time,prompt_len,output_len\n-1,10,5\n",
    "long.csv": "prompt_len,output_len\n100,5\n4000,200\n",
    "long_trace.csv": "arrival_time,prompt_len,output_len\n0.1,100,5\n0.2,4000,200\n",
    "short_ctx.toml": '[models.short]\nbase = "mistral-7b"\ncontext_length = 1024\n',
    "bad_ctx.toml": '[models.badctx]\nbase = "mistral-7b"\ncontext_length = "long"\n',
    "seed_frac.toml": "seed = 1.5\n",
    "seed_neg.toml": "seed = -3\n",
    "seed_str.toml": 'seed = "zero"\n',
    "pad_str.toml": 'pad = "false"\n',
    "json_str.toml": 'json = "no"\n',
    "unknown.toml": "colour = 3\n",
    "bad.toml": "this is = = not toml\n",
    "mu.toml": '[gpus.fastgpu]\nbase = "a100"\nmu_nLin = "fast"\n',
    "afile": "a file, not a directory\n",
    "broken/region.run.json": "{not json",
    "broken/slai/slai.run.json": '{"run": 7}',
    "other/region.run.json": '{"run": {"loads": [9.0]}}\n',
    "other/slai/slai.run.json": '{"run": {"seeds": 9}}\n',
    "other/plan.run.json": '{"run": {"rate": 1.0}}\n',
    "other/validate.run.json": '{"run": {"every": 9}}\n',
    "model_typo.toml": '[models.typo]\nbase = "mistral-7b"\nn_layer = 16\n',
    "model_section.toml": '[model.x]\nbase = "mistral-7b"\n',
    "price_typo.toml": '[prices.a100]\nusd_per_gpu_hr = 2.0\n',
    "price_section.toml": '[price.a100]\nusd_per_gpu_hour = 2.0\n',
    "typo.toml": "epsilonn = 0.1\n",
    "pad_raw.toml": "pad = true\nraw = true\n",
    "trace.csv": "arrival_time,prompt_len,output_len\n0.1,100,5\n0.2,120,6\n0.4,90,4\n0.5,100,5\n",
    "one_row.csv": "arrival_time,prompt_len,output_len\n0.1,100,5\n",
    "dup_col.csv": "prompt_len,output_len,output_len\n100,5,7\n",
    "extra_cell.csv": "prompt_len,output_len\n100,5\n120,6,9\n",
    "short_row.csv": "prompt_len,output_len\n100\n",
    "moe_k.toml": '[models.moek]\nbase = "qwen3-30b-a3b"\nexperts_per_token = 129\n',
    "moe_width.toml": '[models.moewidth]\nbase = "qwen3-30b-a3b"\nd_ff_expert = 770\n',
    "ep.toml": '[gpus.ep3]\nbase = "rtxpro6000"\nep = 3\nallreduce_bandwidth_gbs = 16.0\n'
               '[gpus.ep2]\nbase = "rtxpro6000"\nep = 2\nallreduce_bandwidth_gbs = 16.0\n'
               '[gpus.tp4]\nbase = "h100"\ntp = 4\nallreduce_bandwidth_gbs = 100.0\n',
    "ep_nobw.toml": '[gpus.epnobw]\nbase = "rtxpro6000"\nep = 2\n',
    "dup_trace.csv": "arrival_time,prompt_len,prompt_len,output_len\n0.1,100,5,5\n0.2,100,5,5\n",
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    import_once()
    return make_data_dir(tmp_path_factory.mktemp("bad_inputs"))


def import_once() -> None:
    """Import what the checks import (the command line, the simulator's scheduler interface, numba,
    the paper's checks), so that a case's wall time is its own, not the interpreter's first import."""
    import stability.sim.simulate  # noqa: F401
    from llmq.cli import build_parser
    from paper_checks.registry import all_checks
    from stability.sim.registry import get_scheduler, scheduler_names

    build_parser()
    all_checks()
    for name in scheduler_names():
        get_scheduler(name)


def make_data_dir(d: Path) -> Path:
    """Write the files the cases read into ``d``."""
    for name, text in FILES.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text, encoding="utf-8")
    (d / "binary.csv").write_bytes(b"\xff\xfe\x00garbage\x00")
    (d / "dir.csv").mkdir(exist_ok=True)
    return d


REFUSED_WITHIN_S = 5.0  # a refusal comes before the work: loose, as the machine may be loaded


def run_case(argv: list[str], d: Path) -> tuple[int, str, str | None, float]:
    """Run ``llmq`` on ``argv`` (``{d}`` replaced) in this process: (exit status, stderr, the type of
    an exception that escaped, i.e. a traceback, or None, wall seconds)."""
    from llmq.cli import main

    err, out = io.StringIO(), io.StringIO()
    escaped = None
    t0 = time.perf_counter()
    with redirect_stderr(err), redirect_stdout(out):
        try:
            rc = main([a.replace("{d}", str(d)) for a in argv])
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # what a user would see as a traceback
            rc, escaped = 1, type(exc).__name__
    return rc, err.getvalue(), escaped, time.perf_counter() - t0


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_a_clear_error_without_a_traceback(name, data_dir):
    argv, rc_expected, message = CASES[name]
    rc, err, escaped, seconds = run_case(argv, data_dir)
    assert escaped is None, f"{name}: {escaped} escaped"
    assert rc == rc_expected, (name, rc, err)
    if rc_expected:
        assert message in err and "Traceback" not in err, (name, err)
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith(("usage:", " "))]
        assert len(lines) == 1, err  # one message (argparse prints its usage above it)
        # refused before the work it would start (RAD's n search, a validation: minutes)
        assert seconds < REFUSED_WITHIN_S, (name, seconds)


def test_there_are_at_least_100_cases():
    assert len(CASES) >= 100


@dataclass(frozen=True)
class EchoTask:
    """A runner task for the test below (:class:`stability.runner.Task`): its result is its input."""

    x: int

    def identity(self) -> dict:
        return {"kind": "echo", "x": self.x}

    def run(self) -> dict:
        return {"echo": self.x}


def test_a_cache_entry_of_the_wrong_shape_is_recomputed_with_a_warning(tmp_path):
    """A cached result without the fields every run's result has (``elapsed_s``) is a miss: the
    runner recomputes it, with a warning naming the file, never a ``KeyError`` in the sweep."""
    from stability import runner as rn

    task = EchoTask(7)
    bad = tmp_path / f"{rn.task_key(task.identity())}.json"
    bad.write_text('{"task": {"kind": "echo", "x": 7}, "result": {"echo": 7}}')
    runner = rn.Runner(rn.Cache(tmp_path), rn.LocalExecutor(1))
    with pytest.warns(RuntimeWarning, match=bad.name):
        (result,) = runner.run([task])
    assert result["echo"] == 7 and result["elapsed_s"] >= 0 and runner.computed == 1
    (again,) = rn.Runner(rn.Cache(tmp_path), rn.LocalExecutor(1)).run([task])  # the entry was rewritten
    assert again == result
