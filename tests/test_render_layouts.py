"""`avsim render --layout multiview|omnidreams`: the file names NVIDIA's models read, and the videos in them.

multiview: cosmos-transfer2.5 ``assets/multiview_example/world_scenario_videos/ws_*.mp4`` (the seven
control videos its ``examples/multiview.py`` spec names, view keys front_wide, cross_right,
rear_right, rear, rear_left, cross_left, front_tele). omnidreams: nv-tlabs/omni-dreams
``LocalMultiviewVideoDataset`` reads ``<data_root>/hdmap/<camera_key>/<clip_id>.mp4`` for the
camera keys of its ``DEFAULT_CAMERAS``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.core.rig import cosmos_rig
from avsim.core.video import read_video, video_info
from avsim.scenario.io import save_scenario
from avsim.scenario.synthetic import highway_scenario

CLIP = "synthetic_highway"
# the file names in cosmos-transfer2.5 @ 2ff49d0, assets/multiview_example/world_scenario_videos/
NVIDIA_MULTIVIEW_FILES = {
    "ws_cross_left_120fov.mp4", "ws_cross_right_120fov.mp4", "ws_front_tele_30fov.mp4", "ws_front_wide_120fov.mp4",
    "ws_rear_30fov.mp4", "ws_rear_left_70fov.mp4", "ws_rear_right_70fov.mp4",
}  # fmt: skip
# omni-dreams @ cd85f39, predict2_multiview/datasets/multiview.py DEFAULT_CAMERAS
OMNIDREAMS_CAMERAS = (
    "camera_front_wide_120fov", "camera_cross_right_120fov", "camera_rear_right_70fov", "camera_rear_tele_30fov",
    "camera_rear_left_70fov", "camera_cross_left_120fov", "camera_front_tele_30fov",
)  # fmt: skip
ARGS = ["--size", "160x96", "--frames", "6"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("layouts")
    save_scenario(highway_scenario(0.5, rig=cosmos_rig()), root / "scenario")
    assert main(["render", str(root / "scenario"), str(root / "default"), *ARGS]) == 0
    return root / "scenario", root / "default"


def _frames(path: Path) -> np.ndarray:
    return np.stack(list(read_video(path)))


@pytest.mark.e2e
def test_multiview_example_layout(rendered, tmp_path):
    scenario, default = rendered
    assert main(["render", str(scenario), str(tmp_path), *ARGS, "--layout", "multiview"]) == 0
    folder = tmp_path / CLIP / "world_scenario_videos"
    assert {p.name for p in folder.iterdir()} == NVIDIA_MULTIVIEW_FILES
    pairs = {"ws_front_wide_120fov.mp4": "camera_front_wide_120fov", "ws_rear_30fov.mp4": "camera_rear_tele_30fov",
             "ws_front_tele_30fov.mp4": "camera_front_tele_30fov"}  # fmt: skip
    for name, camera in pairs.items():
        assert video_info(folder / name) == {"frames": 6, "fps": 30.0, "width_px": 160, "height_px": 96}
        assert np.array_equal(_frames(folder / name), _frames(default / CLIP / f"{CLIP}.{camera}.mp4")), name


@pytest.mark.e2e
def test_omnidreams_layout_with_chunks(rendered, tmp_path):
    scenario, default = rendered
    assert main(["render", str(scenario), str(tmp_path), *ARGS, "--layout", "omnidreams", "--chunk", "3"]) == 0
    hdmap = tmp_path / "hdmap"
    assert sorted(p.name for p in hdmap.iterdir()) == sorted(OMNIDREAMS_CAMERAS)
    for camera in OMNIDREAMS_CAMERAS:
        assert sorted(p.name for p in (hdmap / camera).iterdir()) == [f"{CLIP}_0.mp4", f"{CLIP}_1.mp4"]
        for k in range(2):
            assert video_info(hdmap / camera / f"{CLIP}_{k}.mp4") == {"frames": 3, "fps": 30.0, "width_px": 160, "height_px": 96}
    whole = _frames(default / CLIP / f"{CLIP}.camera_cross_left_120fov.mp4")
    parts = np.concatenate([_frames(hdmap / "camera_cross_left_120fov" / f"{CLIP}_{k}.mp4") for k in range(2)])
    assert np.abs(parts.astype(int) - whole.astype(int)).mean() < 1.0  # the same frames (chunks are encoded apart)


def test_model_layouts_refuse_other_cameras(tmp_path, capsys):
    from avsim.core.rig import named_rig

    save_scenario(highway_scenario(0.3, rig=named_rig("nuscenes")), tmp_path / "s")
    for layout in ("multiview", "omnidreams"):
        assert main(["render", str(tmp_path / "s"), str(tmp_path / layout), *ARGS, "--layout", layout]) == 1
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"--layout {layout}: camera 'CAM_FRONT' is not one of the model rig's" in err and "--rig cosmos" in err
        assert not list((tmp_path / layout).rglob("*.mp4"))
