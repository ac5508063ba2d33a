"""The detection-gap report: JSON content, determinism, and the HTML in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from avsim.evaluation.detections import write_box_table
from avsim.evaluation.lane_io import write_lane_table
from avsim.evaluation.lanes import LaneSet
from avsim.evaluation.let_ap import Boxes3D
from avsim.evaluation.report import build_report, write_report
from avsim.evaluation.report_config import ReportConfig

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--log-level=0",
]


def _make_inputs(root: Path, seed: int = 0) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(seed)
    n_frames = 12
    fr = np.repeat(np.arange(n_frames), 5)
    lab = np.array(["vehicle", "pedestrian"])[rng.integers(0, 2, len(fr))]
    ang, r = rng.uniform(-np.pi, np.pi, len(fr)), rng.uniform(5, 70, len(fr))
    size = np.where((lab == "vehicle")[:, None], [4.5, 1.9, 1.6], [0.8, 0.8, 1.8])
    gb = np.column_stack([r * np.cos(ang), r * np.sin(ang), size[:, 2] / 2, size, rng.uniform(-3, 3, len(fr))])
    gt, real, gen = root / "gt", root / "real", root / "gen"
    for d in (gt, real, gen):
        d.mkdir()
    write_box_table(Boxes3D.ground_truth(fr, lab, gb), gt / "boxes.parquet")

    def lanes(noise: float) -> LaneSet:
        fs, ls = [], []
        for f in range(n_frames):
            for x0 in (-5.4, -1.8, 1.8, 5.4):
                y = np.linspace(0, 90, 30)
                fs.append(f)
                ls.append(np.column_stack([x0 + noise * rng.normal() + 0 * y, y, np.zeros(30)]))
        return LaneSet.from_lists(fs, ls, [1] * len(ls))

    write_lane_table(lanes(0.0), gt / "lanes.parquet")
    for d, noise in ((real, 0.05), (gen, 0.25)):
        pb = gb.copy()
        pb[:, :3] += rng.normal(0, noise, (len(gb), 3))
        write_box_table(Boxes3D(fr, lab, pb, rng.uniform(0.2, 1, len(fr))), d / "detections.parquet")
        write_lane_table(lanes(noise * 4), d / "lanes.parquet")
        clips = ["a", "b", "c"]
        pl.DataFrame({
            "clip": np.repeat(clips, 4), "chunk": np.tile(np.arange(4), 3),
            "score": (10 - noise * np.arange(12) % 4 * 4 + rng.normal(0, 0.1, 12)).tolist(),
        }).write_parquet(d / "chunk_scores.parquet")
    return real, gen, gt


@pytest.mark.slow
def test_report_json_has_every_headline_with_intervals(tmp_path) -> None:
    real, gen, gt = _make_inputs(tmp_path)
    res = build_report(real, gen, gt, ReportConfig(n_resamples=100, seed=3, video_metrics=False))
    det = res["detection"]["intervals"]
    for key in ("waymo_mean/ap/real", "waymo_mean/ap/generated", "waymo_mean/ap/gap", "vehicle/aph/gap", "pedestrian/apl/real"):
        d = det[key]
        assert d["ci_low"] <= d["estimate"] <= d["ci_high"] or np.isclose(d["ci_low"], d["estimate"])
        assert d["resampling_unit"] == "frame" and d["seed"] == 3 and d["n_resamples"] == 100
    assert det["waymo_mean/ap/real"]["estimate"] > det["waymo_mean/ap/generated"]["estimate"]  # noisier boxes
    assert res["lanes"]["intervals"]["f_score/real"]["estimate"] >= res["lanes"]["intervals"]["f_score/generated"]["estimate"]
    assert set(res["detection"]["per_range"]["vehicle"]) == {"all", "[0, 30)", "[30, 50)", "[50, inf)"}
    near = det["vehicle/range [0, 30)/ap/gap"]
    assert near["ci_low"] <= near["ci_high"] and near["resampling_unit"] == "frame"
    assert len(res["rnds"]["curve"]) == 4 and res["rnds"]["curve"][0] == pytest.approx(1.0)
    assert "video" not in res  # video metrics were switched off


@pytest.mark.slow
def test_report_is_deterministic(tmp_path) -> None:
    real, gen, gt = _make_inputs(tmp_path)
    cfg = ReportConfig(n_resamples=50, seed=1, video_metrics=False)
    a = write_report(build_report(real, gen, gt, cfg), tmp_path / "out1")
    b = write_report(build_report(real, gen, gt, cfg), tmp_path / "out2")
    assert a[0].read_bytes() == b[0].read_bytes()
    assert a[1].read_bytes() == b[1].read_bytes()


@pytest.mark.browser
def test_report_html_in_headless_chromium(tmp_path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    real, gen, gt = _make_inputs(tmp_path)
    _, html_path = write_report(build_report(real, gen, gt, ReportConfig(n_resamples=50, video_metrics=False)), tmp_path / "out")
    text = html_path.read_text()
    # self-contained: no scripts, every image inline
    assert "<script" not in text.lower()
    srcs = re.findall(r'src="([^"]+)"', text)
    assert len(srcs) >= 4 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r'(href|src)="(https?:|file:|//)', text)

    # what a reader needs beside each number: direction, the paper's values, the unit resampled, caveats
    for phrase in ("Summary", "higher is better", "lower is better", "closer to 0 is better", "gen 0.394 / real 0.476",
                   "gen 0.637", "Waymo mean (vehicle, pedestrian, cyclist)", "Resampling unit: frame", "not comparable as such"):
        assert phrase in text, phrase

    def shoot(page: Path, png: Path, size: str = "1100,2600") -> str:
        proc = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / ('profile-' + png.stem)}", f"--window-size={size}",
             f"--screenshot={png}", page.as_uri()],
            capture_output=True, text=True, timeout=360, check=False,
        )
        assert png.is_file(), proc.stderr[-2000:]
        return proc.stderr

    # The console check can fail: a page that logs an error is caught.
    neg = tmp_path / "neg.html"
    neg.write_text("<html><body><script>console.error('planted-error')</script></body></html>")
    assert "planted-error" in shoot(neg, tmp_path / "neg.png")

    log = shoot(html_path, tmp_path / "report.png")
    console = [ln for ln in log.splitlines() if "CONSOLE" in ln]
    assert console == [], console
    from PIL import Image

    img = np.asarray(Image.open(tmp_path / "report.png").convert("RGB")).astype(int)
    blue = (np.abs(img - np.array([0x2B, 0x6C, 0xB0])).sum(axis=2) < 40).sum()  # "real" bars
    orange = (np.abs(img - np.array([0xDD, 0x6B, 0x20])).sum(axis=2) < 40).sum()  # "generated" bars
    non_white = (img.sum(axis=2) < 700).mean()
    assert blue > 2000 and orange > 500, (blue, orange)
    assert non_white > 0.05
    # the first screen at a desktop and a narrow width: the summary table with its green direction notes
    for width in (1600, 800):
        png = tmp_path / f"first_{width}.png"
        assert [ln for ln in shoot(html_path, png, f"{width},1000").splitlines() if "CONSOLE" in ln] == []
        img = np.asarray(Image.open(png).convert("RGB")).astype(int)
        assert img.shape[:2] == (1000, width)
        green = (np.abs(img - np.array([0x2F, 0x85, 0x5A])).sum(axis=2) < 60).sum()  # "higher/lower is better"
        border = (np.abs(img - np.array([0xCB, 0xD5, 0xE0])).sum(axis=2) < 12)  # table rules
        assert green > 200, (width, green)
        assert border[:, width // 2 :].sum() > 500, width  # the table spans the page, not a sliver
