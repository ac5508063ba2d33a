"""The browser / native viewer (rerun-sdk, the `view` extra): scenarios, edits and videos on one timeline.

Log into your own `rerun.RecordingStream` with the same layout as `avsim view` (docs/viewer.md)::

    import rerun as rr
    from avsim.view import log_scenario, log_videos, find_videos

    rec = rr.RecordingStream("avsim")
    rec.save("clip.rrd")
    log_scenario(scenario, rec)
    log_videos(find_videos(render_dir, clip_id, scenario.rig.names), rec, "control")

Importing this package does not import rerun; each logging function does.
"""

from avsim.view import paths
from avsim.view._rerun import INSTALL_HINT, RERUN_VERSION, ViewerUnavailableError, require_rerun
from avsim.view.scene import log_agents, log_ego, log_lights, log_map, log_rig, log_scenario
from avsim.view.videos import find_videos, log_video, log_videos

__all__ = [
    "INSTALL_HINT",
    "RERUN_VERSION",
    "ViewerUnavailableError",
    "find_videos",
    "log_agents",
    "log_ego",
    "log_lights",
    "log_map",
    "log_rig",
    "log_scenario",
    "log_video",
    "log_videos",
    "paths",
    "require_rerun",
]
