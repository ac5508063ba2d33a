"""Scenario exporters: avsim scenarios written in other tools' formats (`clipgt`: NVIDIA's parquet clips)."""
