"""Sampson errors on an exact synthetic multi-view clip: a textured plane ray-cast into f-theta cameras.

Two cameras of the cosmos rig (front wide, cross right; real f-theta lenses and mountings,
640x360) see a plane textured with blurred multi-scale noise while the ego drives forward and
turns slightly. Every pixel is rendered by casting its ray (the camera model's own
`pixel_to_ray`), intersecting the plane and sampling the texture bilinearly, so the clip is
geometrically exact: with frames rectified to a pinhole and F from the calibration, what is
left is SIFT's localisation error. A plane is fine here because F is not estimated.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from avsim.cli import main
from avsim.core.agents import AgentTracks
from avsim.core.lights import TrafficLightStates
from avsim.core.rig import CameraRig, cosmos_rig
from avsim.core.trajectory import EgoTrajectory, uniform_timestamps
from avsim.core.transforms import SE3
from avsim.evaluation.calibration import calibration_document, calibration_from_scenario
from avsim.evaluation.matchers import SiftMatcher
from avsim.evaluation.rectify import RectifyConfig
from avsim.evaluation.sampson import (
    MatchConfig,
    PreparedView,
    calibrated_cross_F,
    calibrated_temporal_F,
    cross_errors,
    prepare_view,
    temporal_errors,
    video_summary,
)
from avsim.maps import HDMap
from avsim.scenario.io import save_scenario
from avsim.scenario.types import Scenario

FRONT, RIGHT = "camera_front_wide_120fov", "camera_cross_right_120fov"
SIZE = (640, 360)
RECT = RectifyConfig(480, 270, 120.0)
FRAMES = 3
FPS = 30.0
TEXEL_M = 0.04
PLANE_YAW_RAD = np.radians(-35.0)  # the normal bisects the two cameras' viewing directions


def _texture(size: int = 1024) -> np.ndarray:
    rng = np.random.default_rng(0)
    tex = np.zeros((size, size), np.float32)
    for sigma in (1.5, 3.0, 6.0, 12.0):
        noise = cv2.GaussianBlur(rng.normal(size=(size, size)).astype(np.float32), (0, 0), sigma)
        tex += noise / noise.std()
    return np.clip(128 + 40 * tex, 0, 255).astype(np.float32)


def _render_plane(camera, world_SE3_camera: np.ndarray, texture: np.ndarray) -> np.ndarray:
    """Ray-cast the textured plane into `camera` at `world_SE3_camera` (4, 4): (H, W, 3) uint8."""
    normal = np.array([np.cos(PLANE_YAW_RAD), np.sin(PLANE_YAW_RAD), 0.0])
    origin = np.array([2.0, -1.0, 1.2]) + 9.0 * normal
    u_axis, v_axis = np.array([-normal[1], normal[0], 0.0]), np.array([0.0, 0.0, 1.0])
    w, h = camera.width_px, camera.height_px
    us, vs = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    rays = camera.pixel_to_ray(np.stack([us.ravel(), vs.ravel()], 1)) @ world_SE3_camera[:3, :3].T
    centre = world_SE3_camera[:3, 3]
    depth = ((origin - centre) @ normal) / (rays @ normal)
    hit = centre + rays * depth[:, None] - origin
    tu = np.where(depth > 0, hit @ u_axis / TEXEL_M + texture.shape[1] / 2, -1).reshape(h, w).astype(np.float32)
    tv = np.where(depth > 0, hit @ v_axis / TEXEL_M + texture.shape[0] / 2, -1).reshape(h, w).astype(np.float32)
    grey = cv2.remap(texture, tu, tv, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    return np.repeat(np.clip(grey + 0.5, 0, 255).astype(np.uint8)[..., None], 3, axis=-1)


def _ego(frames: int = FRAMES) -> EgoTrajectory:
    """The ego drives 0.5 m per frame and turns 0.01 rad per frame (world = ego frame at t = 0)."""
    ts = uniform_timestamps(0, int(round((frames - 1) * 1e9 / FPS)), FPS)
    k = np.arange(len(ts), dtype=np.float64)
    return EgoTrajectory(ts, SE3.from_yaw(0.01 * k, np.stack([0.5 * k, 0.1 * k, np.zeros_like(k)], 1)))


class Clip:
    """The rig, the ego, and the rendered frames per camera."""

    def __init__(self) -> None:
        self.rig: CameraRig = cosmos_rig(*SIZE).subset([FRONT, RIGHT])
        self.ego = _ego()
        texture = _texture()
        world_SE3_ego = self.ego.world_SE3_ego.as_matrix()
        self.poses = {n: world_SE3_ego @ self.rig.extrinsic(n).as_matrix() for n in self.rig.names}
        self.frames = {n: [_render_plane(self.rig.camera(n), p, texture) for p in self.poses[n]] for n in self.rig.names}

    def write(self, folder: Path) -> dict[str, Path]:
        """Each camera's frames as a PNG folder named like a render output (`<clip>.<camera>`)."""
        out = {}
        for name, frames in self.frames.items():
            d = folder / f"synthetic.{name}"
            d.mkdir(parents=True)
            for i, f in enumerate(frames):
                cv2.imwrite(str(d / f"{i:04d}.png"), f[:, :, ::-1])
            out[name] = d
        return out

    def scenario(self, folder: Path) -> Path:
        """The clip's rig and ego as an avsim scenario folder (empty map)."""
        sc = Scenario("synthetic", self.rig, self.ego, AgentTracks.empty(), HDMap.empty(), TrafficLightStates.empty())
        return save_scenario(sc, folder, allow_empty_map=True)


