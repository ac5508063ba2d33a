"""Alias of `avsim.core.lights`, kept so existing `avsim.lights` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.lights`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.lights import *  # noqa: F403
