"""`avsim run generate|pair|encode`: the perception team's data engine at dataset scale.

From a folder of two scenes, `avsim run render --labels` (30 fps), `avsim run generate` (the
debug model, random weights, on the CPU: the path a GPU run takes), `avsim run pair` and
`avsim run encode` give a labelled synthetic dataset and a post-training layout with its latent
cache; reruns skip what is current, a refused item fails alone, the generated labels point at
the generated frames (by timestamp), and the Ray engine, with a worker killed mid-item, writes
what the local engine writes.

Renders are tiny (13 frames at 30 fps = 5 model frames, the debug size 112x64, the 7 model
cameras); generation runs one view with one step.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from job_hang import claimed_pid

from avsim.cli.main import main
from avsim.core.rig import COSMOS_VIEW_NAMES

CAM = "camera_front_wide_120fov"
FRAMES_30FPS = 13  # model frames 0..4 at 10 fps are render frames 0, 3, ..., 12
GENERATE = ["--config", "debug", "--random-weights", "--steps", "1", "--views", "front_wide"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`avsim run render --labels` of two sample scenes: ROOT/render/{a,b}/<clip>/ (7 cameras, 30 fps)."""
    from avsim.scenario.workflows import write_sample

    root = tmp_path_factory.mktemp("engine")
    for name, seed in (("a", 0), ("b", 1)):
        write_sample(root / "scenes" / name, seed=seed, duration_s=1.0)
    assert main(["run", "render", str(root / "scenes"), str(root / "render"), "--labels", "--fps", "30", "--frames",
                 str(FRAMES_30FPS), "--size", "112x64", "--rig", "cosmos", "--workers", "1"]) == 0  # fmt: skip
    return root


@pytest.fixture(scope="module")
def generated(rendered: Path) -> Path:
    """`avsim run generate` of the render on the local engine: ROOT/generated/{a,b}/<clip>/."""
    assert main(["run", "generate", str(rendered / "render"), str(rendered / "generated"), *GENERATE, "--workers", "1"]) == 0
    return rendered / "generated"


def _files(root: Path) -> dict[str, Path]:
    # `ray.log`: what Ray itself printed while the job ran (none on the local engine)
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file() and p.relative_to(root).as_posix() != "ray.log"}


def _statuses(out: Path) -> dict[str, str]:
    return {i["name"]: i["status"] for i in json.loads((out / "job_report.json").read_text())["items"]}


def _write_real(root: Path, noisy_item: str) -> Path:
    """Stand-in recordings REAL/<item>/<clip>.<camera>.mp4 (moving gradients); one view of `noisy_item` is noise."""
    from avsim.core.video import MP4Writer
    from avsim.train.smoke import write_synthetic_video

    real = root / "real"
    for item, clip in (("a", "avsim_sample_seed0"), ("b", "avsim_sample_seed1")):
        (real / item).mkdir(parents=True, exist_ok=True)
        for j, cam in enumerate(COSMOS_VIEW_NAMES):
            path = real / item / f"{clip}.{cam}.mp4"
            if item == noisy_item and j == 0:
                rng = np.random.default_rng(j)
                with MP4Writer(path, 112, 64, fps=30.0) as writer:
                    for _ in range(FRAMES_30FPS):
                        writer.write(rng.integers(0, 256, (64, 112, 3), dtype=np.uint8))
            else:
                write_synthetic_video(path, j, "rgb", FRAMES_30FPS, 112, 64)
    return real


