"""`avsim view --save` read back with rerun's own dataframe queries: at a chosen time the recording
holds the scenario's agent boxes, map strips, ego pose, camera frustums, light states and one
video frame per camera, at the scenario's positions; plus the lazy import and its one-line error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from avsim.cli import main
from avsim.scenario.io import save_scenario

REPO = Path(__file__).resolve().parents[1]
FRAMES, FPS = 12, 30.0  # a short render: 12 frames of 7 cameras at 192x108
QUERY_FRAME = 7  # the chosen time: the 8th rendered frame


def _rerun_reader():
    pytest.importorskip("rerun", reason="the `view` extra is not installed (docs/viewer.md)")
    pytest.importorskip("datafusion", reason="the `view` extra is not installed (docs/viewer.md)")
    from rerun.chunk import RrdReader

    return RrdReader


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The embedded sample (6 s), its short control render and `avsim view --save` of both."""
    _rerun_reader()
    from avsim.render.run.runner import RenderOptions, run_render
    from avsim.scenario.sample import make_sample_scenario

    root = tmp_path_factory.mktemp("view")
    scenario = make_sample_scenario(seed=0, duration_s=6.0)
    save_scenario(scenario, root / "s")
    run_render(scenario, RenderOptions(out=root / "r", frames=str(FRAMES), width_px=192, height_px=108, fps=FPS))
    assert main(["view", str(root / "s"), str(root / "r"), "--save", str(root / "s.rrd")]) == 0
    return scenario, root


def _row_at(rrd: Path, t_ns: int) -> dict:
    """Every column of the recording, latest-at `t_ns` on scenario_time (rerun's dataframe query)."""
    store = _rerun_reader()(rrd).stream().collect()
    table = store.reader(index="scenario_time", fill_latest_at=True, using_index_values=np.array([t_ns], np.int64)).to_arrow_table()
    return {name: table.column(name)[0].as_py() for name in table.column_names if name.startswith("/")}


def _rgba(rgb) -> int:
    r, g, b = (int(v) for v in rgb)
    return (r << 24) | (g << 16) | (b << 8) | 0xFF


@pytest.mark.slow
def test_saved_recording_holds_the_scenario_at_a_chosen_time(sample):
    from avsim.maps import style
    from avsim.view.scene import lane_line_strips

    scenario, root = sample
    times = scenario.frame_timestamps(FPS)
    t_abs = int(times[QUERY_FRAME])
    row = _row_at(root / "s.rrd", t_abs - scenario.start_ns)
    # agent boxes: the tracks resampled at the render times, those present at t
    expected = scenario.agents.resample(times).at(t_abs)
    centres = np.asarray(row["/world/agents:Boxes3D:centers"])
    assert len(expected) > 10 and len(centres) == len(expected)
    order = lambda c: np.lexsort(np.asarray(c).T)  # noqa: E731
    np.testing.assert_allclose(centres[order(centres)], expected.center_m[order(expected.center_m)], atol=1e-4)
    np.testing.assert_allclose(np.sort(np.asarray(row["/world/agents:Boxes3D:half_sizes"]).ravel()), np.sort(expected.size_m.ravel() / 2), atol=1e-5)
    labels = set(row["/world/agents:Boxes3D:labels"])
    assert labels == {f"{c} {t}" for c, t in zip(expected.object_class, expected.track_id)}
    # map strips: one per road boundary (its vertices), one per painted lane-line piece
    boundaries = row["/world/map/road_boundaries:LineStrips3D:strips"]
    assert len(boundaries) == len(scenario.map.road_boundaries)
    for strip, line in zip(boundaries, scenario.map.road_boundaries):
        np.testing.assert_allclose(strip, line, atol=1e-4)
    pieces, colours = lane_line_strips(scenario.map)
    assert len(row["/world/map/lane_lines:LineStrips3D:strips"]) == len(pieces) > len(scenario.map.lane_lines)
    assert set(row["/world/map/lane_lines:LineStrips3D:colors"]) == {_rgba(c) for c in np.unique(colours, axis=0)}
    assert len(row["/world/map/crosswalks:LineStrips3D:strips"]) == len(scenario.map.crosswalks)
    assert row["/world/map/road_boundaries:LineStrips3D:colors"] == [_rgba(style.ROAD_BOUNDARY_RGB)]
    assert len(row["/world/map/traffic_signs:Boxes3D:centers"]) == len(scenario.map.traffic_signs)
    # the ego at its latest pose at or before t, the cameras at their mountings
    k = int(np.searchsorted(scenario.ego.timestamps_ns, t_abs, side="right")) - 1
    np.testing.assert_allclose(row["/world/ego:Transform3D:translation"][0], scenario.ego.world_SE3_ego.translation[k], atol=1e-4)
    for name in scenario.rig.names:
        mount = row[f"/world/ego/cameras/{name}:Transform3D:translation"][0]
        np.testing.assert_allclose(mount, scenario.rig.extrinsic(name).translation, atol=1e-5)
        assert row[f"/world/ego/cameras/{name}:Pinhole:resolution"] == [[1280.0, 720.0]]


