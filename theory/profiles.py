"""Measured GPU profiles from public sources, in one long-format schema, with a validating loader.

Each row of a profile is one measured operation on one GPU: a named GeMM or element-wise kernel
of one transformer layer, a whole prefill or decode batch, or a collective. The packaged profiles
live in ``theory/data/profiles/`` (their README gives source repository, commit, license and the
exact transformation of each); :mod:`theory.validation.profiles_convert` rebuilds them from a checkout of
the source repository.

Schema (header names; order free, extra columns refused so that a typo is not silently lost):

=============== ======== ==================================================================================
column          required meaning
=============== ======== ==================================================================================
source          yes      short name of the public source (``vidur``, ``splitwise-sim``, ``llmservingsim``;
                         ``llmq``: measured by ``benchmarks/device/measure_profile.py``)
gpu             yes      llmq GPU preset key of the card measured (``a100``, ``h100``, ``a40``, ``rtx4090``)
setup           no       the source's own name for the machine or setting (``a100_dgx``, ``h100-80gb``)
model           yes      llmq model preset key; empty for model-independent rows (collectives)
tp              yes      tensor-parallel degree (GPUs sharing each layer); must split the model (see below)
operation       yes      what was timed: a GeMM or kernel name (:data:`VIDUR_GEMMS`, :data:`VIDUR_KERNELS`,
                         :data:`LLMSERVINGSIM_GEMMS`, :data:`LLMSERVINGSIM_KERNELS`), ``attention`` (the
                         self-attention of one layer over a batch), ``prefill_batch``, ``decode_batch`` or
                         ``all_reduce``; ``prefill_batch_rank``, ``decode_batch_rank``: one tensor-parallel
                         rank's share of such a batch (its shard of every layer) timed alone on one GPU,
                         without the all-reduces; ``moe`` (:data:`MOE_OPERATIONS`): a mixture-of-experts
                         block (router and grouped expert GeMMs) over ``tokens`` tokens on one rank
tokens          per op   tokens in the batch (rows of the activations the operation runs over; ``lm_head``
                         and ``sampler``: one row per sequence)
decodes         per op   decode requests in the batch (``decode_batch``, ``attention``)
context         per op   per-request prompt length (``prefill_batch``: each prompt's length;
                         ``decode_batch``: the length when decoding starts); ``attention``: the tokens in
                         the KV cache of each decode request before its step (needed when ``decodes > 0``)
prefill_context per op   ``attention``: the tokens in the KV cache of the prefill chunk's request before
                         the chunk (the chunk is ``tokens - decodes`` tokens; needed when it is > 0)
generated       no       output tokens per request over which a ``decode_batch`` time is averaged
bytes           per op   message size of a collective, in bytes
src_rows        no       how many source rows were aggregated (by median) into this row
experts         per op   ``moe``: the distinct experts the tokens' top-k slots reach on the rank (each
                         gets ``tokens x k / experts`` of them, ``k`` the model's experts per token)
decodes_long    no       ``attention`` with decodes of two KV lengths: how many of the ``decodes`` have
                         ``context_long`` cached tokens (the others have ``context``); given with it
context_long    no       the KV length of those ``decodes_long`` decodes
*time*          yes      exactly one of ``seconds``/``time_s``, ``time_ms``, ``time_us``
=============== ======== ==================================================================================

An empty integer cell means "not applicable" and loads as :data:`ABSENT` (-1). The loader refuses
a time column whose unit it cannot tell (``time``, ``latency``, ``duration``...), negative, zero or
non-finite times, non-integer counts, unknown GPUs and models, and a ``tp`` that cannot split the
model as tensor parallelism does (:func:`theory.terms.check_tp`: it divides the attention heads and
the FFN width, and divides the KV heads or is a multiple of them). A UTF-8 byte-order mark is accepted;
``.csv.gz`` files are read through gzip.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from theory.errors import FieldError, LlmqError, UnknownNameError
from theory.hardware import get_gpu
from theory.io import keep_array, read_csv_table, read_kept_array, theory_kept_path
from theory.measured import GemmTable, pooled_tables
from theory.models import Model, get_model
from theory.terms import check_tp

ABSENT = -1
TIME_UNITS = {"seconds": 1.0, "time_s": 1.0, "time_ms": 1e-3, "time_us": 1e-6}
REQUIRED = ("source", "gpu", "model", "tp", "operation")
TEXT_COLUMNS = ("source", "gpu", "setup", "model", "operation")
# integer column: smallest allowed value
INT_COLUMNS = {"tokens": 1, "decodes": 0, "context": 0, "prefill_context": 0, "generated": 1, "bytes": 1,
               "src_rows": 1, "experts": 1, "decodes_long": 1, "context_long": 0}
VIDUR_GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
VIDUR_KERNELS = ("emb", "input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")
# LLMServingSim's GeMM layers (vLLM module names) -> the GeMM of gemm_shape they are
LLMSERVINGSIM_GEMMS = {"qkv_proj": "attn_pre_proj", "o_proj": "attn_post_proj",
                       "gate_up_proj": "mlp_up_proj", "down_proj": "mlp_down_proj", "lm_head": "lm_head"}
LLMSERVINGSIM_KERNELS = ("embedding", "layernorm", "qk_norm", "rotary_emb", "act_fn", "final_layernorm",
                         "sampler")  # qk_norm: Qwen3's RMSNorm of each query and key head
MOE_OPERATIONS = ("moe",)  # LLMServingSim's Qwen3MoeSparseMoeBlock: router + fused experts
GEMM_OPERATIONS = (*VIDUR_GEMMS, *LLMSERVINGSIM_GEMMS)
KERNEL_OPERATIONS = (*VIDUR_KERNELS, *LLMSERVINGSIM_KERNELS)
NEEDS = {  # operation: integer columns every row of it must fill
    **{op: ("tokens",) for op in GEMM_OPERATIONS + KERNEL_OPERATIONS},
    "attention": ("tokens", "decodes"),
    "prefill_batch": ("tokens", "context"),
    "decode_batch": ("tokens", "decodes", "context"),
    "prefill_batch_rank": ("tokens", "context"),
    "decode_batch_rank": ("tokens", "decodes", "context"),
    "all_reduce": ("bytes",),
    "moe": ("tokens", "experts"),
}
_UNITLESS_TIME = re.compile(r"(time|latency|duration|elapsed|secs?$|ms$|us$)", re.IGNORECASE)
_PACKAGED = ("data", "profiles")
_STEP_TABLES = "_steps"  # the suffix of a step table's name (theory.validation.steps_data)


@dataclass(frozen=True, eq=False)
class Profile:
    """A loaded profile: ``rows`` is a structured array with the schema's columns (times in seconds).

    Attributes
    ----------
    path : str
        The file it was read from.
    rows : numpy.ndarray
        Fields ``source, gpu, setup, model, operation`` (str), ``tp`` and the integer columns
        (int64, :data:`ABSENT` where not applicable) and ``seconds`` (float64).
    """

    path: str
    rows: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.size)

    def where(self, **equal: object) -> np.ndarray:
        """The rows whose columns equal the given values, e.g. ``where(gpu="a100", tp=2)``."""
        mask = np.ones(self.rows.size, dtype=bool)
        for name, value in equal.items():
            if name not in self.rows.dtype.names:
                raise FieldError("column", name, f"one of {', '.join(self.rows.dtype.names)}")
            mask &= self.rows[name] == value
        return self.rows[mask]


def shipped_profiles() -> dict[str, Path]:
    """The packaged profiles, ``{name: path}``, name being the file name without ``.csv[.gz]``.
    The step tables beside them (``*_steps.csv``: another schema, :mod:`theory.validation.steps_data`)
    are not profiles."""
    folder = resources.files("theory").joinpath(*_PACKAGED)
    found = {}
    for entry in folder.iterdir():
        name = entry.name
        for suffix in (".csv.gz", ".csv"):
            if name.endswith(suffix) and not name[: -len(suffix)].endswith(_STEP_TABLES):
                found[name[: -len(suffix)]] = Path(str(entry))
    return dict(sorted(found.items()))


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile CSV (or ``.csv.gz``), or a packaged one by name.

    Parameters
    ----------
    path : str or Path
        A file, or a key of :func:`shipped_profiles` (e.g. ``"splitwise_perf_model"``).

    Returns
    -------
    Profile
        The rows (read-only: one file content is read and checked once, kept for other processes
        in the user cache (:func:`_kept_path`), and shared),
        times converted to seconds.

    Raises
    ------
    ConfigFileError
        The file is missing, empty or not CSV.
    FieldError
        A missing, unknown or duplicated column, or a bad cell; the message names the file, the
        row (its line number in the file, the header being line 1) and the column.
    """
    shipped = shipped_profiles()
    if isinstance(path, str) and path in shipped:
        path = shipped[path]
    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return _load(path, digest)


