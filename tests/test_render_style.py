"""One style table (`avsim.maps.style`): the renderer, the bird's-eye raster, the map's lane-type
table and the edit preview all read it."""

from __future__ import annotations

import numpy as np
import pytest

from avsim.edit import preview
from avsim.maps import HDMap, LaneLines, Polylines, raster
from avsim.maps import style as table
from avsim.render import style as render_style
from avsim.render.geometry import projection as geo

SHARED = [
    "RGB", "ROAD_BOUNDARY_RGB", "WAIT_LINE_RGB", "POLE_RGB", "CROSSWALK_RGB", "ROAD_MARKING_RGB", "TRAFFIC_SIGN_RGB",
    "LANE_LINE_WIDTH_PX", "ROAD_BOUNDARY_WIDTH_PX", "WAIT_LINE_WIDTH_PX", "POLE_WIDTH_PX", "TRAFFIC_LIGHT_RGB",
    "BOX_EDGE_RGB", "BOX_EDGE_WIDTH_PX", "BOX_RGB", "DashPattern", "SOLID", "LONG_DASH", "SHORT_DASH", "DOTTED",
    "DOT_DASH", "WHITE_RGB", "YELLOW_RGB", "OTHER_LANE_RGB", "DOUBLE_LINE_OFFSET_M", "LaneStyle", "LANE_STYLES",
    "OTHER_LANE_STYLE", "DEFAULT_LANE_TYPE", "lane_style",
]  # fmt: skip


@pytest.mark.parametrize("name", SHARED)
def test_renderer_style_is_the_map_table(name: str) -> None:
    assert getattr(render_style, name) is getattr(table, name)


def test_renderer_patterns_are_the_spec_values() -> None:
    assert table.DOTTED.pairs == ((0.05, 0.45),) and table.DOTTED.period_m == pytest.approx(0.5)
    assert table.LONG_DASH.pairs == ((3.0, 9.0),) and table.SHORT_DASH.pairs == ((1.5, 1.5),)
    assert table.DOT_DASH.period_m == pytest.approx(3.6576) and len(table.DOT_DASH.pairs or ()) == 6


def test_bev_raster_and_preview_use_the_spec_palette() -> None:
    expected = {
        "crosswalks": table.CROSSWALK_RGB, "road_markings": table.ROAD_MARKING_RGB, "road_boundaries": table.ROAD_BOUNDARY_RGB,
        "wait_lines": table.WAIT_LINE_RGB, "poles": table.POLE_RGB, "traffic_signs": table.TRAFFIC_SIGN_RGB,
        "traffic_lights": table.TRAFFIC_LIGHT_RGB["unknown"],
    }  # fmt: skip
    assert {k: raster.BEV_COLORS[k] for k in expected} == expected
    assert (preview.CROSSWALK, preview.ROAD_MARKING, preview.ROAD_BOUNDARY, preview.WAIT_LINE, preview.POLE, preview.SIGN) == (
        table.CROSSWALK_RGB, table.ROAD_MARKING_RGB, table.ROAD_BOUNDARY_RGB, table.WAIT_LINE_RGB, table.POLE_RGB,
        table.TRAFFIC_SIGN_RGB,
    )  # fmt: skip
    assert preview.LIGHT_RGB is table.TRAFFIC_LIGHT_RGB
    assert {name: back for name, (_, back) in table.BOX_RGB.items()} == preview.CLASS_RGB


@pytest.mark.parametrize("pattern", [table.LONG_DASH, table.SHORT_DASH, table.DOTTED, table.DOT_DASH])
def test_preview_sampling_and_renderer_cutting_paint_the_same_fraction(pattern: table.DashPattern) -> None:
    line = np.array([[0.0, 0.0, 0.0], [40.0, 0.0, 0.0]])
    p0, p1 = geo.pattern_segments(line, pattern)
    renderer_fraction = np.linalg.norm(p1 - p0, axis=-1).sum() / 40.0
    fine = np.arange(0.0, 40.0, 0.001)
    assert pattern.is_painted(fine).mean() == pytest.approx(renderer_fraction, abs=0.01)


def _preview_pixels(lane_style: str) -> int:
    line = np.array([[0.0, 0.0, 0.0], [20.0, 0.0, 0.0]])
    lines = LaneLines(Polylines.from_list(["a"], [line]), np.array(["YELLOW"]), np.array([lane_style]))
    img = preview.draw_static(HDMap.build(lane_lines=lines), preview._View(np.array([10.0, 0.0]), 24.0, 960))
    return int((img.astype(int) - np.array(preview.BACKGROUND)).any(-1).sum())


def test_preview_draws_the_renderers_dotted_pattern() -> None:
    # the renderer's dotted line is 0.05 m of paint every 0.5 m (10 %); the preview's own old
    # pattern (0.25 m every 0.75 m, 33 %) would light far more pixels
    solid, dotted = _preview_pixels("SOLID_SINGLE"), _preview_pixels("DOT_SOLID_SINGLE")
    assert 0 < dotted < 0.2 * solid
