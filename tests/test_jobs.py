"""`avsim run` dataset jobs (avsim.jobs): local and Ray engines give the same bytes, a killed Ray
worker is retried without stray temporaries, a broken item fails alone, resume by content, CSV
manifests, and FID merged from per-clip tasks equal to the one-process FID (and its bootstrap
interval over clips equal to the report's function).

Renders are tiny (3 frames, 160x90, one camera). The Ray tests share one local Ray instance with
2 CPUs (starting one costs ~10 s here) and skip when ray is not installed (`avsim[ray]`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from job_hang import claimed_pid, needs_ray

from avsim.cli.main import main

CAMERA = "camera_front_wide_120fov"
TINY = ["--frames", "3", "--size", "160x90", "--cameras", CAMERA]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two sample scenarios, `a` (seed 0) and `b` (seed 1), 2 s each."""
    from avsim.scenario.workflows import write_sample

    root = tmp_path_factory.mktemp("dataset")
    for name, seed in (("a", 0), ("b", 1)):
        write_sample(root / name, seed=seed, duration_s=2.0)
    return root


def _files(root: Path) -> dict[str, Path]:
    # `ray.log`: what Ray itself printed while the job ran (none on the local engine)
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file() and p.relative_to(root).as_posix() != "ray.log"}


TIMING_KEYS = ("seconds", "camera_frames_per_s", "render_cpu_s", "encode_cpu_s", "composite_cpu_s", "finished_utc")


def _without_timings(doc: object) -> object:
    """`doc` with every timing field (wall, CPU, rates, finish time) removed, at any depth."""
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k not in TIMING_KEYS}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


def _summary(path: Path, out: Path) -> dict:
    doc = json.loads(path.read_text())
    doc["outputs"] = [str(Path(o).relative_to(out)) for o in doc["outputs"]]
    doc["written_by_run"] = {str(Path(o).relative_to(out)): k for o, k in doc["written_by_run"].items()}
    clean = _without_timings(doc)
    assert isinstance(clean, dict)
    return clean


@pytest.mark.distributed
@needs_ray
def test_local_and_ray_render_the_same_bytes_and_summaries(dataset: Path, ray_hang_dir: Path, tmp_path: Path) -> None:
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert main(["run", "render", str(dataset), str(local), *TINY, "--workers", "1"]) == 0
    assert main(["run", "render", str(dataset), str(on_ray), *TINY, "--engine", "ray"]) == 0
    files_local, files_ray = _files(local), _files(on_ray)
    assert sorted(files_local) == sorted(files_ray)
    videos = [k for k in files_local if k.endswith(".mp4")]
    assert videos == ["a/avsim_sample_seed0/avsim_sample_seed0.camera_front_wide_120fov.mp4",
                      "b/avsim_sample_seed1/avsim_sample_seed1.camera_front_wide_120fov.mp4"]  # fmt: skip
    for key in videos:
        assert files_local[key].read_bytes() == files_ray[key].read_bytes(), key
    for key in (k for k in files_local if k.endswith("render_summary.json")):
        assert _summary(files_local[key], local) == _summary(files_ray[key], on_ray)
    for key in ("a/job.json", "b/job.json"):
        assert files_local[key].read_bytes() == files_ray[key].read_bytes()
    report = json.loads((on_ray / "job_report.json").read_text())
    assert report["counts"] == {"done": 2, "skipped": 0, "failed": 0} and report["engine"] == "ray"


