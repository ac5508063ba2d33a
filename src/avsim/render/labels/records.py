"""Label records and writers: COCO (2-D boxes + RLE masks), nuScenes-style 3-D JSON, OpenLane lanes.

A camera-frame *record* (`camera_frame_record`) is a dict computed where the frame is
rasterised (the same id buffer as the pixels), its COCO annotations already text except their
float columns (`ImageAnnotations`, encoded for a whole segment at once by `annotation_texts`);
records of a render segment are kept as one part file (`write_part`: the annotation texts one a
line), and `labels_merge.write_labels` turns every record of a clip into the final files under
`OUT/<clip>/labels/` by joining texts, a part at a time (layout in docs/labels.md):

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.cameras import Camera
from avsim.core.coco_rle import rle_strings
from avsim.core.errors import AvsimInputError
from avsim.core.names import join_names
from avsim.core.transforms import SE3
from avsim.core.typing import NDArrayByte, NDArrayFloat, NDArrayFloat32, NDArrayInt, NDArrayInt32
from avsim.maps.style import LANE_TYPE_TO_OPENLANE  # noqa: F401 - read from here by the tests (the one table)
from avsim.render.labels.boxes import (
    CameraBoxLabels,
    FrameBoxes3D,
    camera_box_labels,
)  # fmt: skip
from avsim.render.labels.json_text import columns_json
from avsim.render.labels.lanes import (
    LaneTable,
    camera_json,
    lane_lines_text,
    lane_points_camera,
    lane_table,
    near_lines,
    near_to_far,
    openlane_intrinsic,
)
from avsim.render.raster.draw import object_coverage_visible_px
from avsim.render.raster.primitives import Primitives
from avsim.scenario import Scenario

LABELS_FORMAT = "avsim-labels"
# index.json["layout_version"]: which layout a label folder has (docs/labels.md "Layout versions"); folders
# without the field are version 1 (COCO boxes half a pixel off, OpenLane lanes in map order, f-theta intrinsic null)
LABELS_LAYOUT_VERSION = 3
MERGE_BOXES_BLOCK_FRAMES = 64  # frames whose boxes the writer resamples together (where the render's are not cached)
LANE_RADIUS_M = 150.0  # lane lines within this of the ego (as `avsim eval lanes` takes a scenario's)
# avsim classes -> nuScenes detection names (Others -> barrier: left out by `avsim eval let`, as the GT is)
NUSCENES_NAME = {"Car": "car", "Truck": "truck", "Pedestrian": "pedestrian", "Cyclist": "bicycle", "Others": "barrier"}
COCO_CATEGORIES = ("Car", "Truck", "Pedestrian", "Cyclist", "Others")
# `boxes3d.json["meta"]`: the five flags of a nuScenes detection-results file (the boxes come from the scenario, listed
# per camera that shows them); what the file's frames and fields are is in `index.json["files"]` and docs/labels.md
NUSCENES_META = {"use_camera": True, "use_lidar": False, "use_radar": False, "use_map": False, "use_external": False}
BOXES3D_CONVENTIONS = {  # index.json["conventions"]: the frames and units of boxes3d.json and the COCO extras
    "boxes3d": "nuScenes detection results layout; boxes in the EGO frame (x forward, y left, z up, m); "
               "size = [width, length, height]; rotation = ego_R_object (w, x, y, z)",
    "coco_bbox": "COCO pixel edges: pixel (i, j) covers [i, i + 1) x [j, j + 1); bbox = pycocotools' box of the mask",
    "pixels": "center_px, corners_px, box2d_full_px: the camera model's pixels, pixel (i, j) centred at (i, j) "
              "(add 0.5 for COCO's pixel-edge coordinates)",
}  # fmt: skip
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

    `xyz` is (3, N) in OpenLane's camera axes (x forward, y left, z up). `extrinsic` is the camera in
    its own ground frame (`camera_ground_frame`: origin under the ego, z up, y along the camera's
    heading on the ground) in those axes, so OpenLane's own evaluator (and `avsim eval lanes`) bring
    the lanes into the frame the camera looks along: a rear camera's lanes run ahead of it, as a
    front camera's do. `ego_extrinsic` is the ego_T_camera of the same axes (Waymo convention; for
    a camera heading straight ahead the two are equal). Every lane line of the map within
    LANE_RADIUS_M of the ego is written whole, near-to-far along the camera's heading
    (`lanes.near_to_far`: the evaluator counts no lane written the other way); `visibility` is 1
    where the image shows the point (in front of the camera, within the render range, inside the
    image: OpenLane marks invisible the points past what its image shows, not occluded ones), as
    `visible_in_image`. `intrinsic` is always 3x3 (`lanes.openlane_intrinsic`; kind in
    `intrinsic_model`), the full camera in `camera_model`. The points' text comes from
    `labels_json.float_lists_json` (the bytes of `json.dumps` of the document, faster).

    Args:
        scenario: the scenario.
        camera: the camera (at the image size).
        ego_SE3_camera: its extrinsic (RDF camera axes).
        world_SE3_ego: the ego pose.
        timestamp_ns: the frame time (`file_path` is its sample token).

    Returns:
        The OpenLane JSON document's text (`json.dumps(doc, separators=(",", ":"))`): keys
        file_path, timestamp_ns, extrinsic, ego_extrinsic, intrinsic, intrinsic_model, camera_model, lane_lines.
    """
    table = lane_table(scenario.map.lane_lines)
    return openlane_text(table, np.arange(len(table.category)), camera, ego_SE3_camera, world_SE3_ego, timestamp_ns)


