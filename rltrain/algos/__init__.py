"""Algorithms: one file each (class, build), sharing small functions in base; their config
dataclasses live apart in `configs/`, which imports no torch."""
