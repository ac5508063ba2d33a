"""Alias of `avsim.core.atomic`, kept so existing `avsim.atomic` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.core.atomic`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.core.atomic import *  # noqa: F403
