"""Dataset-scale jobs: `avsim run render|labels|convert|eval DATASET OUT` on a local process pool or on Ray (docs/jobs.md)."""
