"""Torch raster backend: fragments generated per bounding box and resolved with a scatter-min on
the packed 64-bit (key, order); runs batched over many images on any device (`avsim.render.raster.draw`
dispatches to it); the edge-adaptive 4x MSAA is the twin of `avsim.render.raster.aa` (same edge
pixels, sub-samples, shading and resolve).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from avsim.core.typing import NDArrayByte, NDArrayFloat32
from avsim.render import style
from avsim.render.raster.aa import SAMPLES_XY_PX
from avsim.render.raster.kernels import INV_MAX_DEPTH, KEY_OFFSET, PARAM_EPS
from avsim.render.raster.primitives import PIXEL_CENTRE_OFFSET, Primitives


def _bbox_fragments(torch: Any, boxes: Any, max_fragments: int) -> Iterator[tuple[Any, Any, Any]]:
    """Yield (prim index, y, x) tensors for all pixels of the inclusive boxes (P, 4), in chunks."""
    widths = (boxes[:, 2] - boxes[:, 0] + 1).clamp(min=0)
    heights = (boxes[:, 3] - boxes[:, 1] + 1).clamp(min=0)
    counts = widths * heights
    start = 0
    n = len(boxes)
    while start < n:
        csum = torch.cumsum(counts[start:], 0)
        stop = start + max(1, int(torch.searchsorted(csum, torch.tensor(max_fragments, device=csum.device)).item()))
        stop = min(stop, n)
        c = counts[start:stop]
        total = int(c.sum().item())
        if total:
            prim = torch.repeat_interleave(torch.arange(start, stop, device=boxes.device), c)
            first = torch.cumsum(c, 0) - c
            local = torch.arange(total, device=boxes.device) - torch.repeat_interleave(first, c)
            wid = widths[prim]
            yield prim, boxes[prim, 1] + local // wid, boxes[prim, 0] + local % wid
        start = stop


def _capsule_boxes(torch: Any, xy: Any, radius: Any, w: int, h: int) -> Any:
    c = PIXEL_CENTRE_OFFSET
    lo_x = torch.floor(torch.minimum(xy[:, 0], xy[:, 2]) - radius - c).clamp(min=0)
    lo_y = torch.floor(torch.minimum(xy[:, 1], xy[:, 3]) - radius - c).clamp(min=0)
    hi_x = torch.ceil(torch.maximum(xy[:, 0], xy[:, 2]) + radius - c).clamp(max=w - 1)
    hi_y = torch.ceil(torch.maximum(xy[:, 1], xy[:, 3]) + radius - c).clamp(max=h - 1)
    return torch.stack([lo_x, lo_y, hi_x, hi_y], -1).long()


def _pack_keys(torch: Any, key32: Any, order: Any) -> Any:
    # key32 > 0: its IEEE bits are monotone as int32; the order (< 2^31) breaks ties
    bits = key32.view(torch.int32).to(torch.int64)
    return (bits << 32) | order


class _TorchTarget:
    """The z-buffer (packed (key, order) per pixel) and colours of a batch of B images on one device."""

    def __init__(self, torch: Any, n_images: int, n_pix: int, device: Any) -> None:
        self.torch = torch
        self.best = torch.full((n_images * n_pix,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=device)
        self.colour = torch.zeros((n_images * n_pix, 3), dtype=torch.uint8, device=device)

    def resolve(self, flat_pix: Any, depth: Any, zscale: Any, zbias: Any, order: Any, rgb: Any) -> None:
        """Scatter-min fragments (F,) at flat pixel indices; the winners write their faded colour (F, 3)."""
        torch = self.torch
        key32 = (zscale * depth + zbias + KEY_OFFSET).to(torch.float32)
        packed = _pack_keys(torch, key32, order)
        self.best.scatter_reduce_(0, flat_pix, packed, reduce="amin")
        win = self.best[flat_pix] == packed
        f = (1.0 - depth * INV_MAX_DEPTH).clamp(min=0.0)
        col = torch.floor(rgb * f[:, None] + 0.5).to(torch.uint8)
        self.colour[flat_pix[win]] = col[win]


def _torch_capsules(torch: Any, target: _TorchTarget, prims: Primitives, base: int, dev: Any, max_fragments: int) -> None:
    f64 = torch.float64
    w, h = prims.width_px, prims.height_px
    caps = prims.capsules
    xy, inv, rad, rgb, zs, zb = (torch.as_tensor(a, device=dev, dtype=f64) for a in caps.arrays())
    order = torch.as_tensor(caps.order, device=dev, dtype=torch.int64)
    boxes = _capsule_boxes(torch, xy, rad, w, h)
    for s, y, x in _bbox_fragments(torch, boxes, max_fragments):
        px, py = x.to(f64) + PIXEL_CENTRE_OFFSET, y.to(f64) + PIXEL_CENTRE_OFFSET
        ax, ay, bx, by = xy[s, 0], xy[s, 1], xy[s, 2], xy[s, 3]
        dx, dy = bx - ax, by - ay
        l2 = dx * dx + dy * dy
        t = torch.where(l2 > 0, ((px - ax) * dx + (py - ay) * dy) / torch.where(l2 > 0, l2, 1.0), 0.0)
        t = t.clamp(0.0, 1.0)
        qx, qy = ax + t * dx - px, ay + t * dy - py
        inside = qx * qx + qy * qy <= rad[s] * rad[s]
        s, y, x, t = s[inside], y[inside], x[inside], t[inside]
        i0, i1 = inv[s, 0], inv[s, 1]
        depth = 1.0 / (i0 + t * (i1 - i0))
        target.resolve(base + y * w + x, depth, zs[s], zb[s], order[s], rgb[s])


def _torch_planars(torch: Any, target: _TorchTarget, prims: Primitives, rays: Any, base: int, dev: Any, max_fragments: int) -> None:
    f64 = torch.float64
    w = prims.width_px
    pls = prims.planars
    plane = torch.as_tensor(pls.plane_params(), device=dev, dtype=f64)
    is_tri = torch.as_tensor(pls.is_tri, device=dev, dtype=torch.bool)
    prgb = torch.as_tensor(pls.rgb, device=dev, dtype=f64)
    zs = torch.as_tensor(pls.zscale, device=dev, dtype=f64)
    zb = torch.as_tensor(pls.zbias, device=dev, dtype=f64)
    order = torch.as_tensor(pls.order, device=dev, dtype=torch.int64)
    boxes = torch.as_tensor(pls.bbox, device=dev, dtype=torch.int64)
    for p, y, x in _bbox_fragments(torch, boxes, max_fragments):
        rx, ry = rays[y, x, 0], rays[y, x, 1]
        q = plane[p]
        den = q[:, 0] * rx + q[:, 1] * ry + q[:, 2]
        depth = q[:, 3] / torch.where(den != 0, den, 1.0)
        ok = (den != 0) & (depth > style.NEAR_M) & (depth <= style.MAX_DEPTH_M)
        a = depth * (q[:, 4] * rx + q[:, 5] * ry + q[:, 6]) - q[:, 7]
        bb = depth * (q[:, 8] * rx + q[:, 9] * ry + q[:, 10]) - q[:, 11]
        tri = is_tri[p]
        ok &= (a >= -PARAM_EPS) & (bb >= -PARAM_EPS)
        ok &= torch.where(tri, a + bb <= 1.0 + PARAM_EPS, (a <= 1.0 + PARAM_EPS) & (bb <= 1.0 + PARAM_EPS))
        p, y, x, depth, a, bb, tri = p[ok], y[ok], x[ok], depth[ok], a[ok], bb[ok], tri[ok]
        a, bb = a.clamp(0.0, 1.0), bb.clamp(0.0, 1.0)
        c = prgb[p]
        w0, w1, w2, w3 = (1 - a) * (1 - bb), a * (1 - bb), a * bb, (1 - a) * bb
        quad = w0[:, None] * c[:, 0] + w1[:, None] * c[:, 1] + w2[:, None] * c[:, 2] + w3[:, None] * c[:, 3]
        rgb = torch.where(tri[:, None], c[:, 0], quad)
        target.resolve(base + y * w + x, depth, zs[p], zb[p], order[p], rgb)


def rasterize_torch(
    prims_batch: list[Primitives],
    rays_batch: Sequence[NDArrayFloat32],
    device: str | None = None,
    max_fragments: int = 1 << 21,
    antialias: bool = False,
) -> NDArrayByte:
    """Rasterise a batch of images with torch (any device).

    All images must share one size. Fragments are generated per primitive bounding box in
    chunks of at most `max_fragments` and resolved by a deterministic scatter-min on the packed
    (float32 key, draw order) pair, so the result does not depend on the device or chunking.

    Args:
        prims_batch: B primitive sets, one per image.
        rays_batch: B ray maps (H, W, 2) float32 (`ray_map`).
        device: torch device (default: cuda when available, else cpu).
        max_fragments: fragments generated at a time.
        antialias: 4x MSAA on edge pixels, as the numba backend (`avsim.render.raster.aa`).

    Returns:
        (B, H, W, 3) uint8 RGB.
    """
    import torch

    if not prims_batch:
        raise ValueError("empty batch")
    h, w = prims_batch[0].height_px, prims_batch[0].width_px
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    n_pix = h * w
    target = _TorchTarget(torch, len(prims_batch), n_pix, dev)
    rays_all = []
    for b, (prims, rays_np) in enumerate(zip(prims_batch, rays_batch)):
        if (prims.height_px, prims.width_px) != (h, w):
            raise ValueError("all images of a batch must have the same size")
        base = b * n_pix
        rays = torch.as_tensor(np.asarray(rays_np), device=dev).to(torch.float64)
        rays_all.append(rays)
        if prims.n_capsules:
            _torch_capsules(torch, target, prims, base, dev, max_fragments)
        if prims.n_planars:
            _torch_planars(torch, target, prims, rays, base, dev, max_fragments)
    if antialias:
        _torch_antialias(torch, target, prims_batch, torch.stack(rays_all))
    out: NDArrayByte = target.colour.reshape(len(prims_batch), h, w, 3).cpu().numpy()
    return out


# ---- edge-adaptive 4x MSAA (the twin of avsim.render.raster.aa) --------------------------------
def _faded(torch: Any, rgb: Any, depth: Any) -> Any:
    """(F, 3) uint8 colour rgb (F, 3) faded at depth (F,), rounded as the centre pass."""
    f = (1.0 - depth * INV_MAX_DEPTH).clamp(min=0.0)
    return torch.floor(rgb * f[:, None] + 0.5).to(torch.uint8)


def _winner_codes(torch: Any, best: Any, prims: Primitives) -> Any:
    """(N,) int64 code (capsule s, or n_capsules + planar p) of the fragment that won each pixel, -1 none."""
    orders = torch.as_tensor(np.concatenate([prims.capsules.order, prims.planars.order]), device=best.device, dtype=torch.int64)
    sorted_orders, codes = torch.sort(orders)
    won = best != torch.iinfo(torch.int64).max
    at = torch.searchsorted(sorted_orders, best & 0xFFFFFFFF).clamp(max=max(len(orders) - 1, 0))
    return torch.where(won, codes[at] if len(orders) else -1, -1)


def _candidates(torch: Any, win: Any) -> tuple[Any, Any, Any]:
    """Edge pixels of one image (win (H, W)): rows y, columns x (E,) and candidate codes (E, 5), -1 unused."""
    h, w = win.shape
    pad = torch.nn.functional.pad(win[None, None].to(torch.float64), (1, 1, 1, 1), value=float("nan"))[0, 0]
    around = [pad[1:-1, 1:-1], pad[1:-1, :-2], pad[1:-1, 2:], pad[:-2, 1:-1], pad[2:, 1:-1]]  # self, left, right, up, down
    centre = around[0]
    edge = torch.zeros((h, w), dtype=torch.bool, device=win.device)
    for n in around[1:]:
        edge |= ~torch.isnan(n) & (n != centre)
    y, x = torch.nonzero(edge, as_tuple=True)
    cand = torch.stack([torch.nan_to_num(n[y, x], nan=-1.0) for n in around], 1).to(torch.int64)
    for k in range(1, 5):  # keep the first of equal codes
        dup = (cand[:, :k] == cand[:, k : k + 1]).any(1)
        cand[:, k] = torch.where(dup, -1, cand[:, k])
    return y, x, cand


def _torch_antialias(torch: Any, target: _TorchTarget, prims_batch: list[Primitives], rays: Any) -> None:
    """Re-resolve the edge pixels of every image of the batch from 4 sub-samples (rays (B, H, W, 2) float64)."""
    n_img, h, w, _ = rays.shape
    none = torch.iinfo(torch.int64).max
    for i, prims in enumerate(prims_batch):
        base = i * h * w
        win = _winner_codes(torch, target.best[base : base + h * w], prims).view(h, w)
        y, x, cand = _candidates(torch, win)
        if not len(y):
            continue
        keys = torch.full((len(y), 5, len(SAMPLES_XY_PX)), none, dtype=torch.int64, device=rays.device)
        cols = torch.zeros((len(y), 5, 3), dtype=torch.uint8, device=rays.device)
        n_caps = prims.n_capsules
        for k in range(5):
            code = cand[:, k]
            rows = torch.nonzero((code >= 0) & (code < n_caps)).squeeze(1)
            if len(rows):
                keys[rows, k], cols[rows, k] = _torch_capsule_eval(torch, prims, code[rows], y[rows], x[rows])
            rows = torch.nonzero(code >= n_caps).squeeze(1)
            if len(rows):
                keys[rows, k], cols[rows, k] = _torch_planar_eval(torch, prims, code[rows] - n_caps, y[rows], x[rows], rays[i])
        best = keys.argmin(1)  # (E, 4): the candidate each sub-sample shows (packed keys: ties to the lower order)
        covered = keys.gather(1, best[:, None]).squeeze(1) != none
        picked = cols.gather(1, best[..., None].expand(-1, -1, 3)).to(torch.int64) * covered[..., None]
        n = len(SAMPLES_XY_PX)
        colour = torch.div(picked.sum(1) + n // 2, n, rounding_mode="floor").to(torch.uint8)
        target.colour[base + y * w + x] = colour


def _capsule_t(torch: Any, px: Any, py: Any, ax: Any, ay: Any, dx: Any, dy: Any, l2: Any) -> Any:
    """Clamped parameter of the centre-line point nearest (px, py)."""
    return torch.where(l2 > 0, ((px - ax) * dx + (py - ay) * dy) / torch.where(l2 > 0, l2, 1.0), 0.0).clamp(0.0, 1.0)


def _torch_capsule_eval(torch: Any, prims: Primitives, s: Any, y: Any, x: Any) -> tuple[Any, Any]:
    """Capsules s (R,) at the sub-samples of pixels (y, x): packed keys (R, 4) (int64 max: not covered), colours (R, 3)."""
    f64, dev = torch.float64, s.device
    xy, inv, rad, rgb, zs, zb = (torch.as_tensor(a, device=dev, dtype=f64)[s] for a in prims.capsules.arrays())
    order = torch.as_tensor(prims.capsules.order, device=dev, dtype=torch.int64)[s]
    px, py = x.to(f64) + PIXEL_CENTRE_OFFSET, y.to(f64) + PIXEL_CENTRE_OFFSET
    ax, ay, bx, by = xy[:, 0], xy[:, 1], xy[:, 2], xy[:, 3]
    dx, dy = bx - ax, by - ay
    l2 = dx * dx + dy * dy
    i0, i1 = inv[:, 0], inv[:, 1]
    t = _capsule_t(torch, px, py, ax, ay, dx, dy, l2)
    depth = 1.0 / (i0 + t * (i1 - i0))  # one depth per fragment, coverage per sub-sample
    col = _faded(torch, rgb, depth)
    packed = _pack_keys(torch, (zs * depth + zb + KEY_OFFSET).to(torch.float32), order)
    inv_l2 = torch.where(l2 > 0, 1.0 / torch.where(l2 > 0, l2, 1.0), 0.0)
    keys = []
    for ox, oy in SAMPLES_XY_PX:
        sx, sy = px + ox, py + oy
        t = (((sx - ax) * dx + (sy - ay) * dy) * inv_l2).clamp(0.0, 1.0)
        qx, qy = ax + t * dx - sx, ay + t * dy - sy
        ok = qx * qx + qy * qy <= rad * rad
        keys.append(torch.where(ok, packed, torch.iinfo(torch.int64).max))
    return torch.stack(keys, 1), col


def _torch_plane_at(q: Any, rx: Any, ry: Any) -> tuple[Any, Any, Any, Any]:
    """(n . r, depth, a, b) along rays (rx, ry, 1) for plane rows q (F, 12) (`plane_params`)."""
    den = q[:, 0] * rx + q[:, 1] * ry + q[:, 2]
    depth = q[:, 3] / den.where(den != 0, 1.0)
    a = depth * (q[:, 4] * rx + q[:, 5] * ry + q[:, 6]) - q[:, 7]
    b = depth * (q[:, 8] * rx + q[:, 9] * ry + q[:, 10]) - q[:, 11]
    return den, depth, a, b


def _torch_plane_colour(torch: Any, c: Any, tri: Any, depth: Any, a: Any, b: Any) -> Any:
    """(F, 3) uint8 centre-pass colour of planars with corner colours c (F, 4, 3) at (depth, a, b)."""
    a, b = a.clamp(0.0, 1.0), b.clamp(0.0, 1.0)
    w0, w1, w2, w3 = (1 - a) * (1 - b), a * (1 - b), a * b, (1 - a) * b
    quad = w0[:, None] * c[:, 0] + w1[:, None] * c[:, 1] + w2[:, None] * c[:, 2] + w3[:, None] * c[:, 3]
    return _faded(torch, torch.where(tri[:, None], c[:, 0], quad), depth)


def _ray_jacobian(torch: Any, rays: Any, y: Any, x: Any) -> tuple[Any, Any, Any, Any]:
    """d(ray)/dx and d(ray)/dy at pixels (y, x) of rays (H, W, 2) by central (border: one-sided) differences."""
    h, w = rays.shape[0], rays.shape[1]
    xa, xb, ya, yb = (x - 1).clamp(min=0), (x + 1).clamp(max=w - 1), (y - 1).clamp(min=0), (y + 1).clamp(max=h - 1)
    sx = torch.where(xb > xa, 1.0 / (xb - xa).clamp(min=1).to(torch.float64), 0.0)
    sy = torch.where(yb > ya, 1.0 / (yb - ya).clamp(min=1).to(torch.float64), 0.0)
    jx, jy = (rays[y, xb] - rays[y, xa]) * sx[:, None], (rays[yb, x] - rays[ya, x]) * sy[:, None]
    return jx[:, 0], jx[:, 1], jy[:, 0], jy[:, 1]


def _torch_planar_eval(torch: Any, prims: Primitives, p: Any, y: Any, x: Any, rays: Any) -> tuple[Any, Any]:
    """Planars p (R,) at the sub-samples of pixels (y, x): packed keys (R, 4), colours (R, 3) uint8."""
    f64, dev = torch.float64, p.device
    near, far, eps = style.NEAR_M, style.MAX_DEPTH_M, PARAM_EPS
    pls = prims.planars
    q = torch.as_tensor(pls.plane_params(), device=dev, dtype=f64)[p]
    tri = torch.as_tensor(pls.is_tri, device=dev, dtype=torch.bool)[p]
    c = torch.as_tensor(pls.rgb, device=dev, dtype=f64)[p]
    zs, zb = (torch.as_tensor(a, device=dev, dtype=f64)[p] for a in (pls.zscale, pls.zbias))
    order = torch.as_tensor(pls.order, device=dev, dtype=torch.int64)[p]
    rx, ry = rays[y, x, 0], rays[y, x, 1]
    jx0, jx1, jy0, jy1 = _ray_jacobian(torch, rays, y, x)
    den, depth, a, b = _torch_plane_at(q, rx, ry)
    have = (den != 0) & (depth > near) & (depth <= far)
    col = _torch_plane_colour(torch, c, tri, depth, a, b)
    keys = []
    for ox, oy in SAMPLES_XY_PX:
        den, depth, a, b = _torch_plane_at(q, rx + ox * jx0 + oy * jy0, ry + ox * jx1 + oy * jy1)
        ok = (den != 0) & (depth > near) & (depth <= far) & (a >= -eps) & (b >= -eps)
        ok &= torch.where(tri, a + b <= 1.0 + eps, (a <= 1.0 + eps) & (b <= 1.0 + eps))
        fill = ok & ~have  # the centre ray misses the plane's range: shade at the first covered sub-sample
        col[fill] = _torch_plane_colour(torch, c[fill], tri[fill], depth[fill], a[fill], b[fill])
        have |= ok
        packed = _pack_keys(torch, (zs * depth + zb + KEY_OFFSET).to(torch.float32), order)
        keys.append(torch.where(ok, packed, torch.iinfo(torch.int64).max))
    return torch.stack(keys, 1), col