@pytest.mark.distributed
@needs_ray
def test_a_killed_ray_worker_is_retried_and_leaves_no_temporaries(dataset: Path, ray_hang_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (ray_hang_dir / "a.hang").write_text("")  # item a: write its outputs, then sleep until killed
    codes: list[int] = []
    job = threading.Thread(target=lambda: codes.append(main(["run", "render", str(dataset), str(out), *TINY, "--engine", "ray"])))
    job.start()
    pid = claimed_pid(ray_hang_dir / "a.pid", job.is_alive, 600)
    half_written = [p.name for p in out.iterdir() if p.name.startswith(".a.tmp")]
    assert len(half_written) == 1 and any((out / half_written[0]).rglob("*.mp4"))
    os.kill(pid, signal.SIGKILL)
    job.join(900)
    assert codes == [0]
    assert [p for p in out.rglob(".*")] == []  # the retry removed the dead worker's temporary
    report = json.loads((out / "job_report.json").read_text())
    assert [(i["name"], i["status"]) for i in report["items"]] == [("a", "done"), ("b", "done")]
    assert (out / "a" / "avsim_sample_seed0" / f"avsim_sample_seed0.{CAMERA}.mp4").is_file()


@pytest.mark.e2e
def test_a_broken_item_fails_alone_with_its_one_line_reason(dataset: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "good").symlink_to(dataset / "a", target_is_directory=True)
    (data / "broken").mkdir()
    (data / "broken" / "scenario.json").write_text("{ not json")
    out = tmp_path / "out"
    assert main(["run", "render", str(data), str(out), *TINY, "--workers", "1"]) == 1
    report = json.loads((out / "job_report.json").read_text())
    status = {i["name"]: (i["status"], i["reason"]) for i in report["items"]}
    assert status["good"] == ("done", "")
    assert status["broken"][0] == "failed" and "scenario.json" in status["broken"][1] and "\n" not in status["broken"][1]
    assert not (out / "broken").exists() and [p for p in out.rglob(".*")] == []
    err = capsys.readouterr().err
    assert "1 done, 0 skipped, 1 failed" in err and "broken" in err


@pytest.mark.e2e
def test_manifest_csv_resume_and_option_change(dataset: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "list.csv"
    (tmp_path / "scenes").symlink_to(dataset, target_is_directory=True)
    manifest.write_text("path,name,frames\nscenes/a,first,\nscenes/b,second,2\n")  # relative to the manifest
    out = tmp_path / "out"

    def run(*extra: str) -> dict[str, str]:
        assert main(["run", "render", str(manifest), str(out), *TINY, "--workers", "1", *extra]) == 0
        return {i["name"]: i["status"] for i in json.loads((out / "job_report.json").read_text())["items"]}

    assert run() == {"first": "done", "second": "done"}
    frames = json.loads((out / "second" / "avsim_sample_seed1" / "render_summary.json").read_text())["frames"]
    assert frames == 2  # the manifest's column overrides --frames 3
    video = out / "first" / "avsim_sample_seed0" / f"avsim_sample_seed0.{CAMERA}.mp4"
    before = video.stat().st_mtime_ns
    assert run() == {"first": "skipped", "second": "skipped"}
    assert video.stat().st_mtime_ns == before
    # --frames 4 changes the first item's options only (the second keeps its own frames=2)
    assert main(["run", "render", str(manifest), str(out), "--frames", "4", "--size", "160x90", "--cameras", CAMERA, "--workers", "1"]) == 0
    items = {i["name"]: i["status"] for i in json.loads((out / "job_report.json").read_text())["items"]}
    assert items == {"first": "done", "second": "skipped"}
    assert json.loads((out / "first" / "avsim_sample_seed0" / "render_summary.json").read_text())["frames"] == 4


def test_bad_manifest_column_and_missing_ray_are_one_line_errors(dataset: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    manifest = tmp_path / "list.csv"
    manifest.write_text(f"path,colour\n{dataset / 'a'},red\n")
    assert main(["run", "render", str(manifest), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "colour" in err and "\n" not in err
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    assert main(["run", "render", str(dataset), str(tmp_path / "out"), *TINY, "--engine", "ray"]) == 1
    err = capsys.readouterr().err.strip()
    assert "avsim[ray]" in err and "\n" not in err and not (tmp_path / "out").exists()


def test_merged_gaussian_statistics_equal_one_process_frechet() -> None:
    from avsim.evaluation.frechet import frechet_distance_features
    from avsim.jobs.fid import RunningGaussian, merged_frechet

    rng = np.random.default_rng(0)
    for rows, extra, dim in ((300, 7, 8), (5, 1, 8)):  # the statistics path (N >= D) and the sample-space path (N < D)
        x = 1e3 + rng.normal(size=(rows, dim)) @ rng.normal(size=(dim, dim))  # far-off mean: cancellation-prone
        y = 1e3 + 0.5 + rng.normal(size=(rows + extra, dim))
        a, b = RunningGaussian(dim), RunningGaussian(dim)
        for block in np.array_split(x, 7):
            a.add(block)
        for block in np.array_split(y, 3):
            b.add(block)
        for norm in ("unbiased_n_minus_1", "biased_n"):
            one = frechet_distance_features(x, y, norm)
            assert merged_frechet(a, b, norm) == pytest.approx(one, rel=1e-9, abs=0)


def _clip_folder(path: Path, frames: np.ndarray) -> None:
    from PIL import Image

    path.mkdir(parents=True)
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(path / f"{i:04d}.png")


@pytest.mark.slow
def test_fid_over_a_dataset_in_tasks_equals_one_process(tmp_path: Path) -> None:
    from avsim.evaluation.weights import find_inception_torchscript, inception_fetch_command

    if find_inception_torchscript() is None:
        pytest.skip(f"FID Inception weights not installed; run: {inception_fetch_command()}")
    from avsim.evaluation.jobs import run_fid
    from avsim.jobs.engines import EngineConfig
    from avsim.jobs.fid import ClipBootstrap
    from avsim.jobs.run import run_job

    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, size=(1, 48, 64, 3))
    for side, shift in (("real", 0), ("gen", 40)):  # 2 clips of 1 frame per side: 2 rows per side, 4 tasks
        for k in range(2):
            frames = np.clip(base + rng.integers(-30, 30, size=(1, 48, 64, 3)) + shift, 0, 255).astype(np.uint8)
            _clip_folder(tmp_path / side / f"clip{k}", frames)
    # Few Inception frames keep this CPU test short (a frame takes seconds on 2 busy cores); the
    # one-process FID reads the features the tasks wrote to the shared cache (the merge is tested).
    cache = tmp_path / "cache"
    options = {"cache": str(cache)}
    boot = ClipBootstrap(n_resamples=4, seed=3)  # each draw builds two 2048^2 covariances (~0.3 s on 2 busy cores)
    report = run_job("eval", tmp_path / "gen", tmp_path / "out", options, EngineConfig("local", workers=1), real=tmp_path / "real",
                     bootstrap=boot)  # fmt: skip
    assert not report.failed and report.frechet is not None and len(list(cache.glob("*.npy"))) == 4
    one = run_fid(tmp_path / "real", tmp_path / "gen", cache=cache).document["fid"]
    assert report.frechet["frames"] == {"real": 2, "generated": 2} and report.frechet["clips"] == {"real": 2, "generated": 2}
    for norm, value in one.items():
        assert report.frechet["fid"][norm] == pytest.approx(value, rel=1e-9, abs=0)
    assert json.loads((tmp_path / "out" / "fid.json").read_text())["fid"] == pytest.approx(one, rel=1e-9)
    _check_interval_equals_one_process(tmp_path, cache, boot, report.frechet["bootstrap"])


def _check_interval_equals_one_process(tmp_path: Path, cache: Path, boot: Any, intervals: dict[str, Any]) -> None:
    """The dataset's bootstrap interval equals `frechet_interval_over_clips` on the one-process
    features (from the feature cache) exactly; with 1 clip on a side it is n/a."""
    from avsim.evaluation.features import FeatureCache, fid_clip_features
    from avsim.evaluation.inception import load_fid_inception
    from avsim.evaluation.report_config import ReportConfig
    from avsim.evaluation.report_video import frechet_interval_over_clips
    from avsim.jobs.fid import clip_intervals

    defaults, ours = {f.name: f.default for f in dataclasses.fields(ReportConfig)}, type(boot)()
    assert (ours.n_resamples, ours.level, ours.seed) == (defaults["n_resamples"], defaults["level"], defaults["seed"])
    inception, src = load_fid_inception(None)
    fr, fg = (fid_clip_features(sorted((tmp_path / side).iterdir()), inception, src, cache=FeatureCache(cache)) for side in ("real", "gen"))
    written = json.loads((tmp_path / "out" / "fid.json").read_text())["bootstrap"]
    for norm in ("unbiased_n_minus_1", "biased_n"):
        expected = frechet_interval_over_clips(fr, fg, norm, 4, 0.95, 3).as_dict()  # type: ignore[arg-type]
        assert intervals[norm] == expected and written[norm] == expected
        assert expected["n_units"] == 4 and expected["ci_low"] < expected["ci_high"] and "note" not in expected
    one_clip = tmp_path / "one_clip"  # an item folder holding one real clip of both real frames
    one_clip.mkdir()
    np.save(one_clip / "features.npy", np.concatenate(fr), allow_pickle=False)
    single = clip_intervals([one_clip], sorted((tmp_path / "out" / "generated").iterdir()), boot)
    for interval in single.values():  # 1 real clip: no interval
        assert interval["note"] == "n/a (1 clip)" and math.isnan(interval["ci_low"]) and interval["resampling_unit"] == "clip"


@pytest.mark.distributed
@needs_ray
def test_done_when_converted_shared_scenes_render_on_ray(shared_data: Path, ray_hang_dir: Path, tmp_path: Path) -> None:
    sources = sorted((shared_data / "scenarionet").glob("sd_nuscenes_*.pkl"))[:2] + sorted((shared_data / "scenarionet").glob("sd_waymo_*.pkl"))
    if len(sources) < 3:
        pytest.skip("needs 2 nuScenes and 1 Waymo ScenarioNet pickle in ../shared/data/scenarionet")
    manifest = tmp_path / "sources.csv"
    manifest.write_text("path\n" + "".join(f"{p}\n" for p in sources))
    scenes, videos = tmp_path / "scenes", tmp_path / "videos"
    assert main(["run", "convert", str(manifest), str(scenes), "--workers", "1"]) == 0
    assert main(["run", "render", str(scenes), str(videos), *TINY, "--rig", "cosmos", "--engine", "ray"]) == 0
    assert len(list(videos.rglob("*.mp4"))) == 3
    report = json.loads((videos / "job_report.json").read_text())
    assert report["counts"] == {"done": 3, "skipped": 0, "failed": 0}
