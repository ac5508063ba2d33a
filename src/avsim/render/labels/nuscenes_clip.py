"""One labelled clip, read for `avsim export nuscenes`: its frames, keyframes, cameras, scenario and images.

A clip is a label folder (docs/labels.md): a render's `OUT/<clip>/labels/` (its frames are the
control videos `OUT/<video_clip>/<video_clip>.<camera>.mp4`, or `labels/images/` with `--images`)
or a generated folder's `GEN/labels/` (the frames of `GEN/<video_clip>.<camera>.mp4`; a generated
folder has `settings.json` with a `labels` record). Its scene is named after the folder above
`labels/` (the clip id, or the generated folder's name).

- **Scenario**: the labels hold no map, so the export reads the scenario they were made from,
  found by id under `--scenario` (a scenario folder, or a folder of them) and checked: every
  frame's `world_SE3_ego` in `index.json` must be the scenario's ego pose at that time
  (`POSE_TOLERANCE_M` / `_RAD`), else the labels were made from another scenario.
- **Keyframes** (`keyframes`): nuScenes samples at 2 Hz; the keyframes are the frames nearest to
  t0 + k x 0.5 s (within 0.1 s or half a frame period, whichever is more; every frame when frames
  are 0.5 s or more apart),
  and the frames after the last keyframe are left out (a nuScenes scene ends on a keyframe).
- **Visibility** (`visibility_fractions`): per frame and track, visible pixels over unoccluded
  pixels summed over the cameras (the annotations of `annotations.parquet` or the COCO files).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.cameras import Camera, camera_from_dict
from avsim.core.errors import AvsimInputError
from avsim.core.rig import NAMED_RIGS, CameraRig, named_rig
from avsim.core.typing import NDArrayInt
from avsim.render.labels import compact
from avsim.scenario import Scenario

KEYFRAME_PERIOD_NS = 500_000_000  # nuScenes samples at 2 Hz
KEYFRAME_REACH_NS = 100_000_000  # a keyframe is the frame nearest to its 0.5 s mark, at most this (or half a frame) away
POSE_TOLERANCE_M = 1e-6
POSE_TOLERANCE_RAD = 1e-6


class ClipKind:
    """What made a clip's frames."""

    RENDER = "render"
    GENERATED = "generated"


@dataclass(frozen=True)
class LabelledClip:
    """A label folder: its index, name, kind, frames (F) and cameras (at their rendered size)."""

    folder: Path
    index: dict[str, Any]
    name: str
    kind: str
    frame_index: NDArrayInt
    timestamps_ns: NDArrayInt
    cameras: tuple[str, ...]
    models: dict[str, Camera]
    digest: str

    @property
    def index_path(self) -> Path:
        """The clip's `index.json`."""
        return self.folder / "index.json"


def read_clip(folder: Path) -> LabelledClip:
    """A label folder, read and checked.

    Args:
        folder: the label folder (holding `index.json`).

    Returns:
        The clip.
    """
    folder = Path(folder)
    path = folder / "index.json"
    if not path.is_file():
        raise AvsimInputError(folder, "index.json", "not an avsim label folder")
    index = compact.read_index(folder)
    frames = index.get("frames")
    if index.get("format") != "avsim-labels" or not isinstance(frames, list) or not frames:
        raise AvsimInputError(path, "frames", "not an avsim label index, or no labelled frame")
    try:
        frame_index = np.array([int(f["frame_index"]) for f in frames], np.int64)
        times = np.array([int(f["timestamp_ns"]) for f in frames], np.int64)
        cameras = tuple(str(c) for c in index["cameras"])
        models: dict[str, Camera] = {c: camera_from_dict(index["camera_models"][c]) for c in cameras}
    except (KeyError, TypeError, ValueError) as exc:
        raise AvsimInputError(path, "frames", f"unreadable label index: {type(exc).__name__}: {exc}") from None
    if np.any(np.diff(times) <= 0):
        raise AvsimInputError(path, "frames", "frame timestamps must increase")
    settings = folder.parent / "settings.json"
    kind = ClipKind.GENERATED if settings.is_file() and '"labels"' in settings.read_text(errors="replace") else ClipKind.RENDER
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return LabelledClip(folder, index, folder.absolute().parent.name, kind, frame_index, times, cameras, models, digest)


