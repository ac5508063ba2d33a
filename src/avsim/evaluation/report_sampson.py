"""The report's geometric consistency: TSE of every camera and CSE of every camera pair whose
fields of view overlap, per clip and side, with an interval over clips.

Each clip's rig comes from `videos/<clip>/calibration.json` (written by `avsim eval detect`:
every evaluated camera's model and mounting, `avsim-sampson-calibration`), else from the cosmos
rig when the views carry its camera names, else there is none (frames used as they are, TSE
only). With a rig, each view is rectified through its own camera model at the video's size
(cameras of a rig may differ in size and lens), and the CSE pairs are the pairs of cameras that
see a common part of the scene: at least `MIN_CSE_OVERLAP` of one camera's rectified view (as
directions, where its own image has pixels) is inside the other's image and its rectified view,
and their centres are at least `MIN_BASELINE_M` apart (two cameras at one place have no
epipolar geometry). `--cse-pairs A+B,...` names the pairs instead. F comes from RANSAC on the
rectified matches (`avsim eval sampson --calibration videos/<clip>/calibration.json` uses the
calibration's F), and a frame counts only with `MatchConfig.min_matches` matches: a side
whose frames never reach it has no value ("n/a"), not a near-zero one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.cameras import Camera
from avsim.core.progress import StepProgress, report_step
from avsim.evaluation.rectify import RectifyConfig
from avsim.evaluation.sampson import MIN_BASELINE_M, MIN_MATCHES_PER_FRAME

if TYPE_CHECKING:
    from avsim.evaluation.features import FeatureCache
    from avsim.evaluation.report_config import ReportConfig

CALIBRATION_JSON = "calibration.json"
MIN_CSE_OVERLAP = 0.1  # fraction of one camera's rectified view the other must see for a CSE pair
SINGLE_VIEW = "video"  # a clip that is one video (or frame folder), not named views
SAMPSON_PROTOCOL = 2  # 2: rig calibration, pairs by overlap, every camera's TSE, a match minimum (cache key)


@dataclass(frozen=True)
class ClipRig:
    """The cameras of one clip's views: models at each video's size and mountings (camera RDF -> ego FLU)."""

    cameras: dict[str, Camera | None]
    ego_SE3_camera: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = "none"
    digest: str = ""  # of the calibration file (cache key)


def _video_size(path: Path) -> tuple[int, int]:
    from avsim.evaluation.report_clips import view_info

    info = view_info(path)
    return info.width_px, info.height_px


def clip_rig(views: dict[str, Path]) -> ClipRig:
    """A clip's rig (module docstring) for its views.

    Args:
        views: view name -> video (`videos/<clip>/<camera>.mp4`, or {"video": path}).

    Returns:
        The rig; views it does not model get None (no rectification, no CSE).
    """
    if SINGLE_VIEW in views or not views:
        return ClipRig({v: None for v in views})
    folder = next(iter(views.values())).parent
    if (folder / CALIBRATION_JSON).is_file():
        from avsim.evaluation.calibration import load_calibration_json

        cal = load_calibration_json(folder / CALIBRATION_JSON)
        models = {v: cal.camera(v, *_video_size(p), option="calibration.json") if v in cal.cameras else None for v, p in views.items()}
        digest = hashlib.sha256((folder / CALIBRATION_JSON).read_bytes()).hexdigest()
        return ClipRig(models, {v: m for v, m in cal.ego_SE3_camera.items() if v in views}, str(folder / CALIBRATION_JSON), digest)
    from avsim.core.rig import cosmos_rig

    known = [v for v in views if v in cosmos_rig(1280, 720).names]
    if not known:
        return ClipRig({v: None for v in views})
    cams: dict[str, Camera | None] = {}
    for v, p in views.items():
        cams[v] = cosmos_rig(*_video_size(p)).camera(v) if v in known else None
    mounts = {v: np.asarray(cosmos_rig(1280, 720).extrinsic(v).as_matrix(), np.float64) for v in known}
    return ClipRig(cams, mounts, "cosmos rig (camera names)", "cosmos")


def _rect_rays(rect: RectifyConfig, step_px: int = 20) -> np.ndarray:
    """(N, 3) rays of a grid over the rectified pinhole's image (camera frame, z = 1)."""
    K = rect.K
    us, vs = np.meshgrid(np.arange(step_px / 2, rect.width_px, step_px), np.arange(step_px / 2, rect.height_px, step_px))
    return np.stack([(us - K[0, 2]) / K[0, 0], (vs - K[1, 2]) / K[1, 1], np.ones_like(us)], -1).reshape(-1, 3)


