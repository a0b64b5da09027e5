"""Where a job trains and what it continues, read from its override list before anything starts;
used by every entry point (the command line, `rltrain.train()`, torchrun's ranks).

    argv.py     an override list: its overrides, the value of one, Hydra's quoting, multirun
    folder.py   the run folder a command line writes to: claimed, writable, room on the disk
    resume.py   what `resume=` continues: its folder, its run's choices, its checked config
"""
