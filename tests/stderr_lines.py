"""What a failed command printed on stderr, read the way a user reads it under any load.

A command that fails prints exactly one `error: ...` line, last, and no traceback. Before it, a
step that took over ~2 s may have printed progress (`export-scene: 10/40 time steps`, a bar's last
state) and a warning may have said something: on a loaded machine any step can be slow, so tests
never count those lines (`error_line`).
"""

from __future__ import annotations


def error_line(err: str) -> str:
    """The one `error:` line of `err`.

    Args:
        err: the command's stderr.

    Returns:
        The line; AssertionError when there is none, more than one, it is not the last line, or a traceback was printed.
    """
    lines = [line for line in err.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert "Traceback" not in err, err
    assert len(errors) == 1 and errors[0] == lines[-1], err
    return errors[0]
