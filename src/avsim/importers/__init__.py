"""Alias of `avsim.scenario.importers`, kept so existing `avsim.importers.*` imports work."""
