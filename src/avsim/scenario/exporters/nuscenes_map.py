"""A scenario's map as a nuScenes map expansion (v1.3 JSON, what `NuScenesMap` reads) and map mask.

Only the layers the avsim map carries are filled; the others are written empty:

| nuScenes layer | from |
|---|---|
| `drivable_area` | drivable areas (one polygon each) |
| `lane` | lanes: the polygon between the rails (left rail, right rail reversed), the rails' vertices as `left/right_lane_divider_segments`, the centre line as straight `arcline_path_3` segments; `connectivity` from geometry (a lane ending within `CONNECT_M` of another's start, heading within `CONNECT_DEG`, flows into it) |
| `road_divider` | yellow single solid lane lines |
| `lane_divider` | every other lane line, typed per node (`segment_type` from the line's colour and style, the nearest nuScenes type) |
| `ped_crossing` | crosswalks |
| `stop_line` | wait lines, as a `STOP_LINE_WIDTH_M` wide polygon around the line (`TRAFFIC_LIGHT` with the lights within `STOP_LIGHT_REACH_M` as cues, else `STOP_SIGN`) |
| `traffic_light` | traffic lights (pose: centre and yaw; a 1 m line along the facing direction) |
| `road_segment`, `road_block`, `walkway`, `carpark_area`, `lane_connector` | none (the avsim map has no such element) |

Road boundaries, poles, signs and road markings have no nuScenes layer and are left out. The map is
2-D: nodes keep x, y only. `mask_png` is the semantic-prior mask of the `map` table: the road
surface at 0.1 m per pixel (`maps.raster.surface_mask`), bottom-left corner at the global origin.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.maps import HDMap
from avsim.maps.raster import surface_mask
from avsim.scenario.exporters.nuscenes_tables import content_token

EXPANSION_VERSION = "1.3"
MASK_RESOLUTION_M = 0.1
CONNECT_M = 0.5
CONNECT_DEG = 45.0
STOP_LINE_WIDTH_M = 0.3
STOP_LIGHT_REACH_M = 40.0
LAYERS: tuple[str, ...] = ("polygon", "line", "node", "drivable_area", "road_segment", "road_block", "lane", "ped_crossing",
                           "walkway", "stop_line", "carpark_area", "road_divider", "lane_divider", "traffic_light",
                           "lane_connector")  # fmt: skip


def segment_type(color: str, style: str) -> str:
    """The nearest nuScenes `lane_divider_segments[*].segment_type` of an avsim lane-line type.

    Args:
        color, style: the line's (or vertex's) colour and style.

    Returns:
        SINGLE_SOLID_WHITE, DOUBLE_SOLID_WHITE, DOUBLE_DASHED_WHITE or SINGLE_SOLID_YELLOW.
    """
    if color.upper() == "YELLOW":
        return "SINGLE_SOLID_YELLOW"
    if "DASH" in style.upper() or "DOT" in style.upper():
        return "DOUBLE_DASHED_WHITE"
    return "DOUBLE_SOLID_WHITE" if "GROUP" in style.upper() else "SINGLE_SOLID_WHITE"


class _Expansion:
    """The layers under construction; tokens from `content_token(map key, layer, element id, ...)`."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.layers: dict[str, list[dict[str, Any]]] = {name: [] for name in LAYERS}

    def token(self, *parts: object) -> str:
        return content_token("map", self.key, *parts)

    def nodes(self, owner: str, points: NDArrayFloat) -> list[str]:
        out = []
        for k, p in enumerate(np.asarray(points, np.float64).reshape(-1, 3)):
            tok = self.token("node", owner, k)
            self.layers["node"].append({"token": tok, "x": float(p[0]), "y": float(p[1])})
            out.append(tok)
        return out

    def polygon(self, owner: str, ring: NDArrayFloat) -> str:
        ring = np.asarray(ring, np.float64)
        if len(ring) > 3 and np.allclose(ring[0], ring[-1]):
            ring = ring[:-1]
        tok = self.token("polygon", owner)
        self.layers["polygon"].append({"token": tok, "exterior_node_tokens": self.nodes(owner, ring), "holes": []})
        return tok

    def line(self, owner: str, points: NDArrayFloat) -> tuple[str, list[str]]:
        tok = self.token("line", owner)
        nodes = self.nodes(owner, points)
        self.layers["line"].append({"token": tok, "node_tokens": nodes})
        return tok, nodes


