"""Labels of rendered frames, from the same projection and z-buffer as the pixels.

Per camera and frame (`camera_box_labels`): every agent box that covers at least one pixel
when rendered alone gets its 3-D box in the camera frame, its projected corners and centre
(the camera model's `project`), the 2-D box of the full projected cuboid, the 2-D box and
count of its *visible* pixels (the renderer's per-pixel object id, same z-test as the
colours), the pixels it covers rendered alone (`unoccluded_px`: the union of its own primitives'
coverage, `raster.object_coverage_px`), `visible_fraction = visible_px / unoccluded_px` and
`truncation = 1 - area(full box inside the image) / area(full box)`.

Per frame (`frame_boxes_3d`; a `FrameBoxesCache`, owned by what labels the frames, keeps them for
every camera of a frame): every agent of the scenario at the frame time (tracks resampled by
avsim's rules, exactly as `avsim.evaluation.detections.boxes_from_scenario` does), in the world
and ego frames, with velocity.

The numpy definitions the compiled steps equal live in tests/labels_numpy.py.

Box convention: centre of the box; size (length, width, height) along the object's x
(heading), y, z axes; `rotation_*_wxyz` is the quaternion frame_R_object; `yaw_ego_rad` is
the heading about the ego z axis (x forward, y left, z up), counter-clockwise from x.
Camera frame: avsim's RDF (x right, y down, z forward), metres. Pixels: the centre of pixel
(i, j) is (i, j) (`geometry.PIXEL_CENTRE_OFFSET`); a pixel box (x0, y0, x1, y1) is inclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from avsim.core.agents import AgentTracks
from avsim.core.cameras import Camera
from avsim.core.jit import njit
from avsim.core.quat_kernels import rotated_quats
from avsim.core.shapes import check_shape
from avsim.core.transforms import SE3, quat_to_matrix, wrap_angle
from avsim.core.typing import NDArrayFloat, NDArrayInt, NDArrayInt32
from avsim.render import style
from avsim.render.geometry import projection as geo
from avsim.render.geometry.projector import cached_projector, project_xyz_px
from avsim.render.raster.kernels import grow_visible_box
from avsim.render.raster.primitives import Primitives
from avsim.scenario import Scenario

VELOCITY_DT_S = 0.05  # velocity: central difference of the resampled track over +/- this
BOXES_CACHE_FRAMES = 512  # frame boxes are shared by every camera of a frame
EDGE_SAMPLES = 9  # points per cuboid edge for the full projected 2-D box (curved f-theta edges)
_EDGE_T = np.linspace(0.0, 1.0, EDGE_SAMPLES)  # the points' parameters along an edge (tests/labels_numpy.py `edge_points`)
_EDGE_T.flags.writeable = False
_F64_MAX = float(np.finfo(np.float64).max)  # np.nan_to_num's value for +inf


@dataclass(frozen=True)
class FrameBoxes3D:
    """Every agent at one frame time, in track-id order (K boxes).

    track_id, source_class, object_class (K,) str; center_world_m, center_ego_m (K, 3);
    size_lwh_m (K, 3); rotation_world_wxyz, rotation_ego_wxyz (K, 4) frame_R_object;
    yaw_ego_rad (K,); velocity_world_mps (K, 3) world-frame velocity; velocity_ego_mps (K, 3)
    the same vector in ego axes (not relative to the ego).
    """

    timestamp_ns: int
    world_SE3_ego: SE3
    track_id: npt.NDArray[np.str_]
    source_class: npt.NDArray[np.str_]
    object_class: npt.NDArray[np.str_]
    center_world_m: NDArrayFloat
    center_ego_m: NDArrayFloat
    size_lwh_m: NDArrayFloat
    rotation_world_wxyz: NDArrayFloat
    rotation_ego_wxyz: NDArrayFloat
    yaw_ego_rad: NDArrayFloat
    velocity_world_mps: NDArrayFloat
    velocity_ego_mps: NDArrayFloat

    def __post_init__(self) -> None:
        k = len(self.track_id)
        for name in ("center_world_m", "center_ego_m", "size_lwh_m", "velocity_world_mps", "velocity_ego_mps"):
            check_shape(np.asarray(getattr(self, name)), (k, 3), name)

    def corners_world_m(self) -> NDArrayFloat:
        """(K, 8, 3) world-frame corners in the render spec's corner order."""
        return self._corners_world_m

    @cached_property
    def _corners_world_m(self) -> NDArrayFloat:
        """The corners, computed once (every camera of the frame reads them)."""
        from avsim.core.agents import box_corners

        return box_corners(self.center_world_m, self.size_lwh_m, self.rotation_world_wxyz)

    def rotation_world_matrices(self) -> NDArrayFloat:
        """(K, 3, 3) world_R_object of every box (`quat_to_matrix` of `rotation_world_wxyz`, row by row)."""
        return self._rotation_world_matrices

    @cached_property
    def _rotation_world_matrices(self) -> NDArrayFloat:
        """The matrices, computed once (every camera of the frame reads them)."""
        return quat_to_matrix(self.rotation_world_wxyz) if len(self.track_id) else np.zeros((0, 3, 3))


