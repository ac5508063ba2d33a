"""Overlap check of the sample's recorded boxes (separating-axis test, with sub-step interpolation)."""

from __future__ import annotations

import itertools

import numpy as np


def box_polygons_xy(center_xy: np.ndarray, yaw_rad: np.ndarray, length_m: np.ndarray,
                    width_m: np.ndarray) -> np.ndarray:
    """Ground-plane corners (N, 4, 2) of oriented boxes, counter-clockwise."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    hl, hw = 0.5 * length_m, 0.5 * width_m
    local = np.stack([np.stack([hl, hw], -1), np.stack([-hl, hw], -1),
                      np.stack([-hl, -hw], -1), np.stack([hl, -hw], -1)], axis=1)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], axis=1)  # (N, 2, 2)
    return np.einsum("nij,nkj->nki", rot, local) + center_xy[:, None, :]


def boxes_overlap(corners_a: np.ndarray, corners_b: np.ndarray, clearance_m: float) -> np.ndarray:
    """Separating-axis test for pairs of oriented rectangles (P, 4, 2): True where they come
    closer than `clearance_m` along every candidate axis (i.e. intersect after inflation)."""
    def axes(c: np.ndarray) -> np.ndarray:
        e = np.stack([c[:, 1] - c[:, 0], c[:, 2] - c[:, 1]], axis=1)
        return e / np.linalg.norm(e, axis=-1, keepdims=True)

    all_axes = np.concatenate([axes(corners_a), axes(corners_b)], axis=1)  # (P, 4, 2)
    pa = np.einsum("pkd,pad->pak", corners_a, all_axes)
    pb = np.einsum("pkd,pad->pak", corners_b, all_axes)
    separated = (pa.max(-1) + clearance_m <= pb.min(-1)) | (pb.max(-1) + clearance_m <= pa.min(-1))
    return ~separated.any(axis=1)


def find_overlaps(agent: np.ndarray, time_s: np.ndarray, center_xy: np.ndarray,
                  yaw_rad: np.ndarray, size_lw: np.ndarray, clearance_m: float = 0.05,
                  upsample: int = 3) -> set[tuple[int, int]]:
    """Pairs (i < j) of agents whose boxes overlap at a sample time or in between.

    Rows sorted by (agent, time) at a uniform step; between consecutive samples of an agent
    the box is interpolated linearly at `upsample` sub-steps, as a renderer at a higher rate
    would see it.
    """
    same = agent[1:] == agent[:-1]
    ag, tm, xy, yw = [agent], [time_s], [center_xy], [yaw_rad]
    for k in range(1, upsample):
        alpha = k / upsample
        dyaw = np.angle(np.exp(1j * (yaw_rad[1:] - yaw_rad[:-1])))
        ag.append(agent[:-1][same])
        tm.append((time_s[:-1] + alpha * (time_s[1:] - time_s[:-1]))[same])
        xy.append((center_xy[:-1] + alpha * (center_xy[1:] - center_xy[:-1]))[same])
        yw.append((yaw_rad[:-1] + alpha * dyaw)[same])
    ag, tm, xy, yw = (np.concatenate(x) for x in (ag, tm, xy, yw))
    key = np.round(tm * 1000.0 * upsample).astype(np.int64)
    order = np.argsort(key, kind="stable")
    ag, key, xy, yw = ag[order], key[order], xy[order], yw[order]
    corners = box_polygons_xy(xy, yw, size_lw[ag, 0], size_lw[ag, 1])
    radius = 0.5 * np.hypot(size_lw[ag, 0], size_lw[ag, 1]) + clearance_m
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    found: set[tuple[int, int]] = set()
    for lo, hi in itertools.pairwise(bounds):
        i, j = np.triu_indices(hi - lo, k=1)
        i, j = i + lo, j + lo
        near = np.linalg.norm(xy[i] - xy[j], axis=1) < radius[i] + radius[j]
        i, j = i[near], j[near]
        if i.size == 0:
            continue
        hit = boxes_overlap(corners[i], corners[j], clearance_m)
        for a, b in zip(ag[i[hit]], ag[j[hit]]):
            found.add((int(min(a, b)), int(max(a, b))))
    return found
