"""What OpenLane's official evaluator does with one ground-truth file, restated step by step for tests.

OpenDriveLab/OpenLane @ 0042b36, eval/LANE_evaluation/lane3d/eval_3D_lane.py (`LaneEval.bench_one_submit`
and the ground-truth half of `LaneEval.bench`) and utils/utils.py. Its pinned requirements (an old
ortools among them) do not install beside avsim, so the steps that decide whether a file is read and
which lanes are counted are restated here in numpy, independently of avsim's reader:

- per file: the extrinsic's rotation is re-expressed in the ground frame (x right, y forward, z up),
  its x/y translation zeroed, and the camera-frame `xyz` (x forward, y left, z up) mapped through it;
  `np.array(intrinsic)` is multiplied with the inverse extrinsic (`projection_g2im_extrinsic`), which
  fails for anything but a 3x3 matrix (a `null` intrinsic raised "matmul: not enough dimensions");
- per lane (`bench`): points with visibility 0 dropped; lanes of fewer than 2 points dropped; a lane
  is kept only when its *first* point is before the far end of the y samples and its *last* point past
  the near end (`lane[0, 1] < y_samples[-1] and lane[-1, 1] > y_samples[0]`): a lane written
  far-to-near is never counted; then points outside 0 < y < 200 and 3 x_min < x < 3 x_max dropped and
  lanes of fewer than 2 points dropped. What is left is `cnt_gt`.
"""

from __future__ import annotations

import numpy as np

Y_SAMPLES = np.linspace(3, 103, num=100, endpoint=False)  # LaneEval.y_samples
X_MIN, X_MAX = -10.0, 10.0  # LaneEval.top_view_region's x extent


def ground_lanes(doc: dict) -> tuple[list[np.ndarray], list[np.ndarray], list[int], np.ndarray]:
    """One ground-truth file's lanes as `bench_one_submit` hands them to `bench`.

    Returns:
        lanes (each (N, 3) ground frame), visibilities (N,), categories, and P_g2im (3, 4).
    """
    E = np.array(doc["extrinsic"], dtype=float)
    vehicle_from_ground = np.array([[0, 1, 0], [-1, 0, 0], [0, 0, 1]], dtype=float)  # R_vg
    ground_from_cv = np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]], dtype=float)  # R_gc
    E[:3, :3] = np.linalg.inv(vehicle_from_ground) @ E[:3, :3] @ vehicle_from_ground @ ground_from_cv
    E[0:2, 3] = 0.0
    K = np.array(doc["intrinsic"])
    P_g2im = np.matmul(K, np.linalg.inv(E)[0:3, :])  # raises for a null or non-3x3 intrinsic
    cv_from_waymo = np.linalg.inv(np.array([[0, 0, 1, 0], [-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, 0, 1]], dtype=float))
    lanes, vis, cats = [], [], []
    for packed in doc["lane_lines"]:
        xyz = np.array(packed["xyz"])
        homog = np.vstack([xyz, np.ones((1, xyz.shape[1]))])
        lanes.append((E @ (cv_from_waymo @ homog))[0:3, :].T)
        vis.append(np.array(packed["visibility"]))
        cats.append(packed["category"])
    return lanes, vis, cats, P_g2im


def _range_pruned(lane: np.ndarray) -> np.ndarray:
    lane = lane[(lane[:, 1] > 0) & (lane[:, 1] < 200)]
    return lane[(lane[:, 0] > 3 * X_MIN) & (lane[:, 0] < 3 * X_MAX)]


def counted_gt(lanes: list[np.ndarray], vis: list[np.ndarray]) -> list[int]:
    """Indices of the lanes `bench` counts in `cnt_gt` (the evaluator's own rules, direction included)."""
    out = []
    for k, (lane, v) in enumerate(zip(lanes, vis)):
        lane = lane[v > 0]
        if lane.shape[0] < 2 or not (lane[0, 1] < Y_SAMPLES[-1] and lane[-1, 1] > Y_SAMPLES[0]):
            continue
        if _range_pruned(lane).shape[0] > 1:
            out.append(k)
    return out


def in_range(lanes: list[np.ndarray], vis: list[np.ndarray]) -> list[int]:
    """Indices of the lanes that reach the evaluator's y range whichever way they are written."""
    out = []
    for k, (lane, v) in enumerate(zip(lanes, vis)):
        lane = lane[v > 0]
        if lane.shape[0] < 2 or not (lane[:, 1].min() < Y_SAMPLES[-1] and lane[:, 1].max() > Y_SAMPLES[0]):
            continue
        if _range_pruned(lane).shape[0] > 1:
            out.append(k)
    return out


def near_to_far(lane: np.ndarray) -> np.ndarray:
    """A lane as a model outputs it: its points from near to far (reversed when its last point is nearer)."""
    return lane[::-1] if lane[-1, 1] < lane[0, 1] else lane