@cache
def _load(path: Path, digest: str) -> Profile:
    kept = _kept_path(digest)
    array = _read_kept(kept) if kept is not None else None
    if array is None:
        header, rows = _read(path)
        time_col = _check_header(path, header)
        scale = TIME_UNITS[time_col]
        checked: dict[tuple[str, object], None] = {}  # (model, tp) pairs and GPUs already checked
        records = [_check_row(path, k + 2, row, time_col, scale, checked) for k, row in enumerate(rows)]
        array = _to_array(records)
        if kept is not None:
            keep_array(kept, array)
    array.flags.writeable = False
    return Profile(path=str(path), rows=array)


def _kept_path(digest: str) -> Path | None:
    """Where the validated rows of a file with content ``digest`` are kept across processes:
    ``cache_home()/profiles/<theory digest>-<file digest>.npy``, named by the file's bytes and by
    every source and data file of :mod:`theory` (the schema, the GPU and model presets a row is
    checked against), so a change to either validates the file anew; None for a missing file."""
    if not digest:
        return None
    return theory_kept_path("profiles", digest[:32])


def _read_kept(path: Path) -> np.ndarray | None:
    """The rows kept at ``path`` (a structured array), or None when there are none or they cannot
    be read (then the file is read and validated again)."""
    array = read_kept_array(path)
    return array if array is not None and array.dtype.names and "seconds" in array.dtype.names else None


