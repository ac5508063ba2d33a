"""Alias of `avsim.scenario.io`, kept so existing `avsim.io` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.scenario.io`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.scenario.io import *  # noqa: F403
