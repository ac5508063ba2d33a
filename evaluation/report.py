"""The detection-gap report: real vs generated clips on every metric, with 95% intervals.

Input layout (each part optional; the report says which sections were skipped and why):

    REAL/ and GENERATED/
        detections.parquet | detections.json   the user's detector outputs (box table, or a
                                               nuScenes submission already in the ego frame)
        lanes.parquet | lanes/                 lane detector outputs (table or OpenLane JSON)
        videos/                                clips: <clip>.mp4, <clip>/ (frame folder), or
                                               <clip>/<camera_name>.mp4 (multi-view)
        chunk_scores.parquet                   RNDS inputs: columns clip, chunk, score
    GROUND_TRUTH/
        boxes.parquet, lanes.parquet           tables (see detections.py / lane_io.py), or
        <scenario folders>                     avsim scenarios (boxes and lanes derived)

Outputs: `report.json` (every number, interval, setting and weight source) and a
self-contained `report.html` (tables and matplotlib plots embedded as base64 PNG; no scripts,
no external resources). Same inputs and seed give the same bytes.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.evaluation.bootstrap import Interval, bootstrap_many, resample_counts
from avsim.evaluation.lanes import LaneSet, evaluate_lanes
from avsim.evaluation.let_ap import Boxes3D, LetConfig, evaluate_let

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"


@dataclass(frozen=True)
class ReportConfig:
    n_resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    let: LetConfig = field(default_factory=LetConfig)
    max_frames: int | None = 64  # per clip, for FID and Sampson (CPU cost)
    fvd_max_windows: int | None = 4  # 16-frame windows per clip
    video_metrics: bool = True
    inception_weights: str | None = None
    i3d_weights: str | None = None
    cache_dir: str | None = None
    rnds_scorer: str | None = None  # compute chunk scores from videos with this scorer
    rnds_chunk_frames: int = 16


# --------------------------------------------------------------------------- inputs


def _first_existing(folder: Path, names: tuple[str, ...]) -> Path | None:
    for n in names:
        if (folder / n).exists():
            return folder / n
    return None


def load_detections(folder: Path) -> Boxes3D | None:
    from avsim.evaluation.detections import read_box_table, read_nuscenes_submission

    p = _first_existing(folder, ("detections.parquet", "detections.csv", "detections.json"))
    if p is None:
        return None
    return read_nuscenes_submission(p) if p.suffix == ".json" else read_box_table(p)


def load_lanes(folder: Path, ground_truth: bool = False) -> LaneSet | None:
    from avsim.evaluation.lane_io import read_lane_table, read_openlane_json

    p = _first_existing(folder, ("lanes.parquet", "lanes.csv", "lanes"))
    if p is None:
        return None
    return read_openlane_json(p, ground_truth) if p.is_dir() else read_lane_table(p)


def load_ground_truth(folder: Path) -> tuple[Boxes3D | None, LaneSet | None, str]:
    """GT boxes and lanes from tables, or derived from avsim scenario folders."""
    from avsim.evaluation.detections import read_box_table

    boxes_p = _first_existing(folder, ("boxes.parquet", "boxes.csv"))
    boxes = read_box_table(boxes_p, require_score=False) if boxes_p else None
    lanes = load_lanes(folder, ground_truth=True) if _first_existing(folder, ("lanes.parquet", "lanes.csv", "lanes")) else None
    if boxes is not None or lanes is not None:
        return boxes, lanes, f"tables in {folder}"
    scen_dirs = sorted(d for d in ([folder] + [c for c in folder.iterdir() if c.is_dir()]) if (d / "scenario.json").is_file())
    if not scen_dirs:
        raise AvsimInputError(folder, "ground truth", "no boxes.parquet / lanes.parquet and no avsim scenario folders")
    from avsim.evaluation.detections import boxes_from_scenario
    from avsim.evaluation.lane_io import lanes_from_scenario
    from avsim.scenario.io import load_scenario

    b_parts, l_parts = [], []
    for d in scen_dirs:
        s = load_scenario(d)
        b_parts.append(boxes_from_scenario(s))
        l_parts.append(lanes_from_scenario(s))
    boxes = Boxes3D(*(np.concatenate([getattr(b, f) for b in b_parts]) for f in ("frame", "label", "boxes", "score")))
    lanes = LaneSet(
        np.concatenate([x.frame for x in l_parts]), np.concatenate([x.category for x in l_parts]),
        np.concatenate([x.points_m for x in l_parts]),
        np.concatenate([[0]] + [x.offsets[1:] + sum(len(y.points_m) for y in l_parts[:i]) for i, x in enumerate(l_parts)]),
        np.concatenate([x.visibility for x in l_parts]),
    )
    return boxes, lanes, f"{len(scen_dirs)} avsim scenario(s) in {folder}"


def list_video_clips(folder: Path) -> dict[str, dict[str, Path]]:
    """clip name -> {camera name (or "video") -> clip path} under folder/videos."""
    from avsim.evaluation.video_frames import IMAGE_SUFFIXES, VIDEO_SUFFIXES

    root = folder / "videos"
    if not root.is_dir():
        return {}
    out: dict[str, dict[str, Path]] = {}
    for c in sorted(root.iterdir()):
        if c.is_file() and c.suffix.lower() in VIDEO_SUFFIXES:
            out[c.stem] = {"video": c}
        elif c.is_dir():
            vids = sorted(v for v in c.iterdir() if v.is_file() and v.suffix.lower() in VIDEO_SUFFIXES)
            if vids:
                out[c.name] = {v.stem: v for v in vids}
            elif any(v.suffix.lower() in IMAGE_SUFFIXES for v in c.iterdir()):
                out[c.name] = {"video": c}
    return out


# --------------------------------------------------------------------------- helpers


def json_ready(x: Any) -> Any:
    """`x` with numpy scalars/arrays as Python values and non-finite floats as None (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_ready(v) for v in x]
    if isinstance(x, np.generic):
        return json_ready(x.item())
    if isinstance(x, np.ndarray):
        return json_ready(x.tolist())
    return x


