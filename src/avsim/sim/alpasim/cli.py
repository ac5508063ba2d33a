"""`avsim serve sensorsim SCENARIOS --port P`: option parsing only; the work is
`avsim.sim.alpasim.server.run_server` (docs/closed_loop.md, "AlpaSim")."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from avsim.models.cli import MODEL, model_options
from avsim.models.options import ModelOptions

MAX_WORKERS = 256
MAX_MIB = 1 << 22  # 4 TiB

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="Serve avsim to other programs over gRPC.")


@app.command("sensorsim")
@model_options(when="--generated")
def sensorsim_command(
    scenarios: Path = typer.Argument(..., help="A scenario folder, or a folder of scenario folders (scene id: each scenario_id)."),
    port: int = typer.Option(50051, "--port", help="Port to listen on (0: a free one, printed)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    workers: int = typer.Option(4, "--workers", help="Requests drawn at once (large ones use at most all but one: small requests never wait behind them)."),
    backend: str = typer.Option("numba", "--backend", help="Rasteriser: numba or torch."),
    rolling_bands: int = typer.Option(8, "--rolling-bands", help="Strips a rolling-shutter image is drawn in (1: global shutter)."),
    max_request_mib: float = typer.Option(4.0, "--max-request-mib", help="Largest request accepted (RESOURCE_EXHAUSTED above)."),
    max_loaded: int = typer.Option(4, "--max-loaded", help="Scenes kept loaded at once."),
    max_memory_mib: int = typer.Option(2048, "--max-memory-mib", help="Memory the requests being drawn may use together (one request: 3/4 of it; RESOURCE_EXHAUSTED above)."),
    ray_cache_mib: int = typer.Option(512, "--ray-cache-mib", help="Memory the kept ray maps may use (8 bytes a pixel of each camera and size)."),
    generated: bool = typer.Option(False, "--generated", help="Serve the Transfer model's images instead of the control images."),
    model: ModelOptions = MODEL,  # --config, --checkpoint, --vae, --random-weights, --embeddings, --zero-text
    device: str = typer.Option(None, "--device", help="--generated: torch device."),
) -> None:
    """AlpaSim's SensorsimService over SCENARIOS: control images (or generated ones) for f-theta and pinhole cameras."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's own log lines (a port in use: an error line of its own) stay out of stderr
    from avsim.sim.alpasim.server import ServerOptions, run_server
    from avsim.sim.generated.options import GenerationOptions

    if not 0 <= port < 65536 or not 1 <= workers <= MAX_WORKERS or rolling_bands < 1 or not 0 < max_request_mib < 2048 or max_loaded < 1:
        raise typer.BadParameter(f"--port in 0..65535, --workers in 1..{MAX_WORKERS}, --rolling-bands and --max-loaded >= 1, --max-request-mib in (0, 2048) (gRPC's int32 limit)")
    if not 64 <= max_memory_mib <= MAX_MIB or not 0 <= ray_cache_mib <= MAX_MIB:
        raise typer.BadParameter(f"--max-memory-mib in 64..{MAX_MIB}, --ray-cache-mib in 0..{MAX_MIB}")
    if backend not in ("numba", "torch"):
        raise typer.BadParameter(f"--backend: expected numba or torch, got {backend!r}")
    options = ServerOptions(host=host, port=port, workers=workers, max_request_bytes=int(max_request_mib * 1024 * 1024), max_loaded=max_loaded,
                            backend=backend, rolling_bands=rolling_bands, max_memory_mib=max_memory_mib, ray_cache_mib=ray_cache_mib)  # fmt: skip
    generation = GenerationOptions(**model.model_kwargs(), device=device) if generated else None
    run_server(scenarios, options, generation, on_ready=lambda line: typer.echo(line, err=True))
