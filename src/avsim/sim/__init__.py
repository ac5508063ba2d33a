"""Closed-loop simulation: a driving policy acts in an avsim scenario (docs/closed_loop.md)."""