def _shared_weights(keys_a: np.ndarray, keys_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of frame keys and each evaluation's index into it (for paired resampling)."""
    a, b = keys_a.astype(str), keys_b.astype(str)
    union = np.union1d(a, b)
    return union, np.searchsorted(union, a), np.searchsorted(union, b)


# --------------------------------------------------------------------------- sections


def detection_section(gt: Boxes3D, real: Boxes3D, gen: Boxes3D, cfg: ReportConfig) -> dict[str, Any]:
    ev_r, ev_g = evaluate_let(gt, real, cfg.let), evaluate_let(gt, gen, cfg.let)
    res_r, res_g = ev_r.result(), ev_g.result()
    classes = sorted(set(res_r["classes_with_gt"]) | set(res_g["classes_with_gt"]))
    union, ia, ib = _shared_weights(ev_r.frame_keys, ev_g.frame_keys)

    def stats(w: np.ndarray | None) -> dict[str, float]:
        wa = None if w is None else w[ia]
        wb = None if w is None else w[ib]
        ra, rb = ev_r.result(wa), ev_g.result(wb)
        out: dict[str, float] = {}
        for c in classes:
            for rng_name in ra["per_class"].get(c, {}):
                if rng_name == "all":
                    continue
                a = ra["per_class"][c][rng_name].ap
                b = rb["per_class"].get(c, {}).get(rng_name)
                b = b.ap if b is not None else 0.0
                out[f"{c}/range {rng_name}/ap/real"], out[f"{c}/range {rng_name}/ap/generated"] = a, b
                out[f"{c}/range {rng_name}/ap/gap"] = a - b
        for m in ("ap", "apl", "aph"):
            out[f"mean/{m}/real"] = ra["mean"][m]
            out[f"mean/{m}/generated"] = rb["mean"][m]
            out[f"mean/{m}/gap"] = ra["mean"][m] - rb["mean"][m]
        for c in classes:
            for m in ("ap", "apl", "aph"):
                a = getattr(ra["per_class"][c]["all"], m) if c in ra["per_class"] else 0.0
                b = getattr(rb["per_class"][c]["all"], m) if c in rb["per_class"] else 0.0
                out[f"{c}/{m}/real"], out[f"{c}/{m}/generated"], out[f"{c}/{m}/gap"] = a, b, a - b
        return out

    ivs = bootstrap_many(stats, len(union), "frame", cfg.n_resamples, cfg.level, cfg.seed)
    per_range: dict[str, dict[str, dict[str, float]]] = {}
    for c in classes:
        per_range[c] = {}
        for rng_name, v in res_r["per_class"].get(c, {}).items():
            g = res_g["per_class"].get(c, {}).get(rng_name)
            per_range[c][rng_name] = {
                "ap_real": v.ap, "ap_generated": g.ap if g else 0.0, "num_gt": v.num_gt,
                "apl_real": v.apl, "apl_generated": g.apl if g else 0.0,
                "aph_real": v.aph, "aph_generated": g.aph if g else 0.0,
            }
    curves = {c: {"real": res_r["per_class"][c]["all"].as_dict(), "generated": res_g["per_class"][c]["all"].as_dict()}
              for c in classes if c in res_r["per_class"] and c in res_g["per_class"]}
    return {
        "classes": classes, "intervals": {k: v.as_dict() for k, v in ivs.items()}, "per_range": per_range,
        "curves": curves, "config": cfg.let.as_dict(), "frames": len(union),
    }


def lane_section(gt: LaneSet, real: LaneSet, gen: LaneSet, cfg: ReportConfig) -> dict[str, Any]:
    ev_r, ev_g = evaluate_lanes(gt, real), evaluate_lanes(gt, gen)
    union, ia, ib = _shared_weights(ev_r.frame_keys, ev_g.frame_keys)
    names = ("f_score", "precision", "recall", "category_accuracy", "x_error_near_m", "x_error_far_m", "z_error_near_m", "z_error_far_m")

    def stats(w: np.ndarray | None) -> dict[str, float]:
        ra = ev_r.result(None if w is None else w[ia])
        rb = ev_g.result(None if w is None else w[ib])
        out = {}
        for n in names:
            out[f"{n}/real"], out[f"{n}/generated"], out[f"{n}/gap"] = ra[n], rb[n], ra[n] - rb[n]
        return out

    ivs = bootstrap_many(stats, len(union), "frame", cfg.n_resamples, cfg.level, cfg.seed)
    return {"intervals": {k: v.as_dict() for k, v in ivs.items()}, "config": ev_r.config.as_dict(), "frames": len(union),
            "counts": {"real": {k: ev_r.result()[k] for k in ("num_gt", "num_pred", "num_matches")},
                       "generated": {k: ev_g.result()[k] for k in ("num_gt", "num_pred", "num_matches")}}}


def _flatten_clips(clips: dict[str, dict[str, Path]]) -> list[Path]:
    return [p for views in clips.values() for p in views.values()]


def video_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], cfg: ReportConfig) -> dict[str, Any]:
    """FID (frames pooled) and FVD (16-frame windows), both covariance normalisers named."""
    from avsim.evaluation.features import (
        FeatureCache,
        fid_clip_features,
        fvd_clip_features,
    )
    from avsim.evaluation.frechet import frechet_distance_features

    out: dict[str, Any] = {}
    cache = FeatureCache(cfg.cache_dir)
    rc, gc = _flatten_clips(real), _flatten_clips(gen)
    for kind in ("fid", "fvd"):
        try:
            if kind == "fid":
                from avsim.evaluation.inception import describe, load_fid_inception

                model, src = load_fid_inception(cfg.inception_weights)
                fr = fid_clip_features(rc, model, src, max_frames=cfg.max_frames, cache=cache)
                fg = fid_clip_features(gc, model, src, max_frames=cfg.max_frames, cache=cache)
                desc = describe(src, "pytorch_fid")
            else:
                from avsim.evaluation.i3d import describe, load_i3d

                model, src = load_i3d(cfg.i3d_weights)
                fr = fvd_clip_features(rc, model, src, max_windows=cfg.fvd_max_windows, cache=cache)
                fg = fvd_clip_features(gc, model, src, max_windows=cfg.fvd_max_windows, cache=cache)
                desc = describe(src)
        except AvsimInputError as exc:
            out[kind] = {"skipped": str(exc)}
            continue
        xr = np.concatenate([f for f in fr if len(f)]) if any(len(f) for f in fr) else np.zeros((0, 1))
        xg = np.concatenate([f for f in fg if len(f)]) if any(len(f) for f in fg) else np.zeros((0, 1))
        if len(xr) < 2 or len(xg) < 2:
            out[kind] = {"skipped": f"need at least 2 feature rows per side, got {len(xr)} real / {len(xg)} generated"}
            continue
        # Resample clips on each side independently (the sides are different sets of clips).
        owner_r = np.concatenate([np.full(len(f), i) for i, f in enumerate(fr)])
        owner_g = np.concatenate([np.full(len(f), i) for i, f in enumerate(fg)])
        res: dict[str, Any] = {"features": desc, "rows": {"real": len(xr), "generated": len(xg)},
                               "unit": "frame" if kind == "fid" else "16-frame window"}
        n_boot = min(cfg.n_resamples, 200)  # each draw is an SVD of a rows x rows matrix
        for norm in ("unbiased_n_minus_1", "biased_n"):
            value = frechet_distance_features(xr, xg, norm)
            cr = resample_counts(len(fr), n_boot, cfg.seed)
            cg = resample_counts(len(fg), n_boot, cfg.seed + 1)
            draws = []
            for a, b in zip(cr, cg):
                ra = np.repeat(np.arange(len(xr)), a[owner_r].astype(int))
                rb = np.repeat(np.arange(len(xg)), b[owner_g].astype(int))
                if len(ra) >= 2 and len(rb) >= 2:
                    draws.append(frechet_distance_features(xr[ra], xg[rb], norm))
            lo, hi = (np.quantile(draws, [(1 - cfg.level) / 2, 1 - (1 - cfg.level) / 2]) if draws else (math.nan, math.nan))
            res[norm] = Interval(value, float(lo), float(hi), cfg.level, n_boot, "clip", len(fr) + len(fg), cfg.seed).as_dict()
        res["name"] = "FID" if kind == "fid" else "FVD (TF-Hub I3D)"
        out[kind] = res
    return out


