"""`avsim run eval detect`: the labels oracle over a dataset of clip folders, one clip per task,
merged on the driver into the same bytes `avsim eval detect` writes for the same clips (local
and Ray engines), resumed by content after a kill -9, and one-line errors (bad detector spec,
a clip without labels, the former `avsim run eval DATASET OUT --metric` form).

Two tiny control renders (3 frames, 320x180, two cameras) stand in for both sides, as in
tests/test_eval_detect.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from job_hang import claimed_pid

from avsim.cli.main import main
from avsim.jobs.items import HANG_ENV

ORACLE = "avsim.evaluation.detectors:LabelsOracle"
CAMS = "camera_front_wide_120fov,camera_cross_right_120fov"
CLIPS = ("avsim_sample_seed0", "avsim_sample_seed1")
MERGED = ("detect.json", "detections.parquet", "lanes.parquet", "gt/boxes.parquet", "gt/lanes.parquet")


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two clip folders (labels and videos): the sample with seeds 0 and 1, rendered."""
    from avsim.scenario.workflows import write_sample

    root = tmp_path_factory.mktemp("detect_clips")
    for seed in (0, 1):
        write_sample(root / f"s{seed}", seed=seed, duration_s=1.0)
        assert main(["render", str(root / f"s{seed}"), str(root / "clips"), "--labels", "--frames", "3", "--fps", "10",
                     "--size", "320x180", "--cameras", CAMS]) == 0  # fmt: skip
    assert sorted(p.name for p in (root / "clips").iterdir()) == list(CLIPS)
    return root / "clips"