def camera_ground_frame(ego_R_camera: NDArrayFloat) -> NDArrayFloat:
    """ego_R_ground of a camera's own ground frame: the ego frame turned about its z axis to the camera's heading.

    Args:
        ego_R_camera: (3, 3) the camera's rotation in the ego frame (RDF camera axes: column 2 is the optical axis).

    Returns:
        (3, 3) rotation about ego z by the heading of the optical axis on the ground (identity for a camera
        looking straight ahead).
    """
    axis = np.asarray(ego_R_camera, np.float64)[:, 2]
    yaw = float(np.arctan2(axis[1], axis[0])) + 0.0  # (+ 0.0: no negative zero)
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


OPENLANE_MIN_OFF_SIDEWAYS_DEG = 15.0  # a camera heading closer than this to the ego's y axis looks across the lanes


def openlane_counts_lanes(ego_R_camera: NDArrayFloat) -> bool:
    """Whether OpenLane's evaluator can count this camera's lanes: its heading is at least
    OPENLANE_MIN_OFF_SIDEWAYS_DEG away from the ego's sideways axis.

    The evaluator samples each lane's x at y = 3..102 m of the camera's ground frame, so it counts a
    lane only where the lane runs along the camera's view. Lanes run along the road (the ego's x
    axis); a camera looking across the road (AV2's ring_side_left/right, 99 deg off the ego's
    heading) sees them run across its y axis, and the evaluator counts none of them.

    Args:
        ego_R_camera: (3, 3) the camera's rotation in the ego frame (RDF camera axes).

    Returns:
        True for cameras looking along the road, forward or backward (the cosmos rig's cross cameras at
        70 deg included).
    """
    axis = np.asarray(ego_R_camera, np.float64)[:, 2]
    heading = abs(float(np.degrees(np.arctan2(axis[1], axis[0]))))
    return abs(heading - 90.0) >= OPENLANE_MIN_OFF_SIDEWAYS_DEG


