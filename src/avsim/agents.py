"""Alias of `avsim.core.agents`, kept so existing `avsim.agents` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.agents`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.agents import *  # noqa: F403
