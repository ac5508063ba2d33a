"""``avsim check-projection``: do the imported boxes land where the dataset says they do?

A source that ships its own 2-D projections of its 3-D boxes (mmdetection3d's ``center_2d`` /
``center2d`` and ``bbox``; Waymo perception frames through
``avsim.scenario.importers.waymo_frame`` when that reader is installed) is imported through
the normal importer; every labelled box is then projected through the imported rig and ego
trajectory - the camera at its capture time, ``ego.pose_at(time_ns) @ ego_SE3_camera`` - and
compared with the source's labels: the projected centre against the source's centre, and the
axis-aligned rectangle of the 8 projected corners against the source's 2-D rectangle where
that was not clipped to the image (and no corner is behind the camera). The box of a track is
its observation nearest in time to the label (a source projects the box of its annotation).

Shutter: a source whose images carry rolling-shutter timing (``ReferenceSource.captures``: Waymo
perception frames) is projected by default with Waymo's rolling-shutter camera model
(`avsim.scenario.importers.waymo_camera.project_points`: each point at the time its readout line
is exposed, the ego moving with the image velocity); ``shutter="global"`` projects every camera
at its capture time as the renderer does. Cameras whose readout is GLOBAL_SHUTTER (or UNKNOWN)
are projected global either way. The report names what each camera used.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names
from avsim.scenario.reference import ReferenceLabel, ReferenceSource

if TYPE_CHECKING:
    from avsim.scenario.importers.waymo_camera import RollingShutterCapture
    from avsim.scenario.types import Scenario

__all__ = [
    "SHUTTERS", "CameraStats", "ProjectedBox", "ProjectionReport", "ReferenceLabel", "ReferenceSource", "check_projection",
    "project_label", "reference_source", "report_lines", "resolve_shutter", "write_overlays",
]  # fmt: skip

WAYMO_FRAME_MODULE = "avsim.scenario.importers.waymo_frame"
SHUTTERS = ("global", "rolling")
EDGES = ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4), (1, 5), (2, 6), (3, 7))


def _is_mmdet3d(path: Path) -> bool:
    from avsim.scenario.importers.mmdet3d import looks_like_info

    if path.is_dir():
        return any(looks_like_info(p) for p in path.glob("*.pkl")) or any(path.glob("*.coco.json"))
    return path.name.endswith(".json") or (path.suffix == ".pkl" and looks_like_info(path))


def reference_source(path: str | os.PathLike[str]) -> ReferenceSource:
    """Import `path` with its reference labels: the mmdet3d readers, then the Waymo frame reader.

    Args:
        path: an mmdet3d info .pkl / mono3d .coco.json / folder (``::`` selectors allowed), or a
            source `avsim.scenario.importers.waymo_frame.reference_source` reads. A folder
            whose info .pkl has no 2-D labels is checked against its one .coco.json.

    Returns:
        The `ReferenceSource`.

    Raises:
        AvsimInputError: no reader recognises `path`, or the reader rejects it.
    """
    from avsim.scenario.importers.common import split_selector
    from avsim.scenario.importers.mmdet3d_source import reference_source as mmdet3d_source

    base, _ = split_selector(path)
    if not base.exists():
        raise AvsimInputError(base, "source", "not found")
    if _is_mmdet3d(base):
        source = mmdet3d_source(path)
        coco = sorted(base.glob("*.coco.json")) if base.is_dir() and base == Path(path) and not source.labels else []
        # a folder whose info .pkl has no cam_instances (nuScenes infos without 2-D labels) and
        # one mono3d COCO file beside it: check against the COCO file, which carries the labels
        return mmdet3d_source(coco[0]) if len(coco) == 1 else source
    if importlib.util.find_spec(WAYMO_FRAME_MODULE) is not None:
        return _as_reference_source(importlib.import_module(WAYMO_FRAME_MODULE).reference_source(path), base)
    raise AvsimInputError(base, "source", "no reader with reference labels recognises it (mmdet3d info .pkl / .coco.json, Waymo frames)")


def _as_reference_source(source: object, where: Path) -> ReferenceSource:
    """`source` itself, or a `ReferenceSource` rebuilt from an object of the same shape."""
    if isinstance(source, ReferenceSource):
        return source
    try:
        labels = tuple(
            ReferenceLabel(lb.camera, lb.time_ns, lb.track_id, lb.center_px, lb.box_px, lb.clipped)
            for lb in source.labels  # type: ignore[attr-defined]
        )
        captures = dict(getattr(source, "captures", {}))
        return ReferenceSource(source.scenario, labels, dict(source.images), captures)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError) as exc:
        raise AvsimInputError(where, "source", f"the reader returned no usable reference labels: {exc}") from None


@dataclass(frozen=True)
class ProjectedBox:
    """One labelled box projected through the imported scenario.

    Attributes:
        center_px: (2,) projected box centre (NaN if behind the camera).
        corners_px: (8, 2) projected corners (NaN where behind the camera).
        rect_px: (4,) x0, y0, x1, y1 of the corners (NaN if any corner is behind the camera).
    """

    center_px: np.ndarray
    corners_px: np.ndarray
    rect_px: np.ndarray


def project_label(scenario: Scenario, label: ReferenceLabel, capture: RollingShutterCapture | None = None) -> ProjectedBox | None:
    """Project the box of `label.track_id` into `label.camera` at `label.time_ns`.

    Args:
        scenario: the imported scenario.
        label: which box, camera and capture time.
        capture: the image's rolling-shutter timing: with a rolling readout the points are
            projected by Waymo's rolling-shutter model around the ego pose at `label.time_ns`
            (NaN where that model calls the projection invalid); None or a global readout:
            global shutter at `label.time_ns`.

    Returns:
        The projection, or None when the scenario has no such track or camera.
    """
    from avsim.core.agents import box_corners

    if label.camera not in scenario.rig.names:
        return None
    track = scenario.agents.track(label.track_id)
    if not len(track):
        return None
    row = int(np.argmin(np.abs(track.timestamps_ns - label.time_ns)))
    world = np.concatenate([track.center_m[row][None], box_corners(track.center_m[row : row + 1], track.size_m[row : row + 1], track.orientation[row : row + 1])[0]])
    world_SE3_ego = scenario.ego.pose_at(np.array([label.time_ns]))[0]
    camera, ego_SE3_camera = scenario.rig.camera(label.camera), scenario.rig.extrinsic(label.camera)
    if capture is not None and capture.is_rolling:
        from avsim.core.cameras import PinholeCamera
        from avsim.scenario.importers.waymo_camera import project_points

        if not isinstance(camera, PinholeCamera):
            raise AvsimInputError(label.camera, "camera", f"the rolling-shutter model needs a pinhole camera, got {camera.model}")
        rolling = project_points(world, camera, world_SE3_ego, ego_SE3_camera, capture)
        uv = np.where(rolling.valid[:, None], rolling.uv_px, np.nan)
    else:
        uv, depth, _ = camera.project(world_SE3_ego.compose(ego_SE3_camera).inverse().apply(world))
        uv = np.where((depth > 0)[:, None], uv, np.nan)
    corners = uv[1:]
    rect = np.array([corners[:, 0].min(), corners[:, 1].min(), corners[:, 0].max(), corners[:, 1].max()])
    return ProjectedBox(uv[0], corners, rect)


@dataclass(frozen=True)
class CameraStats:
    """Errors of one camera's labels (pixels)."""

    camera: str
    boxes: int
    centres_compared: int
    centre_max_px: float
    centre_median_px: float
    corners_compared: int
    corner_max_px: float
    corner_median_px: float
    skipped_clipped: int
    missing: int  # labels whose track or camera the scenario lacks
    shutter: str = "global"  # what was projected: "global", "rolling <READOUT>", or both joined by ", "