def map_expansion(hd_map: HDMap, key: str, canvas_edge_m: tuple[float, float]) -> dict[str, Any]:
    """A map expansion (v1.3) document of `hd_map` (see the module docstring).

    Args:
        hd_map: the map, already in the export frame and cut to the exported region.
        key: the map's identity (tokens derive from it).
        canvas_edge_m: the map canvas (width, height) in metres.

    Returns:
        The JSON-ready document.
    """
    ex = _Expansion(key)
    for k, ring in enumerate(hd_map.drivable_areas):
        tok = ex.token("drivable_area", k)
        ex.layers["drivable_area"].append({"token": tok, "polygon_tokens": [ex.polygon(tok, ring)]})
    for k, ring in enumerate(hd_map.crosswalks):
        tok = ex.token("ped_crossing", k)
        ex.layers["ped_crossing"].append({"token": tok, "polygon_token": ex.polygon(tok, ring), "road_segment_token": None})
    _dividers(ex, hd_map)
    lights = _traffic_lights(ex, hd_map)
    _stop_lines(ex, hd_map, lights)
    arclines, connectivity = _lanes(ex, hd_map)
    return {"version": EXPANSION_VERSION, "canvas_edge": [float(canvas_edge_m[0]), float(canvas_edge_m[1])], **ex.layers,
            "arcline_path_3": arclines, "connectivity": connectivity}  # fmt: skip


def _dividers(ex: _Expansion, hd_map: HDMap) -> None:
    lines = hd_map.lane_lines
    for k in range(len(lines)):
        pts = lines.lines[k]
        if len(pts) < 2:
            continue
        if lines.vertex_color is not None and lines.vertex_style is not None:
            s = slice(lines.lines.offsets[k], lines.lines.offsets[k + 1])
            types = [segment_type(c, st) for c, st in zip(lines.vertex_color[s], lines.vertex_style[s])]
        else:
            types = [segment_type(str(lines.color[k]), str(lines.style[k]))] * len(pts)
        tok = ex.token("divider", str(lines.ids[k]))
        line, nodes = ex.line(tok, pts)
        if lines.lane_type(k) == "YELLOW SOLID_SINGLE":
            ex.layers["road_divider"].append({"token": tok, "line_token": line, "road_segment_token": None})
        else:
            ex.layers["lane_divider"].append({"token": tok, "line_token": line, "lane_divider_segments": [
                {"node_token": n, "segment_type": t} for n, t in zip(nodes, types)]})  # fmt: skip


def _traffic_lights(ex: _Expansion, hd_map: HDMap) -> list[tuple[str, NDArrayFloat]]:
    from avsim.core.transforms import quat_to_yaw

    lights = hd_map.traffic_lights
    out = []
    for k in range(len(lights)):
        centre = np.asarray(lights.center_m[k], np.float64)
        yaw = float(quat_to_yaw(np.asarray(lights.orientation[k], np.float64)))
        tok = ex.token("traffic_light", str(lights.ids[k]))
        ahead = centre + np.array([np.cos(yaw), np.sin(yaw), 0.0])
        line, _ = ex.line(tok, np.stack([centre, ahead]))
        ex.layers["traffic_light"].append({"token": tok, "line_token": line, "traffic_light_type": "VERTICAL",
                                           "from_road_block_token": None, "items": [],
                                           "pose": {"tx": float(centre[0]), "ty": float(centre[1]), "tz": float(centre[2]),
                                                    "rx": 0.0, "ry": 0.0, "rz": yaw}})  # fmt: skip
        out.append((tok, centre))
    return out


def _stop_lines(ex: _Expansion, hd_map: HDMap, lights: list[tuple[str, NDArrayFloat]]) -> None:
    from shapely.geometry import LineString

    for k, pts in enumerate(hd_map.wait_lines):
        if len(pts) < 2:
            continue
        ring = np.asarray(LineString(np.asarray(pts)[:, :2]).buffer(STOP_LINE_WIDTH_M / 2, cap_style="flat").exterior.coords)
        tok = ex.token("stop_line", k)
        mid = np.asarray(pts, np.float64).mean(axis=0)
        cues = [t for t, c in lights if np.linalg.norm(c[:2] - mid[:2]) <= STOP_LIGHT_REACH_M]
        ex.layers["stop_line"].append({"token": tok, "polygon_token": ex.polygon(tok, np.c_[ring, np.zeros(len(ring))]),
                                       "stop_line_type": "TRAFFIC_LIGHT" if cues else "STOP_SIGN", "ped_crossing_tokens": [],
                                       "traffic_light_tokens": cues, "road_block_token": None})  # fmt: skip


