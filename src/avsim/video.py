"""Alias of `avsim.core.video`, kept so existing `avsim.video` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.video`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.video import *  # noqa: F403
