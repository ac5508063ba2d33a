"""Shared fixtures. Real data lives beside the checkout in ../shared/data (never committed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


# Test tiers (docs/testing.md): every test carrying none of these marks is in the fast tier.
HEAVY_MARKS = frozenset({"slow", "e2e", "subprocess", "distributed", "browser", "realdata", "lint"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(mark) for mark in HEAVY_MARKS):
            item.add_marker(pytest.mark.fast)
