"""The report's clips: what each side holds (frame rate, size, frame count per view), the
warnings when the sides differ, and the per-clip grouping every video metric resamples by.

A clip is one drive segment: a single video, or several camera views of the same instants
(`videos/<clip>/<camera>.mp4`). Views of one clip are correlated, so the bootstrap of FID,
FVD, TSE and CSE draws clips (all their views together), never views.

FVD depends on frame rate (its 16-frame windows span different durations) and both FID and
FVD on frame size (resizing to the networks' inputs blurs differently); a side that differs
from the other in rate, size or frame count is named in a warning on the page. Where a metric
is undefined for a clip (FVD on fewer than 16 frames) the video section says so itself.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VideoClips = dict[str, dict[str, Path]]  # clip name -> view name ("video" or a camera) -> clip path


@dataclass(frozen=True)
class ViewInfo:
    """What one view's file says about itself (fps 0 for a frame folder: no rate recorded)."""

    frames: int
    fps: float
    width_px: int
    height_px: int

    @property
    def size(self) -> str:
        return f"{self.width_px}x{self.height_px}"


def view_info(path: Path) -> ViewInfo:
    """Frame count, rate and size of a video file or a frame folder.

    Args:
        path: a video file or a folder of image frames.

    Returns:
        its `ViewInfo` (an unreadable file reads as 0 frames; decoding reports it later).
    """
    from avsim.evaluation.video_frames import IMAGE_SUFFIXES

    if path.is_dir():
        import cv2

        images = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        first = cv2.imread(str(images[0])) if images else None
        h, w = first.shape[:2] if first is not None else (0, 0)
        return ViewInfo(len(images), 0.0, int(w), int(h))
    from avsim.core.video import video_info

    try:
        info = video_info(path)
    except Exception:  # reported with its own error when the frames are decoded
        return ViewInfo(0, 0.0, 0, 0)
    return ViewInfo(int(info["frames"]), float(info["fps"]), int(info["width_px"]), int(info["height_px"]))


def side_inventory(clips: VideoClips) -> dict[str, Any]:
    """A side's clips, views per clip and the distinct rates, sizes and frame counts (JSON-ready)."""
    infos = {f"{clip}/{view}": view_info(p) for clip, views in clips.items() for view, p in views.items()}
    return {
        "clips": len(clips),
        "views": sum(len(v) for v in clips.values()),
        "fps": sorted({round(i.fps, 3) for i in infos.values()}),
        "sizes": sorted({i.size for i in infos.values()}),
        "frames": sorted({i.frames for i in infos.values()}),
        "per_view": {k: {"frames": i.frames, "fps": i.fps, "size": i.size} for k, i in infos.items()},
    }


def _describe(values: list[Any], unit: str) -> str:
    return " / ".join(f"{v:g}{unit}" if isinstance(v, float) else f"{v}{unit}" for v in values) or "none"


def mismatch_warnings(real: dict[str, Any], gen: dict[str, Any]) -> list[str]:
    """Warnings where the two sides differ in frame rate, frame size or frame count.

    Args:
        real, gen: `side_inventory` of each side.

    Returns:
        one line per difference, naming both sides' values and what it affects.
    """
    out = []
    if real["fps"] != gen["fps"] and 0.0 not in real["fps"] + gen["fps"]:
        out.append(f"frame rate differs: real {_describe(real['fps'], ' fps')}, generated {_describe(gen['fps'], ' fps')}; "
                   "FVD's 16-frame windows then span different durations, and TSE compares frames a different "
                   "time apart")  # fmt: skip
    if real["sizes"] != gen["sizes"]:
        out.append(f"frame size differs: real {_describe(real['sizes'], '')}, generated {_describe(gen['sizes'], '')}; "
                   "FID and FVD resize to their networks' inputs and Sampson errors are in pixels of each "
                   "side's rectified view, so resizing alone moves them")  # fmt: skip
    if real["frames"] != gen["frames"]:
        out.append(f"frame count per view differs: real {_describe(real['frames'], '')}, generated "
                   f"{_describe(gen['frames'], '')}; FID, FVD and Sampson then average over different spans "
                   "(--max-frames / --fvd-windows cap both sides alike)")  # fmt: skip
    return out


def clip_groups(clips: VideoClips) -> tuple[list[Path], list[int]]:
    """Every view's path and the index of the clip it belongs to (for grouped resampling)."""
    paths, owner = [], []
    for k, views in enumerate(clips.values()):
        for p in views.values():
            paths.append(p)
            owner.append(k)
    return paths, owner


def view_counts(clips: VideoClips) -> dict[str, int]:
    """How many clips have how many views (e.g. {"7": 2})."""
    return {str(n): c for n, c in sorted(Counter(len(v) for v in clips.values()).items())}