def generated_cameras(clip: LabelledClip) -> tuple[str, ...]:
    """The cameras a clip has frames of: every labelled camera of a render; of a generated clip those with a
    generated video (a generated folder whose labels are the control's, linked, lists every control camera).

    Args:
        clip: the clip.

    Returns:
        The cameras, in the index's order (at least one).
    """
    if clip.kind != ClipKind.GENERATED:
        return clip.cameras
    vclip = str(clip.index["frames"][0]["video_clip"])
    found = tuple(c for c in clip.cameras if (clip.folder.parent / f"{vclip}.{c}.mp4").is_file() or (clip.folder / "images" / c).is_dir())
    if not found:
        raise AvsimInputError(clip.index_path, "cameras", f"no generated video {vclip}.<camera>.mp4 beside the labels")
    return found


def clip_rig(clip: LabelledClip, scenario: Scenario) -> CameraRig:
    """The rig the clip was rendered with (the scenario's, or the named rig `index.json` names), its cameras with frames
    (`generated_cameras`) only, at their size.

    Args:
        clip: the clip.
        scenario: its scenario.

    Returns:
        The rig: extrinsics and capture offsets of the render; camera models as `index.json` has them.
    """
    name = str(clip.index.get("rig", "scenario"))
    if name == "scenario":
        rig = scenario.rig
    elif name in NAMED_RIGS:
        rig = named_rig(name)
    else:
        raise AvsimInputError(clip.index_path, "rig", f"unknown rig {name!r}")
    missing = [c for c in clip.cameras if c not in rig.names]
    if missing:
        raise AvsimInputError(clip.index_path, "cameras", f"{missing} are not cameras of the {name} rig")
    sub = rig.subset(list(generated_cameras(clip)))
    return CameraRig(sub.names, tuple(clip.models[c] for c in sub.names), sub.ego_SE3_camera, capture_offset_ns=sub.capture_offset_ns)


def check_scenario(clip: LabelledClip, scenario: Scenario, scenario_path: Path) -> None:
    """The clip's frames must be the scenario's: same id, same ego pose at every frame time.

    Args:
        clip: the clip.
        scenario: the scenario.
        scenario_path: where it was read (for the message).
    """
    if str(clip.index.get("scenario_id")) != scenario.scenario_id:
        raise AvsimInputError(clip.index_path, "scenario_id", f"{clip.index.get('scenario_id')!r}, but {scenario_path} is {scenario.scenario_id!r}")
    if clip.timestamps_ns[0] < scenario.start_ns or clip.timestamps_ns[-1] > scenario.end_ns:
        raise AvsimInputError(clip.index_path, "frames", f"frame times outside the ego span of {scenario_path}")
    poses = scenario.ego.pose_at(clip.timestamps_ns).as_matrix()
    labelled = np.array([f["world_SE3_ego"] for f in clip.index["frames"]], np.float64).reshape(-1, 4, 4)
    d_m = np.abs(poses[:, :3, 3] - labelled[:, :3, 3]).max()
    d_rad = np.abs(poses[:, :3, :3] - labelled[:, :3, :3]).max()
    if d_m > POSE_TOLERANCE_M or d_rad > POSE_TOLERANCE_RAD:
        raise AvsimInputError(clip.index_path, "frames.world_SE3_ego", f"differs from the ego poses of {scenario_path} by up to "
                              f"{d_m:.3g} m: the labels were made from another scenario")  # fmt: skip


