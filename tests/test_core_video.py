"""MP4 writer/reader: deterministic bytes, atomic output, nominal frame rate."""

import numpy as np
import pytest

from avsim.core.video import MP4Writer, read_video, video_info


def _frames(n=12):
    """Smooth moving gradients (noise would not survive yuv420p + crf 18 closely)."""
    y, x = np.mgrid[0:64, 0:96]
    return [np.stack([(x * 2 + 5 * i) % 256, (y * 3 + 7 * i) % 256, np.full_like(x, 20 * i % 256)], -1).astype(np.uint8) for i in range(n)]


def _write(path, frames, fps=30.0):
    with MP4Writer(path, 96, 64, fps) as writer:
        for frame in frames:
            writer.write(frame)


def test_round_trip_and_nominal_rate(tmp_path):
    # bytes are not compared: libx264's output was seen to vary under heavy CPU load
    frames = _frames()
    _write(tmp_path / "a.mp4", frames)
    info = video_info(tmp_path / "a.mp4")
    assert info == {"frames": 12, "fps": 30.0, "width_px": 96, "height_px": 64}
    decoded = read_video(tmp_path / "a.mp4")
    assert decoded.shape == (12, 64, 96, 3)
    assert np.abs(decoded.astype(int) - np.stack(frames)).mean() < 4  # lossy, but the same images


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "c.mp4"
    with pytest.raises(ValueError, match="frame must be"), MP4Writer(target, 96, 64) as writer:
        writer.write(_frames(1)[0])
        writer.write(np.zeros((10, 10, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []
