"""`scenario.json` codec of the native scenario format: header, camera rig and table index.

Writing checks that metadata survives JSON unchanged and pretty-prints the document (objects one
key per line, lists of scalars on one line); reading type-checks every key and raises
`AvsimInputError(file, field, reason)`.
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import avsim
from avsim.core.cameras import camera_from_dict
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.names import check_name
from avsim.core.rig import MAX_CAPTURE_OFFSET_NS, CameraRig
from avsim.core.safe_files import regular_file
from avsim.core.transforms import SE3
from avsim.scenario.io_checks import check_rotations
from avsim.scenario.io_schema import (
    FORMAT_NAME,
    MAX_CAMERA_SIDE_PX,
    MAX_FOCAL_PX,
    MAX_HEADER_BYTES,
    MAX_ID_CHARS,
    MAX_METADATA_TEXT_CHARS,
    MIN_FOCAL_PX,
    SCHEMA_VERSION,
    TABLE_FILES,
    build_checked,
)
from avsim.scenario.types import Scenario


# ==========================================================================================
# writing
# ==========================================================================================
def table_digest(path: Path) -> str:
    """The sha256 of a table file's bytes (hex), as recorded in scenario.json."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_table_digest(header_path: Path, table_path: Path, expected: str | None) -> None:
    """Raise when a table's bytes differ from the digest scenario.json recorded (None: an older
    scenario without digests, nothing to check)."""
    if expected is not None and table_digest(table_path) != expected:
        raise AvsimInputError(table_path, "sha256", f"content differs from the digest in {header_path.name}: the table "
                              "was corrupted or changed after avsim wrote it (re-save the scenario to record new content)")  # fmt: skip


def header_json(scenario: Scenario, rows: dict[str, int], digests: dict[str, str] | None = None) -> str:
    if not isinstance(scenario.scenario_id, str) or not scenario.scenario_id:
        raise AvsimValueError(f"scenario_id: must be a non-empty string, got {scenario.scenario_id!r}")
    metadata = dict(scenario.metadata)
    _check_json_value(metadata, "metadata")
    doc = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "written_by": f"avsim {avsim.__version__}",
        "scenario_id": scenario.scenario_id,
        "rig": rig_to_json(scenario.rig),
        "tables": {name: {"rows": n, **({"sha256": digests[name]} if digests else {})} for name, n in rows.items()},
        "metadata": metadata,
    }
    if scenario.frame_origin_ns is not None:  # written only when frame 0 is not the first ego pose
        doc["frame_origin_ns"] = int(scenario.frame_origin_ns)
    return _pretty_json(doc) + "\n"


def _pretty_json(value: Any, indent: str = "") -> str:
    """JSON with objects one key per line and lists of scalars on one line (readable rigs)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_pretty_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + _pretty_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def _check_json_value(value: Any, where: str) -> None:
    """Metadata must survive JSON unchanged: str keys, lists (not tuples), finite floats."""
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int) and type(value) is int:
        return
    if isinstance(value, float) and type(value) is float:
        if not math.isfinite(value):
            raise AvsimValueError(f"{where}: {value} is not finite; JSON cannot hold it")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise AvsimValueError(f"{where}: key {key!r} is not a string; JSON keys are strings")
            _check_json_value(item, f"{where}.{key}")
        return
    hint = " (use a list)" if isinstance(value, tuple) else " (convert it to int, float, str, bool, None, list or dict)"
    raise AvsimValueError(f"{where}: {type(value).__name__} does not round-trip through JSON{hint}")


def rig_to_json(rig: CameraRig) -> dict[str, Any]:
    cameras = []
    for k, (name, camera) in enumerate(zip(rig.names, rig.cameras)):
        pose = rig.ego_SE3_camera[k]
        entry = {"name": name, **camera.to_dict()}
        entry["ego_SE3_camera"] = {
            "rotation": [[float(v) for v in row] for row in np.asarray(pose.rotation)],
            "translation_m": [float(v) for v in np.asarray(pose.translation)],
        }
        if rig.has_capture_offsets:  # written only when some camera fires away from the frame time
            entry["capture_offset_ns"] = int(rig.capture_offset_ns[k])
        cameras.append(entry)
    return {"cameras": cameras}


def _read_capture_offset(path: Path, where: str, value: Any) -> int:
    """One camera's `capture_offset_ns` (the caller passes 0 when the key is absent: the frame time)."""
    if type(value) is not int or abs(value) > MAX_CAPTURE_OFFSET_NS:
        raise AvsimInputError(path, where, f"must be an integer of at most {MAX_CAPTURE_OFFSET_NS} ns in magnitude, got {value!r}")
    return value


# ==========================================================================================
# reading
# ==========================================================================================
def _reject_constant(token: str) -> float:
    raise ValueError(f"{token} is not valid JSON")


