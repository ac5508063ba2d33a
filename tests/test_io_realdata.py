"""Every real dataset in ../shared/data converts and round-trips bit-exactly through the format.

(nuScenes tables are not in ../shared/data; the nuScenes importer's own tests build a tiny
nuScenes folder and cover it.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from avsim.scenario.io import load_scenario, save_scenario, scenario_differences

SCENARIONET = [
    "sd_nuscenes_v1.0-mini_scene-0103.pkl",
    "sd_nuscenes_v1.0-mini_scene-0553.pkl",
    "sd_nuscenes_v1.0-mini_scene-0655.pkl",
    "sd_nuscenes_v1.0-mini_scene-0757.pkl",
    "sd_nuscenes_v1.0-mini_scene-0796.pkl",
    "sd_nuscenes_v1.0-mini_scene-0916.pkl",
    "sd_nuscenes_v1.0-mini_scene-1077.pkl",
    "sd_waymo_v1.2_eb4b91b10ca94ff2.pkl",
]
SOURCES = [
    *(("scenarionet", f"scenarionet/{name}", ()) for name in SCENARIONET),
    ("waymo", "waymo/motion_data_one_scenario.tfrecord", ("waymo_open_dataset",)),
    ("av2", "av2/sensor/adcf7d18-0510-35b0-a2fa-b4cea13a6d76", ()),
    ("av2", "av2/forecasting/0a1e6f0a-1817-4a98-b02e-db8c9327d151", ()),
    ("rdshq", "rdshq-example/assets/example", ()),
]


def _missing(modules: tuple[str, ...]) -> str | None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return module
    return None


@pytest.mark.realdata
@pytest.mark.parametrize(("fmt", "relpath", "needs"), SOURCES, ids=[s[1].split("/")[-1][:40] for s in SOURCES])
def test_real_dataset_round_trips_bit_exactly(fmt: str, relpath: str, needs: tuple[str, ...], shared_data: Path, tmp_path: Path) -> None:
    missing = _missing(needs)  # optional extras only: every importer is part of avsim
    if missing:
        pytest.skip(f"{missing} is not installed")
    from avsim.scenario.importers.registry import convert

    scenario = convert(shared_data / relpath, fmt, None)
    assert not scenario.map.is_empty()
    save_scenario(scenario, tmp_path / "s")
    loaded = load_scenario(tmp_path / "s")
    assert scenario_differences(scenario, loaded) == []
    # and a second save of the loaded scenario gives the same bytes
    save_scenario(loaded, tmp_path / "t")
    for f in sorted(p.name for p in (tmp_path / "s").iterdir()):
        assert (tmp_path / "s" / f).read_bytes() == (tmp_path / "t" / f).read_bytes(), f