def frame_boxes_3d(scenario: Scenario, timestamps_ns: NDArrayInt) -> list[FrameBoxes3D]:
    """All agents of `scenario` at each of some times, in one resampling pass (as the renderer and the LET ground truth resample).

    Args:
        scenario: an avsim Scenario.
        timestamps_ns: (B,) frame times.

    Returns:
        B frames' boxes in the world and ego frames, in the order of `timestamps_ns`.
    """
    times = np.asarray(timestamps_ns, np.int64).reshape(-1)
    dt = int(VELOCITY_DT_S * 1e9)
    agents = scenario.agents
    table = agents.resample(np.unique(np.r_[times - dt, times, times + dt])) if len(agents) else agents
    poses = scenario.ego.pose_at(times)
    return [_frame_boxes(table, tj, dt, poses[j]) for j, tj in enumerate(times.tolist())]


class FrameBoxesCache:
    """The frame boxes of one scenario by frame time, computed a block of frames at a time and kept for the
    cameras of the same frames (at most `max_frames`, the oldest dropped first).

    It belongs to what labels the scenario's frames (a `labels_run.Labeller`, which wraps one renderer, or
    one merge of label parts), never to the process: it holds its own scenario, so another scenario
    object, even one at the same address after this one is freed, has its own cache.

    Args:
        scenario: the scenario.
        max_frames: frames kept.
    """

    def __init__(self, scenario: Scenario, max_frames: int = BOXES_CACHE_FRAMES) -> None:
        self.scenario = scenario
        self.max_frames = int(max_frames)
        self._frames: dict[int, FrameBoxes3D] = {}

    def at(self, timestamp_ns: int, block_ns: NDArrayInt | None = None) -> FrameBoxes3D:
        """The boxes at one frame time.

        Args:
            timestamp_ns: the frame time.
            block_ns: (B,) other frame times to compute (and keep) in the same resampling pass when this one is not kept.

        Returns:
            The frame's boxes.
        """
        t = int(timestamp_ns)
        if t not in self._frames:
            times = np.unique(np.r_[np.asarray([] if block_ns is None else block_ns, np.int64), t])
            for tj, boxes in zip(times.tolist(), frame_boxes_3d(self.scenario, times)):
                if len(self._frames) >= self.max_frames:
                    self._frames.pop(next(iter(self._frames)))
                self._frames[tj] = boxes
        return self._frames[t] if t in self._frames else frame_boxes_3d(self.scenario, np.array([t]))[0]


def _frame_boxes(table: AgentTracks, t: int, dt: int, pose: SE3) -> FrameBoxes3D:
    """The boxes at time t from tracks resampled at (at least) t - dt, t and t + dt (rows read by index: no sub-tables)."""
    from avsim.core.agents import collapse_class
    from avsim.core.transforms import matrix_to_yaw

    ts = table.timestamps_ns
    at = np.flatnonzero(ts == t) if len(table) else np.zeros(0, np.int64)
    rows = at[np.argsort(table.track_id[at], kind="stable")]  # the frame's rows in track-id order
    ids, centre, src = table.track_id[rows], table.center_m[rows], table.source_class[rows]
    vel = np.zeros_like(centre)
    if len(ids):
        ends = np.flatnonzero((ts == t - dt) | (ts == t + dt))
        tids, first, count = np.unique(table.track_id[ends], return_index=True, return_counts=True)
        tids, first = tids[count == 2], first[count == 2]
        rate = (table.center_m[ends[first + 1]] - table.center_m[ends[first]]) / (2 * dt * 1e-9)
        k = np.minimum(np.searchsorted(tids, ids), max(len(tids) - 1, 0))
        hit = (tids[k] == ids) if len(tids) else np.zeros(len(ids), bool)
        vel[hit] = rate[k[hit]]
    ego_SE3_world = pose.inverse()
    R_ew = ego_SE3_world.rotation
    rot_world = table.orientation[rows]
    world_R_object = quat_to_matrix(rot_world) if len(ids) else np.zeros((0, 3, 3))
    rot_ego = rotated_quats(R_ew, world_R_object) if len(ids) else rot_world  # ego_R_object
    names, inverse = np.unique(src, return_inverse=True)  # one class lookup per source class
    return FrameBoxes3D(
        t, pose, ids, src, np.array([collapse_class(c) for c in names.tolist()], dtype=str)[inverse],
        centre, ego_SE3_world.apply(centre) if len(ids) else centre, table.size_m[rows], rot_world, rot_ego,
        wrap_angle(matrix_to_yaw(world_R_object) - pose.yaw_rad) if len(ids) else np.zeros(0),  # = quat_to_yaw
        vel, vel @ R_ew.T,
    )  # fmt: skip


