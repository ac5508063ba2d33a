"""Error types. Every user-facing failure is one of these, with a one-line message."""

from __future__ import annotations


class AvsimError(Exception):
    """Base class of avsim's user-facing errors."""


class AvsimValueError(AvsimError, ValueError):
    """An in-memory value is invalid; the message names the field."""


class AvsimInputError(AvsimError):
    """A bad input file: names the file and the field.

    `str(error)` is one line: ``"<path>: <field>: <reason>"``.
    """

    def __init__(self, path: object, field: str, reason: str) -> None:
        """Args:
            path: the bad file or folder (anything with a str).
            field: the field, column or key at fault.
            reason: what is wrong (folded onto one line).
        """
        self.path = str(path)
        self.field = field
        self.reason = " ".join(str(reason).split())  # one line, always
        super().__init__(f"{self.path}: {field}: {self.reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        # pickled as its three fields (not `args`), so it crosses process pools intact
        return type(self), (self.path, self.field, self.reason)


class AvsimOutputError(AvsimError):
    """An output that cannot be written (disk full, read-only, another writer): names the output.

    `str(error)` is one line: ``"<path>: <reason>"`` (e.g. ``"OUT: disk full"``).
    """

    def __init__(self, path: object, reason: str) -> None:
        """Args:
            path: the output file or folder (anything with a str).
            reason: what is wrong (folded onto one line).
        """
        self.path = str(path)
        self.reason = " ".join(str(reason).split())
        super().__init__(f"{self.path}: {self.reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.path, self.reason)


ALLOW_TRUNCATED_ENV = "AVSIM_ALLOW_TRUNCATED"  # "1" (`avsim --allow-truncated`): read what a truncated video holds, warned


class AvsimWarning(UserWarning):
    """A notice for the user (the CLI prints it as one `warning: ...` line on stderr)."""


class TruncatedMediaWarning(AvsimWarning):
    """Frames were read from a video that ended before its container's frame count (`--allow-truncated`)."""
