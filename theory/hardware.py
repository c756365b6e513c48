"""GPU profiles for the tile-based GeMM/GeMV time model (paper Section 2.3).

A GPU has ``s`` streaming multiprocessors. A GeMM uses an output tile ``t_row x t_col`` from a
GPU-dependent set ``T_out`` and a reduction tile ``t_red`` from ``T_red``; each tile pair
``(t_row x t_red) . (t_red x t_col)`` is computed by one SM at rate ``mu(t_row, t_col, t_red)``
tile pairs per second (Eq. 2). A GeMV uses tiles ``t_row x t_col`` at rate ``mu(t_row, t_col)``
(Eq. 3). Not every (t_row, t_col, t_red) fits every GPU's shared memory, so a profile stores the
set of usable *triples*; on sm80 it is the product T_out x T_red, on Ada some K = 64 tiles drop out.

The rates come from one documented roofline per tile (see ``data/gpus.toml``)::

    1 / mu(t_row, t_col, t_red) = max( 2 t_row t_col t_red / (eta_mma F / s),
                                       b (t_row + t_col) t_red / (rho_l2 B / s) )
    1 / mu(t_row, t_col)        = b t_row t_col / (eta_mem B / s)

Assumption 1 names a tile t* that reaches the GPU's maximal FLOP rate on large, perfectly tiled
GeMMs: the maximiser of ``mu(t) t_row t_col t_red``. When several tiles tie, :meth:`GPU.optimal_tile`
takes the largest output tile (the paper: t* is "typically the largest in T_out"), then the
smallest t_col, then the smallest t_red, so A100 gives 256 x 128 x 32 as the paper states.

References
----------
Bari, Hegde, de Veciana (2025), Section 2.3, Eq. 2-3, Assumption 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from theory.config import inherit, read_packaged, read_toml
from theory.cost_terms import switches, term_keys
from theory.errors import ConfigFileError, FieldError, LlmqError, UnknownNameError
from theory.terms import GpuTerms, gpu_terms_from

KIB = 1024
ROOFLINE = "roofline, uncalibrated"
CALIBRATED_FILE = "calibrated_gpus.toml"
MEASURED_FILE = "measured_gpus.toml"
MEASURED_SUFFIX = "; linear GeMMs: measured profile "  # closes GPU.calibration under the law
# The cost terms (theory.cost_terms) that real mode may switch on for a preset without a calibration:
# the switches, which need no fitted number. A per-GeMM overhead is a fit, and there is no data to fit.
UNFITTED_TERMS = switches("gpu")
_GPU_FIELDS = {
    "name", "aliases", "arch", "sm_count", "peak_fp16_tflops", "peak_fp8_tflops", "clock_mhz", "memory_gb",
    "bandwidth_gbs", "smem_per_block_kib", "tileset", "source", "base", "eta_mma", "rho_l2",
    "eta_mem", "mu", "mu_gemv", "mu_nLin", "overhead_s", "t_star", "tiles", "calibration",
}  # and the keys of the GPU-side cost terms (theory.cost_terms.term_keys)


@dataclass(frozen=True, order=True)
class Tile:
    """A GeMM tile: output ``t_row x t_col`` and reduction ``t_red`` (Section 2.3)."""

    t_row: int
    t_col: int
    t_red: int

    @property
    def t_lcm(self) -> int:
        """LCM(t_row, t_col, t_red): RAD's prefill chunk size (Algorithm 1, line 13)."""
        return math.lcm(self.t_row, self.t_col, self.t_red)

    def __str__(self) -> str:
        return f"{self.t_row}x{self.t_col}x{self.t_red}"


@dataclass(frozen=True, order=True)
class GemvTile:
    """A GeMV tile ``t_row x t_col`` of the matrix (Eq. 3)."""

    t_row: int
    t_col: int

    def __str__(self) -> str:
        return f"{self.t_row}x{self.t_col}"