@dataclass(frozen=True)
class ProjectionReport:
    """Per-camera statistics of a projection check."""

    source: str
    cameras: tuple[CameraStats, ...]
    labels: int
    shutter: str = "global"  # the mode asked for: "global" or "rolling"


def _stats(camera: str, pairs: list[tuple[ReferenceLabel, ProjectedBox | None]], shutter: str) -> CameraStats:
    centre, corner, clipped, missing = [], [], 0, 0
    for label, proj in pairs:
        if proj is None:
            missing += 1
            continue
        if np.all(np.isfinite(label.center_px)):
            centre.append(float(np.linalg.norm(proj.center_px - label.center_px)))
        if not np.all(np.isfinite(label.box_px)):
            continue
        if label.clipped or not np.all(np.isfinite(proj.rect_px)):
            clipped += 1
            continue
        corner.append(float(np.max(np.abs(proj.rect_px - label.box_px))))

    def agg(v: list[float], f: object) -> float:
        return float(f(v)) if v else float("nan")  # type: ignore[operator]

    return CameraStats(camera, len(pairs), len(centre), agg(centre, np.max), agg(centre, np.median),
                       len(corner), agg(corner, np.max), agg(corner, np.median), clipped, missing, shutter)  # fmt: skip


def resolve_shutter(source: ReferenceSource, shutter: str | None, name: str = "") -> str:
    """The shutter mode to project with: `shutter`, or by default "rolling" when the source has timing.

    Args:
        source: the imported source.
        shutter: "global", "rolling" or None (rolling if any image has a rolling readout).
        name: the source's name, for errors.

    Returns:
        "global" or "rolling".

    Raises:
        AvsimInputError: an unknown mode, or "rolling" for a source without shutter timing.
    """
    has_rolling = any(c.is_rolling for c in source.captures.values())
    if shutter is None:
        return "rolling" if has_rolling else "global"
    if shutter not in SHUTTERS:
        raise AvsimInputError(name or "source", "--shutter", f"expected one of {', '.join(SHUTTERS)}, got {shutter!r}")
    if shutter == "rolling" and not has_rolling:
        raise AvsimInputError(name or "source", "--shutter", "rolling: the source carries no rolling-shutter image timing (Waymo perception frames do)")
    return shutter


