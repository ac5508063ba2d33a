"""Alias of `avsim.scenario.importers.registry`, kept so existing imports work (docs/core_api.md).

New code imports `avsim.scenario.importers.registry`; avsim's own modules never import this alias.
"""

from avsim.scenario.importers.registry import *  # noqa: F403
