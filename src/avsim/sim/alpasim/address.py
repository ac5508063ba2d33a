"""`--policy alpasim://HOST:PORT[?image=png|jpeg]`: recognised and parsed without loading gRPC."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from avsim.core.errors import AvsimInputError

__all__ = ["SCHEME", "is_driver_address", "parse_address"]

SCHEME = "alpasim"


def is_driver_address(spec: str) -> bool:
    """Whether a `--policy` value names an AlpaSim driver."""
    return spec.startswith(f"{SCHEME}://")


def parse_address(spec: str) -> tuple[str, str]:
    """`alpasim://HOST:PORT[?image=png|jpeg]` -> ("HOST:PORT", image format); AvsimInputError when malformed."""
    parts = urlsplit(spec)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != SCHEME or not parts.hostname or port is None or not 0 < port < 65536 or parts.path not in ("", "/"):
        raise AvsimInputError("--policy", "policy", f"expected alpasim://HOST:PORT (a port in 1..65535), got {spec!r}")
    image = parse_qs(parts.query).get("image", ["png"])[-1]
    if image not in ("png", "jpeg"):
        raise AvsimInputError("--policy", "policy", f"image: expected png or jpeg, got {image!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", image
