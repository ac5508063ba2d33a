"""Every command's --help reads at 80 columns: full option names, no type on flags, no double negatives."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from avsim.cli.main import build_app
from avsim.models.options import HELP, ModelOptions


def _command_paths() -> list[tuple[str, ...]]:
    """Every command of the CLI, as the argv words that reach it."""
    root = typer.main.get_command(build_app(None))
    paths: list[tuple[str, ...]] = []

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if not subs:
            paths.append(prefix)
            return
        for name, sub in sorted(subs.items()):
            walk(sub, (*prefix, name))

    walk(root, ())
    return paths


PATHS = _command_paths()


def test_every_group_is_walked():
    names = {p[0] for p in PATHS}
    assert {"render", "eval", "train", "edit", "view", "info", "convert"} <= names
    assert ("eval", "report") in PATHS


@pytest.mark.subprocess
@pytest.mark.parametrize("words", [" ".join(p) for p in PATHS])
def test_help_reads_at_80_columns(words):
    code = "import sys; from avsim.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    result = subprocess.run([sys.executable, "-c", code, *words.split(), "--help"], capture_output=True, text=True, env=env, timeout=360)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "…" not in text, text  # nothing truncated
    assert "<bool>" not in text, text  # flags show no type
    assert "--no-no-" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80, text


# ---- the model options: one declaration (avsim.models.options.ModelOptions) -------------------
MODEL_COMMANDS = {("generate",): "", ("sim",): "--observe generated", ("serve", "sensorsim"): "--generated", ("run", "generate"): ""}


def _command(words: tuple[str, ...]):
    cmd = typer.main.get_command(build_app(None))
    for word in words:
        cmd = cmd.commands[word]  # type: ignore[attr-defined]
    return cmd


@pytest.mark.parametrize("words", list(MODEL_COMMANDS), ids=" ".join)
def test_every_command_that_loads_the_model_declares_its_options_once(words: tuple[str, ...]) -> None:
    """`--config`, `--checkpoint`, `--vae`, `--random-weights`, `--embeddings`, `--zero-text`: the fields
    of `ModelOptions`, each with the field's help (after the command's `when`), type and default."""
    params = {p.opts[0]: p for p in _command(words).params}
    when = MODEL_COMMANDS[words]
    for f in dataclasses.fields(ModelOptions):
        param = params[f"--{f.name.replace('_', '-')}"]
        assert param.help == (f"{when}: {f.metadata[HELP]}" if when else f.metadata[HELP])
        assert param.default == f.default and param.secondary_opts == []  # a flag is one word, no --no-...
        assert getattr(param, "is_flag", False) == isinstance(f.default, bool)


def test_model_options_reach_the_command_as_one_typed_value(tmp_path: Path) -> None:
    from avsim.models.cli import model_options

    seen: list[ModelOptions] = []
    app = typer.Typer(add_completion=False)

    @app.command()
    @model_options(when="--x")
    def probe(name: str = typer.Argument(...), model: ModelOptions = ModelOptions(), other: int = typer.Option(1)) -> None:  # noqa: B008
        seen.append(model)

    result = CliRunner().invoke(app, ["a", "--config", "debug", "--vae", str(tmp_path / "v.pth"), "--zero-text", "--other", "2"])
    assert result.exit_code == 0, result.output
    assert seen == [ModelOptions(config="debug", vae=tmp_path / "v.pth", zero_text=True)]
    assert [p.name for p in typer.main.get_command(app).params] == ["name", "config", "checkpoint", "vae", "random_weights", "embeddings",
                                                                    "zero_text", "other"]  # fmt: skip
    with pytest.raises(TypeError, match="model_options needs a parameter 'model'"):
        model_options()(lambda name: None)
    with pytest.raises(TypeError, match="none named"):
        model_options()(lambda config, model=ModelOptions(): None)  # noqa: B008


def test_model_options_are_checked() -> None:
    from avsim.core.errors import AvsimValueError

    assert ModelOptions(checkpoint="w.pt").checkpoint == Path("w.pt")  # type: ignore[arg-type]
    for bad in ({"config": ""}, {"vae": 3}, {"zero_text": "yes"}):
        with pytest.raises(AvsimValueError, match=next(iter(bad))):
            ModelOptions(**bad)  # type: ignore[arg-type]
