"""The `avsim` command line.

Core commands live here; every other command group lives in its own package's `cli.py`
(`app: typer.Typer`) and is imported only when that command is invoked, so `avsim info`
never imports torch. This module is the only place allowed to reach upward in the layers.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path
from typing import Any

import typer

from avsim.core.atomic import OUTPUT_ERRNO_REASONS
from avsim.core.errors import AvsimError, AvsimWarning

# command name -> (module, merge). merge=True adds the module's commands at top level
# (e.g. `avsim render`); merge=False mounts the module's app as a group (e.g. `avsim eval fid`).
LAZY_COMMANDS: dict[str, tuple[str, bool]] = {
    "render": ("avsim.edit.cli", True),
    "labels": ("avsim.render.cli", True),
    "labels-convert": ("avsim.render.cli", True),
    "labels-mmdet3d": ("avsim.render.cli", True),
    "generate": ("avsim.models.cli", True),
    "eval": ("avsim.evaluation.cli", False),
    "train": ("avsim.train.cli", False),
    "edit": ("avsim.edit.cli", True),
    "diff": ("avsim.edit.cli", True),
    "preview": ("avsim.edit.cli", True),
    "export-scene": ("avsim.edit.cli", True),
    "export": ("avsim.cli.export", False),
    "validate": ("avsim.edit.cli", True),
    "view": ("avsim.view.cli", True),
    "check-projection": ("avsim.cli.projection", True),
    "sim": ("avsim.sim.cli", True),
    "serve": ("avsim.sim.alpasim.cli", False),
    "run": ("avsim.jobs.cli", False),
}
CORE_MODULE = "avsim.cli.scenario"


def _mount(app: typer.Typer, name: str) -> None:
    """Add the command group of `name` to `app` unless that group is already mounted on it."""
    module_name, merge = LAZY_COMMANDS[name]
    module = importlib.import_module(module_name)
    if any(group.typer_instance is module.app for group in app.registered_groups):
        return  # e.g. `edit`, `diff`, `preview` and `validate` share avsim.edit.cli
    if merge:
        app.add_typer(module.app)
    else:
        app.add_typer(module.app, name=name)


def build_app(argv: list[str] | None = None) -> typer.Typer:
    """Build the CLI, importing only the command group that `argv` asks for (idempotent).

    Args:
        argv: the command line without the program name; `None` or no command mounts every group.

    Returns:
        The core app (`avsim.cli.scenario.app`) with the wanted groups mounted; a group already
        mounted by an earlier call is not mounted twice.
    """
    core = importlib.import_module(CORE_MODULE)
    app: typer.Typer = core.app
    core.app.lazy_commands = tuple(LAZY_COMMANDS)  # a typo of any of them gets "Did you mean ...?"
    first = next((a for a in (argv or []) if not a.startswith("-")), None)
    wanted = [first] if first in LAZY_COMMANDS else ([] if first else list(LAZY_COMMANDS))
    for name in wanted:
        _mount(app, name)
    return app


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; exit codes: 0 success, 1 bad input (or an output that cannot be written), 2 usage error."""
    argv = sys.argv[1:] if argv is None else argv
    with warnings.catch_warnings():
        warnings.simplefilter("always", AvsimWarning)
        default_show = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if issubclass(category, AvsimWarning):  # avsim's own: one `warning: ...` line
                typer.echo(f"warning: {message}", err=True)
            else:
                default_show(message, category, *args, **kwargs)

        warnings.showwarning = show
        return _run(argv)


def _run(argv: list[str]) -> int:
    """`main` without the warning set-up."""
    app = build_app(argv)
    # typer vendors its own click: take its exception classes from typer, not from `click`
    click_exception: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    usage_error: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    try:
        # without standalone mode, click returns a `typer.Exit` code instead of raising it
        result = app(args=argv, prog_name="avsim", standalone_mode=False)
    except AvsimError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    except typer.Exit as exc:  # --help, explicit exits
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except usage_error as exc:
        exc.show()  # type: ignore[attr-defined]
        return 2
    except click_exception as exc:
        exc.show()  # type: ignore[attr-defined]
        return 1
    except OSError as exc:  # a write no library entry point named its output for: still one line
        reason = OUTPUT_ERRNO_REASONS.get(exc.errno or 0)
        if reason is None:
            raise
        where = Path(exc.filename).parent if exc.filename else "output"  # the folder (the file may be a temporary)
        typer.echo(f"error: {where}: {reason}", err=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
