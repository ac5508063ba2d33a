"""One function per `avsim eval` command: read the inputs, compute the metric, and return what
the command prints and writes (`MetricTable`). The CLI (`avsim.evaluation.cli`) only parses
options, calls these, prints the table and writes the JSON with `write_json`.

Bad inputs raise `AvsimInputError` (one line); missing weights name the command that gets them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.progress import StepProgress, report_step
from avsim.evaluation.frechet import rank_warning
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D
from avsim.evaluation.results import MetricTable

if TYPE_CHECKING:
    from avsim.evaluation.frechet import CovarianceNorm
    from avsim.evaluation.inception import Normalization
    from avsim.evaluation.sampson_run import SampsonOptions

FRECHET_NORMS: tuple[CovarianceNorm, ...] = ("unbiased_n_minus_1", "biased_n")


# --------------------------------------------------------------------------- fid / fvd


def frechet_both(
    real: Path, generated: Path, fr: list[np.ndarray], fg: list[np.ndarray], rows: str
) -> tuple[int, int, dict[str, float]]:
    """Pooled feature rows per side and the Frechet distance under both covariance normalisers."""
    from avsim.evaluation.frechet import frechet_distance_features

    xr, xg = np.concatenate(fr), np.concatenate(fg)
    if len(xr) < 2 or len(xg) < 2:
        raise AvsimInputError(real if len(xr) < 2 else generated, "clips", f"need at least two {rows} per side")
    return len(xr), len(xg), {n: frechet_distance_features(xr, xg, n) for n in FRECHET_NORMS}


def run_fid(real: Path, generated: Path, weights: Path | None = None, max_frames: int | None = None,
            batch_size: int = 16, normalization: Normalization = "pytorch_fid", cache: Path | None = None,
            device: str = "cpu", progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """FID between two sets of clips (Inception pool3 features, frames pooled)."""
    from avsim.evaluation.features import FeatureCache, fid_clip_features
    from avsim.evaluation.inception import describe, load_fid_inception
    from avsim.evaluation.video_frames import list_clips

    model, src = load_fid_inception(weights, device)
    fc = FeatureCache(cache)
    fr = fid_clip_features(list_clips(real), model, src, batch_size, max_frames, normalization, fc, progress, "FID real")
    fg = fid_clip_features(list_clips(generated), model, src, batch_size, max_frames, normalization, fc, progress, "FID generated")
    nr, ng, res = frechet_both(real, generated, fr, fg, "frames")
    warnings = [w for w in [rank_warning("FID", nr, ng, 2048)] if w]
    return MetricTable("FID", ["covariance", "FID", "frames real", "frames gen"], [[n, v, nr, ng] for n, v in res.items()],
                       {"metric": "FID", "fid": res, "frames": {"real": nr, "generated": ng},
                        "features": describe(src, normalization), "warnings": warnings})  # fmt: skip


def run_fvd(real: Path, generated: Path, weights: Path | None = None, stride: int = 16,
            max_windows: int | None = None, cache: Path | None = None, device: str = "cpu",
            progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """FVD (TF-Hub I3D) between two sets of clips, both covariance normalisers."""
    from avsim.evaluation.features import FeatureCache, fvd_clip_features
    from avsim.evaluation.i3d import describe, load_i3d
    from avsim.evaluation.video_frames import list_clips

    model, src = load_i3d(weights, device)
    fc = FeatureCache(cache)
    fr = fvd_clip_features(list_clips(real), model, src, 16, stride, max_windows, cache=fc, progress=progress, step="FVD real")
    fg = fvd_clip_features(list_clips(generated), model, src, 16, stride, max_windows, cache=fc, progress=progress,
                           step="FVD generated")  # fmt: skip
    nr, ng, res = frechet_both(real, generated, fr, fg, "16-frame windows")
    warnings = [w for w in [rank_warning("FVD", nr, ng, 400)] if w]
    return MetricTable("FVD (TF-Hub I3D)", ["covariance", "FVD", "windows real", "windows gen"],
                       [[n, v, nr, ng] for n, v in res.items()],
                       {"metric": "FVD (TF-Hub I3D)", "fvd": res, "windows": {"real": nr, "generated": ng},
                        "covariance_names": {"unbiased_n_minus_1": "original FVD", "biased_n": "StyleGAN-V"},
                        "features": describe(src), "warnings": warnings})  # fmt: skip


# --------------------------------------------------------------------------- sampson


def run_sampson(video: Path, other: Path | None = None, options: SampsonOptions | None = None,
                progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """Temporal (TSE, one clip) or cross-camera (CSE, with `other`) Sampson error, in pixels.

    Frames are rectified to the ideal pinhole before matching; F comes from the calibration
    (`options.scenario` or `options.calibration`) or, with `options.ransac`, from RANSAC.
    See `avsim.evaluation.sampson_run`.

    Args:
        video: clip (video file or frame folder).
        other: the second view at the same instants (CSE), or None (TSE).
        options: the run's settings (default `SampsonOptions()`, which needs a calibration).
        progress: step callback (reading + rectifying per frame, matching per pair).

    Returns:
        The table and the JSON document.
    """
    from avsim.evaluation.sampson_run import SampsonOptions, sampson_table

    return sampson_table(video, other, options or SampsonOptions(), progress=progress)


# --------------------------------------------------------------------------- let / lanes


def read_gt_boxes(path: Path) -> tuple[Boxes3D, dict[str, int]]:
    """Ground-truth boxes and the objects the format's rules leave out (reason -> count).

    A box table (parquet/csv), a Waymo `metrics_pb2.Objects` file (`.bin`) or an avsim
    scenario folder.
    """
    from avsim.evaluation.detections import boxes_from_scenario, read_box_table

    if path.is_dir() and (path / "scenario.json").is_file():
        from avsim.scenario.io import load_scenario

        return boxes_from_scenario(load_scenario(path)), {}
    if path.suffix.lower() == ".bin":
        from avsim.evaluation.waymo_objects import read_waymo_objects

        read = read_waymo_objects(path, ground_truth=True)
        if len(read.boxes) == 0 and read.dropped:
            raise AvsimInputError(path, "objects", f"every object left out by the reference rules: {read.dropped}")
        return read.boxes, read.dropped
    return read_box_table(path, require_score=False), {}


def read_pred_boxes(path: Path) -> Boxes3D:
    """Predicted boxes: a box table, a nuScenes submission JSON (ego frame), a Waymo
    `metrics_pb2.Objects` file (`.bin`), or avsim's labels (a label folder, its `boxes3d.json`
    or the compact `boxes3d.parquet`, read as the same nuScenes results)."""
    from avsim.evaluation.detections import read_box_table, read_nuscenes_submission
    from avsim.render.labels import compact, standard

    if path.is_dir() and (path / "index.json").is_file():  # a label folder: its standard file, else its compact table
        path = path / "boxes3d.json" if (path / "boxes3d.json").is_file() else path / compact.BOXES3D
    if path.name == compact.BOXES3D and compact.is_compact(path.parent):
        return read_nuscenes_submission(path, doc=standard.boxes3d_document(path.parent))
    if path.suffix.lower() == ".bin":
        from avsim.evaluation.waymo_objects import read_waymo_objects

        return read_waymo_objects(path, ground_truth=False).boxes
    return read_nuscenes_submission(path) if path.suffix.lower() == ".json" else read_box_table(path)


def run_let(gt: Path, pred: Path, sensor_location_m: tuple[float, float, float] = (1.43, 0.0, 2.18),
            tolerance_fraction: float = 0.10, min_tolerance_m: float = 0.5,
            progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """LET-3D-AP / APL / APH per class and range bin (Waymo camera-only definition).

    The headline is the leaderboard's mean over vehicle, pedestrian and cyclist (a class
    without ground truth or predictions counts as 0); the mean over the classes with ground
    truth is reported under that name. `--out` adds per class and range bin the precision /
    recall curves and TP / FP / FN at each of the 101 score cutoffs.
    """
    from avsim.evaluation.let_ap import LetConfig, evaluate_let, waymo_score_cutoffs
    from avsim.evaluation.let_result import LetMetric

    cfg = LetConfig(sensor_location_m=sensor_location_m, tolerance_fraction=tolerance_fraction, min_tolerance_m=min_tolerance_m)
    gt_boxes, dropped = read_gt_boxes(gt)
    pred_boxes = read_pred_boxes(pred)
    _check_frames_overlap(gt, pred, gt_boxes, pred_boxes)
    try:
        evaluation = evaluate_let(gt_boxes, pred_boxes, cfg, progress)
    except AvsimValueError as exc:  # a bound of the matching (too many boxes in a frame): the files' fault
        raise AvsimInputError(pred, "rows", str(exc)) from None
    res = evaluation.result()
    rows: list[list[Any]] = [
        [c.value, r.name if r else "all", v.ap, v.apl, v.aph, v.num_gt, v.num_pd]
        for c, cr in res.per_class.items() for r, v in [(None, cr.all), *cr.ranges.items()]
    ]  # fmt: skip
    rows.append([_HEADLINE_ROW, "all", *(res.headline[m] for m in LetMetric), "", ""])
    rows.append(["mean over classes with GT", "all", *(res.mean_over_classes_with_gt[m] for m in LetMetric), "", ""])
    doc = {"metric": "LET-3D-AP", "config": cfg.as_dict(), "headline": res.headline_dict(),
           "mean_over_classes_with_gt": {m.value: v for m, v in res.mean_over_classes_with_gt.items()},
           "classes_with_gt": [c.value for c in res.classes_with_gt], "score_cutoffs": waymo_score_cutoffs().tolist(),
           "per_class": res.per_class_dict(), "gt_left_out": dropped, "warnings": _let_warnings(dropped)}  # fmt: skip
    return MetricTable("LET-3D-AP", ["class", "range", "AP", "APL", "APH", "#GT", "#pred"], rows, doc)


_HEADLINE_ROW = "Waymo mean (vehicle, pedestrian, cyclist)"


def _let_warnings(dropped: dict[str, int]) -> list[str]:
    return [f"{n} ground-truth objects left out ({why}), as Waymo's reference tool does" for why, n in dropped.items()]


def _check_frames_overlap(gt: Path, pred: Path, gt_boxes: Boxes3D, pred_boxes: Boxes3D) -> None:
    """Predictions on frames the ground truth never names mean the frame keys disagree."""
    if len(gt_boxes) and len(pred_boxes):
        shared = np.intersect1d(np.asarray(gt_boxes.frame).astype(str), np.asarray(pred_boxes.frame).astype(str))
        if shared.size == 0:
            raise AvsimInputError(pred, "frame", f"no frame key in common with the ground truth {gt} "
                                  f"(e.g. {pred_boxes.frame[0]!r} vs {gt_boxes.frame[0]!r})")  # fmt: skip


def read_lanes(path: Path, ground_truth: bool) -> LaneSet:
    """Lanes from a lane table, OpenLane JSON (file or folder), an avsim scenario folder, or
    `LABELS/openlane/<camera>` of a compact label folder (its OpenLane documents rebuilt from the tables)."""
    from avsim.evaluation.lane_io import lanes_from_scenario, read_label_lanes, read_lane_table, read_openlane_json
    from avsim.render.labels import compact

    labels = path.parent.parent
    if not path.exists() and path.parent.name == "openlane" and compact.is_compact(labels):
        return read_label_lanes(labels, path.name, ground_truth)

    if path.is_dir() and (path / "scenario.json").is_file():
        from avsim.scenario.io import load_scenario

        return lanes_from_scenario(load_scenario(path))
    if path.is_dir() or path.suffix.lower() == ".json":
        return read_openlane_json(path, ground_truth)
    return read_lane_table(path)


def run_lanes(gt: Path, pred: Path) -> MetricTable:
    """OpenLane 3-D lane metrics: F-score, precision, recall, x/z errors, category accuracy."""
    from avsim.evaluation.lanes import evaluate_lanes

    try:
        ev = evaluate_lanes(read_lanes(gt, True), read_lanes(pred, False))
    except AvsimValueError as exc:  # a bound of the matching (too many lanes in a frame): the files' fault
        raise AvsimInputError(pred, "rows", str(exc)) from None
    r = ev.result()
    return MetricTable("OpenLane lane metrics", ["metric", "value"], [[k, v] for k, v in r.items()],
                       {"metric": "OpenLane-V1 3-D lane", "config": ev.config.as_dict(), **r})


# --------------------------------------------------------------------------- rnds / report


def run_rnds(generated: Path, real: Path, chunk_frames: int = 16, scorer: str = "sharpness", seed: int = 0,
             n_resamples: int = 1000, progress: StepProgress | None = None) -> MetricTable:  # fmt: skip
    """RNDS curve over chunks: (Q[i]/Q_gt[i]) / (Q[1]/Q_gt[1]) with a bootstrap band over videos."""
    from avsim.evaluation.rnds import load_scorer, rnds_summary, score_chunks
    from avsim.evaluation.video_frames import list_clips, read_clip

    fn = load_scorer(scorer)
    cg, cr = list_clips(generated), list_clips(real)
    if len(cg) != len(cr):
        raise AvsimInputError(generated, "clips", f"{len(cg)} generated clips but {len(cr)} real clips")
    def scored(clips: list[Path], step: str) -> np.ndarray:
        rows = []
        for i, clip in enumerate(clips):
            rows.append(score_chunks([read_clip(clip)], chunk_frames, fn)[0])
            report_step(progress, step, i + 1, len(clips))
        c = min(len(r) for r in rows)  # as score_chunks over all videos: the shortest video's chunks
        return np.stack([r[:c] for r in rows])

    qg, qr = scored(cg, "RNDS generated"), scored(cr, "RNDS real")
    c = min(qg.shape[1], qr.shape[1])
    res = rnds_summary(qg[:, :c], qr[:, :c], n_resamples, seed)
    rows: list[list[Any]] = [[i + 1, float(res.curve[i]), float(res.band_low[i]), float(res.band_high[i])] for i in range(c)]
    warnings = [f"band {res.band_note}: one video pair, so there is no spread to resample"] if res.band_note else []
    return MetricTable("RNDS", ["chunk", "mean", "band low", "band high"], rows,
                       {"metric": "RNDS", "scorer": scorer, "chunk_frames": chunk_frames, **res.as_dict(),
                        "warnings": warnings})  # fmt: skip


def _ci_row(name: str, d: dict[str, Any]) -> list[Any]:
    if d.get("note"):  # too few units to resample: say so instead of a degenerate interval
        return [name, d["estimate"], d["note"], ""]
    return [name, d["estimate"], d["ci_low"], d["ci_high"]]


def report_headlines(result: dict[str, Any]) -> MetricTable:
    """The report's headline gaps (LET-AP/APL/APH mean, lane F1, FID/FVD) as a table; the
    document is the report itself."""
    rows = []
    det = result.get("detection", {})
    if "intervals" in det:
        for m in ("ap", "apl", "aph"):
            rows.append(_ci_row(f"LET-3D-{m.upper()} gap ({_HEADLINE_ROW})", det["intervals"][f"waymo_mean/{m}/gap"]))
    ln = result.get("lanes", {})
    if "intervals" in ln:
        rows.append(_ci_row("lane F1 gap", ln["intervals"]["f_score/gap"]))
    for kind in ("fid", "fvd"):
        d = result.get("video", {}).get(kind, {})
        if "unbiased_n_minus_1" in d:
            rows.append(_ci_row(f"{kind.upper()} (N-1)", d["unbiased_n_minus_1"]))
    return MetricTable("detection-gap report", ["headline", "estimate", "95% low", "95% high"], rows, result)
