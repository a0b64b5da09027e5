"""Where a run trains and what it continues: the run folder claimed and locked, what `resume=`
continues found and its config checked, and the folders of seed batches read. Used alike by the
command line, `rltrain.train()`, sweeps and torchrun's ranks, before anything trains; it builds
no run (the Runner and the seed batch read it, never the other way round).

    argv.py               an override list: its overrides, the value of one, Hydra's quoting, multirun
    claim.py              the run folder a command line writes to: claimed, writable, room on the disk
    lock.py               who may write into a run folder: its `.lock`, finished and failed starts
    find.py               what `resume=` continues: its folder, its run's choices, its checked config
    resume_checkpoint.py  the checkpoint file `resume=` names (imports torch: only when resuming)
    resume_rules.py       the config rules of `resume=`: the overrides a resumed run may take
    batch.py              a seed batch's folder: its seeds, what `resume=<batch>` continues (no torch)
    batch_state.py        each seed of a batch folder, for a resume: to train, complete or failed
"""
