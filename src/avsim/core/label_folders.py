"""Where a render's labels sit: `<clip>/labels/`, holding `index.json` (docs/labels.md).

One home for the folder's name, for finding label folders under a render, generate or dataset
output, and for reading their `index.json` checked (`read_index`), used by the renderer (`avsim.render.run.labels`), generation
(`avsim.models.labels_pairing`) and evaluation (`avsim.evaluation.detect`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import check_name
from avsim.core.safe_json import read_json

LABELS_FOLDER = "labels"
INDEX_JSON = "index.json"


def labels_folder(clip_dir: Path) -> Path:
    """`<clip_dir>/labels`.

    Args:
        clip_dir: a clip's output folder (beside its videos).

    Returns:
        The label folder (it may not exist).
    """
    return Path(clip_dir) / LABELS_FOLDER


def is_label_folder(folder: Path) -> bool:
    """Whether `folder` holds a label index.

    Args:
        folder: a path.

    Returns:
        True when `folder/index.json` is a file.
    """
    return (Path(folder) / INDEX_JSON).is_file()


def find_label_folders(roots: list[Path], depth: int = 2) -> list[Path]:
    """The label folders given, or found up to `depth` folders below the given folders (`<clip>/labels`).

    Args:
        roots: label folders, clip folders, render / generate outputs or dataset outputs.
        depth: how many folder levels below a root a clip folder may sit (0: the root itself).

    Returns:
        Label folders (holding `index.json`), sorted, each once.
    """
    found: set[Path] = set()
    for root in map(Path, roots):
        if is_label_folder(root):
            found.add(root)
            continue
        patterns = ["/".join(["*"] * level + [LABELS_FOLDER, INDEX_JSON]) for level in range(depth + 1)]
        found.update(p.parent for pattern in patterns for p in root.glob(pattern))
    return sorted(found)


MAX_INDEX_FRAMES = 1_000_000  # labelled instants of one clip (20 s at 30 fps: 600)
MAX_INDEX_BYTES = 256 << 20  # index.json (600 frames of 7 cameras: 0.2 MB)
MAX_TOKEN_CHARS = 256  # a sample token


def _int(value: Any, path: Path, field: str, low: int = 0, high: int = 2**62) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AvsimInputError(path, field, f"must be an integer in [{low}, {high}], got {str(value)[:60]!r}")
    return value


def _frame(path: Path, k: int, f: Any) -> dict[str, Any]:
    where = f"frames[{k}]"
    if not isinstance(f, dict):
        raise AvsimInputError(path, where, "must be an object")
    _int(f.get("frame_index"), path, f"{where}.frame_index")
    _int(f.get("video_frame"), path, f"{where}.video_frame")
    _int(f.get("timestamp_ns"), path, f"{where}.timestamp_ns", -(2**62))
    check_name(f.get("video_clip"), path, f"{where}.video_clip")  # a video file name: <video_clip>.<camera>.mp4
    token = f.get("sample_token")
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        raise AvsimInputError(path, f"{where}.sample_token", f"must be a string of 1 to {MAX_TOKEN_CHARS} characters")
    pose = f.get("world_SE3_ego")
    try:
        matrix = np.asarray(pose, dtype=np.float64)
    except (TypeError, ValueError):
        matrix = np.zeros(0)
    if matrix.shape != (4, 4) or not np.isfinite(matrix).all():
        raise AvsimInputError(path, f"{where}.world_SE3_ego", "must be a 4x4 matrix of finite numbers")
    return f


def read_index(folder: Path) -> dict[str, Any]:
    """A label folder's `index.json`, checked: every field a reader uses, with the file and field named.

    `cameras` a non-empty list of distinct safe names (`avsim.core.names`), `camera_sizes_px` /
    `camera_models` one entry per camera (sizes two integers 1 to 16384), `frames` at most
    `MAX_INDEX_FRAMES` objects with integer `frame_index` (distinct), `video_frame`, `timestamp_ns`,
    a safe `video_clip`, a `sample_token` (distinct) and a finite 4x4 `world_SE3_ego`.

    Args:
        folder: the label folder.

    Returns:
        The document.
    """
    path = Path(folder) / INDEX_JSON
    doc = read_json(path, "index", MAX_INDEX_BYTES)
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", f"top level must be an object, got {type(doc).__name__}")
    cameras = doc.get("cameras")
    if not isinstance(cameras, list) or not cameras:
        raise AvsimInputError(path, "cameras", "must be a non-empty list of camera names")
    for k, cam in enumerate(cameras):
        check_name(cam, path, f"cameras[{k}]")
    if len(set(cameras)) != len(cameras):
        raise AvsimInputError(path, "cameras", "a camera is listed twice")
    for key in ("camera_sizes_px", "camera_models"):
        table = doc.get(key)
        if key in doc and (not isinstance(table, dict) or any(c not in table for c in cameras)):
            raise AvsimInputError(path, key, "must hold an entry for every camera")
    for cam, size in (doc.get("camera_sizes_px") or {}).items():
        if not isinstance(size, list) or len(size) != 2:
            raise AvsimInputError(path, f"camera_sizes_px.{cam}", "must be [width, height]")
        for v in size:
            _int(v, path, f"camera_sizes_px.{cam}", 1, 16384)
    if any(not isinstance(m, dict) for m in (doc.get("camera_models") or {}).values()):
        raise AvsimInputError(path, "camera_models", "each camera's model must be an object")
    frames = doc.get("frames")
    if not isinstance(frames, list) or len(frames) > MAX_INDEX_FRAMES:
        raise AvsimInputError(path, "frames", f"must be a list of at most {MAX_INDEX_FRAMES} frames")
    for k, f in enumerate(frames):
        _frame(path, k, f)
    for key in ("frame_index", "sample_token"):
        if len({f[key] for f in frames}) != len(frames):
            raise AvsimInputError(path, f"frames[*].{key}", "two frames share one value")
    return doc
