"""The view-packed latent layout (views folded into latent time): round trips and masks."""

from __future__ import annotations

import pytest
import torch

from avsim.models.layout import (
    first_frames_mask,
    frames_per_view,
    pack_views,
    place_first_frames,
    repeat_per_view,
    unpack_views,
)


def _views(v: int = 3, t: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 16, t, 3, 5, generator=g) for _ in range(v)]


def test_pack_unpack_round_trip():
    views = _views()
    packed = pack_views(views)
    assert packed.shape == (2, 16, 12, 3, 5) and frames_per_view(packed, 3) == 4
    # view v owns frames [v*T, (v+1)*T)
    assert torch.equal(packed[:, :, 4:8], views[1])
    back = unpack_views(packed, 3)
    assert len(back) == 3 and all(torch.equal(a, b) for a, b in zip(back, views, strict=True))
    assert torch.equal(pack_views(unpack_views(packed, 3)), packed)


def test_shape_checks():
    with pytest.raises(ValueError, match="do not split"):
        unpack_views(torch.zeros(1, 16, 7, 2, 2), 3)
    with pytest.raises(ValueError, match="packed"):
        frames_per_view(torch.zeros(16, 6, 2, 2), 3)
    with pytest.raises(ValueError, match="equal"):
        pack_views([torch.zeros(1, 16, 2, 2, 2), torch.zeros(1, 16, 3, 2, 2)])
    with pytest.raises(ValueError, match="at least one"):
        pack_views([])
    with pytest.raises(ValueError, match="exceed"):
        place_first_frames(torch.zeros(1, 16, 6, 2, 2), 2, 2)


def test_first_frames_mask_and_placement_match_hand_indexing():
    v, t = 3, 4
    mask = first_frames_mask(torch.tensor([0, 1, 3]), v, t)
    assert mask.shape == (3, 1, v * t, 1, 1) and mask.dtype == torch.float32
    for b, k in enumerate((0, 1, 3)):
        want = torch.zeros(v * t)
        for view in range(v):
            want[view * t : view * t + k] = 1.0
        assert torch.equal(mask[b, 0, :, 0, 0], want)
    first = pack_views([x[:, :, :2] for x in _views(v, t)])
    placed = place_first_frames(first, v, t)
    want = torch.zeros(2, 16, v * t, 3, 5)
    for view in range(v):
        want[:, :, view * t : view * t + 2] = first[:, :, view * 2 : (view + 1) * 2]
    assert torch.equal(placed, want)


def test_repeat_per_view_follows_the_packed_order():
    assert torch.equal(repeat_per_view(torch.arange(3), 2), torch.tensor([0, 0, 1, 1, 2, 2]))
