"""Calibration for the Sampson metrics: the JSON format (round trip, strict one-line errors) and scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from avsim.cli import main
from avsim.core.agents import AgentTracks
from avsim.core.cameras import PinholeCamera
from avsim.core.errors import AvsimInputError
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import cosmos_rig
from avsim.core.trajectory import EgoTrajectory, uniform_timestamps
from avsim.core.transforms import SE3
from avsim.evaluation.calibration import (
    SampsonCalibration,
    calibration_document,
    calibration_from_scenario,
    load_calibration_json,
)
from avsim.maps import HDMap
from avsim.scenario.io import save_scenario
from avsim.scenario.types import Scenario

FRONT, RIGHT, TELE = "camera_front_wide_120fov", "camera_cross_right_120fov", "camera_front_tele_30fov"


def _poses(n: int) -> np.ndarray:
    k = np.arange(n, dtype=np.float64)
    return SE3.from_yaw(0.02 * k, np.stack([0.4 * k, 0.05 * k, np.zeros(n)], 1)).as_matrix()


def _calibration() -> SampsonCalibration:
    rig = cosmos_rig(320, 180).subset([FRONT, RIGHT])
    mounts = rig.ego_SE3_camera.as_matrix()
    pin = PinholeCamera(200, 100, 150.0, 150.0, 100.0, 50.0)
    own = _poses(3) @ mounts[0]
    return SampsonCalibration("x", Path("x"), {FRONT: rig.cameras[0], RIGHT: rig.cameras[1], "pin": pin},
                              {FRONT: mounts[0], RIGHT: mounts[1]}, _poses(5), {"pin": own})  # fmt: skip


def test_calibration_json_round_trip(tmp_path) -> None:
    cal = _calibration()
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_document(cal)))
    back = load_calibration_json(path)
    assert back.source == str(path) and back.names == cal.names
    assert all(back.cameras[n] == cal.cameras[n] for n in cal.names)
    for n in (FRONT, RIGHT):
        np.testing.assert_allclose(back.ego_SE3_camera[n], cal.ego_SE3_camera[n], atol=1e-12)
        np.testing.assert_allclose(back.camera_poses(n), cal.world_SE3_ego @ cal.ego_SE3_camera[n], atol=1e-12)
    np.testing.assert_allclose(back.camera_poses("pin"), cal.world_SE3_camera["pin"], atol=1e-12)
    # start frame 2: frame 0 of the clip is pose 2
    shifted = load_calibration_json(path, start_frame=2)
    assert len(shifted.world_SE3_ego) == 3 and len(shifted.camera_poses("pin")) == 1
    np.testing.assert_allclose(shifted.world_SE3_ego[0], cal.world_SE3_ego[2], atol=1e-12)
    # rig pose a_SE3_b and resizing to the clip
    np.testing.assert_allclose(back.rig_pose(FRONT, RIGHT), np.linalg.inv(cal.ego_SE3_camera[FRONT]) @ cal.ego_SE3_camera[RIGHT])
    assert back.camera(FRONT, 640, 360) == cal.cameras[FRONT].resize(640, 360)


def test_a_camera_given_as_K(tmp_path) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"cameras": {"front": {"K": [[500, 0, 320], [0, 500, 240], [0, 0, 1]], "width_px": 640,
                                                      "height_px": 480, "ego_SE3_camera": np.eye(4).tolist()}}}))  # fmt: skip
    cal = load_calibration_json(path)
    cam = cal.camera("front", 320, 240)
    assert isinstance(cam, PinholeCamera) and (cam.fx_px, cam.cx_px, cam.cy_px) == (250.0, 160.0, 120.0)
    with pytest.raises(AvsimInputError, match=r"k\.json: world_SE3_ego: missing"):
        cal.camera_poses("front")
    with pytest.raises(AvsimInputError, match=r"k\.json: --other-camera: no camera 'back' in the calibration; cameras are front"):
        cal.camera("back", 320, 240, "--other-camera")


def _good() -> dict:
    eye = np.eye(4).tolist()
    return {"cameras": {"front": {"K": [[500, 0, 320], [0, 500, 240], [0, 0, 1]], "width_px": 640, "height_px": 480,
                                  "ego_SE3_camera": eye}}, "world_SE3_ego": [eye, eye]}  # fmt: skip


def _set(doc: dict, keys: list[str], value: object) -> dict:
    d = doc
    for k in keys[:-1]:
        d = d[k]
    if value is _DELETE:
        del d[keys[-1]]
    else:
        d[keys[-1]] = value
    return doc


_DELETE = object()
_SHEAR = [[1, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
BAD = [
    (["cameras"], _DELETE, "cameras: missing or empty"),
    (["colour"], "red", "colour: unknown key"),
    (["format"], "something-else", "format: expected 'avsim-sampson-calibration'"),
    (["cameras", "front", "lens"], 1, "cameras.front.lens: unknown key"),
    (["cameras", "front", "ego_SE3_camera"], _DELETE, "cameras.front.ego_SE3_camera: missing"),
    (["cameras", "front", "ego_SE3_camera"], [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], "cameras.front.ego_SE3_camera: expected a 4x4 matrix"),
    (["cameras", "front", "ego_SE3_camera"], [[1, 0], [0]], "cameras.front.ego_SE3_camera: expected a 4x4 matrix"),
    (["cameras", "front", "ego_SE3_camera"], _SHEAR, "cameras.front.ego_SE3_camera: not a rigid transform"),
    (["cameras", "front", "K"], [[500, 1, 320], [0, 500, 240], [0, 0, 1]], "cameras.front.K: expected"),
    (["cameras", "front", "K"], [[500, 0], [0, 500]], "cameras.front.K: expected a finite 3x3 matrix"),
    (["cameras", "front", "width_px"], _DELETE, "cameras.front.width_px: missing or not a positive integer"),
    (["cameras", "front", "camera"], {"model": "ftheta", "width_px": 10}, "cameras.front: give exactly one of K"),
    (["world_SE3_ego"], [np.eye(4)[:3].tolist()], "world_SE3_ego: expected a list of 4x4 matrices"),
    (["world_SE3_ego", 1], _SHEAR, r"world_SE3_ego\[1\]: not a rigid transform"),
    (["world_SE3_ego"], [[[float("nan")] * 4] * 4], "world_SE3_ego: non-finite value"),
]


@pytest.mark.parametrize(("keys", "value", "message"), BAD, ids=[b[2].split(":")[0] for b in BAD])
def test_bad_calibration_json_names_file_and_field(tmp_path, keys, value, message) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_set(_good(), keys, value)))
    with pytest.raises(AvsimInputError, match=f"^{path}: {message}") as err:
        load_calibration_json(path)
    assert "\n" not in str(err.value)


def test_bad_camera_dict_and_unreadable_files(tmp_path) -> None:
    doc = _good()
    doc["cameras"]["front"] = {"camera": {"model": "ftheta", "width_px": 10, "height_px": 10}, "ego_SE3_camera": np.eye(4).tolist()}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(AvsimInputError, match=r"cal\.json: cameras\.front\.camera: camera\.cx_px: missing"):
        load_calibration_json(path)
    path.write_text("{not json")
    with pytest.raises(AvsimInputError, match=r"cal\.json: json: invalid JSON"):
        load_calibration_json(path)
    with pytest.raises(AvsimInputError, match=r"missing\.json: calibration: not found"):
        load_calibration_json(tmp_path / "missing.json")


def _scenario(folder: Path) -> Path:
    ts = uniform_timestamps(0, int(1e9), 10.0)
    k = np.arange(len(ts), dtype=np.float64)
    ego = EgoTrajectory(ts, SE3.from_yaw(np.zeros(len(ts)), np.stack([k, np.zeros_like(k), np.zeros_like(k)], 1)))
    sc = Scenario("tiny", cosmos_rig(320, 180), ego, AgentTracks.empty(), HDMap.empty(), TrafficLightStates.empty())
    return save_scenario(sc, folder, allow_empty_map=True)


def test_calibration_from_a_scenario_follows_the_render_clock(tmp_path) -> None:
    folder = _scenario(tmp_path / "sc")
    cal = calibration_from_scenario(folder, fps=20.0, start_frame=4)
    assert cal.source == f"scenario {folder}" and len(cal.world_SE3_ego) == 21 - 4
    # frame 4 at 20 fps is t = 0.2 s: the ego (10 m/s along x, poses at 10 Hz) is at x = 2 m
    np.testing.assert_allclose(cal.world_SE3_ego[0][:3, 3], [2.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(cal.camera_poses(FRONT)[0], cal.world_SE3_ego[0] @ cal.ego_SE3_camera[FRONT])
    with pytest.raises(AvsimInputError, match=r"--start-frame: 21 is outside the 21 frames at 20 fps"):
        calibration_from_scenario(folder, fps=20.0, start_frame=21)
    with pytest.raises(AvsimInputError, match=r"--rig: rig: unknown rig 'nope'"):
        calibration_from_scenario(folder, fps=20.0, rig="nope")
    assert calibration_from_scenario(folder, fps=20.0, rig="nuscenes").names[0] == "CAM_FRONT"


@pytest.mark.e2e
def test_cli_errors_are_one_line(tmp_path, capsys) -> None:
    folder = _scenario(tmp_path / "sc")
    clip = tmp_path / f"x.{FRONT}"
    clip.mkdir()
    for i in range(2):
        cv2.imwrite(str(clip / f"{i}.png"), np.zeros((180, 320, 3), np.uint8))
    cases = [
        (["--scenario", str(folder), "--camera", "nope"], "--camera: no camera 'nope' in the calibration"),
        (["--scenario", str(folder), "--other", str(clip), "--other-camera", TELE], "no epipolar geometry"),
        (["--scenario", str(folder), "--calibration", str(tmp_path / "c.json")], "give --scenario or --calibration, not both"),
        (["--ransac", "--camera", "CAM_FRONT"], "'CAM_FRONT' is not a cosmos rig camera"),
        (["--scenario", str(folder), "--rect-fov", "200"], "rectify hfov_deg: must be in [1, 170] degrees"),
    ]
    for extra, message in cases:
        assert main(["eval", "sampson", str(clip), *extra]) == 1, extra
        err = capsys.readouterr().err  # progress bars (stderr) may come first; the error is one line, last
        assert message in err.strip().splitlines()[-1] and "Traceback" not in err, (extra, err)
