"""The one set-up of the compiled (numba) kernels: every kernel module decorates with these.

All kernels compile with the same options: cached on disk (`cache=True`: the first run compiles,
later runs load), no GIL (`nogil`), IEEE arithmetic without reassociation (`fastmath=False`:
results equal numpy's to the last bit where the kernels restate numpy), no bounds checks.

- `njit`: a kernel.
- `njit_inline`: a small helper inlined into its callers.
- `njit_vec`: numpy's float error model (x / 0 gives inf or nan instead of raising), for
  branch-free loops that vectorise.
"""

from __future__ import annotations

from typing import Any

import numba

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": False, "boundscheck": False}

njit = numba.njit(**_OPTIONS)
njit_inline = numba.njit(**_OPTIONS, inline="always")
njit_vec = numba.njit(**_OPTIONS, error_model="numpy")
