"""safetensors files from anyone: a corrupt or hostile header is one line naming the file.

safetensors never runs code, but its reader raises its own `SafetensorError` (or
`OSError`/`ValueError`) on a damaged file, which would surface as a traceback. torch is
imported only when a file is read (the core layer has no torch at import).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError


def load_safetensors(path: str | os.PathLike[str]) -> dict[str, Any]:
    """All tensors of a `.safetensors` file on the CPU.

    Args:
        path: the file.

    Returns:
        name -> torch.Tensor (typed Any here: the core layer has no torch at import).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    p = Path(path)
    if not p.is_file():
        raise AvsimInputError(p, "file", "not found")
    try:
        return load_file(str(p))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AvsimInputError(p, "safetensors", f"not a readable safetensors file: {first}") from None
