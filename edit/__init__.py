"""Declarative scenario editing, validation and diff."""
