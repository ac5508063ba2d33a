"""`avsim serve sensorsim SCENARIOS --port P`: option parsing only; the work is
`avsim.sim.alpasim.server.run_server` (docs/closed_loop.md, "AlpaSim")."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from avsim.models.cli import MODEL, model_options
from avsim.models.options import ModelOptions

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="Serve avsim to other programs over gRPC.")


@app.command("sensorsim")
@model_options(when="--generated")
def sensorsim_command(
    scenarios: Path = typer.Argument(..., help="A scenario folder, or a folder of scenario folders (scene id: each scenario_id)."),
    port: int = typer.Option(50051, "--port", help="Port to listen on (0: a free one, printed)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    workers: int = typer.Option(4, "--workers", help="gRPC worker threads (images are drawn one at a time)."),
    backend: str = typer.Option("numba", "--backend", help="Rasteriser: numba or torch."),
    rolling_bands: int = typer.Option(8, "--rolling-bands", help="Strips a rolling-shutter image is drawn in (1: global shutter)."),
    max_request_mib: float = typer.Option(4.0, "--max-request-mib", help="Largest request accepted (RESOURCE_EXHAUSTED above)."),
    max_loaded: int = typer.Option(4, "--max-loaded", help="Scenes kept loaded at once."),
    generated: bool = typer.Option(False, "--generated", help="Serve the Transfer model's images instead of the control images."),
    model: ModelOptions = MODEL,  # --config, --checkpoint, --vae, --random-weights, --embeddings, --zero-text
    device: str = typer.Option(None, "--device", help="--generated: torch device."),
) -> None:
    """AlpaSim's SensorsimService over SCENARIOS: control images (or generated ones) for f-theta and pinhole cameras."""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's own log lines (a port in use: an error line of its own) stay out of stderr
    from avsim.sim.alpasim.server import ServerOptions, run_server
    from avsim.sim.generated.options import GenerationOptions

    if not 0 <= port < 65536 or workers < 1 or rolling_bands < 1 or not max_request_mib > 0 or max_loaded < 1:
        raise typer.BadParameter("--port in 0..65535, --workers, --rolling-bands and --max-loaded >= 1, --max-request-mib > 0")
    if backend not in ("numba", "torch"):
        raise typer.BadParameter(f"--backend: expected numba or torch, got {backend!r}")
    options = ServerOptions(host=host, port=port, workers=workers, max_request_bytes=int(max_request_mib * 1024 * 1024), max_loaded=max_loaded,
                            backend=backend, rolling_bands=rolling_bands)  # fmt: skip
    generation = GenerationOptions(**model.model_kwargs(), device=device) if generated else None
    run_server(scenarios, options, generation, on_ready=lambda line: typer.echo(line, err=True))
