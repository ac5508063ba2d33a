"""Alias of `avsim.core.rig`, kept so existing `avsim.rig` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.rig`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.rig import *  # noqa: F403
