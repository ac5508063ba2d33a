"""Edit files: parsing with line numbers, sweeps, bad files, determinism, the CLI."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from test_edit_helpers import fingerprint, road_scenario

from avsim.core.errors import AvsimInputError
from avsim.edit.editfile import OPS, apply_edit_file, load_edit_file, parse_edit_text

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str, name: str = "edits.yaml") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


CUTIN = """
version: 1
name: "cut_g{gap_m}_d{duration_s}"
sweep:
  gap_m: [2, 5, 8]
  duration_s: [1.5, 2, 2.5, 3]
ops:
  - op: cut_in
    track_id: cutter
    start_s: 2
    duration_s: $duration_s
    gap_m: ${gap_m}
  - op: remove_agents
    select: {class: Pedestrian}
"""


def test_sweep_3x4_gives_12_named_variants(tmp_path):
    edit = load_edit_file(_write(tmp_path, CUTIN))
    names = [v.name for v in edit.variants]
    assert len(names) == 12 == len(set(names))
    assert names[0] == "cut_g2_d1.5" and names[-1] == "cut_g8_d3"
    assert edit.variants[5].params == {"gap_m": 5, "duration_s": 2}
    assert edit.variants[5].ops[0].args["duration_s"] == 2.0


def test_default_variant_names_list_every_parameter(tmp_path):
    text = CUTIN.replace('name: "cut_g{gap_m}_d{duration_s}"\n', "")
    names = [v.name for v in load_edit_file(_write(tmp_path, text)).variants]
    assert [n.rsplit("-", 1)[0] for n in names[:2]] == ["gap_m-2_duration_s-1.5", "gap_m-2_duration_s-2"]
    assert all(re.fullmatch(r"[0-9a-f]{8}", n.rsplit("-", 1)[1]) for n in names) and len(set(names)) == 12


def test_default_names_are_content_ids(tmp_path):
    """No template: the same ops give the same name however written; other ops another name."""
    one = "version: 1\nops:\n  - op: shift_agents\n    track_id: lead\n    dx_m: 2.5\n"
    same = "# a comment\nversion: 1\nops:\n  - {op: shift_agents, track_id: lead, dx_m: 2.5}\n"
    other = one.replace("2.5", "3.0")
    paths = [_write(tmp_path, t, f"{d}/e.yaml") for d, t in (("a", one), ("b", same), ("c", other))]
    (a,), (b,), (c,) = (load_edit_file(p).variants for p in paths)
    assert a.name == b.name != c.name and a.name.startswith("e-")
    (r,) = apply_edit_file(road_scenario(), paths[2])
    assert r.scenario.scenario_id == f"road__{c.name}" != "road"


@pytest.mark.slow
def test_variants_apply_and_pass_validation(tmp_path):
    scn = road_scenario()
    before = fingerprint(scn)
    results = apply_edit_file(scn, _write(tmp_path, CUTIN))
    assert fingerprint(scn) == before
    assert len(results) == 12
    for r in results:
        assert r.new_findings == [], r.name
        assert "cutter" in set(r.scenario.agents.track_ids) and "ped" not in set(r.scenario.agents.track_ids)
        assert r.scenario.scenario_id == f"road__{r.name}"
        assert r.scenario.metadata["edit_history"][-1]["params"] == r.params


def test_json_edit_file(tmp_path):
    doc = {"version": 1, "ops": [{"op": "shift_agents", "track_id": "lead", "dx_m": 2.5}]}
    p = tmp_path / "e.json"
    p.write_text(json.dumps(doc, indent=2))
    (r,) = apply_edit_file(road_scenario(), p)
    assert r.name.startswith("e-") and r.scenario.scenario_id == f"road__{r.name}"


def test_overlap_introduced_by_edit_is_reported_with_op(tmp_path):
    text = """
    version: 1
    ops:
      - op: shift_agents
        track_id: lead
        dx_m: -25
    """
    (r,) = apply_edit_file(road_scenario(), _write(tmp_path, text))
    ((op_index, finding),) = r.new_findings
    assert op_index == 0 and finding.kind == "overlap" and finding.ids == ("ego", "lead") and finding.time_s == 0.0


BAD = [
    # (file text, expected "line N: field", expected reason fragment)
    ("version: 1\nops:\n  - op: teleport\n    track_id: lead\n", "line 3: ops[0].op", "unknown op 'teleport'"),
    ("version: 1\nops:\n  - op: remove_agents\n    track_id: nobody\n", "line 4: ops[0].track_id", "unknown track id 'nobody'"),
    ("version: 1\nops:\n  - op: scale_speed\n    track_id: lead\n    factor: fast\n", "line 5: ops[0].factor", "expected a number"),
    ("version: 1\nops:\n  - op: cut_in\n    track_id: c\n    start_s: 42\n    duration_s: 2\n", "line 5: ops[0].start_s", "outside the scenario"),
    ("version: 1\nops:\n  - op: crop\n    start_s: 1\n    stop_s: 99\n", "line 5: ops[0].stop_s", "outside the scenario"),
    ("version: 1\nops:\n  - op: shift_agents\n    track_id: lead\n    dxx_m: 1\n", "line 5: ops[0].dxx_m", "unknown field"),
    ("version: 2\nops:\n  - op: crop\n", "line 1: version", "unsupported edit-file version 2"),
    ("version: 1\nops:\n  - op: cut_in\n    track_id: c\n    start_s: 1\n    duration_s: $dur\n", "line 6: ops[0].duration_s", "unknown sweep parameter $dur"),
    ("version: 1\nops:\n  - op: set_light_states\n    light_ids: L1\n    timeline: [[0, red], [2, purple]]\n", "line 5: ops[0].timeline[1][1]", "'purple' is not one of"),
    ("version: 1\nops:\n  - op: set_light_states\n    light_ids: L9\n    timeline: [[0, red]]\n", "line 4: ops[0].light_ids", "unknown traffic light 'L9'"),
    ("version: 1\nops:\n  - op: remove_agents\n    select: {class: Spaceship}\n", "line 4: ops[0].select.class", "'Spaceship' is not one of"),
    ("version: 1\nops:\n  - op: add_agent\n    track_id: a\n    class: Car\n", "line 3: ops[0]", "needs exactly one of waypoints, route"),
    ("version: 1\nops: [\n", "line 3: syntax", ""),
]


@pytest.mark.parametrize("text,where,reason", BAD, ids=[b[1] for b in BAD])
def test_bad_edit_files_name_the_line(tmp_path, text, where, reason):
    p = _write(tmp_path, text)
    with pytest.raises(AvsimInputError) as exc:
        apply_edit_file(road_scenario(), p)
    assert exc.value.field == where, str(exc.value)
    assert reason in exc.value.reason
    assert str(exc.value).startswith(f"{p}: {where}: ")


def test_unknown_sweep_id_names_variant(tmp_path):
    text = "version: 1\nsweep:\n  who: [lead, ghost]\nops:\n  - op: remove_agents\n    track_id: $who\n"
    with pytest.raises(AvsimInputError, match=r"line 6: ops\[0\].track_id: variant who-ghost-[0-9a-f]{8}: unknown track id 'ghost'"):
        apply_edit_file(road_scenario(), _write(tmp_path, text))


def test_duplicate_variant_names_are_refused(tmp_path):
    text = CUTIN.replace('name: "cut_g{gap_m}_d{duration_s}"', 'name: "cut_g{gap_m}"')
    with pytest.raises(AvsimInputError, match="line 2: name: .*both named"):
        load_edit_file(_write(tmp_path, text))


def test_every_op_is_documented():
    doc = (REPO / "docs" / "editing.md").read_text()
    for name in OPS:
        assert f"`{name}`" in doc, name


def test_example_cutin_expands_to_ten_variants():
    edit = load_edit_file(REPO / "docs" / "examples" / "cutin.yaml")
    assert len(edit.variants) == 10 == len({v.name for v in edit.variants})
    assert all([op.name for op in v.ops] == ["crop", "cut_in"] for v in edit.variants)
    assert {v.ops[-1].args["gap_m"] for v in edit.variants} == {1.0, 2.0, 3.0, 4.0, 5.0}


def test_map_selectors_in_edit_file(tmp_path):
    text = """
    version: 1
    ops:
      - op: remove_map_elements
        type: traffic_signs
        within_m_of_ego: 10
      - op: move_map_elements
        type: crosswalks
        region: {box: [90, -10, 110, 10]}
        dx_m: 5
      - op: restyle_lane_lines
        all: true
        color: YELLOW
    """
    (r,) = apply_edit_file(road_scenario(), _write(tmp_path, text))
    m = r.scenario.map
    assert len(m.traffic_signs) == 0  # S1 sits 6.5 m beside the ego's path
    assert m.crosswalks[0][:, 0].min() == 105.0
    assert set(m.lane_lines.color) == {"YELLOW"}
    far = "version: 1\nops:\n  - op: remove_map_elements\n    type: traffic_signs\n    within_m_of_ego: 3\n"
    with pytest.raises(AvsimInputError, match="line 5: ops\\[0\\].within_m_of_ego: selects no traffic_signs element"):
        apply_edit_file(road_scenario(), _write(tmp_path, far, "far.yaml"))


def test_parse_keeps_lines_for_nested_values():
    edit = parse_edit_text("version: 1\nops:\n\n  - op: crop\n    start_s: 1\n", Path("x.yaml"))
    op = edit.variants[0].ops[0]
    assert op.line == 4 and op.field_lines == {"start_s": 5}


def test_findings_are_those_of_the_final_cropped_variant(tmp_path):
    """A finding an op introduced and a later crop removed is not reported; one the crop keeps is
    timed on the variant's own clock, as `avsim validate` of the variant reports it (issue 55)."""
    from avsim.edit.validate import validate_scenario

    text = """
    version: 1
    name: "crop{start}"
    sweep:
      start: [3, 6]
    ops:
      - op: add_agent
        track_id: parked
        class: vehicle.car
        waypoints: [[0, 50, 0.5], [10, 50.01, 0.5]]
      - op: crop
        start_s: $start
        stop_s: 10
    """
    kept, cropped = apply_edit_file(road_scenario(), _write(tmp_path, text))
    assert cropped.name == "crop6" and cropped.new_findings == [] and validate_scenario(cropped.scenario) == []
    ((op_index, finding),) = kept.new_findings
    assert op_index == 0 and finding.kind == "overlap" and finding.ids == ("ego", "parked")
    assert [finding] == validate_scenario(kept.scenario) and finding.time_s == pytest.approx(1.4)  # 4.4 s before the crop
