"""The core layer: transforms, cameras, rigs, ego trajectory, agent tracks, light states,
errors, atomic writes and video I/O. Imports nothing else from avsim (numpy, scipy, av only)."""
