"""Alias of `avsim.core.errors`, kept so existing `avsim.errors` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.errors`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.errors import *  # noqa: F403