def parse_tile(text: str | list | tuple, field_name: str = "tile") -> tuple[int, ...]:
    """Parse ``"256x128x32"``, ``"256x128"`` or a list of ints into a tuple of positive ints."""
    if isinstance(text, str):
        parts = text.lower().replace("×", "x").split("x")
    elif isinstance(text, (list, tuple)):
        parts = list(text)
    else:
        raise FieldError(field_name, text, "a tile such as '256x128x32' or [256, 128, 32]")
    try:
        dims = tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        raise FieldError(field_name, text, "a tile such as '256x128x32' or [256, 128, 32]") from None
    if len(dims) not in (2, 3) or any(d < 1 for d in dims):
        raise FieldError(field_name, text, "2 or 3 positive integers, e.g. '256x128x32'")
    return dims


def gemm_tile_rate(tile: Tile, peak_flops: float, bandwidth: float, s: int, eta_mma: float,
                   rho_l2: float, bytes_per_element: int = 2) -> float:
    """Roofline rate mu(t_row, t_col, t_red) of one SM, in tile pairs per second (Eq. 2's mu).

    Parameters
    ----------
    tile : Tile
        The tile pair's shape.
    peak_flops, bandwidth : float
        Dense FP16 tensor FLOP/s and DRAM bytes/s of the whole GPU.
    s : int
        Number of SMs.
    eta_mma, rho_l2 : float
        Achievable fraction of peak, and the L2 reuse factor of operand tiles.
    bytes_per_element : int
        2 for FP16/BF16.

    References
    ----------
    Eq. 2 (the rate it divides by); the efficiency model is documented in ``data/gpus.toml``.
    """
    compute = 2.0 * tile.t_row * tile.t_col * tile.t_red / (eta_mma * peak_flops / s)
    memory = bytes_per_element * (tile.t_row + tile.t_col) * tile.t_red / (rho_l2 * bandwidth / s)
    return 1.0 / max(compute, memory)


def gemv_tile_rate(tile: GemvTile, bandwidth: float, s: int, eta_mem: float,
                   bytes_per_element: int = 2) -> float:
    """Memory-bound rate mu(t_row, t_col) of one SM for a GeMV tile, in tiles per second (Eq. 3)."""
    return 1.0 / (bytes_per_element * tile.t_row * tile.t_col / (eta_mem * bandwidth / s))


def tile_fits(tile: Tile, smem_bytes: int, min_stages: int, bytes_per_element: int = 2) -> bool:
    """Whether a multistage mainloop for ``tile`` fits in ``smem_bytes`` of shared memory."""
    return bytes_per_element * (tile.t_row + tile.t_col) * tile.t_red * min_stages <= smem_bytes


def fp8_tile_factor(compute_s: float, memory_s: float, fp8_ratio: float) -> float:
    """``mu_fp8 / mu_bf16`` of one tile from its bf16 roofline parts: the compute time
    ``compute_s`` (divided by ``fp8_ratio``, the FP8/bf16 peak ratio) and the L2 operand time
    ``memory_s`` (halved: one byte per element for two)."""
    return max(compute_s, memory_s) / max(compute_s / fp8_ratio, memory_s / 2.0)



