"""The default viewer layout: the scenario in 3-D (beside its `--before`), camera grids per source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from avsim.core.rig import MOSAIC_ORDER
from avsim.scenario import Scenario
from avsim.view import paths
from avsim.view._rerun import require_rerun

EYE_FROM_EGO_M = (-35.0, 0.0, 30.0)  # the 3-D view's first eye: behind and above the ego ...
LOOK_FROM_EGO_M = (15.0, 0.0, 0.0)  # ... looking ahead of it; the eye then follows the ego


def camera_order(cameras: Sequence[str]) -> list[str]:
    """Cameras in the render spec's mosaic order (cameras outside it after, in rig order).

    Args:
        cameras: camera names.

    Returns:
        The same names, reordered.
    """
    return [c for c in MOSAIC_ORDER if c in cameras] + [c for c in cameras if c not in MOSAIC_ORDER]


def _world_view(scenario: Scenario, name: str, prefix: str) -> Any:
    rrb = require_rerun().blueprint
    pose = scenario.ego.world_SE3_ego[0]
    eye = rrb.EyeControls3D(
        position=pose.apply(np.asarray(EYE_FROM_EGO_M)), look_target=pose.apply(np.asarray(LOOK_FROM_EGO_M)),
        eye_up=[0.0, 0.0, 1.0],
    )  # fmt: skip
    return rrb.Spatial3DView(name=name, origin=paths.prefixed(prefix, paths.WORLD), eye_controls=eye)


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
    top = world if before is None else rrb.Horizontal(world, _world_view(before, f"before: {before.scenario_id}", paths.BEFORE))
    tabs = [
        rrb.Grid(*(rrb.Spatial2DView(name=c, origin=paths.video_path(s, c)) for c in camera_order(cams)), grid_columns=3, name=s)
        for s, cams in videos.items()
    ]  # fmt: skip
    if len(videos) > 1:
        cams = camera_order(sorted({c for cs in videos.values() for c in cs}))
        rows = [rrb.Spatial2DView(name=f"{s}: {c}", origin=paths.video_path(s, c)) for c in cams for s in videos]
        tabs.append(rrb.Grid(*rows, grid_columns=len(videos), name="side by side"))
    time_panel = rrb.TimePanel(timeline=paths.TIMELINE, state="expanded")
    if not tabs:
        return rrb.Blueprint(top, time_panel, collapse_panels=True)
    return rrb.Blueprint(rrb.Vertical(top, rrb.Tabs(*tabs)), time_panel, collapse_panels=True)
