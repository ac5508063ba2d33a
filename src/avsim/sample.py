"""Alias of `avsim.scenario.sample`, kept so existing `avsim.sample` imports work (docs/core_api.md, "Moved names").

New code imports `avsim.scenario.sample`; avsim's own modules never import this alias (tests/test_layering.py).
"""

from avsim.scenario.sample import *  # noqa: F403
