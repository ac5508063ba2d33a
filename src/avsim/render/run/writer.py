"""Video stage: stream rendered frames into per-camera H.264 videos, PNGs, a mosaic, overlays.

Layouts (compatible with the public Cosmos tooling):

* ``default``: ``<out>/<clip>/<clip>.<camera>.mp4``
* ``posttrain``: ``<out>/control_input_hdmap_bbox/ftheta_<camera>/<clip>.mp4``
* ``multiview``: ``<out>/<clip>/world_scenario_videos/ws_<view>.mp4``, the control videos of
  cosmos-transfer2.5's ``assets/multiview_example`` (what ``examples/multiview.py``'s spec points
  its seven views at; `MULTIVIEW_FILES`);
* ``omnidreams``: ``<out>/hdmap/<camera>/<clip>.mp4``, OmniDreams' local multiview dataset
  (``LocalMultiviewVideoDataset``, ``hdmap_subdir``; cameras `OMNIDREAMS_CAMERAS`).

The last two hold only the model rig's seven cameras (render with ``--rig cosmos``).

With chunking (``chunk_frames > 0``) chunk k of a clip is written under the clip id
``<clip>_<k>`` in every layout. A camera's frames are encoded in fixed segments of
`avsim.render.run.units.SEGMENT_FRAMES` (the unit of resume) that are remuxed into the final video without
re-encoding. Every file is written atomically: an interrupted run leaves finished segments
(under ``<out>/<clip>/.parts``) and finished videos, never a partial file, and a rerun
continues from there (resumable).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import av
import cv2
import numpy as np

from avsim.core.atomic import atomic_output_path, remove_stale_temporaries
from avsim.core.errors import AvsimValueError
from avsim.core.mosaic import MosaicLayout, mosaic_layout, spatial_rows
from avsim.core.names import join_names
from avsim.core.rig import COSMOS_VIEW_NAMES, CameraRig
from avsim.core.typing import NDArrayByte
from avsim.core.video import check_written_mp4
from avsim.render.run.plan import Layout, Stream, StreamKind
from avsim.render.run.units import StreamJob

POSTTRAIN_FOLDER = "control_input_hdmap_bbox"
MULTIVIEW_FOLDER = "world_scenario_videos"
# model-rig camera -> file of cosmos-transfer2.5's assets/multiview_example/world_scenario_videos/
# (the spec's view keys front_wide, cross_right, rear_right, rear, rear_left, cross_left, front_tele)
MULTIVIEW_FILES: dict[str, str] = {
    "camera_front_wide_120fov": "ws_front_wide_120fov.mp4", "camera_cross_right_120fov": "ws_cross_right_120fov.mp4",
    "camera_rear_right_70fov": "ws_rear_right_70fov.mp4", "camera_rear_tele_30fov": "ws_rear_30fov.mp4",
    "camera_rear_left_70fov": "ws_rear_left_70fov.mp4", "camera_cross_left_120fov": "ws_cross_left_120fov.mp4",
    "camera_front_tele_30fov": "ws_front_tele_30fov.mp4",
}  # fmt: skip
OMNIDREAMS_FOLDER = "hdmap"
OMNIDREAMS_CAMERAS = COSMOS_VIEW_NAMES  # omni-dreams predict2_multiview DEFAULT_CAMERAS: the same names


def chunk_ranges(n_frames: int, chunk_frames: int) -> list[tuple[int, int]]:
    """Split a clip into chunks.

    Args:
        n_frames: frames to render.
        chunk_frames: frames per chunk (<= 0: one chunk).

    Returns:
        [start, stop) frame ranges relative to the first frame; a trailing partial chunk is kept.
    """
    if chunk_frames <= 0 or n_frames <= chunk_frames:
        return [(0, n_frames)]
    return [(s, min(s + chunk_frames, n_frames)) for s in range(0, n_frames, chunk_frames)]


def chunk_clip_id(clip_id: str, chunk_index: int, n_chunks: int) -> str:
    """The clip id of one chunk.

    Args:
        clip_id: the clip's id.
        chunk_index: index of the chunk.
        n_chunks: number of chunks.

    Returns:
        `clip_id` for a single chunk, else ``<clip_id>_<chunk_index>``.
    """
    return clip_id if n_chunks == 1 else f"{clip_id}_{chunk_index}"


def camera_video_paths(out: Path, clip_id: str, camera: str, layout: Layout) -> list[Path]:
    """Where one camera's video of one clip (or chunk) goes.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.
        camera: camera name.
        layout: the layout.

    Returns:
        One path per layout, default first (AvsimValueError: a camera the multiview or omnidreams
        layout has no place for).
    """
    layout = Layout(layout)
    if layout is Layout.MULTIVIEW:
        return [multiview_example_path(out, clip_id, camera)]
    if layout is Layout.OMNIDREAMS:
        return [omnidreams_path(out, clip_id, camera)]
    paths = []
    if layout in (Layout.DEFAULT, Layout.BOTH):
        paths.append(join_names(out, clip_id, f"{clip_id}.{camera}.mp4"))
    if layout in (Layout.POSTTRAIN, Layout.BOTH):
        paths.append(join_names(out, POSTTRAIN_FOLDER, f"ftheta_{camera}", f"{clip_id}.mp4"))
    return paths


def _model_camera(camera: str, layout: Layout) -> None:
    if camera not in COSMOS_VIEW_NAMES:
        raise AvsimValueError(
            f"--layout {layout}: camera {camera!r} is not one of the model rig's {', '.join(COSMOS_VIEW_NAMES)} (render with --rig cosmos)"
        )


def multiview_example_path(out: Path, clip_id: str, camera: str) -> Path:
    """A camera video in cosmos-transfer2.5's multiview example layout.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.
        camera: a model-rig camera name.

    Returns:
        ``out/<clip>/world_scenario_videos/ws_<view>.mp4`` (`MULTIVIEW_FILES`).
    """
    _model_camera(camera, Layout.MULTIVIEW)
    return join_names(out, clip_id, MULTIVIEW_FOLDER, MULTIVIEW_FILES[camera])


def omnidreams_path(out: Path, clip_id: str, camera: str) -> Path:
    """A camera video in OmniDreams' local dataset layout.

    Args:
        out: output folder (OmniDreams' ``data_root``).
        clip_id: clip (or chunk) id.
        camera: a model-rig camera name.

    Returns:
        ``out/hdmap/<camera>/<clip>.mp4``.
    """
    _model_camera(camera, Layout.OMNIDREAMS)
    return join_names(out, OMNIDREAMS_FOLDER, camera, f"{clip_id}.mp4")


def stream_outputs(out: Path, clip_id: str, stream: Stream, layout: Layout) -> tuple[Path, ...]:
    """The files one stream of one clip (or chunk) is written to.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.
        stream: the stream.
        layout: the camera videos' layout.

    Returns:
        A camera stream's paths per `camera_video_paths`; the mosaic's or an overlay's one path.
    """
    if stream.kind is StreamKind.MOSAIC:
        return (mosaic_path(out, clip_id),)
    if stream.kind is StreamKind.OVERLAY:
        return (overlay_path(out, clip_id, stream.camera),)
    return tuple(camera_video_paths(out, clip_id, stream.camera, layout))


def png_folder(out: Path, clip_id: str, camera: str) -> Path:
    """Folder of one camera's PNG frames.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.
        camera: camera name.

    Returns:
        ``out/<clip>/png/<camera>``.
    """
    return join_names(out, clip_id, "png", camera)


def mosaic_path(out: Path, clip_id: str) -> Path:
    """Path of a clip's mosaic video.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.

    Returns:
        ``out/<clip>/<clip>.mosaic.mp4``.
    """
    return join_names(out, clip_id, f"{clip_id}.mosaic.mp4")


def overlay_path(out: Path, clip_id: str, camera: str) -> Path:
    """Path of one camera's overlay video.

    Args:
        out: output folder.
        clip_id: clip (or chunk) id.
        camera: camera name.

    Returns:
        ``out/<clip>/<clip>.<camera>.overlay.mp4``.
    """
    return join_names(out, clip_id, f"{clip_id}.{camera}.overlay.mp4")


def assemble_job(job: StreamJob) -> None:
    """Remux the job's finished segments into its outputs (atomically) and drop the parts.

    Args:
        job: a job whose segments are all done.
    """
    parts = [s.part for s in job.segments()]
    concat_mp4(parts, job.outputs[0])
    for extra in job.outputs[1:]:
        with atomic_output_path(extra) as tmp:
            shutil.copyfile(job.outputs[0], tmp)
    for part in parts:
        part.unlink(missing_ok=True)
    sweep_job(job)


def sweep_job(job: StreamJob) -> None:
    """Remove what killed runs left of `job`: temporaries of its outputs and parts whose process
    is gone, finished parts made from other inputs (another digest tag), and the `.parts` folder
    once it is empty.

    Args:
        job: any job (finished or not); a running writer's temporaries are never touched.
    """
    current = {s.part for s in job.segments()}
    for path in [*job.outputs, *current]:
        remove_stale_temporaries(path)
    if job.digest and job.parts_dir.is_dir():
        for part in job.parts_dir.glob(job.part_glob()):
            if part not in current:
                part.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # other cameras' parts are still there
        job.parts_dir.rmdir()


def concat_mp4(parts: list[Path], path: Path) -> None:
    """Join H.264 mp4 files of identical settings into one without re-encoding (atomic).

    Every part starts with an IDR frame (a fresh encoder), so the joined stream is valid;
    timestamps are shifted to follow on. The joined file is renamed into place only once it
    lists every packet of the parts (`avsim.core.video.mp4_frame_count`).

    Args:
        parts: the mp4 files, in order.
        path: the joined file.
    """
    muxed = [0]
    with atomic_output_path(path, check=lambda tmp: check_written_mp4(tmp, muxed[0])) as tmp:
        out = av.open(str(tmp), mode="w", format="mp4", options={"movflags": "+faststart"})
        try:
            out_stream, offset = None, 0
            for part in parts:
                with av.open(str(part)) as inp:
                    stream = inp.streams.video[0]
                    if out_stream is None:
                        out_stream = out.add_stream_from_template(stream)
                    end = offset
                    for packet in inp.demux(stream):
                        if packet.dts is None:  # the demuxer's final flush packet
                            continue
                        assert packet.pts is not None and packet.duration is not None, "an mp4 packet without timing"
                        packet.pts += offset
                        packet.dts += offset
                        end = max(end, packet.pts + packet.duration)
                        packet.stream = out_stream
                        out.mux(packet)
                        muxed[0] += 1
                    offset = end
        finally:
            out.close()  # flushed (faststart pass) before the check; a failure here drops the temporary


def write_png(path: Path, frame_rgb: NDArrayByte) -> None:
    """Write an RGB frame as a PNG, atomically (deterministic bytes for identical frames).

    Args:
        path: the PNG file.
        frame_rgb: (H, W, 3) uint8 RGB.
    """
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(frame_rgb[..., ::-1]))
    if not ok:  # pragma: no cover - OpenCV only fails on invalid arrays
        raise RuntimeError(f"could not encode {path}")
    with atomic_output_path(path) as tmp:
        tmp.write_bytes(buf.tobytes())


# ---- mosaic ---------------------------------------------------------------------------------
MOSAIC_TILE_PX = (640, 360)  # (width, height) of a tile in the mosaic's widest row ...
MOSAIC_MAX_PX = (1920, 1080)  # ... smaller when the mosaic would not fit in 1080p


def render_mosaic_layout(rig: CameraRig, cameras: Sequence[str]) -> MosaicLayout:
    """The mosaic of `cameras`: front row, sides, rear (`avsim.core.mosaic`), tiles of the widest
    row `MOSAIC_TILE_PX` (smaller when the mosaic would exceed `MOSAIC_MAX_PX`), every row as wide,
    no empty tile.

    Args:
        rig: the rig rendered through (its extrinsics place the cameras).
        cameras: the cameras drawn.

    Returns:
        The layout (its size is the mosaic video's).
    """
    return mosaic_layout(spatial_rows(rig, cameras), *MOSAIC_TILE_PX, max_size_px=MOSAIC_MAX_PX)


def tile_mosaic(frames: dict[str, NDArrayByte], layout: MosaicLayout) -> NDArrayByte:
    """Tile labelled, resized camera frames into one image.

    Args:
        frames: camera name -> (H, W, 3) uint8 RGB (every camera of the layout).
        layout: where each camera goes (`render_mosaic_layout`).

    Returns:
        (layout.height_px, layout.width_px, 3) uint8 RGB, every pixel part of a tile.
    """
    out = np.zeros((layout.height_px, layout.width_px, 3), np.uint8)
    for t in layout.tiles:
        tile = cv2.resize(frames[t.camera], (t.width_px, t.height_px), interpolation=cv2.INTER_AREA)
        cv2.putText(tile, t.camera, (8, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 1, cv2.LINE_AA)
        out[t.y_px : t.y_px + t.height_px, t.x_px : t.x_px + t.width_px] = tile
    return out
