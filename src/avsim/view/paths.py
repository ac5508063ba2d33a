"""The entity-path layout and the timeline of every avsim recording (docs/viewer.md).

One timeline, ``scenario_time``: a duration in int64 nanoseconds since the first ego pose of
the viewed scenario (its ``start_ns``). A scenario viewed with ``--before`` keeps the same
origin, so absolute scenario times line up (an edit that shifts time shows as such). Video
frame k of a control / generated / real video is placed at its own presentation time plus the
video's start (0: the video starts with the scenario, as a full ``avsim render`` does).

Layout (world frame: the scenario's world, metres, right-handed z-up)::

    world                                  ViewCoordinates RIGHT_HAND_Z_UP (static)
    world/map/<element>                    LineStrips3D, static: lane_lines (painted pieces in the
                                           spec's colours and dash patterns), road_boundaries,
                                           wait_lines, poles, crosswalks, road_markings and
                                           drivable_areas (closed outlines), lanes (centre lines)
    world/map/crosswalks/fill              Mesh3D, static: filled polygons (also road_markings/fill)
    world/map/traffic_signs                Boxes3D, static
    world/map/traffic_lights               Boxes3D: boxes static; colours and labels (state) on
                                           scenario_time at every state change
    world/agents                           Boxes3D on scenario_time: one box per agent present,
                                           label "<Class> <track_id>", spec front colour per class
    world/ego_trajectory                   LineStrips3D, static: the whole ego path
    world/ego                              Transform3D on scenario_time: world_SE3_ego
    world/ego/cameras/<camera>             Transform3D (ego_SE3_camera) + Pinhole (frustum), static
    videos/<source>/<camera>               AssetVideo (static, H.264 mp4 as it is) +
                                           VideoFrameReference on scenario_time;
                                           source: control | generated | real
    before/world/...                       the `--before` scenario, same layout under `before/`
"""

from __future__ import annotations

TIMELINE = "scenario_time"
WORLD = "world"
MAP = "world/map"
AGENTS = "world/agents"
EGO = "world/ego"
EGO_TRAJECTORY = "world/ego_trajectory"
CAMERAS = "world/ego/cameras"
VIDEOS = "videos"
BEFORE = "before"
SOURCES: tuple[str, ...] = ("control", "generated", "real")
MAP_STRIPS: tuple[str, ...] = (
    "lane_lines", "road_boundaries", "wait_lines", "poles", "crosswalks", "road_markings", "drivable_areas", "lanes",
)  # fmt: skip
MAP_FILLS: tuple[str, ...] = ("crosswalks", "road_markings")
MAP_BOXES: tuple[str, ...] = ("traffic_signs", "traffic_lights")


def prefixed(prefix: str, path: str) -> str:
    """An entity path below an optional prefix.

    Args:
        prefix: "" for the viewed scenario, `BEFORE` for the scenario it is compared with.
        path: a path of the layout above (e.g. `AGENTS`).

    Returns:
        ``path`` or ``prefix/path``.
    """
    return f"{prefix}/{path}" if prefix else path


def map_path(element: str, prefix: str = "") -> str:
    """Entity path of one map element kind (e.g. ``world/map/lane_lines``).

    Args:
        element: an `HDMap` field name (`MAP_STRIPS`, `MAP_BOXES`).
        prefix: "" or `BEFORE`.

    Returns:
        The entity path.
    """
    return prefixed(prefix, f"{MAP}/{element}")


def camera_path(camera: str, prefix: str = "") -> str:
    """Entity path of one camera's frustum (child of the ego).

    Args:
        camera: the camera's name in the rig.
        prefix: "" or `BEFORE`.

    Returns:
        ``world/ego/cameras/<camera>`` (below the prefix).
    """
    return prefixed(prefix, f"{CAMERAS}/{camera}")


def video_path(source: str, camera: str) -> str:
    """Entity path of one camera's video of one source.

    Args:
        source: one of `SOURCES`.
        camera: the camera's name.

    Returns:
        ``videos/<source>/<camera>``.
    """
    return f"{VIDEOS}/{source}/{camera}"
