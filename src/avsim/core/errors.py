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
