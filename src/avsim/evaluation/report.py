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

This module computes and holds the report (config, inputs, sections, the JSON-ready dict);
`avsim.evaluation.report_html` draws its figures and page.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.progress import StepProgress, report_step
from avsim.core.safe_files import contained_path, regular_file
from avsim.core.safe_parquet import TableLimits, read_frame
from avsim.evaluation.bootstrap import bootstrap_many
from avsim.evaluation.lanes import LaneSet, evaluate_lanes
from avsim.evaluation.let_ap import Boxes3D, evaluate_let
from avsim.evaluation.let_result import WAYMO_MEAN_CLASSES, LetClass, LetMetric, LetResult, RangeBin
from avsim.evaluation.report_config import LANE_METRICS, ReportConfig
from avsim.evaluation.report_instants import boxes_at, detect_notes, lanes_at, shared_instants
from avsim.evaluation.report_sampson import first_view, sampson_section
from avsim.evaluation.report_video import video_section
from avsim.evaluation.report_warnings import collect_warnings
from avsim.evaluation.results import json_ready

__all__ = ["build_report", "collect_warnings", "list_video_clips", "load_detections", "load_ground_truth", "load_lanes", "write_report"]

if TYPE_CHECKING:
    pass

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
# --------------------------------------------------------------------------- inputs

CHUNK_SCORE_LIMITS = TableLimits(max_rows=10_000_000, max_decoded_bytes=1 << 30)  # chunk_scores.parquet


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

    if not folder.is_dir():
        raise AvsimInputError(folder, "--gt", "not found or not a folder (the ground truth: boxes.parquet / lanes.parquet or scenario folders)")

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
    if not os.path.lexists(root):
        return {}
    contained_path(folder, "videos", root, "videos")  # a link out of the side's folder is refused, never listed
    if not root.is_dir():
        raise AvsimInputError(root, "videos", "not a folder")
    out: dict[str, dict[str, Path]] = {}
    for c in sorted(root.iterdir()):
        if c.suffix.lower() in VIDEO_SUFFIXES:  # a clip (a link to it, as `eval detect` writes): a regular file, else named
            out[c.stem] = {"video": regular_file(c, "video")}
        elif c.is_dir():
            contained_path(root, c.name, c, "videos")
            vids = sorted(regular_file(v, "video") for v in c.iterdir() if v.suffix.lower() in VIDEO_SUFFIXES)
            if vids:
                out[c.name] = {v.stem: v for v in vids}
            elif any(v.suffix.lower() in IMAGE_SUFFIXES for v in c.iterdir()):
                out[c.name] = {"video": c}
    return out


# --------------------------------------------------------------------------- helpers


