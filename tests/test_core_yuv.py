"""RGB -> YUV 4:2:0 without libswscale: swscale's luma exactly, its chroma within one level."""

from __future__ import annotations

import av
import numpy as np
import pytest

from avsim.core.yuv import rgb_to_yuv420p


def _swscale(frame_rgb: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(frame_rgb, format="rgb24").reformat(format="yuv420p").to_ndarray()


def _control_like(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Flat palette areas with hard and blended edges, as control frames are."""
    img = np.zeros((h, w, 3), np.uint8)
    for _ in range(12):
        y0, x0 = rng.integers(0, h - 4), rng.integers(0, w - 4)
        img[y0 : y0 + rng.integers(2, h // 2), x0 : x0 + rng.integers(2, w // 2)] = rng.integers(0, 256, 3)
    edge = rng.random((h, w)) < 0.05
    img[edge] = (img[edge] // 2 + rng.integers(0, 128, (int(edge.sum()), 3))).astype(np.uint8)
    return img


@pytest.mark.parametrize("kind", ["random", "control"])
def test_luma_equals_swscale_and_chroma_is_within_one_level(kind):
    rng = np.random.default_rng(7)
    h, w = 90, 160
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8) if kind == "random" else _control_like(rng, h, w)
    ours, ref = rgb_to_yuv420p(img), _swscale(img)
    assert ours.shape == ref.shape == (h * 3 // 2, w) and ours.dtype == np.uint8
    np.testing.assert_array_equal(ours[:h], ref[:h])
    diff = ours[h:].astype(int) - ref[h:]
    assert np.abs(diff).max() <= 1 and np.count_nonzero(diff) / diff.size < 0.10


def test_flat_colours_and_the_layout_are_swscale_s():
    for rgb in [(0, 0, 0), (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255), (37, 180, 90)]:
        img = np.zeros((8, 12, 3), np.uint8)
        img[:4, :6] = rgb  # one quadrant: the U / V planes' row-major layout is checked too
        np.testing.assert_array_equal(rgb_to_yuv420p(img), _swscale(img))


def test_encoded_video_decodes_close_to_its_frames(tmp_path):
    from avsim.core.video import MP4Writer, read_video

    rng = np.random.default_rng(3)
    frames = [_control_like(rng, 64, 96) for _ in range(3)]
    with MP4Writer(tmp_path / "v.mp4", 96, 64, 30.0) as w:
        for f in frames:
            w.write(f)
    decoded = read_video(tmp_path / "v.mp4")
    assert decoded.shape == (3, 64, 96, 3) and np.abs(decoded.astype(int) - np.stack(frames)).mean() < 6


@pytest.mark.parametrize("bad", [np.zeros((9, 8, 3), np.uint8), np.zeros((8, 8, 3), np.float32), np.zeros((8, 8), np.uint8)])
def test_bad_frames_are_refused(bad):
    with pytest.raises(ValueError):
        rgb_to_yuv420p(bad)
