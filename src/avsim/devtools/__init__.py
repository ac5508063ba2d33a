"""Maintainer tools that import nothing from the rest of avsim (`python -m avsim.devtools.sizes`)."""
