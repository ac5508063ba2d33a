"""What `avsim train pair` checks before a real recording joins the post-training layout.

Training reads frame i of a view's real video with frame i of its control (`probe_clips`,
`read_clip`), so a pair is usable only when both are the same drive, from the same instant, at
the same rate. Nothing here can prove that, but four cheap checks per view refuse what
cannot be such a pair, from the container headers and the real video's first frame:

- **rate**: the real and control frame rates are equal (to 0.1 %), as the encoder requires;
- **duration**: the real video covers the control: at most one frame shorter (a longer
  recording is accepted; training reads its first frames, so its frame 0 must be the
  control's);
- **shape**: the same aspect ratio (to 1 %): both are resized to the model size, and a different
  aspect is another camera or a crop. The resolution may differ (1920x1080 against a 1280x720
  control);
- **content**: the first frame is not noise. Neighbouring pixels of a camera image are highly
  correlated (0.99 on the Udacity highway clip in ../shared/data, 0.98 on a render), those of
  noise are not (0.0 for uniform noise through H.264). A frame whose grey level varies by at
  least `NOISE_MIN_STD` and whose horizontal and vertical neighbour correlations are both
  below `NOISE_MAX_CORRELATION` is refused; darker, flatter frames (a camera at night, a black
  start) are never refused on content.

`pair_problems` returns the reasons, one per failed check and view; `check_pair` raises them
as one input error line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.core.typing import NDArrayFloat
from avsim.core.video import iter_video_frames, video_info

RATE_TOLERANCE = 1e-3
ASPECT_TOLERANCE = 0.01
NOISE_MIN_STD = 16.0
NOISE_MAX_CORRELATION = 0.5


@dataclass(frozen=True)
class VideoHeader:
    """Frame count, rate and size of a video, from its container header."""

    frames: int
    fps: float
    width_px: int
    height_px: int

    @classmethod
    def read(cls, path: Path) -> VideoHeader:
        """The header of `path` (frames counted from the packets when the container does not say).

        Args:
            path: a video file.

        Returns:
            Its header.
        """
        info = video_info(path)
        frames = int(info["frames"])
        if frames <= 0:
            from avsim.models.video_io import frame_times_s

            frames = len(frame_times_s(path))
        return cls(frames, float(info["fps"]), int(info["width_px"]), int(info["height_px"]))

    @property
    def duration_s(self) -> float:
        """frames / fps."""
        return self.frames / self.fps if self.fps > 0 else 0.0

    def describe(self) -> str:
        """`300 frames at 30 fps (10.00 s), 1280x720`."""
        return f"{self.frames} frames at {self.fps:g} fps ({self.duration_s:.2f} s), {self.width_px}x{self.height_px}"


def neighbour_correlation(grey: NDArrayFloat) -> tuple[float, float]:
    """Pearson correlation of horizontally and of vertically neighbouring pixels.

    Args:
        grey: (H, W) grey levels.

    Returns:
        (horizontal, vertical); NaN for a constant image.
    """
    def corr(a: NDArrayFloat, b: NDArrayFloat) -> float:
        a, b = a - a.mean(), b - b.mean()
        scale = float(np.sqrt((a * a).sum() * (b * b).sum()))
        return float((a * b).sum() / scale) if scale > 0 else float("nan")

    return corr(grey[:, :-1], grey[:, 1:]), corr(grey[:-1], grey[1:])


def looks_like_noise(path: Path) -> str | None:
    """Why the first frame of `path` looks like noise (module docstring, "content"), or None.

    Args:
        path: a video file.

    Returns:
        The reason, or None.
    """
    frame = next(iter_video_frames(path), None)
    if frame is None:
        return "no frame decodes"
    grey = frame.astype(np.float64).mean(axis=-1)
    if grey.std() < NOISE_MIN_STD or min(grey.shape) < 2:
        return None
    horizontal, vertical = neighbour_correlation(grey)
    if max(horizontal, vertical) < NOISE_MAX_CORRELATION:
        return (f"its first frame looks like noise (neighbouring pixels correlate {max(horizontal, vertical):.2f}; "
                f"a camera image above {NOISE_MAX_CORRELATION:g})")  # fmt: skip
    return None


def pair_problems(real: Path, control: Path) -> list[str]:
    """Why the real video `real` cannot pair with the control `control` (module docstring); empty when it can.

    Args:
        real: the real recording of one view.
        control: the control video of that view.

    Returns:
        One reason per failed check.
    """
    r, c = VideoHeader.read(real), VideoHeader.read(control)
    problems = []
    if c.fps <= 0 or abs(r.fps - c.fps) > RATE_TOLERANCE * c.fps:
        problems.append(f"{r.fps:g} fps, the control {c.fps:g} fps (render the control at --fps {r.fps:g})")
    elif r.frames < c.frames - 1:
        problems.append(f"{r.duration_s:.2f} s ({r.frames} frames), shorter than the control's {c.duration_s:.2f} s "
                        f"({c.frames} frames)")  # fmt: skip
    if r.height_px <= 0 or c.height_px <= 0 or abs((r.width_px / r.height_px) / (c.width_px / c.height_px) - 1) > ASPECT_TOLERANCE:
        problems.append(f"{r.width_px}x{r.height_px}, not the control's aspect ratio ({c.width_px}x{c.height_px})")
    noise = looks_like_noise(real)
    if noise is not None:
        problems.append(noise)
    return problems


def check_pair(controls: dict[str, Path], videos: dict[str, Path], views: tuple[str, ...]) -> None:
    """Refuse a clip whose real videos cannot pair with its controls, naming every view and reason in one line.

    Args:
        controls: camera -> control video.
        videos: camera -> real video.
        views: the cameras to check (each in both maps).

    Raises:
        AvsimInputError: naming the first refused real video's folder and every problem.
    """
    problems = [(videos[v], f"{v}: {p}") for v in views for p in pair_problems(videos[v], controls[v])]
    if problems:
        raise AvsimInputError(problems[0][0].parent, "videos", "refused: " + "; ".join(text for _, text in problems))
