"""Distributed post-training of the multi-view Transfer model."""
