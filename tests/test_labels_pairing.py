"""Labels beside the generated videos (`avsim generate`) and in the post-training layout (`avsim train pair`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avsim.cli import main
from avsim.core.video import video_info
from avsim.models.config import debug

CAM = "camera_front_wide_120fov"


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pair")
    assert main(["sample", str(root / "s"), "--duration-s", "1"]) == 0
    return root / "s"


def _render(sample: Path, out: Path, fps: float, frames: int) -> Path:
    cfg = debug()
    code = main(["render", str(sample), str(out), "--labels", "--fps", f"{fps:g}", "--frames", str(frames),
                 "--size", f"{cfg.width_px}x{cfg.height_px}", "--cameras", CAM])  # fmt: skip
    assert code == 0
    return out


def test_generate_writes_the_control_labels_beside_the_generated_clip(sample, tmp_path):
    cfg = debug()
    control = _render(sample, tmp_path / "control", cfg.model_fps, cfg.frames_per_chunk)
    out = tmp_path / "gen"
    assert main(["generate", str(control), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"]) == 0
    settings = json.loads((out / "settings.json").read_text())
    rec = settings["labels"]
    assert rec["frame_mapping"] == "identical" and rec["placed_as"] in ("symlink", "copy")
    clip = settings["clip"]
    assert Path(rec["control_labels"]) == (control / clip / "labels").resolve()
    index = json.loads((out / "labels" / "index.json").read_text())  # readable through the link / copy
    assert (out / "labels" / "annotations.parquet").is_file()  # the compact tables (the default layout)
    info = video_info(out / f"{clip}.{CAM}.mp4")
    mine = [f for f in index["frames"] if f["video_clip"] == clip]
    assert info["frames"] == len(mine) == rec["frames"] and info["fps"] == pytest.approx(index["fps"])
    assert (info["width_px"], info["height_px"]) == (index["width_px"], index["height_px"])
    if rec["placed_as"] == "symlink":
        assert not Path(str((out / "labels").readlink())).is_absolute()


def test_generate_refuses_labels_whose_frames_it_cannot_keep(sample, tmp_path, capsys):
    cfg = debug()
    control = _render(sample, tmp_path / "control30", 30.0, 3 * cfg.frames_per_chunk)  # 30 fps: the model takes every 3rd
    out = tmp_path / "gen"
    code = main(["generate", str(control), str(out), "--config", "debug", "--random-weights", "--views", CAM, "--steps", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and not out.exists()
    assert "index.json" in err[-1] and "--fps 10" in err[-1] and "Traceback" not in "\n".join(err)


def test_train_pair_carries_the_labels(sample, tmp_path):
    from avsim.train.data import COSMOS_VIEW_NAMES

    cfg = debug()
    control = _render(sample, tmp_path / "control", cfg.model_fps, 2)
    clip = next(p.name for p in control.iterdir() if p.is_dir())
    clip_dir = control / clip
    from avsim.models.labels_pairing import find_control_labels

    assert find_control_labels(control, clip) == find_control_labels(clip_dir, clip) == clip_dir / "labels"
    assert find_control_labels(control, "other_clip") is None
    for view in COSMOS_VIEW_NAMES:  # every model view needs a control and a real video: reuse the one render
        src = clip_dir / f"{clip}.{CAM}.mp4"
        if view != CAM:
            (clip_dir / f"{clip}.{view}.mp4").write_bytes(src.read_bytes())
    layout = tmp_path / "layout"
    assert main(["train", "pair", str(clip_dir), str(clip_dir), str(layout), "--caption", "x"]) == 0
    copied = layout / "labels" / clip
    assert json.loads((copied / "index.json").read_text()) == json.loads((clip_dir / "labels" / "index.json").read_text())
    assert not (copied / ".parts").exists()
