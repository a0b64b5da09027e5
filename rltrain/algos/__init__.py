"""Algorithms: one file each (config dataclass, class, build), sharing small functions in base."""
