"""Configuration: from a command line (or a Python override list) to a validated `TrainConfig`.

    schema.py      the run-level dataclasses (the one source of each field's type and default)
    store.py       Hydra's ConfigStore: the schemas, and the env / tuned options a line names
    overrides.py   overrides checked before Hydra runs (one line naming the bad part)
    hydra_texts.py the wording of Hydra's errors that those one-line explanations read
    compose.py     the one way from overrides to a validated `TrainConfig`
    validation.py  cross-field checks of a composed config (or a checkpoint's plain dict)
    catalog.py     what is on offer, without torch: algorithm traits, presets, extras
    registry.py    the algorithm table: name -> config class, builder, traits
"""
