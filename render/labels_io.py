"""Label records and writers: COCO (2-D boxes + RLE masks), nuScenes-style 3-D JSON, OpenLane lanes.

A camera-frame *record* (`camera_frame_record`) is a JSON-ready dict computed where the
frame is rasterised (the same id buffer as the pixels); records of a render segment are kept
as one part file, and `write_labels` turns every record of a clip into the final files under
`OUT/<clip>/labels/` (layout in docs/labels.md):

- `index.json`: cameras, fps, frame index <-> timestamp <-> video (clip, frame) mapping;
- `boxes3d.json`: nuScenes detection-results layout (`results[sample_token]`), ego frame;
- `coco/<camera>.json`: COCO instances (visible 2-D box, RLE mask, 3-D box in the camera);
- `openlane/<camera>/<frame:06d>.json`: OpenLane per-frame GT (xyz (3, N) camera frame).

render sits below evaluation in the layering, so the OpenLane category table is restated here
(one table, `avsim.maps.style.LANE_TYPE_TO_OPENLANE`, shared with the lane metrics).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import Camera
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayBool, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.maps.style import LANE_TYPE_TO_OPENLANE  # noqa: F401 - read from here by the tests (the one table)
from avsim.render.labels import (
    FrameBoxes3D,
    camera_box_labels,
    frame_boxes_3d,
    rle_string,
)  # fmt: skip
from avsim.render.lane_labels import camera_json, lane_lines_text, lane_points_camera, lane_table, near_lines
from avsim.render.raster import Primitives, object_coverage_visible_px
from avsim.scenario import Scenario

LABELS_FORMAT = "avsim-labels"
LANE_RADIUS_M = 150.0  # lane lines within this of the ego (as `avsim eval lanes` takes a scenario's)
# avsim classes -> nuScenes detection names (Others -> barrier: left out by `avsim eval let`, as the GT is)
NUSCENES_NAME = {"Car": "car", "Truck": "truck", "Pedestrian": "pedestrian", "Cyclist": "bicycle", "Others": "barrier"}
COCO_CATEGORIES = ("Car", "Truck", "Pedestrian", "Cyclist", "Others")
# OpenCV camera axes (x right, y down, z forward) -> Waymo/OpenLane camera axes (x forward, y left, z up)
CV_TO_OPENLANE_CAM = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def sample_token(timestamp_ns: int) -> str:
    """The sample token of a frame: its timestamp in ns as a string (what `avsim eval let` keys GT by).

    Args:
        timestamp_ns: the frame time.

    Returns:
        The token.
    """
    return str(int(timestamp_ns))


# ---- RLE -----------------------------------------------------------------------------------------
def rle_encode(mask: NDArrayBool, box: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    """COCO compressed RLE of a binary mask (column-major runs, pycocotools' string encoding).

    Args:
        mask: (H, W) bool, or with `box` the crop of an (H, W) mask that is False outside it.
        box: None, or (x0, y0, H, W): where the crop sits and the image size.

    Returns:
        {"size": [H, W], "counts": str}.
    """
    x0, y0, h, w = box if box is not None else (0, 0, *mask.shape)
    return {"size": [int(h), int(w)], "counts": rle_string(np.asarray(mask, bool), x0, y0, h, w)}


def rle_decode(rle: dict[str, Any]) -> NDArrayInt:
    """Inverse of `rle_encode`.

    Args:
        rle: {"size": [H, W], "counts": str}.

    Returns:
        (H, W) bool mask.
    """
    h, w = rle["size"]
    s, p = rle["counts"], 0
    runs: list[int] = []
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(runs) > 2:
            x += runs[-2]
        runs.append(x)
    flat = np.zeros(h * w, bool)
    pos = 0
    for i, n in enumerate(runs):
        if i % 2:
            flat[pos : pos + n] = True
        pos += n
    return flat.reshape((w, h)).T


# ---- records -----------------------------------------------------------------------------------
def _f(a: Any, nd: int = 4) -> Any:
    """Floats rounded for JSON (NaN -> None)."""
    arr = np.round(np.asarray(a, np.float64), nd)
    if np.isfinite(arr).all():
        return arr.tolist()
    if arr.ndim == 0:
        return None
    return [_f(x, nd) for x in arr]


def lane_record(scenario: Scenario, camera: Camera, ego_SE3_camera: SE3, world_SE3_ego: SE3, timestamp_ns: int) -> str:
    """The OpenLane per-frame GT JSON of one camera, as its (compact) JSON text.

    `xyz` is (3, N) in OpenLane's camera axes (x forward, y left, z up), `extrinsic` the 4x4
    ego_T_camera in those axes (Waymo convention), so OpenLane's own evaluator (and `avsim eval
    lanes`) bring them into its ground frame. Every lane line of the map within LANE_RADIUS_M of
    the ego is written whole: `visibility` is 1 for every point (the map is the truth, also where
    the image does not show it); `visible_in_image` is 1 where the point is in front of the
    camera, within the render range and inside the image. The points' text comes from
    `labels_json.float_lists_json` (the bytes of `json.dumps` of the document, faster).

    Args:
        scenario: the scenario.
        camera: the camera (at the image size).
        ego_SE3_camera: its extrinsic (RDF camera axes).
        world_SE3_ego: the ego pose.
        timestamp_ns: the frame time (`file_path` is its sample token).

    Returns:
        The OpenLane JSON document's text (`json.dumps(doc, separators=(",", ":"))`): keys
        file_path, timestamp_ns, extrinsic, intrinsic, camera_model, lane_lines.
    """
    table = lane_table(scenario.map.lane_lines)
    idx = near_lines(table, np.asarray(world_SE3_ego.translation)[:2], LANE_RADIUS_M)
    R_we, R_ec = np.asarray(world_SE3_ego.rotation), np.asarray(ego_SE3_camera.rotation)
    R_cw = (R_we @ R_ec).T  # camera <- world as plain matrices (no SE3 objects per image)
    t_cw = -R_cw @ (R_we @ np.asarray(ego_SE3_camera.translation) + np.asarray(world_SE3_ego.translation))
    text = ""
    if len(idx):
        p_all, vis, bounds = lane_points_camera(table, idx, camera, R_cw, t_cw)
        xyz = (p_all @ CV_TO_OPENLANE_CAM.T).T
        text = lane_lines_text(xyz, bounds, vis, table.category[idx], idx, 6)
    ext = np.eye(4)
    ext[:3, :3] = ego_SE3_camera.rotation @ CV_TO_OPENLANE_CAM.T
    ext[:3, 3] = ego_SE3_camera.translation
    K = getattr(camera, "K", None)
    head = {
        "file_path": sample_token(timestamp_ns), "timestamp_ns": int(timestamp_ns),
        "extrinsic": ext.tolist(), "intrinsic": np.asarray(K).tolist() if K is not None else None,
    }  # fmt: skip
    # the text json.dumps writes for head + camera_model + lane_lines (the camera's part encoded once per camera)
    return json.dumps(head, separators=(",", ":"))[:-1] + ',"camera_model":' + camera_json(camera) + ',"lane_lines":[' + text + "]}"


def camera_frame_record(
    scenario: Scenario, boxes: FrameBoxes3D, track_of_object: np.ndarray, camera_name: str, camera: Camera,
    ego_SE3_camera: SE3, frame_index: int, ids: NDArrayInt32, prims: Primitives, rays: NDArrayFloat32,
) -> dict[str, Any]:  # fmt: skip
    """The labels of one camera image (JSON-ready), from its id buffer and primitives.

    Args:
        scenario: the scenario.
        boxes: the frame's 3-D boxes (`frame_boxes_3d`).
        track_of_object: (N,) track id of each object id (`SceneRenderer.box_track_ids`).
        camera_name: the camera's name.
        camera: the camera (at the image size).
        ego_SE3_camera: its extrinsic.
        frame_index: frame at the render rate.
        ids: (H, W) int32 object ids of the image.
        prims: the primitives the image was rasterised from.
        rays: (H, W, 2) its ray map.

    Returns:
        {"frame_index", "camera", "timestamp_ns", "boxes": [...], "openlane": str} (the OpenLane document's JSON text, `lane_record`).
    """
    where = {tid: i for i, tid in enumerate(boxes.track_id.tolist())}
    box_of_object = np.array([where.get(t, -1) for t in track_of_object.tolist()], np.int64)
    unocc, vis_n, vis_box = object_coverage_visible_px(prims, rays, len(box_of_object), ids)  # one pass: coverage and id buffer
    unocc[box_of_object < 0] = 0
    world_SE3_cam = boxes.world_SE3_ego.compose(ego_SE3_camera)
    lab = camera_box_labels(camera, world_SE3_cam, boxes, box_of_object, ids, unocc, visible=(vis_n, vis_box))
    objs = np.flatnonzero(unocc > 0)
    cols = {
        "center_camera_m": _f(lab.center_camera_m), "size_lwh_m": _f(boxes.size_lwh_m[lab.box]),
        "rotation_camera_wxyz": _f(lab.rotation_camera_wxyz, 6), "center_px": _f(lab.center_px, 3),
        "center_depth_m": _f(lab.center_depth_m), "corners_px": _f(lab.corners_px, 3), "box2d_full_px": _f(lab.box2d_full_px, 3),
        "visible_px": lab.visible_px.tolist(), "unoccluded_px": lab.unoccluded_px.tolist(),
        "visible_fraction": _f(lab.visible_fraction), "truncation": _f(lab.truncation),
    }  # fmt: skip
    out = []
    names, rows = tuple(cols), zip(*cols.values())  # one row of the columns per box, keys in `cols` order
    vis_px, vis_box = lab.visible_px.tolist(), lab.box2d_visible_px.tolist()
    tids, cls, src = boxes.track_id.tolist(), boxes.object_class.tolist(), boxes.source_class.tolist()
    for m, (obj, k, row) in enumerate(zip(objs.tolist(), lab.box.tolist(), rows)):
        seen = vis_px[m] > 0
        out.append({
            "track_id": str(tids[k]), "class": str(cls[k]), "source_class": str(src[k]), **dict(zip(names, row)),
            "box2d_visible_px": vis_box[m] if seen else None,
            "mask_rle": _mask_rle(ids, obj, lab.box2d_visible_px[m]) if seen else None,
        })  # fmt: skip
    openlane = lane_record(scenario, camera, ego_SE3_camera, boxes.world_SE3_ego, boxes.timestamp_ns)
    return {"frame_index": int(frame_index), "camera": camera_name, "timestamp_ns": int(boxes.timestamp_ns),
            "boxes": out, "openlane": openlane}  # fmt: skip


def _mask_rle(ids: NDArrayInt32, obj: int, box: NDArrayInt) -> dict[str, Any]:
    x0, y0, x1, y1 = (int(v) for v in box)
    return rle_encode(ids[y0 : y1 + 1, x0 : x1 + 1] == obj, (x0, y0, ids.shape[0], ids.shape[1]))


def write_part(path: Path, records: list[dict[str, Any]]) -> None:
    """Write one segment's records (atomic).

    Args:
        path: the part file.
        records: camera-frame records.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text(json.dumps(records, separators=(",", ":")), encoding="utf-8")


def openlane_path(folder: Path, camera: str, frame_index: int) -> Path:
    """`labels/openlane/<camera>/<frame:06d>.json`.

    Args:
        folder: the label folder.
        camera: the camera name.
        frame_index: frame at the render rate.

    Returns:
        The path.
    """
    return folder / "openlane" / camera / f"{int(frame_index):06d}.json"


def write_json(path: Path, doc: Any) -> None:
    """Write one compact JSON document (atomic; parent folders made).

    Args:
        path: the file.
        doc: a JSON-ready object.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")


def write_json_files(folder: Path, docs: dict[str, Any]) -> list[Path]:
    """Write many small JSON files into `folder`: into one temporary folder beside them, then each renamed into place.

    One `atomic_output_path` per call instead of per file (its stale-temporary scan lists the
    folder, which made per-file writes quadratic in the number of frames); every file appears
    complete (renamed), and a killed writer's temporary is removed by the next run.

    Args:
        folder: the destination folder (made if missing).
        docs: file name -> JSON-ready document, or a str: the document's JSON text already
            (`lane_record`), written as it is.

    Returns:
        The files written, in `docs` order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / ".staging"
    with atomic_output_path(staging, is_dir=True) as tmp:
        for name, doc in docs.items():
            text = doc if isinstance(doc, str) else json.dumps(doc, separators=(",", ":"))
            (Path(tmp) / name).write_text(text + "\n", encoding="utf-8")
        for name in docs:
            os.replace(Path(tmp) / name, folder / name)
    staging.rmdir()  # emptied by the renames
    return [folder / name for name in docs]


def _box3d_entries(boxes: FrameBoxes3D, token: str, cameras: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The nuScenes-layout entries of every box of a frame (each column rounded once for all boxes)."""
    k = len(boxes.track_id)
    if not k:
        return []
    cols = {
        "translation": _f(boxes.center_ego_m, 6), "size": _f(boxes.size_lwh_m[:, [1, 0, 2]], 6),
        "rotation": _f(boxes.rotation_ego_wxyz, 9), "velocity": _f(boxes.velocity_ego_mps[:, :2]),
    }  # fmt: skip
    rest = {
        "center_ego_m": _f(boxes.center_ego_m), "size_lwh_m": _f(boxes.size_lwh_m), "yaw_ego_rad": _f(boxes.yaw_ego_rad, 6),
        "center_world_m": _f(boxes.center_world_m), "rotation_world_wxyz": _f(boxes.rotation_world_wxyz, 6),
        "velocity_ego_mps": _f(boxes.velocity_ego_mps), "velocity_world_mps": _f(boxes.velocity_world_mps),
    }  # fmt: skip
    tids, cls, src = boxes.track_id.tolist(), boxes.object_class.tolist(), boxes.source_class.tolist()
    out = []
    for j in range(k):
        out.append({
            "sample_token": token, **{n: v[j] for n, v in cols.items()},
            "detection_name": NUSCENES_NAME.get(str(cls[j]), "barrier"), "detection_score": 1.0,
            "attribute_name": "", "track_id": str(tids[j]), "class": str(cls[j]),
            "source_class": str(src[j]), **{n: v[j] for n, v in rest.items()}, "cameras": cameras.get(str(tids[j]), []),
        })  # fmt: skip
    return out


def _coco(camera: str, video: dict[int, tuple[str, int]], recs: list[dict[str, Any]], size: tuple[int, int]) -> dict[str, Any]:
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    for r in recs:
        clip, vf = video[r["frame_index"]]
        image_id = int(r["frame_index"])
        images.append({"id": image_id, "file_name": f"{clip}.{camera}.mp4", "video_frame": vf, "frame_index": image_id,
                       "timestamp_ns": r["timestamp_ns"], "width": size[0], "height": size[1]})  # fmt: skip
        for b in r["boxes"]:
            if b["box2d_visible_px"] is None:
                continue
            x0, y0, x1, y1 = b["box2d_visible_px"]
            extra = {k: v for k, v in b.items() if k not in ("mask_rle", "box2d_visible_px")}
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": COCO_CATEGORIES.index(b["class"]) + 1,
                         "bbox": [x0 - 0.5, y0 - 0.5, x1 - x0 + 1, y1 - y0 + 1], "area": b["visible_px"], "iscrowd": 0,
                         "segmentation": b["mask_rle"], **extra})  # fmt: skip
    cats = [{"id": i + 1, "name": c} for i, c in enumerate(COCO_CATEGORIES)]
    return {"info": {"format": "COCO instances (avsim labels)", "camera": camera}, "images": images, "annotations": anns,
            "categories": cats}  # fmt: skip


def write_labels(
    scenario: Scenario, folder: Path, records: list[dict[str, Any]], cameras: tuple[str, ...], fps: float,
    video: dict[int, tuple[str, int]], size: tuple[int, int], rig: str,
) -> list[Path]:  # fmt: skip
    """Write a clip's label files from its camera-frame records.

    Args:
        scenario: the scenario.
        folder: `OUT/<clip>/labels`.
        records: every camera-frame record of the clip.
        cameras: the cameras, in rig order.
        fps: render rate.
        video: frame index -> (video clip id, frame within that video).
        size: (width, height) of the images.
        rig: the rig name rendered through.

    Returns:
        The files written.
    """
    frames = sorted({r["frame_index"] for r in records})
    stamps = {r["frame_index"]: r["timestamp_ns"] for r in records}
    seen: dict[int, dict[str, list[str]]] = {f: {} for f in frames}
    written = []
    for cam in cameras:
        recs = sorted((r for r in records if r["camera"] == cam), key=lambda r: r["frame_index"])
        for r in recs:
            for b in r["boxes"]:
                seen[r["frame_index"]].setdefault(b["track_id"], []).append(cam)
        lanes = {openlane_path(folder, cam, r["frame_index"]).name: r["openlane"] for r in recs if "openlane" in r}
        if lanes:  # the render pass writes its OpenLane files itself (`labels_run.labelled_frames`)
            write_json_files(folder / "openlane" / cam, lanes)
        p = folder / "coco" / f"{cam}.json"
        write_json(p, _coco(cam, video, recs, size))
        written += [p, folder / "openlane" / cam]
    results, samples = {}, []
    for f in frames:
        boxes = frame_boxes_3d(scenario, stamps[f])
        token = sample_token(stamps[f])
        results[token] = _box3d_entries(boxes, token, seen[f])
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = boxes.world_SE3_ego.rotation, boxes.world_SE3_ego.translation
        samples.append({"frame_index": f, "timestamp_ns": stamps[f], "sample_token": token, "video_clip": video[f][0],
                        "video_frame": video[f][1], "world_SE3_ego": T.tolist()})  # fmt: skip
    meta = {"format": "nuScenes detection results layout; boxes in the EGO frame (x forward, y left, z up, m); "
            "size = [width, length, height]; rotation = ego_R_object (w, x, y, z)", "use_camera": True}  # fmt: skip
    write_json(folder / "boxes3d.json", {"meta": meta, "results": results})
    index = {"format": LABELS_FORMAT, "scenario_id": scenario.scenario_id, "fps": fps, "rig": rig, "cameras": list(cameras),
             "width_px": size[0], "height_px": size[1], "frames": samples,
             "files": {"boxes3d": "boxes3d.json", "coco": "coco/<camera>.json", "openlane": "openlane/<camera>/<frame:06d>.json"}}  # fmt: skip
    write_json(folder / "index.json", index)
    return [*written, folder / "boxes3d.json", folder / "index.json"]