@pytest.fixture(scope="module")
def single(clips: Path) -> Path:
    """`avsim eval detect` of the clips on both sides: what the dataset job must reproduce."""
    out = clips.parent / "single"
    assert main(["eval", "detect", str(clips), str(out), "--generated", str(clips), "--detector", ORACLE]) == 0
    return out


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` by relative path: its bytes, or a link's target."""
    return {p.relative_to(root).as_posix(): (os.readlink(p) if p.is_symlink() else p.read_bytes())
            for p in sorted(root.rglob("*")) if (p.is_file() or p.is_symlink()) and p.relative_to(root).as_posix() != "ray.log"}  # fmt: skip


def _merged(out: Path) -> dict[str, bytes | str]:
    """The files of `out` a dataset job adds nothing to: all but the items (`clips/`) and job_report.json."""
    return {k: v for k, v in _tree(out).items() if k != "job_report.json" and "/clips/" not in f"/{k}"}


def _statuses(out: Path) -> dict[str, str]:
    return {i["name"]: i["status"] for i in json.loads((out / "job_report.json").read_text())["items"]}


@pytest.mark.e2e
def test_dataset_run_writes_the_bytes_of_eval_detect_and_the_report_reads_them(clips: Path, single: Path, tmp_path: Path,
                                                                               capsys, monkeypatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    args = ["run", "eval", "detect", str(clips), "run", "--generated", str(clips), "--detector", ORACLE, "--workers", "1"]  # OUT relative
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "real: 6 frames of 2 clip(s), cameras camera_cross_right_120fov, camera_front_wide_120fov; " in printed
    assert "ground-truth boxes (" in printed and " more seen by no evaluated camera, left out) -> run/real" in printed
    assert "generated: 6 frames of 2 clip(s)" in printed
    assert "next: avsim eval report --real run/real --generated run/generated" in printed
    merged = _merged(out)
    assert merged == _tree(single)  # every file, videos/ links included, byte for byte
    assert {f"{side}/{f}" for side in ("real", "generated") for f in MERGED} <= set(merged)
    assert _statuses(out) == {f"{side}/{c}": "done" for side in ("real", "generated") for c in CLIPS}
    part = json.loads((out / "real" / "clips" / CLIPS[1] / "detect.json").read_text())
    assert [c["clip"] for c in part["clips"]] == [CLIPS[1]] and part["frames"] == 3
    # the second command of the gap report, unchanged, on the job's output
    assert main(["eval", "report", "--real", str(out / "real"), "--generated", str(out / "generated"), "--gt", str(out / "real" / "gt"),
                 "--out", str(tmp_path / "report"), "--no-video-metrics", "--n-resamples", "20"]) == 0  # fmt: skip
    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    assert rep["detection"]["intervals"]["waymo_mean/ap/gap"]["estimate"] == pytest.approx(0.0)
    # a rerun skips every clip and writes the same files; a changed clip runs again, alone
    item = out / "real" / "clips" / CLIPS[0] / "detections.parquet"
    before = item.stat().st_mtime_ns
    assert main(args) == 0
    assert set(_statuses(out).values()) == {"skipped"} and item.stat().st_mtime_ns == before
    assert _merged(out) == merged


@pytest.mark.e2e
@pytest.mark.subprocess
def test_a_job_killed_with_sigkill_resumes_skipping_the_clips_done(clips: Path, single: Path, tmp_path: Path) -> None:
    """One side, one worker: clip 0 finishes, clip 1 writes its part and hangs; kill -9 the driver
    and the worker; the rerun skips clip 0 (its digest), redoes clip 1 and merges the same bytes."""
    hang, out = tmp_path / "hang", tmp_path / "run"
    hang.mkdir()
    (hang / f"{CLIPS[1]}.hang").write_text("")
    env = {**os.environ, HANG_ENV: str(hang), "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "avsim"), "run", "eval", "detect", str(clips), str(out), "--detector", ORACLE, "--workers", "1"]
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pid = claimed_pid(hang / f"{CLIPS[1]}.pid", lambda: driver.poll() is None, 600, lambda: driver.communicate()[1][-2000:])
    driver.kill()
    driver.wait(60)
    os.kill(pid, signal.SIGKILL)
    items = out / "clips"
    assert (items / CLIPS[0] / "job.json").is_file() and not (items / CLIPS[1]).exists()
    assert any(p.name.startswith(f".{CLIPS[1]}.tmp") for p in items.iterdir())  # the killed worker's temporary
    assert not (out / "detect.json").exists()  # nothing merged
    assert main(["run", "eval", "detect", str(clips), str(out), "--detector", ORACLE, "--workers", "1"]) == 0
    assert _statuses(out) == {CLIPS[0]: "skipped", CLIPS[1]: "done"}
    assert [p for p in out.rglob(".*")] == []  # the rerun removed the dead worker's temporary
    assert _merged(out) == _tree(single / "real")


@pytest.mark.distributed
def test_ray_retries_a_killed_worker_and_gives_the_local_bytes(clips: Path, single: Path, ray_hang_dir: Path, tmp_path: Path) -> None:
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    both = ["--generated", str(clips), "--detector", ORACLE]
    assert main(["run", "eval", "detect", str(clips), str(local), *both, "--workers", "1"]) == 0
    hang_dir = ray_hang_dir / "real"  # item names are <side>/<clip>: the claim is real/<clip>.hang
    hang_dir.mkdir()
    (hang_dir / f"{CLIPS[0]}.hang").write_text("")
    codes: list[int] = []
    job = threading.Thread(target=lambda: codes.append(main(["run", "eval", "detect", str(clips), str(on_ray), *both, "--engine", "ray"])))
    job.start()
    os.kill(claimed_pid(hang_dir / f"{CLIPS[0]}.pid", job.is_alive, 600), signal.SIGKILL)
    job.join(900)
    assert codes == [0]
    assert [p for p in on_ray.rglob(".*")] == []
    assert _tree(on_ray).keys() == _tree(local).keys()
    tree_ray, tree_local = _tree(on_ray), _tree(local)
    for key in tree_local:  # merged files, items' tables and job.json records: the same bytes
        if key != "job_report.json":
            assert tree_ray[key] == tree_local[key], key
    assert _merged(on_ray) == _tree(single)
    assert json.loads((on_ray / "job_report.json").read_text())["engine"] == "ray"


@pytest.mark.e2e
def test_a_clip_without_labels_fails_alone_in_one_line(clips: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / CLIPS[0]).symlink_to(clips / CLIPS[0], target_is_directory=True)
    (data / "unlabelled").mkdir()
    (data / "unlabelled" / f"unlabelled.{CAMS.split(',')[0]}.mp4").write_bytes((clips / CLIPS[0] / f"{CLIPS[0]}.{CAMS.split(',')[0]}.mp4").read_bytes())
    out = tmp_path / "out"
    assert main(["run", "eval", "detect", str(data), str(out), "--detector", ORACLE, "--workers", "1"]) == 1
    items = {i["name"]: i for i in json.loads((out / "job_report.json").read_text())["items"]}
    assert items[CLIPS[0]]["status"] == "done"
    reason = items["unlabelled"]["reason"]
    assert items["unlabelled"]["status"] == "failed" and "labels/index.json" in reason and "\n" not in reason
    assert not (out / "detect.json").exists() and not (out / "detections.parquet").exists()  # no merge over a failed clip
    assert "1 done, 0 skipped, 1 failed" in capsys.readouterr().err


def test_bad_detector_and_the_former_form_are_one_line(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    (data / "c").mkdir(parents=True)
    for spec, says in (("nocolon", "expected MODULE:CALLABLE"), ("avsim.nope:X", "cannot import"),
                       ("avsim.evaluation.detect:FRONT_CAMERA", "is not callable")):  # fmt: skip
        assert main(["run", "eval", "detect", str(data), str(tmp_path / "out"), "--detector", spec]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --detector") and says in err and "\n" not in err, err
        assert not (tmp_path / "out").exists()  # refused before anything is written
    assert main(["run", "eval", str(data), str(tmp_path / "out"), "--real", str(data), "--metric", "fid"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "avsim run eval fid|fvd DATASET OUT --real REAL" in err and "avsim run eval detect" in err, err
    assert main(["run", "eval", "--metric", "fvd", str(data)]) == 2
    assert "--metric is gone" in capsys.readouterr().err


def test_dataset_items_are_clip_folders_or_folders_of_them(tmp_path: Path) -> None:
    """One clip, a flat folder of clips, the nested `avsim run render --labels` layout, and other folders (items that
    will fail): the shapes `avsim eval detect` takes."""
    from avsim.jobs.kinds import read_items

    def clip(path: Path) -> None:
        (path / "labels").mkdir(parents=True)
        (path / "labels" / "index.json").write_text("{}")

    clip(tmp_path / "d" / "flat")
    clip(tmp_path / "d" / "render_item" / "c1")
    clip(tmp_path / "d" / "render_item" / "c0")
    (tmp_path / "d" / "other").mkdir()
    (tmp_path / "d" / ".hidden").mkdir()
    (tmp_path / "d" / "job_report.json").write_text("{}")
    items = read_items(tmp_path / "d", "detect")
    assert [(i.name, i.path.relative_to(tmp_path / "d").as_posix()) for i in items] == [
        ("flat", "flat"), ("other", "other"), ("render_item.c0", "render_item/c0"), ("render_item.c1", "render_item/c1")]
    assert [(i.name, i.path) for i in read_items(tmp_path / "d" / "flat", "detect")] == [("flat", tmp_path / "d" / "flat")]
    manifest = tmp_path / "list.csv"
    manifest.write_text(f"path,detector\n{tmp_path / 'd' / 'flat'},x:y\n")
    with pytest.raises(Exception, match="unknown option column"):  # one detector per job
        read_items(manifest, "detect")