@dataclass(frozen=True)
class GPU:
    """One GPU's profile: SM count, usable tiles and their rates (Section 2.3).

    Attributes
    ----------
    key, name : str
        Preset key (``"a100"``) and display name.
    s : int
        Number of SMs.
    peak_flops, bandwidth, memory_bytes : float
        Dense FP16 FLOP/s, DRAM bytes/s, DRAM bytes.
    tiles : tuple of Tile
        Usable GeMM tiles (T_out x T_red, filtered by shared memory).
    mu : tuple of float
        mu(t) for each tile, tile pairs per second per SM (Eq. 2).
    gemv_tiles, mu_gemv : tuple
        GeMV tiles and their rates (Eq. 3).
    eta_mem : float
        Achievable DRAM bandwidth fraction, used to derive mu_nLin per model.
    mu_nLin : float or None
        Pinned non-linear rate in tokens/s; ``None`` derives it from the model (Section 3.2.3).
    overhead_s : float
        Fixed time added to every batch (0 in the paper's Eq. 7; set by calibration).
    t_star : Tile or None
        Pinned optimal tile; ``None`` uses the Assumption 1 rule of :meth:`optimal_tile`.
    terms : GpuTerms
        Cost terms beyond Eq. 2 (memory floor, waves, tensor parallelism, a linear law), all off
        by default; see :mod:`theory.terms` for the TOML fields.
    calibration : str
        Where the rates come from: :data:`ROOFLINE` (the per-tile roofline of ``gpus.toml``, no
        measured data), or the provenance of the shipped calibration (``calibrated_gpus.toml``).
    peak_fp8_flops : float or None
        Dense FP8 tensor FLOP/s (``peak_fp8_tflops``); ``None`` where the GPU has no FP8 tensor cores.
    mu_fp8 : tuple of float or None
        mu(t) of each tile at FP8 (:func:`fp8_tile_factor` times ``mu``), or ``None``.
    """

    key: str
    name: str
    s: int
    peak_flops: float
    bandwidth: float
    memory_bytes: float
    smem_per_block: int
    tiles: tuple[Tile, ...]
    mu: tuple[float, ...]
    gemv_tiles: tuple[GemvTile, ...]
    mu_gemv: tuple[float, ...]
    eta_mem: float
    mu_nLin: float | None = None
    overhead_s: float = 0.0
    t_star: Tile | None = None
    source: str = ""
    arch: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)
    terms: GpuTerms = field(default_factory=GpuTerms)
    calibration: str = field(default=ROOFLINE, compare=False)
    peak_fp8_flops: float | None = None
    mu_fp8: tuple[float, ...] | None = None

    @property
    def calibrated(self) -> bool:
        """Whether the profile's rates were fitted to public measurements."""
        return self.calibration != ROOFLINE

    def rate(self, tile: Tile) -> float:
        """mu(t) of a usable tile (Eq. 2)."""
        try:
            return self.mu[self.tiles.index(tile)]
        except ValueError:
            raise FieldError(f"{self.key}.tile", str(tile),
                             f"one of {', '.join(map(str, self.tiles))}") from None

    def flop_rate(self, tile: Tile) -> float:
        """Useful FLOP/s of the whole GPU on a large perfectly tiled GeMM: 2 s mu(t) t_row t_col t_red."""
        return 2.0 * self.s * self.rate(tile) * tile.t_row * tile.t_col * tile.t_red

    def optimal_tile(self) -> Tile:
        """Assumption 1's t* = (t*_row, t*_col, t*_red): a tile of maximal FLOP rate.

        Ties (relative 1e-12) go to the largest t_row t_col, then the smallest t_col, then the
        smallest t_red. A pinned ``t_star`` wins.

        References
        ----------
        Assumption 1 and the remark after it (A100: 128 x 256 or 256 x 128, t*_red = 32).
        """
        if self.t_star is not None:
            return self.t_star
        best = max(self.flop_rate(t) for t in self.tiles)
        tied = [t for t in self.tiles if self.flop_rate(t) >= best * (1 - 1e-12)]
        return min(tied, key=lambda t: (-t.t_row * t.t_col, t.t_col, t.t_red))

    def restrict(self, spec: str | list[str] | tuple[str, ...]) -> GPU:
        """A copy keeping only the tiles matching ``spec``.

        ``spec`` is a comma-separated string or list of ``RxC`` (any t_red) or ``RxCxK`` entries,
        e.g. ``"128x128"`` restricts an A100 to its 128 x 128 tiles.
        """
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        wanted = [parse_tile(item.strip(), "tiles") for item in items if str(item).strip()]
        if not wanted:
            raise FieldError("tiles", spec, "at least one tile such as '128x128'")
        keep = [i for i, t in enumerate(self.tiles)
                if any((t.t_row, t.t_col) == w[:2] and (len(w) == 2 or t.t_red == w[2])
                       for w in wanted)]
        if not keep:
            raise FieldError("tiles", spec,
                             f"tiles of {self.key}: {', '.join(map(str, self.tiles))}")
        tiles = tuple(self.tiles[i] for i in keep)
        t_star = self.t_star if self.t_star in tiles else None
        label = ",".join(str(item).strip() for item in items)
        mu_fp8 = None if self.mu_fp8 is None else tuple(self.mu_fp8[i] for i in keep)
        return replace(self, key=f"{self.key}[{label}]", tiles=tiles,
                       mu=tuple(self.mu[i] for i in keep), t_star=t_star, mu_fp8=mu_fp8)


