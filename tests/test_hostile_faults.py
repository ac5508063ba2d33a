"""Faults while writing: a full or read-only disk, two writers, a killed writer, a part cut short.

Each gives one line and exit 1 with nothing half-written under a final name, and a plain rerun
ends byte-identical to an uninterrupted run. The disk-full cases run the command on a small
tmpfs in a private mount namespace (`unshare`; skipped where it cannot be made).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from stderr_lines import error_line

from avsim.cli import main
from avsim.core.atomic import atomic_output_path, output_errors
from avsim.core.errors import AvsimOutputError, AvsimWarning
from avsim.core.locks import BUSY_REASON, output_lock
from avsim.core.video import MP4Writer, check_written_mp4, mp4_frame_count

_SCRIPT = Path(sys.executable).with_name("avsim")
AVSIM = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "avsim.cli.main"]
CAMS = "camera_front_wide_120fov,camera_cross_left_120fov,camera_rear_left_70fov"
RENDER = ["--frames", "40", "--size", "320x180", "--cameras", CAMS]


def _tree(root: Path, suffix: str = "") -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name.endswith(suffix)}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("faults")
    assert main(["sample", str(root / "s")]) == 0
    return root / "s"


# ---------------------------------------------------------------------------- a small disk
def _unshare() -> list[str] | None:
    """A private mount namespace (root: `unshare -m`; else a user namespace), or None when none can be made."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || exit 3"], capture_output=True)
        if probe.returncode == 0:
            return prefix
    return None


