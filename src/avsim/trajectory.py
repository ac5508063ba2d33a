"""Alias of `avsim.core.trajectory`, kept so existing `avsim.trajectory` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.trajectory`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.trajectory import *  # noqa: F403