def _shared_weights(keys_a: np.ndarray, keys_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of frame keys and each evaluation's index into it (for paired resampling)."""
    a, b = keys_a.astype(str), keys_b.astype(str)
    union = np.union1d(a, b)
    return union, np.searchsorted(union, a), np.searchsorted(union, b)


# --------------------------------------------------------------------------- sections


HEADLINE_KEY = "waymo_mean"  # intervals "waymo_mean/<metric>/<side>": the LET headline
CLASS_MEAN_KEY = "mean_over_classes_with_gt"


def _let_stats(ra: LetResult, rb: LetResult, classes: list[LetClass], bins: tuple[RangeBin, ...]) -> dict[str, float]:
    """Real, generated and gap of the headline, the class mean, each class and each range bin."""
    out: dict[str, float] = {}

    def put(key: str, a: float, b: float) -> None:
        out[f"{key}/real"], out[f"{key}/generated"], out[f"{key}/gap"] = a, b, a - b

    for m in LetMetric:
        put(f"{HEADLINE_KEY}/{m.value}", ra.headline[m], rb.headline[m])
        put(f"{CLASS_MEAN_KEY}/{m.value}", ra.mean_over_classes_with_gt[m], rb.mean_over_classes_with_gt[m])
        for c in classes:
            put(f"{c.value}/{m.value}", ra.metric(c, m), rb.metric(c, m))
    for c in classes:
        for b in bins:
            if c in ra.per_class and b in ra.per_class[c].ranges:
                put(f"{c.value}/range {b.name}/ap", ra.metric(c, LetMetric.AP, b), rb.metric(c, LetMetric.AP, b))
    return out


def detection_section(gt: Boxes3D, real: Boxes3D, gen: Boxes3D, cfg: ReportConfig) -> dict[str, Any]:
    """LET per class, range bin, headline and class mean: real vs generated with a paired frame bootstrap."""
    ev_r, ev_g = evaluate_let(gt, real, cfg.let), evaluate_let(gt, gen, cfg.let)
    res_r, res_g = ev_r.result(), ev_g.result()
    with_gt = set(res_r.classes_with_gt) | set(res_g.classes_with_gt)
    classes = [c for c in LetClass if c in WAYMO_MEAN_CLASSES or c in with_gt]
    bins = cfg.let.range_bins
    union, ia, ib = _shared_weights(ev_r.frame_keys, ev_g.frame_keys)

    def stats(w: np.ndarray | None) -> dict[str, float]:
        ra = ev_r.result(None if w is None else w[ia])
        rb = ev_g.result(None if w is None else w[ib])
        return _let_stats(ra, rb, classes, bins)

    ivs = bootstrap_many(stats, len(union), "frame", cfg.n_resamples, cfg.level, cfg.seed)
    per_range: dict[str, dict[str, dict[str, float]]] = {}
    for c in classes:
        if c not in res_r.per_class:
            continue
        per_range[c.value] = {}
        for b, v in [(None, res_r.per_class[c].all), *res_r.per_class[c].ranges.items()]:
            per_range[c.value][b.name if b else "all"] = {
                "num_gt": v.num_gt,
                **{f"{m.value}_{side}": r.metric(c, m, b) for m in LetMetric for side, r in (("real", res_r), ("generated", res_g))},
            }
    curves = {c.value: {"real": res_r.per_class[c].all.as_dict(), "generated": res_g.per_class[c].all.as_dict()}
              for c in classes if c in res_r.per_class and c in res_g.per_class}  # fmt: skip
    return {
        "classes": [c.value for c in classes], "headline": res_r.headline_dict() | {"key": HEADLINE_KEY},
        "intervals": {k: v.as_dict() for k, v in ivs.items()}, "per_range": per_range,
        "curves": curves, "config": cfg.let.as_dict(), "frames": len(union),
    }


def lane_section(gt: LaneSet, real: LaneSet, gen: LaneSet, cfg: ReportConfig) -> dict[str, Any]:
    ev_r, ev_g = evaluate_lanes(gt, real), evaluate_lanes(gt, gen)
    union, ia, ib = _shared_weights(ev_r.frame_keys, ev_g.frame_keys)

    def stats(w: np.ndarray | None) -> dict[str, float]:
        ra = ev_r.result(None if w is None else w[ia])
        rb = ev_g.result(None if w is None else w[ib])
        out = {}
        for n in LANE_METRICS:
            out[f"{n}/real"], out[f"{n}/generated"], out[f"{n}/gap"] = ra[n], rb[n], ra[n] - rb[n]
        return out

    ivs = bootstrap_many(stats, len(union), "frame", cfg.n_resamples, cfg.level, cfg.seed)
    return {"intervals": {k: v.as_dict() for k, v in ivs.items()}, "config": ev_r.config.as_dict(), "frames": len(union),
            "counts": {"real": {k: ev_r.result()[k] for k in ("num_gt", "num_pred", "num_matches")},
                       "generated": {k: ev_g.result()[k] for k in ("num_gt", "num_pred", "num_matches")}}}


def rnds_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]], real_dir: Path, gen_dir: Path, cfg: ReportConfig) -> dict[str, Any] | None:
    import polars as pl

    from avsim.evaluation.rnds import load_scorer, rnds_summary, score_chunks
    from avsim.evaluation.video_frames import read_clip

    pr, pg = real_dir / "chunk_scores.parquet", gen_dir / "chunk_scores.parquet"
    if pr.is_file() and pg.is_file():
        def table(p: Path) -> dict[str, np.ndarray]:
            df = read_frame(p, CHUNK_SCORE_LIMITS).sort(["clip", "chunk"])
            return {c: df.filter(pl.col("clip") == c)["score"].cast(pl.Float64).to_numpy() for c in df["clip"].unique().sort().to_list()}

        tr, tg = table(pr), table(pg)
        scorer_name = "precomputed chunk_scores.parquet"
    elif cfg.rnds_scorer:
        scorer = load_scorer(cfg.rnds_scorer)
        tr, tg = {}, {}
        for clip in sorted(set(real) & set(gen)):
            vr, vg = first_view(real[clip]), first_view(gen[clip])
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
                 ground_truth: str | os.PathLike[str] | None, cfg: ReportConfig | None = None,
                 progress: StepProgress | None = None) -> dict[str, Any]:  # fmt: skip
    """Compute every section that has inputs; returns the report dict (JSON-ready).

    Args:
        real_dir, gen_dir: the real and generated folders (layout in the module docstring).
        ground_truth: GT tables or avsim scenario folders (None: no detection or lane sections).
        cfg: what to compute.
        progress: called as `(step, done, total)` by the long steps (features, Sampson).

    Returns:
        the report; `warnings` lists every caveat (see `collect_warnings`).
    """
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
    stages = ["ground truth and detections", "lanes", "video", "Sampson", "RNDS"]

    def stage(done: int) -> None:
        report_step(progress, f"report sections ({stages[min(done, len(stages) - 1)]})", done, len(stages))

    stage(0)
    sections = _scored_sections(real, gen, Path(ground_truth) if ground_truth is not None else None, cfg, lambda: stage(1))
    if "ground_truth_source" in sections:
        result["inputs"]["ground_truth_source"] = sections.pop("ground_truth_source")
    result.update(sections)
    stage(2)
    clips_r, clips_g = list_video_clips(real), list_video_clips(gen)
    if clips_r and clips_g:
        result["clips"] = _clips_section(clips_r, clips_g)
    if clips_r and clips_g and cfg.video_metrics:
        result["video"] = video_section(clips_r, clips_g, cfg, progress)
        stage(3)
        result["sampson"] = sampson_section(clips_r, clips_g, cfg, progress)
    stage(4)
    rn = rnds_section(clips_r, clips_g, real, gen, cfg)
    if rn is not None:
        result["rnds"] = rn
    stage(5)
    result["provenance"] = provenance()
    result["warnings"] = collect_warnings(result)
    return json_ready(result)