@dataclass(frozen=True)
class CameraBoxLabels:
    """The boxes one camera image shows (M boxes: those with unoccluded_px > 0).

    box (M,) int: index into the frame's `FrameBoxes3D`; center_camera_m (M, 3);
    rotation_camera_wxyz (M, 4) camera_R_object; corners_px (M, 8, 2) `camera.project` of the
    corners (NaN where a pinhole cannot image them); center_px (M, 2) projected box centre and
    center_depth_m (M,) its camera z; box2d_full_px (M, 4) x0, y0, x1, y1 of the projected
    cuboid (not clipped to the image); box2d_visible_px (M, 4) inclusive pixel box of the visible
    pixels (-1 where none); visible_px, unoccluded_px (M,) int; visible_fraction, truncation (M,).
    """

    box: NDArrayInt
    center_camera_m: NDArrayFloat
    rotation_camera_wxyz: NDArrayFloat
    corners_px: NDArrayFloat
    center_px: NDArrayFloat
    center_depth_m: NDArrayFloat
    box2d_full_px: NDArrayFloat
    box2d_visible_px: NDArrayInt
    visible_px: NDArrayInt
    unoccluded_px: NDArrayInt
    visible_fraction: NDArrayFloat
    truncation: NDArrayFloat


@njit
def _id_boxes(ids: NDArrayInt32, counts: NDArrayInt, boxes: NDArrayInt) -> None:
    h, w = ids.shape
    for y in range(h):
        for x in range(w):
            k = ids[y, x]
            if 0 <= k < len(counts):
                grow_visible_box(counts, boxes, k, y, x)


@njit
def _box_points(corners: NDArrayFloat, centre: NDArrayFloat, edges: NDArrayInt, t: NDArrayFloat,
                pts: NDArrayFloat, xyz: NDArrayFloat) -> None:  # fmt: skip
    # pts (P, 3) and its rows xyz (3, P), P = M (9 + 12 S): the M x 8 corners, the M centres, then
    # the S points a + t (b - a) of every edge (a, b) of every box (tests/labels_numpy.py `edge_points`)
    m, s = corners.shape[0], len(t)
    for b in range(m):
        for c in range(8):
            for k in range(3):
                pts[8 * b + c, k] = corners[b, c, k]
        for k in range(3):
            pts[8 * m + b, k] = centre[b, k]
    for b in range(m):
        for e in range(len(edges)):
            i0, i1 = edges[e, 0], edges[e, 1]
            for j in range(s):
                i = 9 * m + (b * len(edges) + e) * s + j
                for k in range(3):
                    a = corners[b, i0, k]
                    pts[i, k] = a + t[j] * (corners[b, i1, k] - a)
    for i in range(len(pts)):
        for k in range(3):
            xyz[k, i] = pts[i, k]

@njit
def _edge_bounds(uv: NDArrayFloat, pts: NDArrayFloat, first: int, per_box: int, near: float, out: NDArrayFloat) -> None:
    # out (M, 4): per box, nanmin / nanmax of the pixels of its per_box points from row `first` on,
    # each pixel column on its own, points with z <= near left out (NaN where none is left)
    for b in range(out.shape[0]):
        for col in range(2):
            lo, hi, seen = np.inf, -np.inf, False
            for j in range(per_box):
                i = first + b * per_box + j
                if pts[i, 2] <= near:
                    continue
                v = uv[i, col]
                if v == v:
                    seen = True
                    if v < lo:
                        lo = v
                    if v > hi:
                        hi = v
            out[b, col] = lo if seen else np.nan
            out[b, 2 + col] = hi if seen else np.nan