def test_camera_videos_and_lights_follow_the_timeline(sample):
    from avsim.maps import style

    scenario, root = sample
    times = scenario.frame_timestamps(FPS)
    t_rel = int(times[QUERY_FRAME]) - scenario.start_ns
    row = _row_at(root / "s.rrd", t_rel)
    videos = sorted(k.split(":")[0] for k in row if k.startswith("/videos/control/") and k.endswith("VideoFrameReference:timestamp"))
    assert videos == sorted(f"/videos/control/{n}" for n in scenario.rig.names)  # 7 camera images at t
    for path in videos:
        # the frame shown at t is video frame QUERY_FRAME (its own pts; the video starts with the scenario)
        assert abs(row[f"{path}:VideoFrameReference:timestamp"][0] - round(QUERY_FRAME / FPS * 1e9)) < 1e6
        assert row[f"{path}:AssetVideo:media_type"] == ["video/mp4"]
        camera = path.rsplit("/", 1)[1]
        mp4 = root / "r" / scenario.scenario_id / f"{scenario.scenario_id}.{camera}.mp4"
        assert bytes(row[f"{path}:AssetVideo:blob"][0]) == mp4.read_bytes()  # encoded video, as rendered
    lights = scenario.map.traffic_lights
    states = scenario.lights.state_at(lights.ids, int(times[QUERY_FRAME]))
    assert row["/world/map/traffic_lights:Boxes3D:colors"] == [_rgba(style.TRAFFIC_LIGHT_RGB[s]) for s in states]
    assert row["/world/map/traffic_lights:Boxes3D:labels"] == [f"{i}: {s}" for i, s in zip(lights.ids, states)]
    # after the render's last frame the videos hold their last frame; before 0 there is none
    late = _row_at(root / "s.rrd", int(times[-1]) - scenario.start_ns)
    assert abs(late[f"{videos[0]}:VideoFrameReference:timestamp"][0] - round((FRAMES - 1) / FPS * 1e9)) < 1e6
    early = _row_at(root / "s.rrd", -1)
    assert early.get(f"{videos[0]}:VideoFrameReference:timestamp") is None


def test_api_logs_into_a_users_recording(sample, tmp_path):
    import rerun as rr

    from avsim.render.run.plan import safe_name
    from avsim.view import find_videos, log_scenario, log_videos, paths

    scenario, root = sample
    rec = rr.RecordingStream("user")
    rec.save(tmp_path / "own.rrd")
    log_scenario(scenario, rec, rate_hz=10.0, prefix=paths.BEFORE)
    n = log_videos(find_videos(root / "r", safe_name(scenario.scenario_id), scenario.rig.names), rec, "generated", start_ns=10**9)
    rec.log("mine/note", rr.TextDocument("my own data"), static=True)
    rec.flush()
    rec.disconnect()
    assert n == FRAMES * len(scenario.rig)
    row = _row_at(tmp_path / "own.rrd", 10**9 + 1)
    assert row["/mine/note:TextDocument:text"] == ["my own data"]
    assert row["/before/world/agents:Boxes3D:centers"]
    assert row[f"/videos/generated/{scenario.rig.names[0]}:VideoFrameReference:timestamp"] == [0]


@pytest.mark.e2e
def test_bad_inputs_fail_with_one_line(sample, tmp_path, capsys):
    _, root = sample
    cases = [
        (["view", str(tmp_path / "absent")], "absent: scenario: not found"),
        (["view", str(root / "s"), str(tmp_path)], "no video of any camera"),
        (["view", str(root / "s"), "--save", str(tmp_path / "x.mp4")], "must end in .rrd"),
        (["view", str(root / "s"), "--real", str(root / "nope")], "nope: folder: not found"),
    ]
    for argv, message in cases:
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "x.mp4").exists()
    assert main(["view", str(root / "s"), "--save", str(tmp_path / "a.rrd"), "--serve"]) == 2


def test_view_without_the_extra_names_it_in_one_line(sample, capsys, monkeypatch):
    _, root = sample
    monkeypatch.setitem(sys.modules, "rerun", None)  # `import rerun` raises ImportError
    assert main(["view", str(root / "s"), "--save", str(root / "never.rrd")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "avsim[view]" in err and "rerun-sdk==0.41.0" in err, err
    assert not (root / "never.rrd").exists()


@pytest.mark.subprocess
def test_importing_the_viewer_does_not_import_rerun():
    code = "import sys, avsim.view, avsim.view.cli\nprint('rerun' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=360)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_no_display_and_busy_ports_fail_with_one_line(sample, capsys, monkeypatch):
    import socket

    _, root = sample
    if sys.platform.startswith("linux"):
        monkeypatch.delenv("DISPLAY", raising=False)
        monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
        assert main(["view", str(root / "s")]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--serve" in err and "--save" in err, err
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["view", str(root / "s"), "--serve", "--web-port", str(port)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--web-port: {port}: cannot serve there" in err, err


def test_before_and_after_views_are_framed_alike_and_cameras_sit_in_mosaic_rows():
    """Issue 55: the before/after 3-D views open at one eye (the after's first ego pose), whatever the
    before's own first pose (here: the source of a crop); camera grids follow the render mosaic's rows."""
    pytest.importorskip("rerun", reason="the `view` extra is not installed (docs/viewer.md)")
    from avsim.core.rig import COSMOS_VIEW_NAMES
    from avsim.edit.ops_time import crop
    from avsim.scenario.sample import make_sample_scenario
    from avsim.view.blueprint import make_blueprint

    before = make_sample_scenario(seed=0, duration_s=4.0)
    after = crop(before, 2.0, 4.0)
    assert not np.allclose(after.ego.world_SE3_ego[0].translation, before.ego.world_SE3_ego[0].translation)
    blueprint = make_blueprint(after, {"control": list(COSMOS_VIEW_NAMES)}, before=before)
    top, tabs = blueprint.root_container.contents
    views = top.contents
    assert len(views) == 2 and repr(views[0].properties["EyeControls3D"]) == repr(views[1].properties["EyeControls3D"])
    (grid,) = tabs.contents
    rows = [[v.name for v in row.contents] for row in grid.contents]
    assert rows == [["camera_front_wide_120fov", "camera_front_tele_30fov"],
                    ["camera_cross_left_120fov", "camera_cross_right_120fov"],
                    ["camera_rear_left_70fov", "camera_rear_tele_30fov", "camera_rear_right_70fov"]]  # fmt: skip
