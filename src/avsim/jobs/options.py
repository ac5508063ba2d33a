"""The options a dataset job passes to each item: their values coerced to the types a kind
declares (`avsim.jobs.kinds.KINDS`, each entry's `options`), and the library objects they become
(`RenderOptions` for render and labels, `SimOptions` for sim).

Options travel as a plain dict of JSON values (they are digested and pickled to workers); a
manifest's option columns are strings and are coerced here to the option's type. An option of
type `Path` names a file or folder: it travels as a string, and a manifest's relative value is
relative to the manifest's folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError, AvsimValueError

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _coerce(value: Any, kind: type, source: object, key: str) -> Any:
    """`value` (a manifest string or a typed value) as `kind`."""
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in _TRUE + _FALSE:
                raise ValueError(f"expected true or false, got {value!r}")
            return text in _TRUE
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"expected an integer, got {value!r}")
            return int(value)
        if kind is float:
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(f"expected a finite number, got {value!r}")
            return number
        return str(value).strip()  # str, and Path (a path travels as its string)
    except ValueError as exc:
        raise AvsimInputError(source, key, str(exc)) from None


def coerce_options(types: Mapping[str, type], options: Mapping[str, Any], source: object, kind: str) -> dict[str, Any]:
    """`options` with each value of the type its name has in `types`; `None` values dropped.

    Args:
        types: the kind's option names and types (`KindSpec.options`).
        options: option name -> value (strings from a manifest, or typed values).
        source: what the options came from (named in an error).
        kind: the job kind (named in an error).

    Returns:
        The typed options, sorted by name.
    """
    out = {}
    for key in sorted(options):
        if options[key] is None:
            continue
        if key not in types:
            raise AvsimInputError(source, key, f"not an option of `avsim run {kind}` (expected {', '.join(types)})")
        out[key] = _coerce(options[key], types[key], source, key)
    return out


def parse_size(value: str, source: object) -> tuple[int, int]:
    """`WxH` -> (width_px, height_px), both positive and even.

    Args:
        value: e.g. "1280x720".
        source: named in an error.

    Returns:
        (width_px, height_px).
    """
    try:
        width_px, height_px = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise AvsimInputError(source, "size", f"expected WxH such as 1280x720, got {value!r}") from None
    if width_px <= 0 or height_px <= 0 or width_px % 2 or height_px % 2 or max(width_px, height_px) > 8192:
        raise AvsimInputError(source, "size", f"width and height must be positive, even and at most 8192, got {value!r}")
    return width_px, height_px


def render_options(options: Mapping[str, Any], out: Path, *, labels_only: bool = False, source: object = "options") -> Any:
    """The `RenderOptions` of one render (or labels) item, rendering into `out` with one worker.

    Args:
        options: typed options (see `coerce_options`).
        out: the output folder given to `run_render` / `run_labels`.
        labels_only: a labels item (`labels=True`, nothing encoded).
        source: named in an error.

    Returns:
        An `avsim.render.run.runner.RenderOptions`.
    """
    from avsim.render import style
    from avsim.render.run.plan import FrameSelectionError, RenderOptions

    size = options.get("size")  # given: every camera at exactly WxH; absent: each at its own aspect, 720 high
    width_px, height_px = parse_size(str(size), source) if size is not None else (style.DEFAULT_WIDTH_PX, style.DEFAULT_HEIGHT_PX)
    cameras = tuple(c.strip() for c in str(options["cameras"]).split(",") if c.strip()) if options.get("cameras") else None
    fields: dict[str, Any] = {"start_s": options.get("start"), "end_s": options.get("end"), "frames": options.get("frames"),
                              "chunk_frames": int(options.get("chunk", 0)), "label_images": options.get("images")}  # fmt: skip
    fields.update({k: options[k] for k in ("fps", "rig", "backend", "preset", "layout", "mosaic", "png", "label_files") if k in options})
    labels = True if labels_only else bool(options.get("labels", False)) or options.get("images") is not None
    try:
        return RenderOptions(out=out, cameras=cameras, width_px=width_px, height_px=height_px, exact_size=size is not None,
                             workers=1, labels=labels, **fields)  # fmt: skip
    except (AvsimValueError, FrameSelectionError) as exc:
        key, _, reason = str(exc).partition(":")
        raise AvsimInputError(source, {"chunk_frames": "chunk", "frames": "frames"}.get(key, key), reason.strip() or str(exc)) from None


def sim_options(options: Mapping[str, Any], source: object = "options") -> Any:
    """The `SimOptions` of one sim item.

    Args:
        options: typed options (see `coerce_options`).
        source: named in an error.

    Returns:
        An `avsim.sim.run.SimOptions`.
    """
    from avsim.sim.run import SimOptions
    from avsim.sim.stepper import AgentMode

    agents = str(options.get("agents", "log"))
    if agents not in ("log", "idm"):
        raise AvsimInputError(source, "agents", f"expected log or idm, got {agents!r}")
    backend = str(options.get("backend", "numba"))
    if backend not in ("numba", "torch"):
        raise AvsimInputError(source, "backend", f"expected numba or torch, got {backend!r}")
    cams = options.get("cameras")
    cameras = None if cams is None else (() if str(cams).strip() == "all" else tuple(c.strip() for c in str(cams).split(",") if c.strip()))
    steps = options.get("steps")
    try:  # SimOptions bounds every option that sizes memory or time (steps, duration, rate, budget, size, seed)
        return SimOptions(policy=str(options.get("policy", "idm")), agents=AgentMode(agents), cameras=cameras,
                          size=parse_size(str(options.get("size", "1280x720")), source), backend=backend,
                          steps=None if steps is None else int(steps), duration_s=options.get("duration"), seed=int(options.get("seed", 0)),
                          rate_hz=float(options.get("rate", 10.0)), controller=str(options.get("controller", "auto")),
                          budget_s=float(options.get("budget", 1.0)))  # fmt: skip
    except AvsimValueError as exc:
        option, _, reason = str(exc).partition(": ")
        raise AvsimInputError(source, option.lstrip("-"), reason or str(exc)) from None
