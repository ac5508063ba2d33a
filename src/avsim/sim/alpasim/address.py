"""`--policy alpasim://HOST:PORT[?image=png|jpeg&interval=S&warmup=S]`: recognised and parsed without loading gRPC.

- `image`: how camera frames go to the driver (PNG, the default, or JPEG);
- `interval`: seconds between `drive` calls (a multiple of the sim's step; default: every step),
  as AlpaSim's `control_timestep_us` (its VaVAM driver runs at 2 Hz: `interval=0.5`);
- `warmup`: seconds of the log replayed before the driver takes over (default 0: none), as
  AlpaSim's runtime does with `force_gt_duration_us` (0.5 s in its `SimulationConfig`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from avsim.core.errors import AvsimInputError

__all__ = ["SCHEME", "DriverAddress", "is_driver_address", "parse_address"]

SCHEME = "alpasim"
IMAGE_FORMATS = ("png", "jpeg")
MAX_INTERVAL_S = 10.0
MAX_WARMUP_S = 60.0


@dataclass(frozen=True)
class DriverAddress:
    """Where the driver listens ("HOST:PORT") and how to drive it (see the module docstring); interval_s None: every step."""

    target: str
    image: str = "png"
    interval_s: float | None = None
    warmup_s: float = 0.0


def is_driver_address(spec: str) -> bool:
    """Whether a `--policy` value names an AlpaSim driver."""
    return spec.startswith(f"{SCHEME}://")


def _seconds(query: dict[str, list[str]], name: str, spec: str, lo: float, hi: float) -> float | None:
    if name not in query:
        return None
    text = query[name][-1]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and lo <= value <= hi) or (name == "interval" and value <= 0):
        low = "> 0" if name == "interval" else f">= {lo:g}"
        raise AvsimInputError("--policy", "policy", f"{name}: expected seconds {low} and at most {hi:g}, got {text[:50]!r} in {spec[:200]!r}")
    return value


def parse_address(spec: str) -> DriverAddress:
    """`alpasim://HOST:PORT[?image=...&interval=...&warmup=...]` as a `DriverAddress`; AvsimInputError when malformed."""
    parts = urlsplit(spec)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != SCHEME or not parts.hostname or port is None or not 0 < port < 65536 or parts.path not in ("", "/"):
        raise AvsimInputError("--policy", "policy", f"expected alpasim://HOST:PORT (a port in 1..65535), got {spec[:200]!r}")
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"image", "interval", "warmup"})
    if unknown:
        raise AvsimInputError("--policy", "policy", f"{unknown[0][:50]!r}: not a driver setting (image, interval, warmup)")
    image = query.get("image", ["png"])[-1]
    if image not in IMAGE_FORMATS:
        raise AvsimInputError("--policy", "policy", f"image: expected png or jpeg, got {image[:50]!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return DriverAddress(f"{host}:{port}", image, _seconds(query, "interval", spec, 0.0, MAX_INTERVAL_S),
                         _seconds(query, "warmup", spec, 0.0, MAX_WARMUP_S) or 0.0)  # fmt: skip
