"""Typed configurations of the multi-view Cosmos-Transfer2.5 DiT and the Wan2.1 VAE.

A model's constructor takes exactly one of these dataclasses, so the config *is* the saved
constructor signature (`dataclasses.asdict` round-trips through JSON with `from_dict`).

Factories:
- `transfer25_2b_multiview()`: the released 2B `auto/multiview` checkpoint (7 views).
- `transfer25_2b_single_view()`: the same network without view channels, one text chunk.
- `debug()`: a tiny network and VAE with the same code paths, for CPU tests in seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from avsim.core.rig import COSMOS_VIEW_NAMES
from avsim.models.defaults import GENERATION

# Model index order of the seven views (view-embedding index 0..6): the render spec's names.
MULTIVIEW_CAMERAS: tuple[str, ...] = COSMOS_VIEW_NAMES

# Per-channel latent statistics of the Wan2.1 VAE: z = (mu - mean) / std.
WAN21_LATENT_MEAN: tuple[float, ...] = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)  # fmt: skip
WAN21_LATENT_STD: tuple[float, ...] = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)  # fmt: skip


@dataclass(frozen=True)
class DiTConfig:
    """Hyper-parameters of the DiT (base network) and its control branch.

    `num_view_embeddings == 0` means a single-view network (no view-embedding channels).
    `control_block_ids` empty means no control branch (a plain base network).
    """

    model_channels: int = 2048
    num_blocks: int = 28
    num_heads: int = 16
    mlp_ratio: float = 4.0
    adaln_lora_dim: int = 256
    crossattn_emb_channels: int = 1024
    crossattn_proj_in_channels: int = 100352
    text_tokens_per_view: int = 512
    latent_channels: int = 16
    patch_spatial: int = 2
    patch_temporal: int = 1
    num_view_embeddings: int = 7
    view_condition_dim: int = 7
    concat_padding_mask: bool = True
    timestep_scale: float = 0.001
    rope_h_extrapolation_ratio: float = 3.0
    rope_w_extrapolation_ratio: float = 3.0
    rope_t_extrapolation_ratio: float = 1.0 / 3.0
    rope_theta: float = 10000.0
    # control branch
    control_block_ids: tuple[int, ...] = (0, 7, 14, 21)
    control_latent_channels: int = 184
    hint_block_layers: int = 7
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.model_channels % self.num_heads:
            raise ValueError("model_channels must be divisible by num_heads")
        if any(not 0 <= i < self.num_blocks for i in self.control_block_ids):
            raise ValueError(f"control_block_ids {self.control_block_ids} outside 0..{self.num_blocks - 1}")
        if list(self.control_block_ids) != sorted(set(self.control_block_ids)):
            raise ValueError("control_block_ids must be strictly increasing")
        if self.control_latent_channels < self.latent_channels:
            raise ValueError("control_latent_channels must be >= latent_channels")

    @property
    def head_dim(self) -> int:
        return self.model_channels // self.num_heads

    @property
    def mlp_hidden(self) -> int:
        return int(self.model_channels * self.mlp_ratio)

    @property
    def is_multiview(self) -> bool:
        return self.num_view_embeddings > 0

    @property
    def extra_channels(self) -> int:
        """Channels appended to each latent pixel: condition mask, padding mask, view embedding."""
        view = self.view_condition_dim if self.is_multiview else 0
        return 1 + int(self.concat_padding_mask) + view

    @property
    def patch_volume(self) -> int:
        return self.patch_spatial * self.patch_spatial * self.patch_temporal

    @property
    def x_embedder_in_features(self) -> int:
        return (self.latent_channels + self.extra_channels) * self.patch_volume

    @property
    def control_embedder_in_features(self) -> int:
        return (self.control_latent_channels + self.extra_channels) * self.patch_volume

    @property
    def num_control_blocks(self) -> int:
        return len(self.control_block_ids)


@dataclass(frozen=True)
class VAEConfig:
    """Wan2.1 causal video VAE (8x spatial, 4x causal temporal compression)."""

    dim: int = 96
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    num_res_blocks: int = 2
    temporal_downsample: tuple[bool, ...] = (False, True, True)
    dropout: float = 0.0
    latent_mean: tuple[float, ...] = WAN21_LATENT_MEAN
    latent_std: tuple[float, ...] = WAN21_LATENT_STD

    def __post_init__(self) -> None:
        if len(self.temporal_downsample) != len(self.dim_mult) - 1:
            raise ValueError("temporal_downsample needs len(dim_mult) - 1 entries")
        if len(self.latent_mean) != self.z_dim or len(self.latent_std) != self.z_dim:
            raise ValueError("latent_mean/latent_std need z_dim entries")

    @property
    def spatial_factor(self) -> int:
        return 2 ** (len(self.dim_mult) - 1)

    @property
    def temporal_factor(self) -> int:
        return 2 ** sum(self.temporal_downsample)


@dataclass(frozen=True)
class TransferConfig:
    """Everything a generation run needs to build its models and lay out its inputs."""

    name: str
    dit: DiTConfig
    vae: VAEConfig
    cameras: tuple[str, ...]
    height_px: int = 720
    width_px: int = 1280
    frames_per_chunk: int = 29
    model_fps: float = 10.0
    default_steps: int = GENERATION.steps
    default_guidance: float = GENERATION.guidance
    sigma_shift: float = GENERATION.shift

    def __post_init__(self) -> None:
        q = self.vae.spatial_factor * self.dit.patch_spatial
        if self.height_px % q or self.width_px % q:
            raise ValueError(f"frame size must be divisible by {q}")
        if (self.frames_per_chunk - 1) % self.vae.temporal_factor:
            raise ValueError("frames_per_chunk must be 1 + k * temporal_factor")
        if self.dit.is_multiview and len(self.cameras) > self.dit.num_view_embeddings:
            raise ValueError("more cameras than view embeddings")

    @property
    def latent_frames_per_chunk(self) -> int:
        return 1 + (self.frames_per_chunk - 1) // self.vae.temporal_factor

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TransferConfig:
        def tuples(d: dict[str, Any]) -> dict[str, Any]:
            return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}

        data = dict(data)
        return TransferConfig(
            **{k: v for k, v in tuples(data).items() if k not in ("dit", "vae")},
            dit=DiTConfig(**tuples(data["dit"])),
            vae=VAEConfig(**tuples(data["vae"])),
        )


def transfer25_2b_multiview() -> TransferConfig:
    """Cosmos-Transfer2.5-2B `auto/multiview`: 7 views x 29 frames at 720p, 10 fps."""
    return TransferConfig(
        name="transfer25_2b_multiview", dit=DiTConfig(), vae=VAEConfig(), cameras=MULTIVIEW_CAMERAS
    )


def transfer25_2b_single_view() -> TransferConfig:
    """General single-view Transfer2.5-2B layout: no view channels, one 512-token text chunk."""
    dit = DiTConfig(num_view_embeddings=0, view_condition_dim=0)
    return TransferConfig(
        name="transfer25_2b_single_view",
        dit=dit,
        vae=VAEConfig(),
        cameras=(MULTIVIEW_CAMERAS[0],),
    )


def debug() -> TransferConfig:
    """Tiny network and VAE (same code paths) for CPU smoke tests: 64x112 px, 5 frames/chunk."""
    dit = DiTConfig(
        model_channels=64,
        num_blocks=4,
        num_heads=2,
        adaln_lora_dim=16,
        crossattn_emb_channels=32,
        crossattn_proj_in_channels=48,
        text_tokens_per_view=8,
        control_block_ids=(0, 2),
        control_latent_channels=24,
        hint_block_layers=2,
    )
    vae = VAEConfig(dim=8, dim_mult=(1, 2, 2, 2))
    return TransferConfig(
        name="debug",
        dit=dit,
        vae=vae,
        cameras=MULTIVIEW_CAMERAS,
        height_px=64,
        width_px=112,
        frames_per_chunk=5,
        default_steps=4,
    )


CONFIGS = {
    "transfer25_2b_multiview": transfer25_2b_multiview,
    "transfer25_2b_single_view": transfer25_2b_single_view,
    "debug": debug,
}


def get_config(name: str) -> TransferConfig:
    """Look a named configuration up (`transfer25_2b_multiview`, `..._single_view`, `debug`)."""
    if name not in CONFIGS:
        raise KeyError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
    return CONFIGS[name]()


__all__ = [
    "CONFIGS",
    "MULTIVIEW_CAMERAS",
    "DiTConfig",
    "TransferConfig",
    "VAEConfig",
    "debug",
    "get_config",
    "transfer25_2b_multiview",
    "transfer25_2b_single_view",
]
