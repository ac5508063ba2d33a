"""Importers from real driving datasets into the avsim scenario model."""
