"""Wan2.1 VAE: causality, chunk invariance, 1 + 4k shapes, per-view independence (small
channel widths, the real architecture and cached execution)."""

from __future__ import annotations

import pytest
import torch

from avsim.models.config import VAEConfig
from avsim.models.vae import WanVAE

SMALL = VAEConfig(dim=8, dim_mult=(1, 2, 2, 2))


@pytest.fixture(scope="module")
def vae() -> WanVAE:
    torch.manual_seed(0)
    model = WanVAE(SMALL).double().eval()
    with torch.no_grad():  # the released attention `proj` is not zero; make the attention act
        for p in model.parameters():
            if p.ndim == 4 and p.shape[-1] == 1:
                p.normal_(0, 0.2)
    return model


def _video(frames: int, h: int = 32, w: int = 40, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(1, 3, frames, h, w, generator=g, dtype=torch.float64) * 2 - 1


@pytest.mark.slow
def test_time_chunks_of_4_8_16_give_identical_latents(vae):
    x = _video(17, 16, 24)
    z4 = vae.encode(x, chunk_frames=4)
    for chunk in (8, 16):
        torch.testing.assert_close(vae.encode(x, chunk_frames=chunk), z4, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="multiple of 4"):
        vae.encode(x, chunk_frames=6)


@pytest.mark.slow
def test_encoder_is_causal(vae):
    x = _video(13, 16, 24)
    z = vae.encode(x)
    for frame in (1, 5, 12):
        x2 = x.clone()
        x2[:, :, frame] = -x2[:, :, frame]
        z2 = vae.encode(x2)
        first_changed = 1 + (frame - 1) // 4  # latent k covers pixel frames 4k-3 .. 4k
        assert torch.equal(z2[:, :, :first_changed], z[:, :, :first_changed]), frame
        assert (z2[:, :, first_changed] - z[:, :, first_changed]).abs().max() > 1e-6


@pytest.mark.slow
def test_decoder_is_causal(vae):
    z = torch.randn(1, 16, 4, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = vae.decode(z)
    z2 = z.clone()
    z2[:, :, 2] += 1.0
    y2 = vae.decode(z2)
    assert torch.equal(y2[:, :, :5], y[:, :, :5])  # latent 2 first shows in pixel frame 5
    assert (y2[:, :, 5:] - y[:, :, 5:]).abs().max() > 0


@pytest.mark.slow
@pytest.mark.parametrize("frames", [1, 5, 9])
def test_encode_decode_shapes_for_1_plus_4k_frames(vae, frames):
    x = _video(frames, 16, 24)
    z = vae.encode(x)
    assert z.shape == (1, 16, 1 + (frames - 1) // 4, 2, 3)
    y = vae.decode(z)
    assert y.shape == x.shape
    assert y.min() >= -1 and y.max() <= 1


def test_invalid_frame_counts_are_refused(vae):
    with pytest.raises(ValueError, match="1 \\+ 4k"):
        vae.encode(_video(8, 16, 16))
    with pytest.raises(ValueError, match="multiples of 8"):
        vae.encode(_video(5, 12, 16))


@pytest.mark.slow
def test_views_are_encoded_and_decoded_independently(vae):
    views = [_video(5, 16, 16, seed=s) for s in range(3)]
    joint = vae.encode_views(torch.cat(views, dim=2), num_views=3)
    for v, x in enumerate(views):
        assert torch.equal(joint[:, :, 2 * v : 2 * v + 2], vae.encode(x))
    changed = views.copy()
    changed[1] = -changed[1]
    joint2 = vae.encode_views(torch.cat(changed, dim=2), num_views=3)
    assert torch.equal(joint2[:, :, :2], joint[:, :, :2]) and torch.equal(joint2[:, :, 4:], joint[:, :, 4:])
    decoded = vae.decode_views(joint, num_views=3)
    for v in range(3):
        assert torch.equal(decoded[:, :, 5 * v : 5 * v + 5], vae.decode(joint[:, :, 2 * v : 2 * v + 2]))


def test_latent_normalisation_uses_the_spec_statistics(vae):
    x = _video(1, 16, 16)
    z = vae.encode(x)
    cache_free = vae.conv1(vae.encoder(x.clone())).chunk(2, dim=1)[0]  # no cache: single frame
    mean = torch.tensor(SMALL.latent_mean, dtype=torch.float64).view(1, -1, 1, 1, 1)
    std = torch.tensor(SMALL.latent_std, dtype=torch.float64).view(1, -1, 1, 1, 1)
    torch.testing.assert_close(z, (cache_free - mean) / std, rtol=0, atol=1e-12)
    assert SMALL.latent_mean[7] == 1.5508 and SMALL.latent_std[8] == 3.2687


@pytest.mark.slow
def test_spatial_tiling_is_close_to_untiled(vae):
    x = _video(1, 32, 48)
    z = vae.encode(x)
    zt = vae.encode(x, tile_px=24, tile_overlap_px=8)
    assert zt.shape == z.shape
    assert (zt - z).abs().mean() < 0.25 * z.abs().mean()
    y, yt = vae.decode(z), vae.decode(z, tile_latent=3, tile_overlap_latent=1)
    assert yt.shape == y.shape and (yt - y).abs().mean() < 0.25 * y.abs().mean() + 1e-3


# Golden values from diffusers 0.42.1 `AutoencoderKLWan` (an independent Wan2.1 implementation;
# not a dependency) with this test's weights mapped onto it: raw latent mean (before the
# per-channel normalisation) and the decoded video. Recorded once on CPU in float64.
GOLDEN_MU = [-0.14191795164513163, 0.1278749469496933, -0.07769937574252095, -0.13326057579725956,
             -0.1870483893405659, -0.08956823998490393, 0.07747035030998305, 0.21271645569414582,
             0.08761655961519012, 0.10459768736238553, 0.06697265002909511, 0.06220530314092239]
GOLDEN_MU_SUM = 4.122334330951512
GOLDEN_Y = [0.046584044735426225, 0.03103881921163966, 0.038096377974899134, 0.032722356387262674,
            0.047854584606370196, 0.0395260313142491, -0.11759576964958167, -0.12621650611352608,
            -0.1354151332038108, -0.1237096184269707, -0.16216601279554688, -0.11856570460379995,
            -0.019694580450707207, 0.003401626125915153, -0.00991734174223318, -0.03572862374075661,
            -0.0031814584709370843, -0.009369265771184593]
GOLDEN_Y_SUM = -192.50503428480883


@pytest.mark.slow
def test_matches_an_independent_wan21_implementation():
    torch.manual_seed(0)
    model = WanVAE(SMALL).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    g = torch.Generator().manual_seed(3)
    x = torch.rand(1, 3, 5, 16, 24, generator=g, dtype=torch.float64) * 2 - 1
    z = model.encode(x)
    mean = torch.tensor(SMALL.latent_mean, dtype=torch.float64).view(1, -1, 1, 1, 1)
    std = torch.tensor(SMALL.latent_std, dtype=torch.float64).view(1, -1, 1, 1, 1)
    mu = z * std + mean
    torch.testing.assert_close(mu.flatten()[::17], torch.tensor(GOLDEN_MU, dtype=torch.float64), rtol=0, atol=1e-12)
    assert mu.sum().item() == pytest.approx(GOLDEN_MU_SUM, abs=1e-10)
    y = model.decode(z)
    # the reference upsamples float64 through float32 (as the original does); we keep float64
    torch.testing.assert_close(y.flatten()[::331], torch.tensor(GOLDEN_Y, dtype=torch.float64), rtol=0, atol=1e-7)
    assert y.sum().item() == pytest.approx(GOLDEN_Y_SUM, abs=1e-5)
