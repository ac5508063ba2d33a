"""Edits keep what they do not touch: parked cars stay to the end of the clip, a track that
vanishes in view is a validation finding, and an op that changes nothing is reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from avsim.edit import ops_agents, ops_time
from avsim.edit.diff import diff_scenarios, format_diff, scene_unchanged
from avsim.edit.editfile import apply_edit_file, parse_edit_text
from avsim.edit.validate import check_track_ends, drivable_area, validate_scenario
from avsim.scenario import Scenario
from avsim.scenario.workflows import write_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return write_sample(tmp_path_factory.mktemp("keeps") / "s")


def _ends_s(s: Scenario) -> dict[str, float]:
    """Track id -> seconds between its last sample and the clip's end."""
    ids = np.asarray(s.agents.track_id).astype(str)
    ts = np.asarray(s.agents.timestamps_ns)
    end = int(s.ego.timestamps_ns[-1])
    return {i: (end - int(ts[ids == i].max())) / 1e9 for i in sorted(set(ids))}


def _standing_m(s: Scenario, track: str) -> bool:
    """Whether the track's last two samples are within `STATIONARY_M` (it stands still at its end)."""
    c = np.asarray(s.agents.center_m)[np.asarray(s.agents.track_id).astype(str) == track, :2]
    return len(c) > 1 and float(np.linalg.norm(c[-2] - c[-1])) <= ops_agents.STATIONARY_M


def _moved_m(s: Scenario, track: str) -> float:
    c = np.asarray(s.agents.center_m)[np.asarray(s.agents.track_id).astype(str) == track, :2]
    return float(np.linalg.norm(c - c[-1], axis=1).max())


def test_scale_speed_keeps_parked_cars_to_the_end(sample: Scenario) -> None:
    """The issue's case: every car 1.2x faster, then a crop; the parked cars used to end at 16.6 s of 20."""
    cars = sorted({str(t) for t, c in zip(sample.agents.track_id, sample.agents.object_class) if str(c) == "Car"})
    parked = [c for c in cars if _moved_m(sample, c) <= ops_agents.STATIONARY_M]  # never move
    waiting = [c for c in cars if c not in parked and _standing_m(sample, c)]  # stand still at their end (at a light)
    assert len(parked) >= 3 and len(parked) + len(waiting) >= 15
    faster = ops_time.crop(ops_agents.scale_speed(sample, cars, 1.2), 1.0)
    before, after = _ends_s(ops_time.crop(sample, 1.0)), _ends_s(faster)
    for car in parked + waiting:
        assert after[car] == before[car] == 0.0, car
    rows = np.asarray(sample.agents.track_id).astype(str) == parked[0]
    rows_after = np.asarray(faster.agents.track_id).astype(str) == parked[0]
    np.testing.assert_array_equal(np.asarray(faster.agents.center_m)[rows_after], np.asarray(sample.agents.center_m)[rows][-rows_after.sum():])
    moving = [c for c in cars if c not in parked + waiting]
    assert any(after[c] > before[c] + 1.0 for c in moving), "a car driving to its track's end, replayed faster, still leaves earlier"


def test_a_track_standing_still_at_its_end_holds_its_last_pose(sample: Scenario) -> None:
    """A car that drives, then waits to the clip's end (at a light): 2x faster it arrives early and waits longer."""
    car = next(c for c in sorted({str(t) for t in sample.agents.track_id}) if _moved_m(sample, c) > 5.0)
    rows = np.asarray(sample.agents.track_id).astype(str) == car
    ts = np.asarray(sample.agents.timestamps_ns)[rows]
    half = len(ts) // 2
    center = np.asarray(sample.agents.center_m).copy()
    idx = np.flatnonzero(rows)
    center[idx[half:]] = center[idx[half]]  # stands still from the middle on
    waiting = sample.replace(agents=_with_center(sample, center))
    out = ops_agents.scale_speed(waiting, [car], 2.0)
    rows_out = np.asarray(out.agents.track_id).astype(str) == car
    assert np.asarray(out.agents.timestamps_ns)[rows_out][-1] == ts[-1]
    np.testing.assert_allclose(np.asarray(out.agents.center_m)[rows_out][-1], center[idx[-1]])


def _with_center(s: Scenario, center: np.ndarray) -> object:
    from avsim.edit.common import build_agents, columns

    cols = columns(s.agents)
    cols["center_m"] = center
    return build_agents(cols)


def test_a_track_that_vanishes_in_view_is_a_finding(sample: Scenario) -> None:
    assert not [f for f in validate_scenario(sample) if f.kind == "track_end"]
    near = [c for c in sorted({str(t) for t, k in zip(sample.agents.track_id, sample.agents.object_class) if str(k) == "Car"})
            if _moved_m(sample, c) <= ops_agents.STATIONARY_M]  # fmt: skip
    ids = np.asarray(sample.agents.track_id).astype(str)
    ts = np.asarray(sample.agents.timestamps_ns)
    cut = int(sample.ego.timestamps_ns[0]) + 10 * 10**9
    keep = ~np.isin(ids, near) | (ts <= cut)  # the parked cars' tracks end at 10 s
    cut_short = sample.replace(agents=_subset(sample, keep))
    found = {f.ids[0] for f in check_track_ends(cut_short, drivable_area(cut_short.map), _config())}
    assert found and found <= set(near)
    assert all(f.reason.startswith("track ends 10.00 s before the clip, on the road") for f in check_track_ends(cut_short, drivable_area(cut_short.map), _config()))
    far = _config(vanish_range_m=0.1)
    assert check_track_ends(cut_short, drivable_area(cut_short.map), far) == []


def _config(**kw: float):
    from avsim.edit.validate import ValidationConfig

    return ValidationConfig(**kw)


def _subset(s: Scenario, keep: np.ndarray) -> object:
    from avsim.edit.common import build_agents, columns

    return build_agents({k: v[keep] for k, v in columns(s.agents).items()})


def test_an_op_that_changes_nothing_is_reported_by_edit_and_diff(sample: Scenario, tmp_path: Path) -> None:
    """Extending a red phase that already lasts to the end changes nothing: edit and diff say so."""
    light = "light_S_left_through"
    text = f"version: 1\nops:\n  - op: extend_light_state\n    light_ids: [{light}]\n    state: green\n    at_s: 15\n    extra_s: 3\n  - op: crop\n    start_s: 1\n"
    (r,) = apply_edit_file(sample, parse_edit_text(text, tmp_path / "noop.yaml"))
    assert r.unchanged_ops == [(0, "extend_light_state")]
    d = diff_scenarios(sample, r.scenario)
    assert not scene_unchanged(d) and "scene unchanged" not in format_diff(d)
    (nothing,) = apply_edit_file(sample, parse_edit_text(text.split("  - op: crop")[0], tmp_path / "noop.yaml"))
    d = diff_scenarios(sample, nothing.scenario)
    assert d["scene_unchanged"] and d["metadata_changed"] == ["edit_history"]
    assert format_diff(d).endswith("scene unchanged: only metadata differs (the edits changed nothing)")
    assert format_diff(d, summary=True).endswith("(the edits changed nothing)")