def _sees(camera: Camera, rays: np.ndarray, rect: RectifyConfig) -> np.ndarray:
    """Which camera-frame directions the camera's image and its rectified view both contain."""
    K = rect.K
    z = rays[:, 2]
    safe = np.where(z > 1e-6, z, 1.0)
    u, v = K[0, 0] * rays[:, 0] / safe + K[0, 2], K[1, 1] * rays[:, 1] / safe + K[1, 2]
    in_rect = (z > 1e-6) & (u >= 0) & (u < rect.width_px) & (v >= 0) & (v < rect.height_px)
    _, depth, in_image = camera.project(rays)
    return in_rect & (depth > 0) & in_image


def view_overlap(rig: ClipRig, a: str, b: str, rect: RectifyConfig | None = None) -> float:
    """The larger of the two fractions: of a's rectified view (where a's image has pixels) that b sees, and of b's that a sees.

    Args:
        rig: the clip's rig (both cameras modelled and mounted).
        a, b: the cameras.
        rect: the rectified pinhole (default `RectifyConfig()`).

    Returns:
        The fraction in [0, 1] (directions only: the scene far from the rig).
    """
    rect = rect or RectifyConfig()
    rays = _rect_rays(rect)
    out = 0.0
    for x, y in ((a, b), (b, a)):
        cx, cy = rig.cameras[x], rig.cameras[y]
        assert cx is not None and cy is not None
        mine = _sees(cx, rays, rect)
        if not mine.any():
            continue
        y_R_x = rig.ego_SE3_camera[y][:3, :3].T @ rig.ego_SE3_camera[x][:3, :3]
        theirs = _sees(cy, rays[mine] @ y_R_x.T, rect)
        out = max(out, float(theirs.mean()))
    return out


def cse_pairs(rig: ClipRig, named: tuple[tuple[str, str], ...] | None = None, rect: RectifyConfig | None = None) -> list[tuple[str, str]]:
    """The clip's CSE pairs: `named` where the clip has both views, else every overlapping pair (module docstring).

    Args:
        rig: the clip's rig.
        named: `--cse-pairs` (None: chosen from the calibration).
        rect: the rectified pinhole.

    Returns:
        (a, b) pairs in the order of the views.
    """
    views = list(rig.cameras)
    if named is not None:
        return [(a, b) for a, b in named if a in rig.cameras and b in rig.cameras]
    modelled = [v for v in views if rig.cameras[v] is not None and v in rig.ego_SE3_camera]
    out = []
    for i, a in enumerate(modelled):
        for b in modelled[i + 1 :]:
            baseline = float(np.linalg.norm(rig.ego_SE3_camera[a][:3, 3] - rig.ego_SE3_camera[b][:3, 3]))
            if baseline >= MIN_BASELINE_M and view_overlap(rig, a, b, rect) >= MIN_CSE_OVERLAP:
                out.append((a, b))
    return out