def _straight_paths(centre: NDArrayFloat) -> list[dict[str, Any]]:
    """The centre line as straight arcline paths (shape LSL, zero-length turns), one per segment."""
    out = []
    for a, b in zip(centre[:-1], centre[1:]):
        length = float(np.linalg.norm(b[:2] - a[:2]))
        if length <= 1e-9:
            continue
        yaw = float(np.arctan2(b[1] - a[1], b[0] - a[0]))
        out.append({"start_pose": [float(a[0]), float(a[1]), yaw], "end_pose": [float(b[0]), float(b[1]), yaw],
                    "shape": "LSL", "radius": 999.0, "segment_length": [0.0, length, 0.0]})  # fmt: skip
    return out


def _lanes(ex: _Expansion, hd_map: HDMap) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[str]]]]:
    lanes = hd_map.lanes
    arclines: dict[str, list[dict[str, Any]]] = {}
    ends: list[tuple[str, NDArrayFloat, NDArrayFloat]] = []
    for k in range(len(lanes)):
        left, right, centre = lanes.left[k], lanes.right[k], lanes.centre[k]
        paths = _straight_paths(np.asarray(centre, np.float64))
        if len(left) < 2 or len(right) < 2 or not paths:
            continue
        tok = ex.token("lane", str(lanes.ids[k]))
        left_nodes, right_nodes = ex.nodes(tok + "/left", left), ex.nodes(tok + "/right", right)
        from_line, _ = ex.line(tok + "/from", np.stack([left[0], right[0]]))
        to_line, _ = ex.line(tok + "/to", np.stack([left[-1], right[-1]]))
        ex.layers["lane"].append({
            "token": tok, "polygon_token": ex.polygon(tok, np.concatenate([left, right[::-1]])), "lane_type": "CAR",
            "from_edge_line_token": from_line, "to_edge_line_token": to_line,
            "left_lane_divider_segments": [{"node_token": n, "segment_type": "NIL"} for n in left_nodes],
            "right_lane_divider_segments": [{"node_token": n, "segment_type": "NIL"} for n in right_nodes],
        })  # fmt: skip
        arclines[tok] = paths
        ends.append((tok, np.array(paths[0]["start_pose"]), np.array(paths[-1]["end_pose"])))
    return arclines, _connectivity(ends)


def _connectivity(ends: list[tuple[str, NDArrayFloat, NDArrayFloat]]) -> dict[str, dict[str, list[str]]]:
    """Lane A flows into lane B when A's end pose is within CONNECT_M of B's start pose, headings within CONNECT_DEG."""
    out: dict[str, dict[str, list[str]]] = {tok: {"incoming": [], "outgoing": []} for tok, _, _ in ends}
    if not ends:
        return out
    starts = np.array([s for _, s, _ in ends])
    for tok, _, end in ends:
        near = np.linalg.norm(starts[:, :2] - end[:2], axis=1) <= CONNECT_M
        turn = np.abs((starts[:, 2] - end[2] + np.pi) % (2 * np.pi) - np.pi) <= np.radians(CONNECT_DEG)
        for j in np.flatnonzero(near & turn):
            other = ends[j][0]
            if other != tok:
                out[tok]["outgoing"].append(other)
                out[other]["incoming"].append(tok)
    return out


def mask_png(hd_map: HDMap, canvas_edge_m: tuple[float, float]) -> bytes:
    """The semantic-prior mask of the `map` table: the road surface, 0.1 m per pixel, PNG.

    Args:
        hd_map: the map in the export frame (the canvas starts at its origin).
        canvas_edge_m: the canvas (width, height) in metres.

    Returns:
        The PNG bytes (8-bit grey, 255 on the road surface).
    """
    import cv2

    w, h = (int(np.ceil(v / MASK_RESOLUTION_M)) for v in canvas_edge_m)
    ok, buf = cv2.imencode(".png", surface_mask(hd_map, w, h, MASK_RESOLUTION_M))
    if not ok:
        raise RuntimeError("OpenCV could not encode the map mask")
    return bytes(buf)
