"""avsim's AlpaSim .proto files: the committed modules are what grpcio-tools makes of them, and the
wire contract (packages, services, methods, messages, field numbers and types) is AlpaSim's v0
(NVlabs/alpasim src/grpc/alpasim_grpc/v0/, read for this table)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor

from avsim.devtools.protos import GRPC_TOOLS_VERSION, PROTO_DIR, compile_protos
from avsim.sim.alpasim.protos import common_pb2, egodriver_pb2, sensorsim_pb2

T = FieldDescriptor
# message full name -> {field: (number, type)}: AlpaSim v0's numbers (the ones a peer reads)
CONTRACT: dict[str, dict[str, tuple[int, int]]] = {
    "common.Pose": {"vec": (1, T.TYPE_MESSAGE), "quat": (2, T.TYPE_MESSAGE)},
    "common.Quat": {"w": (1, T.TYPE_FLOAT), "x": (2, T.TYPE_FLOAT), "y": (3, T.TYPE_FLOAT), "z": (4, T.TYPE_FLOAT)},
    "common.PoseAtTime": {"pose": (1, T.TYPE_MESSAGE), "timestamp_us": (2, T.TYPE_FIXED64)},
    "common.DynamicState": {"angular_velocity": (1, T.TYPE_MESSAGE), "linear_velocity": (2, T.TYPE_MESSAGE),
                            "linear_acceleration": (3, T.TYPE_MESSAGE), "angular_acceleration": (4, T.TYPE_MESSAGE)},
    "common.VersionId": {"version_id": (1, T.TYPE_STRING), "git_hash": (2, T.TYPE_STRING), "grpc_api_version": (3, T.TYPE_MESSAGE)},
    "egodriver.Route": {"timestamp_us": (2, T.TYPE_FIXED64), "waypoints": (1, T.TYPE_MESSAGE)},
    "egodriver.DriveSessionRequest": {"session_uuid": (1, T.TYPE_STRING), "random_seed": (2, T.TYPE_FIXED64), "debug_info": (4, T.TYPE_MESSAGE),
                                      "rollout_spec": (5, T.TYPE_MESSAGE)},
    "egodriver.DriveSessionRequest.RolloutSpec.VehicleDefinition": {"available_cameras": (3, T.TYPE_MESSAGE)},
    "egodriver.RolloutCameraImage": {"session_uuid": (1, T.TYPE_STRING), "camera_image": (3, T.TYPE_MESSAGE)},
    "egodriver.RolloutCameraImage.CameraImage": {"frame_start_us": (2, T.TYPE_FIXED64), "frame_end_us": (3, T.TYPE_FIXED64),
                                                 "image_bytes": (4, T.TYPE_BYTES), "logical_id": (5, T.TYPE_STRING)},
    "egodriver.RolloutEgoTrajectory": {"session_uuid": (1, T.TYPE_STRING), "trajectory": (3, T.TYPE_MESSAGE), "dynamic_states": (5, T.TYPE_MESSAGE)},
    "egodriver.RouteRequest": {"session_uuid": (1, T.TYPE_STRING), "route": (3, T.TYPE_MESSAGE)},
    "egodriver.DriveRequest": {"session_uuid": (1, T.TYPE_STRING), "time_now_us": (3, T.TYPE_FIXED64), "time_query_us": (4, T.TYPE_FIXED64),
                               "renderer_data": (5, T.TYPE_BYTES)},
    "egodriver.DriveResponse": {"trajectory": (2, T.TYPE_MESSAGE), "debug_info": (3, T.TYPE_MESSAGE), "terminate_session": (4, T.TYPE_BOOL)},
    "nre.grpc.protos.sensorsim.CameraSpec": {"ftheta_param": (2, T.TYPE_MESSAGE), "opencv_pinhole_param": (3, T.TYPE_MESSAGE),
                                             "opencv_fisheye_param": (4, T.TYPE_MESSAGE), "logical_id": (5, T.TYPE_STRING),
                                             "resolution_h": (7, T.TYPE_UINT32), "resolution_w": (8, T.TYPE_UINT32), "shutter_type": (9, T.TYPE_ENUM),
                                             "bivariate_windshield_model_param": (10, T.TYPE_MESSAGE)},
    "nre.grpc.protos.sensorsim.FthetaCameraParam": {"principal_point_x": (1, T.TYPE_DOUBLE), "principal_point_y": (2, T.TYPE_DOUBLE),
                                                    "reference_poly": (3, T.TYPE_ENUM), "pixeldist_to_angle_poly": (4, T.TYPE_DOUBLE),
                                                    "angle_to_pixeldist_poly": (5, T.TYPE_DOUBLE), "max_angle": (6, T.TYPE_DOUBLE),
                                                    "linear_cde": (7, T.TYPE_MESSAGE)},
    "nre.grpc.protos.sensorsim.OpenCVPinholeCameraParam": {"principal_point_x": (1, T.TYPE_DOUBLE), "principal_point_y": (2, T.TYPE_DOUBLE),
                                                           "focal_length_x": (3, T.TYPE_DOUBLE), "focal_length_y": (4, T.TYPE_DOUBLE),
                                                           "radial_coeffs": (5, T.TYPE_DOUBLE), "tangential_coeffs": (6, T.TYPE_DOUBLE),
                                                           "thin_prism_coeffs": (7, T.TYPE_DOUBLE)},
    "nre.grpc.protos.sensorsim.RGBRenderRequest": {"scene_id": (1, T.TYPE_STRING), "resolution_h": (2, T.TYPE_UINT32), "resolution_w": (3, T.TYPE_UINT32),
                                                   "camera_intrinsics": (4, T.TYPE_MESSAGE), "frame_start_us": (5, T.TYPE_FIXED64),
                                                   "frame_end_us": (6, T.TYPE_FIXED64), "sensor_pose": (7, T.TYPE_MESSAGE),
                                                   "dynamic_objects": (8, T.TYPE_MESSAGE), "image_format": (9, T.TYPE_ENUM),
                                                   "image_quality": (10, T.TYPE_FLOAT), "insert_ego_mask": (11, T.TYPE_BOOL), "ego_mask_id": (12, T.TYPE_MESSAGE)},
    "nre.grpc.protos.sensorsim.AvailableCamerasReturn.AvailableCamera": {"intrinsics": (1, T.TYPE_MESSAGE), "rig_to_camera": (2, T.TYPE_MESSAGE),
                                                                         "logical_id": (3, T.TYPE_STRING)},
    "nre.grpc.protos.sensorsim.AvailableTrajectoriesReturn.AvailableTrajectory": {"trajectory": (2, T.TYPE_MESSAGE)},
    "nre.grpc.protos.sensorsim.AggregatedRenderReturn": {"rgb_returns": (1, T.TYPE_MESSAGE), "lidar_returns": (2, T.TYPE_MESSAGE), "driver_data": (3, T.TYPE_BYTES)},
}  # fmt: skip
SERVICES = {
    "egodriver.EgodriverService": ["start_session", "close_session", "submit_image_observation", "submit_egomotion_observation", "submit_route",
                                   "submit_recording_ground_truth", "drive", "get_version"],
    "nre.grpc.protos.sensorsim.SensorsimService": ["render_rgb", "render_lidar", "render_aggregated", "batch_render_rgb", "get_version",
                                                   "get_available_scenes", "get_loaded_scenes", "get_available_cameras", "get_available_trajectories",
                                                   "get_available_ego_masks"],
}  # fmt: skip
SHUTTER = {"UNKNOWN": 0, "ROLLING_TOP_TO_BOTTOM": 1, "ROLLING_LEFT_TO_RIGHT": 2, "ROLLING_BOTTOM_TO_TOP": 3, "ROLLING_RIGHT_TO_LEFT": 4, "GLOBAL": 5}


def _message(full_name: str):  # type: ignore[no-untyped-def]
    for module in (common_pb2, egodriver_pb2, sensorsim_pb2):
        pool = module.DESCRIPTOR.pool
        try:
            return pool.FindMessageTypeByName(full_name)
        except KeyError:
            continue
    raise KeyError(full_name)


@pytest.mark.parametrize("message", sorted(CONTRACT))
def test_messages_have_alpasim_field_numbers_and_types(message: str) -> None:
    desc = _message(message)
    got = {f.name: (f.number, f.type) for f in desc.fields}
    for name, want in CONTRACT[message].items():
        assert got.get(name) == want, (message, name, got.get(name), want)


def test_services_and_enums_are_alpasims() -> None:
    for service, methods in SERVICES.items():
        desc = egodriver_pb2.DESCRIPTOR.pool.FindServiceByName(service)
        assert [m.name for m in desc.methods] == methods
    drive = egodriver_pb2.DESCRIPTOR.services_by_name["EgodriverService"].methods_by_name["drive"]
    assert (drive.input_type.full_name, drive.output_type.full_name) == ("egodriver.DriveRequest", "egodriver.DriveResponse")
    assert {v.name: v.number for v in sensorsim_pb2.DESCRIPTOR.enum_types_by_name["ShutterType"].values} == SHUTTER
    assert sensorsim_pb2.ImageFormat.Value("PNG") == 1 and sensorsim_pb2.ImageFormat.Value("JPEG") == 2


def test_bytes_from_a_peer_decode_field_by_field() -> None:
    """A DriveRequest as AlpaSim's runtime writes it (hand-encoded wire bytes of fields 1, 3, 4) reads back."""
    wire = bytes([0x0A, 0x02]) + b"s1" + bytes([0x19]) + (123).to_bytes(8, "little") + bytes([0x21]) + (456).to_bytes(8, "little")
    req = egodriver_pb2.DriveRequest.FromString(wire)
    assert (req.session_uuid, req.time_now_us, req.time_query_us) == ("s1", 123, 456)
    assert req.SerializeToString() == wire