def _capture(source: ReferenceSource, label: ReferenceLabel, mode: str) -> RollingShutterCapture | None:
    capture = source.captures.get((label.camera, label.time_ns)) if mode == "rolling" else None
    return capture if capture is not None and capture.is_rolling else None


def check_projection(source: ReferenceSource, name: str = "", shutter: str | None = None) -> ProjectionReport:
    """Compare every reference label with the imported scenario's projection of its box.

    Args:
        source: the imported source with its labels.
        name: the source's name for the report.
        shutter: "global", "rolling" or None (`resolve_shutter`: rolling where the source has timing).

    Returns:
        `ProjectionReport`, one `CameraStats` per rig camera (rig order).
    """
    mode = resolve_shutter(source, shutter, name)
    per_cam: dict[str, list[tuple[ReferenceLabel, ProjectedBox | None]]] = {c: [] for c in source.scenario.rig.names}
    used: dict[str, set[str]] = {}
    for label in source.labels:
        capture = _capture(source, label, mode)
        used.setdefault(label.camera, set()).add(f"rolling {capture.readout}" if capture is not None else "global")
        per_cam.setdefault(label.camera, []).append((label, project_label(source.scenario, label, capture)))
    stats = tuple(_stats(c, pairs, ", ".join(sorted(used.get(c, {"global"})))) for c, pairs in per_cam.items())
    return ProjectionReport(name, stats, len(source.labels), mode)