def _first_frames(view: PreparedView, n: int) -> PreparedView:
    return replace(view, frames=view.frames[:n])


@pytest.fixture(scope="module")
def clip() -> Clip:
    return Clip()


@pytest.fixture(scope="module")
def matcher() -> SiftMatcher:
    """One SIFT matcher for the module: the tests share the rectified frames, so detections are reused."""
    return SiftMatcher(cache_size=4 * FRAMES)


@pytest.fixture(scope="module")
def views(clip: Clip) -> dict[str, PreparedView]:
    return {n: prepare_view(clip.frames[n], clip.rig.camera(n), "frames", RECT) for n in clip.rig.names}


@pytest.mark.slow
def test_calibrated_cse_on_the_exact_clip_is_below_a_tenth_of_a_pixel(clip, views, matcher) -> None:
    F = calibrated_cross_F(clip.rig.extrinsic(FRONT), clip.rig.extrinsic(RIGHT), RECT.K)
    errs, _ = cross_errors(views[FRONT], views[RIGHT], MatchConfig(), F, matcher)
    s = video_summary(errs)
    assert s["frames"] == FRAMES and s["frames_without_f"] == 0
    assert s["matches"]["per_frame_min"] >= 100
    assert s["median_of_frame_medians_px"] < 0.1


@pytest.mark.slow
def test_calibrated_tse_on_the_exact_clip_is_below_a_tenth_of_a_pixel(clip, views, matcher) -> None:
    for name in clip.rig.names:
        Fs = calibrated_temporal_F(clip.poses[name], RECT.K)
        s = video_summary(temporal_errors(views[name], MatchConfig(), Fs, matcher=matcher))
        assert s["frames"] == FRAMES - 1 and s["matches"]["per_frame_min"] >= 300
        assert s["median_of_frame_medians_px"] < 0.1, name


def test_a_wrong_calibration_is_measured(clip, views, matcher) -> None:
    """Negative control: tilting the cross camera's mounting by 1 deg (about its x axis) moves CSE above 1 px."""
    mount = clip.rig.extrinsic(RIGHT)
    bad = SE3(mount.rotation @ cv2.Rodrigues(np.array([np.radians(1.0), 0.0, 0.0]))[0], mount.translation)
    first = {n: _first_frames(views[n], 1) for n in (FRONT, RIGHT)}
    errs, _ = cross_errors(first[FRONT], first[RIGHT], MatchConfig(), calibrated_cross_F(clip.rig.extrinsic(FRONT), bad, RECT.K), matcher)
    assert video_summary(errs)["median_of_frame_medians_px"] > 1.0


@pytest.mark.slow
def test_keypoint_rectification_agrees(clip) -> None:
    """The public reference code's order (match raw fisheye frames, rectify the points) also gives < 0.1 px."""
    v = {n: prepare_view(clip.frames[n][:1], clip.rig.camera(n), "keypoints", RECT) for n in clip.rig.names}
    F = calibrated_cross_F(clip.rig.extrinsic(FRONT), clip.rig.extrinsic(RIGHT), RECT.K)
    errs, _ = cross_errors(v[FRONT], v[RIGHT], MatchConfig(), F)
    assert video_summary(errs)["median_of_frame_medians_px"] < 0.1