def gemm_shape(model: Model, operation: str, tp: int) -> tuple[int, int]:
    """Weight shape ``(d_row, d_red)`` one GPU multiplies in a GeMM ``operation`` at TP ``tp``.

    vidur times one transformer layer's linear layers under Megatron-style tensor parallelism:
    ``attn_pre_proj`` is the fused Q, K, V projection and ``mlp_up_proj`` the fused gate + up
    projection (column parallel: output rows split over ``tp``), ``attn_post_proj`` and
    ``mlp_down_proj`` are row parallel (reduction split over ``tp``); each runs over ``tokens``
    activation columns. For ``tp = 1`` these are :meth:`Model.linear_gemms` in ``"real"`` mode.
    LLMServingSim's vLLM layer names (:data:`LLMSERVINGSIM_GEMMS`: ``qkv_proj``, ``o_proj``,
    ``gate_up_proj``, ``down_proj``) are the same four GeMMs; its ``lm_head`` is the vocab
    projection (``ceil(d_out / tp) x d_x``, vocab-parallel), one activation row per sequence.

    References
    ----------
    microsoft/vidur, ``vidur/profiling/mlp/mlp_impl.py`` (``CausalSelfAttention``, ``MLP``) at
    commit 7d47513363ec447a741ac5e47241580b47724fbf; casys-kaist/LLMServingSim
    ``profiler/models/llama.yaml`` (the vLLM classes of each layer) at commit
    5daddb21a545658d5150b535712d0494584b5278; paper Section 3.2.1 (the GeMMs of a layer).
    """
    if tp < 1 or model.n_heads % tp or model.n_kv_heads % tp or model.d_ff % tp:
        raise FieldError("tp", tp, f"a divisor of the heads ({model.n_heads}, kv {model.n_kv_heads}) "
                                   f"and d_ff ({model.d_ff}) of {model.key}")
    up = 2 * model.d_ff if model.ffn == "swiglu" else model.d_ff
    shapes = {
        "attn_pre_proj": ((model.n_heads + 2 * model.n_kv_heads) // tp * model.head_dim, model.d_x),
        "attn_post_proj": (model.d_x, model.d // tp),
        "mlp_up_proj": (up // tp, model.d_x),
        "mlp_down_proj": (model.d_x, model.d_ff // tp),
        "lm_head": (-(-model.d_out // tp), model.d_x),
    }
    operation = LLMSERVINGSIM_GEMMS.get(operation, operation)
    if operation not in shapes:
        raise FieldError("operation", operation, f"one of {', '.join((*shapes, *LLMSERVINGSIM_GEMMS))}")
    return shapes[operation]


def _read(path: Path) -> tuple[list[str], list[dict]]:
    return read_csv_table(path, f"the columns {', '.join(REQUIRED)} and a time column")


def _check_header(path: Path, header: list[str]) -> str:
    where = f"{path}: header (row 1)"
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise FieldError(f"{where}, column {dup[0]!r}", header, "each column once")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise FieldError(f"{where}, column {missing[0]!r}", header,
                         f"the column(s) {', '.join(missing)} (missing)")
    times = [h for h in header if h in TIME_UNITS]
    known = set(REQUIRED) | set(TEXT_COLUMNS) | set(INT_COLUMNS) | set(TIME_UNITS)
    for h in header:
        if h not in known and _UNITLESS_TIME.search(h):
            raise FieldError(f"{where}, column {h!r}", h,
                             f"a time column whose unit the name tells: {', '.join(TIME_UNITS)}")
        if h not in known:
            raise FieldError(f"{where}, column {h!r}", h, f"a schema column ({', '.join(sorted(known))})")
    if len(times) != 1:
        raise FieldError(f"{where}, column {'/'.join(times) or 'seconds'!r}", times,
                         f"exactly one time column, one of {', '.join(TIME_UNITS)}")
    return times[0]


def _check_row(path: Path, line: int, row: dict, time_col: str, scale: float,
               checked: dict[tuple[str, object], None]) -> dict:
    def where(col: str) -> str:
        return f"{path}: row {line}, column {col!r}"

    rec: dict = {c: (row.get(c) or "").strip() for c in TEXT_COLUMNS}
    for c in ("source", "gpu", "operation"):
        if not rec[c]:
            raise FieldError(where(c), row.get(c), "a non-empty name")
    for c, low in (("tp", 1), *INT_COLUMNS.items()):
        cell = (row.get(c) or "").strip()
        if not cell and c != "tp":
            rec[c] = ABSENT
            continue
        value = _integer(cell, low)
        if value is None:
            raise FieldError(where(c), row.get(c), f"an integer >= {low}")
        rec[c] = value
    for c in NEEDS.get(rec["operation"], ()):
        if rec[c] == ABSENT:
            raise FieldError(where(c), row.get(c), f"a value (operation {rec['operation']!r} needs it)")
    if rec["operation"] == "attention":
        _check_attention(rec, row, where)
    seconds = _time(row.get(time_col))
    if seconds is None:
        raise FieldError(where(time_col), row.get(time_col), "a finite time > 0")
    rec["seconds"] = seconds * scale
    if ("gpu", rec["gpu"]) not in checked:
        try:
            get_gpu(rec["gpu"])
        except UnknownNameError as exc:
            raise FieldError(where("gpu"), rec["gpu"], f"a GPU preset ({exc})") from None
        checked[("gpu", rec["gpu"])] = None
    if rec["model"] and (rec["model"], rec["tp"]) not in checked:
        try:
            model = get_model(rec["model"])
        except UnknownNameError as exc:
            raise FieldError(where("model"), rec["model"], f"a model preset ({exc})") from None
        try:  # the Megatron split of theory.terms: heads, KV heads (or replicate them), FFN width
            check_tp(rec["tp"], model.n_heads, model.n_kv_heads, model.d_ff, "real", model.key, "tp")
        except FieldError as exc:
            raise FieldError(where("tp"), rec["tp"], exc.expected) from None
        checked[(rec["model"], rec["tp"])] = None
    return rec


def _check_attention(rec: dict, row: dict, where) -> None:
    """An ``attention`` row: ``decodes <= tokens``; a prefill chunk (``tokens - decodes > 0``) needs
    ``prefill_context``, decodes need ``context`` (and the KV cache a decode reads is not empty);
    ``decodes_long`` (fewer than ``decodes``) comes with ``context_long``."""
    chunk = rec["tokens"] - rec["decodes"]
    if chunk < 0:
        raise FieldError(where("decodes"), row.get("decodes"), f"at most tokens = {rec['tokens']}")
    if chunk and rec["prefill_context"] == ABSENT:
        raise FieldError(where("prefill_context"), row.get("prefill_context"),
                         f"a value (the attention row has a prefill chunk of {chunk} tokens)")
    if rec["decodes"] and rec["context"] < 1:
        raise FieldError(where("context"), row.get("context"),
                         f"an integer >= 1 (the attention row has {rec['decodes']} decodes)")
    if (rec["decodes_long"] == ABSENT) != (rec["context_long"] == ABSENT):
        col = "context_long" if rec["context_long"] == ABSENT else "decodes_long"
        raise FieldError(where(col), row.get(col), "a value (decodes_long and context_long go together)")
    if rec["decodes_long"] != ABSENT and rec["decodes_long"] >= rec["decodes"]:
        raise FieldError(where("decodes_long"), row.get("decodes_long"),
                         f"fewer than decodes = {rec['decodes']} (the others have context)")


def _integer(text: str, low: int) -> int | None:
    """``text`` as an int >= ``low``, or None if it is not one."""
    if text.isdigit():
        value = int(text)
        return value if value >= low else None
    try:
        number = float(text)
    except ValueError:
        return None
    ok = math.isfinite(number) and number.is_integer() and number >= low
    return int(number) if ok else None


def _time(raw: object) -> float | None:
    """``raw`` as a finite number > 0, or None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def _to_array(records: list[dict]) -> np.ndarray:
    fields = []
    for c in TEXT_COLUMNS:
        width = max(1, *(len(r[c]) for r in records))
        fields.append((c, f"U{width}"))
    fields += [("tp", "i8")] + [(c, "i8") for c in INT_COLUMNS] + [("seconds", "f8")]
    names = [f for f, _ in fields]
    return np.array([tuple(r[n] for n in names) for r in records], dtype=fields)


# --- Tables of the measured-profile law (theory.measured, the gemm_profile term) ---------------


def series_labels(model, operation, tp) -> np.ndarray:
    """The label ``"model|operation|tp"`` of each row's measured series (arrays of one length)."""
    return np.char.add(np.char.add(np.asarray(model).astype(str), "|"),
                       np.char.add(np.asarray(operation).astype(str), "|" + np.asarray(tp).astype(str)))


def gemm_series_rows(rows: np.ndarray, model_file: str | None = None) -> tuple[np.ndarray, ...]:
    """``(d_row, d_red, tokens, seconds, series)`` of a profile's GeMM rows (the structured array
    of a :class:`Profile`): each row's served-layer shape (:func:`gemm_shape`), token count, time
    and series label ``"model|operation|tp"``."""
    rows = rows[np.isin(rows["operation"], GEMM_OPERATIONS)]
    series = series_labels(rows["model"], rows["operation"], rows["tp"])
    d_row = np.zeros(rows.size, dtype=np.int64)
    d_red = np.zeros(rows.size, dtype=np.int64)
    for key in np.unique(series):
        model, op, tp = str(key).split("|")
        on = series == key
        d_row[on], d_red[on] = gemm_shape(get_model(model, model_file), op, int(tp))
    return d_row, d_red, rows["tokens"].astype(np.int64), rows["seconds"].astype(float), series


def profile_path(name: str, where: str) -> Path:
    """The file a ``gemm_profile`` value names: a shipped profile, else an existing path."""
    shipped = shipped_profiles()
    if name in shipped:
        return Path(shipped[name])
    path = Path(name)
    if not path.is_file():
        raise FieldError(f"{where}.gemm_profile", name,
                         f"a shipped profile ({', '.join(shipped)}) or the path of a CSV in the profile "
                         "schema (theory/profiles.py)")
    return path


def gemm_tables(name: str, gpu: str, where: str) -> dict[tuple[int, int], GemmTable]:
    """The pooled tables of the GeMM rows of ``gpu`` in profile ``name`` (a shipped name or path).

    Cached per file content and GPU, so a cost model built twice reads the file once.

    Raises
    ------
    FieldError
        Naming ``<where>.gemm_profile`` for a name that is neither shipped nor a file, or a file
        the profile loader refuses (its message kept); naming ``<where>.gemm_profile_gpu`` when
        the profile has no GeMM row of ``gpu``.
    """
    path = profile_path(name, where)
    return _tables(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), gpu, where)


@cache
def _tables(path: str, _digest: str, gpu: str, where: str) -> dict[tuple[int, int], GemmTable]:
    try:
        rows = load_profile(path).rows
    except LlmqError as exc:
        raise FieldError(f"{where}.gemm_profile", path, f"a readable profile CSV ({exc})") from None
    gemm = rows[np.isin(rows["operation"], GEMM_OPERATIONS)]
    mine = gemm[gemm["gpu"] == gpu]
    if not mine.size:
        have = sorted(set(gemm["gpu"].tolist()))
        raise FieldError(f"{where}.gemm_profile_gpu", gpu,
                         f"a GPU with GeMM rows ({', '.join(GEMM_OPERATIONS)}) in {path}: "
                         f"{', '.join(have) or 'none'}")
    return pooled_tables(*gemm_series_rows(mine))