@njit
def _clip(x: float, lo: float, hi: float) -> float:
    # np.clip of one float (NaN passes through)
    if x != x:
        return x
    y = x if x > lo else lo
    return y if y < hi else hi

@njit
def _truncation(box: NDArrayFloat, ix0: float, ix1: float, iy0: float, iy1: float, out: NDArrayFloat) -> None:
    # `truncation` of every box, the same operations in the same order
    for b in range(len(box)):
        x0, y0, x1, y1 = box[b, 0], box[b, 1], box[b, 2], box[b, 3]
        w = _clip(x1, ix0, ix1) - _clip(x0, ix0, ix1)
        h = _clip(y1, iy0, iy1) - _clip(y0, iy0, iy1)
        area = (x1 - x0) * (y1 - y0)
        frac = 0.0
        if area > 0:
            frac = (w if w >= 0 or w != w else 0.0) * (h if h >= 0 or h != h else 0.0) / area
            if frac != frac:
                frac = 0.0
            elif frac == np.inf:
                frac = _F64_MAX
            elif frac == -np.inf:
                frac = -_F64_MAX
        out[b] = _clip(1.0 - frac, 0.0, 1.0)


def visible_boxes(
    ids: NDArrayInt32, n_objects: int, region_px: tuple[int, int, int, int] | None = None
) -> tuple[NDArrayInt, NDArrayInt]:
    """Pixel counts and inclusive pixel boxes of every object id in an id buffer (one pass).

    Args:
        ids: (H, W) int32 object ids (-1: none).
        n_objects: number of objects N (ids 0..N-1).
        region_px: optional inclusive (x0, y0, x1, y1): only this crop is scanned (the caller
            knows no object id lies outside it).

    Returns:
        counts (N,) int64 and boxes (N, 4) int64 (x0, y0, x1, y1; -1 where the count is 0).
    """
    counts = np.zeros(n_objects, np.int64)
    boxes = np.full((n_objects, 4), -1, np.int64)
    x0, y0, x1, y1 = region_px if region_px is not None else (0, 0, ids.shape[1] - 1, ids.shape[0] - 1)
    if x1 < x0 or y1 < y0 or not n_objects:
        return counts, boxes
    _id_boxes(np.ascontiguousarray(ids[y0 : y1 + 1, x0 : x1 + 1], np.int32), counts, boxes)
    on = counts > 0
    boxes[on] += np.array([x0, y0, x0, y0])
    return counts, boxes


def _truncation_of(box_px: NDArrayFloat, width_px: int, height_px: int) -> NDArrayFloat:
    """1 - (area of each box (M, 4) inside the image) / (its area), in [0, 1] (1 for a NaN or empty box); the image
    spans [-0.5, W - 0.5] x [-0.5, H - 0.5]. One compiled pass (numpy definition: tests/labels_numpy.py `truncation`)."""
    (ix0, ix1), (iy0, iy1) = geo.image_extent_px(width_px), geo.image_extent_px(height_px)
    out = np.empty(len(box_px))
    _truncation(np.ascontiguousarray(box_px, np.float64), float(ix0), float(ix1), float(iy0), float(iy1), out)
    return out


