"""Hydra config package (YAML only)."""
