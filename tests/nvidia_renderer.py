"""Run NVIDIA's own control-video renderer on a ClipGT folder and compare its frames with avsim's.

The renderer is cosmos-transfer2.5's ``scripts/generate_control_videos.py``, run unmodified from
a copy made at test time (the checkout of ``AVSIM_COSMOS_TRANSFER25`` and the interpreter of
``AVSIM_COSMOS_PYTHON``, as for NVIDIA's loader: `nvidia_loader`). It needs moderngl with an EGL
driver: without a GPU, Mesa's llvmpipe (Debian ``libegl-mesa0``, ``libgl1-mesa-dri``) renders on
the CPU, and torch falls back to the CPU. It writes one H.264 video per camera (CRF 18), every
camera resized to 1280 x 720.

Comparison (`compare_frames`), per camera over every frame, against avsim's lossless PNG frames of
the same clip: *agreement* is the share of pixels whose RGB differ by at most `AGREE_TOLERANCE`
in every channel (H.264 at CRF 18 moves flat colours by a few levels and edges by more), and
*mask IoU* the intersection over union of the drawn pixels (any channel above `DRAWN_LEVEL`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from nvidia_loader import LOADER_MODULES, LOADER_TREE, nvidia_python, vendor_loader

SCRIPT = "scripts/generate_control_videos.py"
RENDERER_MODULES = (*LOADER_MODULES, "moderngl", "imageio", "imageio_ffmpeg", "click")
AGREE_TOLERANCE = 40  # levels per channel
DRAWN_LEVEL = 40  # a pixel with any channel above this is drawn (black background, depth fade to black at 200 m)


def run_nvidia_renderer(clip: Path, out: Path, tmp: Path, cameras: str | None = None, timeout_s: float = 1800) -> dict[str, Path]:
    """Render a clip with NVIDIA's script.

    Args:
        clip: the ClipGT folder.
        out: the output folder (its ``--output-dir``).
        tmp: a temporary folder for the copied code.
        cameras: the ``--cameras`` value (None: its default, the seven cosmos cameras).
        timeout_s: give up after this long.

    Returns:
        camera name -> its video.
    """
    python = nvidia_python(RENDERER_MODULES)
    vendored = vendor_loader(tmp / "nvidia-renderer", None, (LOADER_TREE, SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(vendored), "LOGURU_LEVEL": "WARNING"}
    command = [python, str(vendored / SCRIPT), "-i", str(clip), "-o", str(out), *(["--cameras", cameras] if cameras else [])]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s, check=False, cwd=tmp)
    assert result.returncode == 0, result.stderr[-4000:]
    return {p.name.split(".")[-2]: p for p in sorted(out.rglob("*.mp4"))}


def read_video(path: Path) -> list[np.ndarray]:
    """Every frame of a video, (H, W, 3) uint8 RGB."""
    import av

    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@dataclass(frozen=True)
class FrameAgreement:
    """How alike two renders of one camera are (every frame pooled).

    Attributes:
        frames: frames compared.
        agreement: share of pixels within `AGREE_TOLERANCE` in every channel.
        mask_iou: intersection over union of the drawn pixels.
    """

    frames: int
    agreement: float
    mask_iou: float


def compare_frames(theirs: list[np.ndarray], ours: list[np.ndarray]) -> FrameAgreement:
    """Pixel agreement and drawn-pixel IoU of two frame lists of one camera (same length and size)."""
    assert len(theirs) == len(ours) and theirs[0].shape == ours[0].shape, (len(theirs), len(ours), theirs[0].shape, ours[0].shape)
    agree = inter = union = total = 0
    for a, b in zip(theirs, ours):
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(-1)
        agree += int((diff <= AGREE_TOLERANCE).sum())
        total += diff.size
        drawn_a, drawn_b = a.max(-1) > DRAWN_LEVEL, b.max(-1) > DRAWN_LEVEL
        inter += int((drawn_a & drawn_b).sum())
        union += int((drawn_a | drawn_b).sum())
    return FrameAgreement(len(theirs), agree / total, inter / max(union, 1))


def avsim_frames(out: Path, camera: str) -> list[np.ndarray]:
    """avsim's PNG frames of one camera (``avsim render --png`` into `out`)."""
    from PIL import Image

    pngs = sorted(out.glob(f"*/png/{camera}/*.png"))
    return [np.asarray(Image.open(p).convert("RGB")) for p in pngs]


__all__ = ["AGREE_TOLERANCE", "DRAWN_LEVEL", "FrameAgreement", "avsim_frames", "compare_frames", "read_video",
           "run_nvidia_renderer"]  # fmt: skip