def _views_for_sampson(views: dict[str, Path]) -> dict[str, Path]:
    from avsim.evaluation.sampson import TSE_VIEWS

    if "video" in views:
        return {"video": views["video"]}
    return {v: views[v] for v in TSE_VIEWS if v in views}


def _camera_for(name: str, width: int, height: int) -> Any:
    if name == "video":
        return None
    from avsim.core.rig import cosmos_rig

    rig = cosmos_rig(width, height)
    return rig.camera(name) if name in rig.names else None


def sampson_side(clips: dict[str, dict[str, Path]], cfg: ReportConfig) -> dict[str, Any]:
    """Per-video TSE and CSE (medians of per-frame medians) for one side."""
    from avsim.evaluation.sampson import (
        CSE_VIEW_PAIRS,
        cross_view_sampson,
        temporal_sampson,
        video_summary,
    )
    from avsim.evaluation.video_frames import read_clip

    tse, cse = {}, {}
    for clip, views in clips.items():
        frames = {v: read_clip(p, cfg.max_frames) for v, p in _views_for_sampson(views).items()}
        for cam_a, cam_b in CSE_VIEW_PAIRS:
            if cam_a in views and cam_b in views:
                frames.setdefault(cam_a, read_clip(views[cam_a], cfg.max_frames))
                frames.setdefault(cam_b, read_clip(views[cam_b], cfg.max_frames))
        for v, f in frames.items():
            if v == "video" or v in ("camera_front_wide_120fov", "camera_cross_left_120fov", "camera_cross_right_120fov"):
                cam = _camera_for(v, f.shape[2], f.shape[1])
                tse[f"{clip}/{v}"] = video_summary(temporal_sampson(f, cam))
        for cam_a, cam_b in CSE_VIEW_PAIRS:
            if cam_a in frames and cam_b in frames:
                n = min(len(frames[cam_a]), len(frames[cam_b]))
                fa, fb = frames[cam_a][:n], frames[cam_b][:n]
                errs, _ = cross_view_sampson(fa, fb, _camera_for(cam_a, fa.shape[2], fa.shape[1]), _camera_for(cam_b, fb.shape[2], fb.shape[1]))
                cse[f"{clip}/{cam_a}+{cam_b}"] = video_summary(errs)
    return {"tse": tse, "cse": cse}


