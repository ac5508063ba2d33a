"""avsim's AlpaSim v0 .proto files and the modules grpcio-tools compiled from them (`python -m avsim.devtools.protos`; do not edit)."""