def openlane_text(table: LaneTable, line_ids: NDArrayInt, camera: Camera, ego_SE3_camera: SE3, world_SE3_ego: SE3,
                  timestamp_ns: int) -> str:  # fmt: skip
    """`lane_record` of a lane table: the OpenLane document's text of one camera-frame.

    Args:
        table: the lane lines (the map's, or the stored subset of a compact label folder).
        line_ids: (K,) each table line's index in the map (`track_id` of its entry).
        camera: the camera (at the image size).
        ego_SE3_camera: its extrinsic (RDF camera axes).
        world_SE3_ego: the ego pose.
        timestamp_ns: the frame time.

    Returns:
        The document's compact JSON text (`lane_record`).
    """
    idx = near_lines(table, np.asarray(world_SE3_ego.translation)[:2], LANE_RADIUS_M)
    R_we, R_ec = np.asarray(world_SE3_ego.rotation), np.asarray(ego_SE3_camera.rotation)
    R_cw = (R_we @ R_ec).T  # camera <- world as plain matrices (no SE3 objects per image)
    t_cw = -R_cw @ (R_we @ np.asarray(ego_SE3_camera.translation) + np.asarray(world_SE3_ego.translation))
    R_eg = camera_ground_frame(R_ec)
    text = ""
    if len(idx):
        p_all, vis, bounds = lane_points_camera(table, idx, camera, R_cw, t_cw)
        order = near_to_far(p_all @ (R_ec.T @ R_eg[:, 0]), bounds)  # along the camera's heading (OpenLane's ground y)
        xyz = (p_all[order] @ CV_TO_OPENLANE_CAM.T).T
        text = lane_lines_text(xyz, bounds, vis[order], table.category[idx], np.asarray(line_ids, np.int64)[idx], 6)
    ego_ext = np.eye(4)
    ego_ext[:3, :3] = ego_SE3_camera.rotation @ CV_TO_OPENLANE_CAM.T
    ego_ext[:3, 3] = ego_SE3_camera.translation
    ext = np.eye(4)
    ext[:3] = R_eg.T @ ego_ext[:3]
    K, kind = openlane_intrinsic(camera)
    head = {
        "file_path": sample_token(timestamp_ns), "timestamp_ns": int(timestamp_ns),
        "extrinsic": ext.tolist(), "ego_extrinsic": ego_ext.tolist(), "intrinsic": K.tolist(), "intrinsic_model": kind,
    }  # fmt: skip
    # the text json.dumps writes for head + camera_model + lane_lines (the camera's part encoded once per camera)
    return json.dumps(head, separators=(",", ":"))[:-1] + ',"camera_model":' + camera_json(camera) + ',"lane_lines":[' + text + "]}"


