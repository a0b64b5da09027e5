"""Sweeps: Hydra runs the jobs; this package adds what rltrain needs around them.

    plugins.py  one clear line when a sweeper or launcher plugin is missing (the extra to install)
    search.py   the `+hpo=` search this process runs: its study's lock, its stop handling
    study.py    the Optuna study: `ResumeStudy` (an interrupted search continues it), trial values
    trial.py    a trial's job: K seeds in turn, their records, fair torch thread counts
"""