def sampson_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], cfg: ReportConfig) -> dict[str, Any]:
    from avsim.evaluation.bootstrap import bootstrap_mean
    from avsim.evaluation.sampson import dataset_summary

    sides = {"real": sampson_side(real, cfg), "generated": sampson_side(gen, cfg)}
    out: dict[str, Any] = {"per_video": sides}
    for kind in ("tse", "cse"):
        for side, d in sides.items():
            meds = np.array([v["median_of_frame_medians_px"] for v in d[kind].values()], dtype=np.float64)
            if meds.size == 0:
                continue
            out[f"{kind}/{side}"] = {
                **dataset_summary(meds),
                "mean_of_video_medians": bootstrap_mean(meds, "video", cfg.n_resamples, cfg.level, cfg.seed).as_dict(),
            }
    return out


def rnds_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], real_dir: Path, gen_dir: Path, cfg: ReportConfig) -> dict[str, Any] | None:
    import polars as pl

    from avsim.evaluation.rnds import load_scorer, rnds_summary, score_chunks
    from avsim.evaluation.video_frames import read_clip

    pr, pg = real_dir / "chunk_scores.parquet", gen_dir / "chunk_scores.parquet"
    if pr.is_file() and pg.is_file():
        def table(p: Path) -> dict[str, np.ndarray]:
            df = pl.read_parquet(p).sort(["clip", "chunk"])
            return {c: df.filter(pl.col("clip") == c)["score"].cast(pl.Float64).to_numpy() for c in df["clip"].unique().sort().to_list()}

        tr, tg = table(pr), table(pg)
        scorer_name = "precomputed chunk_scores.parquet"
    elif cfg.rnds_scorer:
        scorer = load_scorer(cfg.rnds_scorer)
        tr, tg = {}, {}
        for clip in sorted(set(real) & set(gen)):
            vr = next(iter(_views_for_sampson(real[clip]).values()), None)
            vg = next(iter(_views_for_sampson(gen[clip]).values()), None)
            if vr is None or vg is None:
                continue
            tr[clip] = score_chunks([read_clip(vr)], cfg.rnds_chunk_frames, scorer)[0]
            tg[clip] = score_chunks([read_clip(vg)], cfg.rnds_chunk_frames, scorer)[0]
        scorer_name = cfg.rnds_scorer
    else:
        return None
    common = sorted(set(tr) & set(tg))
    if not common:
        return {"skipped": "no clip has chunk scores on both sides"}
    c = min(min(len(tr[k]), len(tg[k])) for k in common)
    qg = np.stack([tg[k][:c] for k in common])
    qr = np.stack([tr[k][:c] for k in common])
    res = rnds_summary(qg, qr, cfg.n_resamples, cfg.seed, cfg.level)
    return {"scorer": scorer_name, "clips": common, **res.as_dict()}


