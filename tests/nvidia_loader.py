"""Run NVIDIA's own ClipGT loader (cosmos-transfer2.5) on a clip folder, for the consumer tests.

Two variables, shared with NVIDIA's renderer tests (`nvidia_renderer`):

- ``AVSIM_COSMOS_TRANSFER25``: a cosmos-transfer2.5 checkout or git dir. Its ``world_scenario``
  package is copied at test time (``git archive`` of a release tag such as ``v1.4.0`` where a test
  asks for one: the checkout must then have its history) into a temporary folder, never into this
  repository, with empty parent packages (its top ``__init__`` insists on a CUDA build) and an
  empty stand-in for the ``webdataset`` module its RDS-HQ loader imports.
- ``AVSIM_COSMOS_PYTHON``: the interpreter that runs it (a venv pinned to NVIDIA's ``uv.lock``;
  docs/importers.md says how to build one); default this test's own. It needs pandas, loguru,
  torch, opencv, shapely and scipy (the renderer also moderngl, imageio and click).

A test is skipped, with the reason, when the checkout, the release or a module is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

LOADER_TREE = "cosmos_transfer2/_src/imaginaire/auxiliary/world_scenario"
# camera-frame rays (OpenCV RDF) projected with each of the loader's camera models
PROBE_RAYS = np.array([[0.3, -0.1, 1.0], [-0.5, 0.2, 1.0], [0.0, 0.0, 1.0], [0.9, 0.4, 1.0], [0.05, 0.02, 1.0]])


LOADER_MODULES = ("pandas", "loguru", "torch", "cv2", "shapely", "scipy")


def nvidia_checkout() -> Path:
    """The cosmos-transfer2.5 checkout or git dir of ``AVSIM_COSMOS_TRANSFER25`` (skip when unset)."""
    source = os.environ.get("AVSIM_COSMOS_TRANSFER25")
    if not source:
        pytest.skip("AVSIM_COSMOS_TRANSFER25 is not set (a cosmos-transfer2.5 checkout or git dir)")
    return Path(source)


def nvidia_python(modules: tuple[str, ...] = LOADER_MODULES) -> str:
    """The interpreter for NVIDIA's code (``AVSIM_COSMOS_PYTHON``, else this one); skip when it lacks a module."""
    python = os.environ.get("AVSIM_COSMOS_PYTHON") or sys.executable
    probe = "import importlib.util, sys; print(','.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    result = subprocess.run([python, "-c", probe, *modules], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"AVSIM_COSMOS_PYTHON {python} does not run: {result.stderr.strip()[-200:]}")
    if result.stdout.strip():
        pytest.skip(f"{python} lacks {result.stdout.strip()}, which NVIDIA's code imports (set AVSIM_COSMOS_PYTHON)")
    return python


def _git_dir(src: Path) -> Path:
    return src / ".git" if (src / ".git").exists() else src


def vendor_loader(tmp: Path, ref: str | None = None, paths: tuple[str, ...] = (LOADER_TREE,)) -> Path:
    """Copy NVIDIA's world_scenario package into `tmp`; skip the test when it cannot run here.

    Args:
        tmp: an empty temporary folder.
        ref: a git tag or commit to copy (None: the checkout's files, or a git dir's HEAD).
        paths: the checkout's paths to copy.

    Returns:
        `tmp`, to put on PYTHONPATH.
    """
    src = nvidia_checkout()
    tmp.mkdir(parents=True, exist_ok=True)
    if ref is None and (src / LOADER_TREE).is_dir():
        subprocess.run(["cp", "-r", "--parents", *paths, str(tmp)], cwd=src, check=True)
    else:  # a release of a checkout with history, or a (bare) git dir
        archive = subprocess.run(["git", f"--git-dir={_git_dir(src)}", "archive", ref or "HEAD", *paths], capture_output=True, check=False)
        if archive.returncode != 0:
            pytest.skip(f"{src} has no {ref or 'HEAD'} (a checkout with its history is needed): {archive.stderr.decode()[-200:]}")
        subprocess.run(["tar", "x", "-C", str(tmp)], input=archive.stdout, check=True)
    root = tmp / LOADER_TREE
    for package in [root, *(p for p in root.rglob("*") if p.is_dir()), *(p for p in root.parents if p.is_relative_to(tmp) and p != tmp)]:
        if not (package / "__init__.py").exists():
            (package / "__init__.py").write_text("")
    (tmp / "cosmos_transfer2" / "__init__.py").write_text("")  # theirs checks for a CUDA build
    (root / "dataloaders" / "__init__.py").write_text("")  # theirs imports the RDS-HQ loader too
    (tmp / "webdataset.py").write_text("WebDataset = non_empty = None  # imported by their RDS-HQ loader; unused here\n")
    return tmp


SCRIPT = """
import json, sys
import numpy as np
from cosmos_transfer2._src.imaginaire.auxiliary.world_scenario.dataloaders.clipgt_loader import ClipGTLoader
sd = ClipGTLoader().load(sys.argv[1])
probe = np.array(json.loads(sys.argv[2]))
t = int(sd.timestamps[len(sd.timestamps) // 2])
poses = {k: o.get_pose_at_timestamp(t) for k, o in sd.dynamic_objects.items()}
print(json.dumps({
    "timestamps": sd.timestamps.tolist(), "ego": [p.transformation_matrix.tolist() for p in sd.ego_poses],
    "extrinsics": {k: v.tolist() for k, v in sd.camera_extrinsics.items()},
    "pixels": {k: m.ray2pixel_np(probe).tolist() for k, m in sd.camera_models.items()},
    "lane_lines": [l.lane_type.canonical_name for l in sd.lane_lines],
    "classes": {k: o.object_type.value for k, o in sd.dynamic_objects.items()},
    "boxes_t": t, "boxes": {k: p[0].tolist() for k, p in poses.items() if p is not None},
    "counts": {k: len(getattr(sd, k)) for k in ("lane_boundaries", "road_boundaries", "crosswalks", "poles",
                                                "road_markings", "wait_lines", "traffic_lights", "traffic_signs")},
}))
"""


def run_nvidia_loader(folder: Path, probe: np.ndarray, tmp: Path, ref: str | None = None) -> dict[str, Any]:
    """What NVIDIA's loader reads from a clip folder.

    Args:
        folder: the ClipGT clip folder.
        probe: (N, 3) camera-frame rays to project with each loaded camera.
        tmp: a temporary folder for the copied loader.
        ref: the release to run (a git tag such as ``v1.4.0``); None: the checkout as it is.

    Returns:
        timestamps (us), ego poses (RDF 4x4), camera extrinsics (RDF), probe pixels per camera,
        lane-line type names, object classes, box centres (RDF) at the middle frame, element counts.
    """
    python = nvidia_python()
    vendored = vendor_loader(tmp / f"nvidia-{ref or 'checkout'}", ref)
    env = {**os.environ, "PYTHONPATH": str(vendored), "LOGURU_LEVEL": "WARNING"}
    result = subprocess.run([python, "-c", SCRIPT, str(folder), json.dumps(np.asarray(probe).tolist())],
                            capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return dict(json.loads(result.stdout))
