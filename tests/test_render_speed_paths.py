"""Fast render paths: pinned frames, all cameras per frame, many agents, compiled geometry.

The pinned digests were computed on main before the geometry path was compiled and the
per-camera world culling added (first 16 hex digits of the sha256 of the RGB bytes, 320x180):
the sample's 7 f-theta cameras, the same scene with ten times the agents, and the real
Argoverse 2 log (7 pinhole ring cameras; skipped without the shared data). `AA_PINNED` holds
five anti-aliased frames pinned on the commit before the geometry rework of issue 18.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from avsim.core.agents import AgentTracks
from avsim.core.rig import cosmos_rig
from avsim.render import style
from avsim.render.geometry import projection as geo
from avsim.render.geometry.agents import resample_rows
from avsim.render.geometry.camera import render_objects
from avsim.render.geometry.kernels import owner_min_max
from avsim.render.geometry.projector import project_px
from avsim.render.geometry.scene import AGENT_BLOCK_FRAMES, SceneRenderer
from avsim.scenario.sample import make_sample_scenario

SIZE = (320, 180)
SAMPLE_PINNED = {  # frame/camera -> digest, sample seed 0, 4 s
    "0/camera_cross_left_120fov": "3808de05e84c735c",
    "0/camera_cross_right_120fov": "c34182549c1103bd",
    "0/camera_front_tele_30fov": "c22cd009915cbbb4",
    "0/camera_front_wide_120fov": "19c6905c16f31ac4",
    "0/camera_rear_left_70fov": "63a91bf285733ee1",
    "0/camera_rear_right_70fov": "9f0e6232e36dcb07",
    "0/camera_rear_tele_30fov": "ef374c961d79035c",
    "110/camera_cross_left_120fov": "1f4edf34017db56f",
    "110/camera_cross_right_120fov": "8b9dd4820d34c023",
    "110/camera_front_tele_30fov": "c5d25b132d1044d2",
    "110/camera_front_wide_120fov": "77777c90b82d9db0",
    "110/camera_rear_left_70fov": "b8c495acabab24dd",
    "110/camera_rear_right_70fov": "fe5b3e6bf4dfa23d",
    "110/camera_rear_tele_30fov": "b8e5ad7ea0fa33b6",
    "47/camera_cross_left_120fov": "1736234910f5bcf2",
    "47/camera_cross_right_120fov": "c05164b7fa5b3c2c",
    "47/camera_front_tele_30fov": "0a8fe7344ebd74fc",
    "47/camera_front_wide_120fov": "f64b6febe05e9d69",
    "47/camera_rear_left_70fov": "90863945ca86ef66",
    "47/camera_rear_right_70fov": "326d145a8605bfc7",
    "47/camera_rear_tele_30fov": "7f3dc2a0764aebec",
}
TENFOLD_PINNED = {  # the sample with ten times the agents (`tenfold`)
    "0/camera_cross_left_120fov": "d1fa02909eaa9155",
    "0/camera_cross_right_120fov": "40d3fe5f4a356e8f",
    "0/camera_front_tele_30fov": "fa15c691eaa5055c",
    "0/camera_front_wide_120fov": "4157bf40774da894",
    "0/camera_rear_left_70fov": "fc3767fcd0ed4ccc",
    "0/camera_rear_right_70fov": "98a23d0922ae402c",
    "0/camera_rear_tele_30fov": "a06d23f1d0422ecb",
    "70/camera_cross_left_120fov": "475097f34aefe319",
    "70/camera_cross_right_120fov": "b2444a7df2a61a79",
    "70/camera_front_tele_30fov": "b5b18bffc3bfe3db",
    "70/camera_front_wide_120fov": "d3971b055d657a7c",
    "70/camera_rear_left_70fov": "8f562f2afb26378c",
    "70/camera_rear_right_70fov": "8f0a56e1a9ebca09",
    "70/camera_rear_tele_30fov": "c16f2543f2c78c72",
}
AV2_PINNED = {  # the real AV2 sensor log through its own rig
    "0/ring_front_center": "8a21730842795ead",
    "0/ring_front_left": "3b2b21069062d80c",
    "0/ring_front_right": "c5feecf06165cca1",
    "0/ring_rear_left": "36a7708186665828",
    "0/ring_rear_right": "a251c9cc7dbdef92",
    "0/ring_side_left": "cd3138f3c36a2e4f",
    "0/ring_side_right": "e6bc752e1784ca21",
    "200/ring_front_center": "e96e68cdc40ecdb1",
    "200/ring_front_left": "cac2043f4fa8365a",
    "200/ring_front_right": "b83b30db9fb232ad",
    "200/ring_rear_left": "f01b75a83e013a80",
    "200/ring_rear_right": "7cb45af9a0f13414",
    "200/ring_side_left": "690fd85a785a88d2",
    "200/ring_side_right": "2f2e23338b402207",
}
AV2_LOG = "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76"
AA_PINNED = {  # anti-aliasing on (the default), pinned before the geometry path was reworked (issue 18)
    "sample/0/camera_front_wide_120fov": "6a78b5ead43b69ab",
    "sample/0/camera_rear_tele_30fov": "06b77fd23364be47",
    "sample/47/camera_rear_left_70fov": "90d430762c30a861",
    "tenfold/70/camera_front_wide_120fov": "3fd4dabd419b4080",
    "tenfold/70/camera_rear_tele_30fov": "e7f6003504836dac",
}


def tenfold(agents: AgentTracks) -> AgentTracks:
    """Ten times the tracks: the originals and nine copies offset in x, y (new track ids)."""
    offsets = [(dx, dy) for dx in (-24.0, 0.0, 24.0) for dy in (-12.0, 0.0, 12.0) if (dx, dy) != (0.0, 0.0)]
    offsets.append((48.0, 0.0))
    parts = [agents]
    for k, (dx, dy) in enumerate(offsets):
        centre = agents.center_m + np.array([dx, dy, 0.0])
        parts.append(AgentTracks(np.char.add(agents.track_id, f"~{k}"), agents.source_class, agents.timestamps_ns, centre,
                                 agents.size_m, agents.orientation))  # fmt: skip
    return AgentTracks.concat(parts)


def _digest(img: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(img).tobytes()).hexdigest()[:16]


@pytest.fixture(scope="module")
def sample():
    return make_sample_scenario(seed=0, duration_s=4.0)


@pytest.fixture(scope="module")
def sample_tenfold(sample):
    return sample.replace(agents=tenfold(sample.agents))


def _check_pinned(renderer: SceneRenderer, pinned: dict[str, str]) -> None:
    frames = sorted({int(k.split("/")[0]) for k in pinned})
    got = {f"{f}/{name}": _digest(img) for f in frames for name, img in renderer.render_frame_all(f).items()}
    assert got == pinned


@pytest.mark.slow
def test_sample_frames_are_pinned(sample):
    _check_pinned(SceneRenderer(sample, size=SIZE, antialias=False), SAMPLE_PINNED)


def test_tenfold_agent_frames_are_pinned(sample_tenfold):
    _check_pinned(SceneRenderer(sample_tenfold, size=SIZE, antialias=False), TENFOLD_PINNED)


def test_antialiased_frames_are_pinned(sample, sample_tenfold):
    renderers = {"sample": SceneRenderer(sample, size=SIZE), "tenfold": SceneRenderer(sample_tenfold, size=SIZE)}
    got = {}
    for key in AA_PINNED:
        case, frame, name = key.split("/")
        renderer = renderers[case]
        assert renderer.antialias and type(renderer.rig.cameras[renderer.rig.index(name)]).__name__ == "FThetaCamera"
        got[key] = _digest(renderer.render_camera(int(frame), name))
    assert got == AA_PINNED


@pytest.mark.slow
def test_real_av2_frames_are_pinned(shared_data):
    from avsim.scenario.importers.registry import convert

    # pinned before frame 0 moved to the log's first annotated sweep (frame_origin_ns, tests/test_frame_origin.py):
    # the renderer's frames of the log's own frame times
    scenario = dataclasses.replace(convert(str(shared_data / AV2_LOG)), frame_origin_ns=None)
    _check_pinned(SceneRenderer(scenario, size=SIZE, antialias=False), AV2_PINNED)


def test_all_cameras_per_frame_equal_per_camera_renders(sample):
    together = SceneRenderer(sample, size=SIZE, antialias=False).render_frame_all(61)
    alone = SceneRenderer(sample, size=SIZE, antialias=False)
    for i, name in enumerate(alone.camera_names):
        alone._work = None  # no shared frame work: each camera from scratch
        assert np.array_equal(together[name], alone.render_camera(61, i)), name


def test_many_agents_render_like_the_uncull_reference(sample_tenfold):
    """Per-camera culling keeps every pixel: the frame equals `render_objects` of all its objects,
    and a few boxes rendered alone equal the reference of those boxes alone."""
    renderer = SceneRenderer(sample_tenfold, size=SIZE, antialias=False)
    frame = 33
    world_SE3_ego, objects = renderer.frame_objects(frame)
    assert len(objects.box_corners) > 300
    for i in (0, 3):
        world_SE3_cam = world_SE3_ego.compose(renderer.rig.ego_SE3_camera[i])
        reference = render_objects(renderer.rig.cameras[i], world_SE3_cam, objects)
        assert np.array_equal(renderer.render_camera(frame, i), reference)
        img, ids, _ = renderer.render_camera_ids(frame, i)
        assert np.array_equal(img, reference)
        drawn = np.unique(ids[ids >= 0])
        assert len(drawn) > 3
        few = drawn[:: max(1, len(drawn) // 4)][:4]
        alone = render_objects(renderer.rig.cameras[i], world_SE3_cam, objects.take(*([np.zeros(0, int)] * 3), few))
        for k in few:  # where box k wins in the full frame, it shows the pixels it shows alone
            won = ids == k
            assert won.any() and np.array_equal(img[won], alone[won])
    assert len(renderer.box_track_ids(frame)) == len(objects.box_corners)
    present = sample_tenfold.agents.resample(np.array([renderer.timestamps_ns[frame]])).track_id
    assert set(renderer.box_track_ids(frame)) <= set(present)


def test_vectorised_resampling_equals_agent_tracks_resample(sample_tenfold):
    agents = sample_tenfold.agents
    ts = SceneRenderer(sample_tenfold, size=SIZE, antialias=False).timestamps_ns[AGENT_BLOCK_FRAMES : 2 * AGENT_BLOCK_FRAMES]
    rows = resample_rows(agents, ts)
    ref = agents.resample(ts)
    order = np.lexsort((ref.track_id, ref.timestamps_ns))
    assert np.array_equal(rows.t, ref.timestamps_ns[order])
    assert np.array_equal(rows.track_id, ref.track_id[order])
    assert np.array_equal(rows.corners, ref.corners_m()[order])
    assert np.array_equal(rows.max_size, ref.size_m[order].max(axis=1))
    # a single-observation track and extrapolation beyond the span
    one = agents.select(np.flatnonzero(agents.track_id == agents.track_id[0])[:1])
    probe = one.timestamps_ns[0] + np.array([-600_000_000, -100_000_000, 0, 400_000_000, 501_000_000])
    assert np.array_equal(resample_rows(one, probe).corners, one.resample(probe).corners_m())


def test_compiled_projection_equals_the_camera_model():
    """Equal to `camera.project` within 1e-9 px, NaN where it is NaN. numpy's own result differs in
    the last bits between calls on strided input (about 1e-12 px), so bit equality is not a stable
    claim here; the pinned frame digests above are the byte-identity check."""
    rng = np.random.default_rng(3)
    for camera in cosmos_rig().resize(*SIZE).cameras + cosmos_rig().cameras[:2]:
        pts = rng.normal(size=(4000, 3)) * rng.uniform(0.01, 300.0, (4000, 1))
        pts[:5] = 0.0
        pts[5:10, :2] = 0.0
        ref = camera.project(pts)[0]
        for mine in (project_px(camera, pts), geo.project_points(camera, pts)):
            assert np.array_equal(np.isnan(mine), np.isnan(ref))
            np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-9, equal_nan=True)


def test_owner_min_max_equals_reduce():
    rng = np.random.default_rng(4)
    owner = rng.integers(0, 50, 3000)
    uv = rng.normal(size=(3000, 2)) * 500
    uv[7] = np.nan
    lo, hi = owner_min_max(60, owner, uv)
    for k in range(60):
        mine = uv[owner == k]
        if not len(mine):
            assert np.isinf(lo[k]).all() and np.isinf(hi[k]).all()
            continue
        assert np.array_equal(lo[k], mine.min(axis=0), equal_nan=True)
        assert np.array_equal(hi[k], mine.max(axis=0), equal_nan=True)


def test_compiled_subdivision_matches_the_numpy_levels(sample, monkeypatch):
    """Same chords, sources, approx flags and order as the numpy level loop; pixels within 1e-9 px
    (midpoint angles from libm's atan2); and the same frames."""
    renderer = SceneRenderer(sample, size=SIZE, antialias=False)
    calls = []
    real = geo.subdivide_segments

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(geo, "subdivide_segments", record)
    compiled = [renderer.render_camera(40, i) for i in (0, 3)]
    monkeypatch.setattr(geo, "subdivide_segments", real)
    monkeypatch.setattr(geo, "subdivide_ftheta", lambda *args: None)
    renderer._work = None
    assert all(np.array_equal(img, renderer.render_camera(40, i)) for img, i in zip(compiled, (0, 3)))
    for args, kwargs in calls:
        ref = geo.subdivide_segments(*args, **kwargs)
        monkeypatch.undo()
        new = geo.subdivide_segments(*args, **kwargs)
        monkeypatch.setattr(geo, "subdivide_ftheta", lambda *args: None)
        assert len(new[0]) == len(ref[0]) > 100
        assert np.array_equal(new[4], ref[4]) and np.array_equal(new[5], ref[5])
        for k in range(4):
            assert np.abs(new[k] - ref[k]).max() < 1e-9


def test_compiled_planar_clip_and_cull_equal_numpy(sample_tenfold, monkeypatch):
    """The compiled planar pass keeps the same planars and the same clipped ring edges, bit for bit."""
    import avsim.render.geometry.camera as cg

    calls = []
    real = cg._planar_group

    def record(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(cg, "_planar_group", record)
    renderer = SceneRenderer(sample_tenfold, size=SIZE, antialias=False)
    for i in range(len(renderer.rig)):
        renderer.camera_primitives(20, i)
    monkeypatch.setattr(cg, "_planar_group", real)
    clipped = 0
    for args in calls:
        new = real(*args)
        monkeypatch.setattr(cg, "clip_cull_planars", lambda *a: None)
        ref = real(*args)
        monkeypatch.undo()
        assert np.array_equal(new.verts, ref.verts) and np.array_equal(new.obj, ref.obj)
        assert all(np.array_equal(x, y) for x, y in zip(new.edges, ref.edges))
        clipped += int((args[1][..., 2].min(axis=1) < style.NEAR_M).sum())
    assert clipped > 0  # some planars crossed the near plane


def test_planar_bounds_equal_pixel_bounds():
    from avsim.render.geometry.kernels import planar_bounds

    rng = np.random.default_rng(5)
    owner = rng.integers(0, 40, 600)
    ua, ub = rng.normal(size=(600, 2)) * 400 + 200, rng.normal(size=(600, 2)) * 400 + 100
    ua[3], ub[8], ua[11, 0] = np.nan, np.inf, -np.inf
    approx = rng.random(600) < 0.1
    boxes, exact = planar_bounds(45, owner, ua, ub, approx, (320, 180), geo.PIXEL_CENTRE_OFFSET)
    ref = geo.pixel_bounds(45, np.concatenate([owner, owner]), np.concatenate([ua, ub]), 320, 180)
    assert np.array_equal(boxes, ref) and (ref[:, 2] < 0).sum() > 5 and (ref[:, 2] >= 0).sum() > 5
    assert np.array_equal(exact, ~np.isin(np.arange(45), owner[approx]))


def test_block_ego_poses_equal_pose_at(sample):
    renderer = SceneRenderer(sample, size=SIZE)
    for f in range(0, renderer.n_frames, 3):
        mine, ref = renderer._world_SE3_ego(f), sample.ego.pose_at(renderer.timestamps_ns[f : f + 1])[0]
        assert np.array_equal(mine.rotation, ref.rotation) and np.array_equal(mine.translation, ref.translation)


def test_compiled_strokes_equal_the_numpy_steps(sample_tenfold, monkeypatch):
    """The one-pass stroke kernel gives the capsules of the numpy steps (clip, cull, subdivide, box
    test): same count, colours, orders and objects, pixels within 1e-9 px, and the same frames."""
    import avsim.render.geometry.camera as cg

    renderer = SceneRenderer(sample_tenfold, size=SIZE, antialias=False)
    for frame, i in ((25, 0), (25, 3), (90, 5)):
        compiled, img = renderer.camera_primitives(frame, i), renderer.render_camera(frame, i)
        with monkeypatch.context() as m:
            m.setattr(cg, "stroke_capsules", lambda *args: None)
            ref, ref_img = renderer.camera_primitives(frame, i), renderer.render_camera(frame, i)
        assert compiled.n_capsules == ref.n_capsules > 50 and np.array_equal(img, ref_img)
        for part, name in (("capsules", "rgb"), ("capsules", "zbias"), ("capsules", "order"), ("capsules", "obj"),
                           ("planars", "order"), ("planars", "bbox")):  # fmt: skip
            assert np.array_equal(getattr(getattr(compiled, part), name), getattr(getattr(ref, part), name)), name
        for name in ("xy_px", "inv_depth", "radius_px"):
            assert np.abs(getattr(compiled.capsules, name) - getattr(ref.capsules, name)).max() < 1e-9, name
