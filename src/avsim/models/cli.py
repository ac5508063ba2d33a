"""`avsim generate`: multi-view Cosmos-Transfer2.5 generation from world-scenario control videos,
and `model_options`, the model options of every command that loads the model.

Only option parsing; the run itself is `avsim.models.generate.run_generate`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from avsim.models.defaults import GENERATION, SAMPLER_NAMES
from avsim.models.options import HELP, ModelOptions

app = typer.Typer(add_completion=False)
STARTING = "start (import torch)"  # the first progress step: importing the model code takes seconds
MODEL_PARAMETER = "model"  # the parameter of a command that `model_options` fills
MODEL = ModelOptions()  # that parameter's declared default (`model_options` replaces the parameter by the options)
Command = TypeVar("Command", bound=Callable[..., Any])


def _model_parameters(when: str, kind: Any) -> list[inspect.Parameter]:
    """One typer option per field of `ModelOptions`: `--<field-name>`, its type, default and help."""
    types = typing.get_type_hints(ModelOptions)
    out = []
    for f in dataclasses.fields(ModelOptions):
        text = f"{when}: {f.metadata[HELP]}" if when else str(f.metadata[HELP])
        option = typer.Option(f.default, f"--{f.name.replace('_', '-')}", help=text)
        out.append(inspect.Parameter(f.name, kind, default=option, annotation=types[f.name]))
    return out


def model_options(when: str = "") -> Callable[[Command], Command]:
    """Declare the model options on a typer command, from `ModelOptions`'s fields (one declaration, one help text).

    The command takes a parameter `model: ModelOptions = MODEL` (the default keeps the declaration
    valid Python after other defaults); its command line gets `--config`, `--checkpoint`, `--vae`,
    `--random-weights`, `--embeddings` and `--zero-text` in that place, and the command is called
    with the `ModelOptions` they give.

    Args:
        when: when the options apply, put before each help text (e.g. "--observe generated");
            "" when they always do.

    Returns:
        The decorator (apply it below `@app.command`).
    """

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        names = [f.name for f in dataclasses.fields(ModelOptions)]
        if MODEL_PARAMETER not in signature.parameters or set(names) & set(signature.parameters):
            raise TypeError(f"{command.__name__}: model_options needs a parameter {MODEL_PARAMETER!r} and none named {names}")
        params = [q for p in signature.parameters.values() for q in (_model_parameters(when, p.kind) if p.name == MODEL_PARAMETER else [p])]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            model = ModelOptions(**{name: kwargs.pop(name) for name in names})
            return command(*args, **kwargs, **{MODEL_PARAMETER: model})

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run  # type: ignore[return-value]

    return decorate


def _check_stand_ins(zero_text_clash: bool, random_vae_clash: bool) -> None:
    """Usage errors of the debug-chain stand-ins (--zero-text, --random-vae) given with what they replace."""
    if zero_text_clash:
        raise typer.BadParameter("give one of --zero-text, --embeddings, --prompt with --text-encoder", param_hint="--zero-text")
    if random_vae_clash:
        raise typer.BadParameter("the random VAE replaces --vae (and --random-weights has its own)", param_hint="--random-vae")


def _check_text_and_weights(prompt: str | None, text_encoder: Path | None, model: ModelOptions, random_vae: bool) -> None:
    """Usage errors: one source of text, one source of weights."""
    _check_stand_ins(model.zero_text and (model.embeddings, prompt, text_encoder) != (None, None, None),
                     random_vae and (model.vae is not None or model.random_weights))
    if model.embeddings is not None and (prompt is not None or text_encoder is not None):
        raise typer.BadParameter("give either --embeddings or --prompt with --text-encoder", param_hint="--embeddings")
    if (prompt is None) != (text_encoder is None):
        raise typer.BadParameter("--prompt and --text-encoder go together", param_hint="--prompt")
    if model.random_weights and (model.checkpoint is not None or model.vae is not None):
        given = " and ".join(name for name, value in (("--checkpoint", model.checkpoint), ("--vae", model.vae)) if value is not None)
        raise typer.BadParameter(f"random weights replace the weight files: drop {given} or --random-weights",
                                 param_hint="--random-weights")


@app.command("generate")
@model_options()
def generate(
    control_dir: Annotated[Path, typer.Argument(help="control videos: <dir>/<clip>/<clip>.<camera>.mp4 (avsim render output)")],
    out: Annotated[Path, typer.Argument(help="output folder: one mp4 per view, a grid mp4, settings.json")],
    model: ModelOptions = MODEL,  # --config, --checkpoint, --vae, --random-weights, --embeddings, --zero-text
    prompt: Annotated[str | None, typer.Option(help="caption (needs --text-encoder)")] = None,
    negative_prompt: Annotated[str | None, typer.Option(help="negative prompt for guidance (with --text-encoder)")] = None,
    text_encoder: Annotated[Path | None, typer.Option(help="local Cosmos-Reason1-7B folder")] = None,
    text_cache_dir: Annotated[Path | None, typer.Option(help="cache of prompt embeddings")] = None,
    views: Annotated[list[str] | None, typer.Option("--views", help="cameras to generate (repeat or comma-separate); default all")] = None,
    clip: Annotated[str | None, typer.Option(help="clip id when the folder holds several")] = None,
    steps: Annotated[int | None, typer.Option(min=1, help=f"sampling steps (default {GENERATION.steps}; the debug config: its own)")] = None,
    guidance: Annotated[float | None, typer.Option(help=f"classifier-free guidance (default {GENERATION.guidance:g})")] = None,
    seed: Annotated[int, typer.Option()] = GENERATION.seed,
    control_weight: Annotated[float, typer.Option(min=0.0, max=1.0)] = GENERATION.control_weight,
    sampler: Annotated[str, typer.Option(help=" or ".join(SAMPLER_NAMES))] = GENERATION.sampler,
    input_videos: Annotated[Path | None, typer.Option(help="RGB videos whose first frames condition chunk 0")] = None,
    num_conditional_frames: Annotated[int, typer.Option(min=0, help="pixel frames: 0, 1, 5, ...")] = GENERATION.num_conditional_frames,
    chunks: Annotated[int, typer.Option(min=1, help="autoregressive chunks of 29 frames")] = GENERATION.chunks,
    overlap: Annotated[int, typer.Option(min=0, help="pixel frames shared by consecutive chunks")] = GENERATION.overlap,
    random_vae: Annotated[bool, typer.Option(help="with --checkpoint: the random VAE of `avsim train encode --random-vae` (output is NOISE; debug chain)")] = False,
    device: Annotated[str | None, typer.Option(help="cuda, cuda:1, cpu (default: cuda if present)")] = None,
    offload: Annotated[bool, typer.Option(help="VAE on the CPU between uses; text encoder on the CPU")] = False,
    vae_tile: Annotated[int | None, typer.Option(help="VAE spatial tile size in pixels (saves memory)")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace a non-empty OUT")] = False,
) -> None:
    """Generate photoreal multi-view video from world-scenario control videos."""
    from avsim.core.progress import report_step, step_bars

    with step_bars("generate") as progress:
        report_step(progress, STARTING, 0, 1)
        from avsim.models.config import get_config
        from avsim.models.generate import GenerateRequest, run_generate, sampling_options, split_views

        report_step(progress, STARTING, 1, 1)
        try:
            cfg = get_config(model.config)
        except KeyError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
        if sampler not in SAMPLER_NAMES:
            raise typer.BadParameter(f"choose {' or '.join(SAMPLER_NAMES)}", param_hint="--sampler")
        _check_text_and_weights(prompt, text_encoder, model, random_vae)
        options = sampling_options(cfg, steps=steps, guidance=guidance, seed=seed, control_weight=control_weight,
                                   sampler=sampler, num_conditional_frames=num_conditional_frames, chunks=chunks, overlap=overlap)
        text: dict[str, Any] = {"negative_prompt": negative_prompt} if negative_prompt is not None else {}
        run_generate(GenerateRequest(
            control_dir=control_dir, out=out, **model.model_kwargs(), prompt=prompt, text_encoder=text_encoder,
            text_cache_dir=text_cache_dir, views=split_views(views), clip=clip, input_videos=input_videos, random_vae=random_vae,
            device=device, offload=offload, vae_tile_px=vae_tile, overwrite=overwrite, options=options, **text,
        ), progress=progress)
