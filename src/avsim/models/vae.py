"""Wan2.1 causal video VAE: 16 latent channels, 8x spatial and 4x causal temporal compression.

Execution is always causal and cached: the encoder sees frame 0 alone, then chunks of frames
(any multiple of 4 gives identical latents); the decoder sees one latent frame at a time
(latent 0 -> 1 pixel frame, every later latent -> 4). Every causal convolution keeps the last
two frames of its input as the next chunk's front padding (`_CausalCache`), which is also the
only mode in which the temporal resampling exists. Memory is bounded by the chunk length and,
optionally, spatial tiling (overlapping tiles blended linearly; approximate at tile seams).

Public API on `WanVAE`:
- `encode(video (B, 3, 1+4k, H, W) in [-1, 1], chunk_frames=4) -> normalised latents (B, 16, 1+k, H/8, W/8)`
- `decode(latents) -> video (B, 3, 1+4k, H, W) clamped to [-1, 1]`
- `encode_views` / `decode_views`: views concatenated along time, processed one at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from avsim.models.config import VAEConfig
from avsim.models.layout import pack_views, unpack_views

CACHE_T = 2


class _CausalCache:
    """Per-convolution tail frames carried between chunks; `idx` walks the convs in call order."""

    def __init__(self) -> None:
        self.slots: list[Tensor | str | None] = []
        self.idx = 0

    def start_chunk(self) -> None:
        self.idx = 0

    def take(self) -> tuple[int, Tensor | str | None]:
        i = self.idx
        if i == len(self.slots):
            self.slots.append(None)
        self.idx += 1
        return i, self.slots[i]


def _tail(x: Tensor, previous: Tensor | str | None) -> Tensor:
    """Last CACHE_T frames of x, completed with the previous cache's last frame if x is short."""
    tail = x[:, :, -CACHE_T:].clone()
    if tail.shape[2] < CACHE_T and isinstance(previous, Tensor):
        tail = torch.cat([previous[:, :, -1:].to(tail.device), tail], dim=2)
    return tail


