"""``torchrun --nproc-per-node N -m avsim.train CONFIG [--set k=v ...]`` = ``avsim train run``.

Every process torchrun starts runs this; the process group comes from torchrun's environment.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import click

    from avsim.core.errors import AvsimError
    from avsim.train.cli import app

    argv = sys.argv[1:] if argv is None else argv
    try:
        app(args=["run", *argv], prog_name="python -m avsim.train", standalone_mode=False)
    except AvsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except click.exceptions.UsageError as exc:
        exc.show()
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
