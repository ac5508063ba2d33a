"""HD-map model: containers, lane types, spatial queries, BEV raster."""

import numpy as np
import pytest

from avsim.core.errors import AvsimValueError
from avsim.core.transforms import SE3, yaw_to_quat
from avsim.maps import Cuboids, HDMap, LaneLines, Lanes, Polygons, Polylines, lane_style
from avsim.maps.queries import within_patch, within_radius
from avsim.maps.raster import bev_raster


def line(x0, x1, y=0.0):
    return np.array([[x0, y, 0.0], [x1, y, 0.0]])


def sample_map():
    lines = Polylines.from_list(["l1", "l2"], [line(0, 50, 1.75), line(0, 50, -1.75)])
    vertex_color = np.array(["YELLOW", "YELLOW", "WHITE", "WHITE"])
    vertex_style = np.array(["SOLID_GROUP", "SOLID_GROUP", "LONG_DASHED_SINGLE", "SOLID_SINGLE"])
    lane_lines = LaneLines(lines, np.array(["WHITE", "WHITE"]), np.array(["SOLID_SINGLE"] * 2), vertex_color, vertex_style)
    concave = np.array([[100, 0, 0], [110, 0, 0], [110, 10, 0], [105, 2, 0], [100, 10, 0]], float)
    return HDMap.build(
        lane_lines=lane_lines,
        lanes=Lanes(np.array(["lane"]), Polylines.from_list(["a"], [line(0, 50, 1.75)]), Polylines.from_list(["b"], [line(0, 50, -1.75)]), Polylines.from_list(["c"], [line(0, 50)])),
        crosswalks=Polygons.from_list(["cw", "concave"], [np.array([[20, -5, 0], [24, -5, 0], [24, 5, 0], [20, 5, 0]], float), concave]),
        traffic_lights=Cuboids(np.array(["tl"]), np.array([[30.0, 6, 5]]), np.array([[0.3, 0.3, 1.0]]), yaw_to_quat([0.0])),
    )


def test_lane_type_uses_most_frequent_vertex_pair():
    m = sample_map()
    assert m.lane_lines.lane_type(0) == "YELLOW SOLID_GROUP"
    assert m.lane_lines.lane_type(1) == "WHITE LONG_DASHED_SINGLE"  # tie: first along the line
    assert lane_style("YELLOW SOLID_GROUP").rgb == (255, 255, 0)
    assert lane_style("PURPLE ZIGZAG").rgb == (181, 164, 71)


def test_queries_radius_and_patch():
    m = sample_map()
    near = within_radius(m, (22.0, 0.0), 3.0)
    assert near.element_counts()["crosswalks"] == 1 and near.element_counts()["traffic_lights"] == 0
    inside_concave_notch = within_radius(m, (105.0, 8.0), 0.5)  # in the notch, outside the polygon
    assert inside_concave_notch.element_counts()["crosswalks"] == 0
    inside = within_radius(m, (102.0, 5.0), 0.5)
    assert inside.element_counts()["crosswalks"] == 1
    patch = within_patch(m, SE3.from_yaw(np.pi / 2, np.array([30.0, 0, 0])), 4.0, 2.0)  # long axis along y
    assert patch.element_counts()["lane_lines"] == 2 and patch.element_counts()["traffic_lights"] == 0


def test_select_keeps_vertex_attributes_aligned():
    m = sample_map()
    sub = m.lane_lines.select(np.array([False, True]))
    assert list(sub.vertex_style) == ["LONG_DASHED_SINGLE", "SOLID_SINGLE"] and len(sub.lines.points_m) == 2


def test_bev_raster_draws_around_pose():
    image = bev_raster(sample_map(), SE3.from_yaw(0.0, np.array([22.0, 0, 0])), size_px=128, resolution_m_per_px=0.25)
    assert image.shape == (128, 128, 3) and image.dtype == np.uint8
    assert (image == (139, 93, 255)).all(-1).sum() > 100  # the crosswalk under the ego


def test_bad_geometry_rejected():
    with pytest.raises(AvsimValueError, match="offsets"):
        Polygons(np.array(["p"]), np.zeros((2, 3)), np.array([0, 2]))
    with pytest.raises(AvsimValueError, match="unique"):
        Polylines.from_list(["a", "a"], [line(0, 1), line(0, 1)])
    with pytest.raises(AvsimValueError, match="NaN"):
        Polylines.from_list(["a"], [np.array([[0, 0, 0], [np.inf, 0, 0]])])


def test_empty_map():
    assert HDMap.empty().is_empty() and HDMap.empty().bounds_xy() is None
    assert not sample_map().is_empty()
