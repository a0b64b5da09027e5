"""The algorithms' config dataclasses, one module per algorithm beside `algos/<name>.py`.

They import no torch: composing, validating and `rltrain --help` read them without paying for
the algorithms (`rltrain.config.registry` imports an algorithm module only when a run builds one).
"""
