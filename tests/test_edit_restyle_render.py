"""A lane-line restyle over an arc-length range renders with the new pattern only in that range.

Rendered with the real renderer (avsim.render.geometry.scene.SceneRenderer) through a pinhole camera
looking straight down from 60 m, so image columns map linearly to world x.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_edit_helpers import road_scenario

from avsim.core.cameras import PinholeCamera
from avsim.core.rig import CameraRig
from avsim.core.transforms import SE3
from avsim.edit import ops_agents, ops_map

W, H, F, HEIGHT_M, CENTRE_X = 960, 160, 480.0, 60.0, 25.0
PX_PER_M = F / HEIGHT_M  # 8 px per metre on the ground


def _top_down_rig() -> CameraRig:
    # camera axes in the ego frame: x right = world +x, y down = world -y, z forward = world -z
    ego_R_cam = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]]).T
    cam = PinholeCamera(W, H, F, F, W / 2, H / 2)
    return CameraRig(("top",), (cam,), SE3(ego_R_cam[None], np.array([[CENTRE_X, 0.0, HEIGHT_M]])))


def _render(scenario) -> np.ndarray:
    from avsim.render.geometry.scene import SceneRenderer

    return SceneRenderer(scenario, rig=_top_down_rig(), size=(W, H), fps=10).render_camera(0, "top")


def _u(x_m: float) -> int:
    return int(round(W / 2 + (x_m - CENTRE_X) * PX_PER_M))


def _lit(img: np.ndarray, y_m: float, x0: float, x1: float) -> np.ndarray:
    v = int(round(H / 2 - y_m * PX_PER_M))
    return img[v, _u(x0) : _u(x1)].max(axis=1) > 60


@pytest.fixture(scope="module")
def images():
    scn = road_scenario()
    scn = ops_agents.remove_agents(scn, list(scn.agents.track_ids))
    # ll_div (y = 1.75) runs from x = -50, long-dashed: 3 m painted, 9 m gap; arc length 50..100 m
    # is x = 0..50 m
    edited = ops_map.restyle_lane_lines(scn, np.array([False, True, False, False]), style="SOLID_SINGLE", s_range_m=(50.0, 100.0))
    return _render(scn), _render(edited)


def test_restyled_range_is_solid(images):
    before, after = images
    assert _lit(after, 1.75, 1.0, 49.0).all()  # new pattern: solid
    assert 0.1 < _lit(before, 1.75, 1.0, 49.0).mean() < 0.4  # it was long-dashed (3 of 12 m)


def test_pattern_unchanged_outside_range(images):
    before, after = images
    for x0, x1 in ((-33.0, -1.0), (54.0, 83.0)):
        lit = _lit(after, 1.75, x0, x1)
        assert 0.1 < lit.mean() < 0.45 and not lit.all()  # still dashed
    # the rest of the image (other lines, other rows) is untouched
    v = int(round(H / 2 - 1.75 * PX_PER_M))
    band = slice(v - 8, v + 9)
    mask = np.ones(H, bool)
    mask[band] = False
    np.testing.assert_array_equal(before[mask], after[mask])
    np.testing.assert_array_equal(before[band, : _u(-1.0)], after[band, : _u(-1.0)])