@cache
def _preset_data() -> dict:
    return read_packaged("gpus.toml")


def _number(table: dict, key: str, where: str, *, integer: bool = False) -> float:
    if key not in table:
        raise FieldError(f"{where}.{key}", None, "a value (missing)")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0 or (integer and int(value) != value):
        raise FieldError(f"{where}.{key}", value,
                         "a positive integer" if integer else "a finite number > 0")
    return int(value) if integer else float(value)


def _tiles_from_set(tileset: dict, where: str) -> list[Tile]:
    if "tiles" in tileset:
        return [Tile(*parse_tile(t, f"{where}.tiles")) for t in tileset["tiles"]]
    if "out" not in tileset or "red" not in tileset:
        raise FieldError(where, sorted(tileset), "either 'tiles' or both 'out' and 'red'")
    out = [parse_tile(o, f"{where}.out") for o in tileset["out"]]
    if any(len(o) != 2 for o in out):
        raise FieldError(f"{where}.out", tileset["out"], "pairs [t_row, t_col]")
    red = [int(_number({"t_red": r}, "t_red", where, integer=True)) for r in tileset["red"]]
    return [Tile(r, c, k) for (r, c) in out for k in red]


def _build_gpu(key: str, table: dict, data: dict) -> GPU:
    where = f"gpus.{key}"
    fields = _GPU_FIELDS | term_keys("gpu")
    unknown = set(table) - fields
    if unknown:
        raise FieldError(where, sorted(unknown), f"only the fields {', '.join(sorted(fields))}")
    eff = {**data.get("efficiency", {}), **{k: table[k] for k in ("eta_mma", "rho_l2", "eta_mem")
                                            if k in table}}
    for k in ("eta_mma", "rho_l2", "eta_mem", "min_stages", "bytes_per_element"):
        _number(eff, k, "efficiency")
    s = _number(table, "sm_count", where, integer=True)
    peak = _number(table, "peak_fp16_tflops", where) * 1e12
    bw = _number(table, "bandwidth_gbs", where) * 1e9
    mem = _number(table, "memory_gb", where) * 1e9
    smem = int(_number(table, "smem_per_block_kib", where) * KIB)
    b = int(eff["bytes_per_element"])

    if "tiles" in table:
        candidates = _tiles_from_set({"tiles": table["tiles"]}, where)
    else:
        name = table.get("tileset")
        sets = data.get("tilesets", {})
        if name not in sets:
            raise UnknownNameError(f"tile set (in {where}.tileset)", str(name), list(sets))
        candidates = _tiles_from_set(sets[name], f"tilesets.{name}")
    tiles = [t for t in dict.fromkeys(candidates)
             if tile_fits(t, smem, int(eff["min_stages"]), b)]
    if not tiles:
        raise FieldError(f"{where}.tiles", [str(t) for t in candidates],
                         f"at least one tile that fits {smem} bytes of shared memory")
    mu_pinned = table.get("mu", {})
    mu = []
    for t in tiles:
        if str(t) in mu_pinned:
            mu.append(_number(mu_pinned, str(t), f"{where}.mu"))
        else:
            mu.append(gemm_tile_rate(t, peak, bw, s, eff["eta_mma"], eff["rho_l2"], b))
    for k in mu_pinned:
        if k not in {str(t) for t in tiles}:
            raise FieldError(f"{where}.mu", k, f"a usable tile of {key}: {', '.join(map(str, tiles))}")

    fp8 = _number(table, "peak_fp8_tflops", where) * 1e12 if "peak_fp8_tflops" in table else None
    mu_fp8 = None if fp8 is None else tuple(
        m * fp8_tile_factor(*_roofline_parts(t, peak, bw, s, eff, b), fp8 / peak)
        for t, m in zip(tiles, mu, strict=True))
    gemv = data.get("gemv", {"rows": [16], "cols": [16]})
    gemv_tiles = [GemvTile(r, c) for r in gemv["rows"] for c in gemv["cols"]]
    gemv_pinned = table.get("mu_gemv", {})
    mu_gemv = [(_number(gemv_pinned, str(g), f"{where}.mu_gemv") if str(g) in gemv_pinned
                else gemv_tile_rate(g, bw, s, eff["eta_mem"], b)) for g in gemv_tiles]

    t_star = None
    if "t_star" in table:
        t_star = Tile(*parse_tile(table["t_star"], f"{where}.t_star"))
        if t_star not in tiles:
            raise FieldError(f"{where}.t_star", table["t_star"],
                             f"a usable tile of {key}: {', '.join(map(str, tiles))}")
    mu_nLin = _number(table, "mu_nLin", where) if "mu_nLin" in table else None
    overhead = table.get("overhead_s", 0.0)
    if isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or overhead < 0 \
            or not math.isfinite(overhead):
        raise FieldError(f"{where}.overhead_s", overhead, "a finite number >= 0")
    return GPU(key=key, name=str(table.get("name", key)), s=s, peak_flops=peak, bandwidth=bw,
               memory_bytes=mem, smem_per_block=smem, tiles=tuple(tiles), mu=tuple(mu),
               gemv_tiles=tuple(gemv_tiles), mu_gemv=tuple(mu_gemv), eta_mem=eff["eta_mem"],
               mu_nLin=mu_nLin, overhead_s=float(overhead), t_star=t_star,
               source=str(table.get("source", "")), arch=str(table.get("arch", "")),
               terms=gpu_terms_from(table, where, b), calibration=str(table.get("calibration", ROOFLINE)),
               peak_fp8_flops=fp8, mu_fp8=mu_fp8)


