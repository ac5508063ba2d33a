"""Resource bounds on hostile inputs: one line, exit 1 or 2, no traceback, nothing written."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import pytest

from avsim.cli import main
from avsim.core.errors import AvsimInputError
from avsim.scenario.importers.safe_pickle import loads_pickle
from avsim.scenario.importers.safe_tar import read_sample, read_tar_members


def test_pickle_claiming_a_huge_object_is_one_line() -> None:
    bomb = b"\x80\x04\x8e" + struct.pack("<Q", 10**12) + b"ab"  # BINBYTES8 of 1e12 bytes in 13 bytes
    with pytest.raises(AvsimInputError, match=r"x\.pkl: pickle: (declares an object larger|truncated)"):
        loads_pickle(bomb, "x.pkl")


@pytest.mark.slow
def test_deeply_nested_scenario_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", str(tmp_path / "s")]) == 0
    (tmp_path / "s" / "scenario.json").write_text("[" * 200_000 + "]" * 200_000)
    capsys.readouterr()
    assert main(["info", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scenario.json: json:" in err[0] and "Traceback" not in err[0]


def _tar(path: Path, members: dict[str, int]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, size in members.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"\0" * size))
    return path


def test_tar_total_is_bounded_and_other_members_are_not_read(tmp_path: Path) -> None:
    path = _tar(tmp_path / "t.tar.gz", {"clip.a.npy": 3000, "clip.b.npy": 3000, "clip.c.bin": 10_000})
    with pytest.raises(AvsimInputError, match=r"members: more than 5000 bytes in all"):
        read_tar_members(path, max_total_bytes=5000)
    got = read_tar_members(path, max_total_bytes=7000, suffixes=(".npy",))  # the .bin is skipped unread
    assert sorted(got) == ["clip.a.npy", "clip.b.npy"]
    with pytest.raises(AvsimInputError, match="cannot decode"):
        read_sample(path)  # zero bytes are no .npy, but the .bin never counted


@pytest.mark.e2e
@pytest.mark.parametrize("args", [["--size", "100000x100000"], ["--fps", "1e9"]])
def test_render_bounds_size_and_fps(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert main(["sample", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    assert main(["render", str(tmp_path / "s"), str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert "at most" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path: Path) -> None:
    import os

    from avsim.core.atomic import _owner_tag, atomic_output_path

    host = _owner_tag().rsplit(".", 1)[0]
    dead = tmp_path / f".out.tmp{host}.999999-abc.mp4"  # pid 999999 does not run
    live = tmp_path / f".out.tmp{host}.{os.getpid()}-def.mp4"  # a writer still running (this one)
    remote = tmp_path / ".out.tmpotherhost.999999-abc.mp4"  # another machine's writer
    for p in (dead, live, remote):
        p.write_text("partial")
    (tmp_path / f".run.old{host}.999999").mkdir()
    with atomic_output_path(tmp_path / "out.mp4") as tmp:
        tmp.write_text("done")
    with atomic_output_path(tmp_path / "run", is_dir=True) as tmp:
        (tmp / "a").write_text("1")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, remote.name, "out.mp4", "run"])


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="zombies are read from /proc (Linux)")
def test_a_killed_writer_not_yet_reaped_counts_as_dead(tmp_path: Path) -> None:
    """A SIGKILLed worker whose parent has not reaped it yet (a zombie: a Ray worker while its task is
    retried) left its temporary for good before: the zombie's pid still answered kill(pid, 0)."""
    import signal
    import subprocess
    import sys
    import time

    from avsim.core.atomic import _owner_tag, remove_stale_temporaries

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":  # not reaped: no wait() yet
            assert time.monotonic() < deadline
            time.sleep(0.01)
        host = _owner_tag().rsplit(".", 1)[0]
        left = tmp_path / f".a.tmp{host}.{child.pid}-x"
        left.mkdir()
        assert remove_stale_temporaries(tmp_path / "a", is_dir=True) == [left] and not left.exists()
    finally:
        child.wait()


