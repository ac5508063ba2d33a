"""avsim: world-scenario control videos, multi-view generation and evaluation for AV simulation."""

__version__ = "0.1.0"
