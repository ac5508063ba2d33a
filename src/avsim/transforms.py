"""Alias of `avsim.core.transforms`, kept so existing `avsim.transforms` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.transforms`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.transforms import *  # noqa: F403
