"""The `avsim` command line: `main` is the console entry point (see `avsim.cli.main`)."""

from avsim.cli.main import build_app, main

__all__ = ["build_app", "main"]