def _check_labels_by_timestamp(clip_dir: Path, render_clip_dir: Path) -> None:
    """Generated frame k is shown at k / 10 s and its labels are the render's labels of that time."""
    from avsim.models.video_io import frame_times_s

    clip = clip_dir.name
    generated_ns = [round(t * 1e9) for t in frame_times_s(clip_dir / f"{clip}.{CAM}.mp4")]
    assert generated_ns == [k * 100_000_000 for k in range(5)]
    index = json.loads((clip_dir / "labels" / "index.json").read_text())
    source = json.loads((render_clip_dir / "labels" / "index.json").read_text())
    first_ns = source["frames"][0]["timestamp_ns"]
    by_time = {f["timestamp_ns"] - first_ns: f for f in source["frames"]}
    render_ns = [round(t * 1e9) for t in frame_times_s(render_clip_dir / f"{clip}.{CAM}.mp4")]
    assert [f["video_frame"] for f in index["frames"]] == [0, 1, 2, 3, 4]
    for k, frame in enumerate(index["frames"]):
        t_ns = frame["timestamp_ns"] - first_ns
        assert abs(t_ns - generated_ns[k]) <= 1 and abs(render_ns[by_time[t_ns]["video_frame"]] - t_ns) <= 1


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_render_generate_pair_encode_make_a_labelled_dataset_and_a_cache(rendered: Path, generated: Path, capsys) -> None:
    import torch

    from avsim.train.data import LatentClipDataset, scan_layout

    render = rendered / "render"
    assert _statuses(generated) == {"a": "done", "b": "done"}
    for item, clip in (("a", "avsim_sample_seed0"), ("b", "avsim_sample_seed1")):
        _check_labels_by_timestamp(generated / item / clip, render / item / clip)
        settings = json.loads((generated / item / clip / "settings.json").read_text())
        assert settings["request"]["out"] == str(generated.resolve() / item / clip)  # the final folder, not the temporary
        assert settings["labels"]["source_frames"] == [0, 3, 6, 9, 12]
    mtime = (generated / "a" / "job.json").stat().st_mtime_ns
    assert main(["run", "generate", str(render), str(generated), *GENERATE, "--workers", "1"]) == 0
    assert _statuses(generated) == {"a": "skipped", "b": "skipped"} and (generated / "a" / "job.json").stat().st_mtime_ns == mtime

    layout, real = rendered / "layout", _write_real(rendered, noisy_item="b")
    capsys.readouterr()
    assert main(["run", "pair", str(render), str(layout), "--real", str(real), "--caption", "a sunny drive", "--workers", "1"]) == 1
    report = {i["name"]: i for i in json.loads((layout / "job_report.json").read_text())["items"]}
    assert report["a"]["status"] == "done" and report["b"]["status"] == "failed"
    assert COSMOS_VIEW_NAMES[0] in report["b"]["reason"] and "noise" in report["b"]["reason"]  # which view, and why
    assert "1 done, 0 skipped, 1 failed" in capsys.readouterr().err
    (record,) = scan_layout(layout)  # the shared layout holds the paired clip only
    assert record.name == "avsim_sample_seed0" and record.caption == "a sunny drive"
    clip_labels = render / "a" / "avsim_sample_seed0" / "labels"
    assert (layout / "labels" / record.name / "index.json").read_bytes() == (clip_labels / "index.json").read_bytes()
    assert record.controls[0].read_bytes() == (render / "a" / record.name / f"{record.name}.{CAM}.mp4").read_bytes()

    cache, single = rendered / "cache", rendered / "cache_single"
    encode = ["--model", "debug", "--random-vae", "--zero-text", "--store-dtype", "float32"]
    assert main(["run", "encode", str(layout), str(cache), *encode, "--workers", "1"]) == 0
    assert main(["train", "encode", str(layout), str(single), *encode]) == 0
    assert "encode VAE encode views (video, control)" in capsys.readouterr().err  # progress per encoded view
    by_job, by_train = LatentClipDataset(cache), LatentClipDataset(single)
    assert by_job.samples == ["avsim_sample_seed0/avsim_sample_seed0_000.safetensors"] and len(by_train) == 1
    for key in ("video", "control", "text"):
        assert torch.equal(by_job[0][key], by_train[0][key]), key


@pytest.mark.distributed
@pytest.mark.timeout(900)
def test_ray_generate_survives_a_killed_worker_and_writes_what_the_local_engine_writes(
    rendered: Path, generated: Path, ray_hang_dir: Path
) -> None:
    from avsim.core.video import read_video

    out = rendered / "generated_ray"
    (ray_hang_dir / "a.hang").write_text("")  # item a: generate, then sleep until killed
    codes: list[int] = []
    argv = ["run", "generate", str(rendered / "render"), str(out), *GENERATE, "--engine", "ray", "--gpus-per-task", "0"]
    job = threading.Thread(target=lambda: codes.append(main(argv)))
    job.start()
    os.kill(claimed_pid(ray_hang_dir / "a.pid", job.is_alive, 900), signal.SIGKILL)  # kill -9 of the worker, its item half written
    job.join(1800)
    assert codes == [0] and _statuses(out) == {"a": "done", "b": "done"}
    assert [p for p in out.rglob(".*")] == []  # the retry removed the dead worker's temporary
    local, on_ray = _files(generated), _files(out)
    assert sorted(local) == sorted(on_ray)
    for key, path in local.items():
        if key.endswith(".mp4"):  # frames, not bytes: libx264's bitstream was seen to vary under load
            assert np.array_equal(read_video(path), read_video(on_ray[key])), key
        elif key.endswith("settings.json"):
            mine, theirs = (json.loads(p.read_text()) for p in (path, on_ray[key]))
            assert mine["request"].pop("out") != theirs["request"].pop("out") and mine == theirs
        elif key != "job_report.json":
            assert path.read_bytes() == on_ray[key].read_bytes(), key


