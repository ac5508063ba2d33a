"""AlpaSim wire compatibility: avsim as an AlpaSim driver host and as its sensor simulator (docs/closed_loop.md)."""