# --------------------------------------------------------------------------- figures


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _bars(labels: list[str], series: dict[str, list[tuple[float, float, float]]], title: str, ylabel: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    colors = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5"]
    for i, (name, vals) in enumerate(series.items()):
        est = np.array([v[0] for v in vals], dtype=float)
        lo = np.array([v[1] for v in vals], dtype=float)
        hi = np.array([v[2] for v in vals], dtype=float)
        err = np.vstack([np.nan_to_num(est - lo), np.nan_to_num(hi - est)]).clip(0)
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(est), width, yerr=err, capsize=3, label=name, color=colors[i % 4])
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def figures(result: dict[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, str] = {}
    det = result.get("detection")
    if det and "classes" in det:
        iv = det["intervals"]
        cls = det["classes"]
        s = {side: [(iv[f"{c}/ap/{side}"]["estimate"], iv[f"{c}/ap/{side}"]["ci_low"], iv[f"{c}/ap/{side}"]["ci_high"]) for c in cls]
             for side in ("real", "generated")}
        figs["let_ap_per_class"] = _bars(cls, s, "LET-3D-AP per class (95% bootstrap CI)", "LET-3D-AP")
        labels, real_v, gen_v = [], [], []
        for c in cls:
            for rng_name, v in det["per_range"].get(c, {}).items():
                if rng_name == "all":
                    continue
                labels.append(f"{c}\n{rng_name}")
                for side, dst in (("real", real_v), ("generated", gen_v)):
                    d = iv.get(f"{c}/range {rng_name}/ap/{side}")
                    dst.append((d["estimate"], d["ci_low"], d["ci_high"]) if d else (v[f"ap_{side}"],) * 3)
        if labels:
            figs["let_ap_per_range"] = _bars(labels, {"real": real_v, "generated": gen_v}, "LET-3D-AP per range bin (95% CI)", "LET-3D-AP")
    lanes = result.get("lanes")
    if lanes and "intervals" in lanes:
        iv = lanes["intervals"]
        s = {side: [(iv[f"{m}/{side}"]["estimate"], iv[f"{m}/{side}"]["ci_low"], iv[f"{m}/{side}"]["ci_high"])
                    for m in ("f_score", "precision", "recall")] for side in ("real", "generated")}
        figs["lane_f1"] = _bars(["F1", "precision", "recall"], s, "Lane metrics (OpenLane) real vs generated", "value")
    samp = result.get("sampson")
    if samp and "per_video" in samp:
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
        for ax, kind in zip(axes, ("tse", "cse")):
            data, names = [], []
            for side in ("real", "generated"):
                vals = [v["median_of_frame_medians_px"] for v in samp["per_video"][side][kind].values()]
                vals = [v for v in vals if v is not None and math.isfinite(v)]
                if vals:
                    data.append(vals)
                    names.append(side)
            if data:
                ax.boxplot(data, tick_labels=names)
            else:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"{kind.upper()} per-video median (px)")
            ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        figs["sampson"] = _png(fig)
    rnds = result.get("rnds")
    if rnds and "curve" in rnds:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        c = np.arange(1, len(rnds["curve"]) + 1)
        ax.plot(c, rnds["curve"], marker="o", color="#2b6cb0", label="mean RNDS")
        ax.fill_between(c, rnds["band_low"], rnds["band_high"], alpha=0.25, color="#2b6cb0", label="95% band")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(c)
        ax.set_xlabel("chunk")
        ax.set_ylabel("RNDS")
        ax.set_title(f"RNDS ({rnds['scorer']})")
        ax.legend()
        fig.tight_layout()
        figs["rnds"] = _png(fig)
    return figs


