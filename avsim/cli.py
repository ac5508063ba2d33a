"""The `avsim` command line.

Core commands live here; every other command group lives in its own package's `cli.py`
(`app: typer.Typer`) and is imported only when that command is invoked, so `avsim info`
never imports torch. This module is the only place allowed to reach upward in the layers.
"""

from __future__ import annotations

import importlib
import sys

import typer

from avsim.errors import AvsimError

# command name -> (module, merge). merge=True adds the module's commands at top level
# (e.g. `avsim render`); merge=False mounts the module's app as a group (e.g. `avsim eval fid`).
LAZY_COMMANDS: dict[str, tuple[str, bool]] = {
    "render": ("avsim.render.cli", True),
    "generate": ("avsim.models.cli", True),
    "eval": ("avsim.evaluation.cli", False),
    "train": ("avsim.train.cli", False),
    "edit": ("avsim.edit.cli", True),
    "diff": ("avsim.edit.cli", True),
    "preview": ("avsim.edit.cli", True),
    "validate": ("avsim.edit.cli", True),
}
CORE_MODULE = "avsim.core_cli"


def _mount(app: typer.Typer, name: str) -> None:
    module_name, merge = LAZY_COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return  # that part of avsim is not built in this tree
        raise
    if merge:
        app.add_typer(module.app)
    else:
        app.add_typer(module.app, name=name)


def build_app(argv: list[str] | None = None) -> typer.Typer:
    """Build the CLI, importing only the command group that `argv` asks for."""
    core = importlib.import_module(CORE_MODULE)
    app: typer.Typer = core.app
    first = next((a for a in (argv or []) if not a.startswith("-")), None)
    wanted = [first] if first in LAZY_COMMANDS else ([] if first else list(LAZY_COMMANDS))
    mounted: set[str] = set()
    for name in wanted:
        module_name = LAZY_COMMANDS[name][0]
        if module_name not in mounted:
            mounted.add(module_name)
            _mount(app, name)
    return app


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    app = build_app(argv)
    try:
        app(args=argv, prog_name="avsim", standalone_mode=False)
    except AvsimError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    except typer.Exit as exc:  # raised by --help and explicit exits
        return exc.exit_code
    except (typer.BadParameter, typer.Abort) as exc:  # pragma: no cover - click formats these
        typer.echo(f"error: {exc}", err=True)
        return 2
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 1
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
