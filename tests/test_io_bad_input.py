"""Native format: every kind of bad input gives one clear line naming the file and the field."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_io_roundtrip import make_scenario

from avsim.core.errors import AvsimInputError
from avsim.scenario.io import SCENARIO_JSON, load_scenario, save_scenario


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("good") / "scene"
    save_scenario(make_scenario(7), folder)
    return folder


@pytest.fixture()
def folder(good_folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "scene"
    shutil.copytree(good_folder, copy)
    return copy


def edit_table(folder: Path, name: str, change: Callable[[pl.DataFrame], pl.DataFrame]) -> None:
    """Rewrite a table by hand and record its new digest (the cases test what the table says)."""
    from avsim.scenario.io_header import table_digest

    path = folder / name
    pl.read_parquet(path).pipe(change).write_parquet(path)
    edit_header(folder, lambda d: d["tables"][name].update(sha256=table_digest(path)))


def edit_header(folder: Path, change: Callable[[dict], None]) -> None:
    path = folder / SCENARIO_JSON
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def set_value(column: str, row: int, value: object) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def change(df: pl.DataFrame) -> pl.DataFrame:
        values = df[column].to_list()
        values[row] = value
        return df.with_columns(pl.Series(column, values, dtype=df.schema[column]))

    return change


def expect_error(folder: Path, file: str, field: str, reason: str, **kwargs) -> AvsimInputError:
    with pytest.raises(AvsimInputError) as info:
        load_scenario(folder, **kwargs)
    err = info.value
    message = str(err)
    assert "\n" not in message
    assert err.path == str(folder / file if file else folder), message
    assert err.field == field, message
    assert reason in err.reason, message
    assert message.startswith(f"{err.path}: {field}: "), message
    return err


# ---- files -----------------------------------------------------------------------------------
def test_missing_folder(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope", "", "scenario", "not found")


def test_not_a_scenario_folder(tmp_path: Path) -> None:
    expect_error(tmp_path, SCENARIO_JSON, "file", "missing")


@pytest.mark.parametrize("name", ["ego.parquet", "agents.parquet", "lights.parquet", "map_crosswalks.parquet"])
def test_missing_table(folder: Path, name: str) -> None:
    (folder / name).unlink()
    expect_error(folder, name, "file", "missing")


@pytest.mark.parametrize("name", ["ego.parquet", "agents.parquet", "map_lane_lines.parquet"])
@pytest.mark.parametrize("keep", [0.0, 0.5, 0.99])
def test_truncated_table(folder: Path, name: str, keep: float) -> None:
    path = folder / name
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    expect_error(folder, name, "file", "unreadable parquet (truncated or corrupt)")


@pytest.mark.parametrize("keep", [0, 1, 200])
def test_truncated_header(folder: Path, keep: int) -> None:
    path = folder / SCENARIO_JSON
    path.write_bytes(path.read_bytes()[:keep])
    expect_error(folder, SCENARIO_JSON, "json", "truncated or invalid JSON")


def test_replaced_table_with_other_row_count(folder: Path) -> None:
    edit_table(folder, "agents.parquet", lambda df: df.head(2))
    expect_error(folder, "agents.parquet", "rows", "scenario.json says")


# ---- header ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "reason"), [(2, "is 2, written by a newer avsim"), (0, "an older avsim"), ("1", "must be an integer")])
def test_wrong_schema_version(folder: Path, version: object, reason: str) -> None:
    edit_header(folder, lambda d: d.update(schema_version=version))
    expect_error(folder, SCENARIO_JSON, "schema_version", reason)


def test_missing_schema_version(folder: Path) -> None:
    edit_header(folder, lambda d: d.pop("schema_version"))
    expect_error(folder, SCENARIO_JSON, "schema_version", "must be an integer")


def test_wrong_format_name(folder: Path) -> None:
    edit_header(folder, lambda d: d.update(format="something-else"))
    expect_error(folder, SCENARIO_JSON, "format", "expected 'avsim-scenario'")


def test_nan_in_header_is_refused(folder: Path) -> None:
    path = folder / SCENARIO_JSON
    path.write_text(path.read_text().replace('"cx_px": 640.123', '"cx_px": NaN'))
    expect_error(folder, SCENARIO_JSON, "json", "NaN is not valid JSON")


# ---- cameras ---------------------------------------------------------------------------------
def test_zero_focal_length_pinhole(folder: Path) -> None:
    edit_header(folder, lambda d: d["rig"]["cameras"][0].update(fx_px=0.0))
    expect_error(folder, SCENARIO_JSON, "rig.cameras[0] (CAM_FRONT).fx_px", "focal length must be > 0")


def test_zero_focal_length_ftheta(folder: Path) -> None:
    def change(d: dict) -> None:
        d["rig"]["cameras"][1]["poly"][1] = 0.0

    edit_header(folder, change)
    expect_error(folder, SCENARIO_JSON, "rig.cameras[1] (camera_cross_right_120fov).poly[1]", "zero focal length")


@pytest.mark.parametrize(
    ("key", "value", "field", "reason"),
    [
        ("width_px", 0, "width_px", "positive integer"),
        ("height_px", 720.5, "height_px", "positive integer"),
        ("model", "fisheye", "model", "must be 'pinhole' or 'ftheta'"),
        ("cx_px", "640", "cx_px", "must be a number"),
        ("is_backward_poly", 1, "is_backward_poly", "true or false"),
    ],
)
def test_bad_camera_fields(folder: Path, key: str, value: object, field: str, reason: str) -> None:
    edit_header(folder, lambda d: d["rig"]["cameras"][1].update({key: value}))
    expect_error(folder, SCENARIO_JSON, f"rig.cameras[1] (camera_cross_right_120fov).{field}", reason)


def test_camera_extrinsic_not_a_rotation(folder: Path) -> None:
    def change(d: dict) -> None:
        d["rig"]["cameras"][2]["ego_SE3_camera"]["rotation"][0][0] += 0.01

    edit_header(folder, change)
    expect_error(folder, SCENARIO_JSON, "rig.cameras[2] (rear).ego_SE3_camera.rotation", "not a rotation matrix")


# ---- poses, quaternions, timestamps ----------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("column", ["tx_m", "r12"])
def test_non_finite_ego_pose(folder: Path, column: str, value: float) -> None:
    edit_table(folder, "ego.parquet", set_value(column, 4, value))
    expect_error(folder, "ego.parquet", column, "row 4 is")


def test_non_finite_agent_centre(folder: Path) -> None:
    edit_table(folder, "agents.parquet", set_value("center_y_m", 1, float("nan")))
    err = expect_error(folder, "agents.parquet", "center_y_m", "row 1 (id ")
    assert "must be finite" in err.reason


def test_non_finite_map_vertex(folder: Path) -> None:
    def change(df: pl.DataFrame) -> pl.DataFrame:
        values = df["z_m"].to_list()
        values[1][1] = float("inf")
        return df.with_columns(pl.Series("z_m", values, dtype=pl.List(pl.Float64)))

    edit_table(folder, "map_road_boundaries.parquet", change)
    expect_error(folder, "map_road_boundaries.parquet", "z_m", "row 1 (id 'rb1') vertex 1 is inf")


def test_ego_rotation_not_orthonormal(folder: Path) -> None:
    edit_table(folder, "ego.parquet", lambda df: df.with_columns(pl.col("r00") * 1.5))
    expect_error(folder, "ego.parquet", "r00..r22", "row 0 is not a rotation matrix")


@pytest.mark.parametrize(("name", "scale"), [("agents.parquet", 2.0), ("map_traffic_lights.parquet", 0.5), ("map_traffic_signs.parquet", 0.0)])
def test_non_unit_quaternion(folder: Path, name: str, scale: float) -> None:
    edit_table(folder, name, lambda df: df.with_columns([pl.col(c) * scale for c in ("qw", "qx", "qy", "qz")]))
    expect_error(folder, name, "qw..qz", "row 0 (id ")


def test_slightly_off_unit_quaternion_is_accepted(folder: Path) -> None:
    edit_table(folder, "agents.parquet", lambda df: df.with_columns([pl.col(c) * (1 + 1e-7) for c in ("qw", "qx", "qy", "qz")]))
    load_scenario(folder)


def test_non_monotonic_ego_timestamps(folder: Path) -> None:
    def swap(df: pl.DataFrame) -> pl.DataFrame:
        t = df["timestamp_ns"].to_numpy().copy()
        t[[3, 4]] = t[[4, 3]]
        return df.with_columns(pl.Series("timestamp_ns", t))

    edit_table(folder, "ego.parquet", swap)
    expect_error(folder, "ego.parquet", "timestamp_ns", "row 4: not strictly increasing")


def test_repeated_ego_timestamp(folder: Path) -> None:
    edit_table(folder, "ego.parquet", lambda df: df.with_columns(pl.col("timestamp_ns").clip(upper_bound=df["timestamp_ns"][2])))
    expect_error(folder, "ego.parquet", "timestamp_ns", "row 3: not strictly increasing")


def test_non_monotonic_agent_timestamps_within_a_track(folder: Path) -> None:
    df = pl.read_parquet(folder / "agents.parquet")
    ids = df["track_id"].to_numpy()
    row = int(np.flatnonzero(ids[1:] == ids[:-1])[0]) + 1  # second row of a multi-row track
    edit_table(folder, "agents.parquet", set_value("timestamp_ns", row, df["timestamp_ns"][row - 1] - 1))
    expect_error(folder, "agents.parquet", "timestamp_ns", f"row {row} (track_id ")


def test_unsorted_agent_tracks(folder: Path) -> None:
    edit_table(folder, "agents.parquet", lambda df: df.reverse())
    expect_error(folder, "agents.parquet", "track_id", "rows must be sorted by (track_id, timestamp_ns)")


def test_non_monotonic_light_timestamps(folder: Path) -> None:
    edit_table(folder, "lights.parquet", set_value("timestamp_ns", 1, 0))
    expect_error(folder, "lights.parquet", "timestamp_ns", "row 1 (light_id 'tl0')")


def test_unknown_light_state(folder: Path) -> None:
    edit_table(folder, "lights.parquet", set_value("state", 2, "purple"))
    expect_error(folder, "lights.parquet", "state", "'purple', expected one of red, yellow, green, unknown")


# ---- schema of the tables --------------------------------------------------------------------
def test_wrong_column_dtype(folder: Path) -> None:
    edit_table(folder, "ego.parquet", lambda df: df.with_columns(pl.col("timestamp_ns").cast(pl.Float64)))
    expect_error(folder, "ego.parquet", "timestamp_ns", "has dtype Float64, expected Int64")


def test_float32_column_is_refused(folder: Path) -> None:
    edit_table(folder, "agents.parquet", lambda df: df.with_columns(pl.col("length_m").cast(pl.Float32)))
    expect_error(folder, "agents.parquet", "length_m", "expected Float64")


def test_missing_column(folder: Path) -> None:
    edit_table(folder, "agents.parquet", lambda df: df.drop("source_class"))
    expect_error(folder, "agents.parquet", "source_class", "missing column")


def test_unexpected_column(folder: Path) -> None:
    edit_table(folder, "lights.parquet", lambda df: df.with_columns(pl.lit(1).alias("brightness")))
    expect_error(folder, "lights.parquet", "brightness", "unexpected column")


def test_null_value(folder: Path) -> None:
    edit_table(folder, "agents.parquet", set_value("source_class", 2, None))
    expect_error(folder, "agents.parquet", "source_class", "row 2 is null")


def test_ragged_xyz_lengths_disagree(folder: Path) -> None:
    def change(df: pl.DataFrame) -> pl.DataFrame:
        values = df["y_m"].to_list()
        values[0] = values[0][:-1]
        return df.with_columns(pl.Series("y_m", values, dtype=pl.List(pl.Float64)))

    edit_table(folder, "map_crosswalks.parquet", change)
    expect_error(folder, "map_crosswalks.parquet", "y_m", "row 0 (id 'cw0') has")


def test_polygon_with_too_few_vertices(folder: Path) -> None:
    edit_table(folder, "map_crosswalks.parquet", lambda df: df.with_columns([pl.col(c).list.head(2) for c in ("x_m", "y_m", "z_m")]))
    expect_error(folder, "map_crosswalks.parquet", "crosswalks", ">= 3 points per element")


def test_vertex_attributes_all_or_none(folder: Path) -> None:
    edit_table(folder, "map_lane_lines.parquet", set_value("vertex_color", 1, None))
    expect_error(folder, "map_lane_lines.parquet", "vertex_color", "all or none")


def test_duplicate_map_ids(folder: Path) -> None:
    edit_table(folder, "map_poles.parquet", set_value("id", 1, "pole0"))
    expect_error(folder, "map_poles.parquet", "poles", "unique")


# ---- empty map -------------------------------------------------------------------------------
def test_empty_map(folder: Path) -> None:
    for path in folder.glob("map_*.parquet"):
        edit_table(folder, path.name, lambda df: df.head(0))
    edit_header(folder, lambda d: d["tables"].update({p.name: {"rows": 0} for p in folder.glob("map_*.parquet")}))
    expect_error(folder, "", "map", "every map_*.parquet table is empty")
    assert load_scenario(folder, allow_empty_map=True).map.is_empty()


def test_corrupted_table_bytes_are_caught_by_the_digest(folder: Path) -> None:
    """Random bytes written into agents.parquet (a read may still succeed): the recorded sha256
    no longer matches, and the error names the file."""
    path = folder / "agents.parquet"
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    where = rng.integers(len(data) // 4, 3 * len(data) // 4, 2000)
    data[where.min() : where.min() + 2000] = rng.integers(0, 256, 2000, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(AvsimInputError) as info:
        load_scenario(folder)
    assert "agents.parquet" in str(info.value)


def test_scenarios_without_digests_still_load(folder: Path) -> None:
    edit_header(folder, lambda d: [t.pop("sha256") for t in d["tables"].values()])
    assert len(load_scenario(folder).agents) > 0