# --------------------------------------------------------------------------- html


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return "n/a" if not math.isfinite(x) else f"{x:.4g}"
    return html.escape(str(x))


def _ci(d: dict[str, Any]) -> str:
    return f"{_fmt(d['estimate'])} <span class=ci>[{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]</span>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(result: dict[str, Any], figs: dict[str, str]) -> str:
    parts = ["<h1>avsim detection-gap report</h1>",
             f"<p>Real: <code>{html.escape(result['inputs']['real'])}</code> &middot; Generated: "
             f"<code>{html.escape(result['inputs']['generated'])}</code> &middot; Ground truth: "
             f"<code>{html.escape(str(result['inputs'].get('ground_truth')))}</code></p>",
             f"<p class=note>Intervals: {int(result['settings']['level'] * 100)}% percentile bootstrap, "
             f"{result['settings']['n_resamples']} resamples, seed {result['settings']['seed']}; unit stated per section.</p>"]

    def img(key: str, alt: str) -> str:
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{figs[key]}">' if key in figs else ""

    det = result.get("detection")
    parts.append("<h2>Detection (LET-3D-AP, Waymo camera-only)</h2>")
    if det and "classes" in det:
        iv = det["intervals"]
        rows = []
        for c in ["mean"] + det["classes"]:
            for m in ("ap", "apl", "aph"):
                rows.append([html.escape(c), m.upper(), _ci(iv[f"{c}/{m}/real"]), _ci(iv[f"{c}/{m}/generated"]), _ci(iv[f"{c}/{m}/gap"])])
        parts.append(_table(["class", "metric", "real", "generated", "gap (real - gen)"], rows))
        parts.append(f"<p class=note>Resampling unit: frame ({det['frames']} frames), paired across real and generated.</p>")
        rrows = []
        for c in det["classes"]:
            for rng_name, v in det["per_range"].get(c, {}).items():
                k = f"{c}/range {rng_name}/ap"
                if rng_name == "all" or f"{k}/real" not in iv:
                    continue
                rrows.append([html.escape(c), html.escape(rng_name), str(v["num_gt"]), _ci(iv[f"{k}/real"]),
                              _ci(iv[f"{k}/generated"]), _ci(iv[f"{k}/gap"])])
        if rrows:
            parts.append(_table(["class", "range (m)", "#GT", "AP real", "AP generated", "gap"], rrows))
        parts.append(img("let_ap_per_class", "LET-AP per class"))
        parts.append(img("let_ap_per_range", "LET-AP per range bin"))
    else:
        parts.append(f"<p class=skip>Skipped: {html.escape(str((det or {}).get('skipped', 'no inputs')))}</p>")

    lanes = result.get("lanes")
    parts.append("<h2>Lanes (OpenLane 3-D lane metrics)</h2>")
    if lanes and "intervals" in lanes:
        iv = lanes["intervals"]
        names = ("f_score", "precision", "recall", "category_accuracy", "x_error_near_m", "x_error_far_m", "z_error_near_m", "z_error_far_m")
        parts.append(_table(["metric", "real", "generated", "gap"], [[n, _ci(iv[f"{n}/real"]), _ci(iv[f"{n}/generated"]), _ci(iv[f"{n}/gap"])] for n in names]))
        parts.append(img("lane_f1", "lane F1"))
    else:
        parts.append(f"<p class=skip>Skipped: {html.escape(str((lanes or {}).get('skipped', 'no inputs')))}</p>")

    vid = result.get("video", {})
    parts.append("<h2>Video fidelity (FID, FVD)</h2>")
    rows = []
    for kind in ("fid", "fvd"):
        d = vid.get(kind)
        if not d:
            continue
        if "skipped" in d:
            rows.append([kind.upper(), f"<span class=skip>skipped: {html.escape(d['skipped'])}</span>", "", ""])
        else:
            rows.append([html.escape(d["name"]), _ci(d["unbiased_n_minus_1"]), _ci(d["biased_n"]), html.escape(d["features"]["weights"])])
    parts.append(_table(["metric", "covariance N-1 (original)", "covariance /N (StyleGAN-V)", "weights"], rows) if rows else "<p class=skip>Skipped: no videos</p>")

    samp = result.get("sampson")
    parts.append("<h2>Geometric consistency (Sampson error, px)</h2>")
    if samp and "per_video" in samp:
        rows = []
        for key in ("tse/real", "tse/generated", "cse/real", "cse/generated"):
            if key in samp:
                d = samp[key]
                rows.append([key.upper(), _ci(d["mean_of_video_medians"]), _fmt(d["median_px"]), str(d["videos"])])
        parts.append(_table(["metric / side", "mean of per-video medians", "median of per-video medians", "videos"], rows))
        parts.append(img("sampson", "Sampson error distributions"))
    else:
        parts.append("<p class=skip>Skipped: no videos</p>")

    rnds = result.get("rnds")
    parts.append("<h2>Long-horizon drift (RNDS)</h2>")
    if rnds and "curve" in rnds:
        parts.append(f"<p>Mean RNDS over chunks 2..C: {_ci(rnds['mean_over_chunks_2_to_C'])}; scorer: {html.escape(rnds['scorer'])}</p>")
        parts.append(img("rnds", "RNDS curve"))
    else:
        parts.append(f"<p class=skip>Skipped: {html.escape(str((rnds or {}).get('skipped', 'no chunk scores and no scorer')))}</p>")

    prov = result["provenance"]
    parts.append("<h2>Provenance</h2>" + _table(["item", "value"], [[html.escape(k), html.escape(str(v))] for k, v in prov.items()]))
    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1000px;color:#1a202c}"
           "table{border-collapse:collapse;margin:0.5em 0 1em}td,th{border:1px solid #cbd5e0;padding:4px 8px;text-align:left}"
           "th{background:#edf2f7}.ci{color:#4a5568;font-size:0.9em}.skip{color:#a0aec0}.note{color:#4a5568;font-size:0.9em}"
           "img{display:block;max-width:100%;margin:0.5em 0 1.5em}")
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>avsim detection-gap report</title>"
            f"<style>{css}</style></head><body>" + "\n".join(p for p in parts if p) + "</body></html>\n")


