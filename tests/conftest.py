"""Shared fixtures. Real data lives beside the checkout in ../shared/data (never committed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from avsim.scenario import Scenario

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECS_DIR = Path(os.environ.get("AVSIM_SHARED_DIR", REPO_ROOT.parent / "shared")) / "specs"
DATA_DIR = Path(os.environ.get("AVSIM_SHARED_DIR", REPO_ROOT.parent / "shared")) / "data"


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.skip(f"{what} not found at {path} (real data is not shipped with avsim)")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of the real test data; skips the test when it is absent."""
    return _require(DATA_DIR, "shared test data")


@pytest.fixture(scope="session")
def specs_dir() -> Path:
    return _require(SPECS_DIR, "shared specs")


# ---- the embedded sample, built once per test process ----------------------------------------------
# `avsim sample` output (seed 0) for tests that only read it; a test that changes a scenario
# folder copies it first (`shutil.copytree`).
@pytest.fixture(scope="session")
def session_sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full 20 s sample (`avsim sample S`), written once per test process."""
    from avsim.scenario.workflows import write_sample

    folder = tmp_path_factory.mktemp("shared_sample") / "s"
    write_sample(folder)
    return folder


@pytest.fixture(scope="session")
def session_sample_1s_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample cut to 1 s (`avsim sample S --duration-s 1`), written once per test process."""
    from avsim.scenario.workflows import write_sample

    folder = tmp_path_factory.mktemp("shared_sample_1s") / "s"
    write_sample(folder, duration_s=1.0)
    return folder


@pytest.fixture(scope="session")
def session_sample(session_sample_dir: Path) -> Scenario:
    """The full sample as loaded from `session_sample_dir` (shared: never modify it)."""
    from avsim.scenario.io import load_scenario

    return load_scenario(session_sample_dir)


@pytest.fixture(scope="module")
def ray_hang_dir(tmp_path_factory: pytest.TempPathFactory):
    """A local Ray instance (2 CPUs) shared by one module's Ray tests; yields the test-hang folder
    its workers see (`avsim.jobs.items.HANG_ENV`; `tests/job_hang.py` waits for a claim and kills)."""
    import importlib.util
    import logging

    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install 'avsim[ray]')")
    import ray

    from avsim.jobs.items import HANG_ENV

    hang = tmp_path_factory.mktemp("hang")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(HANG_ENV, str(hang))  # the raylet, hence every worker, inherits it
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
        try:
            yield hang
        finally:
            ray.shutdown()


# Test tiers (docs/testing.md): every test carrying none of these marks is in the fast tier.
HEAVY_MARKS = frozenset({"slow", "e2e", "subprocess", "distributed", "browser", "realdata", "lint"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):  # reads ../shared/data
            item.add_marker(pytest.mark.realdata)
        if not any(item.get_closest_marker(mark) for mark in HEAVY_MARKS):
            item.add_marker(pytest.mark.fast)