class CausalConv3d(nn.Conv3d):
    """Conv3d with symmetric spatial zero padding and causal (front-only, 2x) temporal padding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(self.padding, str):
            raise ValueError("CausalConv3d takes numeric padding")
        pt, ph, pw = self.padding
        self._pad: tuple[int, ...] = (pw, pw, ph, ph, 2 * pt, 0)
        self.padding = (0, 0, 0)

    def forward(self, x: Tensor, cache_x: Tensor | None = None) -> Tensor:
        pad = list(self._pad)
        if cache_x is not None and pad[4] > 0:
            x = torch.cat([cache_x.to(x.device, x.dtype), x], dim=2)
            pad[4] -= cache_x.shape[2]
        return super().forward(F.pad(x, pad))

    def cached(self, x: Tensor, cache: _CausalCache | None) -> Tensor:
        if cache is None:
            return self(x)
        i, prev = cache.take()
        tail = _tail(x, prev)
        out = self(x, prev if isinstance(prev, Tensor) else None)
        cache.slots[i] = tail
        return out


class RMSNorm(nn.Module):
    """L2-normalise over channels (eps 1e-12) x sqrt(C) x gamma; gamma shaped (C, 1, 1[, 1])."""

    def __init__(self, dim: int, images: bool = True) -> None:
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones((dim, 1, 1) if images else (dim, 1, 1, 1)))

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(x, dim=1) * self.scale * self.gamma


class Upsample(nn.Upsample):
    """nearest-exact upsampling computed in float32 (float64 kept) for half-precision inputs."""

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype in (torch.float16, torch.bfloat16):
            return super().forward(x.float()).type_as(x)
        return super().forward(x)


class Resample(nn.Module):
    """2x spatial up/down-sampling, optionally with 2x causal temporal resampling (`time_conv`)."""

    def __init__(self, dim: int, mode: str) -> None:
        super().__init__()
        self.mode = mode
        if mode in ("upsample2d", "upsample3d"):
            self.resample = nn.Sequential(
                Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"), nn.Conv2d(dim, dim // 2, 3, padding=1)
            )
            if mode == "upsample3d":
                self.time_conv = CausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode in ("downsample2d", "downsample3d"):
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
            if mode == "downsample3d":
                self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))
        else:
            raise ValueError(f"unknown resample mode {mode}")

    def _spatial(self, x: Tensor) -> Tensor:
        b, c, t, h, w = x.shape
        y = self.resample(x.transpose(1, 2).reshape(b * t, c, h, w))
        return y.reshape(b, t, *y.shape[1:]).transpose(1, 2)

    def forward(self, x: Tensor, cache: _CausalCache | None = None) -> Tensor:
        if self.mode == "upsample3d" and cache is not None:
            x = self._time_upsample(x, cache)
        x = self._spatial(x)
        if self.mode == "downsample3d" and cache is not None:
            x = self._time_downsample(x, cache)
        return x

    def _time_upsample(self, x: Tensor, cache: _CausalCache) -> Tensor:
        # The first latent frame passes unchanged; from the second on, the cache starts with zeros.
        i, prev = cache.take()
        if prev is None:
            cache.slots[i] = "first"
            return x
        tail = x[:, :, -CACHE_T:].clone()
        if tail.shape[2] < CACHE_T:
            head = prev[:, :, -1:].to(tail.device) if isinstance(prev, Tensor) else torch.zeros_like(tail)
            tail = torch.cat([head, tail], dim=2)
        y = self.time_conv(x, prev if isinstance(prev, Tensor) else None)
        cache.slots[i] = tail
        b, c2, t, h, w = y.shape
        y = y.reshape(b, 2, c2 // 2, t, h, w)
        return torch.stack((y[:, 0], y[:, 1]), dim=3).reshape(b, c2 // 2, t * 2, h, w)

    def _time_downsample(self, x: Tensor, cache: _CausalCache) -> Tensor:
        # Chunk 0 (frame 0 alone) passes unchanged; later chunks see (last cached frame, chunk).
        i, prev = cache.take()
        if prev is None:
            cache.slots[i] = x.clone()
            return x
        tail = x[:, :, -1:].clone()
        assert isinstance(prev, Tensor)
        y = self.time_conv(torch.cat([prev[:, :, -1:], x], dim=2))
        cache.slots[i] = tail
        return y


class ResidualBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.residual = nn.Sequential(
            RMSNorm(in_dim, images=False),
            nn.SiLU(),
            CausalConv3d(in_dim, out_dim, 3, padding=1),
            RMSNorm(out_dim, images=False),
            nn.SiLU(),
            nn.Dropout(dropout),
            CausalConv3d(out_dim, out_dim, 3, padding=1),
        )
        self.shortcut = CausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(self, x: Tensor, cache: _CausalCache | None = None) -> Tensor:
        h = self.shortcut(x)
        for layer in self.residual:
            x = layer.cached(x, cache) if isinstance(layer, CausalConv3d) else layer(x)
        return x + h


class AttentionBlock(nn.Module):
    """Single-head spatial self-attention within each frame."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x: Tensor, cache: _CausalCache | None = None) -> Tensor:
        identity = x
        b, c, t, h, w = x.shape
        y = self.norm(x.transpose(1, 2).reshape(b * t, c, h, w))
        q, k, v = self.to_qkv(y).reshape(b * t, 1, c * 3, h * w).permute(0, 1, 3, 2).chunk(3, dim=-1)
        y = F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous())
        y = self.proj(y.squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w))
        return y.reshape(b, t, c, h, w).transpose(1, 2) + identity


def _head(dim: int, out: int) -> nn.Sequential:
    return nn.Sequential(RMSNorm(dim, images=False), nn.SiLU(), CausalConv3d(dim, out, 3, padding=1))


def _middle(dim: int, dropout: float) -> nn.Sequential:
    """Residual + spatial attention + residual at the bottleneck (same in encoder and decoder)."""
    return nn.Sequential(ResidualBlock(dim, dim, dropout), AttentionBlock(dim), ResidualBlock(dim, dim, dropout))


def _run(layers: nn.Sequential, x: Tensor, cache: _CausalCache | None) -> Tensor:
    for layer in layers:
        if isinstance(layer, CausalConv3d):
            x = layer.cached(x, cache)
        elif isinstance(layer, (ResidualBlock, Resample, AttentionBlock)):
            x = layer(x, cache)
        else:
            x = layer(x)
    return x


class Encoder3d(nn.Module):
    def __init__(self, cfg: VAEConfig) -> None:
        super().__init__()
        dims = [cfg.dim * u for u in (1, *cfg.dim_mult)]
        self.conv1 = CausalConv3d(3, dims[0], 3, padding=1)
        layers: list[nn.Module] = []
        for i, (in_dim, out_dim) in enumerate(itertools.pairwise(dims)):
            for _ in range(cfg.num_res_blocks):
                layers.append(ResidualBlock(in_dim, out_dim, cfg.dropout))
                in_dim = out_dim
            if i != len(cfg.dim_mult) - 1:
                layers.append(Resample(out_dim, "downsample3d" if cfg.temporal_downsample[i] else "downsample2d"))
        self.downsamples = nn.Sequential(*layers)
        out_dim = dims[-1]
        self.middle = _middle(out_dim, cfg.dropout)
        self.head = _head(out_dim, cfg.z_dim * 2)

    def forward(self, x: Tensor, cache: _CausalCache | None = None) -> Tensor:
        x = self.conv1.cached(x, cache)
        for part in (self.downsamples, self.middle, self.head):
            x = _run(part, x, cache)
        return x


