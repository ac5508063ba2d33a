"""Alias of `avsim.core.cameras`, kept so existing `avsim.cameras` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.cameras`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.cameras import *  # noqa: F403