def camera_frame_record(
    scenario: Scenario, boxes: FrameBoxes3D, track_of_object: np.ndarray, camera_name: str, camera: Camera,
    ego_SE3_camera: SE3, frame_index: int, ids: NDArrayInt32, prims: Primitives, rays: NDArrayFloat32,
    id_stats: NDArrayInt | None = None, scratch: NDArrayByte | None = None, openlane: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The labels of one camera image, from its id buffer and primitives.

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
        id_stats: optional (N, 9) id statistics of the rasterisation (`SceneRenderer.render_camera_id_stats`):
            coverage is then recomputed only for contested objects (same labels).
        scratch: optional (H, W) uint8 zeros for the coverage pass (`raster.object_coverage_visible_px`).
        openlane: compute the OpenLane document (the standard files); a compact label folder stores the
            lane lines once instead.

    Returns:
        {"frame_index", "camera", "timestamp_ns", "track_ids": [str, ...] (every box with unoccluded
        pixels: the boxes3d entries' "cameras"), "ego_SE3_camera": 3x4 rows (the camera at its capture
        time in the ego frame of the frame time), "annotations": `ImageAnnotations` (the visible boxes'
        COCO annotations), "openlane": str (the OpenLane document's JSON text, `lane_record`; "" without
        `openlane`)}.
    """
    where = {tid: i for i, tid in enumerate(boxes.track_id.tolist())}
    box_of_object = np.array([where.get(t, -1) for t in track_of_object.tolist()], np.int64)
    unocc, vis_n, vis_box = object_coverage_visible_px(prims, rays, len(box_of_object), ids, id_stats, scratch)  # one pass: coverage and id buffer
    unocc[box_of_object < 0] = 0
    world_SE3_cam = boxes.world_SE3_ego.compose(ego_SE3_camera)
    lab = camera_box_labels(camera, world_SE3_cam, boxes, box_of_object, ids, unocc, visible=(vis_n, vis_box))
    objs = np.flatnonzero(unocc > 0)
    track_ids = [str(t) for t in boxes.track_id[lab.box].tolist()]
    anns = _annotations(boxes, lab, ids, objs)
    text = lane_record(scenario, camera, ego_SE3_camera, boxes.world_SE3_ego, boxes.timestamp_ns) if openlane else ""
    pose = np.c_[np.asarray(ego_SE3_camera.rotation), np.asarray(ego_SE3_camera.translation)].tolist()
    return {"frame_index": int(frame_index), "camera": camera_name, "timestamp_ns": int(boxes.timestamp_ns),
            "track_ids": track_ids, "ego_SE3_camera": pose, "annotations": anns, "openlane": text}  # fmt: skip


ANNOTATION_FLOATS = ("center_camera_m", "size_lwh_m", "rotation_camera_wxyz", "center_px", "center_depth_m", "corners_px",
                     "box2d_full_px", "visible_fraction", "truncation")  # fmt: skip
ANNOTATION_DECIMALS = (4, 4, 6, 3, 4, 3, 3, 4, 4)  # of each float column, as written


@dataclass(frozen=True)
class AnnotationValues:
    """The values of one image's M COCO annotations that `ImageAnnotations.head` and `.counts` spell as text
    (what the compact `annotations.parquet` rows hold, `compact.annotations_frame`).

    track_id, source_class: M names; category_id: (M,) COCO category; bbox: (M, 4) int64 x, y, width, height
    (COCO pixel edges); rle: M COCO RLE strings (the `counts` of the segmentation); visible_px (the `area`),
    unoccluded_px: (M,) int64 pixel counts.
    """

    track_id: tuple[str, ...]
    source_class: tuple[str, ...]
    category_id: NDArrayInt
    bbox: NDArrayInt
    rle: tuple[str, ...]
    visible_px: NDArrayInt
    unoccluded_px: NDArrayInt


@dataclass(frozen=True)
class ImageAnnotations:
    """The COCO annotations of one image (M visible boxes) before their float columns are JSON text.

    `annotation_texts` encodes the floats of many images in one compiled pass (a segment's at once).

    head: M texts `"category_id":..,"bbox":[..],"area":..,"iscrowd":0,"segmentation":{..},"track_id":..,
    "class":..,"source_class":..`; counts: M texts `"visible_px":..,"unoccluded_px":..`; floats: the
    columns ANNOTATION_FLOATS, each (M, ...) float64 (rounded to ANNOTATION_DECIMALS when written);
    values: what head and counts spell (None where the annotations were read back from a table).
    """

    head: tuple[str, ...]
    counts: tuple[str, ...]
    floats: tuple[NDArrayFloat, ...]
    values: AnnotationValues | None = None

    def __post_init__(self) -> None:
        m = len(self.head)
        if len(self.counts) != m or len(self.floats) != len(ANNOTATION_FLOATS) or any(len(f) != m for f in self.floats):
            raise ValueError(f"ImageAnnotations: {m} heads, {len(self.counts)} counts, float rows {[len(f) for f in self.floats]}")
        if self.values is not None and len(self.values.rle) != m:
            raise ValueError(f"ImageAnnotations: {m} heads, {len(self.values.rle)} values")


def _annotations(boxes: FrameBoxes3D, lab: CameraBoxLabels, ids: NDArrayInt32, objs: NDArrayInt) -> ImageAnnotations:
    """The COCO annotations of every visible box (see `camera_frame_record`); the masks in one compiled RLE pass (`avsim.core.coco_rle.rle_strings`)."""
    seen = np.flatnonzero(lab.visible_px > 0)
    k = lab.box[seen]
    vis_box = lab.box2d_visible_px[seen]
    h, w = ids.shape
    masks = rle_strings(ids, objs[seen], vis_box)
    tids, cls, src = (json_strings(a[k]) for a in (boxes.track_id, boxes.object_class, boxes.source_class))
    cat = [COCO_CATEGORIES.index(str(c)) + 1 for c in boxes.object_class[k].tolist()]
    vis_n, unocc_n = lab.visible_px[seen].tolist(), lab.unoccluded_px[seen].tolist()
    head = []
    for m, (x0, y0, x1, y1) in enumerate(vis_box.tolist()):
        rle = masks[m].replace("\\", "\\\\")  # JSON escapes the RLE alphabet's backslash
        head.append(f'"category_id":{cat[m]},"bbox":[{x0},{y0},{x1 - x0 + 1},{y1 - y0 + 1}],"area":{vis_n[m]},'
                    f'"iscrowd":0,"segmentation":{{"size":[{h},{w}],"counts":"{rle}"}},"track_id":{tids[m]},"class":{cls[m]},'
                    f'"source_class":{src[m]}')  # fmt: skip
    floats = (lab.center_camera_m, boxes.size_lwh_m[lab.box], lab.rotation_camera_wxyz, lab.center_px, lab.center_depth_m,
              lab.corners_px, lab.box2d_full_px, lab.visible_fraction, lab.truncation)  # fmt: skip
    counts = tuple(f'"visible_px":{v},"unoccluded_px":{u}' for v, u in zip(vis_n, unocc_n))
    values = AnnotationValues(tuple(str(t) for t in boxes.track_id[k].tolist()), tuple(str(t) for t in boxes.source_class[k].tolist()),
                              np.asarray(cat, np.int64).reshape(-1), np.c_[vis_box[:, :2], vis_box[:, 2:] - vis_box[:, :2] + 1].astype(np.int64),
                              tuple(masks), np.asarray(vis_n, np.int64), np.asarray(unocc_n, np.int64))  # fmt: skip
    return ImageAnnotations(tuple(head), counts, tuple(np.asarray(f, np.float64)[seen] for f in floats), values)


def annotation_texts(images: list[ImageAnnotations]) -> list[list[str]]:
    """The COCO annotation text of every box of every image, after its `"image_id":..,` (one compiled pass for all floats).

    The floats' text is `labels_json.columns_json` (the bytes `json.dumps` writes of the
    rounded lists); keys in the order the COCO writer always wrote them.

    Args:
        images: the images' annotations.

    Returns:
        Per image, its M annotation texts (`"category_id":..,...}`).
    """
    if not any(im.head for im in images):
        return [[] for _ in images]
    cols = columns_json([(np.concatenate([im.floats[c] for im in images if im.head]), nd) for c, nd in enumerate(ANNOTATION_DECIMALS)])
    out, at = [], 0
    for im in images:
        texts = []
        for m, (head, counts) in enumerate(zip(im.head, im.counts), at):
            c = [col[m] for col in cols]
            texts.append(f'{head},"center_camera_m":{c[0]},"size_lwh_m":{c[1]},"rotation_camera_wxyz":{c[2]},"center_px":{c[3]},'
                         f'"center_depth_m":{c[4]},"corners_px":{c[5]},"box2d_full_px":{c[6]},{counts},'
                         f'"visible_fraction":{c[7]},"truncation":{c[8]}}}')  # fmt: skip
        out.append(texts)
        at += len(im.head)
    return out


def encoded_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with their "annotations" as texts (`annotation_texts` of all `ImageAnnotations` at once).

    Args:
        records: camera-frame records; "annotations" an `ImageAnnotations` or its texts already.

    Returns:
        The records (new dicts where encoded), "annotations" a list of str.
    """
    todo = [i for i, r in enumerate(records) if isinstance(r["annotations"], ImageAnnotations)]
    texts = annotation_texts([records[i]["annotations"] for i in todo])
    out = list(records)
    for i, t in zip(todo, texts):
        out[i] = {**records[i], "annotations": t}
    return out


PART_FORMAT = "avsim-labels-part-3"  # 3: records carry ego_SE3_camera (issue 41)


def json_strings(values: np.ndarray) -> list[str]:
    """`json.dumps(str(v))` of every value (each distinct value encoded once).

    Args:
        values: (M,) values (track ids, class names).

    Returns:
        M JSON string texts.
    """
    texts: dict[str, str] = {}
    return [texts[t] if t in texts else texts.setdefault(t, json.dumps(t)) for t in map(str, np.asarray(values).tolist())]


def write_part(path: Path, records: list[dict[str, Any]], texts: bool = True) -> None:
    """Write one segment's records (atomic), as text the merge concatenates (no JSON round trip of the annotations).

    Line 1: {"format": PART_FORMAT, "records": [record without "annotations" and "openlane", plus
    "n_annotations"]}; then every record's annotation texts, one a line (compact JSON: no newline).
    Without `texts` (only the compact tables asked for: the rows are in the segment's annotations part)
    line 1 also holds "texts": false and no text follows (`read_part` gives None annotations).

    Args:
        path: the part file.
        records: camera-frame records (`camera_frame_record`).
        texts: write the annotations' COCO texts.
    """
    records = encoded_records(records) if texts else records
    heads = [{**{k: v for k, v in r.items() if k not in ("annotations", "openlane")}, "n_annotations": _count(r["annotations"])}
             for r in records]  # fmt: skip
    doc: dict[str, Any] = {"format": PART_FORMAT, "records": heads, **({} if texts else {"texts": False})}
    lines = [json.dumps(doc, separators=(",", ":"))]
    lines += [a for r in records for a in r["annotations"]] if texts else []
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_part(path: Path) -> list[dict[str, Any]]:
    """The records of a part file (`write_part`).

    Args:
        path: the part file.

    Returns:
        The camera-frame records (without "openlane"; "annotations" None in a part written without texts).

    Raises:
        AvsimInputError: the file is not a part of this format (another avsim version's).
    """
    lines = path.read_text(encoding="utf-8").split("\n")
    doc = _part_doc(path, lines[0])
    texts = doc.get("texts", True) is not False
    out, at = [], 1
    for r in doc["records"]:
        n = r.pop("n_annotations")
        out.append({**r, "annotations": lines[at : at + n] if texts else None})
        at += n if texts else 0
    return out


def _count(annotations: ImageAnnotations | list[str]) -> int:
    return len(annotations.head) if isinstance(annotations, ImageAnnotations) else len(annotations)


def read_part_heads(path: Path) -> list[dict[str, Any]]:
    """The records of a part file without their annotations (its first line only).

    Args:
        path: the part file.

    Returns:
        The records' heads: "frame_index", "camera", "timestamp_ns", "track_ids", "n_annotations".

    Raises:
        AvsimInputError: the file is not a part of this format (another avsim version's).
    """
    with path.open(encoding="utf-8") as f:
        return _part_heads(path, f.readline().rstrip("\n"))


def _part_heads(path: Path, first_line: str) -> list[dict[str, Any]]:
    return list(_part_doc(path, first_line)["records"])


def _part_doc(path: Path, first_line: str) -> dict[str, Any]:
    head = json.loads(first_line) if first_line.startswith("{") else {}
    if head.get("format") != PART_FORMAT:
        raise AvsimInputError(path, "format", f"not a label part of format {PART_FORMAT} (rerun with --overwrite)")
    return dict(head)


def openlane_path(folder: Path, camera: str, frame_index: int) -> Path:
    """`labels/openlane/<camera>/<frame:06d>.json`.

    Args:
        folder: the label folder.
        camera: the camera name.
        frame_index: frame at the render rate.

    Returns:
        The path.
    """
    return join_names(folder, "openlane", camera, f"{int(frame_index):06d}.json")


IMAGE_FORMATS = ("jpg", "png")  # `--images`
JPEG_QUALITY = 95


def encode_image(img: NDArrayByte, image_format: str) -> bytes:
    """An RGB frame as JPEG (quality JPEG_QUALITY) or PNG bytes (OpenCV; the same frame gives the same bytes).

    Args:
        img: (H, W, 3) uint8 RGB.
        image_format: "jpg" or "png".

    Returns:
        The encoded file.
    """
    import cv2

    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY] if image_format == "jpg" else []
    ok, buf = cv2.imencode(f".{image_format}", np.ascontiguousarray(img[..., ::-1]), params)
    if not ok:
        raise RuntimeError(f"OpenCV could not encode a {img.shape} frame as {image_format}")
    return bytes(buf)