def report_lines(report: ProjectionReport) -> list[str]:
    """Human-readable lines: one per camera, then a summary line."""

    def px(v: float) -> str:
        return "n/a" if np.isnan(v) else f"{v:.3f}"

    lines = []
    for s in report.cameras:
        lines.append(
            f"{s.camera}: {s.boxes} boxes; centre error px max {px(s.centre_max_px)} median {px(s.centre_median_px)} "
            f"({s.centres_compared} compared); corner (bbox) error px max {px(s.corner_max_px)} median {px(s.corner_median_px)} "
            f"({s.corners_compared} compared, {s.skipped_clipped} skipped: clipped by the image border)"
            + (f"; {s.missing} labels without a box" if s.missing else "")
            + f"; shutter {s.shutter}"
        )
    none = " (the source carries no 2-D labels, e.g. an info without cam_instances)" if not report.labels else ""
    lines.append(f"{report.labels} reference labels in {report.source or 'the source'}{none}")
    return lines


def report_document(report: ProjectionReport) -> dict:
    """The report as a JSON-able dict (NaN -> None)."""

    def clean(v: object) -> object:
        return None if isinstance(v, float) and np.isnan(v) else v

    return {
        "source": report.source,
        "labels": report.labels,
        "shutter": report.shutter,
        "cameras": [{k: clean(v) for k, v in vars(s).items()} for s in report.cameras],
    }


def _draw_box(canvas: np.ndarray, proj: ProjectedBox, label: ReferenceLabel) -> None:
    import cv2

    h, w = canvas.shape[:2]
    green, red = (60, 220, 60), (40, 40, 230)  # BGR
    for a, b in EDGES:
        pa, pb = proj.corners_px[a], proj.corners_px[b]
        if not (np.all(np.isfinite(pa)) and np.all(np.isfinite(pb))):
            continue
        ok, p1, p2 = cv2.clipLine((0, 0, w, h), tuple(int(round(v)) for v in np.clip(pa, -1e5, 1e5)), tuple(int(round(v)) for v in np.clip(pb, -1e5, 1e5)))
        if ok:
            cv2.line(canvas, p1, p2, green, 2, cv2.LINE_AA)
    if np.all(np.isfinite(label.box_px)):
        x0, y0, x1, y1 = (int(round(v)) for v in label.box_px)
        cv2.rectangle(canvas, (x0, y0), (x1, y1), red, 1, cv2.LINE_AA)
    for centre, color in ((label.center_px, red), (proj.center_px, green)):
        if np.all(np.isfinite(centre)) and np.all(np.abs(centre) < 1e5):
            cv2.circle(canvas, (int(round(centre[0])), int(round(centre[1]))), 4, color, -1, cv2.LINE_AA)


def write_overlays(source: ReferenceSource, out_dir: str | os.PathLike[str], shutter: str | None = None) -> list[Path]:
    """One PNG per labelled camera image: the real image (else black) with the projected boxes.

    Projected box edges and centres are green; the source's own rectangles and centres red.

    Args:
        source: the imported source with its labels.
        out_dir: folder for ``<camera>_<time_ns>.png`` (created).
        shutter: as for `check_projection`.

    Returns:
        The files written, sorted.
    """
    import cv2

    from avsim.core.atomic import atomic_output_path

    mode = resolve_shutter(source, shutter)
    groups: dict[tuple[str, int], list[ReferenceLabel]] = {}
    for label in source.labels:
        groups.setdefault((label.camera, label.time_ns), []).append(label)
    written = []
    for (camera, time_ns), labels in sorted(groups.items()):
        if camera not in source.scenario.rig.names:
            continue
        cam = source.scenario.rig.camera(camera)
        image = source.images.get((camera, time_ns))
        canvas = cv2.imread(str(image), cv2.IMREAD_COLOR) if image is not None else None
        if canvas is None:
            canvas = np.zeros((cam.height_px, cam.width_px, 3), dtype=np.uint8)
        for label in labels:
            proj = project_label(source.scenario, label, _capture(source, label, mode))
            if proj is not None:
                _draw_box(canvas, proj, label)
        target = join_names(out_dir, f"{camera}_{time_ns}.png")
        with atomic_output_path(target) as tmp:
            if not cv2.imwrite(str(tmp), canvas):
                raise AvsimInputError(target, "overlay", "cannot write the PNG")
        written.append(target)
    return written