def test_local_gpu_slots_and_the_status_enum() -> None:
    from avsim.core.errors import AvsimValueError
    from avsim.jobs.engines import Engine, EngineConfig, gpu_slots
    from avsim.jobs.run import JobReport
    from avsim.jobs.tasks import ItemResult, ItemStatus

    gpus = ["0", "1", "2", "3"]
    assert gpu_slots(gpus, 1) == gpus and gpu_slots(gpus, 2) == ["0,1", "2,3"] and gpu_slots(gpus, 3) == ["0,1,2"]
    assert gpu_slots(gpus[:2], 0.5) == ["0", "0", "1", "1"]  # two workers share each GPU
    with pytest.raises(AvsimValueError, match="1/k"):
        gpu_slots(gpus, 0.3)
    assert EngineConfig("ray").engine is Engine.RAY and EngineConfig(gpus_per_task=None).gpus_per_task is None
    report = JobReport("generate", [ItemResult("a", ItemStatus.DONE), ItemResult("b", ItemStatus.FAILED, "why")])
    assert report.failed and report.count(ItemStatus.SKIPPED) == 0
    assert json.dumps({"status": ItemStatus.FAILED}) == '{"status": "failed"}' and f"{ItemStatus.DONE}" == "done"


@pytest.mark.subprocess
def test_a_local_worker_sees_only_its_gpu_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine sets CUDA_VISIBLE_DEVICES in each spawned worker before it imports anything (no GPU needed)."""
    from avsim.core.errors import AvsimValueError
    from avsim.jobs import engines
    from avsim.jobs.engines import EngineConfig

    task = [object()]  # only the count matters for the pool's size
    monkeypatch.setattr(engines, "local_gpus", lambda: ["3", "5"])
    with engines._local_pool(task, EngineConfig(workers=1, gpus_per_task=1)) as pool:  # type: ignore[arg-type]
        assert pool.submit(os.getenv, "CUDA_VISIBLE_DEVICES").result(timeout=360) == "3"
    with engines._local_pool(task, EngineConfig(workers=1, gpus_per_task=None)) as pool:  # type: ignore[arg-type]
        assert pool.submit(os.getenv, "CUDA_VISIBLE_DEVICES").result(timeout=360) == "3"  # default: one GPU per task
    monkeypatch.setattr(engines, "local_gpus", lambda: [])
    with pytest.raises(AvsimValueError, match="--gpus-per-task 0"):
        engines._local_pool(task, EngineConfig(workers=1, gpus_per_task=1))  # type: ignore[arg-type]
    with engines._local_pool(task, EngineConfig(workers=1, gpus_per_task=None)) as pool:  # type: ignore[arg-type]
        assert pool.submit(os.getenv, "AVSIM_NO_SUCH_VARIABLE").result(timeout=360) is None  # no GPU: a plain CPU pool


def test_run_generate_records_the_model_options_as_before() -> None:
    """`avsim run generate`'s model options (one declaration, avsim.models.options) travel as the job options
    did: left out at their defaults (a manifest column may set them per item), paths absolute, flags True."""
    from avsim.jobs.cli import _model_job_options
    from avsim.models.options import ModelOptions

    assert _model_job_options(ModelOptions()) == {}
    got = _model_job_options(ModelOptions(config="debug", checkpoint=Path("w.pt"), random_weights=True, zero_text=True))
    assert got == {"config": "debug", "checkpoint": str(Path("w.pt").resolve()), "random_weights": True, "zero_text": True}