def _scored_sections(real: Path, gen: Path, ground_truth: Path | None, cfg: ReportConfig,
                     lanes_next: Callable[[], None]) -> dict[str, Any]:  # fmt: skip
    """The report's ground truth, detection and lane sections, LET and lanes on the instants both sides have
    (`avsim.evaluation.report_instants`); `lanes_next` is called between the two (progress)."""
    out: dict[str, Any] = {}
    gt_boxes = gt_lanes = None
    if ground_truth is not None:
        gt_boxes, gt_lanes, gt_desc = load_ground_truth(ground_truth)
        out["ground_truth_source"] = gt_desc
        out["ground_truth"] = detect_notes(real, gen, ground_truth)
    det_r, det_g, lan_r, lan_g = load_detections(real), load_detections(gen), load_lanes(real), load_lanes(gen)
    scored = (gt_boxes is not None and det_r is not None and det_g is not None) or (gt_lanes is not None and lan_r is not None and lan_g is not None)
    if scored:
        shared = shared_instants(real, gen, (det_r, lan_r), (det_g, lan_g))
        out["instants"] = {**shared.as_dict(), "warnings": shared.warnings()}
        gt_boxes, det_r, det_g = (None if b is None else boxes_at(b, shared.keys) for b in (gt_boxes, det_r, det_g))
        gt_lanes, lan_r, lan_g = (None if x is None else lanes_at(x, shared.keys) for x in (gt_lanes, lan_r, lan_g))
    out["detection"] = _detection_or_skip(gt_boxes, det_r, det_g, cfg)
    lanes_next()
    if gt_lanes is not None and lan_r is not None and lan_g is not None:
        out["lanes"] = lane_section(gt_lanes, lan_r, lan_g, cfg)
    else:
        out["lanes"] = {"skipped": "needs ground-truth lanes and lane outputs on both sides"}
    for section in ("detection", "lanes") if scored else ():
        out[section].setdefault("instants", len(shared.keys))
    return out


def _detection_or_skip(gt: Boxes3D | None, real: Boxes3D | None, gen: Boxes3D | None, cfg: ReportConfig) -> dict[str, Any]:
    if gt is None or real is None or gen is None:
        return {"skipped": "needs ground-truth boxes and detections on both sides"}
    return detection_section(gt, real, gen, cfg)


def _clips_section(real: dict[str, dict[str, Path]], gen: dict[str, dict[str, Path]]) -> dict[str, Any]:
    """Each side's clips (views, rates, sizes, frame counts) and warnings where they differ."""
    from avsim.evaluation.report_clips import mismatch_warnings, side_inventory, view_counts

    inv = {side: side_inventory(c) for side, c in (("real", real), ("generated", gen))}
    return {**inv, "views_per_clip": {"real": view_counts(real), "generated": view_counts(gen)},
            "warnings": mismatch_warnings(inv["real"], inv["generated"])}  # fmt: skip


def write_report(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write report.json and report.html into `out_dir`, each atomically (the folder's feature
    cache, `cache/`, stays: it is what a rerun resumes from)."""
    from avsim.evaluation.report_html import figures, render_html

    figs = figures(result)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(out / REPORT_JSON) as tmp:
        tmp.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    with atomic_output_path(out / REPORT_HTML) as tmp:
        tmp.write_text(render_html(result, figs))
    return out / REPORT_JSON, out / REPORT_HTML
