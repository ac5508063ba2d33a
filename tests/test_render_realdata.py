"""Real data: a real nuScenes scene through the real nuScenes rig, and the projection of the real
mmdetection3d labels (2-D centres of 3-D boxes, OpenCV pixel coordinates) reproduced: by
projection within 0.001 px, by the centroid of a rendered dot within 0.25 px."""

from __future__ import annotations

import json

import numpy as np
import pytest

from avsim.core.cameras import PinholeCamera
from avsim.core.rig import CameraRig
from avsim.core.transforms import SE3, quat_to_matrix
from avsim.render.geometry.projection import PIXEL_CENTRE_OFFSET, cone_half_angle_rad
from avsim.render.geometry.scene import FrameObjects, SceneRenderer, camera_primitives
from avsim.render.raster.draw import rasterize
from avsim.render.raster.primitives import ray_map

pytestmark = pytest.mark.realdata
MONO3D_IMAGE = "CAM_BACK_LEFT"


def _nus_info(shared_data):
    from avsim.scenario.importers.safe_pickle import (
        load_pickle,  # restricted unpickler (untrusted file)
    )

    return load_pickle(shared_data / "nuscenes-mmdet3d" / "nus_info.pkl")


def nuscenes_rig(info_sample: dict) -> CameraRig:
    """The real 6-camera nuScenes rig of one mmdetection3d info sample (1600x900 pinholes)."""
    names = tuple(info_sample["images"])
    cams, extrinsics = [], []
    for name in names:
        entry = info_sample["images"][name]
        K = np.asarray(entry["cam2img"], dtype=np.float64)
        cams.append(PinholeCamera(1600, 900, K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
        extrinsics.append(np.asarray(entry["cam2ego"], dtype=np.float64))
    return CameraRig(names, tuple(cams), SE3.from_matrix(np.stack(extrinsics)))


@pytest.fixture(scope="module")
def real_rig(shared_data) -> CameraRig:
    return nuscenes_rig(_nus_info(shared_data)["data_list"][0])


def _mono3d(shared_data) -> tuple[dict, list[dict]]:
    data = json.loads((shared_data / "nuscenes-mmdet3d" / "nus_infos_mono3d.coco.json").read_text())
    image = next(im for im in data["images"] if MONO3D_IMAGE in im["file_name"])
    boxes = [a for a in data["annotations"] if a["image_id"] == image["id"]]
    return image, boxes


def test_labelled_box_centres_are_reproduced_within_half_a_pixel(shared_data, real_rig):
    image, boxes = _mono3d(shared_data)
    assert len(boxes) == 5
    # the labels' camera: the real rig's calibration of that camera (same vehicle)
    camera = real_rig.camera(MONO3D_IMAGE)
    np.testing.assert_allclose(camera.K, np.asarray(image["cam_intrinsic"]), atol=1e-6)
    # place the boxes in the world with the image's own ego pose and camera mounting
    world_SE3_ego = SE3(quat_to_matrix(np.asarray(image["ego2global_rotation"])), np.asarray(image["ego2global_translation"]))
    ego_SE3_cam = real_rig.extrinsic(MONO3D_IMAGE)
    np.testing.assert_allclose(ego_SE3_cam.translation, image["cam2ego_translation"], atol=1e-6)
    world_SE3_cam = world_SE3_ego.compose(ego_SE3_cam)
    centres_cam = np.array([b["bbox_cam3d"][:3] for b in boxes])
    centres_world = world_SE3_cam.apply(centres_cam)
    expected = np.array([b["center2d"][:2] for b in boxes])
    # 1. projection through world -> camera -> pixels
    uv, depth, inside = camera.project(world_SE3_cam.inverse().apply(centres_world))
    np.testing.assert_allclose(uv, expected, atol=1e-3)
    np.testing.assert_allclose(depth, [b["center2d"][2] for b in boxes], atol=1e-6)
    assert inside.all()
    # 2. through the renderer: a dot drawn at each 3-D centre is centred on the labelled pixel
    rays, cone = ray_map(camera), cone_half_angle_rad(camera)
    for centre, target in zip(centres_world, expected):
        objs = FrameObjects.build(lines=(centre[None], centre[None], np.array([[255.0, 255, 255]]), np.array([5.0])))
        img = rasterize(camera_primitives(camera, cone, world_SE3_cam.inverse(), objs), rays)
        ys, xs = np.nonzero(img.any(axis=-1))
        centroid = np.array([xs.mean(), ys.mean()]) + PIXEL_CENTRE_OFFSET
        # the disc's pixel centroid is within 0.14 px of the label here; a half-pixel error in the
        # pixel-centre convention would put it 0.36 px or more away
        assert np.abs(centroid - target).max() <= 0.25, (centroid, target)


def test_real_nuscenes_scene_renders_through_the_real_rig(shared_data, real_rig):
    from avsim.scenario.importers.scenarionet import load_scenarionet

    scenario = load_scenarionet(shared_data / "scenarionet" / "sd_nuscenes_v1.0-mini_scene-0103.pkl")
    scenario = scenario.replace(rig=real_rig)
    renderer = SceneRenderer(scenario, size=(480, 270), fps=10.0)
    frames = renderer.render_frame(20)
    assert set(frames) == set(real_rig.names)
    front = frames["CAM_FRONT"]
    assert front.shape == (270, 480, 3)
    flat = front.reshape(-1, 3)
    # the front view shows lane lines (white dashes, the yellow divider), boundaries and boxes
    white = (flat[:, 0] == flat[:, 1]) & (flat[:, 1] == flat[:, 2]) & (flat[:, 0] > 150)
    yellow = (flat[:, 2] == 0) & (flat[:, 0] > 100) & (flat[:, 0] == flat[:, 1])
    assert white.sum() > 50 and yellow.sum() > 50
    total_lit = sum(int(f.any(axis=-1).sum()) for f in frames.values())
    assert total_lit > 0.02 * 6 * 480 * 270
    # the tracked objects are drawn: removing them changes several views
    from avsim.core.agents import AgentTracks

    bare = SceneRenderer(scenario.replace(agents=AgentTracks.empty()), size=(480, 270), fps=10.0).render_frame(20)
    changed = [name for name in frames if (frames[name] != bare[name]).any(axis=-1).sum() > 200]
    assert len(changed) >= 3, changed


def test_labelled_boxes_fill_their_labelled_2d_boxes(shared_data, real_rig):
    """The 5 real 3-D boxes drawn as cuboids cover their labelled 2-D boxes (the hull of the
    projected corners). Tolerance 4 px: the grey edge stroke reaches ~2 px past the silhouette,
    and the labels' boxes came from the full 3-D orientation (yaw only here: <= 1.5 px)."""
    from avsim.core.agents import box_corners
    from avsim.core.transforms import matrix_to_quat

    _, boxes = _mono3d(shared_data)
    camera = real_rig.camera(MONO3D_IMAGE)
    rays, cone = ray_map(camera), cone_half_angle_rad(camera)
    for box in boxes:
        x, y, z, w, l, h, yaw = box["bbox_cam3d"]  # mmdetection3d camera box: nuScenes w, l, h; yaw about camera y
        heading, up = np.array([np.cos(yaw), 0.0, -np.sin(yaw)]), np.array([0.0, -1.0, 0.0])
        R = np.stack([heading, np.cross(up, heading), up], axis=1)
        corners = box_corners(np.array([[x, y, z]]), np.array([[l, w, h]]), matrix_to_quat(R)[None])
        objs = FrameObjects.build(boxes=(corners, ["Pedestrian"]))
        img = rasterize(camera_primitives(camera, cone, SE3.identity(), objs), rays)
        ys, xs = np.nonzero(img.any(axis=-1))
        x0, y0, bw, bh = box["bbox"]
        drawn = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float)
        np.testing.assert_allclose(drawn, [x0, y0, x0 + bw, y0 + bh], atol=4.0)
