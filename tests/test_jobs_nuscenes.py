"""`avsim run export nuscenes` (issue 56): a dataset of labelled clips, one clip per task, joined on the driver into
one nuScenes dataroot with the same bytes as one `avsim export nuscenes` of the same clips (local and Ray engines),
resumed by content after a kill -9, and a bad clip failing alone in one line with nothing joined.

Two tiny renders (the sample, seeds 0 and 1: two scenarios, two logs; 0.6 s, 12 fps, 320x180, six cameras) stand
in for a rendered dataset.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from job_hang import claimed_pid
from nuscenes_export_checks import check_structure, open_export

from avsim.cli.main import main
from avsim.jobs.items import HANG_ENV

CAMS = "camera_front_wide_120fov,camera_cross_right_120fov,camera_rear_right_70fov,camera_rear_tele_30fov,camera_rear_left_70fov,camera_cross_left_120fov"
CLIPS = ("avsim_sample_seed0", "avsim_sample_seed1")
VERSION = "v1.0-mini"
JOINED = ("v1.0-mini", "samples", "sweeps", "maps", "README.md", "avsim_export.json")


@pytest.fixture(scope="module")
def data(session_sample_1s_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`scenarios/` (two samples) and `clips/` (their renders with labels, videos only)."""
    from avsim.scenario.workflows import write_sample

    root = tmp_path_factory.mktemp("nuscenes_jobs")
    shutil.copytree(session_sample_1s_dir, root / "scenarios" / "s0")  # seed 0
    write_sample(root / "scenarios" / "s1", seed=1, duration_s=1.0)
    for seed in (0, 1):
        assert main(["render", str(root / "scenarios" / f"s{seed}"), str(root / "clips"), "--labels", "--frames", "8", "--fps", "12",
                     "--size", "320x180", "--cameras", CAMS]) == 0  # fmt: skip
    assert sorted(p.name for p in (root / "clips").iterdir()) == list(CLIPS)
    return root


@pytest.fixture(scope="module")
def single(data: Path) -> Path:
    """`avsim export nuscenes` of both clips at once: what the dataset job must reproduce."""
    out = data / "single"
    assert main(["export", "nuscenes", str(data / "clips"), str(out), "--scenario", str(data / "scenarios"), "--version", VERSION]) == 0
    return out


def _joined(root: Path) -> dict[str, bytes]:
    """Every file of the dataroot proper (not the items in scenes/, not job_report.json) by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for name in JOINED for p in sorted((root / name).rglob("*"))
            if p.is_file()} | ({n: (root / n).read_bytes() for n in JOINED if (root / n).is_file()})  # fmt: skip


def _statuses(out: Path) -> dict[str, str]:
    return {i["name"]: i["status"] for i in json.loads((out / "job_report.json").read_text())["items"]}


@pytest.mark.e2e
def test_dataset_job_joins_the_bytes_of_one_export_and_reruns_skip(data: Path, single: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "export", "nuscenes", str(data / "clips"), str(out), "--scenario", str(data / "scenarios"), "--version", VERSION,
            "--workers", "2"]  # fmt: skip
    assert main(args) == 0
    assert _statuses(out) == {c: "done" for c in CLIPS}
    assert _joined(out) == _joined(single)
    nusc = open_export(out, VERSION)
    check_structure(nusc, out)
    assert len(nusc.scene) == 2 and sorted(g["location"] for g in nusc.log) == ["boston-seaport", "singapore-onenorth"]
    nusc.list_scenes()  # the devkit sorts scenes by start time: both scenarios start at 0, their scenes do not
    assert main(args) == 0
    assert _statuses(out) == {c: "skipped" for c in CLIPS}
    assert _joined(out) == _joined(single)


@pytest.mark.e2e
@pytest.mark.subprocess
def test_a_job_killed_with_sigkill_resumes_skipping_the_clip_done(data: Path, single: Path, tmp_path: Path) -> None:
    """One worker: clip 0 finishes, clip 1 writes its part and hangs; kill -9 the driver and the worker; the rerun
    skips clip 0 (its digest), redoes clip 1 and joins the same bytes."""
    hang, out = tmp_path / "hang", tmp_path / "run"
    hang.mkdir()
    (hang / f"{CLIPS[1]}.hang").write_text("")
    env = {**os.environ, HANG_ENV: str(hang), "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "avsim"), "run", "export", "nuscenes", str(data / "clips"), str(out), "--scenario",
           str(data / "scenarios"), "--version", VERSION, "--workers", "1"]  # fmt: skip
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pid = claimed_pid(hang / f"{CLIPS[1]}.pid", lambda: driver.poll() is None, 600, lambda: driver.communicate()[1][-2000:])
    driver.kill()
    driver.wait(60)
    os.kill(pid, signal.SIGKILL)
    assert (out / "scenes" / CLIPS[0] / "job.json").is_file() and not (out / "scenes" / CLIPS[1]).exists()
    assert not (out / VERSION).exists()  # nothing joined
    assert main(cmd[1:-2] + ["--workers", "1"]) == 0
    assert _statuses(out) == {CLIPS[0]: "skipped", CLIPS[1]: "done"}
    assert [p for p in out.rglob(".*")] == []
    assert _joined(out) == _joined(single)


@pytest.mark.distributed
def test_ray_gives_the_local_bytes(data: Path, single: Path, ray_hang_dir: Path, tmp_path: Path) -> None:
    (ray_hang_dir / f"{CLIPS[0]}.hang").write_text("")
    codes: list[int] = []
    out = tmp_path / "ray"
    job = threading.Thread(target=lambda: codes.append(main(["run", "export", "nuscenes", str(data / "clips"), str(out), "--scenario",
                                                              str(data / "scenarios"), "--version", VERSION, "--engine", "ray"])))  # fmt: skip
    job.start()
    os.kill(claimed_pid(ray_hang_dir / f"{CLIPS[0]}.pid", job.is_alive, 600), signal.SIGKILL)  # a worker dies: Ray retries it
    job.join(900)
    assert codes == [0]
    assert _joined(out) == _joined(single)
    assert json.loads((out / "job_report.json").read_text())["engine"] == "ray"


@pytest.mark.e2e
def test_a_clip_of_another_scenario_fails_alone_in_one_line(data: Path, tmp_path: Path, capsys) -> None:
    clips = tmp_path / "clips"
    shutil.copytree(data / "clips", clips)
    index = clips / CLIPS[1] / "labels" / "index.json"
    doc = json.loads(index.read_text())
    doc["scenario_id"] = "nowhere"
    index.write_text(json.dumps(doc))
    out = tmp_path / "run"
    assert main(["run", "export", "nuscenes", str(clips), str(out), "--scenario", str(data / "scenarios"), "--version", VERSION]) == 1
    report = json.loads((out / "job_report.json").read_text())
    (failed,) = [i for i in report["items"] if i["status"] == "failed"]
    assert failed["name"] == CLIPS[1] and "no scenario with id 'nowhere'" in failed["reason"] and "\n" not in failed["reason"]
    assert not (out / VERSION).exists() and (out / "scenes" / CLIPS[0] / "job.json").is_file()
    assert main(["run", "export", "nuscenes", str(clips), str(tmp_path / "o2"), "--scenario", str(tmp_path / "none")]) == 1
    assert "--scenario" in capsys.readouterr().err