def _on_small_disk(script: str, mount: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a shell `script` with a tmpfs mounted at `mount` (a private namespace: nothing leaks)."""
    prefix = _unshare()
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare with tmpfs): the disk-full path is not exercised")
    mount.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AVSIM": " ".join(AVSIM)}
    return subprocess.run([*prefix, "bash", "-c", textwrap.dedent(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)


@pytest.mark.subprocess
@pytest.mark.slow
def test_disk_full_render_is_one_line_and_resumes_byte_identical(sample: Path, tmp_path: Path) -> None:
    """`avsim render` into a 300 kB disk: `error: OUT: disk full`, exit 1, only complete files
    under final names; after the disk grows a plain rerun gives the bytes of an uninterrupted run."""
    assert main(["render", str(sample), str(tmp_path / "clean"), *RENDER]) == 0
    disk = tmp_path / "disk"
    args = " ".join([str(sample), str(disk / "out"), *RENDER])
    done = _on_small_disk(f"""
        mount -t tmpfs -o size=300k tmpfs {disk}
        $AVSIM render {args} 2>first.err; echo $? > first.rc
        find {disk}/out -type f -name '*.mp4' > first.files
        mount -o remount,size=4m {disk}
        $AVSIM render {args} 2>second.err; echo $? > second.rc
        cp -r {disk}/out {tmp_path}/resumed
    """, disk, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "first.rc").read_text().strip() == "1"
    line = error_line((tmp_path / "first.err").read_text())
    assert line == f"error: {disk / 'out'}: disk full"
    left = (tmp_path / "first.files").read_text().split()
    assert left, "the first run should have finished some parts before the disk filled"
    assert not any(Path(p).name.startswith(".") for p in left), f"a temporary was left: {left}"
    assert (tmp_path / "second.rc").read_text().strip() == "0", (tmp_path / "second.err").read_text()
    clean, resumed = _tree(tmp_path / "clean", ".mp4"), _tree(tmp_path / "resumed", ".mp4")
    assert len(clean) == 3 and resumed == clean
    assert not [p for p in (tmp_path / "resumed").rglob(".*")], "strays after the resumed run"


@pytest.mark.subprocess
def test_disk_full_labels_and_edit_leave_nothing(sample: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    done = _on_small_disk(f"""
        mount -t tmpfs -o size=150k tmpfs {disk}
        $AVSIM labels {sample} {disk}/lab --frames 10 --size 320x180 2>labels.err; echo $? > labels.rc
        $AVSIM edit {sample} {examples / 'red_longer.yaml'} {disk}/ed 2>edit.err; echo $? > edit.rc
        find {disk} -mindepth 1 > left.txt
    """, disk, tmp_path)
    assert done.returncode == 0, done.stderr
    for name, out in (("labels", disk / "lab"), ("edit", disk / "ed")):
        assert (tmp_path / f"{name}.rc").read_text().strip() == "1"
        assert error_line((tmp_path / f"{name}.err").read_text()) == f"error: {out}: disk full"
    assert (tmp_path / "left.txt").read_text().split() == [], "a half-written (or empty) output was left"


@pytest.mark.subprocess
def test_read_only_disk_is_one_line(sample: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    done = _on_small_disk(f"""
        mount -t tmpfs -o size=1m,ro tmpfs {disk}
        $AVSIM export-scene {sample} {disk}/scene.glb 2>glb.err; echo $? > glb.rc
        $AVSIM edit {sample} {Path(__file__).resolve().parents[1] / 'docs' / 'examples' / 'red_longer.yaml'} {disk}/ed 2>edit.err; echo $? > edit.rc
    """, disk, tmp_path)
    assert done.returncode == 0, done.stderr
    assert error_line((tmp_path / "glb.err").read_text()) == f"error: {disk}: read-only file system"
    assert error_line((tmp_path / "edit.err").read_text()) == f"error: {disk / 'ed'}: read-only file system"
    assert (tmp_path / "glb.rc").read_text().strip() == (tmp_path / "edit.rc").read_text().strip() == "1"


# ---------------------------------------------------------------------------- writers that fail late
def test_encoder_close_failing_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk fails in the container's close (the faststart pass rewrites the file): the
    temporary must go, not be renamed into place (it was, as a 4-8 kB truncated part)."""
    import av.container
    import numpy as np

    real_close = av.container.OutputContainer.close

    def close(self: av.container.OutputContainer) -> None:
        real_close(self)
        raise OSError(errno.ENOSPC, "No space left on device", self.name)

    monkeypatch.setattr(av.container.OutputContainer, "close", close)
    with pytest.raises(OSError) as info, MP4Writer(tmp_path / "v.mp4", 64, 32) as w:
        w.write(np.zeros((32, 64, 3), np.uint8))
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(AvsimOutputError, match=f"^{tmp_path}: disk full$"), output_errors(tmp_path):
        raise info.value


def test_a_written_mp4_is_checked_before_its_rename(tmp_path: Path) -> None:
    import numpy as np

    with MP4Writer(tmp_path / "v.mp4", 64, 32) as w:
        for _ in range(3):
            w.write(np.zeros((32, 64, 3), np.uint8))
    assert mp4_frame_count(tmp_path / "v.mp4") == 3
    check_written_mp4(tmp_path / "v.mp4", 3)
    with pytest.raises(AvsimOutputError, match="incomplete after writing: 3 of 4 frames"):
        check_written_mp4(tmp_path / "v.mp4", 4)
    (tmp_path / "cut.mp4").write_bytes((tmp_path / "v.mp4").read_bytes()[:600])
    with pytest.raises(AvsimOutputError, match="incomplete after writing"):
        check_written_mp4(tmp_path / "cut.mp4", 3)
    with pytest.raises(AvsimOutputError, match="nope"), atomic_output_path(tmp_path / "x.txt", check=lambda p: (_ for _ in ()).throw(AvsimOutputError(p, "nope"))) as tmp:
        tmp.write_text("x")
    with pytest.raises(AvsimOutputError, match="left no output"), atomic_output_path(tmp_path / "y.txt"):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.mp4", "v.mp4"]


@pytest.mark.e2e
def test_resume_rewrites_an_output_cut_short(sample: Path, tmp_path: Path) -> None:
    """An output (or part) cut short under its final name is not kept by a resume: it is written
    again, to the same bytes (it used to be kept, or crash the join with InvalidDataError)."""
    args = ["--frames", "12", "--size", "128x72", "--cameras", "camera_front_wide_120fov"]
    assert main(["render", str(sample), str(tmp_path / "out"), *args]) == 0
    video = next((tmp_path / "out").rglob("*.mp4"))
    clean = video.read_bytes()
    video.write_bytes(clean[: len(clean) // 2])
    assert main(["render", str(sample), str(tmp_path / "out"), *args]) == 0
    assert video.read_bytes() == clean


# ---------------------------------------------------------------------------- one writer per output
def test_a_second_writer_is_refused_in_one_line_and_waits_with_wait(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "clip"
    with output_lock(folder):
        with pytest.raises(AvsimOutputError, match=f"^{folder}: {BUSY_REASON}$"), output_lock(folder):
            pass
        got: list[float] = []

        def second() -> None:
            with pytest.warns(AvsimWarning, match="another avsim process is writing here; waiting for it"), output_lock(folder, wait=True):
                got.append(time.monotonic())

        t = threading.Thread(target=second)
        released = time.monotonic() + 0.3
        t.start()
        time.sleep(0.3)
        assert not got, "--wait must wait for the holder"
    t.join(10)
    assert got and got[0] >= released
    assert not folder.exists(), "an empty lock folder is removed again"


@pytest.mark.subprocess
def test_a_killed_writer_leaves_no_lock_behind(tmp_path: Path) -> None:
    folder = tmp_path / "clip"
    folder.mkdir()
    (folder / "keep").write_text("a finished output")
    code = f"from avsim.core.locks import output_lock\nwith output_lock({str(folder)!r}):\n    print('held', flush=True)\n    import time; time.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    with pytest.raises(AvsimOutputError, match="another avsim process"), output_lock(folder):
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with output_lock(folder):  # kill -9 released it: no stale lock, no lock file
        pass
    assert sorted(p.name for p in folder.iterdir()) == ["keep"]


@pytest.mark.e2e
def test_render_and_labels_into_a_busy_clip_folder_are_one_line(sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--frames", "3", "--size", "64x36", "--cameras", "camera_front_wide_120fov"]
    clip = tmp_path / "out" / "avsim_sample_seed0"
    with output_lock(clip):
        for command in ("render", "labels"):
            capsys.readouterr()
            assert main([command, str(sample), str(tmp_path / "out"), *args]) == 1
            assert error_line(capsys.readouterr().err) == f"error: {clip}: {BUSY_REASON}"
    assert not clip.exists()
    with output_lock(clip):
        waiter = threading.Thread(target=lambda: main(["render", str(sample), str(tmp_path / "out"), *args, "--wait"]))
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive() and not list(clip.glob("*.mp4")), "--wait must not write while another holds the folder"
    waiter.join(300)
    assert len(list(clip.glob("*.mp4"))) == 1
    assert f"warning: {clip}: another avsim process is writing here; waiting for it (--wait)" in capsys.readouterr().err


def test_ray_that_cannot_start_is_one_line() -> None:
    from avsim.core.errors import AvsimValueError
    from avsim.jobs.engines import EngineConfig, _start_ray

    class Ray:
        @staticmethod
        def is_initialized() -> bool:
            return False

        @staticmethod
        def init(**kwargs: object) -> None:
            raise Exception("The current node timed out during startup.\nThis could happen because some of the raylet failed")

    with pytest.raises(AvsimValueError, match=r"^engine: ray could not start \(a local instance\): Exception: The current node timed out during startup\. This could"):
        _start_ray(Ray, EngineConfig("ray"))


@pytest.mark.e2e
def test_run_with_ray_that_cannot_start_is_one_line(sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """What a memory cap does to `ray.init` (measured: `ulimit -v 3000000` makes it raise "The
    current node timed out during startup" after ~30 s), stood in for by a raising `ray.init`."""
    ray = pytest.importorskip("ray")

    def init(**kwargs: object) -> None:
        raise Exception("The current node timed out during startup. This could happen because some of the raylet failed")

    monkeypatch.setattr(ray, "init", init)
    (tmp_path / "ds").mkdir()
    shutil.copytree(sample, tmp_path / "ds" / "a")
    capsys.readouterr()
    assert main(["run", "render", str(tmp_path / "ds"), str(tmp_path / "out"), "--engine", "ray", "--frames", "2", "--size", "64x36"]) == 1
    line = error_line(capsys.readouterr().err)
    assert line.startswith("error: engine: ray could not start (a local instance): Exception: The current node timed out")
    assert not (tmp_path / "out").exists()
