"""Each camera keeps its aspect unless `--size WxH` asks otherwise, and then a line says which cameras it stretches (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.core.cameras import PinholeCamera
from avsim.core.rig import CameraRig, cosmos_rig
from avsim.core.transforms import SE3
from avsim.render.geometry.sizes import camera_sizes, stretch_note


def _av2_like_rig() -> CameraRig:
    """A portrait front camera and a 4:3 side camera (Argoverse 2's ring)."""
    cams = (PinholeCamera(1550, 2048, 1770.0, 1770.0, 775.0, 1024.0), PinholeCamera(2048, 1550, 1680.0, 1680.0, 1024.0, 775.0))
    return CameraRig(("front", "side"), cams, SE3.stack([SE3.identity(), SE3.identity()]))


def test_each_camera_keeps_its_aspect_at_the_requested_height() -> None:
    rig = _av2_like_rig()
    assert camera_sizes(rig, 1280, 720, exact=False) == ((544, 720), (952, 720))  # 2.35x and 1.35x squashed before
    assert stretch_note(rig, camera_sizes(rig, 1280, 720, exact=False)) is None
    assert camera_sizes(rig, 1280, 720, exact=True) == ((1280, 720), (1280, 720))
    note = stretch_note(rig, camera_sizes(rig, 1280, 720, exact=True))
    assert note is not None and "\n" not in note
    assert "front 1550x2048 -> 1280x720 (2.35x wide)" in note and "side 2048x1550 -> 1280x720 (1.35x wide)" in note
    cosmos = cosmos_rig()  # 16:9: the requested size itself, also where it is 16:9 only within 1 %
    assert set(camera_sizes(cosmos, 1280, 720, exact=False)) == {(1280, 720)}
    assert set(camera_sizes(cosmos, 240, 136, exact=False)) == {(240, 136)}
    assert stretch_note(cosmos, camera_sizes(cosmos, 240, 136, exact=True)) is None


def test_a_renderer_images_each_camera_at_its_own_size() -> None:
    from avsim.render.geometry.scene import SceneRenderer
    from avsim.scenario.synthetic import highway_scenario

    scenario = highway_scenario(1.0, rig=_av2_like_rig())
    renderer = SceneRenderer(scenario, sizes=camera_sizes(scenario.rig, 320, 180, exact=False))
    assert [renderer.render_camera(0, i).shape for i in range(2)] == [(180, 136, 3), (180, 238, 3)]
    fx = [c.fx_px for c in renderer.rig.cameras]  # type: ignore[attr-defined]
    np.testing.assert_allclose(fx, [1770.0 * 136 / 1550, 1680.0 * 238 / 2048])


@pytest.mark.e2e
def test_cli_sizes_and_the_stretch_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", str(tmp_path / "s"), "--duration-s", "1"]) == 0
    capsys.readouterr()
    cam = "camera_front_wide_120fov"
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "a"), "--frames", "1", "--size", "x180", "--cameras", cam]) == 0
    assert "stretches" not in capsys.readouterr().err
    index = json.loads(next((tmp_path / "a").glob("*/labels/index.json")).read_text())
    assert index["camera_sizes_px"] == {cam: [320, 180]} and (index["width_px"], index["height_px"]) == (320, 180)
    assert main(["labels", str(tmp_path / "s"), str(tmp_path / "b"), "--frames", "1", "--size", "320x240", "--cameras", cam,
                 "--label-files", "standard"]) == 0  # fmt: skip
    lines = [x for x in capsys.readouterr().err.splitlines() if "stretches" in x]
    assert len(lines) == 1 and f"{cam} 1280x720 -> 320x240 (0.75x wide)" in lines[0] and lines[0].endswith("aspect")
    coco = json.loads(next((tmp_path / "b").glob(f"*/labels/coco/{cam}.json")).read_text())
    assert {(im["width"], im["height"]) for im in coco["images"]} == {(320, 240)}


@pytest.mark.realdata
@pytest.mark.e2e
def test_real_av2_cameras_keep_their_aspect(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from avsim.core.video import video_info

    logs = sorted((shared_data / "av2" / "sensor").glob("*"))
    if not logs:
        pytest.skip("no Argoverse 2 sensor log in the shared data")
    assert main(["convert", str(logs[0]), str(tmp_path / "s")]) == 0
    cams = "ring_front_center,ring_side_left"
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), "--frames", "1", "--size", "x360", "--cameras", cams,
                 "--labels"]) == 0  # fmt: skip
    (clip,) = (tmp_path / "out").iterdir()
    got = {c: video_info(clip / f"{clip.name}.{c}.mp4") for c in cams.split(",")}
    assert [(v["width_px"], v["height_px"]) for v in got.values()] == [(272, 360), (476, 360)]  # 1550x2048, 2048x1550
    index = json.loads((clip / "labels" / "index.json").read_text())
    assert index["camera_sizes_px"] == {"ring_front_center": [272, 360], "ring_side_left": [476, 360]}
    assert index["width_px"] is None  # the cameras differ: each one's size is in camera_sizes_px