@pytest.mark.lint
def test_committed_modules_are_what_grpcio_tools_makes(tmp_path: Path) -> None:
    found = version("grpcio-tools")
    assert found == GRPC_TOOLS_VERSION, f"grpcio-tools {found}: the dev extra pins {GRPC_TOOLS_VERSION} (the committed modules' compiler)"
    written = compile_protos(tmp_path)
    committed = sorted(p.name for p in PROTO_DIR.iterdir() if p.name.endswith(("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")))
    assert sorted(p.name for p in written) == committed and len(committed) == 9
    for path in written:
        assert path.read_bytes() == (PROTO_DIR / path.name).read_bytes(), f"{path.name}: regenerate with python -m avsim.devtools.protos"


@pytest.mark.subprocess
def test_regenerating_the_protos_leaves_the_lane_matcher_usable(tmp_path: Path) -> None:
    """protoc's extension and OR-tools' corrupt the heap of a process that loads both (abort: the
    crash of a test worker that ran the lane matcher after this module's regeneration test); protoc
    runs in its own process, so one process may regenerate the protos and then match lanes."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from pathlib import Path; from avsim.devtools.protos import compile_protos; "
            "compile_protos(Path(sys.argv[1])); assert 'grpc_tools._protoc_compiler' not in sys.modules; "
            "from avsim.evaluation.lanes import min_cost_flow_assignment; "
            "print(min_cost_flow_assignment(np.array([[1, 2], [3, 4]]))[1].tolist())")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 1]"
