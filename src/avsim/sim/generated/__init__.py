"""Closed loop with the generated world: camera frames generated chunk by chunk from the policy's driving (docs/closed_loop.md)."""