def _roofline_parts(tile: Tile, peak: float, bw: float, s: int, eff: dict, b: int) -> tuple[float, float]:
    """(compute time, L2 operand time) of one tile pair on one SM: the two arms of
    :func:`gemm_tile_rate`."""
    compute = 2.0 * tile.t_row * tile.t_col * tile.t_red / (eff["eta_mma"] * peak / s)
    return compute, b * (tile.t_row + tile.t_col) * tile.t_red / (eff["rho_l2"] * bw / s)


def _merged_tables(user: dict | None) -> tuple[dict, dict]:
    """Preset data merged with a user TOML: returns (data, {key: resolved gpu table})."""
    data = dict(_preset_data())
    presets = dict(data.get("gpus", {}))
    if user:
        for section in ("efficiency", "tilesets", "gemv"):
            if section in user:
                merged = dict(data.get(section, {}))
                merged.update(user[section])
                data[section] = merged
    tables = inherit(presets, (user or {}).get("gpus", {}), "GPU")
    for key, table in (user or {}).get("gpus", {}).items():  # gemm_profile_gpu defaults to the base
        if "gemm_profile" in tables[key] and isinstance(table, dict):
            tables[key].setdefault("gemm_profile_gpu", table.get("base", key))
    return data, tables


@cache
def _calibrated_data() -> dict:
    return read_packaged(CALIBRATED_FILE)


def calibrated_keys() -> list[str]:
    """The GPU presets with a shipped calibration (``theory/data/calibrated_gpus.toml``)."""
    return list(_calibrated_data().get("gpus", {}))


