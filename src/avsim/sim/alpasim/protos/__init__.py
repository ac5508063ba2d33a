"""avsim's AlpaSim v0 .proto files and the modules grpcio-tools compiled from them (`python -m avsim.devtools.protos`; do not edit them).

`ALPASIM_GRPC_VERSION`: the release of AlpaSim's `alpasim_grpc` package whose v0 .proto files these
are, field for field (NVlabs/alpasim `src/grpc/pyproject.toml`, 0.54.0): what a service reports as
its `grpc_api_version`, as AlpaSim's own services report `alpasim_grpc.API_VERSION_MESSAGE`.
"""

ALPASIM_GRPC_VERSION = (0, 54, 0)