def read_header(path: Path) -> dict[str, Any]:
    if not path.exists() and not path.is_symlink():
        raise AvsimInputError(path, "file", "missing (not an avsim scenario folder?)")
    size = regular_file(path, "file").stat().st_size
    if size > MAX_HEADER_BYTES:
        raise AvsimInputError(path, "file", f"{size} bytes, more than the {MAX_HEADER_BYTES} a scenario.json may have")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise AvsimInputError(path, "json", f"not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise AvsimInputError(path, "json", f"truncated or invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except ValueError as exc:
        raise AvsimInputError(path, "json", str(exc)) from exc
    except RecursionError:
        raise AvsimInputError(path, "json", "nested too deeply") from None
    if not isinstance(doc, dict):
        raise AvsimInputError(path, "json", f"top level must be an object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT_NAME:
        raise AvsimInputError(path, "format", f"expected {FORMAT_NAME!r}, got {doc.get('format')!r}")
    version = doc.get("schema_version")
    if type(version) is not int:
        raise AvsimInputError(path, "schema_version", f"must be an integer, got {version!r}")
    if version != SCHEMA_VERSION:
        newer = "a newer" if version > SCHEMA_VERSION else "an older"
        raise AvsimInputError(
            path, "schema_version", f"is {version}, written by {newer} avsim; this avsim reads schema {SCHEMA_VERSION} only"
        )
    for key, kind in (("scenario_id", str), ("rig", dict), ("metadata", dict)):
        if key not in doc:
            raise AvsimInputError(path, key, "missing")
        if not isinstance(doc[key], kind):
            raise AvsimInputError(path, key, f"must be a JSON {kind.__name__.replace('str', 'string').replace('dict', 'object')}")
    if not doc["scenario_id"]:
        raise AvsimInputError(path, "scenario_id", "is empty")
    origin = doc.get("frame_origin_ns")
    if origin is not None and type(origin) is not int:
        raise AvsimInputError(path, "frame_origin_ns", f"must be integer nanoseconds, got {origin!r}")
    if len(doc["scenario_id"]) > MAX_ID_CHARS:
        raise AvsimInputError(path, "scenario_id", f"{len(doc['scenario_id'])} characters, more than {MAX_ID_CHARS}")
    _check_metadata_text(path, doc["metadata"])
    return doc


def _check_metadata_text(path: Path, metadata: dict[str, Any]) -> None:
    """Every key and string in `metadata` is at most `MAX_METADATA_TEXT_CHARS` long (walked without recursion)."""
    stack: list[tuple[str, Any]] = [("metadata", metadata)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str) and len(value) > MAX_METADATA_TEXT_CHARS:
            raise AvsimInputError(path, where, f"a string of {len(value)} characters, more than {MAX_METADATA_TEXT_CHARS}")
        if isinstance(value, dict):
            for key, item in value.items():
                if len(key) > MAX_METADATA_TEXT_CHARS:
                    raise AvsimInputError(path, where, f"a key of {len(key)} characters, more than {MAX_METADATA_TEXT_CHARS}")
                stack.append((f"{where}.{key[:40]}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


def _json_number(path: Path, field: str, value: Any) -> float:
    if type(value) not in (int, float):
        raise AvsimInputError(path, field, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise AvsimInputError(path, field, f"must be finite, got {value!r}")
    return float(value)


def _json_numbers(path: Path, field: str, value: Any, n: int) -> list[float]:
    if not isinstance(value, list) or len(value) != n:
        raise AvsimInputError(path, field, f"must be a list of {n} numbers, got {value!r}")
    return [_json_number(path, f"{field}[{i}]", v) for i, v in enumerate(value)]


def _json_int(path: Path, field: str, value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise AvsimInputError(path, field, f"must be a positive integer, got {value!r}")
    return value


def _read_camera(path: Path, where: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Type-check one camera entry; returns the dict for `camera_from_dict`."""
    model = entry.get("model")
    if model not in ("pinhole", "ftheta"):
        raise AvsimInputError(path, f"{where}.model", f"must be 'pinhole' or 'ftheta', got {model!r}")
    d: dict[str, Any] = {"model": model}
    for key in ("width_px", "height_px"):
        d[key] = _json_int(path, f"{where}.{key}", entry.get(key))
        if d[key] > MAX_CAMERA_SIDE_PX:
            raise AvsimInputError(path, f"{where}.{key}", f"{d[key]} px, more than the {MAX_CAMERA_SIDE_PX} a camera may have")
    for key in ("cx_px", "cy_px"):
        d[key] = _json_number(path, f"{where}.{key}", entry.get(key))
    if model == "pinhole":
        for key in ("fx_px", "fy_px"):
            d[key] = _json_number(path, f"{where}.{key}", entry.get(key))
            if d[key] <= 0:
                raise AvsimInputError(path, f"{where}.{key}", f"focal length must be > 0, got {d[key]!r}")
            if not MIN_FOCAL_PX <= d[key] <= MAX_FOCAL_PX:
                raise AvsimInputError(path, f"{where}.{key}", f"focal length {d[key]!r} px is outside [{MIN_FOCAL_PX:g}, {MAX_FOCAL_PX:g}]")
        d["distortion"] = _json_numbers(path, f"{where}.distortion", entry.get("distortion"), 5)
    else:
        d["poly"] = _json_numbers(path, f"{where}.poly", entry.get("poly"), 6)
        if d["poly"][1] == 0.0:
            raise AvsimInputError(path, f"{where}.poly[1]", "zero focal length (the linear coefficient must not be 0)")
        if type(entry.get("is_backward_poly")) is not bool:
            raise AvsimInputError(path, f"{where}.is_backward_poly", f"must be true or false, got {entry.get('is_backward_poly')!r}")
        d["is_backward_poly"] = entry["is_backward_poly"]
        d["linear_cde"] = _json_numbers(path, f"{where}.linear_cde", entry.get("linear_cde"), 3)
    return d


def _read_pose(path: Path, where: str, value: Any) -> SE3:
    if not isinstance(value, dict):
        raise AvsimInputError(path, where, "must be an object with 'rotation' (3x3) and 'translation_m' (3)")
    rows = value.get("rotation")
    if not isinstance(rows, list) or len(rows) != 3:
        raise AvsimInputError(path, f"{where}.rotation", "must be a 3x3 list of numbers")
    R = np.array([_json_numbers(path, f"{where}.rotation[{i}]", r, 3) for i, r in enumerate(rows)])
    t = np.array(_json_numbers(path, f"{where}.translation_m", value.get("translation_m"), 3))
    check_rotations(path, f"{where}.rotation", R[None], None)
    return SE3(R, t)


def read_rig(path: Path, rig: dict[str, Any]) -> CameraRig:
    cameras_json = rig.get("cameras")
    if not isinstance(cameras_json, list) or not cameras_json:
        raise AvsimInputError(path, "rig.cameras", "must be a non-empty list of cameras")
    names, cameras, rotations, translations, offsets = [], [], [], [], []
    for k, entry in enumerate(cameras_json):
        where = f"rig.cameras[{k}]"
        if not isinstance(entry, dict):
            raise AvsimInputError(path, where, "must be an object")
        name = entry.get("name")
        name = check_name(name, path, f"{where}.name")  # it becomes file names: OUT/<clip>/<clip>.<camera>.mp4
        if name in names:
            raise AvsimInputError(path, f"{where}.name", f"duplicate camera name {name!r}")
        where = f"rig.cameras[{k}] ({name})"
        camera_dict = _read_camera(path, where, entry)
        cameras.append(build_checked(path, where, partial(camera_from_dict, camera_dict)))
        pose = _read_pose(path, f"{where}.ego_SE3_camera", entry.get("ego_SE3_camera"))
        offsets.append(_read_capture_offset(path, f"{where}.capture_offset_ns", entry.get("capture_offset_ns", 0)))
        names.append(name)
        rotations.append(pose.rotation)
        translations.append(pose.translation)
    return build_checked(
        path,
        "rig",
        lambda: CameraRig(
            tuple(names), tuple(cameras), SE3(np.stack(rotations), np.stack(translations)),
            capture_offset_ns=np.array(offsets, np.int64),
        ),
    )


def read_table_digests(path: Path, tables: dict[str, Any]) -> dict[str, str | None]:
    """The recorded sha256 per table (None where scenario.json has none: written before digests)."""
    out: dict[str, str | None] = {}
    for name in TABLE_FILES:
        digest = tables[name].get("sha256")
        if digest is not None and not (isinstance(digest, str) and len(digest) == 64):
            raise AvsimInputError(path, f"tables.{name}.sha256", f"must be 64 hex digits, got {digest!r}")
        out[name] = digest
    return out


def read_table_index(path: Path, tables: Any) -> dict[str, int]:
    if not isinstance(tables, dict):
        raise AvsimInputError(path, "tables", "missing or not an object")
    rows = {}
    for name in TABLE_FILES:
        entry = tables.get(name)
        if not isinstance(entry, dict) or type(entry.get("rows")) is not int or entry["rows"] < 0:
            raise AvsimInputError(path, f"tables.{name}.rows", f"missing or not a non-negative integer, got {entry!r}")
        rows[name] = entry["rows"]
    unknown = sorted(set(tables) - set(TABLE_FILES))
    if unknown:
        raise AvsimInputError(path, "tables", f"unknown table {unknown[0]!r} for schema {SCHEMA_VERSION}")
    return rows
