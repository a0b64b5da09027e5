"""Checkpoints and run folders: what rltrain writes to disk, and how it reads it back.

    format.py        a checkpoint file: a plain dict of tensors and plain data, verified,
                     written atomically (temp + rename), loaded with `weights_only=True`
    payload.py       the payload schema: what each field holds, checked on every load
    checksum.py      SHA-256 of a payload: written by save, checked by load (damage is refused)
    legacy_numpy.py  reading rltrain 0.1 checkpoints that hold numpy scalars
    run_dir.py       `RunDir`: the name of every file and folder in a run folder
"""