def load_gpus(path: str | Path | None = None, calibrated: bool = False) -> dict[str, GPU]:
    """All GPU profiles: the presets, plus or overridden by the user TOML at ``path``.

    With ``calibrated`` (real mode) a preset that has a shipped calibration (``calibrated_gpus.toml``,
    written by :mod:`theory.validation.presets_fit` from the public profiles) gets its fitted fields on top of
    the preset's, and says so in :attr:`GPU.calibration`; the others keep their roofline rates with
    the terms of :func:`real_mode_terms` switched on (a field the preset states wins) and stay
    marked :data:`ROOFLINE`. A key the user file states is built from the roofline preset tables
    as written (a user file is the user's own model of the card; ``base = "a100"`` names the
    roofline preset, with every term off unless the file switches it on).
    """
    user = read_toml(path) if path is not None else None
    if user is not None and not isinstance(user.get("gpus", {}), dict):
        raise ConfigFileError(f"{path}: [gpus] must be a table of GPU tables")
    data, tables = _merged_tables(user)
    if calibrated:
        tables = {key: _calibrated_table(key, table, user, data) for key, table in tables.items()}
    return {key: _build_gpu(key, table, data) for key, table in tables.items()}


@cache
def _measured_data() -> dict:
    return read_packaged(MEASURED_FILE)


def measured_keys() -> list[str]:
    """The presets a variant of ``theory/data/measured_gpus.toml`` defines: those whose linear GeMMs
    a measured profile prices (``[gpus.*]``) and those that are real mode's calibrated tile model
    alone (``[tile_model.*]``); resolved by :func:`get_gpu`, not listed by :func:`gpu_names`."""
    data = _measured_data()
    return [*data.get("gpus", {}), *data.get("tile_model", {})]


def _variant(key: str) -> dict | None:
    data = _measured_data()
    return data.get("gpus", {}).get(key, data.get("tile_model", {}).get(key))


def measured_base(key: str) -> str | None:
    """The preset a variant ``key`` of ``measured_gpus.toml`` is built on (the same card: its price,
    its tiles), or None when ``key`` is not one."""
    variant = _variant(key)
    return None if variant is None else str(variant["base"])


def _measured_fields(variant: dict, base: str) -> dict:
    """The fields a ``measured_gpus.toml`` table adds to its base (``gemm_profile_gpu``: the base)."""
    fields = {k: v for k, v in variant.items() if k != "base"}
    fields.setdefault("gemm_profile_gpu", base)
    return fields


def _measured_gpu(key: str, calibrated: bool) -> GPU:
    """The variant ``key`` of ``measured_gpus.toml`` on its base preset as the mode asks
    (:func:`load_gpus`): a ``[gpus.*]`` variant with its measured profile, a ``[tile_model.*]`` one
    with the base's tile model alone (real mode's measured law, where it is the default, taken off)."""
    variant = _variant(key)
    base = str(variant["base"])
    data, tables = _merged_tables(None)
    table = tables[base]
    if calibrated:
        table = _calibrated_table(base, table, None, data)
    if key in _measured_data().get("tile_model", {}):
        table = {k: v for k, v in table.items() if k not in ("gemm_profile", "gemm_profile_gpu")}
        if "calibration" in table:
            table["calibration"] = table["calibration"].split(MEASURED_SUFFIX)[0]
        return _build_gpu(key, table, data)
    table = {**table, **_measured_fields(variant, base)}
    if calibrated and MEASURED_SUFFIX not in table.get("calibration", MEASURED_SUFFIX):
        table["calibration"] += f"{MEASURED_SUFFIX}{table['gemm_profile']}"
    return _build_gpu(key, table, data)