def keyframes(timestamps_ns: NDArrayInt, period_ns: int = KEYFRAME_PERIOD_NS) -> NDArrayInt:
    """Positions of the keyframes among the frames (see the module docstring).

    Args:
        timestamps_ns: (F,) increasing frame times.
        period_ns: the sample period.

    Returns:
        (K,) increasing frame positions; frames after the last one are not exported.
    """
    t = np.asarray(timestamps_ns, np.int64)
    if len(t) < 2 or np.median(np.diff(t)) >= period_ns:
        return np.arange(len(t))
    reach = max(float(np.median(np.diff(t))) / 2, KEYFRAME_REACH_NS)
    targets = t[0] + period_ns * np.arange(int((t[-1] - t[0] + reach) // period_ns) + 1)
    pos = np.clip(np.searchsorted(t, targets), 1, len(t) - 1)
    nearest = np.where(np.abs(t[pos - 1] - targets) <= np.abs(t[pos] - targets), pos - 1, pos)
    ok = np.abs(t[nearest] - targets) <= reach
    return np.unique(nearest[ok])


def visibility_fractions(clip: LabelledClip) -> dict[tuple[int, str], float]:
    """Per (frame index, track id): visible pixels / unoccluded pixels, summed over the clip's cameras.

    Args:
        clip: the clip.

    Returns:
        The fractions of the boxes some camera covers (others: not seen).
    """
    sums: dict[tuple[int, str], list[int]] = {}
    if (clip.folder / compact.ANNOTATIONS).is_file():
        import polars as pl

        df = pl.read_parquet(clip.folder / compact.ANNOTATIONS, columns=["image_id", "track_id", "visible_px", "unoccluded_px"])
        rows: Iterator[tuple[Any, Any, Any, Any]] = zip(df["image_id"].to_list(), df["track_id"].to_list(), df["visible_px"].to_list(),
                                                        df["unoccluded_px"].to_list())  # fmt: skip
    else:
        from avsim.core.safe_json import read_json

        rows_list = []
        for cam in clip.cameras:
            doc = read_json(clip.folder / "coco" / f"{cam}.json")
            rows_list += [(a["image_id"], a["track_id"], a["visible_px"], a["unoccluded_px"]) for a in doc.get("annotations", [])]
        rows = iter(rows_list)
    for frame, track, vis, unocc in rows:
        s = sums.setdefault((int(frame), str(track)), [0, 0])
        s[0] += int(vis)
        s[1] += int(unocc)
    return {k: v / u if u > 0 else 0.0 for k, (v, u) in sums.items()}


def frame_sources(clip: LabelledClip, camera: str, positions: NDArrayInt) -> tuple[dict[int, Path], dict[Path, dict[int, int]]]:
    """Where each wanted frame of one camera is: an image of `labels/images/`, else a frame of a video.

    Args:
        clip: the clip.
        camera: the camera.
        positions: the wanted frames (positions in `clip.timestamps_ns`).

    Returns:
        (position -> image file, video -> {video frame: position}).
    """
    frames = clip.index["frames"]
    images: dict[int, Path] = {}
    videos: dict[Path, dict[int, int]] = {}
    for p in np.asarray(positions).tolist():
        f = frames[p]
        own = clip.folder / "images" / camera
        hits = sorted(own.glob(f"{int(f['frame_index']):06d}.*")) if own.is_dir() else []
        if hits:
            images[p] = hits[0]
            continue
        vclip = str(f["video_clip"])
        beside = clip.folder.parent / f"{vclip}.{camera}.mp4"  # the clip folder's own video (a generated folder's: its frames)
        chunk = clip.folder.parent.parent / vclip / f"{vclip}.{camera}.mp4"  # a render's chunk `<clip>_<k>/`
        video = chunk if clip.kind == ClipKind.RENDER and not beside.is_file() and chunk.is_file() else beside
        if not video.is_file():
            raise AvsimInputError(clip.index_path, "frames", f"no image of {camera} frame {f['frame_index']}: neither labels/images/ "
                                  f"nor the video {video} (render with --images, or keep the videos)")  # fmt: skip
        videos.setdefault(video, {})[int(f["video_frame"])] = p
    return images, videos


def find_scenario(root: Path, clip: LabelledClip, headers: dict[Path, str]) -> list[Path]:
    """The scenario folders a clip may have been made from: `root` itself, or the folders under it (two
    levels at most) whose scenario id is the clip's (`check_scenario` decides among several).

    Args:
        root: `--scenario`.
        clip: the clip.
        headers: scenario folder -> id, filled on first use (one scan per export).

    Returns:
        The candidate scenario folders (at least one).
    """
    from avsim.core.safe_json import read_json

    if (root / "scenario.json").is_file():
        return [root]
    if not root.is_dir():
        raise AvsimInputError(root, "--scenario", "not found: expected a scenario folder or a folder of them")
    if not headers:
        for path in sorted([*root.glob("*/scenario.json"), *root.glob("*/*/scenario.json")]):
            doc = read_json(path)
            headers[path.parent] = str(doc.get("scenario_id")) if isinstance(doc, dict) else ""
    wanted = str(clip.index.get("scenario_id"))
    found = [p for p, sid in headers.items() if sid == wanted]
    if not found:
        raise AvsimInputError(root, "--scenario", f"no scenario with id {wanted!r} (the id of {clip.index_path})")
    return found
