"""`avsim view --serve`: the web viewer served on localhost opens in headless Chromium (Debian
package, SwiftShader WebGL) and shows the scenario: the spec's road-boundary magenta (3-D view and
control videos) and the black backgrounds of decoded control-video frames are on the screenshot.

The page is driven over Chromium's DevTools pipe (no extra package): the viewer's WebAssembly
takes seconds to start, so screenshots are taken until the scene is drawn (or 90 s pass).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from avsim.scenario.io import save_scenario

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--window-size=1600,1000",
]  # fmt: skip
ROAD_BOUNDARY_RGB = np.array([253, 1, 232])
WAIT_S = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevToolsPipe:
    """A headless Chromium driven over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON)."""

    def __init__(self, chromium: str, profile: Path) -> None:
        cmd_r, cmd_w = os.pipe()  # we write commands, chromium reads them on fd 3
        evt_r, evt_w = os.pipe()  # chromium writes replies on fd 4

        def child_fds() -> None:  # the pipes as fds 3 and 4, inheritable (dup first: one may already be 3 or 4)
            a, b = os.dup(cmd_r), os.dup(evt_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(cmd_r)
        os.close(evt_w)
        self._out, self._in = os.fdopen(cmd_w, "wb", buffering=0), os.fdopen(evt_r, "rb", buffering=0)
        self._buffer, self._id = b"", 0

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}
        self._out.write(json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = self._in.read(1 << 20)
                assert chunk, "chromium closed the DevTools pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def screenshots(self, url: str, every_s: float = 2.0) -> Iterator[np.ndarray]:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        while True:
            time.sleep(every_s)
            data = self.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
            from PIL import Image

            yield np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=360)
        self._out.close()
        self._in.close()


def _drawn(img: np.ndarray) -> tuple[int, int]:
    """(road-boundary magenta pixels, pure black pixels: decoded control-video backgrounds)."""
    px = img.astype(int)
    return int((np.abs(px - ROAD_BOUNDARY_RGB).sum(-1) < 60).sum()), int((px.sum(-1) < 12).sum())


@pytest.mark.slow
def test_served_web_viewer_shows_the_scenario_in_headless_chromium(tmp_path):
    pytest.importorskip("rerun", reason="the `view` extra is not installed (docs/viewer.md)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    from avsim.render.run.runner import RenderOptions, run_render
    from avsim.scenario.sample import make_sample_scenario

    scenario = make_sample_scenario(seed=0, duration_s=2.0)
    save_scenario(scenario, tmp_path / "s")
    run_render(scenario, RenderOptions(out=tmp_path / "r", frames="6", width_px=320, height_px=180))
    web, grpc = _free_port(), _free_port()
    code = "import sys; from avsim.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["view", str(tmp_path / "s"), str(tmp_path / "r"), "--serve", "--web-port", str(web), "--grpc-port", str(grpc)]
    server = subprocess.Popen([sys.executable, "-c", code, *argv], stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        assert server.stderr is not None
        lines = []
        for line in server.stderr:
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        text = " ".join("".join(lines).split())
        assert f"http://localhost:{web}/?url=rerun%2Bhttp" in text, text
        url = text[text.index(f"http://localhost:{web}/") :].split()[0]
        browser = DevToolsPipe(chromium, tmp_path / "profile")
        t0, img = time.monotonic(), None
        for img in browser.screenshots(url):
            magenta, black = _drawn(img)
            if (magenta > 300 and black > 20_000) or time.monotonic() - t0 > WAIT_S:
                break
        assert img is not None
        from PIL import Image

        Image.fromarray(img).save(tmp_path / "viewer.png")
        if os.environ.get("AVSIM_VIEW_SCREENSHOT"):  # keep the picture to look at
            shutil.copy(tmp_path / "viewer.png", os.environ["AVSIM_VIEW_SCREENSHOT"])
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50, "the screenshot is blank"
        assert magenta > 300 and black > 20_000, f"the scene was not drawn within {WAIT_S:.0f} s: {magenta} magenta, {black} black px"
    finally:
        if browser is not None:
            browser.close()
        server.send_signal(signal.SIGINT)
        rc = server.wait(timeout=360)
    assert rc == 0
