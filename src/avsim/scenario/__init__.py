"""The scenario layer: the `Scenario` container, the native on-disk format (`avsim.scenario.io`),
the dataset importers (`avsim.scenario.importers`) and the embedded sample (`avsim.scenario.sample`).
Built on `avsim.core` and `avsim.maps`."""

from avsim.scenario.types import Scenario

__all__ = ["Scenario"]
