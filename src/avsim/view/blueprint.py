"""The default viewer layout: the scenario in 3-D (beside its `--before`, framed alike), camera grids
per source in the render mosaic's rows (front, sides, rear)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from avsim.core import mosaic
from avsim.core.rig import cosmos_rig
from avsim.scenario import Scenario
from avsim.view import paths
from avsim.view._rerun import require_rerun

EYE_FROM_EGO_M = (-35.0, 0.0, 30.0)  # the 3-D view's first eye: behind and above the ego ...
LOOK_FROM_EGO_M = (15.0, 0.0, 0.0)  # ... looking ahead of it; the eye then follows the ego


def camera_rows(scenario: Scenario, cameras: Sequence[str]) -> list[list[str]]:
    """The cameras in the render mosaic's spatial rows (front, sides, rear; `avsim.core.mosaic`),
    placed by the scenario's rig or, for videos rendered through the model rig, by that one.

    Args:
        scenario: the viewed scenario (its rig).
        cameras: camera names (those with a video).

    Returns:
        Non-empty rows, top to bottom, each left to right.
    """
    rigs = (scenario.rig, cosmos_rig())
    rig = next((r for r in rigs if set(cameras) <= set(r.names)), max(rigs, key=lambda r: len(set(cameras) & set(r.names))))
    return mosaic.camera_rows(cameras, rig)


def _world_view(framing: Scenario, name: str, prefix: str) -> Any:
    """A 3-D view of the scenario logged under `prefix`, its eye placed from `framing`'s first ego
    pose: the before and after views of an edit share one eye, so they open framed alike."""
    rrb = require_rerun().blueprint
    pose = framing.ego.world_SE3_ego[0]
    eye = rrb.EyeControls3D(
        position=pose.apply(np.asarray(EYE_FROM_EGO_M)), look_target=pose.apply(np.asarray(LOOK_FROM_EGO_M)),
        eye_up=[0.0, 0.0, 1.0],
    )  # fmt: skip
    return rrb.Spatial3DView(name=name, origin=paths.prefixed(prefix, paths.WORLD), eye_controls=eye)


def _camera_grid(rows: list[list[str]], source: str) -> Any:
    """One source's cameras as the mosaic's rows (a row of views per mosaic row)."""
    rrb = require_rerun().blueprint
    return rrb.Vertical(*(rrb.Horizontal(*(rrb.Spatial2DView(name=c, origin=paths.video_path(source, c)) for c in row))
                          for row in rows), name=source)  # fmt: skip


def make_blueprint(scenario: Scenario, videos: dict[str, Sequence[str]], before: Scenario | None = None) -> Any:
    """The layout: 3-D view(s) on top, a tab per video source (a grid of its cameras) below,
    and a "side by side" tab (a row per camera, a column per source) when there are several.

    Args:
        scenario: the viewed scenario.
        videos: source -> the cameras that have a video of it.
        before: the scenario it is compared with, if any.

    Returns:
        A `rerun.blueprint.Blueprint`.
    """
    rrb = require_rerun().blueprint
    world = _world_view(scenario, scenario.scenario_id, "")
    top = world if before is None else rrb.Horizontal(world, _world_view(scenario, f"before: {before.scenario_id}", paths.BEFORE))
    tabs = [_camera_grid(camera_rows(scenario, cams), s) for s, cams in videos.items()]
    if len(videos) > 1:
        cams = [c for row in camera_rows(scenario, sorted({c for cs in videos.values() for c in cs})) for c in row]
        rows = [rrb.Spatial2DView(name=f"{s}: {c}", origin=paths.video_path(s, c)) for c in cams for s in videos]
        tabs.append(rrb.Grid(*rows, grid_columns=len(videos), name="side by side"))
    time_panel = rrb.TimePanel(timeline=paths.TIMELINE, state="expanded")
    if not tabs:
        return rrb.Blueprint(top, time_panel, collapse_panels=True)
    return rrb.Blueprint(rrb.Vertical(top, rrb.Tabs(*tabs)), time_panel, collapse_panels=True)