class Decoder3d(nn.Module):
    def __init__(self, cfg: VAEConfig) -> None:
        super().__init__()
        mult = cfg.dim_mult
        dims = [cfg.dim * u for u in (mult[-1], *mult[::-1])]
        temporal_upsample = cfg.temporal_downsample[::-1]
        self.conv1 = CausalConv3d(cfg.z_dim, dims[0], 3, padding=1)
        self.middle = _middle(dims[0], cfg.dropout)
        layers: list[nn.Module] = []
        for i, (in_dim, out_dim) in enumerate(itertools.pairwise(dims)):
            if i > 0:
                in_dim = in_dim // 2  # the previous upsample halved the channels
            for _ in range(cfg.num_res_blocks + 1):
                layers.append(ResidualBlock(in_dim, out_dim, cfg.dropout))
                in_dim = out_dim
            if i != len(mult) - 1:
                layers.append(Resample(out_dim, "upsample3d" if temporal_upsample[i] else "upsample2d"))
        self.upsamples = nn.Sequential(*layers)
        self.head = _head(dims[-1], 3)

    def forward(self, x: Tensor, cache: _CausalCache | None = None) -> Tensor:
        x = self.conv1.cached(x, cache)
        for part in (self.middle, self.upsamples, self.head):
            x = _run(part, x, cache)
        return x


