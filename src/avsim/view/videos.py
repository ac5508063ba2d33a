"""Per-camera videos (control, generated, real) as encoded video streams on the scenario timeline.

A video is logged as it is on disk: the mp4 as an `AssetVideo` (the viewer decodes it; no frame
is decoded or re-encoded here) and one `VideoFrameReference` per frame, at the frame's own
presentation time plus the video's start on the timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.view import paths
from avsim.view._rerun import require_rerun

# codecs the rerun viewer decodes from an mp4 asset (avsim writes H.264)
VIDEO_CODECS = ("h264", "hevc", "av1", "vp9")


def video_candidates(folder: Path, clip_id: str, camera: str) -> list[Path]:
    """Where a camera's video may lie in a folder, in the order they are tried.

    Args:
        folder: an `avsim render` / `avsim generate` output, or a folder of real videos.
        clip_id: the file-safe clip id (`avsim.render.run.plan.safe_name` of the scenario id).
        camera: the camera's name.

    Returns:
        ``<clip>/<clip>.<camera>.mp4`` (render), ``<clip>.<camera>.mp4`` (generate),
        ``<camera>.mp4`` (real), then the post-training layouts
        ``control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4`` and
        ``videos/ftheta_<camera>/<clip>.mp4``, each below `folder`.
    """
    return [
        folder / clip_id / f"{clip_id}.{camera}.mp4",
        folder / f"{clip_id}.{camera}.mp4",
        folder / f"{camera}.mp4",
        folder / "control_input_hdmap_bbox" / f"ftheta_{camera}" / f"{clip_id}.mp4",
        folder / "videos" / f"ftheta_{camera}" / f"{clip_id}.mp4",
    ]


def find_videos(folder: Path, clip_id: str, cameras: Sequence[str]) -> dict[str, Path]:
    """The video of each camera that has one in `folder`.

    Args:
        folder: the folder to search (see `video_candidates`).
        clip_id: the file-safe clip id.
        cameras: the rig's camera names.

    Returns:
        camera -> video path, in the order of `cameras` (cameras without a video left out).

    Raises:
        AvsimInputError: the folder does not exist, or holds no video of any camera.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AvsimInputError(folder, "folder", "not found (expected a folder of per-camera mp4 videos)")
    found = {}
    for camera in cameras:
        path = next((p for p in video_candidates(folder, clip_id, camera) if p.is_file()), None)
        if path is not None:
            found[camera] = path
    if not found:
        example = video_candidates(folder, clip_id, cameras[0])[0].relative_to(folder)
        raise AvsimInputError(folder, "videos", f"no video of any camera of the rig (looked for {example} and the like)")
    return found


def check_video(path: Path) -> None:
    """Refuse a file the viewer could not play, with one line naming it.

    Args:
        path: an mp4 file.

    Raises:
        AvsimInputError: it is not a readable video, or its codec is not in `VIDEO_CODECS`.
    """
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise AvsimInputError(path, "video", "the file has no video stream")
            codec = container.streams.video[0].codec_context.name
    except av.error.FFmpegError as exc:
        raise AvsimInputError(path, "video", f"not a readable video ({exc})") from None
    if codec not in VIDEO_CODECS:
        raise AvsimInputError(path, "codec", f"{codec} video; the viewer plays {', '.join(VIDEO_CODECS)} (re-encode it to H.264)")


def log_video(path: Path, recording: Any, entity_path: str, start_ns: int = 0) -> int:
    """Log one video as an encoded stream: the mp4 asset (static) and a frame reference per frame.

    Args:
        path: an mp4 (see `check_video`).
        recording: the `rerun.RecordingStream`.
        entity_path: where to log it (`paths.video_path(source, camera)`).
        start_ns: time of the video's first frame on the `scenario_time` timeline (ns).

    Returns:
        The number of frames referenced.
    """
    rr = require_rerun()
    check_video(path)
    asset = rr.AssetVideo(path=path)
    recording.log(entity_path, asset, static=True)
    frames_ns = np.asarray(asset.read_frame_timestamps_nanos(), dtype=np.int64)
    index = rr.TimeColumn(paths.TIMELINE, duration=(frames_ns + int(start_ns)).astype("timedelta64[ns]"))
    recording.send_columns(entity_path, indexes=[index], columns=rr.VideoFrameReference.columns_nanos(frames_ns))
    return len(frames_ns)


def log_videos(videos: dict[str, Path], recording: Any, source: str, start_ns: int = 0) -> int:
    """Log the videos of one source, each at ``videos/<source>/<camera>``.

    Args:
        videos: camera -> mp4 (`find_videos`).
        recording: the `rerun.RecordingStream`.
        source: one of `paths.SOURCES` (or a name of your own).
        start_ns: time of the first frames on the timeline (ns).

    Returns:
        The number of frames referenced over all cameras.
    """
    return sum(log_video(path, recording, paths.video_path(source, camera), start_ns) for camera, path in videos.items())