def write_text(path: Path, text: str) -> None:
    """Write a text file (atomic; parent folders made).

    Args:
        path: the file.
        text: its content (UTF-8).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def write_json(path: Path, doc: Any) -> None:
    """Write one compact JSON document (atomic; parent folders made).

    Args:
        path: the file.
        doc: a JSON-ready object.
    """
    write_text(path, json.dumps(doc, separators=(",", ":")) + "\n")


def write_json_files(folder: Path, docs: dict[str, Any]) -> list[Path]:
    """Write many small JSON (or image) files into `folder`: into one temporary folder beside them, then each renamed into place.

    One `atomic_output_path` per call instead of per file (its stale-temporary scan lists the
    folder, which made per-file writes quadratic in the number of frames); every file appears
    complete (renamed), and a killed writer's temporary is removed by the next run.

    Args:
        folder: the destination folder (made if missing).
        docs: file name -> JSON-ready document, or a str: the document's JSON text already
            (`lane_record`), written as it is (with a newline), or bytes (an image), written as they are.

    Returns:
        The files written, in `docs` order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / ".staging"
    with atomic_output_path(staging, is_dir=True) as tmp:
        for name, doc in docs.items():
            if isinstance(doc, bytes):
                (Path(tmp) / name).write_bytes(doc)
                continue
            text = doc if isinstance(doc, str) else json.dumps(doc, separators=(",", ":"))
            (Path(tmp) / name).write_text(text + "\n", encoding="utf-8")
        for name in docs:
            os.replace(Path(tmp) / name, folder / name)
    staging.rmdir()  # emptied by the renames
    return [folder / name for name in docs]