class WanVAE(nn.Module):
    """Wan2.1 VAE; state-dict keys `encoder.*`, `conv1.*`, `conv2.*`, `decoder.*` (no prefix)."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.config = cfg = config
        self.encoder = Encoder3d(cfg)
        self.conv1 = CausalConv3d(cfg.z_dim * 2, cfg.z_dim * 2, 1)
        self.conv2 = CausalConv3d(cfg.z_dim, cfg.z_dim, 1)
        self.decoder = Decoder3d(cfg)

    def _stats(self, like: Tensor) -> tuple[Tensor, Tensor]:
        # Constants from the config, not buffers: a model loaded from the meta device keeps them.
        mean = torch.tensor(self.config.latent_mean, dtype=like.dtype, device=like.device)
        std = torch.tensor(self.config.latent_std, dtype=like.dtype, device=like.device)
        return mean.view(1, -1, 1, 1, 1), std.view(1, -1, 1, 1, 1)

    @property
    def dtype(self) -> torch.dtype:
        return self.conv1.weight.dtype

    def _check_video(self, video: Tensor) -> None:
        cfg = self.config
        s, tf = cfg.spatial_factor, cfg.temporal_factor
        if video.ndim != 5 or video.shape[1] != 3:
            raise ValueError(f"video must be (B, 3, T, H, W), got {tuple(video.shape)}")
        if (video.shape[2] - 1) % tf:
            raise ValueError(f"frame count must be 1 + {tf}k, got {video.shape[2]}")
        if video.shape[3] % s or video.shape[4] % s:
            raise ValueError(f"H, W must be multiples of {s}, got {tuple(video.shape[3:])}")

    @torch.no_grad()
    def encode(self, video: Tensor, chunk_frames: int = 4, tile_px: int | None = None, tile_overlap_px: int = 64) -> Tensor:
        """video (B, 3, 1+4k, H, W) in [-1, 1] -> normalised latent mean (B, 16, 1+k, H/8, W/8)."""
        self._check_video(video)
        tf = self.config.temporal_factor
        if chunk_frames <= 0 or chunk_frames % tf:
            raise ValueError(f"chunk_frames must be a positive multiple of {tf}")
        video = video.to(self.conv1.weight.device, self.dtype)
        if tile_px is not None:
            return _tiled(lambda v: self.encode(v, chunk_frames), video, tile_px, tile_overlap_px, self.config.spatial_factor)
        cache = _CausalCache()
        outs = []
        starts = [(0, 1)] + [(s, min(s + chunk_frames, video.shape[2])) for s in range(1, video.shape[2], chunk_frames)]
        for lo, hi in starts:
            if hi <= lo:
                continue
            cache.start_chunk()
            outs.append(self.encoder(video[:, :, lo:hi], cache))
        mu, _log_var = self.conv1(torch.cat(outs, dim=2)).chunk(2, dim=1)
        mean, std = self._stats(mu)
        return (mu - mean) / std

    @torch.no_grad()
    def decode(self, latents: Tensor, tile_latent: int | None = None, tile_overlap_latent: int = 8) -> Tensor:
        """Normalised latents (B, 16, T, h, w) -> video (B, 3, 1+4(T-1), 8h, 8w) in [-1, 1]."""
        if latents.ndim != 5 or latents.shape[1] != self.config.z_dim:
            raise ValueError(f"latents must be (B, {self.config.z_dim}, T, h, w), got {tuple(latents.shape)}")
        z = latents.to(self.conv1.weight.device, self.dtype)
        if tile_latent is not None:
            return _tiled(lambda t: self.decode(t), z, tile_latent, tile_overlap_latent, 1, out_scale=self.config.spatial_factor)
        mean, std = self._stats(z)
        z = z * std + mean
        x = self.conv2(z)
        cache = _CausalCache()
        outs = []
        for i in range(x.shape[2]):
            cache.start_chunk()
            outs.append(self.decoder(x[:, :, i : i + 1], cache))
        return torch.cat(outs, dim=2).clamp_(-1, 1)

    def encode_views(self, video: Tensor, num_views: int, chunk_frames: int = 4, tile_px: int | None = None) -> Tensor:
        """Views concatenated along time (B, 3, V*T, H, W) -> (B, 16, V*T_lat, h, w), view by view."""
        return pack_views([self.encode(v, chunk_frames, tile_px) for v in unpack_views(video, num_views)])

    def decode_views(self, latents: Tensor, num_views: int, tile_latent: int | None = None) -> Tensor:
        """(B, 16, V*T_lat, h, w) -> (B, 3, V*T, H, W), each view decoded on its own."""
        return pack_views([self.decode(z, tile_latent) for z in unpack_views(latents, num_views)])


def _tile_starts(size: int, tile: int, overlap: int, quantum: int) -> list[int]:
    if size <= tile:
        return [0]
    stride = max(quantum, (tile - overlap) // quantum * quantum)
    starts = list(range(0, size - tile, stride)) + [size - tile]
    return sorted(set(starts))


def _ramp(n: int, lo_overlap: int, hi_overlap: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    w = torch.ones(n, dtype=dtype, device=device)
    if lo_overlap > 0:
        w[:lo_overlap] = torch.linspace(0, 1, lo_overlap + 2, dtype=dtype, device=device)[1:-1]
    if hi_overlap > 0:
        w[n - hi_overlap :] = torch.minimum(
            w[n - hi_overlap :], torch.linspace(1, 0, hi_overlap + 2, dtype=dtype, device=device)[1:-1]
        )
    return w


def _tiled(fn: Callable[[Tensor], Tensor], x: Tensor, tile: int, overlap: int, quantum: int, out_scale: float | None = None) -> Tensor:
    """Run `fn` on overlapping spatial tiles of x (B, C, T, H, W) and blend them linearly.

    `quantum`: tile origins are multiples of it in x; output size = input size * scale, where
    scale is inferred from the first tile (or `out_scale`).
    """
    h, w = x.shape[-2:]
    tile = max(quantum, tile // quantum * quantum)
    ys, xs = _tile_starts(h, tile, overlap, quantum), _tile_starts(w, tile, overlap, quantum)
    if len(ys) == 1 and len(xs) == 1:
        return fn(x)
    out: Tensor | None = None
    weight: Tensor | None = None
    for y0 in ys:
        for x0 in xs:
            piece = fn(x[..., y0 : y0 + tile, x0 : x0 + tile])
            scale = out_scale or piece.shape[-1] / min(tile, w)
            if out is None:
                out = piece.new_zeros(*piece.shape[:3], int(h * scale), int(w * scale))
                weight = piece.new_zeros(int(h * scale), int(w * scale))
            assert out is not None and weight is not None
            ph, pw = piece.shape[-2:]
            oy, ox = int(y0 * scale), int(x0 * scale)
            ov = int(overlap * scale)
            wy = _ramp(ph, ov if y0 > 0 else 0, ov if y0 + tile < h else 0, piece.dtype, piece.device)
            wx = _ramp(pw, ov if x0 > 0 else 0, ov if x0 + tile < w else 0, piece.dtype, piece.device)
            wt = wy[:, None] * wx[None, :]
            out[..., oy : oy + ph, ox : ox + pw] += piece * wt
            weight[oy : oy + ph, ox : ox + pw] += wt
    assert out is not None and weight is not None
    return out / weight


__all__ = ["CausalConv3d", "Decoder3d", "Encoder3d", "WanVAE"]