def _project_box_points(camera: Camera, corners_cam: NDArrayFloat, centre: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Pixels and camera-frame points of the corners, centres and edge points of M boxes.

    Args:
        camera: the camera.
        corners_cam: (M, 8, 3) camera-frame corners.
        centre: (M, 3) camera-frame centres.

    Returns:
        uv (P, 2) `camera.project` pixels and pts (P, 3), P = M (9 + 12 EDGE_SAMPLES): the
        corners (box-major), the centres, then the EDGE_SAMPLES points along each of the 12 edges of every box.
    """
    m = len(corners_cam)
    p = m * (9 + 12 * EDGE_SAMPLES)
    pts, xyz = np.empty((p, 3)), np.empty((3, p))
    _box_points(np.ascontiguousarray(corners_cam, np.float64), np.ascontiguousarray(centre, np.float64), geo.CUBOID_EDGES,
                _EDGE_T, pts, xyz)  # fmt: skip
    return project_xyz_px(cached_projector(camera), pts, xyz), pts


def camera_box_labels(
    camera: Camera, world_SE3_camera: SE3, boxes: FrameBoxes3D, box_of_object: NDArrayInt, ids: NDArrayInt32,
    unoccluded_px: NDArrayInt, region_px: tuple[int, int, int, int] | None = None,
    visible: tuple[NDArrayInt, NDArrayInt] | None = None,
) -> CameraBoxLabels:  # fmt: skip
    """Labels of the boxes one image shows.

    Args:
        camera: the camera (at the image size).
        world_SE3_camera: the camera pose.
        boxes: the frame's 3-D boxes.
        box_of_object: (N,) index into `boxes` of each object id of the id buffer.
        ids: (H, W) int32 object ids of the image.
        unoccluded_px: (N,) pixels of each object rendered alone (`raster.object_coverage_px`).
        region_px: optional inclusive (x0, y0, x1, y1) outside which `ids` has no object
            (`object_region_px`); only that crop is scanned.
        visible: optional (counts (N,), boxes (N, 4)) of `visible_boxes(ids, N)` computed already
            (`raster.object_coverage_visible_px`); then `ids` is not scanned.

    Returns:
        The camera's box labels, for the objects with unoccluded_px > 0, in object order.
    """
    n = len(box_of_object)
    counts, vis_box = visible_boxes(ids, n, region_px) if visible is None else visible
    on = np.flatnonzero(unoccluded_px > 0)
    box = np.asarray(box_of_object, np.int64)[on]
    m = len(box)
    R_cw = np.asarray(world_SE3_camera.rotation).T  # camera <- world, as plain matrices (one SE3 less per image)
    t_cw = -R_cw @ np.asarray(world_SE3_camera.translation)
    centre = boxes.center_world_m[box] @ R_cw.T + t_cw
    rot = boxes.rotation_world_wxyz[box]
    rot_cam = rotated_quats(R_cw, boxes.rotation_world_matrices()[box]) if m else rot
    corners_cam = boxes.corners_world_m()[box] @ R_cw.T + t_cw  # (M, 8, 3)
    uv_all, pts = _project_box_points(camera, corners_cam, centre)  # corners, centres, edge points: one projection
    uv, cuv, depth = uv_all[: 8 * m].reshape(-1, 8, 2), uv_all[8 * m : 9 * m], np.ascontiguousarray(pts[8 * m : 9 * m, 2])
    full = np.empty((m, 4))
    _edge_bounds(uv_all, pts, 9 * m, 12 * EDGE_SAMPLES, style.NEAR_M, full)  # bounds of the edge points in front (tests/labels_numpy.py `edge_box`)
    vis, unocc = counts[on], np.asarray(unoccluded_px, np.int64)[on]
    return CameraBoxLabels(
        box, centre, rot_cam, uv, cuv, depth, full, vis_box[on], vis, unocc,
        np.minimum(vis / np.maximum(unocc, 1), 1.0), _truncation_of(full, camera.width_px, camera.height_px),
    )  # fmt: skip


def object_region_px(prims: Primitives) -> tuple[int, int, int, int] | None:
    """Inclusive pixel box (x0, y0, x1, y1) that every labelled primitive (object id >= 0) can reach.

    Args:
        prims: primitives with object ids (`Capsules.obj` / `Planars.obj`).

    Returns:
        The box (clipped to the image), or None when no primitive carries an object id.
    """
    w, h = prims.width_px, prims.height_px
    cap_on = np.flatnonzero(prims.capsules.object_ids() >= 0)
    pl_on = np.flatnonzero(prims.planars.object_ids() >= 0)
    if not len(cap_on) and not len(pl_on):
        return None
    xy, r = prims.capsules.xy_px[cap_on], prims.capsules.radius_px[cap_on, None]
    bb = prims.planars.bbox[pl_on]
    lo = np.concatenate([np.minimum(xy[:, :2], xy[:, 2:]) - r - 2.0, bb[:, :2] - 1.0]).min(0)
    hi = np.concatenate([np.maximum(xy[:, :2], xy[:, 2:]) + r + 2.0, bb[:, 2:] + 1.0]).max(0)
    x0, y0 = max(int(np.floor(lo[0])), 0), max(int(np.floor(lo[1])), 0)
    x1, y1 = min(int(np.ceil(hi[0])), w - 1), min(int(np.ceil(hi[1])), h - 1)
    return (x0, y0, x1, y1) if x1 >= x0 and y1 >= y0 else (0, 0, -1, -1)