def test_a_stationary_pair_is_skipped_with_its_reason(clip, views, matcher) -> None:
    view = views[FRONT]
    still = replace(view, frames=[view.frames[0], view.frames[0], view.frames[1]])
    poses = clip.poses[FRONT]
    Fs = calibrated_temporal_F(np.stack([poses[0], poses[0], poses[1]]), RECT.K)
    assert Fs[0] is None and Fs[1] is not None
    s = video_summary(temporal_errors(still, MatchConfig(), Fs, matcher=matcher))
    assert s["frames_without_f"] == 1 and s["skipped"] == {"camera moved less than 0.01 m": 1}
    assert s["per_frame_median_px"][1] < 0.1


@pytest.mark.e2e
def test_cli_cse_with_the_scenario(clip, tmp_path, monkeypatch, capsys) -> None:
    clips = clip.write(tmp_path / "clips")
    scenario = clip.scenario(tmp_path / "scenario")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["eval", "sampson", str(clips[FRONT]), "--other", str(clips[RIGHT]), "--scenario", str(scenario),
                 "--rect-size", "480x270", "--max-frames", "2", "--out", str(tmp_path / "cse.json")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "CSE" in out and "calibration: scenario" in out and "480x270 pinhole" in out
    assert list(work.iterdir()) == []
    doc = json.loads((tmp_path / "cse.json").read_text())
    assert doc["metric"] == "CSE" and doc["cameras"] == [FRONT, RIGHT]
    assert doc["f_source"] == f"calibration: scenario {scenario}"
    assert doc["rectification"][FRONT]["width_px"] == 480 and doc["rectification"][FRONT]["hfov_deg"] == 120.0
    assert doc["frames"] == 2 and doc["matches"]["total"] >= 200 and doc["median_of_frame_medians_px"] < 0.1


@pytest.mark.e2e
def test_cli_tse_with_a_calibration_json_and_with_ransac(clip, tmp_path, capsys) -> None:
    clips = clip.write(tmp_path / "clips")
    cal = calibration_from_scenario(clip.scenario(tmp_path / "scenario"), FPS)
    cal_path = tmp_path / "calibration.json"
    cal_path.write_text(json.dumps(calibration_document(cal)))
    out = tmp_path / "tse.json"
    assert main(["eval", "sampson", str(clips[FRONT]), "--calibration", str(cal_path), "--rect-size", "480x270", "--max-frames", "3",
                 "--out", str(out)]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["metric"] == "TSE" and doc["f_source"] == f"calibration: {cal_path}" and doc["frames"] == 2
    assert doc["median_of_frame_medians_px"] < 0.1
    # RANSAC only when asked: rectified with the calibration's camera, F estimated per pair
    assert main(["eval", "sampson", str(clips[FRONT]), "--calibration", str(cal_path), "--ransac", "--rect-size", "480x270",
                 "--max-frames", "2", "--out", str(out)]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert doc["f_source"] == "RANSAC" and doc["frames"] == 1 and doc["frames_without_f"] == 0 and doc["median_of_frame_medians_px"] < 0.5
    # start frame: the clip's frame 0 is calibration frame 1, so the clip's 3 frames need 4 poses
    assert main(["eval", "sampson", str(clips[FRONT]), "--calibration", str(cal_path), "--start-frame", "1"]) == 1
    assert "2 frame poses from --start-frame 1, the clip has 3 frames" in capsys.readouterr().err


@pytest.mark.e2e
def test_cli_needs_a_calibration_or_ransac_and_writes_nothing_without_out(clip, tmp_path, monkeypatch, capsys) -> None:
    clips = clip.write(tmp_path / "clips")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["eval", "sampson", str(clips[FRONT])]) == 1
    err = capsys.readouterr().err
    assert "--scenario DIR or --calibration FILE.json" in err and "--ransac" in err and len(err.strip().splitlines()) == 1
    # with --ransac and no calibration, the camera name from the file name selects the cosmos rig's model
    assert main(["eval", "sampson", str(clips[FRONT]), "--ransac", "--rect-size", "480x270", "--max-frames", "2"]) == 0
    captured = capsys.readouterr()
    assert "RANSAC" in captured.out and "480x270 pinhole" in captured.out and "add --out FILE.json" in captured.err
    assert list(work.iterdir()) == []