# --------------------------------------------------------------------------- driver


def provenance() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("avsim", "numpy", "scipy", "torch", "opencv-python-headless", "matplotlib", "polars"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def build_report(real_dir: str | os.PathLike[str], gen_dir: str | os.PathLike[str],
                 ground_truth: str | os.PathLike[str] | None, cfg: ReportConfig | None = None) -> dict[str, Any]:
    """Compute every section that has inputs; returns the report dict (JSON-ready)."""
    cfg = cfg or ReportConfig()
    real, gen = Path(real_dir), Path(gen_dir)
    for p in (real, gen):
        if not p.is_dir():
            raise AvsimInputError(p, "folder", "not found")
    result: dict[str, Any] = {
        "inputs": {"real": str(real), "generated": str(gen), "ground_truth": str(ground_truth) if ground_truth else None},
        "settings": {"n_resamples": cfg.n_resamples, "seed": cfg.seed, "level": cfg.level, "max_frames_per_clip": cfg.max_frames,
                     "fvd_max_windows_per_clip": cfg.fvd_max_windows},
    }
    gt_boxes = gt_lanes = None
    if ground_truth is not None:
        gt_boxes, gt_lanes, gt_desc = load_ground_truth(Path(ground_truth))
        result["inputs"]["ground_truth_source"] = gt_desc
    det_r, det_g = load_detections(real), load_detections(gen)
    if gt_boxes is not None and det_r is not None and det_g is not None:
        result["detection"] = detection_section(gt_boxes, det_r, det_g, cfg)
    else:
        result["detection"] = {"skipped": "needs ground-truth boxes and detections on both sides"}
    lan_r, lan_g = load_lanes(real), load_lanes(gen)
    if gt_lanes is not None and lan_r is not None and lan_g is not None:
        result["lanes"] = lane_section(gt_lanes, lan_r, lan_g, cfg)
    else:
        result["lanes"] = {"skipped": "needs ground-truth lanes and lane outputs on both sides"}
    clips_r, clips_g = list_video_clips(real), list_video_clips(gen)
    if clips_r and clips_g and cfg.video_metrics:
        result["video"] = video_section(clips_r, clips_g, cfg)
        result["sampson"] = sampson_section(clips_r, clips_g, cfg)
    rn = rnds_section(clips_r, clips_g, real, gen, cfg)
    if rn is not None:
        result["rnds"] = rn
    result["provenance"] = provenance()
    return json_ready(result)


def write_report(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write report.json and report.html into `out_dir` (atomically, as one folder)."""
    figs = figures(result)
    with atomic_output_path(out_dir, is_dir=True) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / REPORT_JSON).write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
        (tmp / REPORT_HTML).write_text(render_html(result, figs))
    out = Path(out_dir)
    return out / REPORT_JSON, out / REPORT_HTML