def _clip_sampson(views: dict[str, Path], cfg: ReportConfig, rig: ClipRig, pairs: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """TSE per view and CSE per pair of one clip (per-video summaries)."""
    from avsim.evaluation.sampson import cross_view_sampson, temporal_sampson, video_summary
    from avsim.evaluation.video_frames import read_clip

    frames = {v: read_clip(p, cfg.max_frames) for v, p in views.items()}
    tse = {v: video_summary(temporal_sampson(f, rig.cameras.get(v))) for v, f in frames.items()}
    cse = {}
    for a, b in pairs:
        n = min(len(frames[a]), len(frames[b]))
        errs, _ = cross_view_sampson(frames[a][:n], frames[b][:n], rig.cameras.get(a), rig.cameras.get(b))
        cse[f"{a}+{b}"] = video_summary(errs)
    return {"tse": tse, "cse": cse}


def sampson_side(clips: dict[str, dict[str, Path]], cfg: ReportConfig, progress: StepProgress | None = None,
                 step: str = "Sampson", cache: FeatureCache | None = None) -> dict[str, Any]:  # fmt: skip
    """Per-video TSE and CSE (medians of per-frame medians) for one side, keyed "<clip>/<view>" (CSE: "<clip>/<a>+<b>");
    each clip's result is cached (keyed by its views' bytes, its rig and the settings); progress per clip.

    Returns:
        {"tse": {...}, "cse": {...}, "rigs": {clip: {"source", "pairs"}}}.
    """
    from avsim.evaluation.features import FeatureCache, cache_key
    from avsim.evaluation.video_frames import content_hash

    cache = cache or FeatureCache(None)
    tse, cse, rigs = {}, {}, {}
    for i, (clip, views) in enumerate(clips.items()):
        rig = clip_rig(views)
        pairs = cse_pairs(rig, cfg.cse_pairs)
        rigs[clip] = {"source": rig.source, "pairs": [f"{a}+{b}" for a, b in pairs]}
        key = ""
        if cache.folder is not None:
            digest = "".join(content_hash(p) for _, p in sorted(views.items()))
            key = cache_key(hashlib.sha256(digest.encode()).hexdigest(), {
                "kind": "sampson", "max_frames": cfg.max_frames, "views": sorted(views), "rig": rig.digest,
                "pairs": rigs[clip]["pairs"], "min_matches": MIN_MATCHES_PER_FRAME, "protocol": SAMPSON_PROTOCOL})  # fmt: skip
        found = cache.get_json(key) if key else None
        per = found if found is not None else _clip_sampson(views, cfg, rig, pairs)
        if key and found is None:
            cache.put_json(key, per)
        tse.update({f"{clip}/{v}": d for v, d in per["tse"].items()})
        cse.update({f"{clip}/{v}": d for v, d in per["cse"].items()})
        report_step(progress, step, i + 1, len(clips))
    return {"tse": tse, "cse": cse, "rigs": rigs}


SAMPSON_NO_DATA = {
    "tse": "no clip has a video",
    "cse": "no clip has two cameras whose fields of view overlap (their rig: videos/<clip>/calibration.json as "
           "`avsim eval detect` writes it, or the cosmos rig's camera names), and --cse-pairs named none",
}  # fmt: skip


def _no_value(kind: str, n: int) -> str:
    return (f"n/a: no frame of the {n} video{'s' if n != 1 else ''} had {MIN_MATCHES_PER_FRAME} or more matches "
            f"{'between two frames' if kind == 'tse' else 'between the two views'} and an F (a handful of matches "
            "fits any F: such frames say nothing)")  # fmt: skip


def sampson_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], cfg: ReportConfig,
                    progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """TSE and CSE per side: per-video medians, their mean with a clip bootstrap; a metric
    without videos, or without a frame that counts, says why (`skipped`)."""
    from avsim.evaluation.bootstrap import bootstrap_grouped_mean
    from avsim.evaluation.features import FeatureCache
    from avsim.evaluation.sampson import dataset_summary

    cache = FeatureCache(cfg.cache_dir)
    sides = {side: sampson_side(clips, cfg, progress, f"Sampson {side}", cache) for side, clips in (("real", real), ("generated", gen))}
    out: dict[str, Any] = {
        "per_video": {side: {k: d[k] for k in ("tse", "cse")} for side, d in sides.items()},
        "rigs": {side: d["rigs"] for side, d in sides.items()},
        "f_source": "RANSAC on frames rectified through each camera's own model (its clip's calibration.json, or the "
                    "cosmos rig by camera name)",
        "min_matches_per_frame": MIN_MATCHES_PER_FRAME,
        "resampling": {"unit": "clip", "description": "all views (TSE) and view pairs (CSE) of a clip are drawn together"},
    }  # fmt: skip
    for kind in ("tse", "cse"):
        for side, d in sides.items():
            meds = np.array([v["median_of_frame_medians_px"] for v in d[kind].values()], dtype=np.float64)
            if meds.size == 0:
                out[f"{kind}/{side}"] = {"skipped": SAMPSON_NO_DATA[kind]}
                continue
            if not np.isfinite(meds).any():
                out[f"{kind}/{side}"] = {"skipped": _no_value(kind, int(meds.size))}
                continue
            owner = np.array([k.split("/", 1)[0] for k in d[kind]])
            out[f"{kind}/{side}"] = {
                **dataset_summary(meds),
                "mean_of_video_medians": bootstrap_grouped_mean(meds, owner, "clip", cfg.n_resamples, cfg.level, cfg.seed).as_dict(),
            }
    out["cache"] = cache.stats()
    return out


def first_view(views: dict[str, Path]) -> Path | None:
    """The view RNDS scores: the single video, else the cosmos front wide / cross left / cross right view, else the
    first camera in name order."""
    from avsim.evaluation.sampson import TSE_VIEWS

    for v in (SINGLE_VIEW, *TSE_VIEWS, *sorted(views)):
        if v in views:
            return views[v]
    return None