def _killed_then_rerun(args: list[str], cwd: Path, delays_s: tuple[float, ...]) -> None:
    """Run `avsim ARGS` killed with SIGKILL after each delay, then once to the end."""
    import shutil
    import signal
    import subprocess
    import sys
    import time

    avsim = [sys.executable, "-m", "avsim.cli.main"] if shutil.which("avsim") is None else ["avsim"]
    for delay in delays_s:
        proc = subprocess.Popen([*avsim, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert subprocess.run([*avsim, *args], cwd=cwd, capture_output=True).returncode == 0


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_killed_edit_and_report_rerun_to_identical_outputs_without_strays(tmp_path: Path) -> None:
    """SIGKILL at several points, rerun: the same bytes as an uninterrupted run, no stray files."""
    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    assert main(["sample", str(tmp_path / "s")]) == 0
    edit = ["edit", "s", str(examples / "red_longer.yaml")]
    assert main([*edit[:1], str(tmp_path / "s"), edit[2], str(tmp_path / "clean")]) == 0
    _killed_then_rerun([*edit, "killed"], tmp_path, (0.8, 1.6, 2.4))
    assert _tree(tmp_path / "killed") == _tree(tmp_path / "clean")
    report = ["eval", "report", "--real", "clean", "--generated", "clean", "--gt", "s", "--no-video-metrics", "--n-resamples", "20"]
    _killed_then_rerun([*report, "--out", "rep"], tmp_path, ())
    clean = _tree(tmp_path / "rep")
    _killed_then_rerun([*report, "--out", "rep"], tmp_path, (1.0, 2.0, 3.0, 4.0))
    assert sorted(clean) == ["report.html", "report.json"] and _tree(tmp_path / "rep") == clean
    strays = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert strays == [], strays


@pytest.mark.slow
def test_killed_render_reruns_to_identical_videos_without_strays(tmp_path: Path) -> None:
    """SIGKILL of a chunked render at several points, rerun (resume): the same videos as an
    uninterrupted render, and no temporary or .parts folder left."""
    assert main(["sample", str(tmp_path / "s")]) == 0
    args = ["render", "s", "--frames", "60", "--size", "320x180", "--chunk", "30"]
    _killed_then_rerun([*args[:2], "clean", *args[2:]], tmp_path, ())
    _killed_then_rerun([*args[:2], "killed", *args[2:]], tmp_path, (2.0, 4.0, 6.0))
    videos = {k: v for k, v in _tree(tmp_path / "clean").items() if k.endswith(".mp4")}
    assert videos and {k: v for k, v in _tree(tmp_path / "killed").items() if k.endswith(".mp4")} == videos
    strays = [str(p.relative_to(tmp_path)) for p in (tmp_path / "killed").rglob(".*")]
    assert strays == [], strays


def test_lazy_frame_times_equal_the_array_and_cost_nothing_up_front() -> None:
    import numpy as np

    from avsim.core.trajectory import UniformTimes, uniform_timestamps

    rng = np.random.default_rng(0)
    for _ in range(50):
        start, span, rate = int(rng.integers(0, 10**12)), int(rng.integers(0, 60 * 10**9)), float(rng.uniform(0.5, 1000))
        lazy, full = UniformTimes(start, start + span, rate), uniform_timestamps(start, start + span, rate)
        assert len(lazy) == len(full)
        a, b = sorted(rng.integers(0, len(full) + 1, 2))
        np.testing.assert_array_equal(lazy[a:b], full[a:b])
        assert lazy[-1] == full[-1] and lazy[0] == full[0]
    huge = UniformTimes(0, 3600 * 10**9, 1e9)  # an hour at 1 GHz: 3.6e12 frames, none made
    assert len(huge) == 3_600_000_000_001 and huge[10**12] == 10**12