def _calibrated_table(key: str, table: dict, user: dict | None, data: dict) -> dict:
    """``table`` as real mode prices preset ``key``; a key the user file states is left as written.

    A preset with a shipped calibration gets it laid over (and its provenance in ``calibration``);
    any other preset keeps its roofline rates, gets the terms ``[real_mode.<tileset>]`` of
    ``gpus.toml`` states for its tile set (a field the preset states wins) and stays marked
    :data:`ROOFLINE`.
    """
    if key in (user or {}).get("gpus", {}):
        return table
    cal = _calibrated_data()
    if key not in cal.get("gpus", {}):
        return {**real_mode_terms(str(table.get("tileset")), data), **table}
    out = {**table, **cal["gpus"][key], "calibration": str(cal["provenance"][key]["summary"])}
    measured = _measured_data()
    if measured.get("real_mode_default", False):  # the measured law as real mode's default
        for variant in measured.get("gpus", {}).values():
            if variant.get("base") == key:
                out.update(_measured_fields(variant, key))
                out["calibration"] += f"{MEASURED_SUFFIX}{out['gemm_profile']}"
    return out


def real_mode_terms(tileset: str, data: dict | None = None) -> dict:
    """The cost-term fields real mode switches on for an uncalibrated preset of ``tileset``
    (``[real_mode.<tileset>]`` of ``gpus.toml``, where the choice is sourced); ``{}`` if none.

    Only the terms of :data:`UNFITTED_TERMS` may be named: the others need fitted numbers.
    """
    terms = (data if data is not None else _preset_data()).get("real_mode", {}).get(tileset, {})
    unknown = set(terms) - set(UNFITTED_TERMS)
    if unknown:
        raise FieldError(f"real_mode.{tileset}", sorted(unknown),
                         f"only the terms that need no fitted number: {', '.join(UNFITTED_TERMS)}")
    return dict(terms)


def gpu_table(key: str, path: str | Path | None = None, calibrated: bool = False) -> dict:
    """The fields of GPU ``key`` as written, with ``base =`` inheritance resolved (presets merged
    with the user TOML at ``path``): what a derived profile copies. With ``calibrated`` the table is the
    real-mode one of :func:`load_gpus` (the shipped calibration, or the roofline with
    :func:`real_mode_terms`), so a derived profile keeps it and says so (``calibration``)."""
    user = read_toml(path) if path is not None else None
    data, tables = _merged_tables(user)
    if key not in tables:
        raise UnknownNameError("GPU", key, list(tables))
    return dict(_calibrated_table(key, tables[key], user, data) if calibrated else tables[key])


@cache
def _preset_gpus(calibrated: bool = False) -> dict[str, GPU]:
    return load_gpus(None, calibrated)


def gpu_names() -> list[str]:
    """Keys of the GPU presets."""
    return list(_preset_data()["gpus"])


def get_gpu(name: str, path: str | Path | None = None, calibrated: bool = False) -> GPU:
    """A GPU profile by key or alias (case-insensitive), optionally from a user TOML; with
    ``calibrated`` the shipped calibration where one exists (:func:`load_gpus`).

    Tile restrictions (``"a100:128x128"``) are the business of :class:`theory.builder.CostSpec`.
    """
    if not isinstance(name, str) or not name.strip():
        raise FieldError("gpu", name, "a GPU name such as 'a100'")
    base = name.strip()
    gpus = load_gpus(path, calibrated) if path is not None else _preset_gpus(calibrated)
    tables = _merged_tables(read_toml(path) if path is not None else None)[1]
    wanted = base.lower()
    for key, gpu in gpus.items():
        aliases = [a.lower() for a in tables.get(key, {}).get("aliases", [])]
        if wanted in (key.lower(), gpu.name.lower(), *aliases):
            return gpu
    if wanted in measured_keys():
        return _measured_gpu(wanted, calibrated)
    raise UnknownNameError("GPU", base, [*gpus, *measured_keys()])


__all__ = [
    "CALIBRATED_FILE", "GPU", "MEASURED_FILE", "ROOFLINE", "UNFITTED_TERMS", "GemvTile", "LlmqError",
    "Tile", "calibrated_keys", "fp8_tile_factor", "gemm_tile_rate", "gemv_tile_rate", "get_gpu", "gpu_names",
    "gpu_table",
    "load_gpus", "measured_base", "measured_keys", "parse_tile", "real_mode_terms", "tile_fits",
]
