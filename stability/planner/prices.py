"""The planner's prices: the hourly price of one GPU and where it comes from.

* **Prices** (``theory/data/prices.toml``): the hourly price of one GPU is the public on-demand
  price of an instance divided by its GPU count; a user TOML overrides or adds entries
  (``base =`` inheritance, as for GPU files).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from theory.config import inherit, read_packaged, read_section
from theory.errors import FieldError, require_positive

PRICE_FILE = "theory/data/prices.toml"
PRICE_FIELDS = ("usd_per_gpu_hour", "instance_usd_per_hour", "gpus_per_instance", "source", "instance",
                "provider", "as_of", "checked")  # what a [prices.<gpu>] table may give (besides base)


@dataclass(frozen=True)
class Price:
    """The hourly price of one GPU and where it comes from.

    Attributes
    ----------
    gpu : str
        GPU preset key.
    usd_per_gpu_hour : float
        ``instance_usd_per_hour / gpus_per_instance`` (or a user's direct figure).
    source, instance, provider, as_of : str
        The public price list, the instance type priced there, its provider and date.
    checked : bool or None
        Whether the figure was read off the cited page when the file was written (None: not said).
    """

    gpu: str
    usd_per_gpu_hour: float
    source: str = ""
    instance: str = ""
    provider: str = ""
    as_of: str = ""
    checked: bool | None = None


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """Every GPU price: the packaged table, overridden or extended by the user TOML at ``path``.

    Raises
    ------
    FieldError
        For an entry without a usable price, or a key the table does not define (naming
        ``prices.<key>`` and the file).
    """
    presets = read_packaged("prices.toml")["prices"]
    user = read_section(path, "prices", PRICE_FIELDS) if path is not None else {}
    tables = inherit(presets, user, "price")
    return {key: _price(key, table, str(path) if key in user else PRICE_FILE)
            for key, table in tables.items()}


def _price(key: str, t: dict, where: str) -> Price:
    if "usd_per_gpu_hour" in t:
        usd = t["usd_per_gpu_hour"]
    elif "instance_usd_per_hour" in t and "gpus_per_instance" in t:
        gpus = t["gpus_per_instance"]
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise FieldError(f"{where}: prices.{key}.gpus_per_instance", gpus, "an integer >= 1")
        usd = require_positive(f"{where}: prices.{key}.instance_usd_per_hour",
                               t["instance_usd_per_hour"]) / gpus
    else:
        raise FieldError(f"{where}: prices.{key}", sorted(t),
                         "usd_per_gpu_hour, or instance_usd_per_hour with gpus_per_instance")
    require_positive(f"{where}: prices.{key} (USD per GPU-hour)", usd)
    return Price(key, float(usd), str(t.get("source", "")), str(t.get("instance", "")),
                 str(t.get("provider", "")), str(t.get("as_of", "")),
                 t["checked"] if isinstance(t.get("checked"), bool) else None)


def gpu_price(prices: dict[str, Price], gpu: str, price_file: str | None = None) -> Price:
    """The price of ``gpu`` (a preset key); a measured-profile preset without an entry of its own
    costs what the card it is built on costs (:func:`theory.hardware.measured_base`); a GPU the
    table lacks is an error naming it and the file."""
    from theory.hardware import measured_base

    base = measured_base(gpu)
    if gpu not in prices and base in prices:
        return replace(prices[base], gpu=gpu)
    if gpu not in prices:
        files = PRICE_FILE + (f" and {price_file}" if price_file else "")
        raise FieldError(f"price of GPU {gpu!r}", None,
                         f"a [prices.{gpu}] entry in {files} (known: {', '.join(sorted(prices))})")
    return prices[gpu]


__all__ = [
    "PRICE_FIELDS",
    "PRICE_FILE",
    "Price",
    "gpu_price",
    "load_prices",
]
