"""`avsim sim SCENARIO OUT`: option parsing only; the work is `avsim.sim.run.run_sim` (docs/closed_loop.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from avsim.models.cli import MODEL, model_options
from avsim.models.options import ModelOptions

if TYPE_CHECKING:
    from avsim.sim.run import SimOptions

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _size(value: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise typer.BadParameter(f"--size: expected WxH such as 1280x720, got {value!r}") from None
    return w, h  # bounds: SimOptions


@app.command("sim")
@model_options(when="--observe generated")
def sim_command(
    scenario: Path = typer.Argument(..., help="Scenario folder (sample, converted or edited)."),
    out: Path = typer.Argument(..., help="Output folder: scenario/ (the rollout), sim_metrics.json, steps.parquet, timing.json."),
    policy: str = typer.Option("idm", "--policy", help="expert (log replay), constant-velocity, idm (PDM-Closed-style planner), MODULE:CALLABLE or alpasim://HOST:PORT (an AlpaSim egodriver)."),
    agents: str = typer.Option("log", "--agents", help="log (replay the log), idm (IDM agents that react, nuPlan's) or storyboard (a scenario converted from OpenSCENARIO: its storyboard drives everyone but the ego)."),
    cameras: str = typer.Option(None, "--cameras", help="Render these cameras every step for the policy (comma-separated, or 'all'); default none."),
    size: str = typer.Option("1280x720", "--size", help="Camera image size WxH."),
    backend: str = typer.Option("numba", "--backend", help="Renderer backend: numba or torch."),
    steps: int = typer.Option(None, "--steps", help="Episode length in steps (default: the scenario's span)."),
    duration: float = typer.Option(None, "--duration", help="Episode length in seconds (instead of --steps)."),
    seed: int = typer.Option(0, "--seed", help="Seed: IDM agents' parameter spread, handed to the policy."),
    rate: float = typer.Option(10.0, "--rate", help="Steps per second."),
    controller: str = typer.Option("auto", "--controller", help="How trajectories are followed: lqr, perfect, auto (perfect for expert)."),
    budget: float = typer.Option(1.0, "--budget", help="CPU seconds each policy call may compute (a call over 10x that in wall time, at least 60 s, is hung)."),
    no_step_scores: bool = typer.Option(False, "--no-step-scores", help="Skip the per-step 4 s window scores."),
    observe: str = typer.Option(None, "--observe", help="What the policy sees: none, control (rendered control frames; the default with --cameras) or generated (video generated chunk by chunk with the Transfer model)."),
    model: ModelOptions = MODEL,  # --config, --checkpoint, --vae, --random-weights, --embeddings, --zero-text
    chunk_frames: int = typer.Option(None, "--chunk-frames", help="--observe generated: frames per chunk (1 + 4k, at most the config's 29)."),
    overlap: int = typer.Option(1, "--overlap", help="--observe generated: generated frames each chunk is conditioned on (0 or 1 + 4k)."),
    replan: str = typer.Option("hold", "--replan", help="--observe generated: hold (re-plan every step, the chunk's frames held) or wait (plan once per chunk, follow it)."),
    gen_steps: int = typer.Option(None, "--gen-steps", help="--observe generated: sampling steps (default: the config's)."),
    device: str = typer.Option(None, "--device", help="--observe generated: torch device (default: cuda when present)."),
    wait: bool = typer.Option(False, "--wait", help="When another avsim process is writing OUT, wait for it (default: stop with one line)."),
) -> None:
    """Drive SCENARIO in closed loop with a policy; write the rollout, its scores and a per-step table to OUT."""
    if policy.startswith("alpasim://"):  # gRPC's own log lines (a driver that goes away) stay out of stderr
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from avsim.core.errors import AvsimValueError
    from avsim.sim.chunks import ReplanMode
    from avsim.sim.generated.options import GenerationOptions
    from avsim.sim.run import Observe, SimOptions
    from avsim.sim.stepper import AgentMode

    if agents not in ("log", "idm", "storyboard"):
        raise typer.BadParameter(f"--agents: expected log, idm or storyboard, got {agents!r}")
    if backend not in ("numba", "torch"):
        raise typer.BadParameter(f"--backend: expected numba or torch, got {backend!r}")
    if steps is not None and duration is not None:
        raise typer.BadParameter("--steps and --duration: give one of them")
    if observe is not None and observe not in (o.value for o in Observe):
        raise typer.BadParameter(f"--observe: expected none, control or generated, got {observe!r}")
    if replan not in (r.value for r in ReplanMode):
        raise typer.BadParameter(f"--replan: expected hold or wait, got {replan!r}")
    generation = GenerationOptions(**model.model_kwargs(), steps=gen_steps, chunk_frames=chunk_frames, overlap=overlap, device=device)
    cams = None if cameras is None else (() if cameras.strip() == "all" else tuple(c.strip() for c in cameras.split(",") if c.strip()))
    try:  # the options' bounds (steps, duration, rate, budget, size, seed) name the option: a usage error
        options = SimOptions(policy=policy, agents=AgentMode(agents), cameras=cams, size=_size(size), backend=backend, steps=steps,
                             duration_s=duration, seed=seed, rate_hz=rate, controller=controller, budget_s=budget,
                             step_scores=not no_step_scores, observe=None if observe is None else Observe(observe), generation=generation,
                             replan=ReplanMode(replan))  # fmt: skip
    except AvsimValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    _run(scenario, out, options, wait)


def _run(scenario: Path, out: Path, options: SimOptions, wait: bool = False) -> None:
    """`run_sim` under a progress bar (cleared when the run fails: its one error line stays alone), then the one-line summary."""
    from avsim.core.progress import progress_bar
    from avsim.sim.interrupts import Interrupted
    from avsim.sim.run import run_sim

    bar = progress_bar("sim", unit="steps", eta=False)
    try:
        with bar:
            task = bar.add_task("", total=None)
            summary = run_sim(scenario, out, options, on_step=lambda k, n: bar.update(task, completed=k, total=n),
                              on_phase=lambda phase: bar.update(task, description=phase), interruptible=True, wait=wait)  # fmt: skip
    except Interrupted as exc:
        typer.echo(f"{exc} before the first step: nothing written", err=True)
        raise typer.Exit(exc.exit_code) from None
    s = summary.scores
    if summary.status != "completed":
        typer.echo(f"episode ended early: {summary.end_reason}", err=True)
    typer.echo(f"{summary.steps} steps ({summary.status}); PDMS {s.get('pdms', float('nan')):.4f}, EPDMS {s.get('epdms', float('nan')):.4f} "
               f"(NC {s.get('no_at_fault_collisions')}, DAC {s.get('drivable_area_compliance')}, TLC {s.get('traffic_light_compliance')}, "
               f"EP {s.get('ego_progress', float('nan')):.3f}) -> {summary.out}")  # fmt: skip
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)
