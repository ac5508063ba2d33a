"""`avsim view`'s work: load the scenario(s), find the videos, log everything, save or serve.

The command line (`avsim.view.cli`) only parses options into `ViewOptions` and calls `run_view`.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.render.run.plan import safe_name
from avsim.render.style import DEFAULT_FPS
from avsim.scenario import Scenario
from avsim.scenario.io import load_scenario
from avsim.view import paths
from avsim.view._rerun import ViewerUnavailableError, require_rerun
from avsim.view.blueprint import make_blueprint
from avsim.view.scene import log_scenario
from avsim.view.videos import find_videos, log_videos

APPLICATION_ID = "avsim"
ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class ViewOptions:
    """Everything `avsim view` can be asked (see the command's help)."""

    scenario: Path
    render_dir: Path | None = None
    generated: Path | None = None
    real: Path | None = None
    before: Path | None = None
    save: Path | None = None
    serve: bool = False
    web_port: int = 9090
    grpc_port: int = 9876
    rate_hz: float = DEFAULT_FPS
    video_start_s: float = 0.0
    serve_s: float | None = None  # stop serving after this long (None: until interrupted)


@dataclass
class ViewSummary:
    """What one `run_view` logged and where it went."""

    scenario_id: str
    videos: dict[str, list[str]] = field(default_factory=dict)  # source -> cameras
    seconds: float = 0.0
    saved: Path | None = None
    url: str | None = None


def video_folders(opts: ViewOptions) -> dict[str, Path]:
    """The video folder of each source given.

    Args:
        opts: the options.

    Returns:
        source (`paths.SOURCES`) -> folder, for the folders given.
    """
    given = {"control": opts.render_dir, "generated": opts.generated, "real": opts.real}
    return {source: Path(folder) for source, folder in given.items() if folder is not None}


def _step(progress: ProgressFn | None, what: str) -> Callable[[], None]:
    """Report `what` with its duration once the returned function is called."""
    t0 = time.perf_counter()
    return lambda: progress(f"{what} ({time.perf_counter() - t0:.1f} s)") if progress else None


def log_all(
    recording: Any, scenario: Scenario, videos: dict[str, dict[str, Path]], opts: ViewOptions,
    before: Scenario | None = None, progress: ProgressFn | None = None,
) -> None:  # fmt: skip
    """Log the scenario, the one it is compared with and every video into `recording`.

    Args:
        recording: the `rerun.RecordingStream`.
        scenario: the viewed scenario (its first ego pose is the timeline's zero).
        videos: source -> camera -> mp4.
        opts: the options (agent rate, video start).
        before: the `--before` scenario, logged under `before/`.
        progress: called with one line after each step.
    """
    done = _step(progress, f"logged {scenario.scenario_id}: map, {len(scenario.agents.track_ids)} agents, ego, {len(scenario.rig)} cameras")
    log_scenario(scenario, recording, rate_hz=opts.rate_hz)
    done()
    if before is not None:
        done = _step(progress, f"logged the scenario before the edit ({before.scenario_id}) under {paths.BEFORE}/")
        log_scenario(before, recording, origin_ns=scenario.start_ns, rate_hz=opts.rate_hz, prefix=paths.BEFORE)
        done()
    start_ns = round(opts.video_start_s * 1e9)
    for source, cams in videos.items():
        done = _step(progress, f"logged {len(cams)} {source} videos")
        log_videos(cams, recording, source, start_ns)
        done()


@contextmanager
def _saving(recording: Any, path: Path, blueprint: Any) -> Iterator[None]:
    """Write the recording into `path` atomically: complete once the block has run, or absent."""
    with atomic_output_path(path) as tmp:
        recording.save(tmp, default_blueprint=blueprint)
        yield
        recording.flush()
        recording.disconnect()


def check_port_free(port: int, option: str) -> None:
    """Refuse a port another program listens on (rerun would only log an error and serve nothing).

    Args:
        port: the TCP port.
        option: the command-line option that set it (named in the message).

    Raises:
        AvsimInputError: the port is in use.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed server's TIME_WAIT is no conflict
        try:
            probe.bind(("0.0.0.0", port))  # the address the rerun servers bind
        except OSError as exc:
            raise AvsimInputError(option, str(port), f"cannot serve there ({exc.strerror}); choose another port") from None


def _serve(recording: Any, blueprint: Any, opts: ViewOptions) -> str:
    """Start the gRPC server and the web viewer on this machine; returns the viewer's URL."""
    rr = require_rerun()
    check_port_free(opts.web_port, "--web-port")
    check_port_free(opts.grpc_port, "--grpc-port")
    grpc_url = recording.serve_grpc(grpc_port=opts.grpc_port, default_blueprint=blueprint, server_memory_limit="75%")
    rr.serve_web_viewer(web_port=opts.web_port, open_browser=False, connect_to=grpc_url)
    return f"http://localhost:{opts.web_port}/?url={quote(grpc_url, safe='')}"


def _spawn_native(recording: Any, blueprint: Any) -> None:
    """Start the native viewer (the `rerun` program of rerun-sdk) and stream to it."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ViewerUnavailableError("no display for the native viewer (DISPLAY is unset): use --serve (browser) or --save FILE.rrd")
    recording.spawn(default_blueprint=blueprint)


def wait_serving(seconds: float | None) -> None:
    """Keep serving for `seconds` (None: until Ctrl-C).

    Args:
        seconds: how long, or None.
    """
    end = None if seconds is None else time.monotonic() + seconds
    try:
        while end is None or time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass


def run_view(opts: ViewOptions, progress: ProgressFn | None = None) -> ViewSummary:
    """Log a scenario (and its videos) into a recording: saved, served or shown in a viewer.

    Args:
        opts: the options: `save` writes an .rrd, `serve` serves the web viewer on localhost
            (and blocks until interrupted or `serve_s` passed), neither spawns the native viewer.
        progress: called with one line per step (each may take seconds on a 20 s clip).

    Returns:
        What was logged, and the saved file or the viewer's URL.

    Raises:
        AvsimInputError: a scenario or video folder cannot be read.
        ViewerUnavailableError: rerun-sdk is not installed.
    """
    rr = require_rerun()
    t0 = time.perf_counter()
    scenario = load_scenario(opts.scenario)
    before = load_scenario(opts.before) if opts.before is not None else None
    clip_id = safe_name(scenario.scenario_id)
    videos = {s: find_videos(folder, clip_id, scenario.rig.names) for s, folder in video_folders(opts).items()}
    if opts.save is not None and opts.save.suffix != ".rrd":
        raise AvsimInputError(opts.save, "--save", "the recording file must end in .rrd")
    blueprint = make_blueprint(scenario, {s: list(v) for s, v in videos.items()}, before)
    recording = rr.RecordingStream(APPLICATION_ID)
    summary = ViewSummary(scenario.scenario_id, {s: list(v) for s, v in videos.items()})
    if opts.save is not None:
        with _saving(recording, opts.save, blueprint):
            log_all(recording, scenario, videos, opts, before, progress)
        summary.saved = opts.save
    elif opts.serve:
        summary.url = _serve(recording, blueprint, opts)
        log_all(recording, scenario, videos, opts, before, progress)
        if progress:
            progress(f"serving the web viewer at {summary.url} (Ctrl-C stops)")
        wait_serving(opts.serve_s)
    else:
        _spawn_native(recording, blueprint)
        log_all(recording, scenario, videos, opts, before, progress)
        try:
            recording.flush()
        except RuntimeError as exc:  # the spawned viewer never listened
            raise ViewerUnavailableError(f"the native viewer did not start ({exc}); use --serve or --save FILE.rrd") from None
    summary.seconds = time.perf_counter() - t0
    return summary
