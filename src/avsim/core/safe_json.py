"""JSON from untrusted files: bounded in size and nesting, errors as one line naming the file.

`json.loads` of a file someone else wrote can exhaust memory (a multi-GB file) or raise
RecursionError (200,000 nested brackets), which would surface as a traceback. `read_json`
checks the size first and turns every decoding problem into `AvsimInputError(path, field,
reason)`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.core.safe_files import regular_file

MAX_JSON_BYTES = 1024**3  # larger than any label, result or map file avsim reads (OpenLane: ~1 MB each)


def loads_json(text: str | bytes, source: str | os.PathLike[str], field: str = "json") -> Any:
    """Parse JSON text; errors name `source` and `field`.

    Args:
        text: the document.
        source: the file (or option) it came from, for the message.
        field: the field named in the message.

    Returns:
        the decoded value.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise AvsimInputError(source, field, "nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise AvsimInputError(source, field, f"not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise AvsimInputError(source, field, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:
        raise AvsimInputError(source, field, f"invalid JSON: {exc}") from None


def read_json(path: str | os.PathLike[str], field: str = "json", max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read and parse a JSON file, refusing files over `max_bytes`.

    Args:
        path: the file.
        field: the field named in error messages.
        max_bytes: the largest file accepted.

    Returns:
        the decoded value.
    """
    p = regular_file(path, "file")  # a FIFO or device is named, never opened
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise AvsimInputError(p, field, f"{size} bytes, more than the {max_bytes} a JSON input may have")
        data = p.read_bytes()
    except OSError as exc:
        raise AvsimInputError(p, "file", f"cannot read: {exc.strerror or exc}") from None
    return loads_json(data, p, field)
