"""avsim: world-scenario control videos, multi-view generation and evaluation for AV simulation.

The package root holds only packages (tests/test_layering.py); modules that moved from it or
elsewhere keep their old import paths through `avsim.core.moved`.
"""

from avsim.core import moved as _moved

__version__ = "0.1.0"

_moved.install()
