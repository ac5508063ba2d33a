"""Compile avsim's AlpaSim .proto files into the Python modules committed beside them.

    python -m avsim.devtools.protos            # regenerate src/avsim/sim/alpasim/protos/*_pb2*.py(i)

The generated modules are committed (an install needs no compiler); `tests/test_alpasim_protos.py`
regenerates them into a temporary folder and requires the same bytes. They are made by
grpcio-tools 1.76.0 (protoc 31.1): its code runs on protobuf >= 6.31.1, the runtime ortools and
the Waymo protos pin (grpcio-tools 1.85 needs protobuf 7).

protoc runs in a process of its own (`python -m grpc_tools.protoc`): the compiler extension bundles
its own protobuf and abseil, and a process that loads it and OR-tools' extension (the OpenLane
matcher, `avsim.evaluation.lanes`) corrupts its heap and aborts, in either order
(`munmap_chunk(): invalid pointer`, measured with grpcio-tools 1.76.0 and ortools 9.14.6206).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GRPC_TOOLS_VERSION = "1.76.0"
SRC = Path(__file__).resolve().parents[2]  # the src/ folder: protos import each other as avsim/sim/alpasim/protos/x.proto
PROTO_DIR = SRC / "avsim" / "sim" / "alpasim" / "protos"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files(src: Path = SRC) -> list[Path]:
    """The .proto files, sorted."""
    return sorted((src / PROTO_DIR.relative_to(SRC)).glob("*.proto"))


def compile_protos(out_root: Path, src: Path = SRC) -> list[Path]:
    """Run protoc (grpc_tools) on every .proto file: `_pb2.py`, `_pb2.pyi` and `_pb2_grpc.py` under `out_root`.

    Args:
        out_root: the folder the package paths are written under (`src` itself to regenerate in place).
        src: the source root the .proto files are found under.

    Returns:
        The files written, sorted.
    """
    import grpc_tools  # the package only (its _proto folder): the compiler extension loads in the child

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    files = [str(p.relative_to(src)) for p in proto_files(src)]
    args = [f"-I{src}", f"-I{include}", f"--python_out={out_root}", f"--pyi_out={out_root}", f"--grpc_python_out={out_root}", *files]
    done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed on {', '.join(files)}: {done.stderr.strip()}")
    rel = PROTO_DIR.relative_to(SRC)
    return sorted(p for p in (out_root / rel).iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    from importlib.metadata import version

    found = version("grpcio-tools")
    if found != GRPC_TOOLS_VERSION:
        print(f"grpcio-tools {found} installed; the committed modules are made by {GRPC_TOOLS_VERSION}", file=sys.stderr)
        return 1
    for path in compile_protos(SRC):
        print(path.relative_to(SRC))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
